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

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator

import numpy as np
from hypothesis import strategies as st
from numba import cuda, float32

from .. import mode
from ..arrays import random_array, require_cupy, to_device, to_host
from ..sizes import problem_size
from ..timing import benchmark
from . import array_problems, fail, passed, run_guarded
from .evidence import coalescing_problems, float64_problems, racecheck_problems, speed_note, speed_verdict, trace_naming_races, trace_of
from .launches import c_float64_problems, maker_float64_problems
from .properties import changed_input_problems, edge_sizes, sizes_from, smallest_failure
from .remote import evidence
from .runs import race_repeats, run_checked
from .speed import elements_beyond_l2, gpu_only_note, record
from .trace import (  # noqa: F401  (re-exported: the chapter's tests and notebooks use these names)
    Access,
    ReplayError,
    first_request_example,
    float64_advice,
    float64_origin,
    is_shared,
    race_problem,
    replayed_trace,
    sectors_per_request,
    shared_passes_per_request,
    source_line,
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


def _block_shape_problem(shape: tuple[int, ...]) -> str:
    """Words for 3.1 blocks of another shape than 32 x 8: what a warp then reads, when that is the cost."""
    x, y = shape[0], shape[1]
    if x < 32:
        rows = -(-32 // x)
        return (f"your blocks are {x} x {y} threads: a warp then reads {rows} rows of {x} floats, {rows} separate pieces of "
                "memory instead of one row of 32 neighbours. Keep blocks of 32 x 8 (32 threads along x).")
    return f"your blocks are {x} x {y} threads; the exercise asks for 32 x 8: launch with threads = (32, 8)."


#: 3.1's generated shapes: rows around multiples of 8 (a block's y), columns around multiples of 32 (a warp along x).
SCALE_SHAPES = st.tuples(sizes_from(edge_sizes((8,), 17)), sizes_from(edge_sizes((32,), 65)))



FACTOR = np.float32(1.5)  # 3.1's factor, a float32 as the notebook passes it


def _scale_case_problem(scale_matrix: Callable[..., object], shape: tuple[int, int], factor=FACTOR) -> str | None:
    """3.1 on one shape: a * factor bit for bit, a unchanged, a kernel launched."""
    a = random_array(shape, np.float32, seed=shape[0] * 1000 + shape[1])
    a_device = to_device(a)
    run = run_checked(scale_matrix, shape, np.float32, a_device, factor)
    found = (run.problems
             or array_problems(run.got, a * factor, what=f"out ({shape[0]} x {shape[1]})", rtol=0.0,
                               coverage_hint="Does the grid cover the columns with x and the rows with y?"))
    return f"{found[0]} (the smallest failing shape found: {shape[0]} x {shape[1]})" if found else None


def check_scale_matrix(scale_matrix: Callable[..., object]) -> None:
    """Exercise 3.1: `scale_matrix(out, a, factor)` writes a * factor with coalesced reads and writes, blocks of 32 x 8.

    Properties, tested on generated shapes (`SCALE_SHAPES`): out == a * factor bit for bit for rows around multiples of
    8 and columns around multiples of 32 (one either side, a single row or column); a unchanged; a kernel does the work;
    on a traced run, each warp's reads of a and writes of out coalesced, float32 only, blocks of 32 x 8.
    """
    rows, cols = problem_size("ch3_exercise_2d")
    a = random_array((rows, cols), np.float32, seed=31)
    factor = FACTOR
    a_device = to_device(a)
    found = smallest_failure(lambda shape: _scale_case_problem(scale_matrix, shape), SCALE_SHAPES,
                             examples=((rows, cols), (1, 1), (9, 33)), max_examples=2, shrink_calls=4)
    if found:
        fail([found[1]], "Exercise 3.1")
    problems: list[str] = []
    small = (24, 40)  # a few warps are enough to see the pattern
    arguments = [("traced", "out", np.zeros(small, np.float32)), ("traced", "a", random_array(small, np.float32, seed=32)),
                 ("value", "factor", factor)]
    trace, note = trace_of(scale_matrix, arguments)
    if trace is not None:
        problems += float64_problems(trace)
        advice = "Let x (the fastest thread index) walk the columns, the last index of a NumPy array."
        problems += coalescing_problems(trace, "a", small, advice) or coalescing_problems(trace, "out", small, advice, write=True)
        shapes = {launch.threads for launch in trace.launches}
        if not problems and shapes and shapes != {(32, 8, 1)}:
            problems.append(_block_shape_problem(next(iter(shapes))))
    fail(problems, "Exercise 3.1")
    out = to_device(np.zeros_like(a))
    grid = (-(-cols // 32), -(-rows // 8))
    slow, speed = speed_verdict("Exercise 3.1", "scale_matrix", lambda: scale_matrix(out, a_device, factor),
                                lambda: _scale_reference[grid, (32, 8)](out, a_device, factor), 2 * a.nbytes, a.nbytes,
                                "How far apart are the elements that the 32 threads of a warp read?")
    fail(slow, "Exercise 3.1")
    sectors = (f", and each warp request touches {sectors_per_request(trace.accesses, 'a', 4):.1f} sectors of 32 bytes"
               if trace is not None else "")
    passed(f"Exercise 3.1: scale_matrix is right on a {rows} x {cols} matrix{sectors}{speed}{note}.")
    speed_note("Exercise 3.1", "scale_matrix")


# ---------------------------------------------------------------------------------------------
# Exercise 3.2: count the sectors a warp touches.


#: 3.2's generated cases: offsets around multiples of 8 (a sector of float32), strides at every power of two and one
#: either side, itemsizes of 1 to 16 bytes.
SECTOR_CASES = st.tuples(sizes_from(edge_sizes((8, 32), 65, low=0)), sizes_from(edge_sizes((2, 4, 8, 16, 32), 65)),
                         sizes_from((4, 8, 1, 2, 16)))
SECTOR_EXAMPLES = ((0, 1, 4), (1, 1, 4), (8, 1, 4), (0, 2, 4), (0, 8, 4), (0, 1, 8), (3, 1, 8), (0, 4, 8), (0, 32, 8), (7, 1, 4),
                   (0, 1, 1), (0, 1, 16), (0, 0, 4))


def _sector_case_problem(sectors_per_warp: Callable[[int, int, int], int], offset: int, stride: int, itemsize: int) -> str | None:
    """3.2 on one case: the distinct 32-byte sectors of bytes (l * stride + offset) * itemsize over lanes l = 0..31."""
    from ..kernels.coalescing import warp_sectors

    expected = warp_sectors(offset, stride, itemsize)
    try:
        got = sectors_per_warp(offset, stride, itemsize)
    except NotImplementedError:
        raise
    except Exception as exc:  # any exception is a wrong answer, reported in words
        return f"sectors_per_warp({offset}, {stride}, {itemsize}) raised {type(exc).__name__}: {exc}"
    if got != expected or isinstance(got, bool):
        lanes = [(lane * stride + offset) * itemsize for lane in (0, 1, 31)]
        return (f"sectors_per_warp({offset}, {stride}, {itemsize}) returned {got!r}; expected {expected}. Lanes 0, 1 and 31 read "
                f"bytes {lanes[0]}, {lanes[1]} and {lanes[2]}: count the distinct values of byte // 32 over all 32 lanes.")
    return None


def check_sectors_per_warp(sectors_per_warp: Callable[[int, int, int], int]) -> None:
    """Exercise 3.2: `sectors_per_warp(offset, stride, itemsize)` counts the 32-byte sectors warp 0 touches.

    Properties, tested on the lesson's cases and generated ones (`SECTOR_CASES`): the count equals the number of
    distinct byte // 32 over the 32 lanes' first bytes, for offsets around every sector boundary, strides 0 to 65
    (every lane on one element, neighbours, powers of two and one either side), itemsizes 1, 2, 4, 8 and 16 bytes.
    """
    found = smallest_failure(lambda case: _sector_case_problem(sectors_per_warp, *case), SECTOR_CASES, examples=SECTOR_EXAMPLES,
                             max_examples=150)
    if found:
        fail([f"{found[1]} (the smallest failing case found)"], "Exercise 3.2")
    passed(f"Exercise 3.2: sectors_per_warp agrees with the model on the lesson's {len(SECTOR_EXAMPLES)} cases and on generated "
           "offsets, strides and sizes of 1 to 16 bytes.")


# ---------------------------------------------------------------------------------------------
# Exercise 3.3: remove a bank conflict.

WIDE = 64


def check_wide_row_sums(wide_row_sums: Callable[..., object]) -> None:
    """Exercise 3.3: `wide_row_sums(out, x)` sums each row of x (shape (m, 64)) through shared memory, without bank conflicts or races.

    Properties: out == the row sums (to float32 rounding) for m rows, m a multiple of 32 (the exercise's launch, m // 32
    blocks of 32); x unchanged; a kernel does the work; the same result on every run (no race); on a traced run of two
    blocks, x read coalesced and each shared-memory request in one pass. Why no generated sizes: the indexing has one
    period, 32 rows per block, and m is always a multiple of it; one block and several blocks (the traced run's 2, the
    simulator's 2 and a GPU's 16384) are its only edge classes, and both are run.
    """
    rows = problem_size("ch3_exercise_tiles")
    x = random_array((rows, WIDE), np.float32, seed=33)
    x_device = to_device(x)
    run = run_checked(wide_row_sums, (rows,), np.float32, x_device, repeats=race_repeats())
    expected = x.astype(np.float64).sum(axis=1).astype(np.float32)
    problems = (changed_input_problems({"x": (x_device, x)}, "wide_row_sums") or run.problems
                or array_problems(run.got, expected, what="out", rtol=1e-5, atol=1e-5))
    small = random_array((64, WIDE), np.float32, seed=34)
    arguments = [("traced", "out", np.zeros(64, np.float32)), ("traced", "x", small)]
    trace, note = trace_naming_races(wide_row_sums, arguments, "Exercise 3.3",
                                     "The warp copies all 32 rows of its block into the tile before any thread sums one.")
    fail(problems, "Exercise 3.3")
    checked, racecheck_note = racecheck_problems(wide_row_sums, arguments)
    problems += checked
    if trace is not None:
        problems += float64_problems(trace)
        problems += coalescing_problems(trace, "x", small.shape, "Stage the rows in a shared tile as the slow kernel does (at "
                                        "step r the warp reads row r of x), then let thread t sum row t of the tile.")
        passes = max(shared_passes_per_request(trace.accesses), shared_passes_per_request(trace.accesses, write=True))
        if passes > 1.0 and not problems:
            row = (trace.shapes.get("shared") or (0, 0))[-1]
            problems.append(f"the warp's shared-memory requests need {passes:.1f} passes per request on average (1 without bank "
                            f"conflicts): the threads of a warp touch different words of one bank. With rows of {row} words, row t "
                            f"starts in bank ({row} * t) % 32: 64 words put every row in bank 0 (a 32-way conflict), 66 put rows t and "
                            "t + 16 together (2-way). Make each row 64 + 1 words long: with an odd length the 32 rows start in 32 "
                            "different banks.")
    fail(problems, "Exercise 3.3")
    where = "simulator trace" if mode.is_simulator() else "replayed in the simulator"
    if trace is None:
        access = "its reads and bank conflicts could not be judged"
    elif any(is_shared(access.array) for access in trace.accesses):
        access = "reads x coalesced, and each shared-memory request of a warp takes one pass (no bank conflict)"
    else:
        access = "reads x coalesced, and needs no shared memory, so no bank conflict"
    passed(f"Exercise 3.3: wide_row_sums is right, has no race, {access} ({where}){racecheck_note}{note}.")


# ---------------------------------------------------------------------------------------------
# Exercise 3.4: overlap transfers with compute.


class _ChunkPart:
    """A chunk's device array as `overlapped` sees it: its copies are noted (which chunk, which way, which stream)."""

    def __init__(self, array, chunk: int, calls: list) -> None:
        self._array, self._chunk, self._calls = array, chunk, calls

    def copy_to_device(self, host, stream=0):
        self._calls.append(("copy in", self._chunk, stream))
        return self._array.copy_to_device(host, stream=stream)

    def copy_to_host(self, host=None, stream=0):
        self._calls.append(("copy out", self._chunk, stream))
        return self._array.copy_to_host(host, stream=stream)

    def __getattr__(self, name):
        return getattr(self._array, name)

    def __len__(self) -> int:
        return len(self._array)


def _recorded_run(p, overlapped: Callable[..., object]) -> tuple[list[tuple], list[tuple[int | None, int]]]:
    """Run `overlapped` on p with its copies, kernels and waits noted: (calls, (chunk, offset) of each kernel).

    calls holds ("copy in" | "kernel" | "copy out", chunk, stream) and ("wait", None, what).
    """
    from ..kernels import transfers

    calls: list[tuple] = []
    offsets: list[tuple[int | None, int]] = []
    parts = {id(part): index for index, _, part in p.chunks}
    original_launch, original_sync = transfers.unit_kernel_launch, cuda.synchronize
    stream_type = type(p.streams[0])
    original_stream_sync = stream_type.synchronize

    def launch(a, offset, repeats, threads_per_block, stream=None):
        real = a._array if isinstance(a, _ChunkPart) else a
        chunk = parts.get(id(real))
        calls.append(("kernel", chunk, stream))
        offsets.append((chunk, int(offset)))
        return original_launch(real, offset, repeats, threads_per_block, stream)

    def device_wait():
        calls.append(("wait", None, "cuda.synchronize()"))
        return original_sync()

    def stream_wait(stream):
        calls.append(("wait", None, "stream.synchronize()"))
        return original_stream_sync(stream)

    watched = copy.copy(p)
    watched.chunks = [(index, host_part, _ChunkPart(part, index, calls)) for index, host_part, part in p.chunks]
    transfers.unit_kernel_launch, cuda.synchronize, stream_type.synchronize = launch, device_wait, stream_wait
    try:
        overlapped(watched)
    finally:
        transfers.unit_kernel_launch, cuda.synchronize, stream_type.synchronize = original_launch, original_sync, original_stream_sync
    return calls, offsets


def _stream_problems(calls: list[tuple]) -> list[str]:
    """Copies and kernels on the default stream, chunks sharing a stream, waits between chunks: words for each."""
    work = [call for call in calls if call[0] != "wait"]
    default = next((call for call in work if call[2] in (None, 0)), None)
    if default is not None:
        what, chunk, _ = default
        return [f"chunk {chunk}'s {what} runs on the default stream: nothing overlaps with the default stream's work. Pass "
                f"stream= the chunk's own stream (p.streams[k]) to every copy and launch."]
    for chunk in sorted({call[1] for call in work}, key=str):
        streams = {id(call[2]) for call in work if call[1] == chunk}
        if len(streams) > 1:
            return [f"chunk {chunk}'s copy in, kernel and copy out are on different streams, so nothing orders them: the kernel "
                    "could run before its data arrives. Put all three on the chunk's own stream."]
    for what in ("copy in", "kernel", "copy out"):
        streams = [call[2] for call in work if call[0] == what]
        if len(streams) > 1 and len({id(s) for s in streams}) == 1:
            return [f"every chunk's {what} is on one stream: work on one stream runs in order, so nothing overlaps. Give chunk k "
                    "its own stream, p.streams[k], for its copy in, kernel and copy out."]
    first_work = next((i for i, call in enumerate(calls) if call[0] != "wait"), None)
    wait_at = next((i for i, call in enumerate(calls) if call[0] == "wait" and first_work is not None and i > first_work), None)
    if wait_at is not None:
        wait = calls[wait_at]
        queued = len({call[1] for call in calls[:wait_at] if call[0] != "wait"})
        return [f"overlapped waits for the GPU ({wait[2]}) after queueing {queued} chunk(s): the host stops there until that work "
                "is done, so the next chunk's copies cannot overlap it. Queue everything and wait for nothing (the check waits)."]
    return []


#: Exercise 3.4's bar: the overlapped version at least this many times faster than the sequential one (GPU only).
OVERLAP_SPEEDUP = 1.15


def _overlap_problems(overlapped: Callable[..., object], n: int, streams: int):
    """3.4 on one pipeline of n elements in `streams` chunks: the problems in words, and the pipeline (for timing)."""
    from ..kernels import transfers

    p = transfers.make_pipeline(n, streams, problem_size("ch3_threads_per_block"))
    p.reset()
    transfers.run_sequential(p)  # the reference: the same kernel on the whole array (its result is exact to compare)
    cuda.synchronize()
    expected = to_host(p.host).copy()
    p.reset()
    p.device.copy_to_device(np.full(n, np.nan, np.float32))  # poison: a chunk never copied in stays NaN
    try:
        calls, offsets = _recorded_run(p, overlapped)
    except NotImplementedError:
        raise
    except Exception as exc:  # any exception is a wrong answer, reported in words
        return [f"overlapped(p) raised {type(exc).__name__} ({exc}) on a pipeline of {streams} chunk(s): loop over p.chunks and "
                "p.streams as they are (len(p.chunks) of them), not over a number of your own."], p
    cuda.synchronize()
    result = to_host(p.host)
    step = n // streams
    problems = []
    wrong = [(chunk, offset) for chunk, offset in offsets if chunk is not None and offset != chunk * step]
    if wrong:
        chunk, offset = wrong[0]
        problems.append(f"chunk {chunk}'s kernel got offset {offset}; its first element is element {chunk * step} of the whole array "
                        "(index * len(host_part)). The kernel computes each element from its global index, so a wrong offset "
                        "gives slightly different values.")
    problems += array_problems(result, expected, what="p.host after one run from zeros", rtol=0, atol=0,
                               coverage_hint="Every chunk must be copied in, processed and copied back.")
    if np.all(result == 0):
        problems = ["p.host is still all zeros: copy each chunk back with device_part.copy_to_host(host_part, stream=...)."]
    # how the work was queued first: on a GPU, work that nothing orders is also what makes the values wrong
    return _stream_problems(calls) + problems, p


#: 3.4's generated cases: pipelines of 1 to 5 chunks (an answer written for the notebook's 4 is caught), 240 elements.
OVERLAP_CASES = sizes_from((1, 2, 3, 5, 4))


def check_overlapped(overlapped: Callable[..., object]) -> None:
    """Exercise 3.4: `overlapped(p)` runs the StagedPipeline p chunk by chunk on its streams, and beats the sequential version.

    Properties, tested on the notebook's pipeline and generated ones of 1 to 5 chunks (`OVERLAP_CASES`): p.host ends as
    the sequential version leaves it, bit for bit; chunk k's kernel gets offset k * len(chunk); chunk k's copy in,
    kernel and copy out all on p.streams[k], none on the default stream; no wait between chunks; on a GPU, at least
    OVERLAP_SPEEDUP times faster than the sequential version.
    """
    n, streams = problem_size("ch3_exercise_async")
    fail(_overlap_case_problems(overlapped, n, streams), "Exercise 3.4")

    def case_problem(chunks: int) -> str | None:
        found = _overlap_case_problems(overlapped, 240, chunks)
        return f"{found[0]} (the smallest failing case found: a pipeline of {chunks} chunk(s))" if found else None

    found = smallest_failure(case_problem, OVERLAP_CASES, max_examples=3, shrink_calls=3)
    if found:
        fail([found[1]], "Exercise 3.4")
    if mode.is_simulator():
        passed(f"Exercise 3.4: overlapped gives the sequential version's result, bit for bit, with the right offsets, each of the "
               f"{streams} chunks on its own stream and no wait in between.")
        speed_note("Exercise 3.4", "overlapped (whether its copies and kernels really overlap)")
        return
    sequential_ms, mine_ms = _overlap_times(overlapped, n, streams)
    speedup = sequential_ms / mine_ms
    if not record("Exercise 3.4", speedup, OVERLAP_SPEEDUP):
        fail([f"overlapped takes {mine_ms:.3f} ms against {sequential_ms:.3f} ms for the sequential version "
              f"({speedup:.2f}x): the copies and kernels do not overlap. Put each chunk on its own stream (p.streams[k]), "
              "pass stream= to every copy and launch, and do not synchronize inside the function."], "Exercise 3.4")
    passed(f"Exercise 3.4: overlapped is right, bit for bit, each chunk on its own stream, and {speedup:.2f}x faster than the "
           f"sequential version ({mine_ms:.3f} ms against {sequential_ms:.3f} ms).")


@evidence
def _overlap_case_problems(overlapped: Callable[..., object], n: int, streams: int) -> list[str]:
    """3.4's problems on one pipeline of n elements in `streams` chunks, found where the answer runs (its streams and copies are
    watched inside Numba, which a replay cannot repeat)."""
    return _overlap_problems(overlapped, n, streams)[0]


@evidence
def _overlap_times(overlapped: Callable[..., object], n: int, streams: int) -> tuple[float, float]:
    """The median times (ms) of the sequential version and of `overlapped` on a pipeline of n elements in `streams` chunks."""
    from ..kernels import transfers

    p = transfers.make_pipeline(n, streams, problem_size("ch3_threads_per_block"))
    sequential = benchmark(lambda: transfers.run_sequential(p), repeat=5)
    mine = benchmark(lambda: overlapped(p), repeat=5)
    return sequential.median_ms, mine.median_ms


# ---------------------------------------------------------------------------------------------
# Exercise 3.7.1: ufunc-style kernels, no kernel written by hand


def rel_diff_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|x - y| / (|x| + |y| + 1), computed in float64 and rounded to float32."""
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    return (np.abs(x64 - y64) / (np.abs(x64) + np.abs(y64) + 1.0)).astype(np.float32)


def _rel_diff_scalar(x, y):
    return abs(x - y) / (abs(x) + abs(y) + float32(1))


@functools.cache
def _rel_diff_ufunc_reference():
    """The CUDA ufunc a student's is timed beside: the same launch path, an element function written plainly (GPU only)."""
    from numba import vectorize

    return vectorize(["float32(float32, float32)"], target="cuda")(_rel_diff_scalar)


@functools.cache
def _rel_diff_elementwise_reference():
    """The cupy.ElementwiseKernel a student's is timed beside (GPU only)."""
    cupy = require_cupy("cupy.ElementwiseKernel")
    return cupy.ElementwiseKernel("float32 x, float32 y", "float32 d", "d = fabsf(x - y) / (fabsf(x) + fabsf(y) + 1.0f)",
                                  "gpucourse_rel_diff")


@functools.cache
def _max_reference():
    """cupy.ReductionKernel of the largest element, written as notebook 3.7 writes its sum (GPU only)."""
    cupy = require_cupy("cupy.ReductionKernel")
    return cupy.ReductionKernel("float32 d", "float32 m", "d", "max(a, b)", "m = a", "0", "gpucourse_largest")


@evidence
def _element_problems(element: Callable[..., object], x: np.ndarray, y: np.ndarray) -> list[str]:
    """The element function, called as a device function of a kernel and as Numba types it: values and float32 throughout."""
    want = rel_diff_reference(x, y)
    for pair in zip(x, y):  # every pair: a branch that the first pair does not take may hold the float64
        origin = float64_origin(element, pair)
        if origin is not None:
            return [float64_advice(f"rel_diff_element computes in float64 at line {origin[1]} (`{source_line(*origin)}`)")]
    device = cuda.jit(device=True)(element)

    @cuda.jit
    def apply(d, xx, yy):
        i = cuda.grid(1)
        if i < d.size:
            d[i] = device(xx[i], yy[i])

    got, problems = run_guarded(lambda d, xx, yy: apply[-(-x.size // 128), 128](d, xx, yy), x.shape, np.float32, to_device(x),
                                to_device(y))
    problems += array_problems(got, want, what="rel_diff_element(x, y)", rtol=1e-6)
    if problems:
        with np.errstate(all="ignore"):  # 0 / 0 at the pair (0, 0) is what a missing + 1 gives
            candidates = ((np.abs(x - y) / (np.abs(x) + np.abs(y)), "the + 1 in the denominator is missing"),
                          ((x - y) / (np.abs(x) + np.abs(y) + 1), "the numerator is |x - y|, not x - y"))
        for candidate, words in candidates:
            if np.allclose(got, candidate, rtol=1e-5, equal_nan=True):
                problems.append(f"{words}: d = |x - y| / (|x| + |y| + 1).")
                break
    return problems


def _gpu_kernel_problems(made: dict[str, object], x, y) -> tuple[list[str], str]:
    """On a GPU: the three ufunc-style kernels' values, dtypes and speed beside hand-written ones and the copy ceiling."""
    cupy = require_cupy("the ufunc-style kernels")
    n = x.size
    want = rel_diff_reference(x, y)
    x_device, y_device = to_device(x), to_device(y)
    d_device = to_device(np.full(n, np.nan, np.float32))
    x_cupy, y_cupy, d_cupy = cupy.asarray(x_device), cupy.asarray(y_device), cupy.asarray(d_device)
    problems: list[str] = []
    ufunc, elementwise, reduction = made.values()
    try:
        fresh = ufunc(x_device, y_device)
    except Exception as exc:  # a CPU ufunc, a wrong signature...
        return [f"your ufunc, called on two float32 device arrays, raised {type(exc).__name__}: {str(exc)[:200]}. Make it with "
                "numba.vectorize(['float32(float32, float32)'], target='cuda')."], ""
    if not hasattr(fresh, "copy_to_host"):
        return ["your ufunc returned a host array for device arrays: it ran on the CPU (and copied the arrays there and back). "
                "Give numba.vectorize target='cuda'."], ""
    if np.dtype(fresh.dtype) != np.float32:
        problems.append(f"your ufunc returns {np.dtype(fresh.dtype).name} for float32 arrays: give it the signature "
                        "'float32(float32, float32)', so that it computes and returns float32.")
    else:
        problems += array_problems(to_host(fresh), want, what="your ufunc's result", rtol=1e-6)
    produced = elementwise(x_cupy, y_cupy)
    if produced.dtype != np.float32:
        problems.append(f"your ElementwiseKernel returns {produced.dtype} for float32 arrays: declare the output 'float32 d' "
                        "(or 'T d' with inputs 'T x, T y'), and write 1.0f, not 1.0, in its C code.")
    else:
        problems += array_problems(cupy.asnumpy(produced), want, what="your ElementwiseKernel's result", rtol=1e-6)
    largest = reduction(cupy.asarray(want))
    if getattr(largest, "dtype", None) != np.float32:
        problems.append(f"your ReductionKernel returns {getattr(largest, 'dtype', type(largest).__name__)}: declare its output "
                        "'float32 m' (or 'T m').")
    elif float(largest) != float(want.max()):
        got = float(largest)
        hint = " (more than the largest element: reduce with max(a, b), not a + b)" if got > float(want.max()) else ""
        problems.append(f"your ReductionKernel gives {got!r}; the largest element is {float(want.max())!r}{hint}.")
    if problems:
        return problems, ""
    # Each kernel is timed beside one made the same way (the generated kernels differ from a hand-written one by a GPU-dependent
    # margin: on an H200 a CuPy ElementwiseKernel reached 0.76 of a Numba kernel's speed, a CUDA ufunc 0.85); the success line
    # sets both beside the device's copy.
    nbytes = 3 * 4 * n
    slow, speed_ufunc = speed_verdict("Exercise 3.7.1 (CUDA ufunc)", "CUDA ufunc", lambda: ufunc(x_device, y_device, out=d_device),
                                      lambda: _rel_diff_ufunc_reference()(x_device, y_device, out=d_device), nbytes, 4 * n,
                                      "Is the element function float32 throughout?")
    problems += slow
    slow, speed_elementwise = speed_verdict("Exercise 3.7.1 (ElementwiseKernel)", "ElementwiseKernel",
                                            lambda: elementwise(x_cupy, y_cupy, d_cupy),
                                            lambda: _rel_diff_elementwise_reference()(x_cupy, y_cupy, d_cupy), nbytes, 4 * n,
                                            "Are its inputs, output and constants float32 (1.0f, fabsf)?")
    problems += slow
    slow, speed_reduction = speed_verdict("Exercise 3.7.1 (ReductionKernel)", "ReductionKernel", lambda: reduction(d_cupy),
                                          lambda: _max_reference()(d_cupy), 4 * n, 4 * n, "Does it reduce float32 values with max?")
    problems += slow
    return problems, (f"; on this GPU the ufunc reaches {speed_ufunc[2:]}, the ElementwiseKernel {speed_elementwise[2:]}, the "
                      f"ReductionKernel {speed_reduction[2:]}")



# What the answer made, recorded as it makes it: the ufunc's signatures, the CuPy kernels' types and C code (both modes;
# in the simulator a stand-in CuPy records them and builds nothing).

class _RecordingCupy:
    """CuPy as the answer's makers see it through gpucourse.require_cupy: its kernel makers note their arguments."""

    def __init__(self, real, made: list[tuple[str, tuple, dict]]) -> None:
        self._real, self._made = real, made

    def _maker(self, kind: str):
        def make(*args, **kwargs):
            self._made.append((kind, args, kwargs))
            return getattr(self._real, kind)(*args, **kwargs) if self._real is not None else object()

        return make

    def __getattr__(self, name: str):
        if name in ("ElementwiseKernel", "ReductionKernel"):
            return self._maker(name)
        return getattr(self._real if self._real is not None else np, name)


@contextlib.contextmanager
def _recorded_makers() -> Iterator[tuple[list[str], list[tuple[str, tuple, dict]]]]:
    """Inside: numba.vectorize(target='cuda') notes each signature (and compiles nothing in the simulator), and
    gpucourse.require_cupy hands out a CuPy whose ElementwiseKernel and ReductionKernel note their arguments."""
    from numba.cuda import vectorizers

    import gpucourse

    signatures: list[str] = []
    made: list[tuple[str, tuple, dict]] = []
    original_add, original_build, original_require = vectorizers.CUDAVectorize.add, vectorizers.CUDAVectorize.build_ufunc, gpucourse.require_cupy

    def add(self, sig=None):
        signatures.append(str(sig))
        return None if mode.is_simulator() else original_add(self, sig)

    def build(self):
        return object() if mode.is_simulator() else original_build(self)

    def require(feature: str):
        return _RecordingCupy(None if mode.is_simulator() else original_require(feature), made)

    vectorizers.CUDAVectorize.add, vectorizers.CUDAVectorize.build_ufunc, gpucourse.require_cupy = add, build, require
    try:
        yield signatures, made
    finally:
        vectorizers.CUDAVectorize.add, vectorizers.CUDAVectorize.build_ufunc, gpucourse.require_cupy = (original_add, original_build,
                                                                                                          original_require)


def _declared_problems(signatures: list[str], made: list[tuple[str, tuple, dict]]) -> list[str]:
    """float64 in what the answer declared: a ufunc signature, a CuPy kernel's parameters, a double literal or type in its C code."""
    problems = []
    wide = [signature for signature in signatures if "float64" in signature or "double" in signature]
    if wide:
        problems.append(f"your ufunc's signature is {wide[0]}: it computes and returns float64 (on a GPU, at the FP64 rate). "
                        "Give numba.vectorize the signature 'float32(float32, float32)'.")
    for kind, args, kwargs in made:
        names = (("in_params", "out_params", "operation") if kind == "ElementwiseKernel"
                 else ("in_params", "out_params", "map_expr", "reduce_expr", "post_map_expr", "identity"))
        parts = dict(zip(names, args)) | {name: kwargs[name] for name in names if name in kwargs}
        for name in ("in_params", "out_params"):
            if c_float64_problems(str(parts.get(name, "")), name):
                problems.append(f"your {kind} declares {name} \"{parts[name]}\": float64. Declare float32 (or a type T that the "
                                "float32 arrays set).")
        for name in names[2:5]:  # the C code (a ReductionKernel's identity is a value, converted to the output's type)
            code = str(parts.get(name, ""))
            problems += c_float64_problems(code, f"your {kind}'s C code `{code}`")
    return problems


#: 3.7.1's edge pairs (x, y) beside the random ones: zeros of both signs, equal and opposite values, large and tiny magnitudes.
EDGE_PAIRS = np.array([(0.0, 0.0), (-0.0, 0.0), (1.5, 1.5), (-2.0, 2.0), (1e30, -1e30), (1e-30, 1e-30), (3.0, 0.0), (0.0, -7.0),
                       (1e-38, -1e-38), (65504.0, 1.0)], dtype=np.float32)


def check_ufunc_kernels(rel_diff_element: Callable[..., object], make_rel_diff_ufunc: Callable[[], object],
                        make_rel_diff_elementwise: Callable[[], object], make_largest_reduction: Callable[[], object]) -> None:
    """Exercise 3.7.1: the element function |x - y| / (|x| + |y| + 1) in float32, made into a CUDA ufunc (numba.vectorize), a
    cupy.ElementwiseKernel, and a cupy.ReductionKernel of the largest element; values, dtypes and (GPU) speed.

    Properties: the element function's values on 1000 random pairs and the edge pairs (`EDGE_PAIRS`: zeros of both
    signs, x == y, x == -y, large and tiny magnitudes), with no float64 on any pair's path; what the makers declare, read
    as they make it in both modes: a ufunc signature without float64, CuPy parameters without float64 or double, C code
    without a double literal or type; on a GPU the three kernels' values and dtypes beside NumPy's, and their speed.
    """
    small = 1000
    x = np.concatenate([random_array(small, np.float32, seed=371, low=-4, high=4), EDGE_PAIRS[:, 0]])
    y = np.concatenate([random_array(small, np.float32, seed=372, low=-4, high=4), EDGE_PAIRS[:, 1]])
    problems = _element_problems(rel_diff_element, x, y)
    fail(problems, "Exercise 3.7.1")
    made = _made_kernels_verdict(make_rel_diff_ufunc, make_rel_diff_elementwise, make_largest_reduction)
    fail(made["declared"], "Exercise 3.7.1")
    if mode.is_simulator():
        also = f", and {' and '.join(made['seen'])} declare float32 only" if made["seen"] else ""
        passed(f"Exercise 3.7.1: rel_diff_element gives |x - y| / (|x| + |y| + 1) in float32, called from a simulated kernel{also}.")
        gpu_only_note("Exercise 3.7.1", "your ufunc, ElementwiseKernel and ReductionKernel (their values, dtypes and speed)", "are",
                      "numba.vectorize(target='cuda') and CuPy do not run in the simulator")
        return
    fail(made["problems"], "Exercise 3.7.1")
    passed(f"Exercise 3.7.1: the element function, the CUDA ufunc, the ElementwiseKernel and the ReductionKernel are right and "
           f"float32 on {made['n']} elements{made['speed']}.")


@evidence
def _made_kernels_verdict(*makers: Callable[[], object]) -> dict:
    """The three makers of 3.7.1 run where the answer runs: what they declared (`declared`: float64 in words; `seen`: what was
    declared float32), and on a GPU the first maker that raised or the kernels' values, dtypes and speed (`problems`, `speed`, `n`)."""
    made: dict[str, object] = {}
    with _recorded_makers() as (signatures, declared):
        for name, maker in zip(("make_rel_diff_ufunc", "make_rel_diff_elementwise", "make_largest_reduction"), makers):
            try:
                made[name] = maker()
            except NotImplementedError:
                raise  # a stub: its hint is the message
            except Exception as exc:  # noqa: BLE001 - reported below on a GPU; in the simulator what was declared is judged
                made[name] = exc
    seen = [what for what, found in (("your ufunc's signature", signatures), ("your CuPy kernels' types and C code", declared)) if found]
    # what the makers declared as they ran, else as their source reads (a maker that could not run here: no CuPy, say)
    verdict = {"declared": _declared_problems(signatures, declared) or maker_float64_problems(*makers), "seen": seen, "problems": [],
               "speed": "", "n": 0}
    if verdict["declared"] or mode.is_simulator():
        return verdict
    failed = next(((name, value) for name, value in made.items() if isinstance(value, Exception)), None)
    if failed:
        verdict["problems"] = [f"{failed[0]}() raised {type(failed[1]).__name__}: {failed[1]}"]
        return verdict
    n = elements_beyond_l2(4)
    x_big = random_array(n, np.float32, seed=373, low=-4, high=4)
    y_big = random_array(n, np.float32, seed=374, low=-4, high=4)
    verdict["problems"], verdict["speed"] = _gpu_kernel_problems(made, x_big, y_big)
    verdict["n"] = n
    return verdict
