"""Measure how long each exercise check takes on its reference solution, in this mode, and record it: each check's own time
limit is a multiple of it (`gpucourse.checks.guard.check_seconds`).

    python3 tools/check_seconds.py [--only ch01_introduction ...] [--write]

Runs every solution notebook's cells (the check cells timed, each once after the notebook's other cells), prints one line
per check and, with --write, stores the times under this mode's key in gpucourse/data/check_seconds.json (the other mode's
record is kept). A maintainer's tool: run it in the simulator and on a GPU after a check or its reference changes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import linecache
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gpucourse  # noqa: E402, F401 - chooses the mode before numba.cuda is imported
from gpucourse import mode  # noqa: E402
from gpucourse.checks import guard  # noqa: E402

CHECK_NAME = re.compile(r"\.(check_\w+)\(")


def timed_checks(name: str) -> dict[str, float]:
    """Run a solution notebook (its check cells timed); return each check's seconds, by the check function's name."""
    cells = json.loads((ROOT / "solutions" / f"{name}.ipynb").read_text())["cells"]
    namespace: dict = {"__name__": f"solution_{name}"}
    seconds: dict[str, float] = {}
    for number, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        filename = f"<{name} cell {number}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # inspect.getsource finds it
        code = compile(source, filename, "exec")
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, namespace)
        except (Exception, guard.CheckTimedOut) as exc:  # a reference that fails its check: said, and not recorded
            print(f"{name} cell {number} failed: {type(exc).__name__}: {str(exc)[:500]}", flush=True)
            continue
        for check in CHECK_NAME.findall(source):
            seconds[check] = round(time.perf_counter() - start, 2)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="solution notebooks by stem (default: all)")
    parser.add_argument("--write", action="store_true", help="store the times in gpucourse/data/check_seconds.json")
    options = parser.parse_args()
    os.environ["GPUCOURSE_CHECK_SECONDS"] = str(max(guard.CHECK_SECONDS.values()))  # measured under the old ceiling, not a record
    where = "gpu" if mode.on_gpu() else "simulator"
    names = options.only or sorted(path.stem for path in (ROOT / "solutions").glob("ch*.ipynb"))
    measured: dict[str, float] = {}
    for name in names:
        for check, seconds in timed_checks(name).items():
            measured[check] = seconds
            limit = min(guard.CHECK_SECONDS[where], max(guard.MIN_CHECK_SECONDS[where], guard.CHECK_FACTOR * seconds))
            print(f"{where:9s} {name:24s} {check:28s} {seconds:7.2f} s -> limit {limit:6.1f} s", flush=True)
    if options.write:
        path = guard.REFERENCE_SECONDS_FILE
        record = json.loads(path.read_text()) if path.exists() else {}
        record.setdefault(where, {}).update(measured)
        path.write_text(json.dumps({key: dict(sorted(value.items())) for key, value in sorted(record.items())}, indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
