"""Chapter 5, reductions (book §5.3): the sum of an array, from the book's two-kernel tree to one at memory speed.

Blocks cannot wait for each other inside a launch, so a sum over a whole grid is made of two steps:
every block reduces its share to one partial sum, and then either a second, one-block launch adds
the partials (the book's `partial_sum` + `final_sum`) or each block adds its partial to the total
with an atomic operation (one atomic per block; the book's atomic lock is the older way to do that).

Inside a block the partial sums are combined by a *tree*: half the threads add the other half's
values, then a quarter, ... (`tree` keeps the active threads contiguous, as the book's Figure 5.5;
`interleaved` is the divergent Figure 5.4). Since Kepler, a warp can do its part of the tree in
registers with shuffles (`cuda.shfl_down_sync`): `shuffle` needs shared memory only for one value
per warp. What makes a reduction fast, though, happens before the tree: each thread first adds up
many elements alone (a grid-stride loop), and `unrolled` issues several independent loads per
thread before it adds them, so that enough bytes are in flight to keep the memory busy.

Every sum is a *plan* (`gpucourse.launch`): its partial-sum buffer is allocated and its two
launches are bound once, so that calling it in a loop costs two driver calls and nothing else.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numba
import numpy as np
from numba import cuda

from .. import mode
from ..arrays import device_empty
from ..device import current_device
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import bind, owned, planned
from ..sizes import problem_size
from ..validate import blocks_to_cover, check_blocks, check_device_array, check_threads_per_block, check_whole_warps

#: Input dtypes the sums accept, and the accumulator each uses unless told otherwise.
ACCUMULATORS: dict[str, str] = {"float32": "float32", "float64": "float64", "int32": "int64", "int64": "int64"}
#: The ways a block combines its threads' values.
BLOCK_REDUCTIONS = ("tree", "interleaved", "shuffle")
#: Threads per block of the one-block second pass.
FINAL_THREADS = 1024
FULL_MASK = 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# Inside a block


def accumulator_dtype(dtype, accumulator=None) -> np.dtype:
    """The dtype partial sums of `dtype` values are kept in (`accumulator` overrides it: float64 for float32 data, say)."""
    name = np.dtype(dtype).name
    if name not in ACCUMULATORS:
        raise ArrayArgumentError(f"the sums take {', '.join(ACCUMULATORS)} arrays; got {name}.")
    chosen = np.dtype(accumulator or ACCUMULATORS[name])
    if chosen.name not in ("float32", "float64", "int64"):
        raise ArrayArgumentError(f"the accumulator must be float32, float64 or int64; got {chosen.name}.")
    if (chosen.kind == "f") != (np.dtype(dtype).kind == "f"):
        kind = "floating-point" if np.dtype(dtype).kind == "f" else "integer"
        raise ArrayArgumentError(f"a {name} array needs an {kind} accumulator; got {chosen.name}.")
    return chosen


@cuda.jit(device=True, inline=True)
def warp_sum(value):
    """The sum of `value` over the 32 lanes of a warp, in lane 0 (shuffles: no shared memory, no barrier)."""
    offset = 16
    while offset > 0:
        value += cuda.shfl_down_sync(FULL_MASK, value, offset)
        offset //= 2
    return value


@cuda.jit(device=True, inline=True)
def block_sum_tree(scratch, value):
    """The block's sum of `value`, in thread 0: a shared-memory tree, the active threads kept contiguous.

    `scratch` holds one value per thread; the block size must be a power of two.
    """
    t = cuda.threadIdx.x
    scratch[t] = value
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            scratch[t] += scratch[t + step]
        cuda.syncthreads()  # every level reads what the level before wrote
        step //= 2
    return scratch[0]


@cuda.jit(device=True, inline=True)
def block_sum_interleaved(scratch, value):
    """As `block_sum_tree`, with the book's first, divergent pairing: thread t adds t + step when t is a multiple of 2 step."""
    t = cuda.threadIdx.x
    scratch[t] = value
    cuda.syncthreads()
    step = 1
    while step < cuda.blockDim.x:
        if t % (2 * step) == 0:
            scratch[t] += scratch[t + step]
        cuda.syncthreads()
        step *= 2
    return scratch[0]


@cuda.jit(device=True, inline=True)
def block_sum_shuffle(warp_totals, value):
    """The block's sum of `value`, in thread 0: each warp sums by shuffles, then warp 0 sums the warps' totals.

    `warp_totals` holds 32 values (one per warp of the largest block); the block size must be a
    multiple of 32, since the full-mask shuffles need every lane of every warp (launchers check it).
    """
    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    value = warp_sum(value)
    if lane == 0:
        warp_totals[warp] = value
    cuda.syncthreads()
    if warp == 0:
        warps = (cuda.blockDim.x + 31) // 32
        value = warp_totals[lane] if lane < warps else value * 0
        value = warp_sum(value)
    return value


# ---------------------------------------------------------------------------------------------
# Two float32 values read as one 8-byte word (a uint64 view of float32 data: "wide" loads)

if mode.is_simulator():

    def low_float(word):
        """The float32 in the low 4 bytes of a uint64 word (the element with the even index)."""
        return np.array([int(word) & 0xFFFFFFFF], np.uint32).view(np.float32)[0]

    def high_float(word):
        """The float32 in the high 4 bytes of a uint64 word (the element with the odd index)."""
        return np.array([int(word) >> 32], np.uint32).view(np.float32)[0]

else:
    from numba.cuda import libdevice

    @cuda.jit(device=True, inline=True)
    def low_float(word):
        """The float32 in the low 4 bytes of a uint64 word (the element with the even index): a register move."""
        return libdevice.int_as_float(numba.int32(word & 0xFFFFFFFF))

    @cuda.jit(device=True, inline=True)
    def high_float(word):
        """The float32 in the high 4 bytes of a uint64 word (the element with the odd index): a register move."""
        return libdevice.int_as_float(numba.int32(word >> 32))


# ---------------------------------------------------------------------------------------------
# Kernels: each block reduces its share of x; thread 0 writes the block's partial sum (or adds it atomically)


@functools.cache
def partial_sum_kernel(block: str, accumulator: str, loads_per_thread: int = 1, atomic: bool = False, wide: bool = False):
    """A kernel (x, out) in which each block sums its grid-stride share of x with `block` and writes out[blockIdx.x].

    `loads_per_thread` > 1 issues that many independent loads per thread before adding them; with
    `atomic`, thread 0 adds the block's sum to out[0] with `cuda.atomic.add` instead. With `wide`,
    the kernel takes (words, x, out): `words` is a uint64 view of the float32 array x, so that each
    load brings two values, and thread 0 of block 0 adds the odd last element of x, if there is one.
    """
    if block not in BLOCK_REDUCTIONS:
        raise ValueError(f"block must be one of {BLOCK_REDUCTIONS}; got {block!r}")
    if loads_per_thread < 1:
        raise LaunchConfigError(f"loads_per_thread must be at least 1; got {loads_per_thread}")
    ACC = numba.from_dtype(np.dtype(accumulator))
    LOADED = numba.uint64 if wide else ACC
    ZERO = np.dtype(accumulator).type(0)
    U = int(loads_per_thread)
    TREE, INTERLEAVED, ATOMIC, WIDE = block == "tree", block == "interleaved", bool(atomic), bool(wide)

    SHARED = 0 if TREE or INTERLEAVED else 32  # a tree needs one value per thread (sized at launch), shuffles one per warp

    def finish(total, out, scratch):
        if TREE:
            total = block_sum_tree(scratch, total)
        elif INTERLEAVED:
            total = block_sum_interleaved(scratch, total)
        else:
            total = block_sum_shuffle(scratch, total)
        if cuda.threadIdx.x == 0:
            if ATOMIC:
                cuda.atomic.add(out, 0, total)
            else:
                out[cuda.blockIdx.x] = total

    finish = cuda.jit(device=True, inline=True)(finish)

    if WIDE:

        @cuda.jit
        def partial_sum_wide(words, x, out):
            n = words.size
            start = cuda.grid(1)
            stride = cuda.gridsize(1)
            total = ZERO
            values = cuda.local.array(U, LOADED)
            chunk = U * stride
            i = start
            for _ in range(n // chunk):  # whole rounds: U 8-byte loads in flight, then 2 U additions
                for k in range(U):
                    values[k] = words[i + k * stride]
                for k in range(U):
                    total += ACC(low_float(values[k])) + ACC(high_float(values[k]))  # added in the accumulator's precision
                i += chunk
            for j in range(n // chunk * chunk + start, n, stride):
                total += ACC(low_float(words[j])) + ACC(high_float(words[j]))
            if start == 0 and x.size % 2:
                total += x[x.size - 1]
            finish(total, out, cuda.shared.array(SHARED, ACC))

        return partial_sum_wide

    @cuda.jit
    def partial_sum(x, out):
        n = x.size
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        total = ZERO
        if U == 1:
            for i in range(start, n, stride):  # each thread first adds up its elements alone
                total += x[i]
        else:
            values = cuda.local.array(U, ACC)  # registers: every loop over it has a constant trip count
            chunk = U * stride
            i = start
            for _ in range(n // chunk):  # whole rounds: U loads in flight, then U additions
                for k in range(U):
                    values[k] = x[i + k * stride]
                for k in range(U):
                    total += values[k]
                i += chunk
            for j in range(n // chunk * chunk + start, n, stride):  # the tail: fewer than U elements each
                total += x[j]
        finish(total, out, cuda.shared.array(SHARED, ACC))

    return partial_sum


@functools.cache
def lock_sum_kernel(accumulator: str):
    """The book's atomic-lock sum (§5.3.1): a tree per block, then thread 0 takes a lock and adds to out[0]."""
    ACC = numba.from_dtype(np.dtype(accumulator))
    ZERO = np.dtype(accumulator).type(0)

    @cuda.jit
    def lock_sum(x, out, lock):
        total = ZERO
        for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
            total += x[i]
        total = block_sum_tree(cuda.shared.array(0, ACC), total)
        if cuda.threadIdx.x == 0:
            while cuda.atomic.cas(lock, 0, 0, 1) != 0:  # spin until this block holds the lock
                pass
            cuda.threadfence()  # acquire: see what the block before wrote
            out[0] += total
            cuda.threadfence()  # release: publish the new total before opening the lock
            cuda.atomic.exch(lock, 0, 0)

    return lock_sum


@functools.cache
def element_atomic_kernel(accumulator: str):
    """Every thread adds every one of its elements to out[0] with an atomic: correct, and a queue at one address."""

    @cuda.jit
    def element_atomic(x, out):
        for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
            cuda.atomic.add(out, 0, x[i])

    return element_atomic


@cuda.jit
def zero_first_kernel(out, lock):
    """out[0] = 0 and lock[0] = 0 (the start of an atomic or locked sum)."""
    if cuda.grid(1) == 0:
        out[0] = 0
        lock[0] = 0


# ---------------------------------------------------------------------------------------------
# Launch plans


def default_threads() -> int:
    """Threads per block of the chapter's kernels unless told otherwise (fewer in the simulator: each is a Python thread)."""
    return int(problem_size("ch5_threads_per_block"))


def resident_blocks(threads_per_block: int, n: int | None = None, loads_per_thread: int = 1) -> int:
    """Blocks that fill the GPU once (SMs x resident blocks per SM), or fewer if `n` needs fewer; 2 in the simulator."""
    device = current_device()
    if device.simulated or not device.multiprocessors:
        blocks = 2
    else:
        per_sm = max(1, (device.max_threads_per_multiprocessor or 2048) // threads_per_block)
        if device.max_blocks_per_multiprocessor:
            per_sm = min(per_sm, device.max_blocks_per_multiprocessor)
        blocks = device.multiprocessors * per_sm
    if n is not None:
        blocks = min(blocks, blocks_to_cover(blocks_to_cover(n, loads_per_thread), threads_per_block))
    return max(1, blocks)


def default_blocks(n: int, threads_per_block: int, loads_per_thread: int = 1, wide: bool = False) -> int:
    """The blocks a sum of n elements launches unless told otherwise: one full GPU, or fewer if n needs fewer."""
    return resident_blocks(threads_per_block, -(-n // 2) if wide else n, loads_per_thread)


def _checked(bound, threads_per_block: int):
    """A bound kernel, after checking that the driver can run a block of `threads_per_block` of it (registers are the limit)."""
    limit = bound.max_threads_per_block
    if limit is not None and threads_per_block > limit:
        raise LaunchConfigError(
            f"{bound.name} uses so many registers per thread that a block may have at most {limit} threads; "
            f"{threads_per_block} asked. Use fewer threads per block, or fewer loads per thread."
        )
    return bound


def final_pass_threads(partials: int) -> int:
    """Threads of the one-block second pass: a power of two from 32 up to FINAL_THREADS, enough for one partial each."""
    threads = 32
    while threads < partials and threads < min(FINAL_THREADS, current_device().max_threads_per_block):
        threads *= 2
    return threads


def _check_sum_arguments(x, result, accumulator, block: str, threads_per_block: int | None, loads_per_thread: int = 1
                         ) -> tuple[np.dtype, int]:
    if not isinstance(loads_per_thread, (int, np.integer)) or loads_per_thread < 1:
        raise LaunchConfigError(f"loads_per_thread must be a whole number, at least 1; got {loads_per_thread!r}")
    check_device_array(x, "x", ndim=1)
    acc = accumulator_dtype(x.dtype, accumulator)
    check_device_array(result, "result", shape=(1,))
    if np.dtype(result.dtype) != acc:
        raise ArrayArgumentError(
            f"result has dtype {np.dtype(result.dtype).name}, but the partial sums are {acc.name}: allocate result as a "
            f"1-element {acc.name} array (or pass accumulator='{np.dtype(result.dtype).name}')."
        )
    (tpb,) = check_threads_per_block(threads_per_block or default_threads())
    if block in ("tree", "interleaved") and tpb & (tpb - 1):
        raise LaunchConfigError(
            f"the {block} reduction halves the block at each level: threads_per_block must be a power of two; got {tpb}. "
            "(block='shuffle' takes any multiple of 32.)"
        )
    if block == "shuffle":
        check_whole_warps(tpb, "the shuffle reduction sums whole warps")
    return acc, tpb


def wide_view(x):
    """The float32 array x as uint64 words, two values each (its even-length start; no copy). x must be contiguous, 8-byte aligned."""
    if np.dtype(x.dtype) != np.float32:
        raise ArrayArgumentError(f"wide loads read float32 values in pairs; x is {np.dtype(x.dtype).name}.")
    strides = tuple(x.strides)
    if strides and strides[0] != 4:
        raise ArrayArgumentError("wide loads need a contiguous x (stride 4 bytes); copy the view first.")
    address = x.__cuda_array_interface__["data"][0] if hasattr(x, "__cuda_array_interface__") else x.ctypes.data
    if address % 8:
        raise ArrayArgumentError("wide loads need x to start on an 8-byte boundary: a view that starts at an odd element does not.")
    return x[: x.shape[0] - x.shape[0] % 2].view(np.uint64)


@planned
def two_pass_sum(x, result, block: str = "shuffle", threads_per_block: int | None = None, blocks: int | None = None,
                 loads_per_thread: int = 1, accumulator: str | None = None, wide: bool = False):
    """result[0] <- sum of x in two launches: one partial sum per block, then one block adds the partials.

    `block` is 'tree' (the book's), 'interleaved' (its divergent first version) or 'shuffle';
    `loads_per_thread` independent loads per thread per round (with `wide`, 8-byte loads of two
    float32 values each); `blocks` defaults to one full GPU (`resident_blocks`). The partial-sum
    buffer is allocated once, with the plan.
    """
    acc, tpb = _check_sum_arguments(x, result, accumulator, block, threads_per_block, loads_per_thread)
    blocks = blocks or default_blocks(x.shape[0], tpb, loads_per_thread, wide)
    check_blocks(blocks)
    (partials,) = owned(device_empty(blocks, acc))
    first_args = (wide_view(x), x, partials) if wide else (x, partials)
    first = partial_sum_kernel(block, acc.name, loads_per_thread, wide=bool(wide))
    final = partial_sum_kernel("shuffle" if block == "shuffle" else "tree", acc.name, 1)
    final_threads = final_pass_threads(blocks)
    shared = tpb * acc.itemsize if block != "shuffle" else 0
    return (_checked(bind(first, blocks, tpb, *first_args, shared_bytes=shared), tpb),
            bind(final, 1, final_threads, partials, result, shared_bytes=final_threads * acc.itemsize if block != "shuffle" else 0))


@planned
def atomic_sum(x, result, threads_per_block: int | None = None, blocks: int | None = None, loads_per_thread: int = 1,
               accumulator: str | None = None, lock: bool = False, wide: bool = False):
    """result[0] <- sum of x: zero result, then each block adds its partial sum with one atomic (or, with `lock`, the book's lock)."""
    acc, tpb = _check_sum_arguments(x, result, accumulator, "tree" if lock else "shuffle", threads_per_block, loads_per_thread)
    blocks = blocks or default_blocks(x.shape[0], tpb, loads_per_thread, wide and not lock)
    check_blocks(blocks)
    (lock_word,) = owned(device_empty(1, np.int32))
    zero = bind(zero_first_kernel, 1, 1, result, lock_word)
    if lock:
        return zero, bind(lock_sum_kernel(acc.name), blocks, tpb, x, result, lock_word, shared_bytes=tpb * acc.itemsize)
    args = (wide_view(x), x, result) if wide and not lock else (x, result)
    kernel = partial_sum_kernel("shuffle", acc.name, loads_per_thread, atomic=True, wide=bool(wide) and not lock)
    return zero, _checked(bind(kernel, blocks, tpb, *args), tpb)


@planned
def element_atomic_sum(x, result, threads_per_block: int | None = None, blocks: int | None = None):
    """result[0] <- sum of x with one atomic addition per element (the contention to avoid)."""
    acc, tpb = _check_sum_arguments(x, result, None, "shuffle", threads_per_block)
    blocks = blocks or resident_blocks(tpb, x.shape[0])
    check_blocks(blocks)
    (lock_word,) = owned(device_empty(1, np.int32))
    return bind(zero_first_kernel, 1, 1, result, lock_word), bind(element_atomic_kernel(acc.name), blocks, tpb, x, result)


#: The tuned sum on a GPU: shuffles, 8-byte loads (two float32 values each), four in flight per thread, blocks of 1024, a
#: one-block second pass. The fastest of eight configurations on the H100 (measurements/ch5.md, run 2): 1.017 of the copy.
BEST = {"block": "shuffle", "threads_per_block": 1024, "loads_per_thread": 4, "wide": True}


def best_options(dtype=np.float32) -> dict:
    """`BEST` on a GPU; in the simulator the same with the simulator's block size. Wide loads only for float32 data."""
    options = BEST if mode.on_gpu() else {**BEST, "threads_per_block": default_threads()}
    return options if np.dtype(dtype) == np.float32 else {**options, "wide": False}


def best_sum(x, result, **options) -> None:
    """result[0] <- sum of x with the course's fastest hand-written plan (`BEST`, overridable by keyword)."""
    two_pass_sum(x, result, **{**best_options(x.dtype), **options})


# ---------------------------------------------------------------------------------------------
# Everything a notebook compares, by name


def sum_variants(x, result, threads_per_block: int | None = None, loads_per_thread: int | None = None) -> dict[str, Callable[[], object]]:
    """The hand-written sums of this module on one array, as functions of no arguments that queue the sum."""
    u = loads_per_thread or 4
    threads_per_block = threads_per_block or default_threads()
    variants = {
        "two-pass, tree (book)": lambda: two_pass_sum(x, result, "tree", threads_per_block),
        "two-pass, divergent tree": lambda: two_pass_sum(x, result, "interleaved", threads_per_block),
        "two-pass, warp shuffles": lambda: two_pass_sum(x, result, "shuffle", threads_per_block),
        f"two-pass, shuffles, {u} loads/thread": lambda: two_pass_sum(x, result, "shuffle", threads_per_block, loads_per_thread=u),
        "atomic per block, shuffles": lambda: atomic_sum(x, result, threads_per_block),
        f"atomic per block, {u} loads/thread": lambda: atomic_sum(x, result, threads_per_block, loads_per_thread=u),
        "atomic lock (book)": lambda: atomic_sum(x, result, threads_per_block, lock=True),
    }
    if np.dtype(x.dtype) == np.float32:
        variants["two-pass, 8-byte loads, 2/thread"] = lambda: two_pass_sum(x, result, "shuffle", threads_per_block, loads_per_thread=2,
                                                                             wide=True)
        variants["atomic per block, 8-byte loads, 2/thread"] = lambda: atomic_sum(x, result, threads_per_block, loads_per_thread=2, wide=True)
    return variants


def bytes_read(n: int, dtype) -> int:
    """Bytes a sum must read: every element once (the partial sums are negligible)."""
    return int(n) * np.dtype(dtype).itemsize


def summation_depth(n: int, threads_per_block: int, blocks: int, atomic: bool = False) -> int:
    """The most additions any element of these sums goes through: its thread's loop, the block's tree, then the partials.

    The partials are added by a one-block tree (two-pass) or one after another in any order (atomics).
    """
    per_thread = -(-int(n) // (threads_per_block * blocks))
    block_levels = (threads_per_block - 1).bit_length()
    if atomic:
        return per_thread + block_levels + blocks
    final = final_pass_threads(blocks)
    return per_thread + block_levels + -(-blocks // final) + (final - 1).bit_length()


def error_bound(depth: int, absolute_sum: float, dtype) -> float:
    """A bound on |computed - exact| for a sum whose elements pass through at most `depth` additions (Higham's gamma_depth)."""
    u = float(np.finfo(np.dtype(dtype)).eps) / 2
    return depth * u / (1 - depth * u) * absolute_sum


def library_sums(x, result) -> dict[str, Callable[[], object]]:
    """What a user would call instead, writing into `result` where the library allows: numba.cuda.reduce (both modes);
    cupy.sum (CUB) and a cupy.ReductionKernel (GPU only). x must be float32 for numba.cuda.reduce."""
    from ..arrays import as_numba
    from .ufuncs import numba_sum, reduction_sum_kernel

    calls: dict[str, Callable[[], object]] = {}
    if np.dtype(x.dtype) == np.float32 and np.dtype(result.dtype) == np.float32:
        x_numba, result_numba = as_numba(x), as_numba(result)  # views of CuPy arrays, no copy
        calls["numba.cuda.reduce"] = lambda: numba_sum(x_numba, result_numba)
    if mode.on_gpu():
        import cupy

        x_cupy, result_cupy = cupy.asarray(x), cupy.asarray(result)
        calls["cupy.sum (CUB)"] = lambda: cupy.sum(x_cupy, out=result_cupy[0])
        kernel = reduction_sum_kernel()
        calls["cupy.ReductionKernel"] = lambda: kernel(x_cupy, out=result_cupy[0])
    return calls


def reference_sum(x) -> float:
    """The sum of x in float64: math.fsum on the host for small arrays, a float64 sum on the device for large ones."""
    if mode.on_gpu() and x.shape[0] > 10**7:
        import cupy

        return float(cupy.sum(cupy.asarray(x), dtype=cupy.float64))
    from ..arrays import to_host

    return math.fsum(to_host(x).astype(np.float64).tolist())


def compare_sums(x, repeat: int | None = None, loads_per_thread: int | None = None) -> tuple[list, dict[str, float]]:
    """Time every hand-written sum, the tuned one and the libraries' on x; return the timings and the value each computed."""
    from ..arrays import array_module, to_device, to_host
    from ..throughput import measure

    result = array_module().empty(1, dtype=np.float32) if mode.on_gpu() else to_device(np.zeros(1, np.float32))
    best = best_options(x.dtype)
    shape = f"{best['loads_per_thread']} {'8-byte' if best.get('wide') else 'element'} loads/thread, {best['threads_per_block']} threads"
    calls = {**sum_variants(x, result, loads_per_thread=loads_per_thread),
             f"tuned: {shape}": lambda: best_sum(x, result),
             **library_sums(x, result)}
    rows, values = [], {}
    for name, call in calls.items():
        rows += measure({name: call}, x.shape[0], bytes_read(x.shape[0], x.dtype), repeat=repeat, one_way=True)
        values[name] = float(to_host(result)[0])
    return rows, values
