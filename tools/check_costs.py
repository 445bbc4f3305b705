"""How long the checks of exercise notebooks take with their reference solutions, notebook by notebook, in this mode.

    python3 tools/check_costs.py [ch04_multi_gpu ch05_monte_carlo ...] [--limit-s 60]

Runs every code cell of each solution notebook in one namespace (as a student's kernel would), times its check cells
(the cells that call `chN.check_...`), prints one line per check and one per notebook, and exits 1 if a check failed or
a notebook's checks took longer than the limit. A maintainer's tool: the same command in the simulator and on a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import linecache
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gpucourse  # noqa: E402,F401  (chooses the mode before numba.cuda is imported)


def check_seconds(name: str) -> tuple[list[tuple[str, float, str]], bool]:
    """[(check call, seconds, its first output line)] of one solution notebook, and whether every check passed."""
    cells = json.loads((ROOT / "solutions" / f"{name}.ipynb").read_text())["cells"]
    namespace: dict = {"__name__": f"solution_{name}"}
    timed, passed = [], True
    for number, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        filename = f"<{name} cell {number}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # inspect.getsource finds it
        code = compile(source, filename, "exec")
        output = io.StringIO()
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(output):
                exec(code, namespace)
        except Exception as exc:  # noqa: BLE001 - a failed check is reported, the others still run
            passed = False
            output.write(f"FAILED {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        seconds = time.perf_counter() - start
        if ".check_" in source:
            first = next((line for line in output.getvalue().splitlines() if line.strip()), "")
            timed.append((source.strip().splitlines()[-1], seconds, first))
    return timed, passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", default=["ch04_multi_gpu", "ch05_monte_carlo", "ch06_finite_difference", "ch07_fft"])
    parser.add_argument("--limit-s", type=float, default=60.0)
    arguments = parser.parse_args()
    print(f"mode: {gpucourse.mode.MODE}")
    status = 0
    for name in arguments.notebooks:
        timed, passed = check_seconds(name)
        for call, seconds, first in timed:
            print(f"  {seconds:7.2f} s  {call}  ->  {first[:110]}")
        total = sum(seconds for _, seconds, _ in timed)
        over = total > arguments.limit_s
        print(f"{name}: {len(timed)} checks in {total:.1f} s{' (over the limit)' if over else ''}{'' if passed else ' (a check FAILED)'}")
        status |= int(over or not passed)
    return status


if __name__ == "__main__":
    sys.exit(main())
