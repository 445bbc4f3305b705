"""Seed 003 kernels: explicit steps of the 2D heat equation, one per launch or several per launch.

``u[y, x]`` with x contiguous. One step: u' = u + d (north + west + east + south - 4 u) inside the
mesh; boundary points keep their values (the article copies them unchanged). Three kernels:

* ``heat_step_global``: one step, each thread reads its four neighbours from global memory
  (6 global accesses for 7 flops, in the article's count);
* ``heat_steps_shared`` with ``steps=1``: one step through a shared-memory tile of p x p points
  whose p - 2 inner points are written (2 global accesses per point);
* ``heat_steps_shared`` with ``steps=s``: s steps in shared memory per launch (temporal blocking):
  after each step the valid part of the tile shrinks by one point on each side, so a block of
  p x p threads writes (p - 2s)^2 points, s steps ahead.

All three call the same ``heat_update`` device function, so their results agree bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numba import cuda

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
from .stencil import nonneg

#: Largest d = k dt / h^2 for which the explicit 2D step is stable.
STABILITY_LIMIT = 0.25


@device_function
def heat_update(centre, north, west, east, south, d, four):
    """The article's update, in this order in every kernel: centre + d (((north + west) + east) + south - 4 centre)."""
    return centre + d * ((((north + west) + east) + south) - four * centre)


@cuda.jit
def heat_step_global_kernel(u, u_new, d, four):
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
    """Kernel for `steps` time steps per launch on blocks of tile x tile threads (one point each)."""
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
def heat_step_global(u, u_new, d: float, block: tuple[int, int] = (32, 8)):
    """One time step u -> u_new, neighbours read from global memory; the boundary is copied."""
    dtype = _check(u, u_new, d)
    bx, by = check_threads_per_block(block)
    ny, nx = u.shape
    grid = check_blocks((blocks_to_cover(nx, bx), blocks_to_cover(ny, by)))
    return bind(heat_step_global_kernel, grid, (bx, by), u, u_new, *_scalars(dtype, d))


def check_tile_and_steps(tile: int, steps: int) -> None:
    """A block of tile x tile threads can take s steps only while it still writes points: s < tile / 2."""
    if steps < 1:
        raise LaunchConfigError(f"steps per launch must be at least 1; got {steps}")
    if tile - 2 * steps < 1:
        raise LaunchConfigError(f"a {tile} x {tile} tile keeps tile - 2 s = {tile - 2 * steps} points after {steps} steps: "
                                f"use at most {(tile - 1) // 2} steps per launch, or a larger tile")


@planned
def heat_steps_shared(u, u_new, d: float, tile: int = 32, steps: int = 1):
    """`steps` time steps u -> u_new in one launch, in shared memory (steps=1: the article's shared-memory step)."""
    dtype = _check(u, u_new, d)
    check_tile_and_steps(tile, steps)
    check_threads_per_block((tile, tile))
    check_shared_memory(tile * tile * dtype.itemsize)
    ny, nx = u.shape
    out = tile - 2 * steps
    grid = check_blocks((blocks_to_cover(nx, out), blocks_to_cover(ny, out)))
    return bind(heat_steps_shared_kernel(tile, steps, dtype.name), grid, (tile, tile), u, u_new, *_scalars(dtype, d))


def stepper(u, u_new, d: float, method: str = "global", tile: int = 32, steps_per_launch: int = 1) -> Callable[[int], int]:
    """A function of (source index) that advances buffer `source` (0: u, 1: u_new) into the other; returns steps taken."""
    if method == "global":
        plans, steps = (heat_step_global.plan(u, u_new, d), heat_step_global.plan(u_new, u, d)), 1
    elif method == "shared":
        plans = (heat_steps_shared.plan(u, u_new, d, tile, steps_per_launch), heat_steps_shared.plan(u_new, u, d, tile, steps_per_launch))
        steps = steps_per_launch
    else:
        raise ValueError(f"unknown method {method!r}: use 'global' or 'shared'")

    def advance(source: int) -> int:
        plans[source]()
        return steps

    return advance


def heat_run(initial, total_steps: int, d: float, method: str = "global", tile: int = 32,
             steps_per_launch: int = 1, graph: bool = True):
    """Advance `initial` by `total_steps` steps: a host array gives a host array back, a device array a device array.

    With `graph` (the default) the launches go through a CUDA graph of many steps, replayed: the
    host issues one call per graph instead of one per step (see `gpucourse.graphs.alternate`).
    The caller's array is never changed.
    """
    from ..arrays import device_copy, on_host, to_device, to_host

    per_launch = 1 if method == "global" else steps_per_launch
    if total_steps % per_launch:
        raise ValueError(f"total_steps ({total_steps}) must be a multiple of the steps per launch ({per_launch})")
    u = to_device(initial) if on_host(initial) else device_copy(initial)
    u_new = device_copy(u)  # both buffers hold the boundary, which no step writes
    advance = stepper(u, u_new, d, method, tile, steps_per_launch)
    result = (u, u_new)[alternate(advance, total_steps // per_launch, use_graph=graph)]
    return to_host(result) if on_host(initial) else result


def bytes_per_step(shape: tuple[int, int], itemsize: int) -> int:
    """Bytes one time step must move at least: every value read once and written once."""
    return 2 * shape[0] * shape[1] * itemsize


@dataclass(frozen=True)
class RunTimes:
    """A time-stepping run timed four ways, in ms: the GPU's own time, and wall times as a program sees them.

    `device_wall_ms`: data already on the device, through a graph. `graph_wall_ms` and
    `plain_wall_ms`: from a host array and back (two copies included), with a graph and with one
    launch call per step.
    """

    steps: int
    gpu_ms: float
    device_wall_ms: float
    graph_wall_ms: float
    plain_wall_ms: float
    simulated: bool

    @property
    def gpu_us_per_step(self) -> float:
        """GPU time per step (gated launches: no host cost), in us."""
        return 1e3 * self.gpu_ms / self.steps

    @property
    def device_ratio(self) -> float:
        """Wall time of the run on device data, through a graph, over its GPU time."""
        return self.device_wall_ms / self.gpu_ms

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

    per_launch = 1 if method == "global" else steps_per_launch
    u, u_new = to_device(initial), to_device(initial)
    advance = stepper(u, u_new, d, method, tile, steps_per_launch)
    pair = benchmark(lambda: (advance(0), advance(1)), repeat=repeat, warmup=1)  # two launches: the buffers end where they began
    gpu_ms = pair.median_ms * total_steps / (2 * per_launch)
    start = to_device(initial)
    device = wall_time_ms(lambda: heat_run(start, total_steps, d, method, tile, steps_per_launch, graph=True), repeat=repeat, warmup=0)
    graphed = wall_time_ms(lambda: heat_run(initial, total_steps, d, method, tile, steps_per_launch, graph=True), repeat=repeat, warmup=0)
    plain = wall_time_ms(lambda: heat_run(initial, total_steps, d, method, tile, steps_per_launch, graph=False), repeat=repeat, warmup=0)
    return RunTimes(total_steps, gpu_ms, device, graphed, plain, pair.simulated)
