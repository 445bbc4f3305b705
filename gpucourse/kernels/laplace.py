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

from ..arrays import as_numba, require_cupy
from ..errors import LaunchConfigError
from ..simulation import paced
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


@paced
def jacobi_global(a, a_new, block: tuple[int, int] = BOOK_BLOCK) -> None:
    """One Jacobi sweep a -> a_new (interior only), neighbours read from global memory."""
    dtype = _check(a, a_new)
    jacobi_global_kernel[launch_2d(a.shape, block)[0], block](as_numba(a), as_numba(a_new), *weights(dtype))


@paced
def jacobi_shared(a, a_new, block: tuple[int, int] = BOOK_BLOCK) -> None:
    """One Jacobi sweep a -> a_new (interior only), through a shared-memory tile with a one-point halo."""
    dtype = _check(a, a_new)
    bx, by = check_threads_per_block(block)
    check_shared_memory((bx + 2) * (by + 2) * dtype.itemsize)
    kernel = jacobi_shared_kernel(bx, by, dtype.name)
    kernel[launch_2d(a.shape, block)[0], block](as_numba(a), as_numba(a_new), *weights(dtype))


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


def jacobi_texture(reader: TextureReader, a_new, block: tuple[int, int] = BOOK_BLOCK) -> None:
    """One Jacobi sweep reading a through a texture object (float32, GPU only)."""
    module = _cuda_c_module()
    cupy = require_cupy("The texture Jacobi kernel")
    check_device_array(a_new, "a_new", dtype=np.float32, ndim=2, shape=tuple(reader.array.shape))
    target = a_new if isinstance(a_new, cupy.ndarray) else cupy.asarray(a_new)
    ny, nx = reader.array.shape
    args = (reader.texture, target, np.int32(nx), np.int32(ny), *weights(np.float32))
    module.get_function("jacobi_texture")(launch_2d((ny, nx), block)[0], block, args)


def jacobi_readonly(a, a_new, block: tuple[int, int] = BOOK_BLOCK) -> None:
    """One Jacobi sweep reading a through the read-only data cache (__ldg; float32 CuPy arrays, GPU only)."""
    module = _cuda_c_module()
    cupy = require_cupy("The read-only Jacobi kernel")
    _check(a, a_new)
    check_device_array(a, "a", dtype=np.float32)
    ny, nx = a.shape
    views = [x if isinstance(x, cupy.ndarray) else cupy.asarray(x) for x in (a, a_new)]
    args = (*views, np.int32(nx), np.int32(ny), *weights(np.float32))
    module.get_function("jacobi_readonly")(launch_2d(a.shape, block)[0], block, args)


def max_residual(a, a_new) -> float:
    """max |a_new - a| over the mesh (the book's stopping criterion), computed where the arrays live."""
    from ..arrays import array_module, to_host
    from ..mode import is_simulator

    if is_simulator():
        return float(np.max(np.abs(to_host(a_new) - to_host(a))))
    xp = array_module()
    first, second = xp.asarray(a), xp.asarray(a_new)  # views of Numba arrays, no copies
    return float(xp.max(xp.abs(second - first)))


def bytes_per_sweep(shape: tuple[int, int], itemsize: int) -> int:
    """Bytes a sweep must move at least: every value read once, every value written once."""
    return 2 * shape[0] * shape[1] * itemsize


METHODS = ("global", "shared", "texture", "readonly")


def sweeper(a, a_new, method: str, block: tuple[int, int] = BOOK_BLOCK) -> Callable[[int], None]:
    """A function of (source index) that runs one sweep from buffer `source` (0: a, 1: a_new) into the other."""
    buffers = (as_numba(a), as_numba(a_new))  # converted once, not at every sweep
    if method == "global":
        return lambda source: jacobi_global(buffers[source], buffers[1 - source], block)
    if method == "shared":
        return lambda source: jacobi_shared(buffers[source], buffers[1 - source], block)
    if method == "texture":
        readers = (TextureReader(a), TextureReader(a_new))  # one texture object per buffer, made once
        return lambda source: jacobi_texture(readers[source], readers[1 - source].array, block)
    if method == "readonly":
        cupy = require_cupy("The read-only Jacobi kernel")
        views = (cupy.asarray(a), cupy.asarray(a_new))  # CuPy views made once, not at every sweep
        return lambda source: jacobi_readonly(views[source], views[1 - source], block)
    raise ValueError(f"unknown method {method!r}; use one of {METHODS}")


@paced
def jacobi_iterations(initial: np.ndarray, iterations: int, method: str = "global", every: int = 10,
                      block: tuple[int, int] = BOOK_BLOCK) -> tuple[np.ndarray, list[tuple[int, float]]]:
    """Run `iterations` sweeps from `initial` (host array); return the final mesh and (iteration, max residual) every `every`.

    Two device buffers take turns as source and target (the book copies a_new back into a after
    each sweep; swapping the roles gives the same numbers without the copy).
    """
    from ..arrays import to_device, to_host

    a, a_new = to_device(initial), to_device(initial)  # both hold the boundary from the start
    sweep = sweeper(a, a_new, method, block)
    buffers, source, history = (a, a_new), 0, []
    for n in range(1, iterations + 1):
        sweep(source)
        if n % every == 0:
            history.append((n, max_residual(buffers[source], buffers[1 - source])))
        source = 1 - source
    return to_host(buffers[source]), history
