"""What only a GPU can tell about the exercise checks: synccheck on a barrier in a branch, how often blocks lose a plain total,
and the speed ratios of the reference solutions against their bars, over repeats.

    python3 tools/gpu_checks.py OUT_DIR [--repeats 5] [--budget-s 170]

Writes OUT_DIR/checks.json (device, versions, synccheck's findings, lost totals per grid, and every speed
comparison of `gpucourse.checks.speed.history()` with the lowest ratio per exercise), OUT_DIR/checks.log (what the checks
printed) and OUT_DIR/sanitizer.txt (compute-sanitizer's own words). The solutions' check cells run with their kernels as
`solutions/` writes them; compute-sanitizer and the replayed traces are left out of the repeats, which time the speed only
(they are judged once, by the check tests). A maintainer's tool, run on a GPU machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import linecache
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from solution_cells import is_check_cell, solution_cells  # noqa: E402 - tools/, this script's folder

import gpucourse  # noqa: E402
from gpucourse.checks import evidence, sanitizer, speed  # noqa: E402
from gpucourse.checks.trace import ReplayError  # noqa: E402

#: (notebook, the check call's start) in the order they are measured: the exercises whose verdicts moved first.
SPEED_CHECKS = (
    ("ch03_execution", "ch3_execution.check_no_bank_conflicts("),
    ("ch05_monte_carlo", "ch5.check_block_sums("),
    ("ch05_monte_carlo", "ch5.check_atomic_sum("),
    ("ch03_memory", "ch3_memory.check_ufunc_kernels("),
    ("ch07_fft", "ch7.check_derivative_spectrum("),
    ("ch06_finite_difference", "ch6.check_jacobi_sweep("),
    ("ch03_memory", "ch3_memory.check_scale_matrix("),
    ("ch03_memory", "ch3_memory.check_overlapped("),
    ("ch01_introduction", "ch1.check_add_arrays("),
    ("ch01_introduction", "ch1.check_scale_rows("),
    ("ch01_introduction", "ch1.check_fill_grid_stride("),
    ("ch02_metrics", "ch2.check_copy_four("),
)


def notebook_namespace(name: str) -> tuple[dict, dict[str, str]]:
    """Run a solution notebook's cells except its check cells; return the namespace and its check cells by call."""
    namespace: dict = {"__name__": f"solution_{name}"}
    checks = {}
    for _, source, code in solution_cells(name):
        if is_check_cell(source):
            checks[source.strip()] = code
        else:
            exec(code, namespace)
    return namespace, checks


@contextlib.contextmanager
def speed_only():
    """Leave compute-sanitizer and the replayed traces out: the checks then judge values and time speed only."""
    available, traced = evidence.racecheck_available, evidence.traced_run

    def not_replayed(*args, **kwargs):
        raise ReplayError("left out of the speed repeats")

    evidence.racecheck_available, evidence.traced_run = (lambda: False), not_replayed
    try:
        yield
    finally:
        evidence.racecheck_available, evidence.traced_run = available, traced


def synccheck_probe(report: dict, text: list[str]) -> None:
    """synccheck on a block tree with its barrier inside the `if`, and on the right tree."""
    source = '''
from numba import cuda, float32

@cuda.jit
def tree(x, partial, branch):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
            if branch:
                cuda.syncthreads()
        if not branch:
            cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]

def branch_tree(x, partial):
    tree[2, 256, 0, 1024](x, partial, True)

def right_tree(x, partial):
    tree[2, 256, 0, 1024](x, partial, False)
'''
    filename = "<synccheck probe>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {"__name__": "probe"}
    exec(compile(source, filename, "exec"), namespace)
    arguments = [("traced", "x", np.ones(500, np.float32)), ("traced", "partial", np.zeros(2, np.float32))]
    for name, tool in (("branch_tree", "synccheck"), ("right_tree", "synccheck")):
        start = time.perf_counter()
        try:
            found = sanitizer.sanitize(namespace[name], arguments, tool)
            report[f"{tool} {name}"] = {"errors": found.errors, "warnings": found.warnings, "first": found.first,
                                         "words": found.describe() if found.errors else "", "seconds": round(time.perf_counter() - start, 1)}
            text.append(f"===== {tool} on {name}: {found.errors} error(s)\n{found.output[-4000:]}")
        except Exception as exc:  # noqa: BLE001 - recorded, not fatal
            report[f"{tool} {name}"] = {"error": f"{type(exc).__name__}: {str(exc)[-1500:]}"}


def race_probe(report: dict) -> None:
    """How often a plain `total[0] += block_sum` loses a block's sum on this GPU, by grid size."""
    from numba import cuda, float32

    @cuda.jit
    def plain_total(x, total):
        tile = cuda.shared.array(256, float32)
        t = cuda.threadIdx.x
        s = float32(0)
        for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
            s += x[i]
        tile[t] = s
        cuda.syncthreads()
        step = 128
        while step > 0:
            if t < step:
                tile[t] += tile[t + step]
            cuda.syncthreads()
            step //= 2
        if t == 0:
            total[0] += tile[0]

    n = (1 << 22) + 37  # the size of the chapter 5 checks on a GPU
    x = cuda.to_device(np.ones(n, np.float32))
    results = {}
    for blocks in (8, 32, 256, 1024, 4096):
        lost = 0
        for _ in range(10):
            total = cuda.to_device(np.zeros(1, np.float32))
            plain_total[blocks, 256](x, total)
            lost += int(total.copy_to_host()[0] != n)
        results[str(blocks)] = f"{lost}/10 runs lost updates"
    report["plain total of 2^22 + 37 ones, 256 threads per block"] = results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=170.0)
    parser.add_argument("--no-probes", action="store_true", help="leave out the sanitizer and race probes (a dry run)")
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    device = gpucourse.current_device()
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True).stdout.strip()
    except FileNotFoundError:
        smi = "no nvidia-smi"
    report: dict = {"device": str(device), "nvidia-smi": smi, "python": platform.python_version(),
                    "numpy": np.__version__, "mode": gpucourse.mode.MODE}
    try:
        import numba_cuda

        report["numba-cuda"] = numba_cuda.__version__
    except Exception:  # noqa: BLE001
        pass
    text: list[str] = []
    if not arguments.no_probes:
        race_probe(report)
        synccheck_probe(report, text)
    (arguments.out / "sanitizer.txt").write_text("\n\n".join(text))
    log = io.StringIO()
    namespaces: dict[str, tuple[dict, dict]] = {}
    outcomes: dict[str, list[str]] = {}
    with speed_only():
        for notebook, call in SPEED_CHECKS:
            if time.perf_counter() - started > arguments.budget_s:
                report.setdefault("not measured (time budget)", []).append(call)
                continue
            if notebook not in namespaces:
                with contextlib.redirect_stdout(log):
                    namespaces[notebook] = notebook_namespace(notebook)
            namespace, checks = namespaces[notebook]
            code = next(c for source, c in checks.items() if source.startswith(call))
            for _ in range(arguments.repeats):
                with contextlib.redirect_stdout(log):
                    try:
                        exec(code, namespace)
                        outcomes.setdefault(call, []).append("passed")
                    except Exception as exc:  # noqa: BLE001 - a failed check is a finding
                        outcomes.setdefault(call, []).append(f"{type(exc).__name__}: {str(exc)[:600]}")
                        print(f"FAILED {call}: {exc}")
            (arguments.out / "checks.log").write_text(log.getvalue())
    history = speed.history()
    lowest: dict[str, dict] = {}
    for entry in history:
        key = entry["exercise"]
        if key not in lowest or entry["ratio"] < lowest[key]["ratio"]:
            lowest[key] = {"ratio": entry["ratio"], "bar": entry["bar"], "margin": round(entry["ratio"] / entry["bar"] - 1, 3)}
    report.update(history=history, lowest=lowest, outcomes=outcomes, seconds=round(time.perf_counter() - started, 1))
    (arguments.out / "checks.json").write_text(json.dumps(report, indent=1, default=str))
    (arguments.out / "checks.log").write_text(log.getvalue())
    print(json.dumps({"lowest": lowest, "seconds": report["seconds"]}, indent=1))


if __name__ == "__main__":
    main()
