"""Checks for the chapter 3 exercises on transpose, execution configuration and instructions (solutions/ch03_execution.ipynb).

Exercise 3.4.1 removes the bank conflict from a shared-memory transpose, 3.5.1 picks a block size
by occupancy, 3.5.2 adds instruction-level parallelism to a copy, 3.6.1 regroups the work of a
divergent kernel so that every warp takes one branch. Each check runs the student's code on fresh
random data and says, in words, what is wrong.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable

import numpy as np

from .. import mode
from ..arrays import poison_value, random_array, to_device, to_host
from ..kernels.transpose import column_read_conflict
from ..occupancy import SMLimits, book_sm_limits, occupancy
from ..sizes import problem_size
from . import array_problems, fail, passed, run_guarded

TILE_DIM, BLOCK_ROWS = 32, 8
ILP = 4

# ---------------------------------------------------------------------------------------------
# Exercise 3.4.1: a transpose whose tile has no bank conflicts


def _python_function(kernel):
    return getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel


def shared_array_declarations(kernel) -> list[tuple[tuple[int, ...], bool]]:
    """Each shared array a kernel declares: (shape, computed) read from its source; `computed` if the shape is arithmetic."""
    function = _python_function(kernel)
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as exc:
        raise ValueError(f"cannot read the source of {function!r}: {exc}") from None
    names = dict(function.__globals__)
    closure = inspect.getclosurevars(function)
    names.update(closure.nonlocals)
    shapes = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "array"):
            continue
        owner = node.func.value
        if not (isinstance(owner, ast.Attribute) and owner.attr == "shared"):
            continue
        shape_node = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "shape"), None)
        if shape_node is None:
            continue
        value = eval(compile(ast.Expression(shape_node), "<shape>", "eval"), names)  # constants only, as Numba demands
        computed = any(isinstance(part, (ast.BinOp, ast.Call, ast.UnaryOp)) for part in ast.walk(shape_node))
        shapes.append((tuple(int(v) for v in (value if isinstance(value, (tuple, list)) else (value,))), computed))
    return shapes


def shared_array_shapes(kernel) -> list[tuple[int, ...]]:
    """The shapes of the shared arrays a kernel declares, read from its source (constants looked up in its globals)."""
    return [shape for shape, _ in shared_array_declarations(kernel)]


def check_no_bank_conflicts(transpose_kernel) -> None:
    """Exercise 3.4.1: `transpose_kernel(out, inp)` transposes with a 32 x 32 tile, 32 x 8 threads, and no bank conflicts."""
    rows, cols = problem_size("ch3_exercise_transpose")
    host = random_array((rows, cols), np.float32, seed=341)
    blocks = (-(-cols // TILE_DIM), -(-rows // TILE_DIM))
    problems: list[str] = []
    declarations = shared_array_declarations(transpose_kernel)
    if not declarations:
        problems.append("the kernel declares no shared array: stage each tile in cuda.shared.array((rows, columns), float32).")
    for shape, computed in declarations:
        if computed:
            problems.append(
                f"the tile's shape {shape} is computed inside the kernel (an expression such as TILE_DIM + 1). The "
                "simulator accepts that, but Numba on a GPU needs a shared array's shape to be constants: define it "
                "outside the kernel, e.g. TILE_SHAPE = (TILE_DIM, TILE_DIM + 1), and write cuda.shared.array(TILE_SHAPE, float32)."
            )
        if len(shape) != 2 or shape[0] < TILE_DIM or shape[1] < TILE_DIM:
            problems.append(f"the shared tile has shape {shape}; it must hold a 32 x 32 tile (at least (32, 32)).")
            continue
        ways = column_read_conflict(shape[1])
        if ways > 1:
            problems.append(
                f"the tile has rows of {shape[1]} float32: the 32 threads of a warp reading one tile column hit only "
                f"{32 // ways} bank(s), a {ways}-way bank conflict. Make each row one element longer than the tile "
                f"(shape ({shape[0]}, {shape[1] + 1})), so that consecutive rows start in consecutive banks."
            )
    if any(computed for _, computed in declarations):
        fail(problems, "Exercise 3.4.1")  # on a GPU the kernel would not even compile: say why before launching it
    got, found = run_guarded(lambda out, inp: transpose_kernel[blocks, (TILE_DIM, BLOCK_ROWS)](out, inp),
                             (cols, rows), np.float32, to_device(host))
    problems += found
    problems += array_problems(got, np.ascontiguousarray(host.T), what="out", rtol=0,
                               coverage_hint="Each block must write the whole 32 x 32 tile: loop j over 0, 8, 16, 24.")
    fail(problems, "Exercise 3.4.1")
    passed(f"Exercise 3.4.1: the {rows} x {cols} matrix is transposed, and a warp reading a tile column "
           f"touches 32 different banks.")


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
)


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
        reached = occupancy(got, registers, shared, limits)
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


def _loads_before_first_store(kernel) -> int | None:
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
        got, found = run_guarded(lambda out, inp, own, b=blocks, t=threads: copy_ilp_kernel[b, t](out, inp, own),
                                 (n,), np.float64, to_device(host), owner)
        found += array_problems(got, host, what=f"out (launched as [{blocks}, {threads}])", rtol=0,
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
    if not problems:
        loads = _loads_before_first_store(copy_ilp_kernel)
        if loads is not None and loads < ILP:
            problems.append(f"the compiled kernel issues {loads} load(s) before its first store: load all {ILP} values into "
                            "a cuda.local.array first, then store them, so that the loads are in flight together.")
    fail(problems, "Exercise 3.5.2")
    note = "" if mode.on_gpu() else " (the simulator cannot show whether the loads are batched; a GPU run checks the PTX)"
    passed(f"Exercise 3.5.2: each thread copies {ILP} elements, blockDim.x apart, for n = {n}{note}.")


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
        got, found = run_guarded(lambda out, x, own, b=blocks, t=threads: kernel[b, t](out, x, own),
                                 (n,), np.float32, to_device(host), owner)
        found += array_problems(got, expected, what=f"out (launched as [{blocks}, {threads}])", rtol=1e-6, atol=3e-7,
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
    passed(f"Exercise 3.6.1: all {n} results are right, and every warp took one side of the branch.")
