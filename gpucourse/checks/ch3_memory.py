"""Checks for the chapter 3 memory exercises (solutions/ch03_memory.ipynb).

Right values are checked as everywhere (poisoned outputs, guard cells sized from the launch, a NumPy
reference, bit for bit where the result is exact). What makes these exercises different is *how*
memory is touched, which the values do not show: `gpucourse.checks.trace` watches a small run (in
this process in the simulator, replayed in a simulator process on a GPU) and the checks count the
32-byte sectors of each warp request (coalescing), the passes of each shared-memory request (bank
conflicts) and the shared-memory races. On a GPU, racecheck and timings add what only a GPU shows;
overlap of copies and kernels exists only there, so exercise 3.4 times it there.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import cuda

from .. import mode
from ..arrays import random_array, to_device, to_host
from ..kernels.reductions import partial_sum_kernel  # the speed reference: chapter 5's tree, one load per thread
from ..sizes import problem_size
from ..timing import benchmark
from . import array_problems, fail, passed
from .evidence import coalescing_problems, float64_problems, racecheck_problems, speed_note, speed_verdict, trace_naming_races, trace_of
from .runs import race_repeats, run_checked
from .trace import (  # noqa: F401  (re-exported: the chapter's tests and notebooks use these names)
    Access,
    ReplayError,
    first_request_example,
    race_problem,
    replayed_trace,
    sectors_per_request,
    shared_passes_per_request,
    trace_accesses,
    traced_device_array,
    traced_run,
    uncoalesced,
)

# ---------------------------------------------------------------------------------------------
# Exercise 3.1: fix an uncoalesced kernel.


@cuda.jit
def _scale_reference(out, a, factor):
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[row, col] = a[row, col] * factor


def check_scale_matrix(scale_matrix: Callable[..., object]) -> None:
    """Exercise 3.1: `scale_matrix(out, a, factor)` writes a * factor with coalesced reads and writes, blocks of 32 x 8."""
    rows, cols = problem_size("ch3_exercise_2d")
    a = random_array((rows, cols), np.float32, seed=31)
    factor = np.float32(1.5)
    a_device = to_device(a)
    run = run_checked(scale_matrix, (rows, cols), np.float32, a_device, factor)
    problems = run.problems + array_problems(run.got, a * factor, what="out", rtol=0.0,
                                             coverage_hint="Does the grid cover the columns with x and the rows with y?")
    fail(problems, "Exercise 3.1")
    small = (24, 40)  # a few warps are enough to see the pattern
    arguments = [("traced", "out", np.zeros(small, np.float32)), ("traced", "a", random_array(small, np.float32, seed=32)),
                 ("value", "factor", factor)]
    trace, note = trace_of(scale_matrix, arguments)
    if trace is not None:
        problems += float64_problems(trace)
        advice = "Let x (the fastest thread index) walk the columns, the last index of a NumPy array."
        problems += coalescing_problems(trace, "a", small, advice) or coalescing_problems(trace, "out", small, advice, write=True)
        shapes = {launch.threads for launch in trace.launches}
        if not problems and shapes != {(32, 8, 1)}:
            shape = next(iter(shapes))
            problems.append(f"your blocks are {shape[0]} x {shape[1]} threads: a warp then covers {max(1, 32 // shape[0])} rows of "
                            f"{min(shape[0], 32)} floats, {max(1, 32 // shape[0])} separate pieces of memory instead of one row "
                            "of 32 neighbours. Keep blocks of 32 x 8 (32 threads along x).")
    fail(problems, "Exercise 3.1")
    out = to_device(np.zeros_like(a))
    grid = (-(-cols // 32), -(-rows // 8))
    slow, speed = speed_verdict("Exercise 3.1", "scale_matrix", lambda: scale_matrix(out, a_device, factor),
                                lambda: _scale_reference[grid, (32, 8)](out, a_device, factor), 2 * a.nbytes, a.nbytes,
                                "How far apart are the elements that the 32 threads of a warp read?")
    fail(slow, "Exercise 3.1")
    sectors = sectors_per_request(trace.accesses, "a", 4) if trace is not None else float("nan")
    passed(f"Exercise 3.1: scale_matrix is right on a {rows} x {cols} matrix, and each warp request touches {sectors:.1f} "
           f"sectors of 32 bytes{speed}{note}.")
    speed_note("Exercise 3.1", "scale_matrix")


# ---------------------------------------------------------------------------------------------
# Exercise 3.2: count the sectors a warp touches.


def check_sectors_per_warp(sectors_per_warp: Callable[[int, int, int], int]) -> None:
    """Exercise 3.2: `sectors_per_warp(offset, stride, itemsize)` counts the 32-byte sectors warp 0 touches."""
    from ..kernels.coalescing import warp_sectors

    rng = np.random.default_rng(32)
    cases = [(0, 1, 4), (1, 1, 4), (8, 1, 4), (0, 2, 4), (0, 8, 4), (0, 1, 8), (3, 1, 8), (0, 4, 8), (0, 32, 8)]
    cases += [(int(rng.integers(0, 33)), int(rng.integers(1, 33)), int(rng.choice([4, 8]))) for _ in range(40)]
    problems = []
    for offset, stride, itemsize in cases:
        expected = warp_sectors(offset, stride, itemsize)
        try:
            got = sectors_per_warp(offset, stride, itemsize)
        except Exception as exc:  # any exception is a wrong answer, reported in words
            problems.append(f"sectors_per_warp({offset}, {stride}, {itemsize}) raised {type(exc).__name__}: {exc}")
            break
        if got != expected:
            lanes = [(lane * stride + offset) * itemsize for lane in (0, 1, 31)]
            problems.append(f"sectors_per_warp({offset}, {stride}, {itemsize}) returned {got!r}; expected {expected}. "
                            f"Lanes 0, 1 and 31 read bytes {lanes[0]}, {lanes[1]} and {lanes[2]}: count the distinct "
                            "values of byte // 32 over all 32 lanes.")
            break
    fail(problems, "Exercise 3.2")
    passed(f"Exercise 3.2: sectors_per_warp agrees with the model on {len(cases)} offsets, strides and sizes.")


# ---------------------------------------------------------------------------------------------
# Exercise 3.3: remove a bank conflict.

WIDE = 64


def check_wide_row_sums(wide_row_sums: Callable[..., object]) -> None:
    """Exercise 3.3: `wide_row_sums(out, x)` sums each row of x (shape (m, 64)) through shared memory, without bank conflicts or races."""
    rows = problem_size("ch3_exercise_tiles")
    x = random_array((rows, WIDE), np.float32, seed=33)
    run = run_checked(wide_row_sums, (rows,), np.float32, to_device(x), repeats=race_repeats())
    expected = x.astype(np.float64).sum(axis=1).astype(np.float32)
    problems = run.problems + array_problems(run.got, expected, what="out", rtol=1e-5, atol=1e-5)
    small = random_array((64, WIDE), np.float32, seed=34)
    arguments = [("traced", "out", np.zeros(64, np.float32)), ("traced", "x", small)]
    trace, note = trace_naming_races(wide_row_sums, arguments, problems, "Exercise 3.3")
    fail(problems, "Exercise 3.3")
    checked, racecheck_note = racecheck_problems(wide_row_sums, arguments)
    problems += checked
    if trace is not None:
        problems += float64_problems(trace)
        passes = max(shared_passes_per_request(trace.accesses), shared_passes_per_request(trace.accesses, write=True))
        if passes > 1.0:
            row = (trace.shapes.get("shared") or (0, 0))[-1]
            problems.append(f"the warp's shared-memory requests need {passes:.1f} passes per request on average (1 without bank "
                            f"conflicts): the threads of a warp touch different words of one bank. With rows of {row} words, row t "
                            f"starts in bank ({row} * t) % 32: 64 words put every row in bank 0 (a 32-way conflict), 66 put rows t and "
                            "t + 16 together (2-way). Make each row 64 + 1 words long: with an odd length the 32 rows start in 32 "
                            "different banks.")
    fail(problems, "Exercise 3.3")
    where = "simulator trace" if mode.is_simulator() else "replayed in the simulator"
    shown = f"{passes:.1f}" if trace is not None else "?"
    passed(f"Exercise 3.3: wide_row_sums is right, has no race, and its shared-memory requests need {shown} pass(es) per warp "
           f"request ({where}){racecheck_note}{note}.")


# ---------------------------------------------------------------------------------------------
# Exercise 3.4: overlap transfers with compute.


def _recorded_offsets(p, overlapped: Callable[..., object]) -> list[tuple[int | None, int]]:
    """Run `overlapped(p)` and note, for each unit kernel launch, (its chunk's index, the offset passed)."""
    from ..kernels import transfers

    original = transfers.unit_kernel_launch
    calls: list[tuple[int | None, int]] = []

    def recording(a, offset, repeats, threads_per_block, stream=None):
        chunk = next((index for index, _, device_part in p.chunks if device_part is a), None)
        calls.append((chunk, int(offset)))
        return original(a, offset, repeats, threads_per_block, stream)

    transfers.unit_kernel_launch = recording
    try:
        overlapped(p)
    finally:
        transfers.unit_kernel_launch = original
    return calls


def check_overlapped(overlapped: Callable[..., object]) -> None:
    """Exercise 3.4: `overlapped(p)` runs the StagedPipeline p chunk by chunk on its streams, and beats the sequential version."""
    from numba import cuda as numba_cuda

    from ..kernels import transfers

    n, streams = problem_size("ch3_exercise_async")
    p = transfers.make_pipeline(n, streams, problem_size("ch3_threads_per_block"))
    p.reset()
    transfers.run_sequential(p)  # the reference: the same kernel on the whole array (its result is exact to compare)
    numba_cuda.synchronize()
    expected = to_host(p.host).copy()
    p.reset()
    p.device.copy_to_device(np.full(n, np.nan, np.float32))  # poison: a chunk never copied in stays NaN
    calls = _recorded_offsets(p, overlapped)
    numba_cuda.synchronize()
    result = to_host(p.host)
    step = n // streams
    problems = []
    wrong = [(chunk, offset) for chunk, offset in calls if chunk is not None and offset != chunk * step]
    if wrong:
        chunk, offset = wrong[0]
        problems.append(f"chunk {chunk}'s kernel got offset {offset}; its first element is element {chunk * step} of the whole array "
                        "(index * len(host_part)). The kernel computes each element from its global index, so a wrong offset "
                        "gives slightly different values.")
    problems += array_problems(result, expected, what="p.host after one run from zeros", rtol=0, atol=0,
                               coverage_hint="Every chunk must be copied in, processed and copied back.")
    if np.all(result == 0):
        problems = ["p.host is still all zeros: copy each chunk back with device_part.copy_to_host(host_part, stream=...)."]
    fail(problems, "Exercise 3.4")
    if mode.is_simulator():
        passed("Exercise 3.4: overlapped gives the sequential version's result, bit for bit, with the right offsets.")
        speed_note("Exercise 3.4", "overlapped (whether copies and kernels overlap)")
        return
    sequential = benchmark(lambda: transfers.run_sequential(p), repeat=5)
    mine = benchmark(lambda: overlapped(p), repeat=5)
    speedup = sequential.median_ms / mine.median_ms
    if speedup < 1.15:
        fail([f"overlapped takes {mine.median_ms:.3f} ms against {sequential.median_ms:.3f} ms for the sequential version "
              f"({speedup:.2f}x): the copies and kernels do not overlap. Put each chunk on its own stream (p.streams[k]), "
              "pass stream= to every copy and launch, and do not synchronize inside the function."], "Exercise 3.4")
    passed(f"Exercise 3.4: overlapped is right, bit for bit, and {speedup:.2f}x faster than the sequential version "
           f"({mine.median_ms:.3f} ms against {sequential.median_ms:.3f} ms).")


# ---------------------------------------------------------------------------------------------
# Exercise 3.7: one sum per block, through a shared-memory tree


def block_sums_reference(x: np.ndarray, threads_per_block: int) -> np.ndarray:
    """The float32 tree of notebook 3.7 in NumPy, step for step: partial sums bit for bit as a GPU makes them."""
    blocks = -(-x.size // threads_per_block)
    values = np.zeros(blocks * threads_per_block, np.float32)
    values[:x.size] = x
    values = values.reshape(blocks, threads_per_block)
    step = threads_per_block // 2
    while step > 0:
        values[:, :step] = values[:, :step] + values[:, step:2 * step]
        step //= 2
    return values[:, 0].copy()


def check_block_sums(block_sums: Callable[..., object]) -> None:
    """Exercise 3.7.1: `block_sums(partial, x, threads_per_block)` writes each block's sum of x, by a shared-memory tree, race-free."""
    n = problem_size("ch3_exercise_block_sums")
    x = random_array(n, np.float32, seed=37)
    x_device = to_device(x)
    problems: list[str] = []
    for threads in (256, 64):  # multi-warp blocks of two sizes: the same kernel must serve both
        blocks = -(-n // threads)
        run = run_checked(lambda partial, data, t=threads: block_sums(partial, data, t), (blocks,), np.float32, x_device,
                          repeats=race_repeats())
        found = run.problems + array_problems(run.got, block_sums_reference(x, threads), what=f"partial ({threads} threads per block)",
                                              rtol=0.0, coverage_hint="One block per 'threads_per_block' elements, rounded up; "
                                                                      "thread 0 of each block writes partial[cuda.blockIdx.x].")
        want = block_sums_reference(x, threads)
        if found and run.got.shape == (blocks,) and n % threads and np.array_equal(run.got[:-1], want[:-1]):
            found.append("only the last block's sum is wrong: its threads past the end of x must put 0 into the tile, or the tree "
                         "adds whatever the tile held before.")
        elif found and run.got.shape == (blocks,) and np.allclose(run.got, want, rtol=1e-5, atol=1e-5):
            found.append("the sums are close but not bit for bit the tree's: add in the tree's order, tile[t] += tile[t + step] with "
                         "step = blockDim.x // 2, then halved.")
        problems += found
        if found:
            break
    small = 150
    arguments = [("traced", "partial", np.zeros(-(-small // 64), np.float32)), ("traced", "x", random_array(small, np.float32, seed=38)),
                 ("value", "threads_per_block", 64)]
    trace, note = trace_naming_races(block_sums, arguments, problems, "Exercise 3.7.1")
    fail(problems, "Exercise 3.7.1")
    checked, racecheck_note = racecheck_problems(block_sums, arguments)
    problems += checked
    problems += float64_problems(trace)
    fail(problems, "Exercise 3.7.1")
    threads = 256
    partial = to_device(np.zeros(-(-n // threads), np.float32))
    slow, speed = speed_verdict("Exercise 3.7.1", "block_sums", lambda: block_sums(partial, x_device, threads),
                                lambda: partial_sum_kernel("tree", "float32")[-(-n // threads), threads, 0, 4 * threads](x_device, partial),
                                4 * n, 4 * n, "Does each thread read its element once, coalesced, and does the tree halve the active threads?")
    fail(slow, "Exercise 3.7.1")
    passed(f"Exercise 3.7.1: block_sums gives the tree's sums bit for bit with 256 and 64 threads per block, with no race"
           f"{racecheck_note}{speed}{note}.")
    speed_note("Exercise 3.7.1", "block_sums")
