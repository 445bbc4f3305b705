"""Measure how long each exercise check takes on its reference solution, in this mode, and record it: each check's own time
limit is a multiple of it (`gpucourse.checks.guard.check_seconds`).

    python3 tools/check_seconds.py [--only ch01_introduction ...] [--write] [--limit-s 60]

Runs every solution notebook's cells in one namespace, as a student's kernel would (the check cells timed), prints one line
per check (its seconds, its time limit and the first line it printed) and one per notebook; with --write, stores the times
under this mode's key in gpucourse/data/check_seconds.json (the other mode's record is kept); with --limit-s, exits 1 if a
check failed or a notebook's checks took longer than that. A maintainer's tool: run it in the simulator and on a GPU after a
check or its reference changes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from solution_cells import solution_cells  # noqa: E402 - tools/, this script's folder

import gpucourse  # noqa: E402, F401 - chooses the mode before numba.cuda is imported
from gpucourse import mode  # noqa: E402
from gpucourse.checks import guard  # noqa: E402

CHECK_NAME = re.compile(r"\.(check_\w+)\(")


def timed_checks(name: str) -> tuple[dict[str, tuple[float, str]], bool]:
    """Run a solution notebook (its check cells timed): each check's (seconds, first line printed) by the check function's
    name, and whether every check passed (a failed one is said, and not recorded)."""
    namespace: dict = {"__name__": f"solution_{name}"}
    timed: dict[str, tuple[float, str]] = {}
    passed = True
    for number, source, code in solution_cells(name):
        output = io.StringIO()
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(output):
                exec(code, namespace)
        except (Exception, guard.CheckTimedOut) as exc:  # a reference that fails its check: said, and not recorded
            print(f"{name} cell {number} failed: {type(exc).__name__}: {str(exc)[:500]}", flush=True)
            passed = False
            continue
        first = next((line for line in output.getvalue().splitlines() if line.strip()), "")
        for check in CHECK_NAME.findall(source):
            timed[check] = (round(time.perf_counter() - start, 2), first)
    return timed, passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="solution notebooks by stem (default: all)")
    parser.add_argument("--write", action="store_true", help="store the times in gpucourse/data/check_seconds.json")
    parser.add_argument("--limit-s", type=float, help="exit 1 if a check failed or a notebook's checks took longer (seconds)")
    options = parser.parse_args()
    os.environ["GPUCOURSE_CHECK_SECONDS"] = str(max(guard.CHECK_SECONDS.values()))  # measured under the old ceiling, not a record
    where = "gpu" if mode.on_gpu() else "simulator"
    names = options.only or sorted(path.stem for path in (ROOT / "solutions").glob("ch*.ipynb"))
    measured: dict[str, float] = {}
    status = 0
    for name in names:
        timed, passed = timed_checks(name)
        for check, (seconds, first) in timed.items():
            measured[check] = seconds
            limit = min(guard.CHECK_SECONDS[where], max(guard.MIN_CHECK_SECONDS[where], guard.CHECK_FACTOR * seconds))
            print(f"{where:9s} {name:24s} {check:28s} {seconds:7.2f} s -> limit {limit:6.1f} s  {first[:80]}", flush=True)
        total = sum(seconds for seconds, _ in timed.values())
        over = options.limit_s is not None and total > options.limit_s
        print(f"{name}: {len(timed)} checks in {total:.1f} s{' (over the limit)' if over else ''}{'' if passed else ' (a check FAILED)'}")
        status |= int(options.limit_s is not None and (over or not passed))
    if options.write:
        path = guard.REFERENCE_SECONDS_FILE
        record = json.loads(path.read_text()) if path.exists() else {}
        record.setdefault(where, {}).update(measured)
        path.write_text(json.dumps({key: dict(sorted(value.items())) for key, value in sorted(record.items())}, indent=1) + "\n")
        print(f"wrote {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
