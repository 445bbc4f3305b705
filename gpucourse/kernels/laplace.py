"""Chapter 6.2 kernels: Jacobi sweeps of the compact nine-point Laplace stencil on a 2D mesh.

``a[y, x]`` with x contiguous. Each sweep writes the interior of ``a_new`` from ``a``:
new = 1/5 (four edge neighbours) + 1/20 (four corner neighbours); the boundary rows and columns are
never written (they hold the boundary condition). Four ways to read the neighbours, each twice:
the book's kernel (one point per thread) and a tuned one.

* ``jacobi_global_book`` / ``jacobi_global``: straight from global memory (the caches catch the reuse);
* ``jacobi_shared_book`` / ``jacobi_shared``: through a shared-memory tile with a one-point halo;
* ``jacobi_texture_book`` / ``jacobi_texture`` (GPU only, CUDA C through CuPy): through texture
  objects, the book's third way;
* ``jacobi_readonly_book`` / ``jacobi_readonly`` (GPU only, CUDA C): through the read-only data
  path that a ``const __restrict__`` pointer opens (``__ldg``).

The tuned kernels give each thread a column of `rows` points: it loads the rows it needs (its
points and one more above and below) into registers before it computes anything, so that many
loads are in flight, reuses each loaded value for three outputs (a sliding window down the column),
computes its position in 32-bit integers (`gpucourse.kernels.indexing`), and keeps the tests for the
mesh's last rows out of the common path. All Numba kernels call the same `jacobi_update`, and the
CUDA C kernels write the same expression, in the same order of additions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numba
import numpy as np
from numba import cuda

from .. import mode
from ..arrays import require_cupy
from ..errors import LaunchConfigError
from ..graphs import capture
from ..launch import CuPyLaunch, bind, planned
from ..simulation import device_function
from ..validate import (
    blocks_to_cover,
    check_blocks,
    check_device_array,
    check_float_dtype,
    check_same_shape,
    check_shared_memory,
    check_threads_per_block,
    launch_2d,
)
from .indexing import FULL_MASK, ONE, WARP_COLUMNS, check_32bit, check_rows, column_blocks, flat, u32
from .stencil import nonneg

#: The book's thread block: 32 x 16 threads (x, y).
BOOK_BLOCK = (32, 16)
#: The tuned kernels' (threads per block (x, y), rows each thread computes), by method: the fastest of the variants
#: measured at 8192^2 float32 on an H200 (tools/gpu_stencil2d.py, measurements/stencil2d.md). Read at each new plan.
TUNED = {"global": ((128, 2), 8), "shared": ((128, 1), 16), "readonly": ((128, 2), 8), "texture": ((32, 2), 32)}
#: Whether the tuned global and read-only sweeps take their x-neighbours from warp shuffles, by method. On the H200
#: (8192^2 float32), the global sweep with shuffles on 128 x 2 blocks reached 0.89 of the copy; loading them (three loads
#: a row, two from the L1 cache) 0.83: the queue of memory instructions fills (Nsight Compute's lg_throttle), and a
#: shuffle takes two of the three loads out of it. Read at each new plan.
SHUFFLES = {"global": True, "readonly": True}


def weights(dtype) -> tuple:
    """The stencil's weights (1/5 for edge neighbours, 1/20 for corner ones) as scalars of `dtype`."""
    kind = np.dtype(dtype).type
    return kind(0.2), kind(0.05)


@device_function
def jacobi_update(north, west, east, south, north_west, north_east, south_west, south_east, edge, corner):
    """The book's update, in this order in every kernel: edge (((S + W) + E) + N) + corner (((NW + NE) + SW) + SE).

    The last multiply-add is written as one fused multiply-add: left to the compiler, `a * b + c * d`
    may be fused either way round (or not at all) depending on the code around it, and two kernels
    would then differ in the last bit.
    """
    return cuda.fma(edge, ((south + west) + east) + north, corner * (((north_west + north_east) + south_west) + south_east))


# ---------------------------------------------------------------------------------------------
# The book's kernels: one thread per point


@cuda.jit
def jacobi_global_book_kernel(a, a_new, edge, corner):
    i, j = cuda.grid(2)  # i walks x (contiguous), j walks y
    ny, nx = a.shape
    if 0 < i < nx - 1 and 0 < j < ny - 1:
        a_new[j, i] = jacobi_update(a[j - 1, i], a[j, i - 1], a[j, i + 1], a[j + 1, i],
                                    a[j - 1, i - 1], a[j - 1, i + 1], a[j + 1, i - 1], a[j + 1, i + 1], edge, corner)


@functools.cache
def jacobi_shared_book_kernel(block_x: int, block_y: int, dtype_name: str) -> object:
    """The book's shared-memory Jacobi sweep for blocks of block_x x block_y threads."""
    BX, BY = block_x, block_y
    TX, TY = BX + 2, BY + 2              # the tile: the block's points and a one-point halo
    TILE = TX * TY
    THREADS = BX * BY
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def jacobi_shared_book(a, a_new, edge, corner):
        t = cuda.shared.array((TY, TX), DT)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        ny, nx = a.shape
        x0 = cuda.blockIdx.x * BX - 1     # global position of the tile's corner
        y0 = cuda.blockIdx.y * BY - 1
        # more tile points than threads: the block walks the tile in row-major steps of THREADS,
        # so consecutive threads read consecutive x (coalesced)
        for flat_index in range(ty * BX + tx, TILE, THREADS):
            r = flat_index // TX
            c = flat_index - r * TX
            gi = x0 + c
            gj = y0 + r
            if 0 <= gi < nx and 0 <= gj < ny:
                t[r, c] = a[gj, gi]
        cuda.syncthreads()
        i = x0 + 1 + tx
        j = y0 + 1 + ty
        if 0 < i < nx - 1 and 0 < j < ny - 1:
            r, c = ty + 1, tx + 1
            a_new[j, i] = jacobi_update(t[r - 1, c], t[r, c - 1], t[r, c + 1], t[r + 1, c],
                                        t[r - 1, c - 1], t[r - 1, c + 1], t[r + 1, c - 1], t[r + 1, c + 1], edge, corner)

    return jacobi_shared_book


# ---------------------------------------------------------------------------------------------
# The tuned kernels: a column of `rows` points per thread, in registers
#
# Thread (x, y) of block (bx, by) computes column i = bx * blockDim.x + x (warps stay aligned with
# 128-byte rows), rows j0 ... j0 + rows - 1 with j0 = 1 + (by * blockDim.y + y) * rows: the interior
# rows, so a thread never starts on the boundary. Its window is rows j0 - 1 ... j0 + rows. Only the
# last row of threads of the mesh has fewer rows to write; it takes the second, checked path.


@functools.cache
def jacobi_global_rows_kernel(rows: int, dtype_name: str, shuffles: bool = True) -> object:
    """The tuned global-memory sweep: `rows` points per thread down a column, its window in registers.

    With `shuffles`, each thread loads one column only and takes the columns left and right of it
    from the lanes beside it (warp shuffles): a warp's 32 lanes hold 32 neighbouring columns and
    write the 30 inner ones (the two outer lanes load the halo; neighbouring warps overlap by two
    columns). One load a row, no branch that depends on the lane. Without, each thread loads all
    three columns (three loads a row). Shuffles need blocks a whole number of warps wide.
    """
    if not shuffles:
        return _jacobi_global_loads_kernel(rows, dtype_name)
    R = rows
    W = R + 2                            # rows of the window
    DT = numba.from_dtype(np.dtype(dtype_name))
    WC = WARP_COLUMNS

    @cuda.jit
    def jacobi_global_rows(a, a_new, nx, ny, edge, corner):  # a, a_new: flat views of (ny, nx) meshes
        lane = cuda.laneid
        warp = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
        first = np.int64(warp) * WC - 1  # the column of lane 0: the halo left of the warp's 30 columns
        i = first + lane
        j0 = u32(1 + (cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y) * R)
        if j0 + 1 >= ny:                 # the same j0 for the whole warp: every lane leaves, or none
            return
        row = nonneg(nx)
        if first >= 0 and first + 32 <= nx and j0 + R < ny:  # all 32 columns inside the mesh, all rows interior
            centre = cuda.local.array(W, DT)   # registers: every index is a constant once the loops unroll
            top = nonneg(u32((j0 - 1) * nx + i))
            o = top
            for k in range(W):           # every load first: one a row
                centre[k] = a[o]
                o += row
            new = cuda.local.array(R, DT)
            west_above = cuda.shfl_up_sync(FULL_MASK, centre[0], 1)
            east_above = cuda.shfl_down_sync(FULL_MASK, centre[0], 1)
            west_here = cuda.shfl_up_sync(FULL_MASK, centre[1], 1)
            east_here = cuda.shfl_down_sync(FULL_MASK, centre[1], 1)
            for k in range(R):           # a sliding window: each shuffled value serves three rows
                west_below = cuda.shfl_up_sync(FULL_MASK, centre[k + 2], 1)
                east_below = cuda.shfl_down_sync(FULL_MASK, centre[k + 2], 1)
                new[k] = jacobi_update(centre[k], west_here, east_here, centre[k + 2],
                                       west_above, east_above, west_below, east_below, edge, corner)
                west_above, east_above, west_here, east_here = west_here, east_here, west_below, east_below
            if 0 < lane and lane < 31 and i + 1 < nx:  # after every shuffle: the lanes may part here
                o = top + row
                for k in range(R):
                    a_new[o] = new[k]
                    o += row
        elif 0 < lane and lane < 31 and 1 <= i and i + 1 < nx:  # near an edge of the mesh: each point on its own
            o = nonneg(u32(j0 * nx + i))
            for k in range(R):
                if j0 + k + 1 < ny:
                    a_new[o] = jacobi_update(a[o - row], a[o - ONE], a[o + ONE], a[o + row],
                                             a[o - row - ONE], a[o - row + ONE], a[o + row - ONE], a[o + row + ONE], edge, corner)
                o += row

    return jacobi_global_rows


@functools.cache
def _jacobi_global_loads_kernel(rows: int, dtype_name: str) -> object:
    """The tuned global-memory sweep with its x-neighbours loaded too: the three columns of the window in registers."""
    R = rows
    W = R + 2                            # rows of the window
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def jacobi_global_rows(a, a_new, nx, ny, edge, corner):  # a, a_new: flat views of (ny, nx) meshes
        i = u32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
        j0 = u32(1 + (cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y) * R)
        if i < 1 or i + 1 >= nx or j0 + 1 >= ny:
            return
        west = cuda.local.array(W, DT)   # registers: every index below is a constant once the loops unroll
        centre = cuda.local.array(W, DT)
        east = cuda.local.array(W, DT)
        row = nonneg(nx)
        top = nonneg(u32((j0 - 1) * nx + i))   # (j0 - 1, i): the window's first row
        if j0 + R < ny:                  # all rows to write are interior: no test inside the loops
            o = top
            for k in range(W):           # every load first: 3 W of them in flight
                west[k] = a[o - ONE]
                centre[k] = a[o]
                east[k] = a[o + ONE]
                o += row
            o = top + row
            for k in range(R):
                a_new[o] = jacobi_update(centre[k], west[k + 1], east[k + 1], centre[k + 2],
                                         west[k], east[k], west[k + 2], east[k + 2], edge, corner)
                o += row
        else:                            # the mesh's last rows: write those above row ny - 1
            count = ny - 1 - j0
            o = top
            for k in range(W):
                if k < count + 2:
                    west[k] = a[o - ONE]
                    centre[k] = a[o]
                    east[k] = a[o + ONE]
                o += row
            o = top + row
            for k in range(R):
                if k < count:
                    a_new[o] = jacobi_update(centre[k], west[k + 1], east[k + 1], centre[k + 2],
                                             west[k], east[k], west[k + 2], east[k + 2], edge, corner)
                o += row

    return jacobi_global_rows


@functools.cache
def jacobi_shared_rows_kernel(block_x: int, block_y: int, rows: int, dtype_name: str) -> object:
    """The tuned shared-memory sweep: each thread loads its column into registers and into the tile, one barrier,
    then reads its x-neighbours from the tile and its y-neighbours from its registers."""
    BX, BY, R = block_x, block_y, rows
    W = R + 2
    TY, TX = BY * R + 2, BX + 2          # the block's points and a one-point halo
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def jacobi_shared_rows(a, a_new, nx, ny, edge, corner):
        tile = cuda.shared.array((TY, TX), DT)
        centre = cuda.local.array(W, DT)
        side = cuda.local.array(W, DT)   # the halo column of an edge thread of the block
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        i = u32(cuda.blockIdx.x * BX + tx)
        j0 = u32(1 + (cuda.blockIdx.y * BY + ty) * R)
        count = min(W, np.int64(ny) + 1 - np.int64(j0))  # rows of the window inside the mesh (<= 0: none)
        row = nonneg(nx)
        top = nonneg(u32((j0 - 1) * nx + i))
        t0 = ty * R                      # the tile row of the window's first row
        if i < nx and count == W:        # every load first; no test in the common case
            o = top
            for k in range(W):
                centre[k] = a[o]
                o += row
        elif i < nx:
            o = top
            for k in range(W):
                if k < count:
                    centre[k] = a[o]
                o += row
        halo = tx == 0 and i >= 1        # the column left of the block
        if tx == BX - 1 and i + 1 < nx:  # ... or right of it
            halo = True
        if halo:
            o = top - ONE if tx == 0 else top + ONE
            for k in range(W):
                if k < count:
                    side[k] = a[o]
                o += row
        if i < nx:                       # the thread's own rows, and the halo rows at the tile's top and bottom
            for k in range(W):
                if k < count and (0 < k < W - 1 or (k == 0 and ty == 0) or (k == W - 1 and ty == BY - 1)):
                    tile[nonneg(t0 + k), nonneg(tx + 1)] = centre[k]
                    if halo:
                        tile[nonneg(t0 + k), nonneg(0 if tx == 0 else BX + 1)] = side[k]
        cuda.syncthreads()
        if i < 1 or i + 1 >= nx or count < 3:
            return
        o = top + row
        for k in range(R):
            if k < count - 2:
                r = nonneg(t0 + k)           # the tile row above the point
                c = nonneg(tx)               # the tile column left of it
                a_new[o] = jacobi_update(centre[k], tile[r + ONE, c], tile[r + ONE, c + ONE + ONE], centre[k + 2],
                                         tile[r, c], tile[r, c + ONE + ONE], tile[r + ONE + ONE, c], tile[r + ONE + ONE, c + ONE + ONE],
                                         edge, corner)
            o += row

    return jacobi_shared_rows


# ---------------------------------------------------------------------------------------------
# CUDA C through CuPy: textures and the read-only path, the book's kernels and the tuned ones.
# ROWS is set at compile time (one module per value).

JACOBI_CUDA_C = r"""
__device__ __forceinline__ float jacobi_update(float north, float west, float east, float south,
                                               float north_west, float north_east, float south_west, float south_east,
                                               float edge, float corner)
{
    return fmaf(edge, ((south + west) + east) + north, corner * (((north_west + north_east) + south_west) + south_east));
}

// The book's kernels: one thread per point.
extern "C" __global__ void jacobi_texture_book(cudaTextureObject_t a, float* a_new, int nx, int ny, float edge, float corner)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
        // unnormalised coordinates: the centre of texel (i, j) is at (i + 0.5, j + 0.5)
        float x = i + 0.5f, y = j + 0.5f;
        a_new[j * nx + i] = jacobi_update(tex2D<float>(a, x, y - 1), tex2D<float>(a, x - 1, y), tex2D<float>(a, x + 1, y),
                                          tex2D<float>(a, x, y + 1), tex2D<float>(a, x - 1, y - 1), tex2D<float>(a, x + 1, y - 1),
                                          tex2D<float>(a, x - 1, y + 1), tex2D<float>(a, x + 1, y + 1), edge, corner);
    }
}

extern "C" __global__ void jacobi_readonly_book(const float* __restrict__ a, float* __restrict__ a_new, int nx, int ny,
                                                float edge, float corner)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
        const float* p = a + j * nx + i;
        a_new[j * nx + i] = jacobi_update(__ldg(p - nx), __ldg(p - 1), __ldg(p + 1), __ldg(p + nx),
                                          __ldg(p - nx - 1), __ldg(p - nx + 1), __ldg(p + nx - 1), __ldg(p + nx + 1), edge, corner);
    }
}

// The tuned kernels: ROWS points per thread down a column, the window in registers.
// Thread (x, y) computes column i, rows j0 ... j0 + ROWS - 1, j0 = 1 + (blockIdx.y * blockDim.y + y) * ROWS.
extern "C" __global__ void jacobi_readonly_rows(const float* __restrict__ a, float* __restrict__ a_new, int nx, int ny,
                                                float edge, float corner)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j0 = 1 + (blockIdx.y * blockDim.y + threadIdx.y) * ROWS;
    if (i < 1 || i >= nx - 1 || j0 >= ny - 1) return;
    const int count = min(ROWS, ny - 1 - j0);          // rows to write
    const float* p = a + ((j0 - 1) * nx + i);          // (j0 - 1, i): the window's first row
    float* q = a_new + (j0 * nx + i);
    float west[ROWS + 2], centre[ROWS + 2], east[ROWS + 2];
    if (count == ROWS) {
#pragma unroll
        for (int k = 0; k < ROWS + 2; ++k) {
            west[k] = __ldg(p + k * nx - 1); centre[k] = __ldg(p + k * nx); east[k] = __ldg(p + k * nx + 1);
        }
#pragma unroll
        for (int k = 0; k < ROWS; ++k)
            q[k * nx] = jacobi_update(centre[k], west[k + 1], east[k + 1], centre[k + 2],
                                      west[k], east[k], west[k + 2], east[k + 2], edge, corner);
    } else {
#pragma unroll
        for (int k = 0; k < ROWS + 2; ++k)
            if (k < count + 2) {
                west[k] = __ldg(p + k * nx - 1); centre[k] = __ldg(p + k * nx); east[k] = __ldg(p + k * nx + 1);
            }
#pragma unroll
        for (int k = 0; k < ROWS; ++k)
            if (k < count)
                q[k * nx] = jacobi_update(centre[k], west[k + 1], east[k + 1], centre[k + 2],
                                          west[k], east[k], west[k + 2], east[k + 2], edge, corner);
    }
}

// The read-only path with the x-neighbours from the lanes beside: each warp loads 32 neighbouring columns (one __ldg a
// row) and writes the 30 inner ones; neighbouring warps overlap by two columns (blockDim.x a multiple of 32). Every
// shuffle comes before any branch that depends on the lane; warps near the mesh's edges take a checked path.
extern "C" __global__ void jacobi_readonly_warp(const float* __restrict__ a, float* __restrict__ a_new, int nx, int ny,
                                                float edge, float corner)
{
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const int first = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * WARP_COLUMNS - 1;   // lane 0's column
    const int i = first + lane;
    const int j0 = 1 + (blockIdx.y * blockDim.y + threadIdx.y) * ROWS;
    if (j0 >= ny - 1) return;                          // the same j0 for the whole warp
    if (first >= 0 && first + 32 <= nx && j0 + ROWS < ny) {
        const float* p = a + ((j0 - 1) * nx + i);      // (j0 - 1, i): the window's first row
        float centre[ROWS + 2], fresh[ROWS];
#pragma unroll
        for (int k = 0; k < ROWS + 2; ++k)             // every load first: one a row
            centre[k] = __ldg(p + k * nx);
        float west_above = __shfl_up_sync(full, centre[0], 1), east_above = __shfl_down_sync(full, centre[0], 1);
        float west_here = __shfl_up_sync(full, centre[1], 1), east_here = __shfl_down_sync(full, centre[1], 1);
#pragma unroll
        for (int k = 0; k < ROWS; ++k) {               // a sliding window: each shuffled value serves three rows
            const float west_below = __shfl_up_sync(full, centre[k + 2], 1), east_below = __shfl_down_sync(full, centre[k + 2], 1);
            fresh[k] = jacobi_update(centre[k], west_here, east_here, centre[k + 2], west_above, east_above, west_below, east_below,
                                     edge, corner);
            west_above = west_here; east_above = east_here; west_here = west_below; east_here = east_below;
        }
        if (lane > 0 && lane < 31) {                   // after every shuffle: the lanes may part here
            float* q = a_new + (j0 * nx + i);
#pragma unroll
            for (int k = 0; k < ROWS; ++k)
                q[k * nx] = fresh[k];
        }
    } else if (lane > 0 && lane < 31 && i >= 1 && i < nx - 1) {   // near an edge of the mesh: each point on its own
        const float* p = a + (j0 * nx + i);
        float* q = a_new + (j0 * nx + i);
        for (int k = 0; k < ROWS && j0 + k < ny - 1; ++k, p += nx, q += nx)
            *q = jacobi_update(__ldg(p - nx), __ldg(p - 1), __ldg(p + 1), __ldg(p + nx),
                               __ldg(p - nx - 1), __ldg(p - nx + 1), __ldg(p + nx - 1), __ldg(p + nx + 1), edge, corner);
    }
}

// Textures: one fetch per point, the x-neighbours from the lanes beside by warp shuffles (blockDim.x == 32);
// lane 0 and lane 31 fetch the one they lack. Coordinates past the mesh are clamped by the texture, so every
// lane runs every fetch and every shuffle; only the stores test the mesh.
extern "C" __global__ void jacobi_texture_rows(cudaTextureObject_t a, float* a_new, int nx, int ny, float edge, float corner)
{
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x;
    const int i = blockIdx.x * 32 + lane;
    const int j0 = 1 + (blockIdx.y * blockDim.y + threadIdx.y) * ROWS;
    if (j0 >= ny - 1) return;                          // the same j0 for the whole warp
    const bool writes = i >= 1 && i < nx - 1;
    const int count = min(ROWS, ny - 1 - j0);
    const float x = i + 0.5f, y = j0 - 0.5f;           // the centre of texel (i, j0 - 1)
    float west[ROWS + 2], centre[ROWS + 2], east[ROWS + 2];
#pragma unroll
    for (int k = 0; k < ROWS + 2; ++k) {
        centre[k] = tex2D<float>(a, x, y + k);
        west[k] = lane == 0 ? tex2D<float>(a, x - 1, y + k) : 0.0f;
        east[k] = lane == 31 ? tex2D<float>(a, x + 1, y + k) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < ROWS + 2; ++k) {
        const float w = __shfl_up_sync(full, centre[k], 1), e = __shfl_down_sync(full, centre[k], 1);
        if (lane != 0) west[k] = w;
        if (lane != 31) east[k] = e;
    }
    float* q = a_new + (j0 * nx + i);
#pragma unroll
    for (int k = 0; k < ROWS; ++k)
        if (writes && k < count)
            q[k * nx] = jacobi_update(centre[k], west[k + 1], east[k + 1], centre[k + 2],
                                      west[k], east[k], west[k + 2], east[k + 2], edge, corner);
}
"""


def _check(a, a_new) -> np.dtype:
    check_device_array(a, "a", ndim=2)
    dtype = check_float_dtype(a.dtype, "a.dtype")
    check_device_array(a_new, "a_new", dtype=dtype, ndim=2)
    check_same_shape(a, a_new, ("a", "a_new"))
    if min(a.shape) < 3:
        raise LaunchConfigError(f"the mesh needs at least 3 x 3 points (a boundary and an interior); got {tuple(a.shape)}")
    return dtype


def tuned_options(method: str, block: tuple[int, int] | None, rows: int | None) -> tuple[tuple[int, int], int]:
    """(block, rows) of a tuned sweep: those given, else TUNED[method]'s."""
    default_block, default_rows = TUNED[method]
    return tuple(default_block if block is None else block), default_rows if rows is None else rows


def rows_grid(shape: tuple[int, int], block: tuple[int, int], rows: int,
              shuffles: bool = False) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) of a tuned sweep: x across the columns (WARP_COLUMNS a warp with `shuffles`), y across the interior rows."""
    bx, by = check_threads_per_block(block)
    ny, nx = shape
    return check_blocks((column_blocks(nx, bx, shuffles), blocks_to_cover(ny - 2, by * rows))), (bx, by)


@planned
def jacobi_global_book(a, a_new, block: tuple[int, int] = BOOK_BLOCK):
    """One Jacobi sweep a -> a_new (interior only), the book's way: a thread per point, neighbours from global memory."""
    dtype = _check(a, a_new)
    blocks, threads = launch_2d(a.shape, block)
    return bind(jacobi_global_book_kernel, blocks, threads, a, a_new, *weights(dtype))


@planned
def jacobi_shared_book(a, a_new, block: tuple[int, int] = BOOK_BLOCK):
    """One Jacobi sweep a -> a_new (interior only), the book's way: a shared-memory tile with a one-point halo."""
    dtype = _check(a, a_new)
    bx, by = check_threads_per_block(block)
    check_shared_memory((bx + 2) * (by + 2) * dtype.itemsize)
    blocks, threads = launch_2d(a.shape, block)
    return bind(jacobi_shared_book_kernel(bx, by, dtype.name), blocks, threads, a, a_new, *weights(dtype))


@planned
def jacobi_global(a, a_new, block: tuple[int, int] | None = None, rows: int | None = None, shuffles: bool | None = None):
    """One Jacobi sweep a -> a_new (interior only) from global memory, `rows` points per thread (C-contiguous meshes).

    `shuffles`: x-neighbours from the lanes beside (one load a row); False: loaded too (three loads a row).
    Unset options take TUNED["global"] and SHUFFLES["global"].
    """
    block, rows = tuned_options("global", block, rows)
    shuffles = SHUFFLES["global"] if shuffles is None else shuffles
    dtype = _check(a, a_new)
    check_32bit(a.shape)
    rows = check_rows(rows)
    blocks, threads = rows_grid(a.shape, block, rows, bool(shuffles))
    ny, nx = a.shape
    return bind(jacobi_global_rows_kernel(rows, dtype.name, bool(shuffles)), blocks, threads, flat(a), flat(a_new), np.uint32(nx),
                np.uint32(ny), *weights(dtype))


@planned
def jacobi_shared(a, a_new, block: tuple[int, int] | None = None, rows: int | None = None):
    """One Jacobi sweep a -> a_new (interior only) through a shared tile, `rows` points per thread (C-contiguous meshes)."""
    block, rows = tuned_options("shared", block, rows)
    dtype = _check(a, a_new)
    check_32bit(a.shape)
    rows = check_rows(rows)
    blocks, (bx, by) = rows_grid(a.shape, block, rows)
    check_shared_memory((bx + 2) * (by * rows + 2) * dtype.itemsize)
    ny, nx = a.shape
    return bind(jacobi_shared_rows_kernel(bx, by, rows, dtype.name), blocks, (bx, by), flat(a), flat(a_new), np.uint32(nx),
                np.uint32(ny), *weights(dtype))


def cuda_c_module(rows: int | None = None):
    """The CUDA C Jacobi kernels compiled by CuPy, the tuned ones for `rows` points per thread (default: the read-only one's)."""
    return _cuda_c_module(int(rows or TUNED["readonly"][1]))


@functools.cache
def _cuda_c_module(rows: int):
    cupy = require_cupy("The texture and read-only Jacobi kernels (CUDA C through CuPy)")
    return cupy.RawModule(code=JACOBI_CUDA_C, options=(f"-DROWS={rows}", f"-DWARP_COLUMNS={WARP_COLUMNS}"))


def texture_pitch_alignment() -> int:
    """Bytes a row of a 2D texture over linear memory must be a multiple of, on this GPU."""
    cupy = require_cupy("Texture objects")
    return int(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["texturePitchAlignment"])


class TextureReader:
    """A texture object over a float32 CuPy 2D array (point sampling, clamped), for the texture sweeps."""

    def __init__(self, array) -> None:
        cupy = require_cupy("Texture objects")
        from cupy.cuda import runtime, texture

        check_device_array(array, "array", dtype=np.float32, ndim=2)
        array = cupy.asarray(array)  # a view, not a copy, of a Numba device array
        if not array.flags.c_contiguous:
            raise LaunchConfigError("a texture needs a C-contiguous array")
        ny, nx = array.shape
        pitch = nx * array.itemsize
        alignment = texture_pitch_alignment()
        if pitch % alignment:
            raise LaunchConfigError(f"a texture row must be a multiple of {alignment} bytes on this GPU; {nx} float32 values "
                                    f"are {pitch} bytes. Use nx a multiple of {alignment // array.itemsize}.")
        channel = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat)
        resource = texture.ResourceDescriptor(runtime.cudaResourceTypePitch2D, arr=array, chDesc=channel,
                                              width=nx, height=ny, pitchInBytes=pitch)
        description = texture.TextureDescriptor((runtime.cudaAddressModeClamp, runtime.cudaAddressModeClamp),
                                                runtime.cudaFilterModePoint, runtime.cudaReadModeElementType)
        self.array = array
        self.texture = texture.TextureObject(resource, description)


def _texture_target(reader: TextureReader, a_new):
    cupy = require_cupy("The texture Jacobi kernels")
    check_device_array(a_new, "a_new", dtype=np.float32, ndim=2, shape=tuple(reader.array.shape))
    if min(reader.array.shape) < 3:
        raise LaunchConfigError(f"the mesh needs at least 3 x 3 points; got {tuple(reader.array.shape)}")
    return a_new if isinstance(a_new, cupy.ndarray) else cupy.asarray(a_new)


@planned
def jacobi_texture_book(reader: TextureReader, a_new, block: tuple[int, int] = BOOK_BLOCK):
    """One Jacobi sweep reading a through a texture object, a thread per point (float32, GPU only)."""
    module = cuda_c_module()
    target = _texture_target(reader, a_new)
    ny, nx = reader.array.shape
    args = (reader.texture, target, np.int32(nx), np.int32(ny), *weights(np.float32))
    return CuPyLaunch(module.get_function("jacobi_texture_book"), launch_2d((ny, nx), block)[0], block, args)


@planned
def jacobi_texture(reader: TextureReader, a_new, block: tuple[int, int] | None = None, rows: int | None = None):
    """One Jacobi sweep reading a through a texture object, `rows` points per thread, x-neighbours by warp shuffles (GPU only)."""
    block, rows = tuned_options("texture", block, rows)
    target = _texture_target(reader, a_new)
    rows = check_rows(rows)
    if tuple(block)[0] != 32:
        raise LaunchConfigError(f"the tuned texture sweep takes its x-neighbours from the lanes of a warp: use blocks of 32 "
                                f"threads along x; got {tuple(block)}")
    ny, nx = reader.array.shape
    check_32bit((ny, nx))
    blocks, threads = rows_grid((ny, nx), block, rows)
    args = (reader.texture, target, np.int32(nx), np.int32(ny), *weights(np.float32))
    return CuPyLaunch(cuda_c_module(rows).get_function("jacobi_texture_rows"), blocks, threads, args)


def _readonly_views(a, a_new) -> tuple:
    cupy = require_cupy("The read-only Jacobi kernels")
    _check(a, a_new)
    check_device_array(a, "a", dtype=np.float32)
    return tuple(x if isinstance(x, cupy.ndarray) else cupy.asarray(x) for x in (a, a_new))


@planned
def jacobi_readonly_book(a, a_new, block: tuple[int, int] = BOOK_BLOCK):
    """One Jacobi sweep reading a through the read-only data cache (__ldg), a thread per point (float32, GPU only)."""
    views = _readonly_views(a, a_new)
    ny, nx = a.shape
    args = (*views, np.int32(nx), np.int32(ny), *weights(np.float32))
    return CuPyLaunch(cuda_c_module().get_function("jacobi_readonly_book"), launch_2d(a.shape, block)[0], block, args)


@planned
def jacobi_readonly(a, a_new, block: tuple[int, int] | None = None, rows: int | None = None, shuffles: bool | None = None):
    """One Jacobi sweep reading a through the read-only data cache (__ldg), `rows` points per thread (float32, GPU only).

    `shuffles`: x-neighbours from the lanes beside (one load a row); False: loaded too (three loads a row).
    Unset options take TUNED["readonly"] and SHUFFLES["readonly"].
    """
    block, rows = tuned_options("readonly", block, rows)
    shuffles = SHUFFLES["readonly"] if shuffles is None else shuffles
    views = _readonly_views(a, a_new)
    rows = check_rows(rows)
    check_32bit(a.shape)
    blocks, threads = rows_grid(tuple(a.shape), block, rows, bool(shuffles))
    ny, nx = a.shape
    args = (*views, np.int32(nx), np.int32(ny), *weights(np.float32))
    name = "jacobi_readonly_warp" if shuffles else "jacobi_readonly_rows"
    return CuPyLaunch(cuda_c_module(rows).get_function(name), blocks, threads, args)


# ---------------------------------------------------------------------------------------------
# The residual max |a_new - a| on the device, in two passes (a block maximum per block, then one
# block over those): the iteration can check it between graph replays without a host round trip.

#: Threads per block of the residual kernels (a power of two).
RESIDUAL_THREADS = 256


@cuda.jit(device=True)
def block_max(scratch, value, thread, threads):
    """The largest `value` over a block's `threads` threads (returned to every thread); `scratch`: a shared array of `threads` slots."""
    scratch[thread] = value
    cuda.syncthreads()
    width = threads
    while width > 1:  # a tree: each level halves the values still in play
        half = width // 2
        if thread < half:
            scratch[thread] = max(scratch[thread], scratch[thread + half])
        cuda.syncthreads()
        width = half
    result = scratch[0]
    cuda.syncthreads()  # everyone has read scratch[0] before the array is used again
    return result


@functools.cache
def residual_kernels(dtype_name: str) -> tuple[object, object]:
    """(per-block maximum of |b - a|, final maximum into history[count] and count += 1) for `dtype_name` arrays."""
    T = RESIDUAL_THREADS
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def block_maxima(a, b, partial):
        scratch = cuda.shared.array(T, DT)
        t = cuda.threadIdx.x
        n = a.size
        largest = DT(0)
        start = cuda.blockIdx.x * T + t
        step = cuda.gridDim.x * T
        flat_a = a.reshape(n)  # contiguous: walk it as one line, consecutive threads on consecutive values
        flat_b = b.reshape(n)
        for k in range(start, n, step):
            largest = max(largest, abs(flat_b[k] - flat_a[k]))
        largest = block_max(scratch, largest, t, T)
        if t == 0:
            partial[cuda.blockIdx.x] = largest

    @cuda.jit
    def record_maximum(partial, history, count):
        scratch = cuda.shared.array(T, DT)
        t = cuda.threadIdx.x
        largest = DT(0)
        for k in range(t, partial.size, T):
            largest = max(largest, partial[k])
        largest = block_max(scratch, largest, t, T)
        if t == 0:
            slot = count[0]
            if slot < history.size:
                history[slot] = largest
            count[0] = slot + 1

    return block_maxima, record_maximum


def residual_blocks(shape: tuple[int, ...]) -> int:
    """Blocks of the first residual pass: enough to fill a GPU, at most one per RESIDUAL_THREADS values."""
    size = int(np.prod(shape))
    return max(1, min(1024, -(-size // RESIDUAL_THREADS)))


@planned
def record_residual(a, a_new, partial, history, count):
    """history[count] = max |a_new - a| and count += 1, on the device (two kernels; `partial` holds residual_blocks values)."""
    dtype = _check(a, a_new)
    blocks = residual_blocks(a.shape)
    check_device_array(partial, "partial", dtype=dtype, ndim=1, shape=(blocks,))
    check_device_array(history, "history", dtype=dtype, ndim=1)
    check_device_array(count, "count", dtype=np.int32, ndim=1, shape=(1,))
    first, last = residual_kernels(dtype.name)
    return (bind(first, blocks, RESIDUAL_THREADS, a, a_new, partial),
            bind(last, 1, RESIDUAL_THREADS, partial, history, count))


def max_residual(a, a_new) -> float:
    """max |a_new - a| over the mesh (the book's stopping criterion), computed on the device; waits for the result."""
    from ..arrays import device_empty, to_device, to_host

    dtype = np.dtype(a.dtype)
    partial = device_empty(residual_blocks(a.shape), dtype)
    history = device_empty(1, dtype)
    count = to_device(np.zeros(1, np.int32))
    record_residual.plan(a, a_new, partial, history, count)()
    return float(to_host(history)[0])


def bytes_per_sweep(shape: tuple[int, int], itemsize: int) -> int:
    """Bytes a sweep must move at least: every value read once, every value written once."""
    return 2 * shape[0] * shape[1] * itemsize


#: The tuned sweeps, by method name; the book's are the same names with "_book".
METHODS = ("global", "shared", "texture", "readonly")
BOOK_METHODS = tuple(f"{m}_book" for m in METHODS)


def sweep_call(a, a_new, method: str, block: tuple[int, int] | None = None, rows: int | None = None) -> tuple:
    """(launcher, arguments) of one sweep a -> a_new by `method` (tuned: METHODS; the book's: BOOK_METHODS).

    `launcher(*arguments)` is the public call; `launcher.plan(*arguments)` its plan. The texture
    methods read `a` through a texture object made here, the read-only ones through CuPy views.
    """
    if method not in METHODS + BOOK_METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {METHODS + BOOK_METHODS}")
    book = method.endswith("_book")
    kind = method.removesuffix("_book")
    options = (block or BOOK_BLOCK,) if book else tuned_options(kind, block, rows)
    launcher = {"global": (jacobi_global_book, jacobi_global), "shared": (jacobi_shared_book, jacobi_shared),
                "texture": (jacobi_texture_book, jacobi_texture), "readonly": (jacobi_readonly_book, jacobi_readonly)}[kind][not book]
    if kind == "texture":
        cupy = require_cupy("The texture Jacobi kernels")
        return launcher, (TextureReader(a), cupy.asarray(a_new), *options)
    if kind == "readonly":
        cupy = require_cupy("The read-only Jacobi kernels")
        a, a_new = cupy.asarray(a), cupy.asarray(a_new)  # CuPy views, made once
    return launcher, (a, a_new, *options)


def sweep_plans(a, a_new, method: str, block: tuple[int, int] | None = None, rows: int | None = None) -> tuple:
    """Two plans, a -> a_new and a_new -> a, of one sweep by `method` (tuned: METHODS; the book's: BOOK_METHODS)."""
    launcher, forward = sweep_call(a, a_new, method, block, rows)
    _, backward = sweep_call(a_new, a, method, block, rows)
    return launcher.plan(*forward), launcher.plan(*backward)


def sweeper(a, a_new, method: str, block: tuple[int, int] | None = None, rows: int | None = None) -> Callable[[int], None]:
    """A function of (source index) that runs one sweep from buffer `source` (0: a, 1: a_new) into the other.

    `block` and `rows` default to each method's own (the book's 32 x 16 threads; the tuned ones' TUNED).
    """
    plans = sweep_plans(a, a_new, method, block, rows)
    return lambda source: plans[source]()


def jacobi_iterations(initial, iterations: int, method: str = "global", every: int = 10,
                      block: tuple[int, int] | None = None, graph: bool = True) -> tuple[object, list[tuple[int, float]]]:
    """Run `iterations` sweeps from `initial`; return the final mesh and (iteration, max residual) every `every`.

    A host array gives the final mesh on the host; a device array gives it on the device (the
    caller's array is never changed).

    Two device buffers take turns as source and target (the book copies a_new back into a after
    each sweep; swapping the roles gives the same numbers without the copy). The residuals are
    computed and stored on the device; with `graph`, a run of sweeps and its residual check are
    captured once as a CUDA graph and replayed, and the host reads the residuals once, at the end.
    """
    from ..arrays import device_copy, device_empty, on_host, to_device, to_host

    if iterations < 0 or every < 1:
        raise ValueError(f"iterations must be >= 0 and every >= 1; got {iterations} and {every}")
    a = to_device(initial) if on_host(initial) else device_copy(initial)
    a_new = device_copy(a)  # both hold the boundary from the start
    sweep = sweeper(a, a_new, method, block)
    dtype = np.dtype(initial.dtype)
    checks = iterations // every
    partial = device_empty(residual_blocks(initial.shape), dtype)
    history = device_empty(max(1, checks), dtype)
    count = to_device(np.zeros(1, np.int32))
    residual = record_residual.plan(a, a_new, partial, history, count)  # |a_new - a| does not care which was written last

    def segment(first_source: int) -> None:  # `every` sweeps, then the residual of the last one
        for k in range(every):
            sweep((first_source + k) % 2)
        residual()

    per_graph = every if every % 2 == 0 else 2 * every  # an even number of sweeps: the buffers end where they started
    done = 0
    if graph and checks >= 2 and per_graph <= iterations:
        recorded = capture(lambda: [segment(k * every % 2) for k in range(per_graph // every)], f"{per_graph} Jacobi sweeps")
        recorded.replay(iterations // per_graph)
        done = iterations // per_graph * per_graph
    for n in range(done + 1, iterations + 1):
        sweep((n - 1) % 2)
        if n % every == 0:
            residual()
    residuals = to_host(history)[:checks]
    final = (a, a_new)[iterations % 2]
    return to_host(final) if on_host(initial) else final, [((k + 1) * every, float(r)) for k, r in enumerate(residuals)]


def iteration_times(initial: np.ndarray, iterations: int, method: str = "global", every: int = 10,
                    block: tuple[int, int] | None = None, repeat: int = 3):
    """Time `jacobi_iterations` end to end with and without a graph, and the GPU time of the same sweeps and checks (gated), in ms."""
    from ..arrays import device_empty, to_device
    from ..timing import benchmark, wall_time_ms
    from .heat import RunTimes

    a, a_new = to_device(initial), to_device(initial)
    sweep = sweeper(a, a_new, method, block)
    dtype = np.dtype(initial.dtype)
    history = device_empty(1, dtype)
    count = to_device(np.zeros(1, np.int32))
    residual = record_residual.plan(a, a_new, device_empty(residual_blocks(initial.shape), dtype), history, count)
    sweeps = benchmark(lambda: (sweep(0), sweep(1)), repeat=repeat, warmup=1).median_ms / 2
    check = benchmark(residual, repeat=repeat, warmup=1).median_ms
    gpu_ms = sweeps * iterations + check * (iterations // every)
    start = to_device(initial)
    device = wall_time_ms(lambda: jacobi_iterations(start, iterations, method, every, block, graph=True), repeat=repeat, warmup=0)
    graphed = wall_time_ms(lambda: jacobi_iterations(initial, iterations, method, every, block, graph=True), repeat=repeat, warmup=0)
    device_plain = wall_time_ms(lambda: jacobi_iterations(start, iterations, method, every, block, graph=False), repeat=repeat, warmup=0)
    plain = wall_time_ms(lambda: jacobi_iterations(initial, iterations, method, every, block, graph=False), repeat=repeat, warmup=0)
    return RunTimes(iterations, gpu_ms, device, graphed, plain, mode.is_simulator(), device_plain)
