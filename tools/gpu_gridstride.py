"""Why a grid-stride answer to 1.1, 1.2 or 3.1 is slow on a GPU: each exercise's reference beside loops written three ways.

    python3 tools/gpu_gridstride.py OUT_DIR

For each exercise, at the check's own size, it times (with `gpucourse.checks.speed.compare_speed`, paired with the
reference, as a check does) a `range(start, stop, step)` grid-stride loop and a `while i < n: ...; i += stride` loop, each
launched with one thread per element (a full grid), with a fixed grid of 4 blocks per multiprocessor and with as many
threads as the GPU holds at once (multiprocessors x max threads per multiprocessor); it reads the PTX
of each (`gpucourse.checks.speed.ptx_facts`: instructions, those before the first global access, integer divisions) and
counts the SASS instructions where nvdisasm is on the PATH. Then it runs the exercise's real check on the full-grid range
answer and keeps its message. Writes OUT_DIR/gridstride.json and OUT_DIR/gridstride.md. A maintainer's tool (GPU only),
about a minute on an H200.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gpucourse  # noqa: E402, I001  (first: it chooses the mode before numba.cuda loads)

# isort: split
from numba import cuda  # noqa: E402

from gpucourse import compilation  # noqa: E402
from gpucourse.checks import CheckFailed, ch1, ch3_memory  # noqa: E402
from gpucourse.checks.speed import compare_speed, ptx_facts  # noqa: E402


@cuda.jit
def add_range(out, x, y):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = x[i] + y[i]


@cuda.jit
def add_while(out, x, y):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        out[i] = x[i] + y[i]
        i += stride


@cuda.jit
def scale_rows_range(out, matrix, factors):
    col0, row0 = cuda.grid(2)
    cols, rows = cuda.gridsize(2)
    for row in range(row0, out.shape[0], rows):
        for col in range(col0, out.shape[1], cols):
            out[row, col] = matrix[row, col] * factors[row]


@cuda.jit
def scale_rows_while(out, matrix, factors):
    col0, row = cuda.grid(2)
    cols, rows = cuda.gridsize(2)
    while row < out.shape[0]:
        col = col0
        while col < out.shape[1]:
            out[row, col] = matrix[row, col] * factors[row]
            col += cols
        row += rows


@cuda.jit
def scale_range(out, a, factor):
    col0, row0 = cuda.grid(2)
    cols, rows = cuda.gridsize(2)
    for row in range(row0, a.shape[0], rows):
        for col in range(col0, a.shape[1], cols):
            out[row, col] = a[row, col] * factor


@cuda.jit
def scale_while(out, a, factor):
    col0, row = cuda.grid(2)
    cols, rows = cuda.gridsize(2)
    while row < a.shape[0]:
        col = col0
        while col < a.shape[1]:
            out[row, col] = a[row, col] * factor
            col += cols
        row += rows


def add_arrays_answer(out, x, y, threads_per_block=256):
    """1.1 as the rejected answer wrote it: a range() grid-stride loop, one pass per thread, blocks of 256."""
    add_range[-(-out.size // threads_per_block), threads_per_block](out, x, y)


def scale_rows_answer(out, matrix, factors):
    """1.2 as the rejected answer wrote it: 2D range() grid-stride loops over blocks of 16 x 8, a full grid."""
    scale_rows_range[(-(-out.shape[1] // 16), -(-out.shape[0] // 8)), (16, 8)](out, matrix, factors)


def scale_matrix_answer(out, a, factor):
    """3.1 as the rejected answer wrote it: 2D range() grid-stride loops over blocks of 32 x 8, a full grid."""
    scale_range[(-(-a.shape[1] // 32), -(-a.shape[0] // 8)), (32, 8)](out, a, factor)


def sass_count(kernel) -> int | None:
    """SASS instructions of the kernel's first compiled version (None without nvdisasm)."""
    if shutil.which("nvdisasm") is None:
        return None
    return compilation.count_matches(compilation.sass(kernel), r"^\s+/\*[0-9a-f]{4}\*/\s+[A-Z@]")


def measure(label, reference, variants, args, bytes_moved, bytes_per_array):
    """Rows of one exercise: each variant's paired ratio to the reference and the facts of its compiled code."""
    rows = []
    ref_kernel, ref_grid, ref_block = reference

    def run_reference():
        ref_kernel[ref_grid, ref_block](*args)

    out = args[0]
    run_reference()
    want = gpucourse.to_host(out)
    for name, kernel, grid, block in [("reference", *reference), *variants]:
        def call(kernel=kernel, grid=grid, block=block):
            kernel[grid, block](*args)

        out.copy_to_device(gpucourse.poisoned(want.shape, want.dtype))
        call()
        right = bool(np.array_equal(gpucourse.to_host(out), want))
        comparison = compare_speed(call, run_reference, bytes_moved, bytes_per_array, f"{label} {name}")
        facts = ptx_facts(compilation.ptx(kernel))
        rows.append({"exercise": label, "variant": name, "right": right, "grid": [int(v) for v in np.atleast_1d(grid)],
                     "block": [int(v) for v in np.atleast_1d(block)],
                     "ratio": round(comparison.ratio, 3), "gbs": round(comparison.mine_gbs), "reference_gbs": round(comparison.reference_gbs),
                     "ptx_instructions": facts.instructions, "ptx_setup": facts.setup, "divisions": list(facts.divisions),
                     "registers": compilation.resource_usage(kernel)[0].registers, "sass_instructions": sass_count(kernel)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def verdict(check, answer) -> str:
    """The check's message on `answer` (its success line or its failure)."""
    try:
        check(answer)
        return "passed"
    except CheckFailed as failed:
        return str(failed)
    except Exception as error:  # noqa: BLE001 - a record keeps whatever ended the check
        return f"{type(error).__name__}: {error}"


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    device = gpucourse.current_device()
    sms = device.multiprocessors or 1
    resident = sms * (device.max_threads_per_multiprocessor or 2048)  # threads the GPU runs at once
    rows, verdicts = [], {}

    n = gpucourse.problem_size("exercise_1d")
    x, y = (gpucourse.to_device(gpucourse.random_array(n, np.float32, seed=s)) for s in (1, 2))
    out = gpucourse.to_device(np.zeros(n, np.float32))
    full, fixed, filled = -(-n // 256), 4 * sms, resident // 256
    rows += measure("1.1", (ch1._add_reference, full, 256),
                    [("range, full grid", add_range, full, 256), ("while, full grid", add_while, full, 256),
                     ("range, 4 blocks/SM", add_range, fixed, 256), ("while, 4 blocks/SM", add_while, fixed, 256),
                     ("range, GPU filled once", add_range, filled, 256), ("while, GPU filled once", add_while, filled, 256)],
                    (out, x, y), 12 * n, 4 * n)

    for label, reference, ranged, looped, block, extra in (
            ("1.2", ch1._scale_rows_reference, scale_rows_range, scale_rows_while, (16, 8), "factors"),
            ("3.1", ch3_memory._scale_reference, scale_range, scale_while, (32, 8), "factor")):
        rows_, cols = gpucourse.problem_size("exercise_2d" if label == "1.2" else "ch3_exercise_2d")
        a = gpucourse.to_device(gpucourse.random_array((rows_, cols), np.float32, seed=3))
        other = (gpucourse.to_device(gpucourse.random_array(rows_, np.float32, seed=4)) if extra == "factors" else np.float32(1.5))
        out2 = gpucourse.to_device(np.zeros((rows_, cols), np.float32))
        full2 = (-(-cols // block[0]), -(-rows_ // block[1]))
        fixed2 = (sms, 4)  # 4 blocks per SM
        filled2 = (sms, resident // sms // (block[0] * block[1]))  # as many threads as the GPU holds at once
        moved = 8 * rows_ * cols + (4 * rows_ if extra == "factors" else 0)
        rows += measure(label, (reference, full2, block),
                        [("range, full grid", ranged, full2, block), ("while, full grid", looped, full2, block),
                         ("range, 4 blocks/SM", ranged, fixed2, block), ("while, 4 blocks/SM", looped, fixed2, block),
                         ("range, GPU filled once", ranged, filled2, block), ("while, GPU filled once", looped, filled2, block)],
                        (out2, a, other), moved, 4 * rows_ * cols)

    verdicts["1.1"] = verdict(ch1.check_add_arrays, add_arrays_answer)
    verdicts["1.2"] = verdict(ch1.check_scale_rows, scale_rows_answer)
    verdicts["3.1"] = verdict(ch3_memory.check_scale_matrix, scale_matrix_answer)
    record = {"device": gpucourse.current_device().name, "numba_cuda": __import__("numba_cuda").__version__,
              "seconds": round(time.perf_counter() - started, 1), "rows": rows, "verdicts": verdicts}
    (out_dir / "gridstride.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    columns = ("exercise", "variant", "right", "grid", "block", "ratio", "gbs", "ptx_instructions", "ptx_setup", "divisions", "registers",
               "sass_instructions")
    lines = [f"# Grid-stride loops beside the references ({record['device']}, numba-cuda {record['numba_cuda']})", "",
             "ratio: to the reference's speed, paired; ptx_setup: PTX instructions before the first global access.", "",
             "| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(" ".join(v) if isinstance(v, list) and v and isinstance(v[0], str) else str(v if v not in (None, []) else "-")
                                for v in (r[c] for c in columns)) + " |" for r in rows]
    lines += ["", "## The checks on the full-grid range() answers", ""] + [f"- {k}: {v}" for k, v in verdicts.items()]
    (out_dir / "gridstride.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "gridstride-out"))
