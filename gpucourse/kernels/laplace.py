"""Chapter 6.2 kernels: Jacobi sweeps of the compact nine-point Laplace stencil on a 2D mesh.

``a[y, x]`` with x contiguous. Each sweep writes the interior of ``a_new`` from ``a``:
new = 1/5 (four edge neighbours) + 1/20 (four corner neighbours); the boundary rows and columns are
never written (they hold the boundary condition). Three ways to read the neighbours, as in the book:

* ``jacobi_global``: straight from global memory (the caches catch the reuse);
* ``jacobi_shared``: a (block + halo) tile copied into shared memory first;
* ``jacobi_texture`` (GPU only, CUDA C through CuPy): through texture objects, the book's third way,
  and ``jacobi_readonly``, the read-only data path a ``const __restrict__`` pointer opens.
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
from ..validate import (
    check_device_array,
    check_float_dtype,
    check_same_shape,
    check_shared_memory,
    check_threads_per_block,
    launch_2d,
)

#: The book's thread block: 32 x 16 threads (x, y).
BOOK_BLOCK = (32, 16)


def weights(dtype) -> tuple:
    """The stencil's weights (1/5 for edge neighbours, 1/20 for corner ones) as scalars of `dtype`."""
    kind = np.dtype(dtype).type
    return kind(0.2), kind(0.05)


@cuda.jit
def jacobi_global_kernel(a, a_new, edge, corner):
    i, j = cuda.grid(2)  # i walks x (contiguous), j walks y
    ny, nx = a.shape
    if 0 < i < nx - 1 and 0 < j < ny - 1:
        a_new[j, i] = (edge * (((a[j + 1, i] + a[j, i - 1]) + a[j, i + 1]) + a[j - 1, i])
                       + corner * (((a[j - 1, i - 1] + a[j - 1, i + 1]) + a[j + 1, i - 1]) + a[j + 1, i + 1]))


@functools.cache
def jacobi_shared_kernel(block_x: int, block_y: int, dtype_name: str) -> object:
    """The shared-memory Jacobi sweep for blocks of block_x x block_y threads."""
    BX, BY = block_x, block_y
    TX, TY = BX + 2, BY + 2              # the tile: the block's points and a one-point halo
    TILE = TX * TY
    THREADS = BX * BY
    DT = numba.from_dtype(np.dtype(dtype_name))

    @cuda.jit
    def jacobi_shared(a, a_new, edge, corner):
        t = cuda.shared.array((TY, TX), DT)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        ny, nx = a.shape
        x0 = cuda.blockIdx.x * BX - 1     # global position of the tile's corner
        y0 = cuda.blockIdx.y * BY - 1
        # more tile points than threads: the block walks the tile in row-major steps of THREADS,
        # so consecutive threads read consecutive x (coalesced)
        for flat in range(ty * BX + tx, TILE, THREADS):
            r = flat // TX
            c = flat - r * TX
            gi = x0 + c
            gj = y0 + r
            if 0 <= gi < nx and 0 <= gj < ny:
                t[r, c] = a[gj, gi]
        cuda.syncthreads()
        i = x0 + 1 + tx
        j = y0 + 1 + ty
        if 0 < i < nx - 1 and 0 < j < ny - 1:
            r, c = ty + 1, tx + 1
            a_new[j, i] = (edge * (((t[r + 1, c] + t[r, c - 1]) + t[r, c + 1]) + t[r - 1, c])
                           + corner * (((t[r - 1, c - 1] + t[r - 1, c + 1]) + t[r + 1, c - 1]) + t[r + 1, c + 1]))

    return jacobi_shared


JACOBI_CUDA_C = r"""
extern "C" __global__ void jacobi_texture(cudaTextureObject_t a, float* a_new, int nx, int ny, float edge, float corner)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
        // unnormalised coordinates: the centre of texel (i, j) is at (i + 0.5, j + 0.5)
        float x = i + 0.5f, y = j + 0.5f;
        a_new[j * nx + i] = edge * (((tex2D<float>(a, x, y + 1) + tex2D<float>(a, x - 1, y)) + tex2D<float>(a, x + 1, y))
                                    + tex2D<float>(a, x, y - 1))
                          + corner * (((tex2D<float>(a, x - 1, y - 1) + tex2D<float>(a, x + 1, y - 1))
                                       + tex2D<float>(a, x - 1, y + 1)) + tex2D<float>(a, x + 1, y + 1));
    }
}

extern "C" __global__ void jacobi_readonly(const float* __restrict__ a, float* __restrict__ a_new, int nx, int ny,
                                           float edge, float corner)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
        const float* p = a + j * nx + i;
        a_new[j * nx + i] = edge * (((__ldg(p + nx) + __ldg(p - 1)) + __ldg(p + 1)) + __ldg(p - nx))
                          + corner * (((__ldg(p - nx - 1) + __ldg(p - nx + 1)) + __ldg(p + nx - 1)) + __ldg(p + nx + 1));
    }
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


@planned
def jacobi_global(a, a_new, block: tuple[int, int] = BOOK_BLOCK):
    """One Jacobi sweep a -> a_new (interior only), neighbours read from global memory."""
    dtype = _check(a, a_new)
    blocks, threads = launch_2d(a.shape, block)
    return bind(jacobi_global_kernel, blocks, threads, a, a_new, *weights(dtype))


@planned
def jacobi_shared(a, a_new, block: tuple[int, int] = BOOK_BLOCK):
    """One Jacobi sweep a -> a_new (interior only), through a shared-memory tile with a one-point halo."""
    dtype = _check(a, a_new)
    bx, by = check_threads_per_block(block)
    check_shared_memory((bx + 2) * (by + 2) * dtype.itemsize)
    blocks, threads = launch_2d(a.shape, block)
    return bind(jacobi_shared_kernel(bx, by, dtype.name), blocks, threads, a, a_new, *weights(dtype))


@functools.cache
def _cuda_c_module():
    cupy = require_cupy("The texture and read-only Jacobi kernels (CUDA C through CuPy)")
    return cupy.RawModule(code=JACOBI_CUDA_C)


def texture_pitch_alignment() -> int:
    """Bytes a row of a 2D texture over linear memory must be a multiple of, on this GPU."""
    cupy = require_cupy("Texture objects")
    return int(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["texturePitchAlignment"])


class TextureReader:
    """A texture object over a float32 CuPy 2D array (point sampling, clamped), for `jacobi_texture`."""

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


@planned
def jacobi_texture(reader: TextureReader, a_new, block: tuple[int, int] = BOOK_BLOCK):
    """One Jacobi sweep reading a through a texture object (float32, GPU only)."""
    module = _cuda_c_module()
    cupy = require_cupy("The texture Jacobi kernel")
    check_device_array(a_new, "a_new", dtype=np.float32, ndim=2, shape=tuple(reader.array.shape))
    target = a_new if isinstance(a_new, cupy.ndarray) else cupy.asarray(a_new)
    ny, nx = reader.array.shape
    args = (reader.texture, target, np.int32(nx), np.int32(ny), *weights(np.float32))
    return CuPyLaunch(module.get_function("jacobi_texture"), launch_2d((ny, nx), block)[0], block, args)


@planned
def jacobi_readonly(a, a_new, block: tuple[int, int] = BOOK_BLOCK):
    """One Jacobi sweep reading a through the read-only data cache (__ldg; float32 CuPy arrays, GPU only)."""
    module = _cuda_c_module()
    cupy = require_cupy("The read-only Jacobi kernel")
    _check(a, a_new)
    check_device_array(a, "a", dtype=np.float32)
    ny, nx = a.shape
    views = [x if isinstance(x, cupy.ndarray) else cupy.asarray(x) for x in (a, a_new)]
    args = (*views, np.int32(nx), np.int32(ny), *weights(np.float32))
    return CuPyLaunch(module.get_function("jacobi_readonly"), launch_2d(a.shape, block)[0], block, args)


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


METHODS = ("global", "shared", "texture", "readonly")


def sweeper(a, a_new, method: str, block: tuple[int, int] = BOOK_BLOCK) -> Callable[[int], None]:
    """A function of (source index) that runs one sweep from buffer `source` (0: a, 1: a_new) into the other."""
    if method == "global":
        plans = (jacobi_global.plan(a, a_new, block), jacobi_global.plan(a_new, a, block))
    elif method == "shared":
        plans = (jacobi_shared.plan(a, a_new, block), jacobi_shared.plan(a_new, a, block))
    elif method == "texture":
        readers = (TextureReader(a), TextureReader(a_new))  # one texture object per buffer, made once
        plans = (jacobi_texture.plan(readers[0], readers[1].array, block), jacobi_texture.plan(readers[1], readers[0].array, block))
    elif method == "readonly":
        cupy = require_cupy("The read-only Jacobi kernel")
        views = (cupy.asarray(a), cupy.asarray(a_new))  # CuPy views made once, not at every sweep
        plans = (jacobi_readonly.plan(views[0], views[1], block), jacobi_readonly.plan(views[1], views[0], block))
    else:
        raise ValueError(f"unknown method {method!r}; use one of {METHODS}")
    return lambda source: plans[source]()


def jacobi_iterations(initial, iterations: int, method: str = "global", every: int = 10,
                      block: tuple[int, int] = BOOK_BLOCK, graph: bool = True) -> tuple[object, list[tuple[int, float]]]:
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
                    block: tuple[int, int] = BOOK_BLOCK, repeat: int = 3):
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
    plain = wall_time_ms(lambda: jacobi_iterations(initial, iterations, method, every, block, graph=False), repeat=repeat, warmup=0)
    return RunTimes(iterations, gpu_ms, device, graphed, plain, mode.is_simulator())
