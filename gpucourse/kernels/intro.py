"""Chapter 1 kernels: incrementing arrays (one block, many blocks, grid-stride, 2D), precision, SGEMM.

Each kernel comes with a launcher that checks its arguments and picks the launch configuration,
so that a wrong dtype or a block over the device's limit is a clear Python error, not a crash.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..launch import CuPyLaunch, bind, planned
from ..validate import (
    blocks_to_cover,
    check_blocks,
    check_device_array,
    check_float_dtype,
    check_same_shape,
    check_threads_per_block,
    launch_2d,
)

# ---------------------------------------------------------------------------------------------
# 1. One block: thread i increments element i. The array can hold at most one block's threads.


@cuda.jit
def increment_one_block_kernel(a, b):
    i = cuda.threadIdx.x
    a[i] += b


@planned
def increment_one_block(a, b: int):
    """Add `b` to every element of the int32 device array `a` with a single block (len(a) <= block limit)."""
    check_device_array(a, "a", dtype=np.int32, ndim=1)
    check_threads_per_block(a.shape[0])
    return bind(increment_one_block_kernel, 1, a.shape[0], a, np.int32(b))


# ---------------------------------------------------------------------------------------------
# 2. Many blocks: each thread computes its global index; threads past the end do nothing.


@cuda.jit
def increment_kernel(a, b):
    i = cuda.grid(1)  # blockIdx.x * blockDim.x + threadIdx.x
    if i < a.size:
        a[i] += b


@planned
def increment(a, b, threads_per_block: int = 256):
    """Add `b` to every element of the 1D device array `a`, one thread per element."""
    check_device_array(a, "a", ndim=1)
    (tpb,) = check_threads_per_block(threads_per_block)
    blocks = blocks_to_cover(a.shape[0], tpb)
    check_blocks(blocks)
    return bind(increment_kernel, blocks, tpb, a, a.dtype.type(b))


# ---------------------------------------------------------------------------------------------
# 3. Grid-stride loop: a grid of any size walks the whole array, one grid-width at a time.


@cuda.jit
def increment_grid_stride_kernel(a, b):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)  # total threads in the grid
    for i in range(start, a.size, stride):
        a[i] += b


@planned
def increment_grid_stride(a, b, blocks: int = 32, threads_per_block: int = 256):
    """Add `b` to every element of `a` with a fixed-size grid and a grid-stride loop."""
    check_device_array(a, "a", ndim=1)
    (tpb,) = check_threads_per_block(threads_per_block)
    check_blocks(blocks)
    return bind(increment_grid_stride_kernel, blocks, tpb, a, a.dtype.type(b))


# ---------------------------------------------------------------------------------------------
# 4. Two dimensions. NumPy stores a[row, col] row by row (C order): neighbouring columns are
#    neighbours in memory. Threads of a warp differ in threadIdx.x, so x must walk the columns.


@cuda.jit
def increment_2d_kernel(a, b):
    col, row = cuda.grid(2)  # x (fastest-varying thread index) -> column, the contiguous axis
    if row < a.shape[0] and col < a.shape[1]:
        a[row, col] += b


@cuda.jit
def increment_2d_column_major_kernel(a, b):
    row, col = cuda.grid(2)  # the Fortran book's mapping: x -> first index; strided on a C-order array
    if row < a.shape[0] and col < a.shape[1]:
        a[row, col] += b


@planned
def increment_2d(a, b, threads_per_block: tuple[int, int] = (32, 8), column_major: bool = False):
    """Add `b` to every element of the 2D device array `a` (x across columns unless `column_major`)."""
    check_device_array(a, "a", ndim=2)
    if column_major:
        blocks, threads = launch_2d((a.shape[1], a.shape[0]), threads_per_block)
        return bind(increment_2d_column_major_kernel, blocks, threads, a, a.dtype.type(b))
    else:
        blocks, threads = launch_2d(a.shape, threads_per_block)
        return bind(increment_2d_kernel, blocks, threads, a, a.dtype.type(b))


# ---------------------------------------------------------------------------------------------
# 5. One kernel, two precisions. Numba compiles a kernel once per argument types, so the same
#    source serves float32 and float64 (the book's precision module, without editing a file).
#    The constant is passed in the array's own precision: a Python float literal in the kernel
#    would be float64 and would drag float32 arithmetic up to double precision.


@cuda.jit
def axpy_kernel(alpha, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = alpha * x[i] + y[i]


@planned
def axpy(alpha: float, x, y, threads_per_block: int = 256):
    """y <- alpha * x + y for float32 or float64 device arrays of one shape and dtype."""
    check_device_array(y, "y", ndim=1)
    dtype = check_float_dtype(y.dtype, "y.dtype")
    check_device_array(x, "x", dtype=dtype, ndim=1)
    check_same_shape(x, y, ("x", "y"))
    (tpb,) = check_threads_per_block(threads_per_block)
    return bind(axpy_kernel, blocks_to_cover(y.shape[0], tpb), tpb, dtype.type(alpha), x, y)


@cuda.jit
def multiply_add_chain_kernel(values, factor, offset, steps):
    """Arithmetic only: each thread applies x <- x * factor + offset `steps` times in registers."""
    i = cuda.grid(1)
    if i < values.size:
        x = values[i]
        for _ in range(steps):
            x = x * factor + offset
            x = x * factor - offset
        values[i] = x


@planned
def multiply_add_chain(values, steps: int, threads_per_block: int = 256):
    """Run 2*`steps` multiply-adds per element of `values` (float32 or float64) in place."""
    check_device_array(values, "values", ndim=1)
    dtype = check_float_dtype(values.dtype, "values.dtype")
    (tpb,) = check_threads_per_block(threads_per_block)
    factor, offset = dtype.type(0.999), dtype.type(0.001)
    return bind(multiply_add_chain_kernel, blocks_to_cover(values.shape[0], tpb), tpb, values, factor, offset, np.int32(steps))


def multiply_add_chain_reference(values: np.ndarray, steps: int) -> np.ndarray:
    """NumPy reference of `multiply_add_chain`, in the dtype of `values`."""
    dtype = values.dtype.type
    x = values.copy()
    factor, offset = dtype(0.999), dtype(0.001)
    for _ in range(steps):
        x = x * factor + offset
        x = x * factor - offset
    return x


def multiply_add_flops(n: int, steps: int) -> int:
    """Floating-point operations of `multiply_add_chain` on n elements (2 per multiply-add)."""
    return 4 * steps * n


# ---------------------------------------------------------------------------------------------
# 6. A first matrix product, to set beside cuBLAS: one thread per element of C.


@cuda.jit
def matmul_naive_kernel(a, b, c):
    col, row = cuda.grid(2)
    if row < c.shape[0] and col < c.shape[1]:
        total = a[row, 0] * b[0, col]  # start from the first term: a literal 0.0 would be float64
        for k in range(1, a.shape[1]):
            total += a[row, k] * b[k, col]
        c[row, col] = total


@planned
def matmul_naive(a, b, c, threads_per_block: tuple[int, int] = (16, 16)):
    """c <- a @ b for float32/float64 device matrices, one thread per element of c (no tiling)."""
    check_device_array(a, "a", ndim=2)
    dtype = check_float_dtype(a.dtype, "a.dtype")
    check_device_array(b, "b", dtype=dtype, ndim=2)
    check_device_array(c, "c", dtype=dtype, ndim=2, shape=(a.shape[0], b.shape[1]))
    if a.shape[1] != b.shape[0] or a.shape[1] < 1:
        raise ValueError(f"cannot multiply shapes {tuple(a.shape)} and {tuple(b.shape)}: inner sizes differ")
    blocks, threads = launch_2d(c.shape, threads_per_block)
    return bind(matmul_naive_kernel, blocks, threads, a, b, c)


def matmul_flops(n: int, m: int, k: int) -> int:
    """Floating-point operations of an (n x k) @ (k x m) product: one multiply and one add per term."""
    return 2 * n * m * k


# CUDA C for the same increment, compiled at run time by NVRTC through CuPy (book appendix C).
INCREMENT_CUDA_C = r"""
extern "C" __global__ void increment_c(float* a, float b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b;
}
"""


@functools.cache
def _increment_cuda_c_kernel(cupy):
    return cupy.RawKernel(INCREMENT_CUDA_C, "increment_c")  # compiled by NVRTC on first launch


@planned
def increment_cuda_c(a, b: float, threads_per_block: int = 256):
    """Add `b` to a float32 CuPy array with a CUDA C kernel compiled by CuPy (GPU only)."""
    from ..arrays import require_cupy

    cupy = require_cupy("A CUDA C kernel through cupy.RawKernel")
    check_device_array(a, "a", dtype=np.float32, ndim=1)
    (tpb,) = check_threads_per_block(threads_per_block)
    kernel = _increment_cuda_c_kernel(cupy)
    n = a.shape[0]
    return CuPyLaunch(kernel, blocks_to_cover(n, tpb), tpb, (a, np.float32(b), np.int32(n)))


# ---------------------------------------------------------------------------------------------
# 7. The float literal pitfall: in Numba a Python float literal is a float64, so this kernel
#    multiplies float32 data in double precision and rounds back on the store. The result is
#    almost the same; the cost is double-precision instructions (see the PTX in notebook 1.2).
#    (0.1 is not exact in binary, so the compiler may not quietly turn the product back into
#    float32: with a constant such as 2.5 it sometimes can, and does.)

LITERAL_FACTOR = 0.1


@cuda.jit
def scale_by_literal_kernel(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * 0.1  # 0.1 is a float64 constant: the product is computed in float64


@cuda.jit
def scale_by_typed_constant_kernel(x, factor):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * factor  # factor arrives as the array's own dtype: float32 stays float32


@planned
def scale(x, factor: float, typed: bool = True, threads_per_block: int = 256):
    """x <- factor * x in place; `typed=False` uses the kernel with the float64 literal 0.1 (factor must be 0.1)."""
    check_device_array(x, "x", ndim=1)
    dtype = check_float_dtype(x.dtype, "x.dtype")
    (tpb,) = check_threads_per_block(threads_per_block)
    blocks = blocks_to_cover(x.shape[0], tpb)
    if typed:
        return bind(scale_by_typed_constant_kernel, blocks, tpb, x, dtype.type(factor))
    else:
        if factor != LITERAL_FACTOR:
            raise ValueError(f"the literal kernel multiplies by the literal {LITERAL_FACTOR}; pass factor={LITERAL_FACTOR}")
        return bind(scale_by_literal_kernel, blocks, tpb, x)


# ---------------------------------------------------------------------------------------------
# 8. A deliberate mistake for notebook 1.3: no bounds check, so the threads of the last block
#    that lie past the end of the array write outside it.


@cuda.jit
def increment_unchecked_kernel(a, b):
    i = cuda.grid(1)
    a[i] += b  # no `if i < a.size`: wrong whenever the grid has more threads than elements
