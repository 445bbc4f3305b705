"""The course as a website (book/build.py): built from executed notebooks, every chapter page there, no broken link.

The site is built once with every chapter notebook executed here (`./course site --here`, in this
machine's mode; in the simulator its outputs are scanned: no 0 GB/s, no simulated rate, no verdict),
then again as `./course site` does by default, from a recorded GPU run (a fixture made of those
executed copies): each page shows the record's outputs and says so, and the then-and-now page the
recorded report. Jupyter Book 2 needs Node.js: outside CI a machine without it skips the builds; in
CI it fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

import gpucourse

spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "build.py")
site = importlib.util.module_from_spec(spec)
sys.modules["book_build"] = site
spec.loader.exec_module(site)


def need_node():
    missing = []
    if shutil.which("node") is None:
        missing.append("Node.js (Debian's nodejs package; .ci/run installs it)")
    if not (Path(sys.executable).parent / "jupyter-book").exists():
        missing.append("jupyter-book (the dev extra)")
    if missing:
        if os.environ.get("CI"):
            pytest.fail("the website needs " + " and ".join(missing))
        pytest.skip("the website needs " + " and ".join(missing))


def build_site(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "book" / "build.py"), "--out", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=3000)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    need_node()
    out = tmp_path_factory.mktemp("site") / "html"
    done = build_site(out, "--here")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "every internal link checked" in done.stdout
    return out


# -- what a simulator build must not show ------------------------------------------------------------
#: Output text a simulator run must not hold: a rate of Python threads (0 GB/s, 3.5e-05 GB/s), a rate column's
#: tiny value, a verdict or a speed-up drawn from simulated times, a size rounded to nothing.
SIMULATOR_DONTS = {
    "a zero rate": re.compile(r"(?<![\d.])0(?:\.0+)? (?:GB/s|GFLOP/s|MB/s)"),
    "a simulated rate": re.compile(r"(?<![\w.])(?:\d+(?:\.\d+)?e-\d+|0\.00\d*) (?:GB/s|GFLOP/s|MB/s)"),
    "a verdict": re.compile(r"(?:memory|math|compute|latency|launch)-bound(?![?]| or not| kernel| model| side)|bound by: \w|\bspeed-up \d"
                            r"|\d(?:\.\d+)?x (?:faster|slower|as long)|\d ?x the |\d% of the (?:best|copy)"),
    "a size of nothing": re.compile(r"(?<![\d.])0(?:\.0+)? (?:MiB|MB|GiB|GB)(?![/\w])"),
    "internal words": re.compile(r"the acceptance asks"),
    # a figure's words (gpucourse.plotting.describe_figure, the page's alt text): a simulator plot has no rate axis
    "a rate axis": re.compile(r"[(;] ?y: [^;)]*(?:GB/s|GFLOP/s|MB/s)"),
}


def output_text(cell: dict) -> str:
    """Every text a code cell's outputs show: streams, plain text, HTML and Markdown."""
    texts = []
    for out in cell.get("outputs", []):
        texts.append(out.get("text", ""))
        texts += [(out.get("data") or {}).get(key, "") for key in ("text/plain", "text/html", "text/markdown")]
    return "\n".join("".join(t) if isinstance(t, list) else t for t in texts)


#: A table column of rates or comparisons: in the simulator it holds no number ('—').
RATE_COLUMN = re.compile(r"GB/s|GFLOP/s|MB/s|[a-z]/s\b|speed-up|over the|fraction of|of copy|of ceiling|per second", re.I)
#: A column of the book's figures: the book's GPUs (Tesla C870 ... K20X, the M2050 pair).
BOOK_COLUMN = re.compile(r"book|\b(?:C870|C1060|C2050|C2070|M2050|M2090|K10|K20X?)\b")


def table_problems(html_text: str) -> list[str]:
    """'<column>: <value>' for every number in a rate or comparison column of the tables in `html_text` (the book's columns aside)."""
    problems = []
    for table in re.findall(r"<table.*?</table>", html_text, re.S):
        if re.search(r"<caption[^>]*>.*?\bestimate\b.*?</caption>", table, re.S | re.I):
            continue  # a model's prediction, labelled as such: no run's rate
        headers = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th>(.*?)</th>", table, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
            cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
            if not cells or "(book)" in cells[0] or cells[0].startswith(("book", "Tesla")):
                continue
            for header, value in zip(headers, cells):
                if RATE_COLUMN.search(header) and not BOOK_COLUMN.search(header) and re.fullmatch(r"[-+]?[\d.]+(?:e[-+]?\d+)?x?", value):
                    problems.append(f"{header} = {value}")
    return problems


def simulator_problems(notebook: dict) -> list[str]:
    """'cell N: <what>: <the line>' for every output line that breaks a rule of SIMULATOR_DONTS, and every rate in a table."""
    problems = []
    for number, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        text = output_text(cell)
        for line in text.splitlines():
            if line.lstrip().startswith("<") and not line.lstrip().startswith("<Figure: "):
                continue  # HTML: its tables are read below, its text is also in text/plain
            line = re.sub(r"book[^;|]*", "", line)  # the book's own figures and verdicts are quoted, not drawn here
            problems += [f"cell {number}: {what}: {line.strip()[:160]}" for what, pattern in SIMULATOR_DONTS.items() if pattern.search(line)]
        problems += [f"cell {number}: a rate in a table: {problem}" for problem in table_problems(text)]
    return problems


def test_the_scan_finds_what_a_simulator_must_not_show():
    def notebook(*lines):
        return {"cells": [{"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout", "text": "\n".join(lines)}]}]}

    bad = notebook("x walks rows: 437.9 ms,      0.0 GB/s", "copy_shared  1489 ms  1.504e-05 GB/s", "bound by: compute",
                   "This device, with fast math: math-bound: math alone takes 263%", "9^3 float32:      0.0 MiB per array",
                   "solve / two FFTs: 764.230 GPU time; the acceptance asks at most 1.5.", "GB/s 0.000191 GB/s")
    assert len(simulator_problems(bad)) == 7
    axis = notebook("<Figure: Numba copy: bandwidth against threads per block (x: threads per block; y: effective bandwidth (GB/s))>")
    assert simulator_problems(axis) == ["cell 0: a rate axis: <Figure: Numba copy: bandwidth against threads per block (x: threads per "
                                        "block; y: effective bandwidth (GB/s))>"]
    table = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "execute_result", "data": {"text/html": (
        "<table><thead><tr><th>kernel</th><th>C2050 (book)</th><th>simulator GB/s</th><th>fraction of copy</th></tr></thead><tbody>"
        "<tr><td>naive</td><td>18.5</td><td>1.504e-05</td><td>—</td></tr><tr><td>book: CUF</td><td>7.37</td><td>3</td><td>—</td></tr>"
        "</tbody></table>")}}]}]}
    assert simulator_problems(table) == ["cell 0: a rate in a table: simulator GB/s = 1.504e-05"]
    good = notebook("<Figure: Copies (x: none; y: none; effective bandwidth: not measured in the simulator)>",
                    "x walks rows: 437.9 ms, GB/s not measured in the simulator [simulator wall clock]",
                    "book C2050: math-bound; book K20: memory-bound", "9^3 float32: 2.85 KiB per array", "launch-bound or not: not measured",
                    "A host memory copy of 64 MiB moved 14.3 GB/s (host memory, not a GPU figure).")
    assert simulator_problems(good) == []


def test_simulator_outputs_show_no_rate_of_python_threads_and_no_verdict(built):
    """Run in the simulator, no chapter notebook prints 0 GB/s, a simulated rate, a verdict or a size of nothing."""
    if not gpucourse.is_simulator():
        pytest.skip("the site was built on a GPU: its rates are measured")
    problems = []
    for chapter, notebooks in site.chapters():
        for notebook in notebooks:
            copy = site.BUILD / "executed" / chapter.name / notebook.name
            problems += [f"{chapter.name}/{notebook.name} {p}" for p in simulator_problems(json.loads(copy.read_text()))]
    assert problems == [], "\n".join(problems)


def test_every_chapter_notebook_has_its_page_with_outputs(built):
    pages = json.loads((built / "pages.json").read_text())
    book = site.chapters()
    assert book and all(notebooks for _, notebooks in book)
    for chapter, notebooks in book:
        for notebook in notebooks:
            location = f"/chapters/{chapter.name}/{notebook.name}"
            assert location in pages, f"no page for {location}"
            page = (built / pages[location]).read_text()
            words = re.findall(r"[A-Za-z]{4,}", site.notebook_title(notebook))[:4]
            assert words and all(word in page for word in words), f"{location}: the page does not carry the notebook's title"
            assert 'class="outputs"' in page, f"{location}: the page shows no outputs (not executed?)"
            assert "SIMULATOR MODE" in page or "GPU MODE" in page  # the banner cell's output
    index = (built / "index.html").read_text()
    for chapter, _ in book:
        assert site.chapter_title(chapter) in index  # the sidebar and the landing page list every chapter
    assert "then and now" in index.lower() and (built / pages["/then_and_now.md"]).exists()
    assert any(p.suffix == ".png" for p in built.iterdir())  # the plots


def test_the_built_site_has_no_broken_internal_link(built):
    assert site.broken_links(built) == []
    assert len(list(built.glob("*.html"))) >= sum(len(n) for _, n in site.chapters()) + 2


def test_link_check_reports_broken_files_and_anchors(tmp_path):
    (tmp_path / "index.html").write_text('<a href="a.html#there">ok</a><a href="missing.html">x</a><img src="plot.png">'
                                         '<a href="a.html#nowhere">y</a><a href="https://example.org/x">external</a>'
                                         '<a href="#top">self</a><p id="top"></p>')
    (tmp_path / "a.html").write_text('<h2 id="there">A</h2><a href="../outside.html">up</a>')
    assert sorted(site.broken_links(tmp_path)) == [
        "a.html: ../outside.html (no such file)",
        "index.html: a.html#nowhere (no such anchor)",
        "index.html: missing.html (no such file)",
        "index.html: plot.png (no such file)",
    ]


# -- the recorded GPU run, as `./course site` publishes it by default ---------------------------------
GPU_MARKER = "output recorded on the GPU of the fixture record"


OCCUPANCY_WARNING = ("SITE/numba_cuda/numba/cuda/dispatcher.py:748: NumbaPerformanceWarning: \x1b[1mGrid size 1 will likely result "
                     "in GPU under-utilization due to low occupancy.\x1b[0m\n  warn(errors.NumbaPerformanceWarning(msg))\n")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def make_records(folder: Path, executed: Path, stale: Path | None = None) -> Path:
    """A measurements/ folder holding one recorded GPU run made of the executed copies in `executed`, and a then-and-now report.

    Each copy's first code cell shows a GPU's banner, GPU_MARKER and Numba's low-occupancy warning, and its widgets
    only their repr (as tools/gpu_ci.py files a record); the copy of `stale` (a chapter notebook) is given older code,
    so that its page must fall back to the simulator build.
    """
    from gpucourse import thenandnow
    from gpucourse.thenandnow import core, render

    run = folder / "gpu_ci" / "2026-11-25_h200"
    shutil.copytree(executed, run / "executed")
    for copy in sorted((run / "executed").glob("*/*.ipynb")):
        notebook = json.loads(copy.read_text())
        first = next(c for c in notebook["cells"] if c["cell_type"] == "code")
        first["outputs"] = [{"output_type": "stream", "name": "stdout", "text": f"GPU MODE: kernels run on NVIDIA H200.\n{GPU_MARKER}\n"},
                            {"output_type": "stream", "name": "stderr", "text": OCCUPANCY_WARNING}]  # as a GPU's banner had it
        notebook.get("metadata", {}).pop("widgets", None)  # as tools/gpu_ci.py files a record: no widget state, the widget's repr kept
        for cell in notebook["cells"]:
            for out in cell.get("outputs", []):
                if WIDGET_VIEW in (out.get("data") or {}):
                    del out["data"][WIDGET_VIEW]
        if stale is not None and copy.name == stale.name and copy.parent.name == stale.parent.name:
            first["source"] = "print('older code')"
        copy.write_text(json.dumps(notebook))
    (run / "gpu_ci.json").write_text(json.dumps({"gpu": {"name": "NVIDIA H200", "driver": "570.124.06"}, "date": "2026-11-25 09:12"}))
    wide = core.Row("copy " + "with a long description " * 6, core.cells("ch2_tab2_1_copy_eccon_K20"), 4312.5, "GB/s", 0.95,
                    note="a long note " * 12)
    report = thenandnow.Report({"device": "NVIDIA H200", "simulated": False, "date": "2026-11-25 09:40", "driver CUDA version": 13000},
                               [core.ChapterResult(2, "Metrics", [core.Section("Copies", [wide])])])
    (folder / "thenandnow").mkdir(parents=True)
    (folder / "thenandnow" / "report.md").write_text(render.to_markdown(report.meta, report.chapters, [], {}))
    (folder / "thenandnow" / "report.html").write_text(render.to_html(report.meta, report.chapters, [], {}))
    (folder / "thenandnow" / "report.json").write_text(json.dumps({"meta": report.meta}))
    return folder


def test_each_page_shows_the_gpu_record_where_its_code_is_current(tmp_path):
    """Pages take the newest record's copies; a notebook changed since the record falls back to the build's, and says why."""
    root = tmp_path / "repo"
    for name in ("01_a", "02_b"):
        source = root / "chapters" / "01_x" / f"{name}.ipynb"
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(json.dumps({"cells": [{"cell_type": "code", "source": f"print('{name}')", "outputs": []}]}))
    here = tmp_path / "here" / "01_x"
    here.mkdir(parents=True)
    for name in ("01_a", "02_b"):
        (here / f"{name}.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "source": f"print('{name}')", "outputs": [
            {"output_type": "stream", "name": "stdout", "text": "SIMULATOR MODE: kernels run in Numba's CUDA simulator"}]}]}))
    records = make_records(tmp_path / "measurements", tmp_path / "here", stale=root / "chapters" / "01_x" / "02_b.ipynb")
    older = records / "gpu_ci" / "2026-11-01_h100" / "executed"
    shutil.copytree(records / "gpu_ci" / "2026-11-25_h200" / "executed", older)  # an older run: not the one shown
    earlier_today = records / "gpu_ci" / "2026-11-25_h200_4e86b34"  # a run of the same day, named after its commit
    shutil.copytree(records / "gpu_ci" / "2026-11-25_h200", earlier_today)
    meta = json.loads((earlier_today / "gpu_ci.json").read_text())
    (earlier_today / "gpu_ci.json").write_text(json.dumps({**meta, "calls": [{"started": "2026-11-25T01:00:00+00:00"}]}))
    latest = json.loads((records / "gpu_ci" / "2026-11-25_h200" / "gpu_ci.json").read_text())
    (records / "gpu_ci" / "2026-11-25_h200" / "gpu_ci.json").write_text(json.dumps({**latest, "calls": [{"started": "2026-11-25T05:00:00+00:00"}]}))
    record = site.gpu_record(records)
    assert record.folder.name == "2026-11-25_h200" and record.describe() == "NVIDIA H200, driver 570.124.06, 2026-11-25"
    pages = site.sources(site.chapters(root), record, tmp_path / "here", "measurements/README.md")
    a, b = (pages[root / "chapters" / "01_x" / f"{n}.ipynb"] for n in ("01_a", "02_b"))
    assert a.gpu and a.executed.is_relative_to(record.executed) and "Outputs recorded on a GPU**: NVIDIA H200, driver 570.124.06" in a.note
    assert not b.gpu and b.executed == tmp_path / "here" / "01_x" / "02_b.ipynb"
    assert "**Simulator build**" in b.note and "holds older code of this notebook" in b.note
    assert "(../../measurements/README.md)" in a.note and "(../../measurements/README.md)" in b.note  # links from chapters/NN_name/
    copy_a = record.executed / "01_x" / "01_a.ipynb"  # a recorded run that stopped at an error is not shown either
    stopped = json.loads(copy_a.read_text())
    stopped["cells"][0]["outputs"].append({"output_type": "error", "ename": "MPIProblem", "evalue": "no result", "traceback": []})
    copy_a.write_text(json.dumps(stopped))
    a = site.sources(site.chapters(root), record, tmp_path / "here", "measurements/README.md")[root / "chapters" / "01_x" / "01_a.ipynb"]
    assert not a.gpu and "holds a run of it that stopped at an error" in a.note
    assert site.gpu_record(tmp_path / "nothing") is None
    assert site.banner_device({"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {
        "text/html": "<b>GPU MODE: kernels run on NVIDIA H100 80GB HBM3.</b><br>"}}]}]}) == "NVIDIA H100 80GB HBM3"


def test_the_then_and_now_page_shows_the_recorded_report(tmp_path):
    (tmp_path / "none").mkdir()
    records = make_records(tmp_path / "measurements", tmp_path / "none")
    page = site.then_and_now_page(records)
    assert "No report is recorded yet" not in page and "recorded on NVIDIA H200, 2026-11-25 09:40" in page
    assert "| copy with a long description" in page and "4312" in page and "## Chapter 2: Metrics" in page
    assert "[report.html](measurements/thenandnow/report.html)" in page and "lent" not in page
    assert "No report is recorded yet" in site.then_and_now_page(tmp_path / "nothing")


def test_the_then_and_now_page_holds_every_chapter_of_the_course_report():
    """The report filed in measurements/thenandnow/ is merged by chapter: its page shows all seven, each naming its run."""
    page = site.then_and_now_page()
    chapters_shown = re.findall(r"^## Chapter (\d+):", page, re.M)
    assert chapters_shown == [str(n) for n in range(1, 8)], chapters_shown
    assert len(re.findall(r"^\*\d+ s on NVIDIA [^,]+, 20\d\d-\d\d-\d\d", page, re.M)) == 7


def test_course_site_publishes_the_recorded_gpu_run(built, tmp_path):
    """`./course site` with a recorded GPU run: its outputs on every page whose code it holds, the report on its page."""
    first_chapter, notebooks = site.chapters()[0]
    stale = notebooks[-1]
    records = make_records(tmp_path / "measurements", site.BUILD / "executed", stale=stale)
    out = tmp_path / "html"
    done = build_site(out, "--records", str(records))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    total = sum(len(n) for _, n in site.chapters())
    multi = [source for chapter, notebooks in site.chapters() if chapter.name in site.MULTI_GPU_CHAPTERS for source in notebooks]
    waiting = 1 + len(multi)  # the stale page, and chapter 4's: a record of one GPU never serves them
    assert f"pages: {total - waiting} of {total} with GPU outputs, from 1 record(s)" in done.stdout
    assert f"  record 2026-11-25_h200: {total - waiting} page(s)" in done.stdout
    assert f"waiting for a GPU record of their current code ({waiting}" in done.stdout
    assert all(str(source.relative_to(ROOT)) in done.stdout for source in [stale, *multi])
    pages = json.loads((out / "pages.json").read_text())
    shown = (out / pages[f"/chapters/{first_chapter.name}/{notebooks[0].name}"]).read_text()
    assert GPU_MARKER in shown and "Outputs recorded on a GPU" in shown and "NVIDIA H200, driver 570.124.06, 2026-11-25" in shown
    fallback = (out / pages[f"/chapters/{first_chapter.name}/{stale.name}"]).read_text()
    assert GPU_MARKER not in fallback and "Simulator build" in fallback and "older code of this notebook" in fallback
    assert fallback.index("No GPU record of this code yet") < fallback.index('class="cell"')  # said at the page's top
    for source in multi:
        page = (out / pages[f"/chapters/{source.parent.name}/{source.name}"]).read_text()
        assert GPU_MARKER not in page and "record of 2 or more GPUs" in page
    strict = build_site(tmp_path / "strict", "--records", str(records), "--strict")
    assert strict.returncode == 1 and "--strict" in strict.stderr and str(stale.relative_to(ROOT)) in strict.stderr
    report = (out / pages["/then_and_now.md"]).read_text()
    assert "No report is recorded yet" not in report and "4312" in report and 'class="table-wrap"' in report
    assert f"{total - waiting} of {total} notebooks" in (out / "index.html").read_text()


def test_a_folder_of_executed_notebooks_must_match_the_chapters(built, tmp_path):
    recorded = tmp_path / "recorded"
    shutil.copytree(site.BUILD / "executed", recorded)
    (first_chapter, notebooks), (last_chapter, last) = site.chapters()[0], site.chapters()[-1]
    (recorded / last_chapter.name / last[-1].name).unlink()
    stale = recorded / first_chapter.name / notebooks[0].name
    notebook = json.loads(stale.read_text())
    next(c for c in notebook["cells"] if c["cell_type"] == "code")["source"] = "print('older code')"
    stale.write_text(json.dumps(notebook))
    stopped = recorded / first_chapter.name / notebooks[-1].name
    notebook = json.loads(stopped.read_text())
    next(c for c in notebook["cells"] if c["cell_type"] == "code")["outputs"].append(
        {"output_type": "error", "ename": "MemoryError", "evalue": "out of memory", "traceback": []})
    stopped.write_text(json.dumps(notebook))
    problems = site.check_executed(recorded)
    assert len(problems) == 3
    assert "is missing" in problems[-1] and last[-1].name in problems[-1]
    assert "other code" in problems[0] and notebooks[0].name in problems[0]
    assert "stopped at an error" in problems[1] and notebooks[-1].name in problems[1]
    done = build_site(tmp_path / "html", "--executed", str(recorded))
    assert done.returncode == 1 and "do not match chapters/" in done.stderr


def test_files_that_pages_link_to_are_published_with_them(tmp_path):
    """A link from a page to a repository file that is no page (a script, a log, a screenshot) works on the site too."""
    root, stage = tmp_path / "repo", tmp_path / "stage"
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "gpu_run.py").write_text("print('measured')\n")
    for folder in (root, stage):
        (folder / "chapters" / "01_x").mkdir(parents=True)
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": [
        "The script [gpu_run.py](../../tools/gpu_run.py), a [missing file](nothing.png), `[code](../../tools/gpu_run.py)`."]}]}
    (stage / "chapters" / "01_x" / "01_a.ipynb").write_text(json.dumps(notebook))
    (stage / "index.md").write_text("See [the script](tools/gpu_run.py) and [the web](https://example.org/a.py).")
    copied = site.copy_linked_files(stage, root)
    assert copied == [stage / "tools" / "gpu_run.py"] and (stage / "tools" / "gpu_run.py").read_text() == "print('measured')\n"


def _chapter_sources(root: Path, pages: tuple[tuple[str, str], ...]) -> None:
    """One tiny chapter notebook per (chapter folder, name) under root/chapters."""
    for chapter, name in pages:
        source = root / "chapters" / chapter / f"{name}.ipynb"
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(json.dumps({"cells": [{"cell_type": "code", "source": f"print('{name}')", "outputs": []}]}))


def _gpu_record(records: Path, root: Path, folder: str, chapters: tuple[str, ...], meta: dict) -> None:
    """A GPU record in records/gpu_ci/folder: current copies of the chapters' notebooks and gpu_ci.json from `meta`."""
    run = records / "gpu_ci" / folder
    for chapter in chapters:
        (run / "executed" / chapter).mkdir(parents=True)
        for source in (root / "chapters" / chapter).glob("*.ipynb"):
            (run / "executed" / chapter / source.name).write_text(source.read_text())
    (run / "gpu_ci.json").write_text(json.dumps(meta))


def test_a_page_takes_the_newest_record_that_holds_it(tmp_path):
    """A newer record of one chapter (a run on several GPUs, say) serves that chapter's pages; the others keep the older whole record's."""
    root, records = tmp_path / "repo", tmp_path / "measurements"
    _chapter_sources(root, (("01_x", "01_a"), ("04_y", "01_c")))
    for folder, chapters, started in (("2026-11-25_h200", ("01_x", "04_y"), "2026-11-25T05:00:00+00:00"),
                                      ("2026-11-27_h100x4", ("04_y",), "2026-11-27T05:00:00+00:00")):
        _gpu_record(records, root, folder, chapters, {"gpu": {"name": folder, "driver": "580"}, "date": folder[:10],
                                                      "calls": [{"started": started}]})
    found = site.gpu_records(records)
    assert [r.folder.name for r in found] == ["2026-11-27_h100x4", "2026-11-25_h200"]
    pages = site.sources(site.chapters(root), found, None, "measurements/README.md")
    assert pages[root / "chapters" / "04_y" / "01_c.ipynb"].executed.is_relative_to(found[0].executed)
    assert pages[root / "chapters" / "01_x" / "01_a.ipynb"].executed.is_relative_to(found[1].executed)


def test_the_multi_gpu_chapter_shows_the_run_with_the_most_gpus(tmp_path):
    """A newer run on one GPU holds chapter 4 too: its pages still come from the run on four; other chapters from the newest."""
    root, records = tmp_path / "repo", tmp_path / "measurements"
    _chapter_sources(root, (("01_x", "01_a"), ("04_multi_gpu", "05_d")))
    for folder, chapters, started, visible in (("2026-11-27_h100x4", ("04_multi_gpu",), "2026-11-27T05:00:00+00:00", 4),
                                               ("2026-11-27_h100x1", ("04_multi_gpu",), "2026-11-27T06:00:00+00:00", 1),
                                               ("2026-11-27_h100", ("01_x", "04_multi_gpu"), "2026-11-27T07:00:00+00:00", None)):
        meta = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580", "date": folder[:10], "gpu_count": 4 if visible else 1,
                "calls": [{"started": started}]}
        _gpu_record(records, root, folder, chapters, meta | ({"gpus_visible": visible} if visible else {}))
    found = site.gpu_records(records)
    assert [(r.folder.name, r.gpus) for r in found] == [("2026-11-27_h100", 1), ("2026-11-27_h100x1", 1), ("2026-11-27_h100x4", 4)]
    pages = site.sources(site.chapters(root), found, None, "measurements/README.md")
    multi = pages[root / "chapters" / "04_multi_gpu" / "05_d.ipynb"]
    assert multi.executed.is_relative_to(found[2].executed) and "4 x NVIDIA H100 80GB HBM3, driver 580" in multi.note
    assert pages[root / "chapters" / "01_x" / "01_a.ipynb"].executed.is_relative_to(found[0].executed)


def test_a_record_of_one_gpu_never_serves_the_multi_gpu_chapter(tmp_path):
    """Chapter 4's pages come from a record of 2 or more GPUs of their current code, or wait and say so; --strict lists them."""
    root, records = tmp_path / "repo", tmp_path / "measurements"
    _chapter_sources(root, (("01_x", "01_a"), ("04_multi_gpu", "05_d")))
    _gpu_record(records, root, "2026-11-28_h200", ("01_x", "04_multi_gpu"), {"gpu": "NVIDIA H200", "date": "2026-11-28", "gpu_count": 1})
    _gpu_record(records, root, "2026-11-27_h100x4", ("01_x",), {"gpu": "NVIDIA H100", "date": "2026-11-27", "gpus_visible": 4})
    found = site.gpu_records(records)
    assert site.waiting_pages(site.chapters(root), found) == [root / "chapters" / "04_multi_gpu" / "05_d.ipynb"]
    here = tmp_path / "here" / "04_multi_gpu"
    here.mkdir(parents=True)
    (here / "05_d.ipynb").write_text((root / "chapters" / "04_multi_gpu" / "05_d.ipynb").read_text())
    pages = site.sources(site.chapters(root), found, tmp_path / "here", "records.md")
    multi = pages[root / "chapters" / "04_multi_gpu" / "05_d.ipynb"]
    assert multi.waiting and not multi.gpu and "GPU record of 2 or more GPUs (2026-11-27) holds no copy of it" in multi.note
    assert pages[root / "chapters" / "01_x" / "01_a.ipynb"].record.folder.name == "2026-11-28_h200"
    log = site.build_log(pages)
    assert log[0] == "pages: 1 of 2 with GPU outputs, from 1 record(s)" and log[1].startswith("  record 2026-11-28_h200: 1 page(s) of 01_x")
    assert "waiting for a GPU record" in log[2] and log[3].strip().endswith("05_d.ipynb")
    with pytest.raises(site.SiteError, match="--strict"):
        site.build(records=records, strict=True)  # the course's own chapters: none is current in this record: fails before executing


def test_record_pages_read_as_words_and_are_reached_from_one_table(tmp_path):
    failed = ("# Then and now: the book's figures on NVIDIA H100 (issue 12)\n\n- versions: {'python': '3.12.3', 'numba': '0.68.0'}\n\n"
              "## Chapter 2: Metrics\n\n*3 s*\n\n**This chapter's measurements failed:** `ValueError: 'copy_kernel' is not compiled yet`\n")
    text = site.readable_record(failed)
    assert "(issue 12)" not in text and "- versions: python 3.12.3, numba 0.68.0" in text and "{'" not in text
    assert text.index(":::{warning} This run failed") < text.index("## Chapter 2") and "The measurements of Chapter 2 stopped" in text
    (tmp_path / "measurements" / "gpu_ci" / "2026-11-25_h200").mkdir(parents=True)
    (tmp_path / "measurements" / "gpu_ci" / "2026-11-25_h200" / "gpu_ci.md").write_text("# GPU CI record, 2026-11-25\n")
    (tmp_path / "measurements" / "gpu_ci" / "2026-11-25_h200" / "gpu_ci.json").write_text(json.dumps({"gpu": "NVIDIA H200", "driver": "5"}))
    (tmp_path / "measurements" / "ch2.md").write_text("# Chapter 2 on the H100\n\nGPU: NVIDIA H100. Date: 2026-11-22.\n")
    page = site.records_page(tmp_path, ["measurements/ch2.md", "measurements/gpu_ci/2026-11-25_h200/gpu_ci.md"], tmp_path / "measurements")
    assert page.replace("\u2011", "-").splitlines()[6:] == [
        "| 2026-11-25 | NVIDIA H200 | [GPU CI record, 2026-11-25](measurements/gpu_ci/2026-11-25_h200/gpu_ci.md) |",
        "| 2026-11-22 | NVIDIA H100 | [Chapter 2 on the H100](measurements/ch2.md) |"]
    spec = importlib.util.spec_from_file_location("book_render_nav", ROOT / "book" / "theme" / "render.py")
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    assert render.HIDDEN_PART == site.HIDDEN_PART
    nav = render.nav_html([{"title": "Measurements", "level": 1}, {"title": "Records", "level": 2, "file_name": "records.html"},
                           {"title": site.HIDDEN_PART, "level": 1}, {"title": "A record", "level": 2, "file_name": "a.html"},
                           {"title": "After", "level": 1, "file_name": "after.html"}], "records.html")
    assert "records.html" in nav and "a.html" not in nav and site.HIDDEN_PART not in nav and "after.html" in nav


# -- what a newcomer met on the website (issue 29) ---------------------------------------------------------
def test_part_titles_are_spelled_as_the_readme_spells_them():
    titles = [site.chapter_title(chapter) for chapter, _ in site.chapters()]
    assert "4. Multi-GPU programming" in titles and "5. Monte Carlo" in titles and "7. FFT" in titles
    assert not any(re.search(r"Multi gpu|Monte carlo|Fft\b", title) for title in titles), titles
    assert site.chapter_title(Path("08_cuda_graphs_and_mpi"), Path("/nowhere")) == "8. CUDA graphs and MPI"  # not in a README


def test_numba_low_occupancy_warnings_stay_off_the_pages():
    warning = OCCUPANCY_WARNING
    notebook = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stderr", "text": warning},
        {"output_type": "stream", "name": "stderr", "text": [warning, "a real problem\n"]},
        {"output_type": "stream", "name": "stdout", "text": "GPU MODE\n"}]}]}
    outputs = site.without_occupancy_warnings(notebook)["cells"][0]["outputs"]
    assert [out["text"] for out in outputs] == ["a real problem\n", "GPU MODE\n"]


def test_a_widget_without_its_state_shows_a_note_not_its_repr(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("book_render", ROOT / "book" / "theme" / "render.py")
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    monkeypatch.setattr(render, "OUT", tmp_path)  # where the page's images go
    page = render.Page({}, {})
    for shown in ("VBox(children=(HTML(value=''), SelectionSlider(options=(32, 64)",
                  "HBox(children=(IntProgress(value=0, description='report', max=2), Label(value='starting ...')))"):
        html = page.mime({"text/plain": shown})
        assert "children=" not in html and "runs when the notebook is open in JupyterLab" in html
    assert page.mime({"text/plain": "Report(meta={})"}) == '<pre class="output">Report(meta={})</pre>'
    figure = page.mime({"image/png": "iVBORw0KGgo=", "text/plain": "<Figure: Roofline (x: intensity; y: GFLOP/s)>"})
    assert 'alt="Figure: Roofline (x: intensity; y: GFLOP/s)"' in figure


def test_records_that_share_a_title_are_told_apart(tmp_path):
    for name in ("2026-11-22_h100_validation_a", "2026-11-22_h100_validation_b"):
        (tmp_path / f"{name}.md").write_text("# Course validation, 2026-11-22\n\ntext\n")
    (tmp_path / "gpu_ci" / "2026-11-25_h200_c454f6d").mkdir(parents=True)
    (tmp_path / "gpu_ci" / "2026-11-25_h200_c454f6d" / "gpu_ci.md").write_text("# GPU CI record, 2026-11-25\n")
    (tmp_path / "gpu_ci" / "2026-11-25_h200").mkdir(parents=True)
    (tmp_path / "gpu_ci" / "2026-11-25_h200" / "gpu_ci.md").write_text("# GPU CI record, 2026-11-25\n")
    (tmp_path / "ch2.md").write_text("# Chapter 2\n")
    files = ["2026-11-22_h100_validation_a.md", "2026-11-22_h100_validation_b.md", "gpu_ci/2026-11-25_h200_c454f6d/gpu_ci.md",
             "gpu_ci/2026-11-25_h200/gpu_ci.md", "ch2.md"]
    site.distinct_titles(tmp_path, files)
    assert [site.markdown_title(tmp_path / f) for f in files] == [
        "Course validation, 2026-11-22 (H100 validation a)", "Course validation, 2026-11-22 (H100 validation b)",
        "GPU CI record, 2026-11-25 (H200 c454f6d)", "GPU CI record, 2026-11-25 (H200)", "Chapter 2"]


def page_texts(out: Path) -> dict[str, str]:
    """Each page of a built site as the text a reader sees (tags dropped), by file name."""
    return {page.name: re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")) for page in sorted(out.glob("*.html"))}


def test_the_site_shows_no_widget_repr_no_warning_and_renders_the_records(built):
    """No page shows a widget's repr or Numba's warning; the records the README links to are pages; titles are distinct."""
    texts = page_texts(built)
    assert not [name for name, text in texts.items() if re.search(r"\b(?:V|H)Box\(children=|NumbaPerformanceWarning", text)]
    pages = json.loads((built / "pages.json").read_text())
    for record in ("/measurements/gpu_ci/2026-11-25_h200/gpu_ci.md", "/measurements/thenandnow/report.md"):
        assert record in pages and pages[record].endswith(".html"), f"{record} is no page"
    index = (built / "index.html").read_text(encoding="utf-8")
    assert 'href="measurements/thenandnow/report.md"' not in index and 'gpu_ci/2026-11-25_h200/gpu_ci.md"' not in index
    assert not list(built.rglob("gpu_ci.md")) and not list(built.rglob("report.md"))  # no raw Markdown published
    titles = [re.search(r"<h1>(.*?)</h1>", (built / page).read_text(encoding="utf-8")).group(1) for page in pages.values()]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
    nav = re.search(r'<nav class="sidebar">(.*?)</nav>', index, re.S).group(1)
    assert "Multi-GPU" in nav and "Monte Carlo" in nav and "FFT" in nav and "Multi gpu" not in nav
    links = re.findall(r"<a[ >]", nav)
    assert len(links) <= 52 and ">Records<" in nav and "gpu_ci" not in nav, f"{len(links)} links in the sidebar"
    records = (built / pages["/records.md"]).read_text(encoding="utf-8")
    assert "<th>date</th>" in records and "NVIDIA H200" in records and pages["/measurements/gpu_ci/2026-11-25_h200/gpu_ci.md"] in records
    assert not [name for name, text in texts.items() if re.search(r"versions: \{'|\(issues? \d", text)]
    assert "white-space: pre-wrap" in (built / "style.css").read_text()  # printed lines wrap in their boxes


def test_a_labelled_estimate_is_no_measured_rate():
    """A model's table whose caption says it is an estimate may show speed-ups in the simulator; a measured one may not."""
    row = "<thead><tr><th>GPUs</th><th>speed-up</th></tr></thead><tbody><tr><td>8</td><td>7.8</td></tr></tbody></table>"
    assert table_problems("<table><caption><b>ESTIMATE (model, not measured)</b></caption>" + row) == []
    assert table_problems("<table><caption><b>Strong scaling</b></caption>" + row) == ["speed-up = 7.8"]
