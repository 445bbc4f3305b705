"""Chapter 3, kernel loop directives (the book's CUF kernels, §3.7) as ufunc-style kernels in Python.

The book writes a loop and lets the compiler make the kernel. Python's nearest equivalents:
`numba.vectorize(target="cuda")` (a scalar function becomes an element-wise CUDA ufunc),
`cupy.ElementwiseKernel` (one line of CUDA C per element) and, for reductions, `numba.cuda.reduce`
and `cupy.ReductionKernel`. Each is set beside a hand-written kernel doing the same: the increment
of chapter 1 (one thread per element, or a fixed grid that strides, the book's ILP variant) and a
shared-memory sum.

`numba.vectorize(target="cuda")` cannot compile in the simulator (numba-cuda 0.30), and CuPy needs
a GPU: those functions raise GPUOnlyFeature there; `numba.cuda.reduce` and the hand-written
kernels run in both modes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numba import cuda, float32

from .. import mode
from ..arrays import require_cupy
from ..errors import GPUOnlyFeature, LaunchConfigError
from ..launch import bind, planned
from ..validate import blocks_to_cover, check_blocks, check_device_array, check_threads_per_block
from .intro import increment_grid_stride_kernel, increment_kernel

UFUNC_TYPES = ("int32", "float32", "float64")

# ---------------------------------------------------------------------------------------------
# 1. Element-wise: the increment a[i] = a[i] + b.


def make_increment_element(b):
    """The scalar function a ufunc applies to each element: x + b, with b frozen in its own dtype."""

    def increment_element(x):
        return x + b  # b is a NumPy scalar: Numba compiles it as a constant of that dtype

    return increment_element


@functools.cache
def increment_ufunc(b: float, dtype: str):
    """`numba.vectorize(target='cuda')` of x -> x + b for one dtype (compiled once per (b, dtype)); GPU only."""
    if dtype not in UFUNC_TYPES:
        raise TypeError(f"dtype must be one of {UFUNC_TYPES}; got {dtype!r}")
    if mode.is_simulator():
        raise GPUOnlyFeature("numba.vectorize(target='cuda')", "numba-cuda's simulator cannot compile CUDA ufuncs")
    from numba import vectorize

    element = make_increment_element(np.dtype(dtype).type(b))
    return vectorize([f"{dtype}({dtype})"], target="cuda")(element)


def ufunc_increment(a, b: float, stream=None) -> None:
    """a <- a + b in place with the CUDA ufunc (a Numba device array of int32, float32 or float64)."""
    check_device_array(a, "a", ndim=1)
    ufunc = increment_ufunc(b, np.dtype(a.dtype).name)
    if stream is None:
        ufunc(a, out=a)
    else:
        ufunc(a, out=a, stream=stream)


@functools.cache
def elementwise_increment_kernel():
    """The cupy.ElementwiseKernel y = x + b (CuPy compiles it once per dtype); GPU only."""
    cupy = require_cupy("cupy.ElementwiseKernel")
    return cupy.ElementwiseKernel("T x, T b", "T y", "y = x + b", "gpucourse_increment")


def elementwise_increment(a, b: float, block_size: int | None = None) -> None:
    """a <- a + b in place with a cupy.ElementwiseKernel (on CuPy's current stream); GPU only."""
    kernel = elementwise_increment_kernel()
    cupy = require_cupy("cupy.ElementwiseKernel")
    a = cupy.asarray(a)
    if block_size is None:
        kernel(a, a.dtype.type(b), a)
    else:
        kernel(a, a.dtype.type(b), a, block_size=block_size)


@planned
def handwritten_increment(a, b: float, threads_per_block: int = 256, elements_per_thread: int = 1):
    """a <- a + b with chapter 1's kernels: one thread per element, or a grid `elements_per_thread` times smaller that strides."""
    check_device_array(a, "a", ndim=1)
    (tpb,) = check_threads_per_block(threads_per_block)
    if elements_per_thread < 1:
        raise LaunchConfigError(f"elements_per_thread must be at least 1; got {elements_per_thread}")
    n = a.shape[0]
    if elements_per_thread == 1:
        blocks = blocks_to_cover(n, tpb)
        kernel = increment_kernel
    else:
        blocks = blocks_to_cover(blocks_to_cover(n, elements_per_thread), tpb)
        kernel = increment_grid_stride_kernel  # a fixed grid: each thread loops over elements_per_thread elements
    check_blocks(blocks)
    return bind(kernel, blocks, tpb, a, a.dtype.type(b))  # the launcher's stream= picks the stream


def streamed_ufunc_increment(a, b: float, streams: list) -> None:
    """a <- a + b with one ufunc call per stream, each on its own equal chunk of a (the book's CUF kernel with stream=)."""
    check_device_array(a, "a", ndim=1)
    n, k = a.shape[0], len(streams)
    if k < 1 or n % k:
        raise LaunchConfigError(f"the {n} elements must split evenly over the {k} streams")
    step = n // k
    for index, stream in enumerate(streams):
        ufunc_increment(a[index * step:(index + 1) * step], b, stream=stream)


def increment_bytes(n: int, dtype) -> int:
    """Bytes one increment moves: each element read and written once."""
    return 2 * n * np.dtype(dtype).itemsize


# ---------------------------------------------------------------------------------------------
# 2. Reductions: the sum of a float32 array.


@functools.cache
def numba_sum_reduce():
    """`numba.cuda.reduce` of addition: Numba writes the two-stage reduction kernel (runs in both modes)."""
    return cuda.reduce(lambda x, y: x + y)


def numba_sum(x, result) -> None:
    """result[0] <- sum of the float32 device array x, with `numba.cuda.reduce` (result: a 1-element device array)."""
    check_device_array(x, "x", dtype=np.float32, ndim=1)
    check_device_array(result, "result", dtype=np.float32, shape=(1,))
    numba_sum_reduce()(x, res=result)


@functools.cache
def reduction_sum_kernel():
    """The cupy.ReductionKernel of a sum: map x, reduce a + b, start from 0; GPU only."""
    cupy = require_cupy("cupy.ReductionKernel")
    return cupy.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "gpucourse_sum")


def cupy_reduction_sum(x):
    """Sum of a CuPy array with a cupy.ReductionKernel (a 0-d CuPy array); GPU only."""
    cupy = require_cupy("cupy.ReductionKernel")
    return reduction_sum_kernel()(cupy.asarray(x))


@cuda.jit
def zero_kernel(result):
    if cuda.grid(1) == 0:
        result[0] = 0


@cuda.jit
def block_sum_kernel(result, x):
    partial = cuda.shared.array(0, float32)  # one float per thread: the launch passes its size in bytes
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):  # each thread first sums many elements alone
        total += x[i]
    partial[t] = total
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:  # then the block halves its partial sums until one is left
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(result, 0, partial[0])  # one atomic per block adds it to the total


@planned
def handwritten_sum(x, result, blocks: int, threads_per_block: int = 256):
    """result[0] <- sum of the float32 device array x: zero it, then one shared-memory tree per block and an atomic add."""
    check_device_array(x, "x", dtype=np.float32, ndim=1)
    check_device_array(result, "result", dtype=np.float32, shape=(1,))
    (tpb,) = check_threads_per_block(threads_per_block)
    if tpb & (tpb - 1):
        raise LaunchConfigError(f"the tree reduction halves the block: threads_per_block must be a power of two; got {tpb}")
    check_blocks(blocks)
    return bind(zero_kernel, 1, 1, result), bind(block_sum_kernel, blocks, tpb, result, x, shared_bytes=4 * tpb)


# ---------------------------------------------------------------------------------------------
# 3. Everything a notebook compares, by name: each entry makes a function of no arguments.


def increment_variants(a_numba, b: float, threads_per_block: int, ilp: int) -> dict[str, Callable[[], object]]:
    """Increment implementations to time on one Numba device array (CuPy ones view the same memory)."""
    variants: dict[str, Callable[[], object]] = {
        "hand-written, 1 element per thread": lambda: handwritten_increment(a_numba, b, threads_per_block),
        f"hand-written, {ilp} elements per thread": lambda: handwritten_increment(a_numba, b, threads_per_block, ilp),
    }
    if mode.on_gpu():
        cupy = require_cupy("CuPy arrays")
        a_cupy = cupy.asarray(a_numba)
        value = a_cupy.dtype.type(b)
        variants["numba.vectorize(target='cuda')"] = lambda: ufunc_increment(a_numba, b)
        variants["cupy.ElementwiseKernel"] = lambda: elementwise_increment(a_cupy, b)
        variants["CuPy a += b"] = lambda: cupy.add(a_cupy, value, out=a_cupy)
    return variants


def sum_variants(x_numba, result, blocks: int, threads_per_block: int) -> dict[str, Callable[[], object]]:
    """Sum implementations to time on one float32 Numba device array."""
    variants: dict[str, Callable[[], object]] = {
        "hand-written (shared memory + atomic)": lambda: handwritten_sum(x_numba, result, blocks, threads_per_block),
        "numba.cuda.reduce": lambda: numba_sum(x_numba, result),
    }
    if mode.on_gpu():
        cupy = require_cupy("CuPy arrays")
        x_cupy = cupy.asarray(x_numba)
        variants["cupy.ReductionKernel"] = lambda: cupy_reduction_sum(x_cupy)
        variants["cupy.sum"] = lambda: cupy.sum(x_cupy)
    return variants

