"""Checks for the chapter 3 exercises on transpose, execution configuration and instructions (solutions/ch03_execution.ipynb).

Exercise 3.4.1 removes the bank conflict from a shared-memory transpose, 3.5.1 picks a block size
by occupancy, 3.5.2 adds instruction-level parallelism to a copy, 3.6.1 regroups the work of a
divergent kernel so that every warp takes one branch. Each check runs the student's code on fresh
random data and says, in words, what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import cuda, float32

from .. import mode
from ..arrays import poison_value, random_array, to_device, to_host
from ..errors import LaunchConfigError
from ..kernels.transpose import column_read_conflict
from ..occupancy import SMLimits, book_sm_limits, occupancy
from ..sizes import problem_size
from . import array_problems, fail, passed
from .evidence import coalescing_problems, float64_problems, racecheck_problems, speed_note, speed_verdict, trace_naming_races, trace_of
from .launches import computed_shape_message, shared_array_declarations
from .runs import race_repeats, run_checked
from .trace import loads_before_first_store, shared_passes_per_request

TILE_DIM, BLOCK_ROWS = 32, 8
ILP = 4

# ---------------------------------------------------------------------------------------------
# Exercise 3.4.1: a transpose whose tile has no bank conflicts


PADDED_TILE = (TILE_DIM, TILE_DIM + 1)


@cuda.jit
def _padded_tile_transpose(out, inp):
    """The speed reference of 3.4.1: the padded-tile transpose written plainly, as the exercise describes it (one bounds check
    per element, signed indices), so that a right answer lands near its speed on any GPU. The package's tuned kernel
    (`gpucourse.kernels.transpose`) is faster by a margin that depends on the GPU (0.81 against 0.54 of the copy on an H200)."""
    tile = cuda.shared.array(PADDED_TILE, float32)
    rows, cols = inp.shape
    x = cuda.blockIdx.x * TILE_DIM + cuda.threadIdx.x
    y = cuda.blockIdx.y * TILE_DIM + cuda.threadIdx.y
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[cuda.threadIdx.y + j, cuda.threadIdx.x] = inp[y + j, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE_DIM + cuda.threadIdx.x
    y = cuda.blockIdx.x * TILE_DIM + cuda.threadIdx.y
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < rows and y + j < cols:
            out[y + j, x] = tile[cuda.threadIdx.x, cuda.threadIdx.y + j]


def shared_array_shapes(kernel) -> list[tuple[int, ...]]:
    """The shapes of the shared arrays a kernel declares, read from its source (constants looked up in its globals)."""
    return [shape for shape, _ in shared_array_declarations(kernel)]


def check_no_bank_conflicts(transpose_kernel) -> None:
    """Exercise 3.4.1: `transpose_kernel(out, inp)` transposes with a 32 x 32 tile, 32 x 8 threads, no bank conflicts, no races."""
    rows, cols = problem_size("ch3_exercise_transpose")
    host = random_array((rows, cols), np.float32, seed=341)
    blocks = (-(-cols // TILE_DIM), -(-rows // TILE_DIM))
    problems: list[str] = []
    declarations = shared_array_declarations(transpose_kernel)
    if not declarations:
        problems.append("the kernel declares no shared array: stage each tile in cuda.shared.array((rows, columns), float32).")
    conflicted: list[str] = []  # what a tile's shape predicts; the trace's count decides (another index order may avoid it)
    for shape, computed in declarations:
        if computed:
            problems.append(computed_shape_message(shape))
        if len(shape) != 2 or shape[0] < TILE_DIM or shape[1] < TILE_DIM:
            problems.append(f"the shared tile has shape {shape}; it must hold a 32 x 32 tile (at least (32, 32)).")
            continue
        ways = column_read_conflict(shape[1])
        if ways > 1:
            conflicted.append(
                f"the tile has rows of {shape[1]} float32: the 32 threads of a warp reading one tile column hit only "
                f"{32 // ways} bank(s), a {ways}-way bank conflict. Make each row one element longer than the tile "
                f"(shape ({shape[0]}, {TILE_DIM + 1})), so that consecutive rows start in consecutive banks."
            )
    fail(problems, "Exercise 3.4.1")  # a kernel that would not compile on a GPU, or has no tile: say why before launching it

    def launch(out, inp):
        transpose_kernel[blocks_for(inp.shape), (TILE_DIM, BLOCK_ROWS)](out, inp)

    def blocks_for(shape):
        return (-(-shape[1] // TILE_DIM), -(-shape[0] // TILE_DIM))

    inp = to_device(host)
    run = run_checked(launch, (cols, rows), np.float32, inp, repeats=race_repeats())
    problems += run.problems or array_problems(run.got, np.ascontiguousarray(host.T), what="out", rtol=0,
                                               coverage_hint="Each block must write the whole 32 x 32 tile: loop j over 0, 8, 16, 24.")
    small = (36, 40)  # 2 x 2 tiles, the last ones partial
    arguments = [("traced", "out", np.zeros(small[::-1], np.float32)), ("traced", "inp", random_array(small, np.float32, seed=342))]
    trace, note = trace_naming_races(launch, arguments, "Exercise 3.4.1",
                                     "Each thread loads 4 rows of the 32 x 32 tile: loop j over 0, 8, 16, 24.")
    fail(problems, "Exercise 3.4.1")
    checked, racecheck_note = racecheck_problems(launch, arguments)
    problems += checked
    if trace is not None:
        problems += float64_problems(trace)
        advice = ("Read a row of inp into a row of the tile, and write a row of out from a column of the tile: "
                  "x = blockIdx.y * 32 + threadIdx.x for the writes, so that threadIdx.x walks out's columns.")
        problems += coalescing_problems(trace, "inp", small, advice) + coalescing_problems(trace, "out", small[::-1], advice, write=True)
        passes = max(shared_passes_per_request(trace.accesses), shared_passes_per_request(trace.accesses, write=True))
        if passes > 1.0 and not problems:
            problems += conflicted or [f"the tile's shared-memory requests need {passes:.1f} passes on average (1 without bank "
                                       "conflicts): a warp touches several words of one bank. Pad each tile row by one element."]
    else:
        problems += conflicted  # no trace: the tile's shape is the evidence
    fail(problems, "Exercise 3.4.1")
    out = to_device(np.zeros((cols, rows), np.float32))
    slow, speed = speed_verdict("Exercise 3.4.1", "transpose", lambda: launch(out, inp),
                                lambda: _padded_tile_transpose[blocks, (TILE_DIM, BLOCK_ROWS)](out, inp), 2 * host.nbytes, host.nbytes,
                                "How does a warp write out, and how many banks does a tile column span?")
    fail(slow, "Exercise 3.4.1")
    passed(f"Exercise 3.4.1: the {rows} x {cols} matrix is transposed bit for bit, coalesced both ways, with no race, and a warp "
           f"reading a tile column touches 32 different banks{racecheck_note}{speed}{note}.")
    speed_note("Exercise 3.4.1", "transpose")


# ---------------------------------------------------------------------------------------------
# Exercise 3.5.1: the smallest block size that reaches the best occupancy


def best_block_size(registers_per_thread: int, shared_bytes_per_block: int, limits: SMLimits,
                    max_threads_per_block: int = 1024) -> int:
    """Reference answer: the smallest warp multiple reaching the highest occupancy any block size reaches."""
    sizes = range(limits.warp_size, max_threads_per_block + 1, limits.warp_size)
    fractions = {}
    for size in sizes:
        try:
            fractions[size] = occupancy(size, registers_per_thread, shared_bytes_per_block, limits).fraction
        except Exception:  # a block that cannot launch at all is no candidate
            continue
    best = max(fractions.values())
    return min(size for size, fraction in fractions.items() if fraction == best)


EXERCISE_351_CASES = (  # (GPU, registers per thread, shared bytes per block)
    ("Tesla K20", 8, 0),
    ("Tesla C2050", 8, 0),
    ("Tesla C2050", 32, 0),
    ("Tesla K20", 16, 12 * 1024),
    ("Tesla K20", 64, 0),
    ("Tesla C2050", 48, 0),  # 48 registers: blocks of 672 threads or more cannot run at all (LaunchConfigError)
)


def _refused_sizes(registers_per_thread: int, shared_bytes_per_block: int, limits: SMLimits) -> list[int]:
    """The warp multiples up to 1024 for which occupancy() raises LaunchConfigError: blocks that cannot run at all."""
    refused = []
    for size in range(limits.warp_size, 1025, limits.warp_size):
        try:
            occupancy(size, registers_per_thread, shared_bytes_per_block, limits)
        except LaunchConfigError:
            refused.append(size)
    return refused


def check_pick_block_size(pick_block_size: Callable[[int, int, SMLimits], int]) -> None:
    """Exercise 3.5.1: `pick_block_size(registers, shared_bytes, limits)` returns the smallest block size of highest occupancy."""
    problems = []
    for gpu, registers, shared in EXERCISE_351_CASES:
        limits = book_sm_limits(gpu)
        want = best_block_size(registers, shared, limits)
        best = occupancy(want, registers, shared, limits).fraction
        call = f"pick_block_size({registers}, {shared}, {gpu.replace('Tesla ', '')} limits)"
        try:
            got = pick_block_size(registers, shared, limits)
        except LaunchConfigError:
            refused = min(_refused_sizes(registers, shared, limits), default=0)
            problems.append(f"{call} raised LaunchConfigError: with this kernel, blocks of {refused} threads or more cannot run at all. "
                            "Catch gpucourse.LaunchConfigError around occupancy(...) and skip those sizes.")
            continue
        except Exception as exc:  # any exception is a wrong answer, reported in words
            problems.append(f"{call} raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(got, (int, np.integer)):
            problems.append(f"{call} returned {got!r}; return an int (threads per block).")
            continue
        got = int(got)
        if got % limits.warp_size or not 0 < got <= 1024:
            problems.append(f"{call} returned {got}: a block size must be a multiple of the warp size ({limits.warp_size}) "
                            "from 32 to 1024, or the last warp is partly idle.")
            continue
        try:
            reached = occupancy(got, registers, shared, limits)
        except LaunchConfigError:
            problems.append(f"{call} returned {got}: a block of {got} threads cannot run at all with this kernel (occupancy(...) "
                            f"raises LaunchConfigError for it): skip the sizes that raise.")
            continue
        if reached.fraction < best:
            problems.append(f"{call} returned {got}, which reaches occupancy {reached.fraction:.3f} (limited by "
                            f"{reached.limited_by}); some block size reaches {best:.3f}. Try every multiple of 32.")
        elif got != want:
            problems.append(f"{call} returned {got}; it reaches the best occupancy ({best:.3f}), but so does the smaller "
                            f"{want}: return the smallest such size.")
    fail(problems, "Exercise 3.5.1")
    passed(f"Exercise 3.5.1: pick_block_size finds the smallest block of highest occupancy in all {len(EXERCISE_351_CASES)} cases.")


# ---------------------------------------------------------------------------------------------
# Exercise 3.5.2: a copy with ILP = 4 loads in flight per thread


def _ptx_loads_before_first_store(kernel) -> int | None:
    """On a GPU: how many global loads the PTX issues before its first global store (None in the simulator)."""
    if mode.is_simulator():
        return None
    from ..compilation import ptx

    count = 0
    for line in ptx(kernel).splitlines():
        if "st.global" in line:
            break
        if "ld.global" in line:
            count += 1
    return count


def check_copy_ilp(copy_ilp_kernel) -> None:
    """Exercise 3.5.2: `copy_ilp_kernel(out, inp, owner)` copies ILP = 4 elements per thread, blockDim.x apart."""
    n = problem_size("ch3_exercise_ilp")
    host = random_array(n, np.float64, seed=352)
    problems: list[str] = []
    for threads in (64, 32):
        blocks = -(-n // (threads * ILP))
        owner = to_device(np.full(n, poison_value(np.int64), dtype=np.int64))
        run = run_checked(lambda out, inp, own, b=blocks, t=threads: copy_ilp_kernel[b, t](out, inp, own),
                          (n,), np.float64, to_device(host), owner)
        got, found = run.got, run.problems
        found = found or array_problems(got, host, what=f"out (launched as [{blocks}, {threads}])", rtol=0,
                                        coverage_hint=f"{blocks} blocks of {threads} threads cover n = {n} only if each thread "
                                                      f"copies {ILP} elements.")
        if not found:
            index = np.arange(n)
            block, within = index // (threads * ILP), index % (threads * ILP)
            expected = block * threads + within % threads
            owners = to_host(owner)
            wrong = np.flatnonzero(owners != expected)
            if wrong.size:
                k = int(wrong[0])
                found.append(
                    f"element {k} was copied by thread {owners[k]}, expected thread {expected[k]}. Thread t of block b copies "
                    f"i, i + blockDim.x, i + 2*blockDim.x, i + 3*blockDim.x with i = b*blockDim.x*{ILP} + t: then the "
                    "threads of a warp read neighbouring elements at every step (coalesced). Also write "
                    "owner[k] = cuda.grid(1) for each element k the thread copies."
                )
        problems += found
        if found:
            break
    fail(problems, "Exercise 3.5.2")
    small = 2 * 64 * ILP + 19
    arguments = [("traced", "out", np.zeros(small, np.float64)), ("traced", "inp", random_array(small, np.float64, seed=353)),
                 ("traced", "owner", np.zeros(small, np.int64))]
    trace, note = trace_of(lambda out, inp, own: copy_ilp_kernel[-(-small // (64 * ILP)), 64](out, inp, own), arguments)
    if trace is not None:
        loads = loads_before_first_store(trace, "inp", "out", ILP)
        if loads is not None and loads < ILP:
            problems.append(f"each thread stores after only {loads} load(s): load all {ILP} values into a cuda.local.array "
                            "first, then store them, so that the loads are in flight together.")
    fail(problems, "Exercise 3.5.2")
    # The PTX only confirms, it does not judge: the compiler may lay out a two-branch answer (all four inside, or a checked
    # tail) with the tail first, and the verdict must be the simulator's (the trace's) on a GPU too.
    ptx_loads = _ptx_loads_before_first_store(copy_ilp_kernel)
    where = " (and in the compiled PTX)" if ptx_loads is not None and ptx_loads >= ILP else ""
    passed(f"Exercise 3.5.2: each thread copies {ILP} elements, blockDim.x apart, for n = {n}, its {ILP} loads before its "
           f"first store{where}{note}.")


# ---------------------------------------------------------------------------------------------
# Exercise 3.6.1: the same results as a divergent kernel, with every warp on one side of the branch


def check_branch_by_warp(kernel) -> None:
    """Exercise 3.6.1: `kernel(out, x, owner)` writes sin(x[k]) for even k, cos(x[k]) for odd k, each warp one parity."""
    n = problem_size("ch3_exercise_divergence")
    host = random_array(n, np.float32, seed=361, low=-3, high=3)
    index = np.arange(n)
    expected = np.where(index % 2 == 0, np.sin(host.astype(np.float64)), np.cos(host.astype(np.float64))).astype(np.float32)
    problems: list[str] = []
    for threads in (128, 64):
        blocks = -(-n // threads)
        owner = to_device(np.full(n, poison_value(np.int64), dtype=np.int64))
        run = run_checked(lambda out, x, own, b=blocks, t=threads: kernel[b, t](out, x, own), (n,), np.float32, to_device(host), owner)
        got, found = run.got, run.problems
        found = found or array_problems(got, expected, what=f"out (launched as [{blocks}, {threads}])", rtol=1e-6, atol=3e-7,
                                        coverage_hint="With one element per thread, warps 2p and 2p + 1 together cover elements "
                                                      "64p to 64p + 63: the even ones and the odd ones.")
        if not found:
            warps = to_host(owner) // 32
            handled = np.bincount(warps)  # elements each warp handled, and how many of them were even
            even = np.bincount(warps, weights=(index % 2 == 0))
            mixed = np.flatnonzero((even > 0) & (even < handled))
            if mixed.size:
                warp = int(mixed[0])
                found.append(
                    f"warp {warp} (threads {32 * warp} to {32 * warp + 31}) handled both even and odd elements, so it "
                    "runs both the sin and the cos branch. Give even warps the even elements and odd warps the odd "
                    "ones: lane l of warp w takes element 64 * (w // 2) + 2 * l + w % 2. Also write owner[k] = "
                    "cuda.grid(1) for the element k the thread handles."
                )
        problems += found
        if found:
            break
    fail(problems, "Exercise 3.6.1")
    small = 200
    arguments = [("traced", "out", np.zeros(small, np.float32)), ("traced", "x", random_array(small, np.float32, seed=362)),
                 ("traced", "owner", np.zeros(small, np.int64))]
    trace, note = trace_of(lambda out, x, own: kernel[-(-small // 64), 64](out, x, own), arguments)
    problems += float64_problems(trace)
    fail(problems, "Exercise 3.6.1")
    passed(f"Exercise 3.6.1: all {n} results are right, and every warp took one side of the branch{note}.")
