"""Chapter 3, memory spaces (§3.2.3-§3.3): textures, the L1/L2 load paths, local, constant and shared memory.

* Strided reads (the book's strideTexture): through ordinary global loads (Numba), through
  loads that skip L1 (`cuda.ldcg`, the book's -Mcuda=noL1), and, from CUDA C compiled by CuPy,
  through a texture object, `__ldg` and plain loads. Numba has no textures.
* The book's 4- and 8-point averages (App. D.1): global loads (Numba and CUDA C) and textures.
* Local memory: private arrays indexed at compile time (registers) or at run time (local
  memory), and register spills forced with `max_registers`, read from the compiler's report.
* Constant memory: a table read by every thread, the same word for a whole warp (broadcast) or
  `distinct` different words per warp, from constant memory, global memory or CUDA `__constant__`.
* Shared memory: declared with a fixed size or a size given at launch (the book's array
  reversal); reads with a stride in 32-bit words (bank conflicts) and a tile read by columns,
  with and without a padding column.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, float32, int32

from .. import mode
from ..arrays import random_array, require_cupy
from ..compilation import jit_variant
from ..errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from ..launch import bind, planned
from ..validate import (
    check_blocks,
    check_device_array,
    check_float_dtype,
    check_same_shape,
    check_threads_per_block,
    launch_1d,
    launch_2d,
)

WARP = 32


# ---------------------------------------------------------------------------------------------
# 1. Strided reads: b[i] = a[i * stride] + 1, written contiguously so that only the reads stride.


@cuda.jit
def strided_read_kernel(b, a, stride, one):
    i = cuda.grid(1)
    if i < b.size:
        b[i] = a[i * stride] + one


@cuda.jit
def strided_read_l2_kernel(b, a, stride, one):
    i = cuda.grid(1)
    if i < b.size:
        b[i] = cuda.ldcg(a, i * stride) + one  # ld.global.cg: cached in L2 only, never in L1


LOAD_PATHS = ("global", "L2 only (ldcg)")


@planned
def strided_read(b, a, stride: int, path: str = "global", threads_per_block: int = 256):
    """b[i] = a[i * stride] + 1 for every i of the 1D float device array b, through the chosen load path."""
    check_device_array(b, "b", ndim=1)
    dtype = check_float_dtype(b.dtype, "b.dtype")
    check_device_array(a, "a", dtype=dtype, ndim=1)
    n = b.shape[0]
    if stride < 1:
        raise ValueError(f"stride must be positive; got {stride}")
    if (n - 1) * stride >= a.shape[0]:
        raise ArrayArgumentError(f"a has {a.shape[0]} elements, but b[{n - 1}] reads a[{(n - 1) * stride}]: make a at least n * stride long")
    if path not in LOAD_PATHS:
        raise ValueError(f"path must be one of {LOAD_PATHS}; got {path!r}")
    blocks, tpb = launch_1d(n, threads_per_block)
    if path == "global":
        return bind(strided_read_kernel, blocks, tpb, b, a, np.int64(stride), dtype.type(1))
        return
    if mode.is_simulator():
        raise GPUOnlyFeature("cuda.ldcg (a load that bypasses L1)", "the simulator has no caches and no cache-hint loads")
    return bind(strided_read_l2_kernel, blocks, tpb, b, a, np.int64(stride), dtype.type(1))


STRIDED_READ_SOURCE = r"""
extern "C" __global__ void strided_read_global(float* b, const float* a, long long stride, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i * stride] + 1.0f;
}

extern "C" __global__ void strided_read_ldg(float* b, const float* __restrict__ a, long long stride, int n)
{
    // __ldg: the read-only data path (the texture pipeline, without a texture object)
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = __ldg(&a[i * stride]) + 1.0f;
}

extern "C" __global__ void strided_read_texture(float* b, cudaTextureObject_t a, long long stride, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = tex1Dfetch<float>(a, (int)(i * stride)) + 1.0f;
}
"""

CUDA_C_PATHS = ("CUDA C global", "CUDA C __ldg", "CUDA C texture")


@functools.cache
def _strided_read_module():
    cupy = require_cupy("CUDA C kernels through cupy.RawModule")
    return cupy.RawModule(code=STRIDED_READ_SOURCE)


def max_linear_texture_elements() -> int:
    """The most elements a 1D texture over linear memory may span on this device (GPU only)."""
    cupy = require_cupy("Texture objects (cupy.cuda.texture)")
    return int(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["maxTexture1DLinear"])


def linear_texture(a):
    """A texture object that reads the float32 CuPy array `a` element by element (tex1Dfetch); GPU only."""
    cupy = require_cupy("Texture objects (cupy.cuda.texture)")
    from cupy.cuda import runtime, texture

    check_device_array(a, "a", dtype=np.float32)
    if not isinstance(a, cupy.ndarray):
        raise ArrayArgumentError("a texture needs a CuPy array: pass cupy.asarray(a) (it shares the memory of a Numba array)")
    limit = max_linear_texture_elements()
    if a.size > limit:
        raise LaunchConfigError(f"a has {a.size} elements, over the {limit} a 1D linear texture may span on this device: use a smaller array")
    channel = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat)
    resource = texture.ResourceDescriptor(runtime.cudaResourceTypeLinear, arr=a, chDesc=channel, sizeInBytes=a.nbytes)
    description = texture.TextureDescriptor(filterMode=runtime.cudaFilterModePoint, readMode=runtime.cudaReadModeElementType)
    return texture.TextureObject(resource, description)


def cuda_c_strided_read(b, a, stride: int, path: str, texture_object=None, threads_per_block: int = 256) -> None:
    """The same strided read from CUDA C (CuPy arrays, float32): plain loads, __ldg, or a texture object over `a`."""
    cupy = require_cupy(f"{path} (CUDA C compiled by CuPy)")
    check_device_array(b, "b", dtype=np.float32, ndim=1)
    check_device_array(a, "a", dtype=np.float32, ndim=1)
    n = b.shape[0]
    if stride < 1 or (n - 1) * stride >= a.shape[0]:
        raise ArrayArgumentError(f"stride {stride} reads past the end of a ({a.shape[0]} elements) for n={n}")
    blocks, tpb = launch_1d(n, threads_per_block)
    module = _strided_read_module()
    if path == "CUDA C texture":
        if texture_object is None:
            raise ValueError("pass texture_object=linear_texture(a) for the texture path (create it once, outside timed code)")
        source = texture_object
    elif path in ("CUDA C global", "CUDA C __ldg"):
        source = cupy.asarray(a)
    else:
        raise ValueError(f"path must be one of {CUDA_C_PATHS}; got {path!r}")
    name = {"CUDA C global": "strided_read_global", "CUDA C __ldg": "strided_read_ldg", "CUDA C texture": "strided_read_texture"}[path]
    module.get_function(name)((blocks,), (tpb,), (cupy.asarray(b), source, np.int64(stride), np.int32(n)))


def strided_read_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes the book counts for the strided read: n elements read and n written."""
    return 2 * n * itemsize


# ---------------------------------------------------------------------------------------------
# 2. The book's 4- and 8-point averages on a 2D mesh (App. D.1): each input value is read by
#    several threads, so a cache in front of global memory pays off.
#    a has a one-point halo: shape (rows + 2, cols + 2); b has shape (rows, cols).


@cuda.jit
def average4_kernel(b, a, quarter):
    col, row = cuda.grid(2)
    if row < b.shape[0] and col < b.shape[1]:
        r, c = row + 1, col + 1  # centre point in the haloed array
        b[row, col] = quarter * (a[r - 1, c] + a[r, c - 1] + a[r, c + 1] + a[r + 1, c])


@cuda.jit
def average8_kernel(b, a, eighth):
    col, row = cuda.grid(2)
    if row < b.shape[0] and col < b.shape[1]:
        r, c = row + 1, col + 1
        b[row, col] = eighth * (a[r - 1, c - 1] + a[r - 1, c] + a[r - 1, c + 1]
                                + a[r, c - 1] + a[r, c + 1]
                                + a[r + 1, c - 1] + a[r + 1, c] + a[r + 1, c + 1])


def _check_mesh(b, a) -> np.dtype:
    check_device_array(b, "b", ndim=2)
    dtype = check_float_dtype(b.dtype, "b.dtype")
    check_device_array(a, "a", dtype=dtype, ndim=2)
    if tuple(a.shape) != (b.shape[0] + 2, b.shape[1] + 2):
        raise ArrayArgumentError(f"a must have a one-point halo around b: shape {(b.shape[0] + 2, b.shape[1] + 2)}; got {tuple(a.shape)}")
    return dtype


@planned
def average(b, a, points: int, threads_per_block: tuple[int, int] = (32, 8)):
    """b = mean of the `points` (4 or 8) neighbours of each interior point of `a` (Numba, global loads)."""
    dtype = _check_mesh(b, a)
    blocks, threads = launch_2d(b.shape, threads_per_block)
    if points == 4:
        return bind(average4_kernel, blocks, threads, b, a, dtype.type(0.25))
    elif points == 8:
        return bind(average8_kernel, blocks, threads, b, a, dtype.type(0.125))
    else:
        raise ValueError(f"points must be 4 or 8; got {points}")


def average_reference(a: np.ndarray, points: int) -> np.ndarray:
    """NumPy reference of `average`, in float64."""
    a = a.astype(np.float64)
    plus = a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
    if points == 4:
        return 0.25 * plus
    if points == 8:
        return 0.125 * (plus + a[:-2, :-2] + a[:-2, 2:] + a[2:, :-2] + a[2:, 2:])
    raise ValueError(f"points must be 4 or 8; got {points}")


def average_bytes(rows: int, cols: int, itemsize: int = 4) -> int:
    """Bytes the book counts for one average: the haloed input read once, the output written once."""
    return itemsize * (rows * cols + (rows + 2) * (cols + 2))


AVERAGE_SOURCE = r"""
#define NEIGHBOURS4(get) (get(r - 1, c) + get(r, c - 1) + get(r, c + 1) + get(r + 1, c))
#define CORNERS(get) (get(r - 1, c - 1) + get(r - 1, c + 1) + get(r + 1, c - 1) + get(r + 1, c + 1))

extern "C" __global__ void average_global(float* b, const float* a, int rows, int cols, int points)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= rows || col >= cols) return;
    int r = row + 1, c = col + 1, pitch = cols + 2;
#define GLOBAL(y, x) a[(y) * pitch + (x)]
    float sum = NEIGHBOURS4(GLOBAL);
    if (points == 8) sum += CORNERS(GLOBAL);
    b[row * cols + col] = sum / points;
}

extern "C" __global__ void average_texture(float* b, cudaTextureObject_t a, int rows, int cols, int points)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= rows || col >= cols) return;
    int r = row + 1, c = col + 1, pitch = cols + 2;
#define TEXTURE(y, x) tex1Dfetch<float>(a, (y) * pitch + (x))
    float sum = NEIGHBOURS4(TEXTURE);
    if (points == 8) sum += CORNERS(TEXTURE);
    b[row * cols + col] = sum / points;
}
"""


@functools.cache
def _average_module():
    cupy = require_cupy("CUDA C kernels through cupy.RawModule")
    return cupy.RawModule(code=AVERAGE_SOURCE)


def cuda_c_average(b, a, points: int, texture_object=None, threads_per_block: tuple[int, int] = (32, 8)) -> None:
    """The book's averages in CUDA C (float32 CuPy arrays): global loads, or reads through `texture_object` over `a`."""
    cupy = require_cupy("the CUDA C averages (cupy.RawModule)")
    if _check_mesh(b, a) != np.float32:
        raise ArrayArgumentError("the CUDA C averages are compiled for float32 arrays")
    if points not in (4, 8):
        raise ValueError(f"points must be 4 or 8; got {points}")
    blocks, threads = launch_2d(b.shape, threads_per_block)
    rows, cols = b.shape
    name, source = ("average_global", cupy.asarray(a)) if texture_object is None else ("average_texture", texture_object)
    _average_module().get_function(name)(blocks, threads, (cupy.asarray(b), source, np.int32(rows), np.int32(cols), np.int32(points)))


# ---------------------------------------------------------------------------------------------
# 3. Local memory: a thread's private array lives in registers only if every index is known when
#    the kernel is compiled. The book's k1, k2 and k3, in Python.


@cuda.jit
def local_static_kernel(out, values):
    scratch = cuda.local.array(2, float32)
    i = cuda.grid(1)
    if i < out.size:
        scratch[0] = values[i]
        scratch[1] = values[i] + values[i]
        out[i] = scratch[1]  # indices 0 and 1 are constants: the array becomes two registers


@cuda.jit
def local_dynamic_kernel(out, values, j, k):
    scratch = cuda.local.array(2, float32)
    i = cuda.grid(1)
    if i < out.size:
        scratch[0] = values[i]
        scratch[1] = values[i]
        scratch[j] = values[i] + values[i]
        out[i] = scratch[k]  # j and k are known only at run time: registers cannot be indexed, so local memory


LARGE_LOCAL = 256


@cuda.jit
def local_large_kernel(out, values, k):
    scratch = cuda.local.array(LARGE_LOCAL, float32)
    i = cuda.grid(1)
    if i < out.size:
        for m in range(LARGE_LOCAL):
            scratch[m] = values[i] + float32(m)
        out[i] = scratch[k]  # 256 floats and a run-time index: 1 KiB of local memory per thread


@planned
def local_memory_demo(out, values, variant: str, k: int = 1, threads_per_block: int = 64):
    """Run one of the local-memory kernels ('static', 'dynamic' or 'large') on float32 device arrays."""
    check_device_array(out, "out", dtype=np.float32, ndim=1)
    check_device_array(values, "values", dtype=np.float32, ndim=1)
    check_same_shape(out, values, ("out", "values"))
    blocks, tpb = launch_1d(out.shape[0], threads_per_block)
    if variant == "static":
        return bind(local_static_kernel, blocks, tpb, out, values)
    elif variant == "dynamic":
        if k not in (0, 1):
            raise ValueError(f"the 2-element array has indices 0 and 1; got k={k}")
        return bind(local_dynamic_kernel, blocks, tpb, out, values, np.int32(k), np.int32(k))
    elif variant == "large":
        if not 0 <= k < LARGE_LOCAL:
            raise ValueError(f"k must be in 0..{LARGE_LOCAL - 1}; got {k}")
        return bind(local_large_kernel, blocks, tpb, out, values, np.int32(k))
    else:
        raise ValueError(f"variant must be 'static', 'dynamic' or 'large'; got {variant!r}")


def local_memory_reference(values: np.ndarray, variant: str, k: int = 1) -> np.ndarray:
    """NumPy reference of `local_memory_demo`."""
    if variant in ("static", "dynamic"):
        return values + values
    if variant == "large":
        return values + np.float32(k)
    raise ValueError(f"variant must be 'static', 'dynamic' or 'large'; got {variant!r}")


# A kernel that keeps HUNGRY values alive at once: with few registers allowed, some must spill.
HUNGRY = 32


@cuda.jit
def register_hungry_kernel(out, values, rounds):
    state = cuda.local.array(HUNGRY, float32)
    i = cuda.grid(1)
    n = out.size
    if i < n:
        for k in range(HUNGRY):  # constant trip count: unrolled, so every index is known and state fits in registers
            state[k] = values[k, i]
        for _ in range(rounds):
            for k in range(HUNGRY - 1):
                state[k] = state[k] * state[k + 1] + state[k]
        total = state[0]
        for k in range(1, HUNGRY):
            total += state[k]
        out[i] = total


def register_hungry_reference(values: np.ndarray, rounds: int) -> np.ndarray:
    """NumPy reference of `register_hungry_kernel` (values has shape (HUNGRY, n)), in float64."""
    state = values.astype(np.float64).copy()
    for _ in range(rounds):
        for k in range(HUNGRY - 1):
            state[k] = state[k] * state[k + 1] + state[k]
    return state.sum(axis=0)


@functools.cache
@functools.cache
def register_limited(max_registers: int):
    """`register_hungry_kernel` compiled with at most `max_registers` registers per thread (the simulator ignores the limit)."""
    if max_registers < 16 or max_registers > 255:
        raise LaunchConfigError(f"max_registers must be between 16 and 255; got {max_registers}")
    return jit_variant(register_hungry_kernel, max_registers=max_registers)


@planned
def register_hungry(out, values, rounds: int = 4, kernel=None, threads_per_block: int = 128):
    """Run the register-hungry kernel (or a `register_limited` version of it) on float32 device arrays."""
    check_device_array(out, "out", dtype=np.float32, ndim=1)
    check_device_array(values, "values", dtype=np.float32, ndim=2, shape=(HUNGRY, out.shape[0]))
    blocks, tpb = launch_1d(out.shape[0], threads_per_block)
    return bind((kernel or register_hungry_kernel), blocks, tpb, out, values, np.int32(rounds))


# ---------------------------------------------------------------------------------------------
# 4. Constant memory: a small table every thread reads. Numba places a global NumPy array that a
#    kernel uses in constant memory; cuda.const.array_like says so explicitly.

TABLE_SIZE = 1024  # 4 KiB of float32: far below the 64 KiB of constant memory
COEFFICIENTS = random_array(TABLE_SIZE, np.float32, seed=2014)


@cuda.jit
def constant_table_kernel(out, x, distinct, reads):
    table = cuda.const.array_like(COEFFICIENTS)
    i = cuda.grid(1)
    if i < out.size:
        lane = cuda.threadIdx.x % WARP
        word = lane % distinct  # `distinct` different words per warp: 1 is a broadcast
        total = table[word] * x[i]
        for j in range(1, reads):
            total += table[(j * WARP + word) & (TABLE_SIZE - 1)] * x[i]
        out[i] = total


@cuda.jit
def global_table_kernel(out, x, table, distinct, reads):
    i = cuda.grid(1)
    if i < out.size:
        lane = cuda.threadIdx.x % WARP
        word = lane % distinct
        total = table[word] * x[i]
        for j in range(1, reads):
            total += table[(j * WARP + word) & (TABLE_SIZE - 1)] * x[i]
        out[i] = total


TABLE_SPACES = ("constant", "global")


@planned
def table_reads(out, x, distinct: int, reads: int, space: str = "constant", table=None, threads_per_block: int = 256):
    """out[i] = x[i] * (sum of `reads` table words), each warp reading `distinct` different words at a time.

    `space='constant'` reads the module's COEFFICIENTS from constant memory; `space='global'` reads
    the device array `table` (pass a copy of COEFFICIENTS) through the ordinary load path.
    """
    check_device_array(out, "out", dtype=np.float32, ndim=1)
    check_device_array(x, "x", dtype=np.float32, ndim=1)
    check_same_shape(out, x, ("out", "x"))
    if not 1 <= distinct <= WARP:
        raise ValueError(f"distinct must be between 1 and {WARP} (words per warp); got {distinct}")
    if reads < 1:
        raise ValueError(f"reads must be at least 1; got {reads}")
    (tpb,) = check_threads_per_block(threads_per_block)
    if tpb % WARP:
        raise LaunchConfigError(f"threads_per_block must be a multiple of {WARP} so that warps and lanes line up; got {tpb}")
    blocks, tpb = launch_1d(out.shape[0], tpb)
    if space == "constant":
        return bind(constant_table_kernel, blocks, tpb, out, x, np.int32(distinct), np.int32(reads))
    elif space == "global":
        if table is None:
            raise ValueError("space='global' needs table=<device copy of COEFFICIENTS>")
        check_device_array(table, "table", dtype=np.float32, shape=(TABLE_SIZE,))
        return bind(global_table_kernel, blocks, tpb, out, x, table, np.int32(distinct), np.int32(reads))
    else:
        raise ValueError(f"space must be one of {TABLE_SPACES}; got {space!r}")


def table_reads_reference(x: np.ndarray, distinct: int, reads: int, threads_per_block: int = 256) -> np.ndarray:
    """NumPy reference of `table_reads`, in float64."""
    lane = (np.arange(x.shape[0]) % threads_per_block) % WARP
    word = lane % distinct
    total = np.zeros(x.shape[0])
    for j in range(reads):
        total += COEFFICIENTS[(j * WARP + word) & (TABLE_SIZE - 1)].astype(np.float64)
    return total * x.astype(np.float64)


CONSTANT_SOURCE = r"""
__constant__ float coefficients[TABLE_SIZE];

extern "C" __global__ void constant_table_c(float* out, const float* x, int distinct, int reads, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int word = (threadIdx.x % 32) % distinct;
    float total = coefficients[word] * x[i];
    for (int j = 1; j < reads; ++j) total += coefficients[(j * 32 + word) & (TABLE_SIZE - 1)] * x[i];
    out[i] = total;
}
""".replace("TABLE_SIZE", str(TABLE_SIZE))


@functools.cache
def _constant_module():
    cupy = require_cupy("CUDA __constant__ memory through cupy.RawModule")
    module = cupy.RawModule(code=CONSTANT_SOURCE)
    symbol = module.get_global("coefficients")  # the __constant__ array, filled once from the host
    cupy.ndarray((TABLE_SIZE,), cupy.float32, symbol)[...] = cupy.asarray(COEFFICIENTS)
    return module


def cuda_c_table_reads(out, x, distinct: int, reads: int, threads_per_block: int = 256) -> None:
    """`table_reads` from CUDA C with the table in a `__constant__` array (CuPy arrays; GPU only)."""
    cupy = require_cupy("CUDA __constant__ memory through cupy.RawModule")
    check_device_array(out, "out", dtype=np.float32, ndim=1)
    check_device_array(x, "x", dtype=np.float32, ndim=1)
    check_same_shape(out, x, ("out", "x"))
    if not 1 <= distinct <= WARP or reads < 1:
        raise ValueError(f"distinct must be in 1..{WARP} and reads >= 1; got distinct={distinct}, reads={reads}")
    blocks, tpb = launch_1d(out.shape[0], threads_per_block)
    n = out.shape[0]
    _constant_module().get_function("constant_table_c")((blocks,), (tpb,), (cupy.asarray(out), cupy.asarray(x), np.int32(distinct),
                                                                           np.int32(reads), np.int32(n)))


# ---------------------------------------------------------------------------------------------
# 5a. Shared memory declared two ways (the book's array reversal, §3.3.3.1): a size fixed when the
#     kernel is compiled (static), or a size given at each launch (dynamic: shape 0 in the kernel,
#     the bytes as the launch's fourth parameter). One block reverses the array through the tile:
#     thread t reads element n-1-t, which another thread wrote, so a barrier must separate them.

#: Elements of the static tile (the book reverses 64 integers).
REVERSE_STATIC = 64


@cuda.jit
def static_reverse_kernel(d):
    tile = cuda.shared.array(REVERSE_STATIC, int32)  # the size is part of the compiled kernel
    t = cuda.threadIdx.x
    n = d.shape[0]
    tile[t] = d[t]
    cuda.syncthreads()  # every element is in the tile before any thread reads another's
    d[t] = tile[n - t - 1]


@cuda.jit
def dynamic_reverse_kernel(d):
    tile = cuda.shared.array(0, int32)  # shape 0: the launch says how many bytes
    t = cuda.threadIdx.x
    n = d.shape[0]
    tile[t] = d[t]
    cuda.syncthreads()
    d[t] = tile[n - t - 1]


@planned
def reverse(d, dynamic: bool = False):
    """Reverse the int32 device array `d` in place with one block, through static or dynamic shared memory."""
    check_device_array(d, "d", dtype=np.int32, ndim=1)
    n = d.shape[0]
    if dynamic:
        check_threads_per_block(n)  # one block: the array may hold at most a block's threads
        return bind(dynamic_reverse_kernel, 1, n, d, shared_bytes=4 * n)
    if n != REVERSE_STATIC:
        raise ArrayArgumentError(f"the static kernel's tile holds {REVERSE_STATIC} elements; got {n}. Use dynamic=True for other sizes.")
    return bind(static_reverse_kernel, 1, n, d)


# ---------------------------------------------------------------------------------------------
# 5. Shared memory banks. Successive 32-bit words sit in successive banks (32 of them); a warp's
#    request is served in as many passes as the most threads that hit one bank at different words.

SHARED_WORDS = 1024


@cuda.jit
def shared_stride_kernel(out, table, stride, reads):
    buffer = cuda.shared.array(SHARED_WORDS, float32)
    t = cuda.threadIdx.x
    for k in range(t, SHARED_WORDS, cuda.blockDim.x):  # fill cooperatively, coalesced
        buffer[k] = table[k]
    cuda.syncthreads()
    i = cuda.grid(1)
    lane = t % WARP
    total = buffer[(lane * stride) & (SHARED_WORDS - 1)]
    for j in range(1, reads):
        total += buffer[(lane * stride + j) & (SHARED_WORDS - 1)]  # lanes `stride` words apart
    if i < out.size:
        out[i] = total


def bank_conflict_degree(stride: int, banks: int = 32, warp_size: int = 32) -> int:
    """Passes a warp needs when lane l reads 32-bit word l * stride (the most distinct words in one bank)."""
    per_bank: dict[int, set[int]] = {}
    for lane in range(warp_size):
        word = lane * stride
        per_bank.setdefault(word % banks, set()).add(word)
    return max(len(words) for words in per_bank.values())


@planned
def shared_stride_reads(out, table, stride: int, reads: int, threads_per_block: int = 256):
    """out[i] = sum over j < reads of table[(lane * stride + j) mod 1024], read from shared memory."""
    check_device_array(out, "out", dtype=np.float32, ndim=1)
    check_device_array(table, "table", dtype=np.float32, shape=(SHARED_WORDS,))
    if stride < 0 or reads < 1:
        raise ValueError(f"stride must be >= 0 and reads >= 1; got stride={stride}, reads={reads}")
    (tpb,) = check_threads_per_block(threads_per_block)
    if tpb % WARP:
        raise LaunchConfigError(f"threads_per_block must be a multiple of {WARP}; got {tpb}")
    blocks, tpb = launch_1d(out.shape[0], tpb)
    return bind(shared_stride_kernel, blocks, tpb, out, table, np.int32(stride), np.int32(reads))


def shared_stride_reference(table: np.ndarray, n: int, stride: int, reads: int, threads_per_block: int = 256) -> np.ndarray:
    """NumPy reference of `shared_stride_reads`, in float64."""
    lane = (np.arange(n) % threads_per_block) % WARP
    total = np.zeros(n)
    for j in range(reads):
        total += table[(lane * stride + j) & (SHARED_WORDS - 1)].astype(np.float64)
    return total


TILE = 32
PADDED_TILE = TILE + 1  # a global constant: Numba needs shared-array shapes it can read when compiling


@cuda.jit
def tile_row_sums_kernel(out, x):
    tile = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    base = cuda.blockIdx.x * TILE
    for r in range(TILE):  # thread tx loads column tx of the tile: coalesced global reads
        tile[r, tx] = x[base + r, tx]
    cuda.syncthreads()
    total = tile[tx, 0]
    for k in range(1, TILE):
        total += tile[tx, k]  # the warp reads a column: words tx*32 + k, all in bank k (32-way conflict)
    out[base + tx] = total


@cuda.jit
def tile_row_sums_padded_kernel(out, x):
    tile = cuda.shared.array((TILE, PADDED_TILE), float32)  # one spare column shifts each row by one bank
    tx = cuda.threadIdx.x
    base = cuda.blockIdx.x * TILE
    for r in range(TILE):
        tile[r, tx] = x[base + r, tx]
    cuda.syncthreads()
    total = tile[tx, 0]
    for k in range(1, TILE):
        total += tile[tx, k]  # words tx*33 + k: 32 different banks
    out[base + tx] = total


@planned
def tile_row_sums(out, x, padded: bool):
    """out[r] = sum of row r of x (shape (m, 32), m a multiple of 32), one warp per 32-row tile in shared memory."""
    check_device_array(x, "x", dtype=np.float32, ndim=2)
    rows, cols = x.shape
    if cols != TILE or rows % TILE:
        raise ArrayArgumentError(f"x must have {TILE} columns and a multiple of {TILE} rows; got shape {tuple(x.shape)}")
    check_device_array(out, "out", dtype=np.float32, shape=(rows,))
    blocks = rows // TILE
    check_blocks(blocks)
    kernel = tile_row_sums_padded_kernel if padded else tile_row_sums_kernel
    return bind(kernel, blocks, TILE, out, x)


def tile_bytes(rows: int) -> int:
    """Bytes a tile_row_sums launch reads and writes: the (rows, 32) float32 input and the rows outputs."""
    return 4 * (rows * TILE + rows)
