"""Build the course as a website with Jupyter Book 2 (MyST), from executed copies of the notebooks.

    ./course site                        # each page from a GPU record of its current code; the others executed here
    ./course site --strict               # the same, but fail when a page has no GPU record of its current code
    ./course site --here                 # execute every chapter notebook here (simulator without a GPU)
    ./course site --executed DIR         # use executed notebooks from elsewhere, all of them
    python book/build.py --help

The source notebooks keep no outputs, so the site is built from executed copies. By default a page
shows the outputs of the newest GPU record that holds its notebook's current code,
`measurements/gpu_ci/<date>_<gpu>/executed/` (chapter folders inside, filed by `tools/gpu_ci.py file`);
chapter 4's pages only from a record of 2 or more GPUs. Every other chapter notebook waits for a
record: it is executed here (in this machine's mode: the simulator without a GPU), in parallel, into
book/_build/executed/ (reused while its notebook is unchanged), and its page says so in a warning at
its top; the log names every record used and every waiting page; `--strict` fails on them instead.
`--here` executes every notebook here; `--executed DIR` takes all of them from DIR, laid out as
chapters/ is (DIR/02_metrics/03_bandwidth.ipynb), each matching its source notebook's code.
`--records DIR` reads the records from DIR instead of measurements/ (for tests).

Chapters are discovered from chapters/ (every NN_name/ folder and its notebooks, in order), so a new
chapter needs no change here. The site holds the chapter notebooks, the exercise notebooks they link
to, the then-and-now report (measurements/thenandnow/report.md, merged by chapter) and one Records
page whose table (date, GPU, what it holds) reaches every measurement record; the records stay out of
the sidebar. Jupyter Book 2 builds the pages' content; book/theme/render.py writes them as static
HTML (no theme download, no network). Then every internal link and image of the built site is
checked: a broken one fails the build.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
BUILD = BOOK / "_build"
TITLE = "GPU Programming in Python"


class SiteError(RuntimeError):
    """The site cannot be built as asked; the message says what to change."""


# -- what the site holds ------------------------------------------------------------------------------
def chapters(root: Path = ROOT) -> list[tuple[Path, list[Path]]]:
    """Every chapter folder of chapters/ (NN_name) with its notebooks, in order."""
    found = []
    for folder in sorted((root / "chapters").iterdir()):
        notebooks = sorted(folder.glob("*.ipynb"))
        if folder.is_dir() and re.match(r"^\d+_", folder.name) and notebooks:
            found.append((folder, notebooks))
    return found


#: Words a chapter folder's name spells in lower case that a title spells otherwise.
SPELLED = {"gpu": "GPU", "fft": "FFT", "cuda": "CUDA", "mpi": "MPI", "multi gpu": "Multi-GPU", "monte carlo": "Monte Carlo"}


def chapter_title(folder: Path, root: Path = ROOT) -> str:
    """A chapter's title as the README's table of chapters gives it ('4. Multi-GPU programming'), else from its folder's name."""
    readme = root / "README.md"
    if readme.exists():
        found = re.search(rf"^\|\s*(\d+\.\s[^|]+?)\s*\|\s*`{re.escape(folder.name)}/`", readme.read_text(encoding="utf-8"), re.M)
        if found:
            return found.group(1)
    number, _, name = folder.name.partition("_")
    words = name.replace("_", " ")
    for lower, spelled in sorted(SPELLED.items(), key=lambda item: -len(item[0])):
        words = re.sub(rf"\b{lower}\b", spelled, words)
    return f"{int(number)}. {words[:1].upper()}{words[1:]}"


def code_of(notebook: dict) -> list[str]:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in notebook["cells"] if c["cell_type"] == "code"]


def fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- where each page's outputs come from --------------------------------------------------------------
@dataclass(frozen=True)
class GpuRecord:
    """A recorded GPU run of the chapter notebooks: measurements/gpu_ci/<date>_<gpu>/, its executed copies in executed/."""

    folder: Path
    gpu: str
    driver: str | None
    date: str
    executed_as: str | None = None
    gpus: int = 1  # the GPUs its notebooks could use (gpus_visible; older records: gpu_count)

    @property
    def executed(self) -> Path:
        return self.folder / "executed"

    def describe(self) -> str:
        """'NVIDIA H200, driver 570.124.06, 2026-11-25' ('4 x NVIDIA H100 ...' for a run that used several GPUs)."""
        gpu = f"{self.gpus} x {self.gpu}" if self.gpus > 1 else self.gpu
        return ", ".join([gpu, *([f"driver {self.driver}"] if self.driver else []), self.date]) + (
            f" ({self.executed_as})" if self.executed_as else "")


def _find_key(data, names: tuple[str, ...]) -> str | None:
    """The first string value under one of `names` in a JSON record, searched breadth-first."""
    queue = [data]
    while queue:
        item = queue.pop(0)
        if isinstance(item, dict):
            for name in names:
                value = item.get(name)
                if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
                    return str(value).strip()
            queue += [v for v in item.values() if isinstance(v, (dict, list))]
        elif isinstance(item, list):
            queue += [v for v in item if isinstance(v, (dict, list))]
    return None


def banner_device(notebook: dict) -> str | None:
    """The GPU an executed notebook ran on, from its banner ('GPU MODE: kernels run on NAME.'); None for the simulator."""
    for cell in notebook.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            texts = [out.get("text", "")] + list((out.get("data") or {}).values())
            for text in texts:
                text = "".join(text) if isinstance(text, list) else str(text)
                found = re.search(r"GPU MODE: kernels run on (.+?)\.(?:\s|<|$)", text)
                if found:
                    return html.unescape(found.group(1))
    return None


def record_of(folder: Path) -> GpuRecord:
    """The recorded GPU run in `folder` (gpu_ci/<date>_<gpu>/): GPU and driver from its gpu_ci.json, else from a banner and the name."""
    meta = json.loads((folder / "gpu_ci.json").read_text()) if (folder / "gpu_ci.json").exists() else {}
    gpu = _find_key(meta, ("gpu", "gpu_name", "device", "device_name"))
    if gpu is None:
        first = next(iter(sorted(folder.glob("executed/*/*.ipynb"))), None)
        gpu = banner_device(json.loads(first.read_text())) if first else None
    driver = _find_key(meta, ("driver", "driver_version", "nvidia_driver"))
    date = (_find_key(meta, ("date",)) or folder.name)[:10]
    gpus = meta.get("gpus_visible", meta.get("gpu_count")) or 1
    return GpuRecord(folder, gpu or folder.name.split("_", 1)[-1], driver, date, meta.get("executed_as"), int(gpus))


def gpu_records(records: Path = ROOT / "measurements") -> list[GpuRecord]:
    """Every recorded GPU run with executed notebooks under records/gpu_ci/, the newest first."""
    runs = sorted((p for p in (records / "gpu_ci").glob("*") if re.match(r"^\d{4}-\d{2}-\d{2}_", p.name) and (p / "executed").is_dir()),
                  key=_recorded_at, reverse=True)
    return [record_of(run) for run in runs]


def gpu_record(records: Path = ROOT / "measurements") -> GpuRecord | None:
    """The newest recorded GPU run with executed notebooks under records/gpu_ci/, or None."""
    found = gpu_records(records)
    return found[0] if found else None


def _recorded_at(folder: Path) -> tuple[str, str]:
    """When a GPU record was made: its date (the name starts with it), then the start of its last call (two runs of one day)."""
    meta = json.loads((folder / "gpu_ci.json").read_text()) if (folder / "gpu_ci.json").exists() else {}
    calls = [call.get("started") or "" for call in meta.get("calls", [])]
    return folder.name[:10], max(calls, default="")


#: Chapters whose pages are shown only from a run on two or more GPUs (a run on one would show a split over one device).
MULTI_GPU_CHAPTERS = frozenset({"04_multi_gpu"})


@dataclass(frozen=True)
class Source:
    """Where one page's outputs come from: an executed copy, the note the page opens with, and the GPU record it is from."""

    executed: Path
    note: str
    gpu: bool
    record: GpuRecord | None = None

    @property
    def waiting(self) -> bool:
        """True for a page no GPU record of its current code serves (it waits for one)."""
        return self.record is None


def candidates_for(chapter: Path, records: list[GpuRecord]) -> list[GpuRecord]:
    """The records a chapter's pages may come from, in order of preference: the newest first; for the multi-GPU chapter
    only runs of 2 or more GPUs, the most GPUs first."""
    if chapter.name in MULTI_GPU_CHAPTERS:
        return sorted((r for r in records if r.gpus >= 2), key=lambda r: -r.gpus)
    return list(records)


def current_record(chapter: Path, source: Path, records: list[GpuRecord]) -> GpuRecord | None:
    """The record that serves a chapter notebook's page: the first candidate holding a current, error-free copy of its code."""
    code = code_of(json.loads(source.read_text()))
    return next((r for r in candidates_for(chapter, records) if is_current(r.executed / chapter.name / source.name, code)), None)


def waiting_pages(chapters_found: list[tuple[Path, list[Path]]], records: list[GpuRecord]) -> list[Path]:
    """Every chapter notebook that no GPU record of its current code serves (chapter 4's: none of 2 or more GPUs)."""
    return [source for chapter, notebooks in chapters_found for source in notebooks if current_record(chapter, source, records) is None]


def sources(chapters_found: list[tuple[Path, list[Path]]], record: GpuRecord | list[GpuRecord] | None, here: Path | None,
            records_link: str) -> dict[Path, Source]:
    """For every chapter notebook, the executed copy a page shows and its note: the newest GPU record that holds a current copy
    of it (a record of one chapter, say on several GPUs, serves that chapter's pages), else `here`, with a note that says
    the page waits for a GPU record and why."""
    chosen = {}
    newest_first = record if isinstance(record, list) else [record] if record is not None else []
    for chapter, notebooks in chapters_found:
        candidates = candidates_for(chapter, newest_first)
        several = chapter.name in MULTI_GPU_CHAPTERS
        for source in notebooks:
            link = f"../../{records_link}"  # from chapters/NN_name/ to the repository root
            current = current_record(chapter, source, newest_first)
            if current is not None:
                own = current.folder / "gpu_ci.md"  # the record's own page where it is one of the repository's
                record_link = f"../../{own.relative_to(ROOT).as_posix()}" if own.exists() and own.is_relative_to(ROOT) else link
                chosen[source] = Source(current.executed / chapter.name / source.name,
                                        f"**Outputs recorded on a GPU**: {current.describe()} ([its record]({record_link}); "
                                        f"[every record]({link})). "
                                        "Run the notebook to get your own GPU's.", True, current)
                continue
            if here is None:
                continue
            newest = candidates[0] if candidates else None
            recorded = newest.executed / chapter.name / source.name if newest else None
            copy_of_record = json.loads(recorded.read_text()) if recorded is not None and recorded.exists() else None
            stopped = copy_of_record is not None and ran_into_an_error(copy_of_record)
            held = ("a run of it that stopped at an error" if stopped else "older code of this notebook" if copy_of_record is not None
                    else "no copy of it")
            kind = "GPU record of 2 or more GPUs" if several else "GPU record"
            why = (f"the newest {kind} ({newest.date}) holds {held}" if newest is not None
                   else f"no {kind} is filed" + (" (this chapter is shown only from a run on several GPUs)" if several else ""))
            copy = here / chapter.name / source.name
            device = banner_device(json.loads(copy.read_text())) if copy.exists() else None
            waiting = f"{why[:1].upper()}{why[1:]}. "  # the box's title says that the page waits for a GPU record
            if device:
                note = waiting + f"These outputs come from this build's machine, {device}, executed when the site was built."
            else:
                note = (waiting + "**Simulator build**: these outputs come from Numba's CUDA simulator, without a GPU. Its times "
                        "are those of Python threads at tiny sizes, so rates and speed-ups are not measured here; the "
                        f"[GPU records]({link}) hold a GPU's.")
            chosen[source] = Source(copy, note, bool(device))
    return chosen


def is_current(executed: Path, code: list[str]) -> bool:
    """True if `executed` exists, ran without an error, and holds exactly `code` (the notebook's code cells now)."""
    if not executed.exists():
        return False
    notebook = json.loads(executed.read_text())
    return not ran_into_an_error(notebook) and code_of(notebook) == code


def ran_into_an_error(notebook: dict) -> bool:
    """True if an executed copy holds an error output (the run stopped there: its page would show a half-run notebook)."""
    return any(output.get("output_type") == "error" for cell in notebook.get("cells", []) for output in cell.get("outputs", []))


# -- executed copies ----------------------------------------------------------------------------------
def execute(source: Path, target: Path, timeout: int) -> str:
    """Run one notebook top to bottom (in its own folder) and save the executed copy; return a line for the log."""
    import time

    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    started = time.monotonic()
    notebook = nbformat.read(source, as_version=4)
    # The kernel talks over Unix sockets named after its connection file (transport "ipc"), not TCP ports:
    # jupyter_client picks free ports, closes them and hands them to the kernel, so two kernels started at
    # once (two notebooks here, nbval beside them in CI) can be given the same port, and a client then waits
    # on a kernel that is not its own until the time limit.
    # iopub_timeout: on a loaded machine a cell's last output can come seconds after its reply, and nbclient's
    # cancelled wait for it (after 4 s by default) has been seen to hang the run; shutdown "immediate": the
    # kernel is killed once the last cell is done (no interrupt, no graceful wait)
    with tempfile.TemporaryDirectory(prefix="gpucourse-kernel-") as sockets:  # an absolute path: the kernel runs elsewhere
        kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel"))
        NotebookClient(notebook, km=kernel, timeout=timeout, iopub_timeout=timeout, shutdown_kernel="immediate",
                       resources={"metadata": {"path": str(source.parent)}}).execute()
    notebook.metadata["gpucourse_site"] = {"source_sha256": fingerprint(source)}
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return f"executed {source.relative_to(ROOT)} in {time.monotonic() - started:.0f} s"


def executed_here(jobs: int, timeout: int, only: set[Path] | None = None) -> Path:
    """Execute every chapter notebook (or those in `only`) not already executed from its current source; return the folder."""
    folder = BUILD / "executed"
    folder.mkdir(parents=True, exist_ok=True)
    with open(BUILD / "executed.lock", "w") as lock:  # a second build at once waits, then finds the copies current
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _execute_stale(folder, jobs, timeout, only)


def _execute_stale(folder: Path, jobs: int, timeout: int, only: set[Path] | None) -> Path:
    todo = []
    for chapter, notebooks in chapters():
        for source in notebooks:
            if only is not None and source not in only:
                continue
            target = folder / chapter.name / source.name
            if target.exists():
                stored = json.loads(target.read_text()).get("metadata", {}).get("gpucourse_site", {})
                if stored.get("source_sha256") == fingerprint(source):
                    continue
            todo.append((source, target))
    if todo:
        print(f"executing {len(todo)} notebook(s), {jobs} at a time ...", flush=True)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            failures = [line for line in pool.map(lambda job: execute_in_child(*job, timeout), todo) if line]
        if failures:
            raise SiteError("notebook(s) failed to execute:\n" + "\n".join(failures))
    return folder


def execute_in_child(source: Path, target: Path, timeout: int, tries: int = 2) -> str:
    """Execute one notebook in a child process with a wall-clock limit, once more if that run hangs; '' on success."""
    limit = timeout  # for the whole notebook (the slowest takes about a minute here, under a minute on a GPU)
    for attempt in range(1, tries + 1):
        try:
            done = subprocess.run([sys.executable, __file__, "--execute-one", str(source), str(target), "--timeout", str(timeout)],
                                  capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired as timed_out:  # the kernel exits with its parent (ipykernel watches it)
            said = "".join(text.decode(errors="replace") if isinstance(text, bytes) else text
                           for text in (timed_out.stdout, timed_out.stderr) if text).strip()
            print(f"{source.relative_to(ROOT)}: no result after {limit} s (attempt {attempt} of {tries})"
                  + (f"; it said:\n{said[-1500:]}" if said else ""), flush=True)
            continue
        if done.returncode == 0:
            print(done.stdout.strip().splitlines()[-1], flush=True)
            return ""
        return f"{source.relative_to(ROOT)}:\n{(done.stdout + done.stderr)[-3000:]}"
    return f"{source.relative_to(ROOT)}: no result after {tries} attempts of {limit} s"


def check_executed(folder: Path) -> list[str]:
    """Problems with a folder of executed notebooks: missing ones, ones without outputs, ones whose code differs, ones that stopped at an error."""
    problems = []
    for chapter, notebooks in chapters():
        for source in notebooks:
            copy = folder / chapter.name / source.name
            if not copy.exists():
                problems.append(f"{copy} is missing (executed copy of {source.relative_to(ROOT)})")
                continue
            executed = json.loads(copy.read_text())
            if code_of(executed) != code_of(json.loads(source.read_text())):
                problems.append(f"{copy} was executed from other code than {source.relative_to(ROOT)}: execute it again")
            elif not any(cell.get("outputs") for cell in executed["cells"] if cell["cell_type"] == "code"):
                problems.append(f"{copy} has no outputs: is it an executed copy?")
            elif ran_into_an_error(executed):
                problems.append(f"{copy} stopped at an error (its page would show half a notebook): execute it again")
    return problems


# -- the MyST project ---------------------------------------------------------------------------------
def link_folders_to_first_notebooks(notebook: dict, where: Path) -> dict:
    """Markdown links to a chapter folder point at its first notebook (a site has no folder pages)."""
    def fix(match: re.Match) -> str:
        target = match.group(2)
        path = (where / target).resolve()
        if not target.startswith(("http:", "https:", "#")) and path.is_dir() and sorted(path.glob("*.ipynb")):
            first = sorted(path.glob("*.ipynb"))[0].name
            return f"{match.group(1)}({target.rstrip('/')}/{first})"
        return match.group(0)

    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = re.sub(r"(\[[^\]]*\])\(([^)\s#]+)\)", fix, text)
    return notebook


#: Numba's warning at a launch of fewer blocks than the GPU has SMs, as it reaches a notebook's stderr (two lines).
OCCUPANCY_WARNING = re.compile(r"^.*NumbaPerformanceWarning: (?:\x1b\[1m)?Grid size \d+ will likely result in GPU under-utilization "
                               r"due to low occupancy\.(?:\x1b\[0m)?\n(?:\s*warn\(errors\.NumbaPerformanceWarning\(msg\)\)\n?)?", re.M)


def without_occupancy_warnings(notebook: dict) -> dict:
    """The notebook without Numba's low-occupancy warnings in its stderr outputs (a page is no place for a tiny demo grid's hint)."""
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = OCCUPANCY_WARNING.sub("", "".join(out["text"]) if isinstance(out["text"], list) else out["text"])
                if not text.strip():
                    continue
                out = {**out, "text": text}
            kept.append(out)
        cell["outputs"] = kept
    return notebook


def markdown_of(path: Path) -> list[str]:
    """The markdown text of a staged page: the file itself, or a notebook's markdown cells."""
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells if c["cell_type"] == "markdown"]


def copy_linked_files(stage_dir: Path, root: Path = ROOT) -> list[Path]:
    """Copy into the stage every repository file a page links to that is not a page (a screenshot, a log, a script).

    The stage mirrors the repository's layout (its index.md stands for README.md), so a link that
    works in the repository works on the site: MyST publishes such files as downloads.
    """
    copied = []
    for page in sorted([*stage_dir.rglob("*.md"), *stage_dir.rglob("*.ipynb")]):
        for text in markdown_of(page):
            text = re.sub(r"`[^`]*`", "", text)  # code spans are not links
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue
                staged = (page.parent / unquote(target)).resolve()
                source = (root / page.parent.relative_to(stage_dir) / unquote(target)).resolve()
                if not staged.exists() and source.is_file() and source.is_relative_to(root) and staged.is_relative_to(stage_dir):
                    staged.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(source, staged)
                    copied.append(staged)
    return copied


def then_and_now_page(records: Path = ROOT / "measurements") -> str:
    """The page of the recorded then-and-now report (`python -m gpucourse report`, records/thenandnow/report.md)."""
    folder = records / "thenandnow"
    recorded = folder / "report.md"
    lines = ["# Then and now: the book's GPUs beside today's", ""]
    if not recorded.exists():
        return "\n".join(lines + ["No report is recorded yet: `python -m gpucourse report --out measurements/thenandnow` on a GPU "
                                  "writes one (report.md, report.html, report.json)."])
    meta = json.loads((folder / "report.json").read_text()).get("meta", {}) if (folder / "report.json").exists() else {}
    where = ", ".join(str(meta[key]) for key in ("device", "date") if meta.get(key)) or "a GPU"
    lines += [f"The report below is the output of `python -m gpucourse report`, recorded on {where}: each quantity with the "
              "book's figure and its GPU, and what this GPU measured in the same run against its own ceilings. The "
              "[records](records.md) list each GPU run with its driver, date and command; run the "
              "same command on your own GPU to get yours."]
    if (folder / "report.html").exists():
        lines += ["", "The same report as one page, with its plots: [report.html](measurements/thenandnow/report.html)."]
    text = recorded.read_text(encoding="utf-8")
    body = text.split("\n", 1)[1] if text.startswith("# ") else text  # the page has its own title
    return "\n".join(lines) + "\n" + body.replace("\n# ", "\n## ")


def with_note(notebook: dict, note: str, warning: bool = False) -> dict:
    """The notebook with `note` (where its outputs come from) in a box right under its title (a warning box for a page that
    waits for a GPU record)."""
    kind, heading = ("warning", "No GPU record of this code yet") if warning else ("note", "Outputs on this page")
    box = f"\n\n:::{{{kind}}} {heading}\n{note}\n:::\n\n"
    cells = notebook["cells"]
    first = next((c for c in cells if c["cell_type"] == "markdown"), None)
    text = "" if first is None else ("".join(first["source"]) if isinstance(first["source"], list) else first["source"])
    title = re.match(r"#[^#\n][^\n]*\n?", text)
    if title:
        first["source"] = text[:title.end()].rstrip("\n") + box + text[title.end():].lstrip("\n")
    else:
        cells.insert(0, {"cell_type": "markdown", "metadata": {}, "source": box.strip() + "\n"})
    return notebook


def _toc_entries(toc: list[dict]) -> list[dict]:
    """Every entry of a table of contents that names a file, its groups' children included."""
    found = []
    for entry in toc:
        if "file" in entry:
            found.append(entry)
        found += _toc_entries(entry.get("children", []))
    return found


def markdown_title(path: Path) -> str | None:
    """The first level-1 heading of a Markdown page, or None."""
    found = re.search(r"^#\s+(.+?)\s*$", path.read_text(encoding="utf-8"), re.M)
    return found.group(1) if found else None


def title_suffix(relative: str) -> str:
    """What tells a record apart from others of its day: 'measurements/2026-11-22_h100_validation_a.md' -> 'H100 validation a'."""
    path = Path(relative)
    name = path.parent.name if path.stem in ("gpu_ci", "report", "README") else path.stem
    name = re.sub(r"^\d{4}-\d{2}-\d{2}_?", "", name)
    words = [word.upper() if re.fullmatch(r"[a-z]\d{2,4}(x\d)?", word) else word for word in name.split("_") if word]
    return " ".join(words) or path.with_suffix("").as_posix()


def distinct_titles(stage_dir: Path, files: list[str]) -> None:
    """Give Markdown pages that share a title (three 'Course validation, 2026-11-22') the words that tell them apart."""
    titles: dict[str, list[str]] = {}
    for relative in files:
        if relative.endswith(".md") and (stage_dir / relative).exists():
            title = markdown_title(stage_dir / relative)
            if title:
                titles.setdefault(title, []).append(relative)
    for title, shared in titles.items():
        if len(shared) < 2:
            continue
        for relative in shared:
            page = stage_dir / relative
            text = page.read_text(encoding="utf-8")
            page.write_text(re.sub(rf"^#\s+{re.escape(title)}\s*$", f"# {title} ({title_suffix(relative)})", text, count=1, flags=re.M),
                            encoding="utf-8")


def landing_page(book: list[tuple[Path, list[Path]]], root: Path = ROOT, pages: dict[Path, Source] | None = None) -> str:
    """The site's first page: the README, then the site's own table of contents and where its outputs come from."""
    readme = (root / "README.md").read_text(encoding="utf-8")
    # a badge is a remote image, which the build (no network) cannot fetch: on the site it is its link, in words
    readme = re.sub(r"\[!\[([^\]]*)\]\([^)]*\)\]\(([^)]*)\)", r"[\1](\2)", readme)
    lines = [readme.rstrip(), "", "## On this site", ""]
    if pages:
        on_gpu = sum(1 for page in pages.values() if page.gpu)
        used = sorted({page.record for page in pages.values() if page.record is not None}, key=lambda r: r.folder.name)
        waiting = sum(1 for page in pages.values() if page.waiting)
        lines += [f"The chapter pages show the outputs of a GPU run for {on_gpu} of {len(pages)} notebooks"
                  + (f", from {len(used)} record(s): " + "; ".join(r.describe() for r in used) if used else "")
                  + ("" if not waiting else f"; {waiting} wait for a GPU record of their current code and say so at their top")
                  + f". Each page opens with a note naming its source; the [records]({RECORDS_PAGE}) list every GPU run.", ""]
    for chapter, notebooks in book:
        titles = ", ".join(f"[{notebook_title(nb)}](chapters/{chapter.name}/{nb.name})" for nb in notebooks)
        lines.append(f"- **{chapter_title(chapter)}**: {titles}")
    lines += ["- **Exercises**: " + ", ".join(f"[{p.stem}](exercises/{p.name})" for p in sorted((root / "exercises").glob("*.ipynb"))),
              f"- **Measurements**: [then and now](then_and_now.md), [the records of every GPU run]({RECORDS_PAGE})", ""]
    return "\n".join(lines)


#: The one page that reaches every record (a table); the records themselves stay out of the sidebar.
RECORDS_PAGE = "records.md"
#: The title of the table of contents' part that holds the record pages: book/theme/render.py leaves it out of the sidebar.
HIDDEN_PART = "Every record"


def record_row(stage_dir: Path, relative: str, records: Path) -> tuple[str, str, str]:
    """(date, GPU, what it holds) of one record page, from its path, its gpu_ci.json and its title."""
    path = Path(relative)
    text = (stage_dir / relative).read_text(encoding="utf-8")
    title = markdown_title(stage_dir / relative) or (f"Notes of the record {path.parent.name}" if path.stem == "README"
                                                     else f"{path.stem.replace('_', ' ')} ({path.parent.name})")
    named = next((part for part in reversed(path.parts[:-1] + (path.stem,)) if re.match(r"^\d{4}-\d{2}-\d{2}", part)), None)
    dated = (re.search(r"(?<!\d)(20\d\d-\d\d-\d\d)(?!\d)", named or "") or re.search(r"(?<!\d)(20\d\d-\d\d-\d\d)(?!\d)", title)
             or re.search(r"(?:Date|date):?\s*(20\d\d-\d\d-\d\d)", text))
    date = dated.group(1) if dated else "—"
    gpu = None
    meta = records.parent / path.parent / "gpu_ci.json"
    if meta.exists():  # a GPU CI record's folder: its gpu_ci.json names the GPU for each of its pages
        gpu = record_of(meta.parent).describe().split(", driver")[0].split(", 20")[0]
    if gpu is None:
        found = re.search(r"(\d) ?x ?(H100|H200)|(?<![A-Za-z0-9])(H100|H200|A100|T4|L4)s?(?![A-Za-z0-9])|(no GPU)",
                          " ".join([title, relative, text[:600]]), re.I)
        gpu = ("—" if not found else f"{found.group(1)} x NVIDIA {found.group(2).upper()}" if found.group(1)
               else "no GPU" if found.group(4) else f"NVIDIA {found.group(3).upper()}")
    return date, gpu, title


def records_page(stage_dir: Path, files: list[str], records: Path) -> str:
    """The Records page: every record page in a table (date, GPU, what it holds), the newest first."""
    rows = sorted(((*record_row(stage_dir, f, records), f) for f in files), key=lambda row: (row[0] != "—", row[0], row[3]), reverse=True)
    lines = ["# Records", "", "Every GPU run this course relies on, the newest first: its date, its GPU and what it holds. "
             "The [then-and-now report](then_and_now.md) sets the book's figures beside them, and "
             "[measurements/README.md](measurements/README.md) explains how each was made.", "",
             "| date | GPU | what it holds |", "| --- | --- | --- |"]
    for date, gpu, title, relative in rows:
        lines.append(f"| {date.replace('-', chr(0x2011))} | {gpu} | [{title.replace('|', '/')}]({relative}) |")  # a date on one line
    return "\n".join(lines) + "\n"


#: A Python dict of versions as a record once printed it: "{'python': '3.12.3', 'numpy': '2.4.6'}".
VERSIONS_DICT = re.compile(r"^(\s*-\s*versions:\s*)(\{.*\})\s*$", re.M)


def versions_in_words(recorded) -> str:
    """A record's versions as a reader meets them: 'python 3.12.3, numpy 2.4.6', not the Python dict the record holds."""
    import ast

    try:
        found = ast.literal_eval(recorded) if isinstance(recorded, str) else recorded
    except (ValueError, SyntaxError):
        return str(recorded)
    return ", ".join(f"{name} {version}" for name, version in found.items()) if isinstance(found, dict) else str(recorded)


def readable_record(text: str) -> str:
    """A record page as a reader should meet it: versions as words, not a Python dict; issue numbers out of its title; Numba's
    occupancy warnings left out; a run that failed says so at its top, in words."""
    text = VERSIONS_DICT.sub(lambda match: match.group(1) + versions_in_words(match.group(2)), text)
    text = OCCUPANCY_WARNING.sub("", text)  # Numba's occupancy warning is noise in a record's log too
    text = re.sub(r"^(#\s+.*?)\s*\((?:issues?|#)\s*\d+[^)]*\)\s*$", r"\1", text, count=1, flags=re.M)
    failed = re.findall(r"\*\*This chapter's measurements failed:\*\*\s*`([^`]*)`", text)
    if failed:
        chapters_failed = re.findall(r"^## (Chapter \d+)[^\n]*\n(?:(?!^## ).*\n)*?\*\*This chapter's measurements failed", text, re.M)
        which = ", ".join(chapters_failed) or "a chapter"
        box = (f":::{{warning}} This run failed\nThe measurements of {which} stopped at an error ({failed[0].split(':')[0]}), so this "
               "record holds no rows for it; the records page lists the runs that replaced it.\n:::\n\n")
        title = re.match(r"#[^#\n][^\n]*\n", text)
        text = text[:title.end()] + "\n" + box + text[title.end():] if title else box + text
    return text


def notebook_title(path: Path) -> str:
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            heading = re.search(r"^#\s+(.+)$", text, re.M)
            if heading:
                return heading.group(1).strip()
    return path.stem


def stage(pages: dict[Path, Source], stage_dir: Path, root: Path = ROOT, records: Path | None = None) -> dict:
    """Lay out the MyST project in `stage_dir` (repository paths, so relative links hold); return its myst.yml.

    The sidebar holds the course (chapters, exercises), the then-and-now report and one Records page; the
    record pages themselves are reached from that page's table (a part the theme leaves out of the sidebar).
    """
    records = records or root / "measurements"
    shutil.rmtree(stage_dir, ignore_errors=True)
    stage_dir.mkdir(parents=True)
    book = chapters(root)
    course_pages = ("course_map", "notebook_services", "glossary")
    toc: list[dict] = [{"file": "index.md"}, {"title": "Course", "children": [{"file": f"docs/{n}.md"} for n in course_pages]}]
    for chapter, notebooks in book:
        children = []
        for source in notebooks:
            target = stage_dir / "chapters" / chapter.name / source.name
            target.parent.mkdir(parents=True, exist_ok=True)
            page = pages[source]
            notebook = with_note(link_folders_to_first_notebooks(without_occupancy_warnings(json.loads(page.executed.read_text())),
                                                                 source.parent), page.note, warning=page.waiting)
            target.write_text(json.dumps(notebook), encoding="utf-8")
            children.append({"file": f"chapters/{chapter.name}/{source.name}"})
        toc.append({"title": chapter_title(chapter), "children": children})
    exercise_pages = []
    for source in sorted((root / "exercises").glob("*.ipynb")):
        target = stage_dir / "exercises" / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(link_folders_to_first_notebooks(json.loads(source.read_text()), source.parent)), encoding="utf-8")
        exercise_pages.append({"file": f"exercises/{source.name}"})
    toc.append({"title": "Exercises", "children": exercise_pages})
    toc.append({"title": "Measurements", "children": [{"file": "then_and_now.md"}, {"file": RECORDS_PAGE}]})
    (stage_dir / "measurements").mkdir()
    record_files = []
    for page_md in sorted((root / "measurements").rglob("*.md")):  # every record, each a page reached from the Records page
        relative = page_md.relative_to(root).as_posix()
        (stage_dir / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(page_md, stage_dir / relative)
        record_files.append(relative)
    (stage_dir / "then_and_now.md").write_text(then_and_now_page(records), encoding="utf-8")
    (stage_dir / "index.md").write_text(landing_page(book, root, pages), encoding="utf-8")
    if (records / "thenandnow" / "report.html").exists():  # the report's own page, linked from then_and_now.md
        (stage_dir / "measurements" / "thenandnow").mkdir(parents=True, exist_ok=True)
        shutil.copy(records / "thenandnow" / "report.html", stage_dir / "measurements" / "thenandnow" / "report.html")
    in_toc = {entry["file"] for entry in _toc_entries(toc)} | set(record_files)
    while True:  # Markdown files that pages link to (a GPU CI record's gpu_ci.md, the report's report.md): record pages too
        new_pages = [path.relative_to(stage_dir).as_posix() for path in copy_linked_files(stage_dir, root) if path.suffix == ".md"]
        new_pages = [name for name in new_pages if name not in in_toc]
        if not new_pages:
            break
        record_files += new_pages
        in_toc |= set(new_pages)
    record_files = sorted(set(record_files), key=lambda f: (f != "measurements/README.md", f))
    distinct_titles(stage_dir, record_files)
    for relative in record_files:
        page = stage_dir / relative
        page.write_text(readable_record(page.read_text(encoding="utf-8")), encoding="utf-8")
    (stage_dir / RECORDS_PAGE).write_text(records_page(stage_dir, [f for f in record_files if f != "measurements/README.md"], records),
                                          encoding="utf-8")
    toc.append({"title": HIDDEN_PART, "children": [{"file": f} for f in record_files]})
    config = {
        "version": 1,
        "project": {"title": TITLE, "toc": toc},
        "site": {"template": os.path.relpath(BOOK / "theme", stage_dir), "title": TITLE},
    }
    (stage_dir / "myst.yml").write_text(json.dumps(config, indent=1), encoding="utf-8")  # YAML is a superset of JSON
    return config


def jupyter_book(stage_dir: Path) -> None:
    """Run `jupyter-book build --html` in the staged project (Node.js must be on the PATH)."""
    node = shutil.which("node")
    if node is None:
        raise SiteError("Jupyter Book 2 needs Node.js 18 or newer: on Debian or Ubuntu `sudo apt-get install nodejs`; "
                        "elsewhere see https://nodejs.org")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < 18:
        raise SiteError(f"Jupyter Book 2 needs Node.js 18 or newer; {node} is {version}")
    binary = Path(sys.executable).parent / "jupyter-book"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("BASE_URL", None)
    done = subprocess.run([str(binary), "build", "--html", "--ci"], cwd=stage_dir, env=env, capture_output=True, text=True, timeout=1200)
    log = done.stdout + done.stderr
    stage_dir.with_name(stage_dir.name + ".log").write_text(log)
    if done.returncode != 0 or not (stage_dir / "_build" / "html" / "index.html").exists():
        raise SiteError(f"jupyter-book build failed (exit {done.returncode}):\n{log[-4000:]}")


# -- link checking ------------------------------------------------------------------------------------
class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "img", "link", "script", "source"):
                self.links.append(attrs[key])


def broken_links(site: Path) -> list[str]:
    """Every internal link or image of the HTML files under `site` whose file (or #anchor) does not exist."""
    pages: dict[Path, _Links] = {}
    for page in sorted(site.rglob("*.html")):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        pages[page.resolve()] = parser
    broken = []
    for page, parser in pages.items():
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//"):
                continue  # external: http(s), mailto, data
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(site.resolve())}: {link}"
            if not target.is_relative_to(site.resolve()) or not target.exists():
                broken.append(f"{where} (no such file)")
            elif parts.fragment and target in pages and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{where} (no such anchor)")
    return broken


def build(executed: Path | None = None, out: Path = BUILD / "html", jobs: int = 2, timeout: int = 300, here: bool = False,
          records: Path = ROOT / "measurements", strict: bool = False) -> Path:
    """Build the site into `out` and check its links; return `out`.

    `executed`: every page from this folder (its notebooks must match chapters/). Otherwise each page
    shows the newest GPU record under `records` where its code is current (chapter 4's: of 2 or more
    GPUs), and the rest (all, with `here`) are executed on this machine, each saying at its top that it
    waits for a GPU record. `strict`: fail instead when any page would wait.
    """
    book = chapters()
    link = RECORDS_PAGE
    if executed is not None:
        problems = check_executed(executed)
        if problems:
            raise SiteError("the executed notebooks do not match chapters/:\n  " + "\n  ".join(problems))
        filed = executed.name == "executed" and executed.parent.parent.name == "gpu_ci"  # a GPU record's folder
        pages = sources(book, [record_of(executed.parent)], None, link) if filed else {}
        pages.update({source: Source(executed / chapter.name / source.name, *executed_note(executed / chapter.name / source.name))
                      for chapter, notebooks in book for source in notebooks if source not in pages})
    else:
        every_record = [] if here else gpu_records(records)
        waiting = waiting_pages(book, every_record)
        if strict and waiting:
            raise SiteError(f"{len(waiting)} page(s) have no GPU record of their notebook's current code (--strict):\n  "
                            + "\n  ".join(str(source.relative_to(ROOT)) for source in waiting)
                            + "\nrun them on a GPU (python3 tools/gpu_ci.py OUT --steps chapters --stale; chapter 4 on 2 or more GPUs) "
                            "and file the record (python3 tools/gpu_ci.py file OUT)")
        pages = sources(book, every_record, None, link)
        if waiting:
            done = executed_here(jobs, timeout, only=set(waiting))
            pages.update({source: page for source, page in sources(book, every_record, done, link).items() if source in waiting})
    for line in build_log(pages, here):
        print(line, flush=True)
    stage_dir = out.with_name(out.name + ".stage")  # one per output: two builds at once (tests in parallel) never share one
    stage(pages, stage_dir, records=records)
    jupyter_book(stage_dir)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(stage_dir / "_build" / "html", out)
    broken = broken_links(out)
    if broken:
        raise SiteError(f"{len(broken)} broken internal link(s) in the site:\n  " + "\n  ".join(broken))
    return out


def build_log(pages: dict[Path, Source], here: bool = False) -> list[str]:
    """What the build took its pages from: a line per GPU record used (its pages), then every page that waits for one."""
    used: dict[Path, list[Path]] = {}
    for source, page in pages.items():
        if page.record is not None:
            used.setdefault(page.record.folder, []).append(source)
    lines = [f"pages: {sum(page.gpu for page in pages.values())} of {len(pages)} with GPU outputs, from {len(used)} record(s)"
             + ("" if used or here else " (no GPU record of their current code found)")]
    for folder, served in sorted(used.items(), key=lambda item: item[0].name):
        chapter_names = sorted({source.parent.name for source in served})
        lines.append(f"  record {folder.name}: {len(served)} page(s) of {', '.join(chapter_names)}")
    waiting = sorted(source for source, page in pages.items() if page.waiting)
    if waiting and not here:
        lines.append(f"  waiting for a GPU record of their current code ({len(waiting)}, built here instead, and say so at their top):")
        lines += [f"    {source.relative_to(ROOT) if source.is_relative_to(ROOT) else source}" for source in waiting]
    return lines


def executed_note(path: Path) -> tuple[str, bool]:
    """The note of a page built from executed copies given to the build (not a filed record): from the banner of `path`."""
    device = banner_device(json.loads(path.read_text()))
    if device:
        return f"**Outputs of a GPU run**: {device} (executed copies given to the build).", True
    return ("**Simulator build**: these outputs come from Numba's CUDA simulator, without a GPU. Its times are those of "
            "Python threads at tiny sizes, so rates and speed-ups are not measured here.", False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executed", type=Path, help="a folder of executed chapter notebooks (DIR/NN_chapter/NN_name.ipynb) to "
                        "build every page from, e.g. a recorded GPU run's; default: each page from the newest GPU record of its "
                        "current code under --records, the others executed here")
    parser.add_argument("--strict", action="store_true", help="fail when a page has no GPU record of its notebook's current code "
                        "(chapter 4: of 2 or more GPUs) instead of building it here")
    parser.add_argument("--here", action="store_true", help="execute every chapter notebook on this machine (the simulator "
                        "without a GPU) instead of showing the recorded GPU run")
    parser.add_argument("--records", type=Path, default=ROOT / "measurements", help="the folder of the GPU records: gpu_ci/<date>_<gpu>/ "
                        "and thenandnow/ (default measurements/)")
    parser.add_argument("--out", type=Path, default=BUILD / "html", help="where the site goes (default book/_build/html)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks executed at once (default 2)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds one notebook may run (default 300)")
    parser.add_argument("--execute-one", nargs=2, type=Path, metavar=("SOURCE", "TARGET"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute_one:  # a child of execute_in_child
        print(execute(*(path.resolve() for path in args.execute_one), args.timeout), flush=True)
        return 0
    try:
        if args.executed and args.here:
            raise SiteError("give --executed DIR or --here, not both")
        if args.strict and (args.executed or args.here):
            raise SiteError("--strict checks the GPU records: give it without --executed and --here")
        out = build(args.executed.resolve() if args.executed else None, args.out.resolve(), args.jobs, args.timeout, args.here,
                    args.records.resolve(), args.strict)
    except SiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    pages = len(list(out.glob("*.html")))
    print(f"site: {out / 'index.html'} ({pages} pages; every internal link checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
