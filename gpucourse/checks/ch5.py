"""Checks for the chapter 5 exercises (solutions/ch05_monte_carlo.ipynb).

Sums are checked on data whose every partial sum is exact in float32 (small positive integers), so
the right answer is one number and each typical mistake leaves its own: a lost tail gives the sum of
a prefix of the array, a block counted twice or a missing block is off by whole block sums.

What the values need not show is judged from what the kernels do, the same in both modes: a traced
run (`gpucourse.checks.trace`: in this process in the simulator, replayed in a simulator process on
a GPU) shows a barrier that not every thread reaches, races on shared memory, shared slots read
before anyone wrote them, a total that blocks update without an atomic, how many atomics a sum
makes, how many warps of a tree diverge, and float64 arithmetic in a float32 kernel. The simulator
runs a grid's blocks one after another; the checks of the sums into one total run them at the same
time (`gpucourse.simulation.interleaved_blocks`), as a GPU does, so that a racy total goes wrong in
both modes. On a GPU, compute-sanitizer and a timing beside chapter 5's kernels add what only a GPU
shows; the Kahan sum is compared bit for bit with Kahan's own float32 steps.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from collections.abc import Callable

import numba
import numpy as np

from .. import mode, summation
from ..arrays import random_array, to_device, to_host
from ..kernels.reductions import atomic_sum as reference_atomic_sum
from ..kernels.reductions import partial_sum_kernel, resident_blocks
from ..options import EuropeanOption, black_scholes, payoffs_reference
from ..simulation import interleaved_blocks, paced
from ..sizes import problem_size
from . import array_problems, fail, passed
from .evidence import coalescing_problems, float64_problems, racecheck_problems, speed_note, speed_verdict, trace_naming_races, trace_of
from .launches import (
    RecordedLaunch,
    dynamic_shared_problems,
    float64_argument_problems,
    kernel_launch_problems,
    recorded_launches,
    shared_array_declarations,
)
from .runs import call_keeping_inputs, race_repeats, run_checked
from .speed import elements_beyond_l2
from .trace import atomics_per_launch, divergent_warp_levels, is_shared, shared_passes_per_request

#: Block sizes a student's launch might have used, for recognising a lost tail.
BLOCK_SIZES = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def _exact_integer_data(n: int, seed: int) -> np.ndarray:
    """Random integers 1..3 as float32: for n below 2**24 / 3 every partial sum is an exact float32, in any order of addition."""
    return random_array(n, np.int32, seed=seed, low=1, high=4).astype(np.float32)


def _lost_tail_blocks(got: float, host: np.ndarray) -> set[int]:
    """The block sizes B for which `got` is the sum of all but the last n % B elements."""
    n = host.size
    prefix = np.cumsum(host, dtype=np.float64)
    return {block for block in BLOCK_SIZES if n // block * block < n and got == (prefix[n // block * block - 1] if n >= block else 0.0)}


def _sum_problems(got: float, host: np.ndarray, where: str) -> list[str]:
    """What is wrong with `got` as the sum of `host` (exact integer data), in words; [] if it is right."""
    exact = float(host.astype(np.float64).sum())
    if math.isnan(got):
        return [f"{where}: result[0] still holds NaN, the value the check put there: either nothing stored the total (one thread, "
                "say thread 0 of block 0 or the last launch of your plan, must), or the blocks added into result[0] (atomics) "
                "without setting it to 0 first (NaN + anything is NaN)."]
    if got == exact:
        return []
    n = host.size
    if got > exact:
        return [f"{where}: got {got:.0f}, expected {exact:.0f}: {got - exact:.0f} too much, so some elements were added more than "
                "once (a grid-stride step smaller than the number of threads, or partial sums added twice)."]
    prefix = np.concatenate([[0.0], np.cumsum(host, dtype=np.float64)])
    hits = np.flatnonzero(prefix == got)
    if hits.size:
        return [f"{where}: got {got:.0f}, the sum of the first {int(hits[0])} of {n} elements: the rest never reached the total "
                "(do the threads or blocks cover the whole array, and does the total include every block's partial sum?)."]
    return [f"{where}: got {got:.0f}, expected {exact:.0f}: some elements in the middle were left out (check the loop's start and step)."]


def _kernel_read_problems(trace, array: str, n: int, what: str) -> list[str]:
    """Words for elements of `array` (n of them) that no kernel thread read in a traced run: a sum computed on the host."""
    if trace is None:
        return []
    read = {access.element for access in trace.of(array) if not access.write}
    if n and len(read) < n:
        launched = f"{len(trace.launches)} kernel launch(es)" if trace.launches else "no kernel launch"
        return [f"in a traced run of {n} elements ({launched}) kernel threads read {len(read)} of the {n} elements of {array}: "
                f"{what} must be computed on the GPU, by kernels you launch that read every element of {array} (copying {array} "
                "to the host and summing there is what the exercise replaces)."]
    return []


def _empty_launches(launches: list[RecordedLaunch], n: int) -> list[str]:
    """Words for a launch of no block at all (None if every launch had blocks)."""
    for launch in launches:
        if 0 in launch.blocks:
            threads = launch.threads[0]
            return [f"for n = {n}, {launch.name} was launched with 0 blocks, so nothing ran: n // {threads} rounds down to 0 when "
                    f"n < {threads}. Round the number of blocks up, (n + {threads} - 1) // {threads}, or launch a fixed number of "
                    "blocks with a grid-stride loop."]
    return []


def _index_error(exc: BaseException) -> str:
    """The simulator's IndexError without the thread and block it prefixes."""
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith("tid=") and ": " in text else text


def _small_sum_size() -> int:
    """Elements of the small traced run of a sum: a few blocks of the chapter's block size, a partial last one."""
    return 3 * problem_size("ch5_threads_per_block") + 5


def _small_sum_arguments(result_name: str, seed: int) -> list[tuple[str, str, object]]:
    """A small traced run of a sum: a few blocks of the chapter's block size, a partial last one."""
    n = _small_sum_size()
    return [("traced", "x", _exact_integer_data(n, seed)), ("traced", result_name, np.full(1, 123.0, np.float32))]


# ---------------------------------------------------------------------------------------------
# Exercise 5.1: a sum that keeps the tail


def gpu_sum_sizes() -> list[int]:
    """Lengths of exercise 5.1's check: 1, each side of a warp and of 256, sizes that no block size divides, and the mode's
    large one: for every block size of BLOCK_SIZES one of them leaves a partial block, and one is smaller than a block."""
    return sorted({1, 31, 33, 255, 257, 1000, 4099, problem_size("ch5_exercise")})


# Properties of a right answer to 5.1: result[0] is the exact sum (integer data: any order of addition gives it) for every
# length, 1 included, whether or not it fills whole blocks; the elements are read by kernel threads (the sum is made on the
# GPU); no race between blocks (they run at the same time); float32 arithmetic. The cases: `gpu_sum_sizes()`.
def check_gpu_sum(gpu_sum: Callable[..., object]) -> None:
    """Exercise 5.1: `gpu_sum(x, result)` writes the sum of the float32 device array x (any length) into result[0]."""
    sizes = gpu_sum_sizes()
    problems: list[str] = []
    tails: dict[int, set[int]] = {}  # n -> the block sizes whose tail it may have lost (empty: another mistake)
    for number, n in enumerate(sizes):
        host = _exact_integer_data(n, seed=510 + number)
        result = to_device(np.full(1, np.nan, np.float32))
        launches: list[RecordedLaunch] = []
        try:
            with recorded_launches() as launches, interleaved_blocks() if n == 257 else contextlib.nullcontext():
                paced(gpu_sum)(to_device(host), result)
        except NotImplementedError:
            raise
        except IndexError as exc:
            fail(_empty_launches(launches, n) or [
                f"n = {n}: the kernel indexed past the end of an array ({_index_error(exc)}): guard every load with `if i < x.size`."],
                 "Exercise 5.1")
        except Exception as exc:  # a launch of 0 blocks fails on a GPU; anything else is reported in words too
            fail(_empty_launches(launches, n) or [f"n = {n}: gpu_sum raised {type(exc).__name__}: {str(exc)[:300]}"], "Exercise 5.1")
        fail(_empty_launches(launches, n), "Exercise 5.1")
        got = float(to_host(result)[0])
        found = _sum_problems(got, host, f"n = {n}")
        if found:
            tails[n] = _lost_tail_blocks(got, host)
            problems += found
            if not tails[n]:  # not a lost tail: no later size can make it one (the diagnosis intersects over sizes)
                break
    trace, note = trace_naming_races(gpu_sum, _small_sum_arguments("result", 511), "Exercise 5.1",
                                     "A thread with no element of its own stores 0 in its slot.")
    blocks = set.intersection(*tails.values()) if tails else set()
    if blocks:  # every wrong size lost exactly its last n % B elements, for one B
        block = max(blocks)
        problems = [f"for n = {', '.join(str(n) for n in tails)} the sum leaves out the last n % {block} elements: the work is cut "
                    f"into whole blocks of {block}, and what does not fill a block is lost. Round the number of blocks up (and guard "
                    "each load with `if i < x.size`), or loop over the elements with a grid-stride loop."]
    fail(problems[:1], "Exercise 5.1")
    fail(kernel_launch_problems(launches, "gpu_sum"), "Exercise 5.1")
    fail(_kernel_read_problems(trace, "x", _small_sum_size(), "the sum"), "Exercise 5.1")  # right values, but made where?
    fail(float64_problems(trace), "Exercise 5.1")
    passed(f"Exercise 5.1: gpu_sum is exact for n = {', '.join(str(n) for n in sizes)} (including sizes that are not multiples of a "
           f"block), with no race in a traced run{note}.")


# ---------------------------------------------------------------------------------------------
# Exercise 5.2: each block's sum, a grid-stride loop and a tree sized by the launch


def block_sums_reference(x: np.ndarray, blocks: int, threads_per_block: int) -> np.ndarray:
    """Each block's sum when thread t of block b adds x[i] for i = b * T + t, then i + blocks * T, ... (float64, then float32)."""
    stride = blocks * threads_per_block
    values = np.zeros(-(-x.size // stride) * stride, np.float64)
    values[:x.size] = x
    return values.reshape(-1, blocks, threads_per_block).sum(axis=(0, 2)).astype(np.float32)


def _block_sizes() -> tuple[int, ...]:
    """Block sizes the check launches with: several warps, and one larger than a fixed 256-element array (fewer in the simulator)."""
    return (64, 512) if problem_size("ch5_threads_per_block") < 256 else (256, 1024, 64)


def _fixed_shared_problems(block_sums: Callable[..., object], threads: int) -> list[str]:
    """A shared array declared with a fixed size smaller than the block the launch asks for (read before launching it)."""
    probe_x = to_device(np.zeros(2 * threads, np.float32))
    probe = to_device(np.zeros(2, np.float32))
    with recorded_launches(dry=True) as launches:
        try:
            block_sums(probe_x, probe, threads)
        except NotImplementedError:
            raise
        except Exception:  # noqa: BLE001 - the real run reports it in words
            return []
    elements = dynamic_shared_problems(launches)  # the invariant of every exercise: bytes asked for as elements
    if elements:
        return elements
    for launch in launches:
        try:
            declarations = shared_array_declarations(launch.kernel)
        except Exception:  # noqa: BLE001 - no source to read
            continue
        for shape, _ in declarations:
            size = math.prod(shape)
            block = math.prod(launch.threads)
            if size == 0 and launch.shared_bytes < 4 * block:  # dynamic shared memory, sized by the launch
                return [f"{launch.name} declares its shared array by the launch (cuda.shared.array(0, float32)), and the launch gives "
                        f"it {launch.shared_bytes} bytes for {block} threads: {launch.shared_bytes // 4} float32 values, fewer than "
                        "the threads that store into it. The fourth launch parameter counts BYTES, not elements: "
                        f"kernel[blocks, threads, 0, 4 * threads] ({4 * block} here)."]
            if 0 < size < launch.threads[0]:
                return [f"{launch.name} declares a shared array of {size} elements, fixed in the kernel, but with threads_per_block = "
                        f"{threads} its block has {launch.threads[0]} threads, and the tree writes past the array's end. Size it by the "
                        "launch: cuda.shared.array(0, float32) in the kernel, and 4 * threads_per_block bytes as the launch's fourth "
                        "parameter, kernel[blocks, threads, 0, 4 * threads]."]
    return []


#: Threads per block of the traced run that judges the tree's pattern: four warps, so that divergence shows.
PATTERN_THREADS = 128


def _outside_words(error: str, n: int) -> str:
    """Words for an index past an array's end in a block sum over n elements of x: x itself, or the shared array."""
    size = re.search(r"out of bounds for axis \d+ with size (\d+)", error)
    if size and int(size.group(1)) != n:  # not x: the shared array (one value per thread), or partial
        return (f"a thread indexed an array of {size.group(1)} elements past its end (x has {n}): the shared array holds one "
                "value per thread, and the tree's threads t < step read tile[t + step], so step starts at cuda.blockDim.x // 2 "
                "(t + step stays below the block's threads).")
    return f"a thread read x past its end ({n} elements): the grid-stride loop runs while i < x.size."


def _tree_pattern_problems(trace) -> list[str]:
    """How the block sums, from the trace: coalesced loads, shared memory used, divergent warps, bank conflicts."""
    problems = coalescing_problems(trace, "x", trace.shapes.get("x", (0,)),
                                   "Let the threads of a block take neighbouring elements at every step of the grid-stride loop: "
                                   "i = cuda.grid(1), then i += cuda.gridsize(1).")
    if problems:
        return problems
    if not any(is_shared(name) for name in trace.shapes):
        return ["the kernel uses no shared memory: the exercise asks for a tree in a shared array, one value per thread, "
                "where half the threads add the other half's values at each level."]
    divergent, levels = divergent_warp_levels(trace)
    if divergent > levels:
        problems.append(f"the tree diverges: in {divergent} warp-levels of {levels} levels (blocks of {PATTERN_THREADS} threads) only "
                        "some lanes of a warp add, so the warp runs both sides of the `if`. Keep the active threads contiguous: "
                        "threads t < step add tile[t + step], with step = blockDim.x // 2, halved at each level (notebook 5.4, §2).")
    passes = max(shared_passes_per_request(trace.accesses), shared_passes_per_request(trace.accesses, write=True))
    if passes > 1.5:
        problems.append(f"the tree's shared-memory requests need {passes:.1f} passes on average (1 without bank conflicts): the "
                        "active threads touch words a power of two apart (index = 2 * step * t). Add tile[t + step] into tile[t] "
                        "for t < step instead, so that a warp touches neighbouring words.")
    return problems


# Properties of a right answer to 5.2: partial[b] is block b's grid-stride sum for every block size (a power of two, 32 to
# 1024) and every length, shorter than one block's threads or ending in a partial round; the shared array is sized by the
# launch in bytes; a barrier every thread reaches between the tree's levels (no race, the same bits in every run); the loads
# coalesce; the active threads of a level are contiguous (no divergent warps, no bank conflicts); float32 arithmetic.
def check_block_sums(block_sums: Callable[..., object]) -> None:
    """Exercise 5.2: `block_sums(x, partial, threads_per_block)` launches partial.size blocks; thread t of block b adds x[i] for
    i = b * T + t, b * T + t + grid size, ...; each block's tree in a shared array sized by the launch writes partial[b]."""
    problems: list[str] = []
    first = _block_sizes()[0]
    cases = [(first, first + first // 3)] + [(threads, None) for threads in _block_sizes()]  # fewer elements than threads first
    declared: list[str] = []  # what the launch's shared memory shows before any run
    for threads, n in cases:
        problems = declared = _fixed_shared_problems(block_sums, threads)
        if problems:
            break
        blocks = 2 if threads >= 512 else 3
        n = n or 2 * blocks * threads + threads // 2 + 3  # two rounds of the grid-stride loop and a partial third
        host = _exact_integer_data(n, seed=52 + threads)
        # what a read past the end of x finds on a GPU: a grid's worth, so that a loop one step too long reads only these
        padded = np.concatenate([host, np.full(blocks * threads, 1e6, np.float32)])
        x = to_device(padded)[:n]
        run = run_checked(lambda partial, xx, t=threads: block_sums(xx, partial, t), (blocks,), np.float32, x, repeats=race_repeats())
        want = block_sums_reference(host, blocks, threads)
        outside = next((p for p in run.problems if "indexed outside" in p), None)
        if outside:
            problems = [_outside_words(outside, n)]
            break
        found = run.problems + array_problems(run.got, want, what=f"partial ({blocks} blocks of {threads} threads)", rtol=0.0,
                                              coverage_hint="Launch partial.size blocks; thread 0 of each block writes "
                                                            "partial[cuda.blockIdx.x].")
        if found and run.got.shape == want.shape and not np.isnan(run.got).any():
            if run.got.max() >= 1e6:
                found = ["a block's sum includes values past the end of x: the grid-stride loop runs while i < x.size."]
            elif float(run.got.astype(np.float64).sum()) == float(host.astype(np.float64).sum()):
                found = ["the blocks' sums add up to the sum of x, but each block summed other elements than the grid-stride loop "
                         "gives it: thread t of block b takes x[i] for i = b * threads_per_block + t, then i + cuda.gridsize(1), "
                         "... (a thread that sums a stretch of its own also reads uncoalesced)."]
            elif np.array_equal(run.got, np.array([host[b * threads:].astype(np.float64).sum() for b in range(blocks)], np.float32)):
                found = ["each block added every element from its own first one to the end of x: the grid-stride loop steps by "
                         "one block (cuda.blockDim.x), so the blocks add each other's elements more than once. Step by the whole "
                         "grid, cuda.gridsize(1) = cuda.blockDim.x * cuda.gridDim.x."]
            elif np.array_equal(run.got, block_sums_reference(host[:blocks * threads], blocks, threads)):
                found = [f"each thread added only its first element: with {blocks} blocks of {threads} threads and {n} elements, "
                         "a thread adds x[i], x[i + cuda.gridsize(1)], ... while i < x.size (a grid-stride loop)."]
        problems = found
        if found:
            break
    n_small = PATTERN_THREADS + 77  # the second block has threads with no element
    arguments = [("traced", "x", _exact_integer_data(n_small, seed=520)), ("traced", "partial", np.zeros(2, np.float32)),
                 ("value", "threads_per_block", PATTERN_THREADS)]
    trace, note = trace_naming_races(block_sums, arguments, "Exercise 5.2",
                                     "Every thread stores its total in its slot, before the barrier.")
    if problems and not declared and trace is None and "out of bounds" in note:  # on a GPU a read past the shared array gives wrong values; the
        problems = [_outside_words(note, n_small)]             # traced run in the simulator names it
    fail(problems, "Exercise 5.2")
    if trace is not None:
        problems += _tree_pattern_problems(trace) + float64_problems(trace)
    fail(problems, "Exercise 5.2")
    checked, sanitizer_note = racecheck_problems(block_sums, arguments)
    fail(checked, "Exercise 5.2")
    slow, speed = _block_sums_speed(block_sums)
    fail(slow, "Exercise 5.2")
    passed(f"Exercise 5.2: every block's sum is exact with {', '.join(map(str, _block_sizes()))} threads per block "
           f"({race_repeats()} runs each, a partial last round), coalesced loads, a barrier at each level of the tree and "
           f"contiguous active threads{sanitizer_note}{speed}{note}.")
    speed_note("Exercise 5.2", "block sums")


def _block_sums_speed(block_sums: Callable[..., object]) -> tuple[list[str], str]:
    """On a GPU, block_sums with 256 threads beside chapter 5's tree kernel, the same grid filling the GPU, on an array beyond L2."""
    if not mode.on_gpu():
        return [], ""
    n = elements_beyond_l2(4)
    threads = 256
    blocks = resident_blocks(threads, n)
    x = to_device(_exact_integer_data(n, seed=529))
    partial = to_device(np.zeros(blocks, np.float32))
    tree = partial_sum_kernel("tree", "float32")
    return speed_verdict("Exercise 5.2", "block sums", lambda: block_sums(x, partial, threads),
                         lambda: tree[blocks, threads, 0, 4 * threads](x, partial), 4 * n, 4 * n,
                         "Do the threads of a block load neighbouring elements at every step of the grid-stride loop?")


# ---------------------------------------------------------------------------------------------
# Exercise 5.3: one atomic per block


def _atomic_count_problems(trace) -> list[str]:
    """How many atomics the sum makes into total, from the trace: one per block is the exercise."""
    counts = atomics_per_launch(trace, "total")
    if not counts:
        return ["no block adds to total[0] with an atomic: the exercise asks each block to add its partial sum with "
                "cuda.atomic.add(total, 0, s), from one thread."]
    n = trace.shapes.get("x", (0,))[0]
    for atomics, blocks in counts:
        if atomics <= blocks:
            continue
        per_block = atomics / blocks
        if atomics == n:
            return [f"the sum makes {atomics} atomic additions for {n} elements, one per element: they all wait for each other on "
                    "one address. Let each block first sum its elements (a grid-stride loop, then a tree or warp shuffles) and "
                    "add the block's sum once, from thread 0."]
        return [f"the sum makes {atomics} atomic additions with {blocks} blocks, {per_block:.0f} per block: more than one thread per "
                "block adds. Let only thread 0 (after the block's tree, or its last warp shuffle) do the atomic add."]
    return []


# Properties of a right answer to 5.3: total[0] is the exact sum, starting from whatever total held (it is set to 0 first),
# for 1, 257 and many elements with blocks at the same time; kernel threads read every element; one atomic per block.
def check_atomic_sum(atomic_sum: Callable[..., object], kernel=None) -> None:
    """Exercise 5.3: `atomic_sum(x, total)` writes the sum of x into total[0]; each block adds its sum with one atomic.

    `kernel` (the kernel atomic_sum launches) is accepted for the notebook's call and not needed: what the
    kernel does is read from a traced run.
    """
    problems: list[str] = []
    for number, n in enumerate((1, 257, problem_size("ch5_exercise"))):
        host = _exact_integer_data(n, seed=530 + number)
        exact = float(host.astype(np.float64).sum())
        total = to_device(np.full(1, 123.0, np.float32))  # not zero: the solution must clear it itself
        with interleaved_blocks() if n == 257 else contextlib.nullcontext():  # in the simulator, blocks at the same time
            paced(atomic_sum)(to_device(host), total)
        got = float(to_host(total)[0])
        if got == exact + 123.0:
            problems.append(f"n = {n}: total[0] ended as the sum plus what it held before (123): set it to zero first (a tiny kernel, "
                            "or total[:] = 0 with the array module) before the blocks add to it.")
        elif got != exact:
            problems += _sum_problems(got, host, f"n = {n}")
        if problems:
            break
    trace, note = trace_naming_races(atomic_sum, _small_sum_arguments("total", 531), "Exercise 5.3")
    if trace is not None:
        read = [] if problems else _kernel_read_problems(trace, "x", _small_sum_size(), "the sum")  # right values, made where?
        problems = read + _atomic_count_problems(trace) + problems
    fail(problems[:1], "Exercise 5.3")
    fail(float64_problems(trace), "Exercise 5.3")
    slow, speed = _atomic_sum_speed(atomic_sum)
    fail(slow, "Exercise 5.3")
    atomics = f", {atomics_per_launch(trace, 'total')[-1][0]} atomic(s) for as many blocks in a traced run" if trace else ""
    passed(f"Exercise 5.3: atomic_sum is exact (1, 257 and {problem_size('ch5_exercise')} elements, blocks run at the same time), "
           f"starts from zero{atomics}{speed}{note}.")
    speed_note("Exercise 5.3", "atomic sum")


def _atomic_sum_speed(atomic_sum: Callable[..., object]) -> tuple[list[str], str]:
    """On a GPU, atomic_sum beside chapter 5's one-atomic-per-block sum, on an array beyond L2."""
    if not mode.on_gpu():
        return [], ""
    n = elements_beyond_l2(4)
    x = to_device(_exact_integer_data(n, seed=539))
    total = to_device(np.zeros(1, np.float32))
    return speed_verdict("Exercise 5.3", "atomic sum", lambda: atomic_sum(x, total), lambda: reference_atomic_sum(x, total),
                         4 * n, 4 * n, "Do enough blocks run to fill the GPU, and does each block make one atomic, not one per element?")


# ---------------------------------------------------------------------------------------------
# Exercise 5.4: option payoffs


#: The contract of exercise 5.4: T = 2 years, so that forgetting sqrt(T) or the drift shows.
EXERCISE_OPTION = EuropeanOption(S=5.0, E=4.5, r=0.08, sigma=0.3, T=2.0)


def _payoffs(z: np.ndarray, option: EuropeanOption, drift: float, volatility: float, discount: float) -> np.ndarray:
    final = option.S * np.exp(drift + volatility * z.astype(np.float64))
    return np.stack([discount * np.maximum(final - option.E, 0.0), discount * np.maximum(option.E - final, 0.0)]).astype(np.float32)


# Properties of a right answer to 5.4: out[0, i] and out[1, i] are the discounted call and put of path i for every i (n a
# multiple of no block size); z is unchanged; float32 arithmetic, float32 scalars handed to the kernel.
def check_payoffs(payoffs: Callable[..., object]) -> None:
    """Exercise 5.4: `payoffs(z, out, S, E, r, sigma, T)` writes the discounted call (out[0, i]) and put (out[1, i]) payoffs of path i."""
    option = EXERCISE_OPTION
    n = problem_size("ch5_exercise_paths") + 37  # a multiple of no block size: blocks rounded down leave paths unwritten
    z = np.random.default_rng(54).standard_normal(n).astype(np.float32)
    call, put = payoffs_reference(z, option)
    want = np.stack([call, put]).astype(np.float32)
    args = (np.float32(option.S), np.float32(option.E), np.float32(option.r), np.float32(option.sigma), np.float32(option.T))
    z_device = to_device(z)
    with recorded_launches() as launches:
        run = paced(run_checked)(lambda out, zz: payoffs(zz, out, *args), (2, n), np.float32, z_device, input_names=("z",))
    fail(run.changed, "Exercise 5.4")
    got, problems = run.got, run.problems
    found = array_problems(got, want, what="out", rtol=2e-5, atol=2e-6, coverage_hint="Give every path i a thread (or a grid-stride loop).")
    if found and not np.isnan(got).any():
        r, sigma, T = option.r, option.sigma, option.T
        mistakes = [
            (_payoffs(z, option, option.drift, option.volatility, 1.0), "the payoffs are not discounted: multiply by exp(-r T)."),
            (_payoffs(z, option, r * T, option.volatility, option.discount),
             "the drift is r T; the log-price drifts by (r - sigma**2 / 2) T (Ito's correction)."),
            (_payoffs(z, option, option.drift, sigma * T, option.discount), "the noise is sigma T z; it is sigma sqrt(T) z."),
            (_payoffs(z, option, option.drift, sigma, option.discount), "the noise is sigma z; over T years it is sigma sqrt(T) z."),
            (want[::-1], "call and put are swapped: out[0] holds the call, max(S_T - E, 0); out[1] the put, max(E - S_T, 0)."),
        ]
        for candidate, message in mistakes:
            if np.allclose(got, candidate, rtol=2e-5, atol=2e-6):
                found.append(message)
                break
    problems += found
    fail(problems, "Exercise 5.4")
    fail(float64_argument_problems(launches), "Exercise 5.4")
    small = 100
    arguments = [("traced", "out", np.zeros((2, small), np.float32)), ("traced", "z", z[:small].copy())]
    trace, note = trace_of(lambda out, zz: payoffs(zz, out, *args), arguments, shared=False)
    fail(float64_problems(trace), "Exercise 5.4")
    exact_call, exact_put = black_scholes(option)
    mean = got.astype(np.float64).mean(axis=1)
    se = got.astype(np.float64).std(axis=1, ddof=1) / math.sqrt(n)
    passed(f"Exercise 5.4: payoffs match NumPy for {n} paths; their means {mean[0]:.4f} (call) and {mean[1]:.4f} (put) are "
           f"{abs(mean[0] - exact_call) / se[0]:.1f} and {abs(mean[1] - exact_put) / se[1]:.1f} standard errors from Black-Scholes, "
           f"computed in float32{note}.")


# ---------------------------------------------------------------------------------------------
# Exercise 5.5: Kahan summation


@numba.njit(cache=False)
def _compensated(x, late, sign):
    """Kahan's float32 loop, or one of its usual slips: `late` updates total before c, `sign` -1 flips c."""
    total = np.float32(0)
    c = np.float32(0)
    for value in x:
        y = value - c
        t = total + y
        if late:
            total = t
            c = np.float32(sign) * ((t - total) - y)
        else:
            c = np.float32(sign) * ((t - total) - y)
            total = t
    return total


#: Sums that are not Kahan's and what each is: (name, function of the float32 array, the words for it).
_NOT_KAHAN = (
    ("plain", lambda x: np.float32(summation.recursive_sum(x, np.float32)),
     "your result is the plain float32 sum, bit for bit: the compensation never reaches the total."),
    ("order", lambda x: np.float32(_compensated(x, True, 1)),
     "c is computed after total = t, so (t - total) is 0 and c is just -y: compute c = (t - total) - y first, then total = t."),
    ("sign", lambda x: np.float32(_compensated(x, False, -1)),
     "the compensation has the wrong sign: c = (t - total) - y holds what the addition lost, negated, and the next term "
     "subtracts it, y = value - c."),
    ("pairwise", lambda x: np.sum(x),
     "your result is numpy.sum's, bit for bit: NumPy adds float32 arrays pairwise, another method. Write Kahan's loop."),
    ("float64", lambda x: np.float32(x.astype(np.float64).sum()),
     "your result is the float64 (or exact, math.fsum) sum rounded to float32, more exact than Kahan's float32 loop can be: "
     "the loop ran in float64 (a Python float, or a float64 accumulator). Keep total, c, y and t in float32 (np.float32(0) to "
     "start, and float32 values from x)."),
    ("exact", lambda x: np.float32(summation.exact_sum(x)),
     "your result is the exact sum rounded to float32 (math.fsum, or float64 arithmetic), more exact than Kahan's float32 loop "
     "can be. Keep total, c, y and t in float32."),
    ("neumaier", lambda x: np.float32(summation.neumaier_sum(x, np.float32)),
     "that is Neumaier's variant (it compares |total| and |value|), not Kahan's loop: write the four steps of notebook 5.5."),
)


def _kahan_cases() -> list[tuple[str, np.ndarray]]:
    tiny = np.concatenate([[1.0], np.full(50_000, 1e-8)]).astype(np.float32)
    series = summation.series_terms(8192, 2)  # largest first: the forward order the book shows is worst
    rng = np.random.default_rng(55)
    lopsided = np.concatenate([[1e4], rng.uniform(0.0, 1e-3, 20_000)]).astype(np.float32)
    return [("1 followed by 50000 terms of 1e-8", tiny), ("1/i**2 for i = 1..8192, largest first", series),
            ("1e4 followed by 20000 terms below 1e-3", lopsided), ("3000 terms of both signs from 1e-3 to 1e4", _mixed_terms())]


@functools.cache
def _mixed_terms() -> np.ndarray:
    """Terms of both signs and many sizes on which Kahan's float32 sum differs, bit for bit, from every other sum of _NOT_KAHAN."""
    for seed in range(100):
        rng = np.random.default_rng(5500 + seed)
        x = (rng.standard_normal(3000) * 10.0 ** rng.integers(-3, 4, 3000)).astype(np.float32)
        kahan = np.float32(summation.kahan_sum(x, np.float32))
        if all(function(x) != kahan for _, function, _ in _NOT_KAHAN):
            return x
    raise RuntimeError("no data set tells Kahan's sum from the others (a course bug)")


# Properties of a right answer to 5.5: the float32 bits of Kahan's loop on every set where the plain, pairwise and float64
# sums differ from it; a float32 result; x unchanged.
def check_kahan(kahan_sum: Callable[[np.ndarray], object]) -> None:
    """Exercise 5.5: `kahan_sum(x)` returns Kahan's compensated sum of the float32 array x, computed in float32 (bit for bit)."""
    cases = _kahan_cases()
    results = []
    for label, x in cases:
        try:
            got, changed = call_keeping_inputs(kahan_sum, x.copy(), names=["x"])
        except Exception as exc:  # any exception is a wrong answer, reported in words
            fail([f"{label}: kahan_sum raised {type(exc).__name__}: {exc}"], "Exercise 5.5")
        fail([f"{label}: {words}" for words in changed], "Exercise 5.5")
        if not isinstance(got, (np.floating, float)) or np.asarray(got).dtype != np.float32:
            fail([f"{label}: return a float32 (np.float32(total)); got {type(got).__name__}."], "Exercise 5.5")
        results.append((label, x, got, np.float32(summation.kahan_sum(x, np.float32))))
    wrong = [(label, x, got, want) for label, x, got, want in results if got != want]
    if wrong:
        label, x, got, want = wrong[0]
        named = next((words for _, function, words in _NOT_KAHAN if all(function(xx) == g for _, xx, g, _ in results)), None)
        if named is None:
            exact = summation.exact_sum(x)
            named = (f"got {float(got):.9g}, Kahan's float32 loop gives {float(want):.9g} (exact {exact:.9g}). Do its four steps "
                     "in order, in float32: y = value - c; t = total + y; c = (t - total) - y; total = t.")
        fail([f"{label}: {named}"], "Exercise 5.5")
    passed(f"Exercise 5.5: kahan_sum gives Kahan's float32 result bit for bit on all {len(cases)} sets, where the plain "
           "float32 sum, numpy.sum and a float64 sum each give another.")
