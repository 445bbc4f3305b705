"""Checks for the chapter 3 exercises on transpose, execution configuration and instructions (solutions/ch03_execution.ipynb).

Exercise 3.4.1 removes the bank conflict from a shared-memory transpose, 3.5.1 picks a block size
by occupancy, 3.5.2 adds instruction-level parallelism to a copy, 3.6.1 regroups the work of a
divergent kernel so that every warp takes one branch. Each check runs the student's code on fresh
random data and says, in words, what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import strategies as st
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
from .properties import changed_input_problems, edge_sizes, sizes_from, smallest_failure
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


#: 3.4.1's generated shapes: sides around multiples of 32 (the tile) and 8 (a block's rows), a single row or column.
TRANSPOSE_SHAPES = st.tuples(sizes_from(edge_sizes((8, 32), 41)), sizes_from(edge_sizes((8, 32), 41)))


def _transpose_case_problem(launch: Callable[..., object], shape: tuple[int, int]) -> str | None:
    """3.4.1 on one shape: out == inp.T bit for bit, inp unchanged."""
    host = random_array(shape, np.float32, seed=shape[0] * 100 + shape[1])
    inp = to_device(host)
    run = run_checked(launch, shape[::-1], np.float32, inp)
    found = (run.problems or changed_input_problems({"inp": (inp, host)}, "transpose_kernel")
             or array_problems(run.got, np.ascontiguousarray(host.T), what=f"out (inp of {shape[0]} x {shape[1]})", rtol=0,
                               coverage_hint="Check both bounds, for the loads (rows, cols) and for the stores (cols, rows)."))
    return f"{found[0]} (the smallest failing shape found: {shape[0]} x {shape[1]})" if found else None


def check_no_bank_conflicts(transpose_kernel) -> None:
    """Exercise 3.4.1: `transpose_kernel(out, inp)` transposes with a 32 x 32 tile, 32 x 8 threads, no bank conflicts, no races.

    Properties: out == inp.T bit for bit for sides around multiples of 32 (the tile) and 8 (a block's rows), one either
    side, a single row or column (`TRANSPOSE_SHAPES`, after the notebook's shape); inp unchanged; the same result on
    every run (no race); a shared tile that compiles on a GPU (a constant shape); on a traced run of 2 x 2 partial tiles,
    reads and writes coalesced, float32 only, and each shared-memory request of a warp in one pass (no bank conflict).
    """
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
    problems += (changed_input_problems({"inp": (inp, host)}, "transpose_kernel") or run.problems
                 or array_problems(run.got, np.ascontiguousarray(host.T), what="out", rtol=0,
                                   coverage_hint="Each block must write the whole 32 x 32 tile: loop j over 0, 8, 16, 24."))
    if not problems:
        found = smallest_failure(lambda shape: _transpose_case_problem(launch, shape), TRANSPOSE_SHAPES, examples=((1, 33),),
                                 max_examples=1, shrink_calls=4)
        problems += [found[1]] if found else []
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


#: 3.5.1's generated kernels: registers per thread and shared bytes per block at the edges where a limit starts to bind
#: (register file, shared memory, blocks per SM), on the book's two GPUs.
PICK_CASES = st.tuples(sizes_from(("Tesla K20", "Tesla C2050")), sizes_from((8, 16, 20, 21, 24, 32, 33, 40, 48, 63, 64)),
                       sizes_from((0, 1, 4096, 12 * 1024, 16 * 1024, 16 * 1024 + 1, 24 * 1024, 24 * 1024 + 1, 40 * 1024)))
#: The lesson's cases, then kernels whose only best block is 1024 threads (one block per SM: the largest block wins).
PICK_EXAMPLES = (*EXERCISE_351_CASES, ("Tesla K20", 16, 16 * 1024), ("Tesla K20", 8, 24 * 1024 + 1))


def _pick_case_problem(pick_block_size: Callable[[int, int, SMLimits], int], gpu: str, registers: int, shared: int) -> str | None:
    """3.5.1 on one kernel: the smallest warp multiple up to 1024 reaching the highest occupancy, sizes that cannot run skipped."""
    limits = book_sm_limits(gpu)
    try:
        want = best_block_size(registers, shared, limits)
    except ValueError:  # no block size runs this kernel at all: no right answer to compare with
        return None
    best = occupancy(want, registers, shared, limits).fraction
    call = f"pick_block_size({registers}, {shared}, {gpu.replace('Tesla ', '')} limits)"
    try:
        got = pick_block_size(registers, shared, limits)
    except NotImplementedError:
        raise
    except LaunchConfigError:
        refused = min(_refused_sizes(registers, shared, limits), default=0)
        return (f"{call} raised LaunchConfigError: with this kernel, blocks of {refused} threads or more cannot run at all. "
                "Catch gpucourse.LaunchConfigError around occupancy(...) and skip those sizes.")
    except Exception as exc:  # any exception is a wrong answer, reported in words
        return f"{call} raised {type(exc).__name__}: {exc}"
    if not isinstance(got, (int, np.integer)) or isinstance(got, bool):
        return f"{call} returned {got!r}; return an int (threads per block)."
    got = int(got)
    if got % limits.warp_size or not 0 < got <= 1024:
        return (f"{call} returned {got}: a block size must be a multiple of the warp size ({limits.warp_size}) "
                "from 32 to 1024, or the last warp is partly idle.")
    try:
        reached = occupancy(got, registers, shared, limits)
    except LaunchConfigError:
        return (f"{call} returned {got}: a block of {got} threads cannot run at all with this kernel (occupancy(...) "
                f"raises LaunchConfigError for it): skip the sizes that raise.")
    if reached.fraction < best:
        only = " (only 1024 reaches it: is 1024 itself among the sizes you try? range(32, 1025, 32))" if want == 1024 else ""
        return (f"{call} returned {got}, which reaches occupancy {reached.fraction:.3f} (limited by {reached.limited_by}); "
                f"block size {want} reaches {best:.3f}{only}. Try every multiple of 32 up to 1024.")
    if got != want:
        return (f"{call} returned {got}; it reaches the best occupancy ({best:.3f}), but so does the smaller {want}: return the "
                "smallest such size.")
    return None


def check_pick_block_size(pick_block_size: Callable[[int, int, SMLimits], int]) -> None:
    """Exercise 3.5.1: `pick_block_size(registers, shared_bytes, limits)` returns the smallest block size of highest occupancy.

    Properties, tested on the lesson's cases and generated kernels (`PICK_CASES`): the answer is a multiple of 32 from
    32 to 1024 (1024 included: for a kernel that fits one block per SM, 1024 alone is best); no other size reaches a
    higher occupancy; no smaller size reaches the same; sizes that cannot run (LaunchConfigError) are skipped, never
    returned; an int.
    """
    fail([problem for problem in (_pick_case_problem(pick_block_size, *case) for case in EXERCISE_351_CASES) if problem],
         "Exercise 3.5.1")  # the lesson's cases: every one that fails is named (up to three)
    found = smallest_failure(lambda case: _pick_case_problem(pick_block_size, *case), PICK_CASES,
                             examples=PICK_EXAMPLES[len(EXERCISE_351_CASES):], max_examples=40)
    if found:
        fail([found[1]], "Exercise 3.5.1")
    passed(f"Exercise 3.5.1: pick_block_size finds the smallest block of highest occupancy in all {len(PICK_EXAMPLES)} cases of the "
           "lesson (1024 threads alone best in two) and in generated kernels.")


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


#: 3.5.2's generated cases: lengths around multiples of a warp, of a block and of a block's ILP span, blocks of 32 to 128.
ILP_CASES = st.tuples(sizes_from(edge_sizes((32, 64, 4 * 32, 4 * 64, 4 * 96), 400)), sizes_from((64, 32, 96, 128)))


def _ilp_case_problem(copy_ilp_kernel, n: int, threads: int) -> str | None:
    """3.5.2 on one launch: out == inp bit for bit, inp unchanged, element k copied by the thread the exercise names."""
    host = random_array(n, np.float64, seed=n + threads)
    blocks = -(-n // (threads * ILP))
    inp, owner = to_device(host), to_device(np.full(n, poison_value(np.int64), dtype=np.int64))
    run = run_checked(lambda out, source, own: copy_ilp_kernel[blocks, threads](out, source, own), (n,), np.float64, inp, owner)
    found = (run.problems or changed_input_problems({"inp": (inp, host)}, "copy_ilp_kernel")
             or array_problems(run.got, host, what=f"out (n = {n}, launched as [{blocks}, {threads}])", rtol=0,
                               coverage_hint=f"{blocks} blocks of {threads} threads cover n = {n} only if each thread copies {ILP} "
                                             "elements."))
    if not found:
        index = np.arange(n)
        block, within = index // (threads * ILP), index % (threads * ILP)
        expected = block * threads + within % threads
        owners = to_host(owner)
        wrong = np.flatnonzero(owners != expected)
        if wrong.size:
            k = int(wrong[0])
            found = [f"element {k} was copied by thread {owners[k]}, expected thread {expected[k]}. Thread t of block b copies "
                     f"i, i + blockDim.x, i + 2*blockDim.x, i + 3*blockDim.x with i = b*blockDim.x*{ILP} + t: then the "
                     "threads of a warp read neighbouring elements at every step (coalesced). Also write "
                     "owner[k] = cuda.grid(1) for each element k the thread copies."]
    return f"{found[0]} (the smallest failing case found: n = {n}, blocks of {threads})" if found else None


def check_copy_ilp(copy_ilp_kernel) -> None:
    """Exercise 3.5.2: `copy_ilp_kernel(out, inp, owner)` copies ILP = 4 elements per thread, blockDim.x apart.

    Properties, tested on the notebook's length with blocks of 64 and 32, then generated lengths and blocks
    (`ILP_CASES`: around multiples of 32, of a block and of a block's span of 4 blocks; blocks of 32 to 128 threads):
    out == inp bit for bit; inp unchanged; element i + j * blockDim.x (i = b * blockDim.x * 4 + t) copied by thread
    b * blockDim.x + t (owner); on a traced run, each thread's 4 loads before its first store.
    """
    n = problem_size("ch3_exercise_ilp")
    found = smallest_failure(lambda case: _ilp_case_problem(copy_ilp_kernel, *case), ILP_CASES, examples=((n, 64), (n, 32)),
                             max_examples=3, shrink_calls=8)
    problems: list[str] = [found[1]] if found else []
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


#: 3.6.1's generated cases: lengths around multiples of a warp and of a warp pair, blocks of 64 to 256 (multiples of 64).
BRANCH_CASES = st.tuples(sizes_from(edge_sizes((32, 64), 300)), sizes_from((128, 64, 192, 256)))


def _branch_case_problem(kernel, n: int, threads: int) -> str | None:
    """3.6.1 on one launch: sin for even k, cos for odd k, x unchanged, and each warp handling one parity only."""
    host = random_array(n, np.float32, seed=n + threads, low=-3, high=3)
    index = np.arange(n)
    expected = np.where(index % 2 == 0, np.sin(host.astype(np.float64)), np.cos(host.astype(np.float64))).astype(np.float32)
    blocks = -(-n // threads)
    x, owner = to_device(host), to_device(np.full(n, poison_value(np.int64), dtype=np.int64))
    run = run_checked(lambda out, xx, own: kernel[blocks, threads](out, xx, own), (n,), np.float32, x, owner)
    found = (run.problems or changed_input_problems({"x": (x, host)}, "sin_or_cos_by_warp")
             or array_problems(run.got, expected, what=f"out (n = {n}, launched as [{blocks}, {threads}])", rtol=1e-6, atol=3e-7,
                               coverage_hint="With one element per thread, warps 2p and 2p + 1 together cover elements "
                                             "64p to 64p + 63: the even ones and the odd ones."))
    if not found:
        owners = to_host(owner)
        if (owners < 0).any():
            k = int(np.flatnonzero(owners < 0)[0])
            return f"owner[{k}] was never written (n = {n}): write owner[k] = cuda.grid(1) for the element k each thread handles."
        warps = owners // 32
        handled = np.bincount(warps)  # elements each warp handled, and how many of them were even
        even = np.bincount(warps, weights=(index % 2 == 0))
        mixed = np.flatnonzero((even > 0) & (even < handled))
        if mixed.size:
            warp = int(mixed[0])
            found = [f"warp {warp} (threads {32 * warp} to {32 * warp + 31}) handled both even and odd elements, so it "
                     "runs both the sin and the cos branch. Give even warps the even elements and odd warps the odd "
                     "ones: lane l of warp w takes element 64 * (w // 2) + 2 * l + w % 2. Also write owner[k] = "
                     "cuda.grid(1) for the element k the thread handles."]
    return f"{found[0]} (the smallest failing case found: n = {n}, blocks of {threads})" if found else None


def check_branch_by_warp(kernel) -> None:
    """Exercise 3.6.1: `kernel(out, x, owner)` writes sin(x[k]) for even k, cos(x[k]) for odd k, each warp one parity.

    Properties, tested on the notebook's length with blocks of 128 and 64, then generated lengths and blocks
    (`BRANCH_CASES`: around multiples of 32 and 64; blocks of 64 to 256): the values (float32 rounding of sin, cos); x
    unchanged; every element's owner written; no warp handles both parities; float32 only (a traced run).
    """
    n = problem_size("ch3_exercise_divergence")
    found = smallest_failure(lambda case: _branch_case_problem(kernel, *case), BRANCH_CASES, examples=((n, 128), (n, 64)),
                             max_examples=3, shrink_calls=8)
    problems: list[str] = [found[1]] if found else []
    fail(problems, "Exercise 3.6.1")
    small = 200
    arguments = [("traced", "out", np.zeros(small, np.float32)), ("traced", "x", random_array(small, np.float32, seed=362)),
                 ("traced", "owner", np.zeros(small, np.int64))]
    trace, note = trace_of(lambda out, x, own: kernel[-(-small // 64), 64](out, x, own), arguments)
    problems += float64_problems(trace)
    fail(problems, "Exercise 3.6.1")
    passed(f"Exercise 3.6.1: all {n} results are right, and every warp took one side of the branch{note}.")
