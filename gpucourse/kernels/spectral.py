"""Chapter 7 kernels: what happens between a forward and an inverse FFT, in Fourier space.

Each kernel works on a *half spectrum*, the output of a real-to-complex (R2C) transform along the
last axis: a C-order complex array of shape (rows, m) with m = n // 2 + 1, where column i holds wave
number i (0 ... n // 2) along the transformed axis and, for the 2D Poisson kernel, row j holds wave
number j for j <= ny / 2 and j - ny above (the FFT's order).

* `derivative_spectrum`: multiply by i k (first derivative, Nyquist column zeroed) or by -k^2
  (second derivative), and by the 1/n that the unnormalized inverse transform leaves out.
* `poisson_spectrum`: divide by -(kx^2 + ky^2) (and by nx ny), the zero mode set to zero: the
  periodic Poisson solve of §7.4 in one pass over the spectrum.

  Both give each thread several values and load them all before they compute, so that several
  loads are in flight per thread (the spectrum is often updated in place, so a loop that loads,
  computes and stores one value at a time cannot start the next load before the store: one load
  in flight). The Poisson kernel takes a column and `rows` rows; the derivative kernel, whose
  factor depends on the column alone, reads the spectrum as one flat line, `per_thread` values a
  grid's width apart, so that short rows (n // 2 + 1 columns) leave no thread idle. Positions are
  32-bit (`gpucourse.kernels.indexing`).
  `derivative_spectrum_simple` and `poisson_spectrum_simple` are the first versions, one value at
  a time down a grid-stride loop, kept to show the difference (notebooks 7.2 and 7.4).
* `multiply_spectra`: b = a b scale, the pointwise product of a convolution (§7.3).
* the book's complex-to-complex Poisson path (appendix D.6): `book_real_to_complex`,
  `book_poisson_divide` (wave numbers read from arrays) and `book_complex_to_real`.
* `poisson_elementwise` (GPU only): the same division as a CuPy ElementwiseKernel.

Wave numbers are computed from the indices inside the kernels (one multiply), not read from arrays,
and array indices go through chapter 6's `nonneg` (unsigned: Numba then skips its test for negative
indices, which costs instructions at every access).
Every scalar argument has the data's precision: a float64 scalar would make the float32 kernels
compute in float64, the trap the book warns about with cmplx(0., kx).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import cuda

from ..arrays import require_cupy
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import STREAMS, LibraryLaunch, bind, planned, unowned
from ..simulation import device_function
from ..validate import check_blocks, check_device_array, check_threads_per_block
from .indexing import check_32bit, check_rows, flat, u32
from .stencil import nonneg

#: Threads per block of the spectrum kernels: 32 along the contiguous axis, 8 rows.
BLOCK = (32, 8)
#: Threads per block of the tuned kernels (256 neighbouring columns: each row of a block reads 2 KB of contiguous complex64)
#: and the rows of the spectrum each thread takes.
TUNED_BLOCK = (256, 1)
ROWS = 8
#: Threads per block of the tuned derivative kernel, and the values of the flat spectrum each thread takes.
DERIVATIVE_THREADS = 256
DERIVATIVE_PER_THREAD = 4
DERIVATIVE_TUNED = (DERIVATIVE_THREADS, DERIVATIVE_PER_THREAD)
#: Most blocks along y; more rows are covered by a grid-stride loop (the grid's y limit is 65535).
MAX_BLOCKS_Y = 4096

COMPLEX_FOR = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}
REAL_FOR = {c: r for r, c in COMPLEX_FOR.items()}


# ---------------------------------------------------------------------------------------------
# Kernels (one per complex dtype: the constructor of the result type is a constant of the kernel)


def _types(dtype_name: str) -> tuple:
    """(real constructor, complex constructor) for a complex dtype name: np.float32/np.complex64 or the float64 pair."""
    return (np.float32, np.complex64) if dtype_name == "complex64" else (np.float64, np.complex128)


@functools.cache
def derivative_arithmetic(dtype_name: str) -> tuple:
    """(factor, times): the arithmetic of both derivative kernels, as device functions, so that they give the same bits.

    factor(i, k_unit, norm, order, nyquist) is the real factor of column i, k / n (order 1, 0 at the Nyquist column)
    or -k^2 / n (order 2), k = k_unit i; times(v, factor, order) is v i factor (order 1) or v factor (order 2).
    """
    real, make = _types(dtype_name)

    @device_function
    def factor(i, k_unit, norm, order, nyquist):
        k = k_unit * real(i)  # real(i): an integer times a float32 would be computed in float64
        if order == 1:
            if i == nyquist:  # the Nyquist wave number has no sign: its derivative term must vanish (book §7.2)
                return real(0)
            return k * norm
        return -(k * k) * norm

    @device_function
    def times(v, factor, order):
        if order == 1:  # (a + ib) * i f = -b f + i a f
            return make(complex(-v.imag * factor, v.real * factor))
        return v * factor

    return factor, times


@functools.cache
def derivative_spectrum_simple_kernel(dtype_name: str):
    """The first version: out[r, i] = (i k_i)^order spectrum[r, i] / n, one value at a time down a grid-stride loop."""
    factor_of, times = derivative_arithmetic(dtype_name)

    @cuda.jit
    def derivative_spectrum_simple(spectrum, out, k_unit, norm, order, nyquist):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        rows, m = spectrum.shape
        if i >= m:
            return
        factor = factor_of(i, k_unit, norm, order, nyquist)
        for r in range(cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y, rows, cuda.gridDim.y * cuda.blockDim.y):
            out[nonneg(r), nonneg(i)] = times(spectrum[nonneg(r), nonneg(i)], factor, order)

    return derivative_spectrum_simple


@functools.cache
def poisson_spectrum_simple_kernel(dtype_name: str):
    """The first version: out[j, i] = -spectrum[j, i] / (kx_i^2 + ky_j^2) * scale, zero mode 0, one value at a time."""
    real, make = _types(dtype_name)

    @cuda.jit
    def poisson_spectrum_simple(spectrum, out, kx_unit, ky_unit, scale):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        ny, m = spectrum.shape
        if i >= m:
            return
        kx = kx_unit * real(i)
        kx2 = kx * kx
        for j in range(cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y, ny, cuda.gridDim.y * cuda.blockDim.y):
            ky = ky_unit * real(j if 2 * j <= ny else j - ny)  # rows above ny/2 hold negative wave numbers
            k2 = kx2 + ky * ky
            if k2 == real(0):  # the mean: any constant solves the equation; choose zero mean
                out[nonneg(j), nonneg(i)] = make(0)
            else:
                out[nonneg(j), nonneg(i)] = spectrum[nonneg(j), nonneg(i)] * (-scale / k2)

    return poisson_spectrum_simple


# The tuned kernels work on flat views of C-contiguous arrays, positions in unsigned 32-bit integers, and
# keep the arithmetic of the first versions, operation for operation (the same bits).
#
# The derivative's factor depends only on the column, so its kernel reads the spectrum as one flat line:
# the thread t takes the values t, t + T, t + 2T, ... (T: all the grid's threads), so that each warp
# reads 32 neighbouring values whatever the row length, loads them all, and then finds each value's
# column as the remainder of its position by the row length. A spectrum of a cube has short rows
# (n // 2 + 1 columns: 129 for 256^3) that a column per thread would leave half its block idle on.


@functools.cache
def derivative_spectrum_kernel(dtype_name: str, per_thread: int = DERIVATIVE_PER_THREAD):
    """out[e] = (i k)^order spectrum[e] / n over a flat half spectrum, k from the column e % m, `per_thread` values a thread, loads first."""
    factor_of, times = derivative_arithmetic(dtype_name)
    P = per_thread
    CT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def derivative_spectrum(spectrum, out, size, m, k_unit, norm, order, nyquist):
        first = u32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
        stride = u32(cuda.gridDim.x * cuda.blockDim.x)
        values = cuda.local.array(P, CT)
        e = first
        for q in range(P):
            if e < size:
                values[q] = spectrum[nonneg(e)]
            e = u32(e + stride)
        e = first
        for q in range(P):
            if e < size:  # the column of position e is e % m
                out[nonneg(e)] = times(values[q], factor_of(u32(e % m), k_unit, norm, order, nyquist), order)
            e = u32(e + stride)

    return derivative_spectrum


# The tuned Poisson kernel's factor depends on the row too: the thread at column i takes rows
# j0 ... j0 + ROWS - 1, j0 = (blockIdx.y * blockDim.y + threadIdx.y) * ROWS, loads first.


@functools.cache
def poisson_spectrum_kernel(dtype_name: str, rows: int = ROWS):
    """out[j, i] = -spectrum[j, i] / (kx_i^2 + ky_j^2) * scale, zero mode 0, `rows` rows per thread, every load first."""
    real, make = _types(dtype_name)
    P = rows
    CT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def poisson_spectrum_rows(spectrum, out, m, ny, kx_unit, ky_unit, scale):
        i = u32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
        j0 = u32((cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y) * P)
        if i >= m or j0 >= ny:
            return
        kx = kx_unit * real(i)
        kx2 = kx * kx
        values = cuda.local.array(P, CT)
        row = nonneg(m)
        first = nonneg(u32(j0 * m + i))
        count = min(P, np.int64(ny) - np.int64(j0))
        o = first
        for q in range(P):
            if q < count:
                values[q] = spectrum[o]
            o += row
        o = first
        for q in range(P):
            if q < count:
                j = np.int64(j0) + q
                ky = ky_unit * real(j if 2 * j <= ny else j - ny)  # rows above ny/2 hold negative wave numbers
                k2 = kx2 + ky * ky
                if k2 == real(0):  # the mean: any constant solves the equation; choose zero mean
                    out[o] = make(0)
                else:
                    out[o] = values[q] * (-scale / k2)
            o += row

    return poisson_spectrum_rows


@cuda.jit
def multiply_spectra_kernel(a, b, scale):
    """b = a * b * scale, element by element, for 2D complex arrays."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    rows, cols = b.shape
    if i < cols:
        for j in range(cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y, rows, cuda.gridDim.y * cuda.blockDim.y):
            b[nonneg(j), nonneg(i)] = a[nonneg(j), nonneg(i)] * b[nonneg(j), nonneg(i)] * scale


@functools.cache
def book_real_to_complex_kernel(dtype_name: str):
    """b = a + 0i over flat (1D) arrays, the book's real2complex1D: a grid-stride loop."""
    _, make = _types(dtype_name)

    @cuda.jit
    def real_to_complex(a, b):
        for k in range(cuda.grid(1), a.size, cuda.gridsize(1)):
            b[k] = make(a[k])

    return real_to_complex


@functools.cache
def book_poisson_divide_kernel(dtype_name: str):
    """The book's solve_poisson: phi /= -(kx^2 + ky^2), wave numbers read from arrays, the zero mode divided by -1."""
    real, _ = _types(dtype_name)

    @cuda.jit
    def book_poisson_divide(phi, kx, ky):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        ny, nx = phi.shape
        if i < nx and j < ny:
            scale = kx[i] * kx[i] + ky[j] * ky[j]
            if i == 0 and j == 0:
                scale = real(1)
            phi[j, i] = -phi[j, i] / scale

    return book_poisson_divide


@cuda.jit
def book_complex_to_real_kernel(c, out, scale):
    """The book's complex2real: out = (Re c - Re c[0, 0]) * scale, which also fixes the solution's constant (u = 0 at the corner)."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    ny, nx = out.shape
    if i < nx and j < ny:
        out[j, i] = (c[j, i].real - c[0, 0].real) * scale


# ---------------------------------------------------------------------------------------------
# Launchers (plan builders: checked and bound once per set of arguments)


def _check_spectrum(spectrum, out, name: str = "spectrum") -> np.dtype:
    check_device_array(spectrum, name, ndim=2)
    dtype = np.dtype(spectrum.dtype)
    if dtype not in REAL_FOR:
        raise ArrayArgumentError(f"{name} must be complex64 or complex128 (the output of an R2C transform); got {dtype.name}")
    check_device_array(out, "out", dtype=dtype, shape=tuple(spectrum.shape))
    return dtype


def _grid(shape: tuple[int, int], block: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """Blocks over (rows, columns): x covers the columns, y the rows (a grid-stride loop beyond MAX_BLOCKS_Y)."""
    tx, ty = check_threads_per_block(block)
    rows, cols = shape
    tx, ty = max(1, min(tx, cols)), max(1, min(ty, rows))  # no idle threads on a tiny array (in the simulator each one costs)
    blocks = check_blocks((max(1, math.ceil(cols / tx)), max(1, min(MAX_BLOCKS_Y, math.ceil(rows / ty)))))
    return blocks, (tx, ty)


def as_rows(array):
    """A C-contiguous array of any rank as 2D (rows, last axis), a view; 1D arrays become one row."""
    shape = tuple(array.shape)
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    return array.reshape((rows, shape[-1]))


def rows_grid(shape: tuple[int, int], block: tuple[int, int], rows: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Blocks of the tuned kernels over (rows, columns): x covers the columns, y the rows, `rows` rows per thread."""
    tx, ty = check_threads_per_block(block)
    total, cols = shape
    rows = check_rows(rows)
    tx = max(1, min(tx, cols))  # no idle threads on a tiny array (in the simulator each one costs)
    ty = max(1, min(ty, -(-total // rows)))
    return check_blocks((max(1, math.ceil(cols / tx)), max(1, math.ceil(total / (ty * rows))))), (tx, ty)


def _derivative_arguments(spectrum, out, n: int, length: float, order: int) -> tuple:
    """(rows view of spectrum, of out, dtype, real type, nyquist column) after checking."""
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2; got {order}")
    if length <= 0:
        raise ValueError(f"length must be positive; got {length}")
    check_device_array(spectrum, "spectrum")
    m = tuple(spectrum.shape)[-1]  # a simulated Numba array's shape refuses negative indices
    if n // 2 + 1 != m:
        raise ArrayArgumentError(f"a half spectrum of n = {n} real points has n // 2 + 1 = {n // 2 + 1} columns; got {m}")
    rows_in, rows_out = as_rows(spectrum), as_rows(out) if tuple(out.shape) == tuple(spectrum.shape) else out
    dtype = _check_spectrum(rows_in, rows_out)
    nyquist = n // 2 if n % 2 == 0 else -1
    return rows_in, rows_out, dtype, REAL_FOR[dtype].type, nyquist


@planned
def derivative_spectrum(spectrum, out, n: int, length: float = 2 * np.pi, order: int = 1, threads: int | None = None,
                        per_thread: int | None = None):
    """out = (i k)^order spectrum / n over the last axis of a half spectrum of n real points on a period `length` (out may be spectrum).

    `threads` (per block) and `per_thread` (values a thread takes) default to DERIVATIVE_TUNED's.
    """
    threads, per_thread = (DERIVATIVE_TUNED[k] if v is None else v for k, v in enumerate((threads, per_thread)))
    rows_in, rows_out, dtype, real, nyquist = _derivative_arguments(spectrum, out, n, length, order)
    check_32bit(rows_in.shape, "the spectrum")
    per_thread = check_rows(per_thread, "values per thread")
    (threads,) = check_threads_per_block(threads)
    total, m = rows_in.shape
    size = total * m
    threads = max(1, min(threads, size))  # no idle threads on a tiny array (in the simulator each one costs)
    (blocks,) = check_blocks(max(1, math.ceil(size / (threads * per_thread))))
    return bind(derivative_spectrum_kernel(dtype.name, per_thread), blocks, threads, flat(rows_in), flat(rows_out), np.uint32(size),
                np.uint32(m), real(2 * np.pi / length), real(1.0 / n), np.int32(order), np.int64(nyquist))


@planned
def derivative_spectrum_simple(spectrum, out, n: int, length: float = 2 * np.pi, order: int = 1, block: tuple[int, int] = BLOCK):
    """The first version of `derivative_spectrum`: one value at a time down a grid-stride loop (kept for comparison)."""
    rows_in, rows_out, dtype, real, nyquist = _derivative_arguments(spectrum, out, n, length, order)
    blocks, threads = _grid(rows_in.shape, block)
    return bind(derivative_spectrum_simple_kernel(dtype.name), blocks, threads, rows_in, rows_out, real(2 * np.pi / length),
                real(1.0 / n), np.int32(order), np.int64(nyquist))


def _poisson_arguments(spectrum, out, nx: int, lengths: tuple[float, float]) -> tuple:
    """(dtype, real type, kx unit, ky unit, scale) after checking."""
    dtype = _check_spectrum(spectrum, out)
    ny, m = spectrum.shape
    if nx // 2 + 1 != m:
        raise ArrayArgumentError(f"the half spectrum of an nx = {nx} mesh has nx // 2 + 1 = {nx // 2 + 1} columns; got {m}")
    length_x, length_y = (float(v) for v in lengths)
    if length_x <= 0 or length_y <= 0:
        raise ValueError(f"the lengths must be positive; got {lengths}")
    real = REAL_FOR[dtype].type
    return dtype, real(2 * np.pi / length_x), real(2 * np.pi / length_y), real(1.0 / (nx * ny))


@planned
def poisson_spectrum(spectrum, out, nx: int, lengths: tuple[float, float] = (1.0, 1.0), block: tuple[int, int] | None = None,
                     rows: int | None = None):
    """out = -spectrum / (kx^2 + ky^2) / (nx ny), zero mode 0, on the half spectrum of an (ny, nx) mesh of size lengths = (Lx, Ly).

    `block` and `rows` (per thread) default to TUNED_BLOCK and ROWS.
    """
    block, rows = TUNED_BLOCK if block is None else block, ROWS if rows is None else rows
    dtype, kx_unit, ky_unit, scale = _poisson_arguments(spectrum, out, nx, lengths)
    check_32bit(spectrum.shape, "the spectrum")
    ny, m = spectrum.shape
    blocks, threads = rows_grid((ny, m), block, rows)
    return bind(poisson_spectrum_kernel(dtype.name, int(rows)), blocks, threads, flat(spectrum), flat(out), np.uint32(m), np.uint32(ny),
                kx_unit, ky_unit, scale)


@planned
def poisson_spectrum_simple(spectrum, out, nx: int, lengths: tuple[float, float] = (1.0, 1.0), block: tuple[int, int] = BLOCK):
    """The first version of `poisson_spectrum`: one value at a time down a grid-stride loop (kept for comparison)."""
    dtype, kx_unit, ky_unit, scale = _poisson_arguments(spectrum, out, nx, lengths)
    ny, m = spectrum.shape
    blocks, threads = _grid((ny, m), block)
    return bind(poisson_spectrum_simple_kernel(dtype.name), blocks, threads, spectrum, out, kx_unit, ky_unit, scale)


@planned
def multiply_spectra(a, b, scale: float, block: tuple[int, int] = BLOCK):
    """b = a * b * scale for two complex 2D device arrays of one shape and dtype (scale in their precision)."""
    check_device_array(a, "a", ndim=2)
    dtype = np.dtype(a.dtype)
    if dtype not in REAL_FOR:
        raise ArrayArgumentError(f"a must be complex64 or complex128; got {dtype.name}")
    check_device_array(b, "b", dtype=dtype, shape=tuple(a.shape))
    blocks, threads = _grid(tuple(b.shape), block)
    return bind(multiply_spectra_kernel, blocks, threads, a, b, REAL_FOR[dtype].type(scale))


@planned
def book_real_to_complex(a, b, blocks: int = 64, threads: int = 128):
    """b = a + 0i with the book's <<<64, 128>>> grid-stride launch (real2complex1D)."""
    check_device_array(a, "a", ndim=2)
    dtype = np.dtype(a.dtype)
    if dtype not in COMPLEX_FOR:
        raise ArrayArgumentError(f"a must be float32 or float64; got {dtype.name}")
    check_device_array(b, "b", dtype=COMPLEX_FOR[dtype], shape=tuple(a.shape))
    (threads,) = check_threads_per_block(threads)
    check_blocks(blocks)
    flat = math.prod(a.shape)  # the book's kernel sees both arrays as 1D: one index, no (i, j) arithmetic
    return bind(book_real_to_complex_kernel(COMPLEX_FOR[dtype].name), blocks, threads, a.reshape(flat), b.reshape(flat))


@planned
def book_poisson_divide(phi, kx, ky, block: tuple[int, int] = (16, 16)):
    """The book's solve_poisson on a full (ny, nx) spectrum with wave-number arrays kx (nx) and ky (ny), 16 x 16 blocks."""
    check_device_array(phi, "phi", ndim=2)
    dtype = np.dtype(phi.dtype)
    if dtype not in REAL_FOR:
        raise ArrayArgumentError(f"phi must be complex64 or complex128; got {dtype.name}")
    ny, nx = phi.shape
    check_device_array(kx, "kx", dtype=REAL_FOR[dtype], shape=(nx,))
    check_device_array(ky, "ky", dtype=REAL_FOR[dtype], shape=(ny,))
    tx, ty = check_threads_per_block(block)
    blocks = check_blocks((math.ceil(nx / tx), math.ceil(ny / ty)))
    return bind(book_poisson_divide_kernel(dtype.name), blocks, (tx, ty), phi, kx, ky)


@planned
def book_complex_to_real(c, out, block: tuple[int, int] = (16, 16)):
    """out = (Re c - Re c[0, 0]) / (nx ny): the book's complex2real, normalization and constant in one pass."""
    check_device_array(c, "c", ndim=2)
    dtype = np.dtype(c.dtype)
    if dtype not in REAL_FOR:
        raise ArrayArgumentError(f"c must be complex64 or complex128; got {dtype.name}")
    check_device_array(out, "out", dtype=REAL_FOR[dtype], shape=tuple(c.shape))
    ny, nx = out.shape
    tx, ty = check_threads_per_block(block)
    blocks = check_blocks((math.ceil(nx / tx), math.ceil(ny / ty)))
    return bind(book_complex_to_real_kernel, blocks, (tx, ty), c, out, REAL_FOR[dtype].type(1.0 / (nx * ny)))


# ---------------------------------------------------------------------------------------------
# The same Poisson division as a CuPy ElementwiseKernel (GPU only)

ELEMENTWISE_BODY = r"""
const ptrdiff_t row = i / m;
const ptrdiff_t col = i - row * m;
const real_t kx = kx_unit * (real_t)col;
const real_t ky = ky_unit * (real_t)(2 * row <= ny ? row : row - ny);
const real_t k2 = kx * kx + ky * ky;
s = (k2 == (real_t)0) ? complex_t(0, 0) : s * (-scale / k2);
"""


@functools.cache
def _elementwise_kernel(dtype_name: str):
    cupy = require_cupy("A CuPy ElementwiseKernel")
    real, c_real = ("float32", "float") if dtype_name == "complex64" else ("float64", "double")
    body = f"typedef {c_real} real_t; typedef complex<{c_real}> complex_t;\n" + ELEMENTWISE_BODY
    return cupy.ElementwiseKernel(f"int64 m, int64 ny, {real} kx_unit, {real} ky_unit, {real} scale",
                                  f"{dtype_name} s", body, f"gpucourse_poisson_{dtype_name}")


class ElementwiseLaunch(LibraryLaunch):
    """A CuPy ElementwiseKernel with fixed arguments, launched on a plan's stream."""

    __slots__ = ("name", "_kernel", "_args")

    def __init__(self, kernel, args: tuple, name: str) -> None:
        self._kernel, self._args, self.name = kernel, tuple(unowned(a) for a in args), name

    def launch(self, handle: int = 0) -> None:
        """Queue the kernel on the stream with integer handle `handle`."""
        with STREAMS.cupy(handle):
            self._kernel(*self._args)


@planned
def poisson_elementwise(spectrum, nx: int, lengths: tuple[float, float] = (1.0, 1.0)):
    """In place: spectrum = -spectrum / (kx^2 + ky^2) / (nx ny), zero mode 0, by a CuPy ElementwiseKernel (GPU only)."""
    cupy = require_cupy("A CuPy ElementwiseKernel")
    spectrum = cupy.asarray(spectrum)
    dtype = _check_spectrum(spectrum, spectrum)
    ny, m = spectrum.shape
    if nx // 2 + 1 != m:
        raise ArrayArgumentError(f"the half spectrum of an nx = {nx} mesh has nx // 2 + 1 = {nx // 2 + 1} columns; got {m}")
    if not spectrum.flags.c_contiguous:
        raise LaunchConfigError("the ElementwiseKernel computes (row, column) from the flat index: pass a C-contiguous spectrum")
    real = REAL_FOR[dtype].type
    args = (np.int64(m), np.int64(ny), real(2 * np.pi / lengths[0]), real(2 * np.pi / lengths[1]), real(1.0 / (nx * ny)), spectrum)
    return ElementwiseLaunch(_elementwise_kernel(dtype.name), args, f"ElementwiseKernel poisson ({dtype.name})")
