"""Run the whole course on the current machine and write a record: tests, then each notebook timed.

Usage (repository root): python3 tools/gpu_validate.py OUT_DIR [--no-tests] [--executed] [notebook-or-folder ...]
Writes OUT_DIR/validate.md (GPU, driver, versions, date, command, counts, per-notebook wall time)
and the full pytest logs beside it. With --executed, each chapter notebook is run by the website's
executor instead of nbval (it fails the same way on a cell error) and its executed copy is kept in
OUT_DIR/executed/<chapter>/, the folder `./course site --executed` builds the website from.
"""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider"]


# Execute one notebook with the website's executor (book/build.py) and keep the copy; a closing line pytest-like.
EXECUTE = """import runpy, sys
from pathlib import Path
site = runpy.run_path("book/build.py")
try:
    print(site["execute"](Path(sys.argv[1]), Path(sys.argv[2]), 1800))
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}"[-3000:])
    print("0 passed, 1 failed")
    sys.exit(1)
print("1 passed, 0 failed")
"""


def summary_line(text: str) -> str:
    lines = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed|errors?)\b", line)]
    return lines[-1].strip("= ") if lines else "no summary"


def main(out: Path, targets: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    smi = ""
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
        smi = subprocess.run(query, capture_output=True, text=True).stdout.strip()
    versions = subprocess.run([sys.executable, "-c", "from gpucourse.banner import versions; print(versions())"], capture_output=True, text=True,
                              cwd=ROOT).stdout.strip()
    report = [f"# Course validation, {datetime.date.today().isoformat()}", "", f"- GPU, driver: {smi or 'none (simulator)'}",
              f"- versions: {versions}", f"- command: `python3 tools/gpu_validate.py OUT {' '.join(targets)}`", ""]
    start = time.perf_counter()
    tests_failed = False
    keep_executed = "--executed" in targets
    targets = [t for t in targets if t != "--executed"]
    if "--no-tests" in targets:
        targets = [t for t in targets if t != "--no-tests"]
    else:
        tests = subprocess.run([*PYTEST, "-q", "tests", "--durations=15"], capture_output=True, text=True, cwd=ROOT)
        (out / "tests.log").write_text(tests.stdout + tests.stderr)
        report += [f"## Tests ({time.perf_counter() - start:.0f} s)", "", summary_line(tests.stdout), ""]
        tests_failed = tests.returncode != 0
    notebooks = []
    for target in targets or ["chapters", "solutions"]:
        path = ROOT / target
        notebooks += sorted(path.glob("**/*.ipynb")) if path.is_dir() else [path]
    report += ["## Notebooks", "", "| notebook | wall time (s) | result |", "| --- | --- | --- |"]
    failures = 0
    with open(out / "notebooks.log", "w") as log:
        for notebook in notebooks:
            begin = time.perf_counter()
            relative = notebook.relative_to(ROOT)
            if keep_executed and relative.parts[0] == "chapters":
                copy = out / "executed" / relative.parent.name / relative.name
                run = subprocess.run([sys.executable, "-c", EXECUTE, str(notebook), str(copy)], capture_output=True, text=True, cwd=ROOT)
            else:
                run = subprocess.run([*PYTEST, "-q", "--nbval-lax", "--nbval-current-env", str(relative)],
                                     capture_output=True, text=True, cwd=ROOT)
            seconds = time.perf_counter() - begin
            log.write(f"===== {notebook.relative_to(ROOT)} ({seconds:.1f} s)\n{run.stdout}{run.stderr}\n")
            failures += run.returncode != 0
            report.append(f"| {notebook.relative_to(ROOT)} | {seconds:.1f} | {summary_line(run.stdout)} |")
            print(f"{notebook.relative_to(ROOT)}: {seconds:.1f} s, {summary_line(run.stdout)}", flush=True)
    report += ["", f"Total: {time.perf_counter() - start:.0f} s; {failures} notebook(s) failed; tests failed: {tests_failed}."]
    (out / "validate.md").write_text("\n".join(report) + "\n")
    print("\n".join(report))
    return int(bool(failures or tests_failed))


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
