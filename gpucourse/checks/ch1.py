"""Checks for the chapter 1 exercises (solutions/ch01_introduction.ipynb).

Values are compared bit for bit (a sum or a product of two float32 is exact to compute); a trace
of a small run shows how each warp reads and writes (coalescing, elements written by several
threads) and float64 arithmetic in a float32 kernel; on a GPU the student's kernel is also timed
beside a reference kernel and the copy ceiling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from numba import cuda

from ..arrays import random_array, to_device
from ..device import DeviceInfo, current_device
from ..sizes import problem_size
from . import array_problems, fail, passed
from .evidence import coalescing_problems, float64_problems, speed_note, speed_verdict, trace_of
from .launches import recorded_launches
from .runs import run_checked
from .trace import rewritten
from .work import kernel_work_problems

SMALL_1D = 300  # elements of a traced run: a few warps and a tail


@cuda.jit
def _add_reference(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def _scale_rows_reference(out, matrix, factors):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = matrix[row, col] * factors[row]


@cuda.jit
def _fill_reference(out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = 3 * i + 1


#: A block size other than the default for a second run of 1.1: not a power of two, so that blocks computed from a fixed
#: 256 (or rounded wrongly) leave elements unwritten or run past the end.
OTHER_THREADS = 96


def check_add_arrays(add_arrays: Callable[..., object]) -> None:
    """Exercise 1.1: `add_arrays(out, x, y, threads_per_block=256)` writes x + y into `out` for any length, in blocks of that size."""
    n = problem_size("exercise_1d")
    x, y = random_array(n, np.float32, seed=11), random_array(n, np.float32, seed=12)
    x_d, y_d = to_device(x), to_device(y)
    run = run_checked(add_arrays, (n,), np.float32, x_d, y_d)
    problems = run.problems or array_problems(run.got, x + y, what="out", rtol=0.0,
                                              coverage_hint="The number of blocks must be rounded up: blocks = ceil(n / threads_per_block).")
    fail(problems, "Exercise 1.1")
    problems = _block_size_problems(add_arrays, x, y)
    fail(problems, "Exercise 1.1")
    small = [("traced", "out", np.zeros(SMALL_1D, np.float32)), ("traced", "x", random_array(SMALL_1D, np.float32, seed=13)),
             ("traced", "y", random_array(SMALL_1D, np.float32, seed=14))]
    trace, note = trace_of(add_arrays, small)
    if trace is not None:
        problems += float64_problems(trace)
        problems += coalescing_problems(trace, "x", (SMALL_1D,), "Thread i of the grid should take element i = cuda.grid(1).")
    fail(problems, "Exercise 1.1")
    out = to_device(np.zeros(n, np.float32))
    blocks = -(-n // 256)
    slow, speed = speed_verdict("Exercise 1.1", "add_arrays", lambda: add_arrays(out, x_d, y_d),
                                lambda: _add_reference[blocks, 256](out, x_d, y_d), 12 * n, 4 * n,
                                ("Does it launch one kernel with one thread per element, in blocks of 128 threads or more? Blocks of 32 or 64 "
                                 "threads that move one element each are limited by the rate at which the GPU starts blocks (notebook 2.3)."))
    fail(slow, "Exercise 1.1")
    passed(f"Exercise 1.1: add_arrays is right for n = {n} (not a multiple of the block size) and with threads_per_block="
           f"{OTHER_THREADS}{speed}{note}.")
    speed_note("Exercise 1.1", "add_arrays")


def _block_size_problems(add_arrays: Callable[..., object], x: np.ndarray, y: np.ndarray) -> list[str]:
    """1.1's `threads_per_block` argument: the default launches blocks of 256, another value blocks of that size, right values."""
    n = SMALL_1D + 1  # odd, where the first run's length is even in the simulator
    x_d, y_d = to_device(x[:n]), to_device(y[:n])
    with recorded_launches(dry=True) as default:
        add_arrays(to_device(np.zeros(n, np.float32)), x_d, y_d)
    sizes = sorted({launch.threads[0] for launch in default})
    if sizes and sizes != [256]:
        return [f"called without threads_per_block, add_arrays launches blocks of {sizes[0]} threads: the default, "
                "threads_per_block=256, is the block size to launch."]
    try:
        run = run_checked(lambda out, a, b: add_arrays(out, a, b, threads_per_block=OTHER_THREADS), (n,), np.float32, x_d, y_d)
    except TypeError as exc:
        return [f"add_arrays(out, x, y, threads_per_block={OTHER_THREADS}) raised TypeError ({exc}): give add_arrays the "
                "argument threads_per_block=256 and launch blocks of that many threads."]
    sizes = sorted({launch.threads[0] for launch in run.launches})
    if sizes and sizes != [OTHER_THREADS]:
        return [f"add_arrays(out, x, y, threads_per_block={OTHER_THREADS}) launched blocks of {sizes[0]} threads: launch "
                "blocks of threads_per_block threads, and compute the number of blocks from it."]
    return run.problems or array_problems(
        run.got, x[:n] + y[:n], what=f"out (n = {n}, threads_per_block={OTHER_THREADS})", rtol=0.0,
        coverage_hint=f"With blocks of {OTHER_THREADS} threads, {n} elements need ceil({n} / {OTHER_THREADS}) = "
                      f"{-(-n // OTHER_THREADS)} blocks: compute the blocks from threads_per_block.")


def check_scale_rows(scale_rows: Callable[..., object]) -> None:
    """Exercise 1.2: `scale_rows(out, matrix, factors)` writes matrix[r, c] * factors[r] into out[r, c], coalesced."""
    rows, cols = problem_size("exercise_2d")
    matrix = random_array((rows, cols), np.float32, seed=21)
    factors = random_array(rows, np.float32, seed=22, low=0.5, high=2.0)
    matrix_d, factors_d = to_device(matrix), to_device(factors)
    run = run_checked(scale_rows, (rows, cols), np.float32, matrix_d, factors_d)
    expected = matrix * factors[:, None]
    problems = run.problems or array_problems(run.got, expected, what="out", rtol=0.0,
                                              coverage_hint="Cover both dimensions: one block count for the columns (x), one for the rows (y).")
    fail(problems, "Exercise 1.2")
    shapes = sorted({launch.threads[:2] for launch in run.launches})
    if shapes and shapes != [(16, 8)]:
        fail([f"scale_rows launches blocks of {shapes[0][0]} x {shapes[0][1]} threads; the exercise asks for 16 x 8: "
              "threads = (16, 8), 16 along x (the columns) and 8 along y (the rows)."], "Exercise 1.2")
    small = (12, 40)
    arguments = [("traced", "out", np.zeros(small, np.float32)), ("traced", "matrix", random_array(small, np.float32, seed=23)),
                 ("traced", "factors", random_array(small[0], np.float32, seed=24))]
    trace, note = trace_of(scale_rows, arguments)
    if trace is not None:
        problems += float64_problems(trace)
        problems += coalescing_problems(trace, "matrix", small,
                                        "In a NumPy (row-major) array the columns are contiguous: let x, the fastest thread index, "
                                        "walk the columns (col, row = cuda.grid(2)).")
    fail(problems, "Exercise 1.2")
    out = to_device(np.zeros((rows, cols), np.float32))
    grid = (-(-cols // 16), -(-rows // 8))  # the exercise's blocks of 16 x 8: on an H200 32 x 8 was 1.34x faster, a GPU's detail
    slow, speed = speed_verdict("Exercise 1.2", "scale_rows", lambda: scale_rows(out, matrix_d, factors_d),
                                lambda: _scale_rows_reference[grid, (16, 8)](out, matrix_d, factors_d), 8 * rows * cols, 4 * rows * cols,
                                "Which thread index walks the contiguous columns?")
    fail(slow, "Exercise 1.2")
    passed(f"Exercise 1.2: scale_rows is right on a {rows} x {cols} matrix, and its warps read neighbouring elements{speed}{note}.")
    speed_note("Exercise 1.2", "scale_rows")


def check_fill_grid_stride(fill_kernel) -> None:
    """Exercise 1.3: the kernel `fill_kernel(out)` sets out[i] = 3 * i + 1 for every i, with any grid, one thread per element."""
    n = problem_size("exercise_1d")
    expected = (3 * np.arange(n) + 1).astype(np.int64)
    problems: list[str] = []
    for blocks, threads in ((2, 64), (1, 32)):
        run = run_checked(lambda out, b=blocks, t=threads: fill_kernel[b, t](out), (n,), np.int64)
        found = run.problems + array_problems(run.got, expected, what=f"out (launched as [{blocks}, {threads}])", rtol=0.0,
                                              coverage_hint=f"A grid of {blocks * threads} threads must still reach all {n} elements: "
                                                            "loop from cuda.grid(1) in steps of cuda.gridsize(1).")
        problems += found
        if found:
            break
    fail(problems, "Exercise 1.3")
    trace, note = trace_of(lambda out: fill_kernel[2, 64](out), [("traced", "out", np.zeros(SMALL_1D, np.int64))])
    if trace is not None:
        repeated, most = rewritten(trace, "out")
        if repeated:
            problems.append(f"{repeated} of {SMALL_1D} elements were written by several threads (up to {most} times each) with a grid "
                            "of 2 blocks of 64: the values are right, but the work is done several times over. Step by "
                            "cuda.gridsize(1), the number of threads in the whole grid, not by the block's size or the number of blocks.")
        else:
            problems += coalescing_problems(trace, "out", (SMALL_1D,),
                                            "Let neighbouring threads take neighbouring elements: start at cuda.grid(1) and step by "
                                            "cuda.gridsize(1), rather than giving each thread a contiguous chunk.", write=True, itemsize=8)
    fail(problems, "Exercise 1.3")
    fail(kernel_work_problems(fill_kernel, _fill_reference, lambda size: [("out", np.zeros(size, np.int64))], "fill_kernel"), "Exercise 1.3")
    out = to_device(np.zeros(n, np.int64))
    sms = current_device().multiprocessors or 1
    slow, speed = speed_verdict("Exercise 1.3", "fill_kernel", lambda: fill_kernel[4 * sms, 256](out),
                                lambda: _fill_reference[4 * sms, 256](out), 8 * n, 8 * n,
                                "How many elements does each thread write, and are a warp's writes neighbours?")
    fail(slow, "Exercise 1.3")
    passed(f"Exercise 1.3: the grid-stride kernel fills all {n} elements with grids of 128 and 32 threads, each element written "
           f"once{speed}{note}.")
    speed_note("Exercise 1.3", "fill_kernel")


#: 1.4 is also asked about a device whose limit is not 1024 threads per block (as the simulator's and most GPUs' is).
OTHER_LIMIT = 512


def _launch_config_problems(launch_config: Callable[[int, int, DeviceInfo], tuple[int, int]], device: DeviceInfo) -> list[str]:
    """What is wrong with `launch_config` on one device: wrong (blocks, threads), a wrong refusal or error, a limit not named."""
    limit = device.max_threads_per_block
    other = "" if limit == current_device().max_threads_per_block else f" on a device whose limit is {limit} threads per block"
    problems = []
    for n, threads in ((1, 32), (1000, 256), (1024, 256), (10**7 + 3, 128), (999, 96), (5, limit)):
        try:
            got = launch_config(n, threads, device)
        except Exception as exc:  # any exception here is a wrong answer, reported in words
            problems.append(f"launch_config({n}, {threads}, device) raised {type(exc).__name__}{other}: {exc}; it is a valid request.")
            continue
        want = (-(-n // threads), threads)
        if not isinstance(got, (tuple, list)) or tuple(got) != want:
            problems.append(f"launch_config({n}, {threads}, device) returned {got!r}; expected {want} (round the blocks up).")
    for threads in (limit + device.warp_size, 0, -32):
        try:
            launch_config(1000, threads, device)
        except ValueError as exc:
            if threads > 0 and str(limit) not in str(exc):
                problems.append(f"the error for threads_per_block={threads}{other} should name the limit, {limit}: "
                                f"it says \"{exc}\". Put device.max_threads_per_block in the message.")
        except Exception as exc:  # the wrong exception type is a wrong answer
            problems.append(f"threads_per_block={threads} raised {type(exc).__name__}; raise ValueError instead.")
        else:
            fixed = " Compare with device.max_threads_per_block, not a fixed number." if other else ""
            problems.append(f"threads_per_block={threads} was accepted{other}; raise ValueError: the device cannot launch it.{fixed}")
    return problems


def check_launch_config(launch_config: Callable[[int, int, DeviceInfo], tuple[int, int]]) -> None:
    """Exercise 1.4: `launch_config(n, threads_per_block, device)` returns (blocks, threads) or raises ValueError naming the limit."""
    device = current_device()
    problems = _launch_config_problems(launch_config, device)
    fail(problems, "Exercise 1.4")
    smaller = dataclasses.replace(device, max_threads_per_block=OTHER_LIMIT, max_block_dim=(OTHER_LIMIT, OTHER_LIMIT, 64))
    fail(_launch_config_problems(launch_config, smaller), "Exercise 1.4")
    passed(f"Exercise 1.4: launch_config rounds up and refuses blocks over the device's limit ({device.max_threads_per_block} "
           f"threads here, {OTHER_LIMIT} on a smaller device), naming it.")
