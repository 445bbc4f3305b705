"""The course's GPU CI: tests, every notebook timed, the then-and-now report, a leak check, and a run record.

    python3 tools/gpu_ci.py OUT_DIR [--steps tests,notebooks,leaks,report] [--chapter N ...] [--executed] [--pack]

Steps (all by default, in this order):
  tests      the whole test suite in gpu mode, one test at a time (timings undisturbed)
  notebooks  nbval over every notebook of solutions/ and chapters/, each one timed; with --executed the
             chapter notebooks are run by the website's executor instead (a cell error fails it the same
             way) and their executed copies kept in OUT_DIR/executed/, which `./course site --executed
             OUT_DIR/executed` publishes
  leaks      every chapter notebook run in ONE kernel process, in turn; after each, the notebook's
             names are deleted and the memory pools emptied, and the device memory in use is read:
             memory that keeps growing from notebook to notebook fails the step
  report     `python -m gpucourse report` into OUT_DIR/report (HTML, Markdown, JSON)
Writes OUT_DIR/gpu_ci.md (GPU, driver, versions, date, command, counts, per-notebook wall times,
memory per notebook, report summary) and the logs beside it; exits non-zero if any step failed.
With --pack, everything but gpu_ci.md is moved into OUT_DIR/gpu_ci.tar.gz: one file for machines that
return only a few files (the lent GPUs return at most 8).
`tools/gpu_ci.sh` sets up the environment and calls this; `.github/workflows/gpu.yml` runs it on a
self-hosted GPU runner. The lent GPUs of this project ran it in parts (measurements/README.md).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider"]
STEPS = ("tests", "notebooks", "leaks", "report")
#: Growth of device memory in use, from after the first notebook to after the last, that fails the leak check.
LEAK_TOLERANCE_BYTES = 512 * 2**20

MEMORY_PROBE = r"""
get_ipython().run_line_magic("reset", "-f")  # the notebook's names and the output history that keeps results alive
import gc, json
import matplotlib.pyplot
matplotlib.pyplot.close("all")
gc.collect()
try:
    import cupy
    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()
    from numba import cuda as _cuda
    _cuda.current_context().deallocations.clear()
    _free, _total = cupy.cuda.runtime.memGetInfo()
    print("GPUCOURSE_MEMORY", json.dumps({"used": _total - _free, "pool": cupy.get_default_memory_pool().total_bytes()}))
except Exception as _error:
    print("GPUCOURSE_MEMORY", json.dumps({"used": None, "error": repr(_error)}))
"""


def summary_line(text: str) -> str:
    lines = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed|errors?)\b", line)]
    return lines[-1].strip("= ") if lines else "no summary"


def notebooks_of(folders: list[str], chapters: list[int] | None = None) -> list[Path]:
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).glob("**/*.ipynb")):
            if ".ipynb_checkpoints" in path.parts:
                continue
            number = re.match(r"(?:ch)?0?(\d+)", path.parent.name if folder == "chapters" else path.name)
            if chapters and (number is None or int(number.group(1)) not in chapters):
                continue
            found.append(path)
    return found


def run_tests(out: Path, record: list[str]) -> bool:
    start = time.perf_counter()
    tests = subprocess.run([*PYTEST, "-q", "tests", "--durations=15"], capture_output=True, text=True, cwd=ROOT)
    (out / "tests.log").write_text(tests.stdout + tests.stderr)
    record += [f"## Tests ({time.perf_counter() - start:.0f} s)", "", summary_line(tests.stdout), ""]
    return tests.returncode == 0


def run_notebooks(out: Path, record: list[str], chapters: list[int] | None, keep_executed: bool = False) -> bool:
    record += ["## Notebooks (one process each)", "", "| notebook | wall time (s) | result |", "| --- | --- | --- |"]
    failures = 0
    with open(out / "notebooks.log", "w") as log:
        for notebook in notebooks_of(["solutions", "chapters"], chapters):
            begin = time.perf_counter()
            relative = notebook.relative_to(ROOT)
            if keep_executed and relative.parts[0] == "chapters":
                copy = out / "executed" / relative.parent.name / relative.name
                run = subprocess.run([sys.executable, "book/build.py", "--execute-one", str(notebook), str(copy), "--timeout", "900"],
                                     capture_output=True, text=True, cwd=ROOT)
                run.stdout += "\n1 passed\n" if run.returncode == 0 else "\n1 failed\n"
            else:
                run = subprocess.run([*PYTEST, "-q", "--nbval-lax", "--nbval-current-env", str(relative)],
                                     capture_output=True, text=True, cwd=ROOT)
            seconds = time.perf_counter() - begin
            log.write(f"===== {notebook.relative_to(ROOT)} ({seconds:.1f} s)\n{run.stdout}{run.stderr}\n")
            failures += run.returncode != 0
            record.append(f"| {notebook.relative_to(ROOT)} | {seconds:.1f} | {summary_line(run.stdout)} |")
            print(f"{notebook.relative_to(ROOT)}: {seconds:.1f} s, {summary_line(run.stdout)}", flush=True)
    record += ["", f"{failures} notebook(s) failed.", ""]
    return failures == 0


def _execute(client, code: str, timeout: float) -> tuple[bool, str]:
    """Run `code` in the kernel; return (ok, text output)."""
    texts: list[str] = []

    def hook(message) -> None:
        content = message["content"]
        if message["msg_type"] == "stream":
            texts.append(content["text"])
        elif message["msg_type"] == "error":
            texts.append(f"{content['ename']}: {content['evalue']}")

    reply = client.execute_interactive(code, timeout=timeout, output_hook=hook, store_history=False)
    return reply["content"]["status"] == "ok", "".join(texts)


def run_leak_check(out: Path, record: list[str], chapters: list[int] | None) -> bool:
    """Run every chapter notebook in one kernel, in turn, and follow the device memory in use after each."""
    import nbformat
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", cwd=str(ROOT))
    rows, used, ok_all = [], [], True
    try:
        for notebook in notebooks_of(["chapters"], chapters):
            nb = nbformat.read(notebook, as_version=4)
            _execute(client, f"import os; os.chdir({str(notebook.parent)!r})", 60)
            begin, error = time.perf_counter(), ""
            for cell in nb.cells:
                if cell.cell_type != "code" or not cell.source.strip():
                    continue
                ok, text = _execute(client, cell.source, 900)
                if not ok:
                    error = text.strip().splitlines()[-1] if text.strip() else "a cell failed"
                    break
            seconds = time.perf_counter() - begin
            _, probe = _execute(client, MEMORY_PROBE, 120)
            found = re.search(r"GPUCOURSE_MEMORY (\{.*\})", probe)
            memory = json.loads(found.group(1)) if found else {"used": None}
            used.append(memory.get("used"))
            ok_all &= not error
            rows.append((notebook.relative_to(ROOT), seconds, memory.get("used"), error))
            print(f"leaks: {notebook.relative_to(ROOT)} {seconds:.1f} s, in use after: {memory}", flush=True)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    known = [u for u in used if u is not None]
    growth = (known[-1] - known[0]) if len(known) >= 2 else 0
    leak = growth > LEAK_TOLERANCE_BYTES
    record += ["## Leak check (every chapter notebook in one kernel, names deleted and pools emptied after each)", "",
               "| notebook | wall time (s) | device memory in use after (MiB) | error |", "| --- | --- | --- | --- |"]
    record += [f"| {name} | {seconds:.1f} | {'—' if mem is None else f'{mem / 2**20:.0f}'} | {error} |" for name, seconds, mem, error in rows]
    verdict = ("device memory not measured (no GPU)" if len(known) < 2 else
               f"growth from the first notebook to the last: {growth / 2**20:.0f} MiB (fails above {LEAK_TOLERANCE_BYTES / 2**20:.0f} MiB): "
               f"{'LEAK' if leak else 'no leak'}")
    record += ["", f"{verdict}; notebooks with an error: {sum(1 for r in rows if r[3])}.", ""]
    return ok_all and not leak


def run_report(out: Path, record: list[str], chapters: list[int] | None) -> bool:
    start = time.perf_counter()
    command = [sys.executable, "-m", "gpucourse", "report", "--out", str(out / "report")]
    for number in chapters or []:
        command += ["--chapter", str(number)]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    (out / "report.log").write_text(run.stdout + run.stderr)
    tail = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr.strip()[-300:]
    record += [f"## Report ({time.perf_counter() - start:.0f} s)", "", tail, ""]
    return run.returncode == 0


def pack(out: Path) -> Path:
    """Move everything in `out` except gpu_ci.md into out/gpu_ci.tar.gz (paths relative to out); return the archive."""
    archive = out / "gpu_ci.tar.gz"
    members = sorted(p for p in out.iterdir() if p.name not in ("gpu_ci.md", archive.name))
    with tarfile.open(archive, "w:gz") as tar:
        for path in members:
            tar.add(path, arcname=path.name)
    for path in members:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated subset of {','.join(STEPS)}")
    parser.add_argument("--chapter", type=int, action="append", help="notebooks, leaks and report: only this chapter")
    parser.add_argument("--executed", action="store_true", help="notebooks: keep executed copies of the chapter notebooks")
    parser.add_argument("--pack", action="store_true", help="move every output but gpu_ci.md into OUT_DIR/gpu_ci.tar.gz")
    args = parser.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = set(steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown step(s) {sorted(unknown)}; choose from {STEPS}")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    smi = ""
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,ecc.mode.current", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    versions = subprocess.run([sys.executable, "-c", "from gpucourse.banner import versions; print(versions())"], capture_output=True,
                              text=True, cwd=ROOT).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    record = [f"# GPU CI run, {datetime.datetime.now().isoformat(timespec='minutes')}", "",
              f"- GPU, driver, ECC: {smi or 'none (simulator mode)'}", f"- versions: {versions}", f"- commit: {commit or 'unknown'}",
              f"- command: `python3 tools/gpu_ci.py OUT {' '.join(sys.argv[2:] if argv is None else argv[1:])}`", ""]
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    started, results = time.perf_counter(), {}
    for step in steps:
        if step == "tests":
            results[step] = run_tests(out, record)
        elif step == "notebooks":
            results[step] = run_notebooks(out, record, args.chapter, args.executed)
        elif step == "leaks":
            results[step] = run_leak_check(out, record, args.chapter)
        elif step == "report":
            results[step] = run_report(out, record, args.chapter)
        (out / "gpu_ci.md").write_text("\n".join(record) + "\n")
    record += [f"Total {time.perf_counter() - started:.0f} s; " + ", ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in results.items())]
    (out / "gpu_ci.md").write_text("\n".join(record) + "\n")
    if args.pack:
        pack(out)
    print("\n".join(record[-3:]))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
