"""Chapter 6 kernels: the nine-point, eighth-order derivative on a periodic 3D grid, in x, y and z.

Arrays are C order, ``f[z, y, x]``: x, the last index, is contiguous (as the first index is in the
book's Fortran ``f(x, y, z)``), so the book's "x" stays our x and its tile shapes read the same.

Kernels, from the simplest to the tuned ones:

* ``deriv_x_global_*``: no tile; every thread reads its eight neighbours from global memory.
* ``deriv_x_book``: the book's sPencils tile, whole x-lines in shared memory, one point per thread.
* ``deriv_x``: the same tile with several points (and pencils) per thread, so that each thread has
  several loads in flight, and one barrier instead of two.
* ``deriv_axis1``: y or z with a shared-memory tile: ``pencils`` x-columns by a segment of the
  derivative axis (sPencils: 4 columns; lPencils: 32 columns, several points per thread).
* ``deriv_axis1_registers``: y or z with the tile in registers (each thread owns a segment of one column).
* ``swap_last_axes``: a batched transpose, for the transpose-based y and z derivatives.

A z-derivative of ``f[z, y, x]`` is the derivative along the middle axis of the same memory seen as
``(1, nz, ny * nx)``: the y kernels serve z without a line of new code. Tile sizes are parameters, and
each kernel is compiled for its tile (shared arrays and unrolled loops need constants), so the same
code runs at 12^3 in the simulator and at 256^3 on a GPU. Coefficients are either four scalars
(uniform grid) or an array of shape (4, n) with one set per point (nonuniform grid, section 6.1.4).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numba import cuda

from ..arrays import as_numba, device_empty
from ..errors import ArrayArgumentError, LaunchConfigError
from ..finite_difference import AXIS, HALO, stencil_coefficients
from ..launch import bind, build, owned, planned
from ..simulation import device_function
from ..validate import check_blocks, check_device_array, check_float_dtype, check_same_shape, check_shared_memory, check_threads_per_block

DIRECTIONS = ("x", "y", "z")

# ---------------------------------------------------------------------------------------------
# Tile shapes


@dataclass(frozen=True)
class XTile:
    """An x-derivative tile: `pencils` whole x-lines; `threads_x` by `rows` threads, each with several points."""

    threads_x: int
    pencils: int
    rows: int

    def points_per_thread(self, nx: int) -> int:
        """Points each thread loads and differentiates: ceil(nx / threads_x) along x, times pencils / rows."""
        return math.ceil(nx / self.threads_x) * (self.pencils // self.rows)

    @property
    def threads_per_block(self) -> int:
        """Threads in one block."""
        return self.threads_x * self.rows

    def shared_bytes(self, nx: int, itemsize: int) -> int:
        """Bytes of shared memory per block: pencils lines of nx + 8 values (a halo of 4 at each end)."""
        return self.pencils * (nx + 2 * HALO) * itemsize

    def describe(self, nx: int) -> str:
        """The book's name for the tile and how threads map onto it."""
        return (f"x-y tile {nx}x{self.pencils} ({self.threads_x}x{self.rows} threads, "
                f"{self.points_per_thread(nx)} point(s) each)")


@dataclass(frozen=True)
class AxisTile:
    """A y- or z-derivative tile: `pencils` x-columns by `length` points of the derivative axis (plus 8 halo rows)."""

    length: int
    pencils: int
    rows: int

    def points_per_thread(self) -> int:
        """Points each thread differentiates: ceil(length / rows)."""
        return math.ceil(self.length / self.rows)

    def loads_per_thread(self) -> int:
        """Values each thread loads into the tile: ceil(length / rows), plus its share of the 8 halo rows."""
        return math.ceil(self.length / self.rows) + math.ceil(2 * HALO / self.rows)

    @property
    def threads_per_block(self) -> int:
        """Threads in one block."""
        return self.pencils * self.rows

    def shared_bytes(self, itemsize: int) -> int:
        """Bytes of shared memory per block: (length + 8) rows of `pencils` values."""
        return (self.length + 2 * HALO) * self.pencils * itemsize

    def describe(self, direction: str = "y") -> str:
        """The book's name for the tile and how threads map onto it."""
        return (f"x-{direction} tile {self.pencils}x{self.length} ({self.pencils}x{self.rows} threads, "
                f"{self.points_per_thread()} point(s) each)")


def book_x_tile(nx: int, pencils: int = 4) -> XTile:
    """The book's sPencils x tile: one thread per point, nx by `pencils` threads."""
    return XTile(threads_x=nx, pencils=pencils, rows=pencils)


def book_spencils_tile(n_axis: int, pencils: int = 4) -> AxisTile:
    """The book's sPencils y/z tile: 4 columns by the whole axis, one thread per point."""
    return AxisTile(length=n_axis, pencils=pencils, rows=n_axis)


def book_lpencils_tile(n_axis: int, pencils: int = 32, rows: int = 8) -> AxisTile:
    """The book's lPencils y/z tile: 32 columns by the whole axis, 32 x 8 threads."""
    return AxisTile(length=n_axis, pencils=pencils, rows=rows)


def _largest_divisor_at_most(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def default_x_tile(shape: tuple[int, int, int]) -> XTile:
    """A fast x tile for this shape: 32 threads per line (one warp) with several points each, 8 pencils."""
    nx = shape[2]
    if nx >= 64:
        return XTile(threads_x=32, pencils=8, rows=8)
    return XTile(threads_x=max(1, nx // 4), pencils=4, rows=2)


def default_axis_tile(shape: tuple[int, int, int], direction: str) -> AxisTile:
    """A fast y/z shared-memory tile for this shape: 64 columns (32 on narrow grids), a segment of up to 64 points, 8 points per thread.

    64 columns (two 128-byte rows per warp row) beat 32 on the H100 at 256^3 and 512^3, for z above
    all (measurements/launch.md).
    """
    n_axis = shape[1] if direction == "y" else shape[0]
    length = _largest_divisor_at_most(n_axis, 64)
    if shape[2] >= 64:
        return AxisTile(length=length, pencils=64, rows=max(1, length // 8))
    if shape[2] >= 32:
        return AxisTile(length=length, pencils=32, rows=4)
    return AxisTile(length=length, pencils=4, rows=max(1, length // 4))


def default_register_chunk(n_axis: int) -> int:
    """Points per thread of the register-tile y/z kernel: the largest divisor of the axis up to 32."""
    return _largest_divisor_at_most(n_axis, 32)


# ---------------------------------------------------------------------------------------------
# Coefficients: four scalars (uniform grid) or one set per point (nonuniform grid)


def coefficients_for(f, spacing: float) -> tuple:
    """The four uniform-grid weights for spacing `spacing`, in the dtype of `f` (never Python floats)."""
    return stencil_coefficients(spacing, np.dtype(f.dtype))


def _check_coefficients(coefficients, dtype: np.dtype, n_axis: int) -> tuple[object, bool]:
    """Return (coefficients ready to pass, per_point) after checking their kind, dtype and length."""
    if isinstance(coefficients, tuple):
        if len(coefficients) != HALO:
            raise ArrayArgumentError(f"give {HALO} coefficients (a, b, c, d); got {len(coefficients)}")
        if any(np.dtype(type(c)) != dtype for c in coefficients):
            raise ArrayArgumentError(
                f"the coefficients must be {dtype.name} scalars like the array: a Python float would turn the "
                f"kernel's arithmetic into float64. Use stencil.coefficients_for(f, spacing) or numpy.{dtype.name}(value)."
            )
        return coefficients, False
    check_device_array(coefficients, "coefficients", dtype=dtype, ndim=2, shape=(HALO, n_axis))
    return coefficients, True


# ---------------------------------------------------------------------------------------------
# 0. No tile: each thread reads its eight neighbours from global memory.


@device_function
def wrap(index, n):
    """A periodic index in [0, n) for an index at most n away: a branch, not an integer division."""
    if index < 0:
        return index + n
    if index >= n:
        return index - n
    return index


@cuda.jit
def deriv_x_global_modulo_kernel(f, df, a, b, c, d):
    i, j, k = cuda.grid(3)
    nx = f.shape[2]
    if i < nx and j < f.shape[1] and k < f.shape[0]:
        df[k, j, i] = (a * (f[k, j, (i + 1) % nx] - f[k, j, (i - 1) % nx])
                       + b * (f[k, j, (i + 2) % nx] - f[k, j, (i - 2) % nx])
                       + c * (f[k, j, (i + 3) % nx] - f[k, j, (i - 3) % nx])
                       + d * (f[k, j, (i + 4) % nx] - f[k, j, (i - 4) % nx]))


@cuda.jit
def deriv_x_global_kernel(f, df, a, b, c, d):
    i, j, k = cuda.grid(3)
    nx = f.shape[2]
    if i < nx and j < f.shape[1] and k < f.shape[0]:
        df[k, j, i] = (a * (f[k, j, wrap(i + 1, nx)] - f[k, j, wrap(i - 1, nx)])
                       + b * (f[k, j, wrap(i + 2, nx)] - f[k, j, wrap(i - 2, nx)])
                       + c * (f[k, j, wrap(i + 3, nx)] - f[k, j, wrap(i - 3, nx)])
                       + d * (f[k, j, wrap(i + 4, nx)] - f[k, j, wrap(i - 4, nx)]))


# ---------------------------------------------------------------------------------------------
# 1. The book's sPencils x tile: nx x pencils threads, one point each, two barriers.


@functools.cache
def deriv_x_book_kernel(nx: int, pencils: int, dtype_name: str) -> object:
    """The book's x kernel compiled for lines of `nx` points and `pencils` lines per block."""
    NX, P = nx, pencils
    W = NX + 2 * HALO        # a line and its periodic images: shapes must be constants
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def deriv_x_book(f, df, coef):
        tile = cuda.shared.array((P, W), DT)
        i = cuda.threadIdx.x                 # x: the whole line, one thread per point
        p = cuda.threadIdx.y                 # which pencil (x-line) of the tile
        j = cuda.blockIdx.x * P + p
        k = cuda.blockIdx.y
        inside = j < f.shape[1]
        if inside:
            tile[p, i + HALO] = f[k, j, i]
        cuda.syncthreads()
        if i < HALO:  # periodic images, copied inside shared memory: other threads loaded them
            tile[p, i] = tile[p, NX + i]
            tile[p, NX + HALO + i] = tile[p, HALO + i]
        cuda.syncthreads()
        if inside:
            s = i + HALO
            df[k, j, i] = (coef[0] * (tile[p, s + 1] - tile[p, s - 1])
                           + coef[1] * (tile[p, s + 2] - tile[p, s - 2])
                           + coef[2] * (tile[p, s + 3] - tile[p, s - 3])
                           + coef[3] * (tile[p, s + 4] - tile[p, s - 4]))

    return deriv_x_book


@device_function
def x_derivative_per_point(f, df, tile, coef, nx):
    """The book's x kernel's body with per-point coefficients coef[0..3, i], from any memory (§6.1.4): one x-line of f per
    thread row (tile: that block's shared array of rows of nx + 2 HALO values, the periodic images at both ends)."""
    i = cuda.threadIdx.x
    p = cuda.threadIdx.y
    j = cuda.blockIdx.x * tile.shape[0] + p
    k = cuda.blockIdx.y
    inside = j < f.shape[1]
    if inside:
        tile[p, i + HALO] = f[k, j, i]
    cuda.syncthreads()
    if i < HALO:
        tile[p, i] = tile[p, nx + i]
        tile[p, nx + HALO + i] = tile[p, HALO + i]
    cuda.syncthreads()
    if inside:
        s = i + HALO  # from constant memory, a warp's 32 different coefficients are served one by one
        df[k, j, i] = (coef[0, i] * (tile[p, s + 1] - tile[p, s - 1])
                       + coef[1, i] * (tile[p, s + 2] - tile[p, s - 2])
                       + coef[2, i] * (tile[p, s + 3] - tile[p, s - 3])
                       + coef[3, i] * (tile[p, s + 4] - tile[p, s - 4]))


@functools.cache
def deriv_x_book_constant_kernel(nx: int, pencils: int, dtype_name: str, coefficient_bytes: bytes) -> object:
    """The book's x kernel with per-point coefficients in constant memory (§6.1.4): the (4, nx) array whose bytes are
    `coefficient_bytes` is compiled into the kernel (constant memory holds only what is known at compile time)."""
    NX, P = nx, pencils
    W = NX + 2 * HALO
    DT = numba.from_dtype(np.dtype(dtype_name))
    COEFFICIENTS = np.frombuffer(coefficient_bytes, dtype=np.dtype(dtype_name)).reshape(HALO, NX).copy()

    @cuda.jit
    def deriv_x_book_constant(f, df):
        coef = cuda.const.array_like(COEFFICIENTS)  # one copy for the whole grid, read through the constant cache
        x_derivative_per_point(f, df, cuda.shared.array((P, W), DT), coef, NX)

    return deriv_x_book_constant


@functools.cache
def deriv_x_book_device_kernel(nx: int, pencils: int, dtype_name: str) -> object:
    """The book's x kernel with per-point coefficients passed as a (4, nx) device array (§6.1.4): coalesced loads."""
    NX, P = nx, pencils
    W = NX + 2 * HALO
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def deriv_x_book_device(f, df, coef):
        x_derivative_per_point(f, df, cuda.shared.array((P, W), DT), coef, NX)

    return deriv_x_book_device


#: The book's experiments on its x kernel (§6.1.2.1): what it costs without its arithmetic, without its
#: global memory, and with one barrier instead of two.
BOOK_X_VARIANTS = ("memory only", "math only", "one barrier")


@functools.cache
def deriv_x_book_variant_kernel(nx: int, pencils: int, dtype_name: str, variant: str) -> object:
    """The book's x kernel taken apart (§6.1.2.1): 'memory only' (df = f_s, no stencil), 'math only' (no global load;
    df written only if the stencil gives an impossible value) or 'one barrier' (the periodic images loaded from global
    memory by the threads that need them, so one barrier suffices)."""
    if variant not in BOOK_X_VARIANTS:
        raise ValueError(f"variant must be one of {BOOK_X_VARIANTS}; got {variant!r}")
    NX, P = nx, pencils
    W = NX + 2 * HALO
    DT = numba.from_dtype(np.dtype(dtype_name))
    MEMORY, MATH, ONE_BARRIER = (variant == name for name in BOOK_X_VARIANTS)  # compile-time constants
    IMPOSSIBLE = DT(1e30)  # a derivative no test function here reaches: the store it guards never happens

    @cuda.jit
    def deriv_x_book_variant(f, df, coef):
        tile = cuda.shared.array((P, W), DT)
        i = cuda.threadIdx.x
        p = cuda.threadIdx.y
        j = cuda.blockIdx.x * P + p
        k = cuda.blockIdx.y
        inside = j < f.shape[1]
        if MATH:
            tile[p, i + HALO] = DT(i)        # a value from the index: no global load
        elif inside:
            tile[p, i + HALO] = f[k, j, i]
        if ONE_BARRIER:
            if inside and i < HALO:          # the images come from global memory, not from other threads' loads
                tile[p, i] = f[k, j, NX - HALO + i]
                tile[p, NX + HALO + i] = f[k, j, i]
            cuda.syncthreads()
        else:
            cuda.syncthreads()
            if i < HALO:
                tile[p, i] = tile[p, NX + i]
                tile[p, NX + HALO + i] = tile[p, HALO + i]
            cuda.syncthreads()
        if inside:
            s = i + HALO
            if MEMORY:
                df[k, j, i] = tile[p, s]     # the book's df = f_s: the traffic without the stencil
            else:
                value = (coef[0] * (tile[p, s + 1] - tile[p, s - 1])
                         + coef[1] * (tile[p, s + 2] - tile[p, s - 2])
                         + coef[2] * (tile[p, s + 3] - tile[p, s - 3])
                         + coef[3] * (tile[p, s + 4] - tile[p, s - 4]))
                if not MATH or value == IMPOSSIBLE:
                    df[k, j, i] = value

    return deriv_x_book_variant


# ---------------------------------------------------------------------------------------------
# Indices. Numba accepts Python's negative indices (a[-1] is the last element): before each access
# with a signed integer it tests for a negative value and adds the length. That is three or four
# instructions per access, and the test stops the compiler from folding a constant offset such as
# s + 3 into the load instruction. Kernels whose speed is set by the instructions they issue pay for
# it. An unsigned index skips the test; `nonneg` says "this index is never negative".


@device_function
def nonneg(index):
    """The index as an unsigned integer, so that Numba skips its negative-index test (the index must be >= 0)."""
    return np.uint64(index)


@device_function
def as_is(index):
    """The index unchanged: Numba tests it for a negative value at every access."""
    return index


def index_helper(unsigned_indices: bool) -> Callable:
    """`nonneg` or `as_is`: the kernels below are compiled with one or the other."""
    return nonneg if unsigned_indices else as_is


# ---------------------------------------------------------------------------------------------
# 2. The tuned x tile: every thread first issues all its loads, keeps them in registers, writes
#    them (and the periodic images among them) into the tile, then one barrier, then its outputs.


def deriv_x_kernel(nx: int, threads_x: int, pencils: int, rows: int, dtype_name: str, per_point: bool = False,
                   unsigned_indices: bool = True) -> object:
    """The x kernel for lines of `nx` points, compiled for one tile shape, dtype and kind of coefficients."""
    return _deriv_x_kernel(int(nx), int(threads_x), int(pencils), int(rows), str(dtype_name), bool(per_point), bool(unsigned_indices))


@functools.cache
def _deriv_x_kernel(nx: int, threads_x: int, pencils: int, rows: int, dtype_name: str, per_point: bool, unsigned_indices: bool):
    NX, T, P, R = nx, threads_x, pencils, rows
    V = -(-NX // T)          # points per thread along x
    Q = P // R               # pencils per thread
    W = NX + 2 * HALO
    EXACT = NX % T == 0      # every (v, thread) pair is a point: no test along x
    PER_POINT = per_point
    DT = numba.from_dtype(np.dtype(dtype_name))
    ix = index_helper(unsigned_indices)

    @cuda.jit
    def deriv_x(f, df, coef):
        tile = cuda.shared.array((P, W), DT)
        values = cuda.local.array((Q, V), DT)  # registers: the loops below have constant trip counts
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        j0 = cuda.blockIdx.x * P
        k = cuda.blockIdx.y
        ny = f.shape[1]
        for q in range(Q):                       # all loads first: Q * V of them in flight
            j = j0 + ty + q * R
            if j < ny:
                for v in range(V):
                    i = tx + v * T
                    if EXACT or i < NX:
                        values[q, v] = f[ix(k), ix(j), ix(i)]
        for q in range(Q):
            p = ty + q * R
            for v in range(V):
                i = tx + v * T
                if EXACT or i < NX:
                    tile[ix(p), ix(i + HALO)] = values[q, v]
                    if i < HALO:                 # this value is also the periodic image past the right end
                        tile[ix(p), ix(i + NX + HALO)] = values[q, v]
                    if i >= NX - HALO:           # ... or before the left end
                        tile[ix(p), ix(i - NX + HALO)] = values[q, v]
        cuda.syncthreads()
        for q in range(Q):
            p = ty + q * R
            j = j0 + p
            if j >= ny:
                continue
            for v in range(V):
                i = tx + v * T
                if EXACT or i < NX:
                    if PER_POINT:                # compile-time constant: the other branch is removed
                        a, b, c, d = coef[0, ix(i)], coef[1, ix(i)], coef[2, ix(i)], coef[3, ix(i)]
                    else:
                        a, b, c, d = coef[0], coef[1], coef[2], coef[3]
                    s = i + HALO
                    df[ix(k), ix(j), ix(i)] = (a * (tile[ix(p), ix(s + 1)] - tile[ix(p), ix(s - 1)])
                                               + b * (tile[ix(p), ix(s + 2)] - tile[ix(p), ix(s - 2)])
                                               + c * (tile[ix(p), ix(s + 3)] - tile[ix(p), ix(s - 3)])
                                               + d * (tile[ix(p), ix(s + 4)] - tile[ix(p), ix(s - 4)]))

    return deriv_x


# ---------------------------------------------------------------------------------------------
# 3. y and z with a shared-memory tile: `pencils` columns (consecutive x) by `length` points of
#    the middle axis plus a halo of 4 rows on each side, read from global memory with wrapped indices.


def deriv_axis1_kernel(length: int, pencils: int, rows: int, dtype_name: str, per_point: bool = False,
                       unsigned_indices: bool = True) -> object:
    """The middle-axis kernel of an (outer, n, inner) array, compiled for one tile shape."""
    return _deriv_axis1_kernel(int(length), int(pencils), int(rows), str(dtype_name), bool(per_point), bool(unsigned_indices))


@functools.cache
def _deriv_axis1_kernel(length: int, pencils: int, rows: int, dtype_name: str, per_point: bool, unsigned_indices: bool):
    L, P, R = length, pencils, rows
    TILE_ROWS = L + 2 * HALO
    OUTS = -(-L // R)                # points per thread, and interior rows each thread loads
    HALO_LOADS = -(-2 * HALO // R)   # halo rows each thread loads (the 8 rows are shared out)
    EXACT = L % R == 0               # every (q, thread) pair is a row of the segment: no test
    PER_POINT = per_point
    DT = numba.from_dtype(np.dtype(dtype_name))
    ix = index_helper(unsigned_indices)

    @cuda.jit
    def deriv_axis1(f, df, coef):
        tile = cuda.shared.array((TILE_ROWS, P), DT)
        values = cuda.local.array(OUTS, DT)
        halo = cuda.local.array(HALO_LOADS, DT)
        tx = cuda.threadIdx.x                # consecutive x: each warp row reads P contiguous values
        ty = cuda.threadIdx.y
        j0 = cuda.blockIdx.x * L             # the block's segment of the derivative axis
        i = cuda.blockIdx.y * P + tx
        k = cuda.blockIdx.z
        n = f.shape[1]
        column = i < f.shape[2]
        if column:
            for q in range(OUTS):            # all loads first: the segment ...
                r = ty + q * R
                if EXACT or r < L:
                    values[q] = f[ix(k), ix(j0 + r), ix(i)]
            for h in range(HALO_LOADS):      # ... and 4 rows each side, wrapped at the ends of the axis
                r = ty + h * R
                if r < 2 * HALO:
                    j = j0 - HALO + r if r < HALO else j0 + L - HALO + r
                    halo[h] = f[ix(k), ix(wrap(j, n)), ix(i)]
        for q in range(OUTS):
            r = ty + q * R
            if EXACT or r < L:
                tile[ix(r + HALO), ix(tx)] = values[q]
        for h in range(HALO_LOADS):
            r = ty + h * R
            if r < 2 * HALO:
                tile[ix(r if r < HALO else L + r), ix(tx)] = halo[h]
        cuda.syncthreads()
        for q in range(OUTS):
            r = ty + q * R
            if column and (EXACT or r < L):
                j = j0 + r
                if PER_POINT:
                    a, b, c, d = coef[0, ix(j)], coef[1, ix(j)], coef[2, ix(j)], coef[3, ix(j)]
                else:
                    a, b, c, d = coef[0], coef[1], coef[2], coef[3]
                s = r + HALO
                df[ix(k), ix(j), ix(i)] = (a * (tile[ix(s + 1), ix(tx)] - tile[ix(s - 1), ix(tx)])
                                           + b * (tile[ix(s + 2), ix(tx)] - tile[ix(s - 2), ix(tx)])
                                           + c * (tile[ix(s + 3), ix(tx)] - tile[ix(s - 3), ix(tx)])
                                           + d * (tile[ix(s + 4), ix(tx)] - tile[ix(s - 4), ix(tx)]))

    return deriv_axis1


# ---------------------------------------------------------------------------------------------
# 4. y and z with the tile in registers: the stencil couples points of one column only, so a
#    thread can hold its own segment of a column (plus halo) and needs neither shared memory nor a barrier.


@functools.cache
def deriv_axis1_registers_kernel(chunk: int, pencils: int, rows: int, dtype_name: str) -> object:
    """The middle-axis kernel with `chunk` consecutive points per thread held in registers."""
    C, P, R = chunk, pencils, rows
    WINDOW = C + 2 * HALO
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def deriv_axis1_registers(f, df, coef):
        w = cuda.local.array(WINDOW, DT)
        i = cuda.blockIdx.y * P + cuda.threadIdx.x
        j0 = (cuda.blockIdx.x * R + cuda.threadIdx.y) * C
        k = cuda.blockIdx.z
        n = f.shape[1]
        if i < f.shape[2] and j0 < n:
            for q in range(HALO):            # the halo below, wrapped at the start of the axis
                w[q] = f[nonneg(k), nonneg(wrap(j0 - HALO + q, n)), nonneg(i)]
            for q in range(C):
                w[HALO + q] = f[nonneg(k), nonneg(j0 + q), nonneg(i)]
            for q in range(HALO):            # and above, wrapped at the end
                w[HALO + C + q] = f[nonneg(k), nonneg(wrap(j0 + C + q, n)), nonneg(i)]
            a, b, c, d = coef[0], coef[1], coef[2], coef[3]
            for q in range(C):
                s = q + HALO
                df[nonneg(k), nonneg(j0 + q), nonneg(i)] = (a * (w[s + 1] - w[s - 1]) + b * (w[s + 2] - w[s - 2])
                                                            + c * (w[s + 3] - w[s - 3]) + d * (w[s + 4] - w[s - 4]))

    return deriv_axis1_registers


# ---------------------------------------------------------------------------------------------
# 5. A batched transpose (B, M, N) -> (B, N, M) through a padded shared-memory tile.


@functools.cache
def swap_last_axes_kernel(tile: int, rows: int, dtype_name: str) -> object:
    """Transpose the last two axes of a 3D array, tile x tile values per block, `rows` rows of threads."""
    TS, R = tile, rows
    PADDED = TS + 1          # +1 column: a column of the tile then spans every bank
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def swap_last_axes(src, dst):
        block = cuda.shared.array((TS, PADDED), DT)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        b = cuda.blockIdx.z
        m, n = src.shape[1], src.shape[2]
        col = cuda.blockIdx.x * TS + tx
        for r in range(ty, TS, R):
            row = cuda.blockIdx.y * TS + r
            if row < m and col < n:
                block[nonneg(r), nonneg(tx)] = src[nonneg(b), nonneg(row), nonneg(col)]
        cuda.syncthreads()
        out_col = cuda.blockIdx.y * TS + tx
        for r in range(ty, TS, R):
            out_row = cuda.blockIdx.x * TS + r
            if out_row < n and out_col < m:
                dst[nonneg(b), nonneg(out_row), nonneg(out_col)] = block[nonneg(tx), nonneg(r)]

    return swap_last_axes


# ---------------------------------------------------------------------------------------------
# Launchers. Each is a plan builder (gpucourse.launch): it checks the arguments, picks the grid
# and returns the kernels bound to them; @planned makes it a launcher that does that once per new
# set of arguments and afterwards only launches. `deriv_x.plan(f, df, c)` returns the plan itself.


def _check_pair(f, df) -> np.dtype:
    check_device_array(f, "f", ndim=3)
    dtype = check_float_dtype(f.dtype, "f.dtype")
    check_device_array(df, "df", dtype=dtype, ndim=3)
    check_same_shape(f, df, ("f", "df"))
    if min(f.shape) < 2 * HALO + 1:
        raise ArrayArgumentError(f"every axis needs at least {2 * HALO + 1} points for the nine-point periodic stencil; got {tuple(f.shape)}")
    return dtype


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")


@planned
def deriv_x_global(f, df, coefficients: tuple, modulo: bool = False, threads: tuple[int, int] = (32, 8)):
    """df = d f / dx with no tile: each thread reads its neighbours from global memory (periodic by `%` or by a branch)."""
    dtype = _check_pair(f, df)
    coefficients, per_point = _check_coefficients(coefficients, dtype, f.shape[2])
    if per_point:
        raise ArrayArgumentError("the global-memory x kernel takes the four uniform coefficients only")
    tx, ty = check_threads_per_block(threads)
    nz, ny, nx = f.shape
    blocks = check_blocks((-(-nx // tx), -(-ny // ty), nz))
    kernel = deriv_x_global_modulo_kernel if modulo else deriv_x_global_kernel
    return bind(kernel, blocks, (tx, ty, 1), f, df, *coefficients)


@planned
def deriv_x_book(f, df, coefficients: tuple, pencils: int = 4):
    """df = d f / dx with the book's sPencils tile: nx x `pencils` threads per block, one point each."""
    dtype = _check_pair(f, df)
    coefficients, per_point = _check_coefficients(coefficients, dtype, f.shape[2])
    if per_point:
        raise ArrayArgumentError("the book's x kernel takes the four uniform coefficients; use deriv_x for per-point ones")
    nz, ny, nx = f.shape
    check_threads_per_block((nx, pencils))
    check_shared_memory(book_x_tile(nx, pencils).shared_bytes(nx, dtype.itemsize))
    blocks = check_blocks((-(-ny // pencils), nz))
    return bind(deriv_x_book_kernel(nx, pencils, dtype.name), blocks, (nx, pencils), f, df, coefficients)


@planned
def deriv_x_book_per_point(f, df, coefficients, memory: str = "device", pencils: int = 4):
    """df = d f / dx with the book's tile and per-point coefficients (4, nx) in 'device' memory (a device array) or in
    'constant' memory (a NumPy array, compiled into the kernel: a new kernel for each array), as in the book's §6.1.4."""
    dtype = _check_pair(f, df)
    nz, ny, nx = f.shape
    check_threads_per_block((nx, pencils))
    check_shared_memory(book_x_tile(nx, pencils).shared_bytes(nx, dtype.itemsize))
    blocks = check_blocks((-(-ny // pencils), nz))
    if memory == "constant":
        host = np.asarray(coefficients)
        if host.dtype != dtype or host.shape != (HALO, nx):
            raise ArrayArgumentError(f"constant-memory coefficients are a NumPy {dtype.name} array of shape {(HALO, nx)}; "
                                     f"got {host.dtype.name} {host.shape}")
        kernel = deriv_x_book_constant_kernel(nx, pencils, dtype.name, np.ascontiguousarray(host).tobytes())
        return bind(kernel, blocks, (nx, pencils), f, df)
    if memory != "device":
        raise ArrayArgumentError(f"memory is 'device' or 'constant'; got {memory!r}")
    coefficients, per_point = _check_coefficients(coefficients, dtype, nx)
    if not per_point:
        raise ArrayArgumentError("give the per-point coefficients as a (4, nx) device array")
    return bind(deriv_x_book_device_kernel(nx, pencils, dtype.name), blocks, (nx, pencils), f, df, coefficients)


@planned
def deriv_x_book_variant(f, df, coefficients: tuple, variant: str, pencils: int = 4):
    """The book's x kernel as one of its §6.1.2.1 experiments (`BOOK_X_VARIANTS`); the same tile and launch as `deriv_x_book`."""
    dtype = _check_pair(f, df)
    coefficients, per_point = _check_coefficients(coefficients, dtype, f.shape[2])
    if per_point:
        raise ArrayArgumentError("the book's x kernel takes the four uniform coefficients only")
    if variant not in BOOK_X_VARIANTS:
        raise ArrayArgumentError(f"variant must be one of {BOOK_X_VARIANTS}; got {variant!r}")
    nz, ny, nx = f.shape
    check_threads_per_block((nx, pencils))
    check_shared_memory(book_x_tile(nx, pencils).shared_bytes(nx, dtype.itemsize))
    blocks = check_blocks((-(-ny // pencils), nz))
    return bind(deriv_x_book_variant_kernel(nx, pencils, dtype.name, variant), blocks, (nx, pencils), f, df, coefficients)


def check_x_tile(tile: XTile, shape: tuple[int, int, int], itemsize: int) -> XTile:
    """Check an x tile against the grid and the device: raise LaunchConfigError saying what to change."""
    nx = shape[2]
    if tile.threads_x < 1 or tile.pencils < 1 or tile.rows < 1:
        raise LaunchConfigError(f"every tile parameter must be positive; got {tile}")
    if tile.pencils % tile.rows:
        raise LaunchConfigError(f"pencils ({tile.pencils}) must be a multiple of rows ({tile.rows}): each row of threads takes pencils / rows lines")
    if tile.threads_x > nx:
        raise LaunchConfigError(f"threads_x ({tile.threads_x}) is more than the {nx} points of an x-line: use at most {nx}")
    check_threads_per_block((tile.threads_x, tile.rows))
    check_shared_memory(tile.shared_bytes(nx, itemsize))
    return tile


@planned
def deriv_x(f, df, coefficients, tile: XTile | None = None, unsigned_indices: bool = True):
    """df = d f / dx (periodic) with whole x-lines in shared memory and several points per thread."""
    dtype = _check_pair(f, df)
    coefficients, per_point = _check_coefficients(coefficients, dtype, f.shape[2])
    nz, ny, nx = f.shape
    tile = check_x_tile(tile or default_x_tile(f.shape), f.shape, dtype.itemsize)
    blocks = check_blocks((-(-ny // tile.pencils), nz))
    kernel = deriv_x_kernel(nx, tile.threads_x, tile.pencils, tile.rows, dtype.name, per_point, unsigned_indices)
    return bind(kernel, blocks, (tile.threads_x, tile.rows), f, df, coefficients)


def is_c_contiguous(array) -> bool:
    """True when the array's strides are those of a C-order array of its shape (any array kind)."""
    expected = np.dtype(array.dtype).itemsize
    for size, stride in zip(reversed(array.shape), reversed(array.strides)):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return True


def middle_axis_view(array, direction: str) -> object:
    """The array as (outer, n, inner) with the derivative axis in the middle: y -> itself, z -> (1, nz, ny * nx)."""
    array = as_numba(array)
    if direction == "y":
        return array
    if not is_c_contiguous(array):
        raise ArrayArgumentError("the z kernels see the array as (1, nz, ny * nx), which needs a C-contiguous array; this one is a "
                                 "strided view. Pass a contiguous copy (numpy/cupy.ascontiguousarray) or use method='global'.")
    nz, ny, nx = array.shape
    return array.reshape((1, nz, ny * nx))


def check_axis_tile(tile: AxisTile, n_axis: int, itemsize: int) -> AxisTile:
    """Check a y/z tile against the axis length and the device: raise LaunchConfigError saying what to change."""
    if tile.length < 1 or tile.pencils < 1 or tile.rows < 1:
        raise LaunchConfigError(f"every tile parameter must be positive; got {tile}")
    if tile.length > n_axis or n_axis % tile.length:
        raise LaunchConfigError(f"the tile length ({tile.length}) must divide the {n_axis} points of the axis")
    check_threads_per_block((tile.pencils, tile.rows))
    check_shared_memory(tile.shared_bytes(itemsize))
    return tile


@planned
def deriv_yz(f, df, direction: str, coefficients, tile: AxisTile | None = None, unsigned_indices: bool = True):
    """df = d f / dy or d f / dz (periodic) through a shared-memory tile of `tile.pencils` x-columns."""
    _check_direction(direction)
    if direction == "x":
        raise ValueError("deriv_yz differentiates along y or z; use deriv_x for x")
    dtype = _check_pair(f, df)
    n_axis = f.shape[1] if direction == "y" else f.shape[0]
    coefficients, per_point = _check_coefficients(coefficients, dtype, n_axis)
    tile = check_axis_tile(tile or default_axis_tile(f.shape, direction), n_axis, dtype.itemsize)
    src, dst = middle_axis_view(f, direction), middle_axis_view(df, direction)
    outer, _, inner = src.shape
    blocks = check_blocks((n_axis // tile.length, -(-inner // tile.pencils), outer))
    kernel = deriv_axis1_kernel(tile.length, tile.pencils, tile.rows, dtype.name, per_point, unsigned_indices)
    return bind(kernel, blocks, (tile.pencils, tile.rows), src, dst, coefficients)


@planned
def deriv_yz_registers(f, df, direction: str, coefficients: tuple, chunk: int | None = None, pencils: int = 32, rows: int = 4):
    """df = d f / dy or d f / dz (periodic) with each thread holding `chunk` points of one column in registers."""
    _check_direction(direction)
    if direction == "x":
        raise ValueError("deriv_yz_registers differentiates along y or z; use deriv_x for x")
    dtype = _check_pair(f, df)
    n_axis = f.shape[1] if direction == "y" else f.shape[0]
    coefficients, per_point = _check_coefficients(coefficients, dtype, n_axis)
    if per_point:
        raise ArrayArgumentError("the register kernel takes the four uniform coefficients only")
    chunk = chunk or default_register_chunk(n_axis)
    if chunk < 1 or n_axis % chunk:
        raise LaunchConfigError(f"chunk ({chunk}) must divide the {n_axis} points of the axis")
    check_threads_per_block((pencils, rows))
    src, dst = middle_axis_view(f, direction), middle_axis_view(df, direction)
    outer, _, inner = src.shape
    blocks = check_blocks((-(-(n_axis // chunk) // rows), -(-inner // pencils), outer))
    return bind(deriv_axis1_registers_kernel(chunk, pencils, rows, dtype.name), blocks, (pencils, rows), src, dst, coefficients)


@planned
def swap_last_axes(src, dst, tile: int = 32, rows: int = 8):
    """dst[b, j, i] = src[b, i, j] for 3D device arrays (a batch of 2D transposes)."""
    check_device_array(src, "src", ndim=3)
    dtype = check_float_dtype(src.dtype, "src.dtype")
    b, m, n = src.shape
    check_device_array(dst, "dst", dtype=dtype, ndim=3, shape=(b, n, m))
    if tile % rows:
        raise LaunchConfigError(f"tile ({tile}) must be a multiple of rows ({rows})")
    check_threads_per_block((tile, rows))
    check_shared_memory(tile * (tile + 1) * dtype.itemsize)
    blocks = check_blocks((-(-n // tile), -(-m // tile), b))
    return bind(swap_last_axes_kernel(tile, rows, dtype.name), blocks, (tile, rows), src, dst)


def transposed_shape(shape: tuple[int, int, int], direction: str) -> tuple[int, int, int]:
    """Shape of the reordered array whose last (contiguous) axis is `direction`."""
    nz, ny, nx = shape
    return (nz, nx, ny) if direction == "y" else (ny, nx, nz)


def transpose_work(f, direction: str) -> tuple:
    """Two scratch arrays for `deriv_transposed` (allocate once, reuse for every call)."""
    shape = transposed_shape(tuple(f.shape), direction)
    return device_empty(shape, f.dtype), device_empty(shape, f.dtype)


@planned
def deriv_transposed(f, df, direction: str, coefficients: tuple, work: tuple | None = None, x_tile: XTile | None = None,
                     swap_tile: int | None = None, swap_rows: int | None = None):
    """df = d f / dy or d f / dz by reordering so the axis is contiguous, the x kernel, and reordering back."""
    if swap_tile is None:  # 32 x 32 tiles (8 rows of threads), or 8 x 8 on grids smaller than a warp
        swap_tile = 32 if min(f.shape) >= 32 else 8
    swap_rows = swap_rows or swap_tile // 4
    _check_direction(direction)
    if direction == "x":
        raise ValueError("the transpose route is for y and z; x is contiguous already")
    dtype = _check_pair(f, df)
    coefficients, per_point = _check_coefficients(coefficients, dtype, f.shape[AXIS[direction]])
    if per_point:
        raise ArrayArgumentError("the transpose route takes the four uniform coefficients only")
    shape = transposed_shape(tuple(f.shape), direction)
    first, second = work or owned(*transpose_work(f, direction))  # scratch made here belongs to the plan
    for name, array in (("work[0]", first), ("work[1]", second)):
        check_device_array(array, name, dtype=dtype, shape=shape)
    first, second = as_numba(first), as_numba(second)
    if direction == "y":  # (nz, ny, nx) <-> (nz, nx, ny): a transpose of every z-plane
        return (build(swap_last_axes, f, first, swap_tile, swap_rows),
                build(deriv_x, first, second, coefficients, x_tile),
                build(swap_last_axes, second, df, swap_tile, swap_rows))
    nz, ny, nx = f.shape   # (nz, ny*nx) <-> (ny*nx, nz): one transpose of the whole array seen in 2D
    flat = (1, ny * nx, nz)
    return (build(swap_last_axes, middle_axis_view(f, "z"), first.reshape(flat), swap_tile, swap_rows),
            build(deriv_x, first, second, coefficients, x_tile),
            build(swap_last_axes, second.reshape(flat), middle_axis_view(df, "z"), swap_tile, swap_rows))


@planned
def derivative(f, df, direction: str, coefficients, method: str = "tiled", **options):
    """df = the periodic derivative of f along `direction` by `method`: 'tiled', 'book', 'registers', 'transposed' or 'global'."""
    _check_direction(direction)
    if method == "tiled":
        if direction == "x":
            return build(deriv_x, f, df, coefficients, options.get("tile"))
        return build(deriv_yz, f, df, direction, coefficients, options.get("tile"))
    if method == "book":
        if direction == "x":
            return build(deriv_x_book, f, df, coefficients, options.get("pencils", 4))
        n_axis = f.shape[AXIS[direction]]
        return build(deriv_yz, f, df, direction, coefficients, book_spencils_tile(n_axis, options.get("pencils", 4)))
    if method == "registers":
        if direction == "x":
            raise ValueError("x is the contiguous axis: its points are spread over a warp, so use method='tiled'")
        return build(deriv_yz_registers, f, df, direction, coefficients, options.get("chunk"))
    if method == "transposed":
        if direction == "x":
            return build(deriv_x, f, df, coefficients, options.get("x_tile"))
        return build(deriv_transposed, f, df, direction, coefficients, options.get("work"), options.get("x_tile"))
    if method == "global":
        if direction != "x":
            raise ValueError("the global-memory kernel is written for x only")
        return build(deriv_x_global, f, df, coefficients, options.get("modulo", False))
    raise ValueError(f"unknown method {method!r}: use 'tiled', 'book', 'registers', 'transposed' or 'global'")


def bytes_moved(shape: tuple[int, ...], itemsize: int) -> int:
    """Bytes a derivative must move at least: every value read once and written once."""
    return 2 * math.prod(shape) * itemsize
