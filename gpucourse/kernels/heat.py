"""Seed 003 kernels: explicit steps of the 2D heat equation, one per launch or several per launch.

``u[y, x]`` with x contiguous. One step: u' = u + d (north + west + east + south - 4 u) inside the
mesh; boundary points keep their values (the article copies them unchanged). The article's kernels
and the tuned ones:

* ``heat_step_global_article``: one step, a thread per point, its four neighbours read from global
  memory (6 global accesses for 7 flops, in the article's count);
* ``heat_steps_shared`` (the article's): ``steps=1`` is its shared-memory step, a tile of p x p
  points of which the p - 2 inner ones are written; ``steps=s`` takes s steps in shared memory per
  launch (temporal blocking): the valid part of the tile shrinks by one point a side at each step,
  so a block of p x p threads writes (p - 2s)^2 points, with two barriers per step;
* ``heat_step_global`` (tuned): one step, a column of `rows` points per thread with its window in
  registers, 32-bit positions, the mesh's edges on a path of their own;
* ``heat_steps`` (tuned temporal blocking): s steps per launch with no shared memory and no barrier.
  A warp holds a strip of 32 * `columns` columns; each lane holds `columns` neighbouring columns
  and walks down them, one row at a time, and each row moves through s levels (time steps) as it
  arrives: level k + 1 of row r is computed as soon as level k of row r + 1 is there. y-neighbours
  are in the lane's registers, x-neighbours in its own registers or (at the ends of its columns)
  one warp shuffle away. A warp reads `height` + 2s rows and writes `height` rows of its strip's
  32 * `columns` - 2s inner columns.

All of them call the same ``heat_update`` device function with the same arguments, so their results
agree bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numba import cuda

from .. import mode
from ..errors import LaunchConfigError
from ..graphs import alternate
from ..launch import bind, planned
from ..simulation import device_function
from ..validate import (
    blocks_to_cover,
    check_blocks,
    check_device_array,
    check_float_dtype,
    check_same_shape,
    check_shared_memory,
    check_threads_per_block,
)
from .indexing import FULL_MASK, ONE, WARP_COLUMNS, check_32bit, check_rows, column_blocks, flat, u32
from .stencil import nonneg

#: Largest d = k dt / h^2 for which the explicit 2D step is stable.
STABILITY_LIMIT = 0.25
#: The tuned one-step kernel's block (x, y), rows per thread, and whether it takes x-neighbours from warp shuffles:
#: the fastest variant measured at 8192^2 float32 on an H200 (tools/gpu_stencil2d.py, measurements/stencil2d.md: shuffles
#: on 256 x 1 blocks 0.88 of the copy, loads on 64 x 2 blocks 0.83, shuffles on 32 x 4 blocks 0.64). Read at each new plan.
TUNED_STEP = ((256, 1), 8, True)
#: The tuned multi-step kernel: steps per launch, and (columns per lane, rows each warp writes, warps per block)
#: on a GPU and in the simulator (where every idle lane of a warp is a Python thread).
BLOCKED_STEPS = 8
BLOCKED_TILE = {"gpu": (4, 56, 4), "simulator": (1, 4, 1)}
#: Rows the multi-step kernel loads before it uses any (loads in flight per lane: CHUNK * columns).
CHUNK = 8


@device_function
def heat_update(centre, north, west, east, south, d, four):
    """The article's update, in this order in every kernel: centre + d (((north + west) + east) + south - 4 centre)."""
    return centre + d * ((((north + west) + east) + south) - four * centre)


# ---------------------------------------------------------------------------------------------
# The article's kernels


@cuda.jit
def heat_step_global_article_kernel(u, u_new, d, four):
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if i < nx and j < ny:
        x = u[nonneg(j), nonneg(i)]  # nonneg: see gpucourse.kernels.stencil (no negative-index test)
        if 0 < i < nx - 1 and 0 < j < ny - 1:
            x = heat_update(x, u[nonneg(j - 1), nonneg(i)], u[nonneg(j), nonneg(i - 1)],
                            u[nonneg(j), nonneg(i + 1)], u[nonneg(j + 1), nonneg(i)], d, four)
        u_new[nonneg(j), nonneg(i)] = x


@functools.cache
def heat_steps_shared_kernel(tile: int, steps: int, dtype_name: str) -> object:
    """The article's kernel for `steps` time steps per launch on blocks of tile x tile threads (one point each)."""
    P, S = tile, steps
    OUT = P - 2 * S                 # points a block writes in each direction
    DT = numba.from_dtype(np.dtype(dtype_name))
    ZERO = np.dtype(dtype_name).type(0)

    @cuda.jit
    def heat_steps_shared(u, u_new, d, four):
        t = cuda.shared.array((P, P), DT)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        ny, nx = u.shape
        i = cuda.blockIdx.x * OUT - S + tx      # tiles overlap by 2S: each block recomputes its halo
        j = cuda.blockIdx.y * OUT - S + ty
        inside = 0 <= i < nx and 0 <= j < ny
        x = u[nonneg(j), nonneg(i)] if inside else ZERO  # outside the mesh: never used by a point that moves
        # a point moves if it is inside the mesh, not on its boundary, and has all 4 neighbours in the tile
        moves = 0 < i < nx - 1 and 0 < j < ny - 1 and 0 < tx < P - 1 and 0 < ty < P - 1
        t[nonneg(ty), nonneg(tx)] = x
        for _ in range(S):
            cuda.syncthreads()                   # the tile holds the previous step
            if moves:
                x = heat_update(x, t[nonneg(ty - 1), nonneg(tx)], t[nonneg(ty), nonneg(tx - 1)],
                                t[nonneg(ty), nonneg(tx + 1)], t[nonneg(ty + 1), nonneg(tx)], d, four)
            cuda.syncthreads()                   # every thread has read the previous step
            t[nonneg(ty), nonneg(tx)] = x
        if inside and S <= tx < P - S and S <= ty < P - S:
            u_new[nonneg(j), nonneg(i)] = x      # only the points whose whole history lay inside the tile

    return heat_steps_shared


# ---------------------------------------------------------------------------------------------
# The tuned kernels




@device_function
def step_near_boundary(u, u_new, i, j0, nx, ny, rows, d, four):
    """The tuned one-step kernels' slow path: column i, rows j0 ... j0 + rows - 1 of flat meshes, each point tested, the boundary copied."""
    row = nonneg(nx)
    o = nonneg(u32(j0 * nx + i))
    for k in range(rows):
        j = j0 + k
        if j < ny:
            x = u[o]
            if 0 < i and i + 1 < nx and 0 < j and j + 1 < ny:
                x = heat_update(x, u[o - row], u[o - ONE], u[o + ONE], u[o + row], d, four)
            u_new[o] = x
        o += row


@functools.cache
def heat_step_rows_kernel(rows: int, dtype_name: str, shuffles: bool = True) -> object:
    """One step, `rows` points per thread down a column (rows j0 ... j0 + rows - 1), the window in registers.

    With `shuffles`, each thread loads one column only and takes its x-neighbours from the lanes
    beside it: a warp's 32 lanes hold 32 neighbouring columns and write the 30 inner ones (one
    load a row, no branch that depends on the lane). Without, each thread loads its neighbours'
    columns too (three loads a row).
    """
    if not shuffles:
        return _heat_step_loads_kernel(rows, dtype_name)
    R = rows
    W = R + 2
    DT = numba.from_dtype(np.dtype(dtype_name))
    WC = WARP_COLUMNS

    @cuda.jit
    def heat_step_rows(u, u_new, nx, ny, d, four):  # u, u_new: flat views of (ny, nx) meshes
        lane = cuda.laneid
        warp = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
        first = np.int64(warp) * WC - 1  # the column of lane 0: the halo left of the warp's 30 columns
        i = first + lane
        j0 = u32((cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y) * R)
        if j0 >= ny:                    # the same j0 for the whole warp
            return
        row = nonneg(nx)
        if first >= 0 and first + 32 <= nx and j0 >= 1 and j0 + R < ny:  # every point moves, every neighbour inside
            centre = cuda.local.array(W, DT)  # registers: rows j0 - 1 ... j0 + R
            o = nonneg(u32(j0 * nx + i))
            p = o - row
            for k in range(W):          # every load first: one a row
                centre[k] = u[p]
                p += row
            new = cuda.local.array(R, DT)
            for k in range(R):
                west = cuda.shfl_up_sync(FULL_MASK, centre[k + 1], 1)
                east = cuda.shfl_down_sync(FULL_MASK, centre[k + 1], 1)
                new[k] = heat_update(centre[k + 1], centre[k], west, east, centre[k + 2], d, four)
            if 0 < lane and lane < 31:  # after every shuffle: the lanes may part here
                for k in range(R):
                    u_new[o] = new[k]
                    o += row
        elif 0 < lane and lane < 31 and 0 <= i and i < nx:  # a column or rows of the boundary nearby: each point tested
            step_near_boundary(u, u_new, i, j0, nx, ny, R, d, four)

    return heat_step_rows


@functools.cache
def _heat_step_loads_kernel(rows: int, dtype_name: str) -> object:
    """One step, `rows` points per thread down a column, its x-neighbours loaded too (three loads a row)."""
    R = rows
    W = R + 2
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def heat_step_rows(u, u_new, nx, ny, d, four):  # u, u_new: flat views of (ny, nx) meshes
        i = u32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
        j0 = u32((cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y) * R)
        if i >= nx or j0 >= ny:
            return
        row = nonneg(nx)
        o = nonneg(u32(j0 * nx + i))
        if 0 < i and i + 1 < nx and 0 < j0 and j0 + R < ny:  # every point moves and has its 4 neighbours
            centre = cuda.local.array(W, DT)  # registers: rows j0 - 1 ... j0 + R
            west = cuda.local.array(R, DT)
            east = cuda.local.array(R, DT)
            p = o - row
            for k in range(W):          # every load first
                centre[k] = u[p]
                p += row
            p = o
            for k in range(R):
                west[k] = u[p - ONE]
                east[k] = u[p + ONE]
                p += row
            for k in range(R):
                u_new[o] = heat_update(centre[k + 1], centre[k], west[k], east[k], centre[k + 2], d, four)
                o += row
        else:                           # a column or rows of the boundary: each point tested, the boundary copied
            step_near_boundary(u, u_new, i, j0, nx, ny, R, d, four)

    return heat_step_rows


@device_function
def advance_levels(prev, cur, arriving, fresh, moving, y, ny, check, levels, columns, d, four):
    """Feed level 0 of row y (in `arriving`) through `levels` time steps; `arriving` ends as level `levels` of row y - levels.

    Level k keeps its last two rows: prev[k * columns + c] (row y - k - 2) and cur[...] (row y - k - 1).
    With the arriving row y - k they give level k + 1 of row y - k - 1, which then arrives at level k + 1.
    `check` (a constant of the caller) keeps the mesh's boundary fixed: the columns `moving` marks, the first
    and last rows. Without it every point moves.
    """
    for k in range(levels):
        b = k * columns
        from_west = cuda.shfl_up_sync(FULL_MASK, cur[b + columns - 1], 1)  # the last column of the lane before
        from_east = cuda.shfl_down_sync(FULL_MASK, cur[b], 1)              # the first column of the lane after
        r = y - k - 1
        row_moves = 0 < r and r + 1 < ny
        for c in range(columns):
            centre = cur[b + c]
            west = cur[b + c - 1] if c > 0 else from_west
            east = cur[b + c + 1] if c < columns - 1 else from_east
            new = heat_update(centre, prev[b + c], west, east, arriving[c], d, four)
            if check:
                fresh[c] = new if moving[c] and row_moves else centre
            else:
                fresh[c] = new
        for c in range(columns):
            prev[b + c] = cur[b + c]
            cur[b + c] = arriving[c]
            arriving[c] = fresh[c]


@functools.cache
def heat_steps_registers_kernel(steps: int, columns: int, height: int, dtype_name: str) -> object:
    """`steps` time steps per launch, each lane holding `columns` columns of a strip; a warp writes `height` rows."""
    S, C, L = steps, columns, height
    U = max(2, CHUNK * 4 // max(S, 4))   # rows loaded at once: fewer when more levels hold registers
    T = L + 2 * S                    # rows a warp reads
    TU = -(-T // U) * U              # ... rounded up to whole chunks: the fast path loads (and ignores) the rest
    W = 32 * C                       # columns a warp holds
    V = W - 2 * S                    # columns a warp writes
    SC, UC = S * C, U * C            # local array sizes must be constants of the kernel
    DT = numba.from_dtype(np.dtype(dtype_name))
    ZERO = np.dtype(dtype_name).type(0)

    @cuda.jit
    def heat_steps_registers(u, u_new, nx, ny, d, four):  # u, u_new: flat views of (ny, nx) meshes
        prev = cuda.local.array(SC, DT)      # the last two rows of each level (see advance_levels)
        cur = cuda.local.array(SC, DT)
        arriving = cuda.local.array(C, DT)   # the row arriving at the level being computed
        fresh = cuda.local.array(C, DT)
        chunk = cuda.local.array(UC, DT)     # rows loaded before any of them is used
        moving = cuda.local.array(C, numba.boolean)
        writing = cuda.local.array(C, numba.boolean)
        lane = cuda.threadIdx.x
        strip = np.int64(cuda.blockIdx.x) * V - S                # the warp's first column (< 0: left of the mesh)
        x0 = strip + C * lane                                    # this lane's first column
        y0 = np.int64(cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y) * L - S  # the first row the warp reads
        for c in range(C):
            moving[c] = 0 < x0 + c and x0 + c + 1 < nx           # the boundary columns keep their values
            writing[c] = S <= C * lane + c < W - S and x0 + c < nx  # the strip's inner columns, inside the mesh
        for k in range(SC):
            prev[k] = ZERO
            cur[k] = ZERO
        if strip >= 1 and strip + W + 1 <= nx and y0 >= 1 and y0 + TU + 1 <= ny:  # no boundary point in reach: no test
            row = nonneg(nx)
            load = nonneg(u32(y0 * nx + x0))                     # (y0, x0): the next row to load
            store = load + nonneg(S) * row                       # (y0 + S, x0): the first row the warp writes
            for t0 in range(0, TU, U):   # whole chunks: rows past T are loaded and pushed through, never written
                for q in range(U):                               # a chunk of rows, every load first
                    for c in range(C):
                        chunk[q * C + c] = u[load + nonneg(c)]
                    load += row
                for q in range(U):
                    for c in range(C):
                        arriving[c] = chunk[q * C + c]
                    advance_levels(prev, cur, arriving, fresh, moving, y0 + t0 + q, ny, False, S, C, d, four)
                    t = t0 + q
                    if 2 * S <= t and t < T:                     # level S of row y0 + t - S: a row the warp writes
                        for c in range(C):
                            if writing[c]:
                                u_new[store + nonneg(c)] = arriving[c]
                        store += row
        else:                                                    # near an edge: every load and row tested
            for t in range(T):
                y = y0 + t
                for c in range(C):
                    x = x0 + c
                    arriving[c] = u[nonneg(y * nx + x)] if 0 <= y and y < ny and 0 <= x and x < nx else ZERO
                advance_levels(prev, cur, arriving, fresh, moving, y, ny, True, S, C, d, four)
                r = y - S
                if t >= 2 * S and r < ny:
                    for c in range(C):
                        if writing[c]:
                            u_new[nonneg(r * nx + x0 + c)] = arriving[c]

    return heat_steps_registers


def _check(u, u_new, d: float) -> np.dtype:
    check_device_array(u, "u", ndim=2)
    dtype = check_float_dtype(u.dtype, "u.dtype")
    check_device_array(u_new, "u_new", dtype=dtype, ndim=2)
    check_same_shape(u, u_new, ("u", "u_new"))
    if not 0.0 < d <= STABILITY_LIMIT:
        raise ValueError(f"d = k dt / h^2 must be in (0, {STABILITY_LIMIT}] for a stable explicit step; got {d}")
    return dtype


def _scalars(dtype: np.dtype, d: float) -> tuple:
    return dtype.type(d), dtype.type(4)


@planned
def heat_step_global_article(u, u_new, d: float, block: tuple[int, int] = (32, 8)):
    """One time step u -> u_new, the article's way: a thread per point, neighbours from global memory; the boundary is copied."""
    dtype = _check(u, u_new, d)
    bx, by = check_threads_per_block(block)
    ny, nx = u.shape
    grid = check_blocks((blocks_to_cover(nx, bx), blocks_to_cover(ny, by)))
    return bind(heat_step_global_article_kernel, grid, (bx, by), u, u_new, *_scalars(dtype, d))


def check_tile_and_steps(tile: int, steps: int) -> None:
    """A block of tile x tile threads can take s steps only while it still writes points: s < tile / 2."""
    if steps < 1:
        raise LaunchConfigError(f"steps per launch must be at least 1; got {steps}")
    if tile - 2 * steps < 1:
        raise LaunchConfigError(f"a {tile} x {tile} tile keeps tile - 2 s = {tile - 2 * steps} points after {steps} steps: "
                                f"use at most {(tile - 1) // 2} steps per launch, or a larger tile")


@planned
def heat_steps_shared(u, u_new, d: float, tile: int = 32, steps: int = 1):
    """`steps` time steps u -> u_new in one launch, the article's shared-memory tile (steps=1: its shared-memory step)."""
    dtype = _check(u, u_new, d)
    check_tile_and_steps(tile, steps)
    check_threads_per_block((tile, tile))
    check_shared_memory(tile * tile * dtype.itemsize)
    ny, nx = u.shape
    out = tile - 2 * steps
    grid = check_blocks((blocks_to_cover(nx, out), blocks_to_cover(ny, out)))
    return bind(heat_steps_shared_kernel(tile, steps, dtype.name), grid, (tile, tile), u, u_new, *_scalars(dtype, d))


@planned
def heat_step_global(u, u_new, d: float, block: tuple[int, int] | None = None, rows: int | None = None, shuffles: bool | None = None):
    """One time step u -> u_new from global memory, `rows` points per thread down a column; the boundary is copied.

    `shuffles`: x-neighbours from the lanes beside (one load a row); False: loaded too (three loads a row).
    Unset options take TUNED_STEP's.
    """
    block = tuple(TUNED_STEP[0] if block is None else block)
    rows = TUNED_STEP[1] if rows is None else rows
    shuffles = TUNED_STEP[2] if shuffles is None else shuffles
    dtype = _check(u, u_new, d)
    check_32bit(u.shape)
    rows = check_rows(rows)
    bx, by = check_threads_per_block(block)
    ny, nx = u.shape
    grid = check_blocks((column_blocks(nx, bx, bool(shuffles)), blocks_to_cover(ny, by * rows)))
    return bind(heat_step_rows_kernel(rows, dtype.name, bool(shuffles)), grid, (bx, by), flat(u), flat(u_new), np.uint32(nx),
                np.uint32(ny), *_scalars(dtype, d))


def check_blocked(steps: int, columns: int, height: int, warps: int) -> None:
    """The multi-step kernel's tile: a warp's strip must keep columns after 2 s are lost, and its rows must be positive."""
    if steps < 1:
        raise LaunchConfigError(f"steps per launch must be at least 1; got {steps}")
    if columns not in (1, 2, 4):
        raise LaunchConfigError(f"columns per lane must be 1, 2 or 4; got {columns}")
    if 32 * columns - 2 * steps < 1:
        raise LaunchConfigError(f"a warp holds {32 * columns} columns and loses {steps} at each side in {steps} steps: use at most "
                                f"{(32 * columns - 1) // 2} steps per launch, or more columns per lane")
    if height < 1 or warps < 1:
        raise LaunchConfigError(f"height (rows a warp writes) and warps per block must be positive; got {height} and {warps}")


def blocked_tile() -> tuple[int, int, int]:
    """The multi-step kernel's default (columns per lane, rows a warp writes, warps per block) in this mode."""
    return BLOCKED_TILE["simulator" if mode.is_simulator() else "gpu"]


@planned
def heat_steps(u, u_new, d: float, steps: int | None = None, columns: int | None = None, height: int | None = None,
               warps: int | None = None):
    """`steps` time steps u -> u_new in one launch, in registers and warp shuffles (no shared memory, no barrier).

    `steps` defaults to BLOCKED_STEPS; `columns` per lane, `height` rows per warp and `warps` per block to `blocked_tile()`.
    """
    steps = BLOCKED_STEPS if steps is None else steps
    default = blocked_tile()
    columns, height, warps = (default[k] if v is None else v for k, v in enumerate((columns, height, warps)))
    dtype = _check(u, u_new, d)
    check_32bit(u.shape)
    check_blocked(steps, columns, height, warps)
    check_threads_per_block((32, warps))
    ny, nx = u.shape
    grid = check_blocks((blocks_to_cover(nx, 32 * columns - 2 * steps), blocks_to_cover(ny, height * warps)))
    return bind(heat_steps_registers_kernel(steps, columns, height, dtype.name), grid, (32, warps), flat(u), flat(u_new),
                np.uint32(nx), np.uint32(ny), *_scalars(dtype, d))


#: Ways to advance the heat equation, the tuned ones and the article's: method -> (planned launcher, whether
#: it takes the steps a launch, whether it takes the tile).
_STEPPERS = {"global": (heat_step_global, False, False), "blocked": (heat_steps, True, False),
             "global_article": (heat_step_global_article, False, False), "shared": (heat_steps_shared, True, True)}
METHODS = tuple(_STEPPERS)


def _stepper_of(method: str) -> tuple:
    if method not in _STEPPERS:
        raise ValueError(f"unknown method {method!r}: use one of {METHODS}")
    return _STEPPERS[method]


def stepper(u, u_new, d: float, method: str = "global", tile: int = 32, steps_per_launch: int = 1) -> Callable[[int], int]:
    """A function of (source index) that advances buffer `source` (0: u, 1: u_new) into the other; returns steps taken.

    Methods: 'global' (the tuned one-step kernel), 'blocked' (the tuned multi-step kernel, `steps_per_launch`
    steps a launch), 'global_article' and 'shared' (the article's kernels; 'shared' on `tile` x `tile` blocks).
    """
    launcher, multistep, tiled = _stepper_of(method)
    options = ((tile,) if tiled else ()) + ((steps_per_launch,) if multistep else ())
    plans = (launcher.plan(u, u_new, d, *options), launcher.plan(u_new, u, d, *options))
    steps = steps_per_launch_of(method, steps_per_launch)

    def advance(source: int) -> int:
        plans[source]()
        return steps

    return advance


def steps_per_launch_of(method: str, steps_per_launch: int) -> int:
    """Steps one launch of `method` takes."""
    return steps_per_launch if _stepper_of(method)[1] else 1


def heat_run(initial, total_steps: int, d: float, method: str = "global", tile: int = 32,
             steps_per_launch: int = 1, graph: bool = True):
    """Advance `initial` by `total_steps` steps: a host array gives a host array back, a device array a device array.

    With `graph` (the default) the launches go through a CUDA graph of many steps, replayed: the
    host issues one call per graph instead of one per step (see `gpucourse.graphs.alternate`).
    The caller's array is never changed.
    """
    from ..arrays import device_copy, on_host, to_device, to_host

    per_launch = steps_per_launch_of(method, steps_per_launch)
    if total_steps % per_launch:
        raise ValueError(f"total_steps ({total_steps}) must be a multiple of the steps per launch ({per_launch})")
    u = to_device(initial) if on_host(initial) else device_copy(initial)
    u_new = device_copy(u)  # both buffers hold the boundary, which no step writes
    advance = stepper(u, u_new, d, method, tile, steps_per_launch)
    result = (u, u_new)[alternate(advance, total_steps // per_launch, use_graph=graph)]
    return to_host(result) if on_host(initial) else result


def blocked_redundancy(steps: int, columns: int, height: int) -> float:
    """Updates the register kernel computes per update it keeps: a warp computes every level of its 32 columns-per-lane
    wide strip for all of its height + 2 s rows, and keeps 32 columns - 2 s by height of them."""
    width = 32 * columns
    return width / (width - 2 * steps) * (height + 2 * steps) / height


def blocked_accesses_per_point_step(steps, columns: int, height: int):
    """Global reads and writes per useful point-update of the register kernel (the article's count for this tile):
    each written point costs `blocked_redundancy` reads and one write, shared by `steps` steps."""
    steps = np.asarray(steps, dtype=np.float64)
    return (blocked_redundancy(steps, columns, height) + 1) / steps


def blocked_traffic(shape: tuple[int, int], steps: int, columns: int, height: int, itemsize: int = 4) -> tuple[float, float]:
    """(bytes read, bytes written) by one launch of the register kernel over `shape`, counting its halos' reads."""
    points = shape[0] * shape[1]
    return points * blocked_redundancy(steps, columns, height) * itemsize, float(points * itemsize)


def bytes_per_step(shape: tuple[int, int], itemsize: int) -> int:
    """Bytes one time step must move at least: every value read once and written once."""
    return 2 * shape[0] * shape[1] * itemsize


@dataclass(frozen=True)
class RunTimes:
    """A time-stepping run timed four ways, in ms: the GPU's own time, and wall times as a program sees them.

    `device_wall_ms`: data already on the device, through a graph; `device_plain_wall_ms`: the same
    with one launch call per step (None where not timed). `graph_wall_ms` and `plain_wall_ms`: from
    a host array and back (two copies included), with a graph and with one launch call per step.
    """

    steps: int
    gpu_ms: float
    device_wall_ms: float
    graph_wall_ms: float
    plain_wall_ms: float
    simulated: bool
    device_plain_wall_ms: float | None = None

    @property
    def gpu_us_per_step(self) -> float:
        """GPU time per step (gated launches: no host cost), in us."""
        return 1e3 * self.gpu_ms / self.steps

    @property
    def device_ratio(self) -> float:
        """Wall time of the run on device data, through a graph, over its GPU time."""
        return self.device_wall_ms / self.gpu_ms

    @property
    def device_plain_ratio(self) -> float | None:
        """Wall time of the run on device data, one launch call per step, over its GPU time (None where not timed)."""
        return None if self.device_plain_wall_ms is None else self.device_plain_wall_ms / self.gpu_ms

    @property
    def graph_ratio(self) -> float:
        """Wall time of the run from and to host arrays, through a graph, over its GPU time."""
        return self.graph_wall_ms / self.gpu_ms

    @property
    def plain_ratio(self) -> float:
        """Wall time of the run from and to host arrays, one launch call per step, over its GPU time."""
        return self.plain_wall_ms / self.gpu_ms


def run_times(initial: np.ndarray, total_steps: int, d: float, method: str = "global", tile: int = 32,
              steps_per_launch: int = 1, repeat: int = 3) -> RunTimes:
    """Time `heat_run` end to end with and without a graph, and the GPU time of the same steps (gated), in ms."""
    from ..arrays import to_device
    from ..timing import benchmark, wall_time_ms

    per_launch = steps_per_launch_of(method, steps_per_launch)
    u, u_new = to_device(initial), to_device(initial)
    advance = stepper(u, u_new, d, method, tile, steps_per_launch)
    pair = benchmark(lambda: (advance(0), advance(1)), repeat=repeat, warmup=1)  # two launches: the buffers end where they began
    gpu_ms = pair.median_ms * total_steps / (2 * per_launch)
    start = to_device(initial)
    device = wall_time_ms(lambda: heat_run(start, total_steps, d, method, tile, steps_per_launch, graph=True), repeat=repeat, warmup=0)
    graphed = wall_time_ms(lambda: heat_run(initial, total_steps, d, method, tile, steps_per_launch, graph=True), repeat=repeat, warmup=0)
    device_plain = wall_time_ms(lambda: heat_run(start, total_steps, d, method, tile, steps_per_launch, graph=False), repeat=repeat, warmup=0)
    plain = wall_time_ms(lambda: heat_run(initial, total_steps, d, method, tile, steps_per_launch, graph=False), repeat=repeat, warmup=0)
    return RunTimes(total_steps, gpu_ms, device, graphed, plain, pair.simulated, device_plain)
