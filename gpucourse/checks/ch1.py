"""Checks for the chapter 1 exercises (solutions/ch01_introduction.ipynb)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..arrays import random_array, to_device
from ..device import DeviceInfo, current_device
from ..sizes import problem_size
from . import array_problems, fail, passed, run_guarded


def check_add_arrays(add_arrays: Callable[..., object]) -> None:
    """Exercise 1.1: `add_arrays(out, x, y)` writes x + y into `out` for any length."""
    n = problem_size("exercise_1d")
    x, y = random_array(n, np.float32, seed=11), random_array(n, np.float32, seed=12)
    got, problems = run_guarded(add_arrays, (n,), np.float32, to_device(x), to_device(y))
    problems += array_problems(got, x + y, what="out", rtol=1e-6,
                               coverage_hint="The number of blocks must be rounded up: blocks = ceil(n / threads_per_block).")
    fail(problems, "Exercise 1.1")
    passed(f"Exercise 1.1: add_arrays is right for n = {n} (not a multiple of the block size).")


def check_scale_rows(scale_rows: Callable[..., object]) -> None:
    """Exercise 1.2: `scale_rows(out, matrix, factors)` writes matrix[r, c] * factors[r] into out[r, c]."""
    rows, cols = problem_size("exercise_2d")
    matrix = random_array((rows, cols), np.float32, seed=21)
    factors = random_array(rows, np.float32, seed=22, low=0.5, high=2.0)
    got, problems = run_guarded(scale_rows, (rows, cols), np.float32, to_device(matrix), to_device(factors))
    expected = matrix * factors[:, None]
    problems += array_problems(got, expected, what="out", rtol=1e-6,
                               coverage_hint="Cover both dimensions: one block count for the columns (x), one for the rows (y).")
    fail(problems, "Exercise 1.2")
    passed(f"Exercise 1.2: scale_rows is right on a {rows} x {cols} matrix.")


def check_fill_grid_stride(fill_kernel) -> None:
    """Exercise 1.3: the kernel `fill_kernel(out)` sets out[i] = 3 * i + 1 for every i, with any grid."""
    n = problem_size("exercise_1d")
    expected = (3 * np.arange(n) + 1).astype(np.int64)
    problems: list[str] = []
    for blocks, threads in ((2, 64), (1, 32)):
        got, found = run_guarded(lambda out, b=blocks, t=threads: fill_kernel[b, t](out), (n,), np.int64)
        found += array_problems(got, expected, what=f"out (launched as [{blocks}, {threads}])",
                                coverage_hint=f"A grid of {blocks * threads} threads must still reach all {n} elements: "
                                              "loop from cuda.grid(1) in steps of cuda.gridsize(1).")
        problems += found
        if found:
            break
    fail(problems, "Exercise 1.3")
    passed(f"Exercise 1.3: the grid-stride kernel fills all {n} elements with grids of 128 and 32 threads.")


def check_launch_config(launch_config: Callable[[int, int, DeviceInfo], tuple[int, int]]) -> None:
    """Exercise 1.4: `launch_config(n, threads_per_block, device)` returns (blocks, threads) or raises ValueError."""
    device = current_device()
    problems = []
    for n, threads in ((1, 32), (1000, 256), (1024, 256), (10**7 + 3, 128), (5, device.max_threads_per_block)):
        try:
            got = launch_config(n, threads, device)
        except Exception as exc:  # any exception here is a wrong answer, reported in words
            problems.append(f"launch_config({n}, {threads}, device) raised {type(exc).__name__}: {exc}; it is a valid request.")
            continue
        want = (-(-n // threads), threads)
        if tuple(got) != want:
            problems.append(f"launch_config({n}, {threads}, device) returned {got}; expected {want} (round the blocks up).")
    for threads in (device.max_threads_per_block + device.warp_size, 0, -32):
        try:
            launch_config(1000, threads, device)
        except ValueError as exc:
            if threads > 0 and str(device.max_threads_per_block) not in str(exc):
                problems.append(f"the error for threads_per_block={threads} should name the limit "
                                f"({device.max_threads_per_block}) so the student knows what to change; it says: {exc}")
        except Exception as exc:  # the wrong exception type is a wrong answer
            problems.append(f"threads_per_block={threads} raised {type(exc).__name__}; raise ValueError instead.")
        else:
            problems.append(f"threads_per_block={threads} was accepted; raise ValueError: the device cannot launch it.")
    fail(problems, "Exercise 1.4")
    passed(f"Exercise 1.4: launch_config rounds up and refuses blocks over {device.max_threads_per_block} threads.")
