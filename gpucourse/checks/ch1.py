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
from hypothesis import strategies as st
from numba import cuda

from ..arrays import random_array, to_device
from ..device import DeviceInfo, current_device
from ..sizes import problem_size
from . import array_problems, fail, passed
from .evidence import coalescing_problems, float64_problems, speed_note, speed_verdict, trace_of
from .launches import recorded_launches
from .properties import changed_input_problems, edge_sizes, sizes_from, smallest_failure
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
    """Exercise 1.1: `add_arrays(out, x, y, threads_per_block=256)` writes x + y into `out` for any length, in blocks of that size.

    Properties a right answer has, each tested on generated cases (`_add_case_problem`):

    ==============================================  ==============================================================
    property                                        edge classes generated
    ==============================================  ==============================================================
    out == x + y bit for bit, every element         n at k * 32, k * threads_per_block and one either side; n = 1
    blocks of threads_per_block threads             threads_per_block not a multiple of 32 (33, 96, 100), default
    no write past the end of out                    n one past a multiple of the block size
    x and y unchanged; a kernel does the work       every case (an answer on the host launches nothing)
    float32 arithmetic, coalesced                   a traced run of SMALL_1D elements
    ==============================================  ==============================================================
    """
    n = problem_size("exercise_1d")
    x, y = random_array(n, np.float32, seed=11), random_array(n, np.float32, seed=12)
    x_d, y_d = to_device(x), to_device(y)
    run = run_checked(add_arrays, (n,), np.float32, x_d, y_d)
    problems = (run.problems
                or array_problems(run.got, x + y, what="out", rtol=0.0,
                                  coverage_hint="The number of blocks must be rounded up: blocks = ceil(n / threads_per_block)."))
    fail(problems, "Exercise 1.1")
    found = smallest_failure(lambda case: _add_case_problem(add_arrays, *case), ADD_CASES, examples=ADD_EXAMPLES, max_examples=6, shrink_calls=10)
    if found:
        fail([found[1]], "Exercise 1.1")
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
    passed(f"Exercise 1.1: add_arrays is right for n = {n} (not a multiple of the block size) and on generated lengths around "
           f"multiples of 32 and of the block size, with threads_per_block={OTHER_THREADS} and other sizes{speed}{note}.")
    speed_note("Exercise 1.1", "add_arrays")



#: 1.1's generated cases: (n, threads_per_block or None for the default), block sizes that are not multiples of 32 included.
ADD_THREADS = (None, 32, 33, 64, 96, 100, 128, 160)
ADD_CASES = st.tuples(sizes_from(edge_sizes((32, 96, 100, 128, 256), 520)), sizes_from(ADD_THREADS))
ADD_EXAMPLES = ((SMALL_1D + 1, OTHER_THREADS), (257, None), (34, 33))


def _add_case_problem(add_arrays: Callable[..., object], n: int, threads: int | None) -> str | None:
    """1.1 on one generated case: the launch's block size (the default 256, or `threads`), right values, inputs unchanged."""
    x, y = random_array(n, np.float32, seed=n), random_array(n, np.float32, seed=n + 1)
    x_d, y_d = to_device(x), to_device(y)
    call = f"add_arrays(out, x, y{'' if threads is None else f', threads_per_block={threads}'})"
    want = 256 if threads is None else threads
    if threads is None:
        with recorded_launches(dry=True) as default:
            add_arrays(to_device(np.zeros(n, np.float32)), x_d, y_d)
        sizes = sorted({launch.threads[0] for launch in default})
        if sizes and sizes != [256]:
            return (f"called without threads_per_block, add_arrays launches blocks of {sizes[0]} threads: the default, "
                    "threads_per_block=256, is the block size to launch.")
    try:
        run = run_checked(lambda out, a, b: add_arrays(out, a, b) if threads is None else add_arrays(out, a, b, threads_per_block=threads),
                          (n,), np.float32, x_d, y_d)
    except TypeError as exc:
        return (f"{call} raised TypeError ({exc}): give add_arrays the argument threads_per_block=256 and launch blocks of that "
                "many threads.")
    sizes = sorted({launch.threads[0] for launch in run.launches})
    if not run.problems and sizes and sizes != [want]:
        return (f"{call} launched blocks of {sizes[0]} threads (n = {n}): launch blocks of threads_per_block threads (any size the device "
                "accepts, not only multiples of 32), and compute the number of blocks from it.")
    found = run.problems or changed_input_problems({"x": (x_d, x), "y": (y_d, y)}, "add_arrays")
    found = found or array_problems(
        run.got, x + y, what=f"out (n = {n}, threads_per_block={want})", rtol=0.0,
        coverage_hint=f"With blocks of {want} threads, {n} elements need ceil({n} / {want}) = {-(-n // want)} blocks: compute the "
                      "blocks from threads_per_block.")
    return f"{found[0]} (the smallest failing case found: {call} with n = {n})" if found else None


def check_scale_rows(scale_rows: Callable[..., object]) -> None:
    """Exercise 1.2: `scale_rows(out, matrix, factors)` writes matrix[r, c] * factors[r] into out[r, c], coalesced.

    Properties, each tested on generated shapes (`_scale_case_problem`): out == matrix * factors[:, None] bit for bit for
    rows around multiples of 8 and columns around multiples of 16 (one either side; a single row or column); blocks of
    16 x 8 threads; matrix and factors unchanged; a kernel does the work; float32, with x walking the columns (a trace).
    """
    rows, cols = problem_size("exercise_2d")
    matrix = random_array((rows, cols), np.float32, seed=21)
    factors = random_array(rows, np.float32, seed=22, low=0.5, high=2.0)
    matrix_d, factors_d = to_device(matrix), to_device(factors)
    run = run_checked(scale_rows, (rows, cols), np.float32, matrix_d, factors_d)
    expected = matrix * factors[:, None]
    problems = (run.problems
                or array_problems(run.got, expected, what="out", rtol=0.0,
                                  coverage_hint="Cover both dimensions: one block count for the columns (x), one for the rows (y)."))
    fail(problems, "Exercise 1.2")
    shapes = sorted({launch.threads[:2] for launch in run.launches})
    if shapes and shapes != [(16, 8)]:
        fail([f"scale_rows launches blocks of {shapes[0][0]} x {shapes[0][1]} threads; the exercise asks for 16 x 8: "
              "threads = (16, 8), 16 along x (the columns) and 8 along y (the rows)."], "Exercise 1.2")
    found = smallest_failure(lambda shape: _scale_case_problem(scale_rows, shape), SCALE_SHAPES, examples=((1, 1), (9, 17)),
                             max_examples=3, shrink_calls=6)
    if found:
        fail([found[1]], "Exercise 1.2")
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


#: 1.2's generated shapes: rows around multiples of 8 (the block's y), columns around multiples of 16 (its x).
SCALE_SHAPES = st.tuples(sizes_from(edge_sizes((8,), 17)), sizes_from(edge_sizes((16,), 33)))


def _scale_case_problem(scale_rows: Callable[..., object], shape: tuple[int, int]) -> str | None:
    """1.2 on one generated shape: right values, inputs unchanged, a kernel launched."""
    rows, cols = shape
    matrix, factors = random_array(shape, np.float32, seed=rows * 100 + cols), random_array(rows, np.float32, seed=cols, low=0.5, high=2)
    matrix_d, factors_d = to_device(matrix), to_device(factors)
    run = run_checked(scale_rows, shape, np.float32, matrix_d, factors_d)
    found = (run.problems
             or array_problems(run.got, matrix * factors[:, None], what=f"out ({rows} x {cols})", rtol=0.0,
                               coverage_hint="Cover both dimensions: blocks = (ceil(columns / 16), ceil(rows / 8))."))
    return f"{found[0]} (the smallest failing shape found: {rows} x {cols})" if found else None


def check_fill_grid_stride(fill_kernel) -> None:
    """Exercise 1.3: the kernel `fill_kernel(out)` sets out[i] = 3 * i + 1 for every i, with any grid, one thread per element.

    Properties, each tested on generated cases (`_fill_case_problem`; the work by `gpucourse.checks.work`):

    =================================================  ===========================================================
    property                                           edge classes generated
    =================================================  ===========================================================
    out[i] == 3 * i + 1 for every i, with any grid     grids smaller and larger than n; blocks of 1, 7, 33 threads;
                                                       n around multiples of 32 and of the grid; n = 1
    each element written once                          a traced run with 2 blocks of 64 (the stride is the grid)
    the work grows as n, like the reference's          one thread per element at two sizes: the lines the
                                                       simulated threads run, beside the reference's
    neighbouring threads write neighbouring elements   the traced run
    =================================================  ===========================================================
    """
    n = problem_size("exercise_1d")
    found = smallest_failure(lambda case: _fill_case_problem(fill_kernel, *case), FILL_CASES, examples=FILL_EXAMPLES, max_examples=5, shrink_calls=10)
    if found:
        fail([found[1]], "Exercise 1.3")
    problems: list[str] = []
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
    # the work measure before the full-size run: an answer of about n^2 work would not end there on a GPU
    fail(kernel_work_problems(fill_kernel, _fill_reference, lambda size: [("out", np.zeros(size, np.int64))], "fill_kernel"), "Exercise 1.3")
    expected = (3 * np.arange(n) + 1).astype(np.int64)
    for blocks, threads in ((2, 64), (1, 32)):
        run = run_checked(lambda out, b=blocks, t=threads: fill_kernel[b, t](out), (n,), np.int64)
        found = run.problems + array_problems(run.got, expected, what=f"out (launched as [{blocks}, {threads}])", rtol=0.0,
                                              coverage_hint=f"A grid of {blocks * threads} threads must still reach all {n} elements: "
                                                            "loop from cuda.grid(1) in steps of cuda.gridsize(1).")
        problems += found
        if found:
            break
    fail(problems, "Exercise 1.3")
    out = to_device(np.zeros(n, np.int64))
    sms = current_device().multiprocessors or 1
    slow, speed = speed_verdict("Exercise 1.3", "fill_kernel", lambda: fill_kernel[4 * sms, 256](out),
                                lambda: _fill_reference[4 * sms, 256](out), 8 * n, 8 * n,
                                "How many elements does each thread write, and are a warp's writes neighbours?")
    fail(slow, "Exercise 1.3")
    passed(f"Exercise 1.3: the grid-stride kernel fills all {n} elements with grids of 128 and 32 threads, each element written "
           f"once{speed}{note}.")
    speed_note("Exercise 1.3", "fill_kernel")


#: 1.3's generated cases: (blocks, threads, n), grids of any shape (threads not multiples of 32) below and above n.
FILL_CASES = st.tuples(sizes_from((1, 2, 3, 5)), sizes_from((1, 7, 32, 33, 64, 96)), sizes_from(edge_sizes((32, 64, 96), 300)))
FILL_EXAMPLES = ((2, 64, 300), (1, 32, 65), (3, 33, 1), (5, 7, 97))


def _fill_case_problem(fill_kernel, blocks: int, threads: int, n: int) -> str | None:
    """1.3 on one generated grid and length: every element 3 * i + 1, nothing outside out written."""
    run = run_checked(lambda out: fill_kernel[blocks, threads](out), (n,), np.int64)
    found = run.problems or array_problems(
        run.got, 3 * np.arange(n, dtype=np.int64) + 1, what=f"out (n = {n}, launched as [{blocks}, {threads}])", rtol=0.0,
        coverage_hint=f"A grid of {blocks * threads} threads must reach all {n} elements, whatever the grid: loop from "
                      "cuda.grid(1) in steps of cuda.gridsize(1).")
    return f"{found[0]} (the smallest failing case found: fill_kernel[{blocks}, {threads}] on n = {n})" if found else None


#: 1.4 is also asked about a device whose limit is not 1024 threads per block (as the simulator's and most GPUs' is).
OTHER_LIMIT = 512


def _device_with_limit(limit: int) -> DeviceInfo:
    """The current device, or one like it whose limit is `limit` threads per block (a fresh object: an answer cannot change the check's)."""
    device = current_device()
    if limit == device.max_threads_per_block:
        return dataclasses.replace(device)
    return dataclasses.replace(device, max_threads_per_block=limit, max_block_dim=(limit, limit, 64))


def _config_case_problem(launch_config: Callable[[int, int, DeviceInfo], tuple[int, int]], limit: int, n: int, threads: int) -> str | None:
    """1.4 on one case: (ceil(n / threads), threads) in ints for 1 <= threads <= limit, else ValueError naming the limit."""
    device = _device_with_limit(limit)
    other = "" if limit == current_device().max_threads_per_block else f" on a device whose limit is {limit} threads per block"
    valid = 0 < threads <= limit
    try:
        got = launch_config(n, threads, device)
    except ValueError as exc:
        if valid:
            hint = (" Any block size from 1 to the limit runs (a block that is not a multiple of 32 has an idle part of a warp, "
                    "but it is valid)." if threads % device.warp_size else "")
            return f"launch_config({n}, {threads}, device) raised ValueError{other}: {exc}; it is a valid request.{hint}"
        if threads > 0 and str(limit) not in str(exc):
            return (f"the error for threads_per_block={threads}{other} should name the limit, {limit}: it says \"{exc}\". Put "
                    "device.max_threads_per_block in the message.")
        return None
    except Exception as exc:  # any other exception is a wrong answer, reported in words
        if valid:
            return f"launch_config({n}, {threads}, device) raised {type(exc).__name__}{other}: {exc}; it is a valid request."
        return f"threads_per_block={threads} raised {type(exc).__name__}{other}; raise ValueError instead."
    if not valid:
        fixed = " Compare with device.max_threads_per_block, not a fixed number." if other or threads == limit + 1 else ""
        return f"threads_per_block={threads} was accepted{other}; raise ValueError: the device cannot launch it.{fixed}"
    want = (-(-n // threads), threads)
    if not isinstance(got, (tuple, list)) or tuple(got) != want:
        return f"launch_config({n}, {threads}, device) returned {got!r}{other}; expected {want} (round the blocks up)."
    if not all(isinstance(value, (int, np.integer)) and not isinstance(value, bool) for value in got):
        return (f"launch_config({n}, {threads}, device) returned {got!r}: a launch takes whole numbers; return ints "
                "(math.ceil or -(-n // threads) give one; numpy.ceil gives a float).")
    return None


def _config_examples(limit: int) -> list[tuple[int, int, int]]:
    """1.4's first cases on a device of `limit` threads per block: the book's sizes, then block sizes the device refuses."""
    cases = [(1, 32), (1000, 256), (1024, 256), (10**7 + 3, 128), (999, 96), (5, limit), (1000, limit + 32), (1000, 0), (1000, -32)]
    return [(limit, n, threads) for n, threads in cases]


#: 1.4's generated cases: the device's limit, n, and a block size at every edge (1, around 32, not a multiple of 32,
#: around the limit: limit - 1, limit, limit + 1; zero and negative).
CONFIG_LIMITS = (1024, OTHER_LIMIT, 768, 640, 256)
CONFIG_N = (1, 2, 31, 32, 33, 255, 256, 257, 999, 1000, 1023, 1024, 1025, 10**7 + 3, 2**31 - 1)
CONFIG_CASES = sizes_from(CONFIG_LIMITS).flatmap(lambda limit: st.tuples(
    st.just(limit), sizes_from(CONFIG_N),
    sizes_from((1, 2, 31, 32, 33, 96, 100, 255, limit - 1, limit, limit + 1, limit + 32, 2 * limit, 0, -1, -32))))


def check_launch_config(launch_config: Callable[[int, int, DeviceInfo], tuple[int, int]]) -> None:
    """Exercise 1.4: `launch_config(n, threads_per_block, device)` returns (blocks, threads) or raises ValueError naming the limit.

    Properties, each tested on generated cases (`_config_case_problem`): for every 1 <= threads_per_block <= the device's
    limit (multiples of 32 or not, the limit itself) it returns (ceil(n / threads_per_block), threads_per_block) in ints, for
    n from 1 to 2^31 - 1; for 0, negative sizes and every size over the limit (the limit + 1 too) it raises ValueError whose
    message names the limit; the limit is read from the device (devices of 1024, 768, 640, 512 and 256 threads per block).
    """
    device = current_device()
    examples = _config_examples(device.max_threads_per_block) + _config_examples(OTHER_LIMIT)
    found = smallest_failure(lambda case: _config_case_problem(launch_config, *case), CONFIG_CASES, examples=examples, max_examples=80)
    if found:
        limit, n, threads = found[0]
        fail([f"{found[1]} (the smallest failing case found: n = {n}, threads_per_block = {threads}, a limit of {limit})"], "Exercise 1.4")
    passed(f"Exercise 1.4: launch_config rounds up and refuses blocks over the device's limit ({device.max_threads_per_block} "
           f"threads here, and {', '.join(map(str, CONFIG_LIMITS[1:]))} on other devices), naming it, and accepts any size up to it.")
