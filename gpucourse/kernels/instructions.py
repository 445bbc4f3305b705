"""Chapter 3 kernels for instruction optimization (book §3.6): fast math, intrinsics, rounding, divergence.

* Fast math: the same Python source compiled twice, with and without `fastmath=True`. With it, Numba
  replaces float32 `math.sin`, `math.cos`, `math.exp`, `math.log`, ... and division by the GPU's
  approximate hardware versions (libdevice's `fast_sinf`, `fast_fdividef`, ...), and flushes
  subnormal numbers to zero.
* Intrinsics: `numba.cuda.libdevice` exposes CUDA's device functions by name, such as `sincosf`
  (sine and cosine in one call) and additions and products with a chosen rounding direction.
  The simulator runs Python's math instead and has no libdevice, so these kernels are GPU-only.
* Compiler switches: the book's `-Mcuda=nofma` and `-Mcuda=flushz` one at a time, as NVRTC's
  `--fmad=false` and `--ftz=true` on a multiply-add chain in CUDA C (GPU only, through CuPy).
* Divergent warps: the same work split between two branches by thread (both branches run in every
  warp) or by warp (each warp runs one).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda
from numba.cuda import libdevice

from .. import mode
from ..arrays import as_numba
from ..compilation import jit_variant
from ..errors import GPUOnlyFeature
from ..launch import bind, planned
from ..validate import check_device_array, check_same_shape, check_whole_warps, launch_1d

# ---------------------------------------------------------------------------------------------
# Accuracy: one function applied once per element, compiled precise and fast.

#: The float32 functions whose fast versions `fastmath=True` selects, with NumPy float64 references.
FUNCTIONS: dict[str, tuple[object, object]] = {
    "sin": (math.sin, np.sin),
    "cos": (math.cos, np.cos),
    "exp": (math.exp, np.exp),
    "log": (math.log, np.log),
}


def make_unary_kernel(function, fastmath: bool):
    """Compile out[i] = function(x[i]) as a kernel, with or without fast math (one source, two kernels)."""
    FUNCTION = function  # a compile-time constant: one kernel per function and flag

    @cuda.jit(fastmath=fastmath)
    def apply_kernel(out, x):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = FUNCTION(x[i])

    return apply_kernel


@functools.cache
def unary_kernel(name: str, fastmath: bool):
    """The kernel out[i] = name(x[i]) ('sin', 'cos', 'exp' or 'log'), compiled with or without fast math."""
    if name not in FUNCTIONS:
        raise KeyError(f"no function {name!r}; choose one of {', '.join(FUNCTIONS)}")
    return make_unary_kernel(FUNCTIONS[name][0], bool(fastmath))


@cuda.jit
def divide_kernel(out, x, y):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] / y[i]


divide_fast_kernel = jit_variant(divide_kernel, fastmath=True)


def _check_float32_pair(out, x, names=("out", "x")):
    check_device_array(x, names[1], dtype=np.float32, ndim=1)
    check_device_array(out, names[0], dtype=np.float32, ndim=1)
    check_same_shape(out, x, names)


@planned
def apply(out, x, name: str, fastmath: bool = False, threads_per_block: int = 256):
    """out <- name(x) elementwise for float32 device arrays ('sin', 'cos', 'exp', 'log'), precise or fast."""
    out, x = as_numba(out), as_numba(x)
    _check_float32_pair(out, x)
    kernel = unary_kernel(name, fastmath)
    blocks, tpb = launch_1d(x.shape[0], threads_per_block)
    return bind(kernel, blocks, tpb, out, x)


@planned
def divide(out, x, y, fastmath: bool = False, threads_per_block: int = 256):
    """out <- x / y elementwise for float32 device arrays, IEEE division or the fast approximate one."""
    out, x, y = as_numba(out), as_numba(x), as_numba(y)
    _check_float32_pair(out, x)
    check_device_array(y, "y", dtype=np.float32, ndim=1, shape=tuple(x.shape))
    blocks, tpb = launch_1d(x.shape[0], threads_per_block)
    return bind((divide_fast_kernel if fastmath else divide_kernel), blocks, tpb, out, x, y)


def ulp_error(got: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|got - reference| in units in the last place of float32 at the reference (reference in float64)."""
    reference = np.asarray(reference, dtype=np.float64)
    spacing = np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64)
    return np.abs(np.asarray(got, dtype=np.float64) - reference) / spacing


# ---------------------------------------------------------------------------------------------
# Speed: enough arithmetic per element that the function, not memory, sets the time.


def sine_chain_body(values, steps, scale, offset):
    """x <- sin(x) * scale + offset, `steps` times per element, in registers."""
    i = cuda.grid(1)
    if i < values.size:
        x = values[i]
        for _ in range(steps):
            x = math.sin(x) * scale + offset
        values[i] = x


sine_chain_kernel = cuda.jit(sine_chain_body)
sine_chain_fast_kernel = cuda.jit(fastmath=True)(sine_chain_body)


@planned
def sine_chain(values, steps: int, fastmath: bool = False, threads_per_block: int = 256):
    """Apply x <- sin(x) * 0.5 + 0.25 `steps` times to every element of a float32 device array, in place."""
    values = as_numba(values)
    check_device_array(values, "values", dtype=np.float32, ndim=1)
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative int; got {steps!r}")
    blocks, tpb = launch_1d(values.shape[0], threads_per_block)
    kernel = sine_chain_fast_kernel if fastmath else sine_chain_kernel
    return bind(kernel, blocks, tpb, values, np.int32(steps), np.float32(0.5), np.float32(0.25))  # a contraction: errors do not grow


def sine_chain_reference(values: np.ndarray, steps: int) -> np.ndarray:
    """NumPy float64 reference of `sine_chain` (float32 results drift from it as errors compound)."""
    x = values.astype(np.float64)
    for _ in range(steps):
        x = np.sin(x) * 0.5 + 0.25
    return x


def sine_chain_operations(n: int, steps: int) -> int:
    """Sine evaluations `sine_chain` performs on n elements."""
    return n * steps


# ---------------------------------------------------------------------------------------------
# The book's compiler switches one at a time (§3.6.2: -Mcuda=nofma, -Mcuda=flushz): CUDA C compiled by
# NVRTC with --fmad=false or --ftz=true, where Numba offers only fastmath=True, which sets both and more.
# cupy.RawKernel adds -ftz=true to every build, so every build here is made by calling NVRTC directly with exactly its
# options (gpucourse.compilation.nvrtc_kernel).

#: x <- x * a + b, 8 * `steps` times per element in float32 registers: one FFMA each, or an FMUL and an FADD.
MULTIPLY_ADD_CHAIN_CUDA_C = r"""
extern "C" __global__ void multiply_add_chain_c(float* values, const float a, const float b, const int steps, const long long n)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = values[i];
    for (int s = 0; s < steps; ++s) {
#pragma unroll
        for (int k = 0; k < 8; ++k) x = x * a + b;
    }
    values[i] = x;
}
"""
#: NVRTC's options for the three builds: its defaults (contract to FMA, keep subnormals), no contraction, flush to zero.
COMPILER_SWITCHES = {"defaults": (), "--fmad=false": ("--fmad=false",), "--ftz=true": ("--ftz=true",)}


def multiply_add_chain_c_kernel(switch: str):
    """The chain built with one of COMPILER_SWITCHES for the current GPU, and nothing more (GPU only)."""
    from ..arrays import require_cupy

    if switch not in COMPILER_SWITCHES:
        raise ValueError(f"switch must be one of {list(COMPILER_SWITCHES)}; got {switch!r}")
    cupy = require_cupy("CUDA C compiled with NVRTC's --fmad and --ftz")
    return _chain_kernel(switch, cupy.cuda.Device().id)


@functools.cache
def _chain_kernel(switch: str, device: int):
    # every build by NVRTC itself with exactly its options, --ftz=true too: a cupy.RawKernel would add -ftz=true on its own,
    # so a flushing build through it could not tell the option's effect from CuPy's
    from ..compilation import nvrtc_kernel

    return nvrtc_kernel(MULTIPLY_ADD_CHAIN_CUDA_C, "multiply_add_chain_c", COMPILER_SWITCHES[switch])


def multiply_add_chain_c(values, a: float, b: float, steps: int, switch: str = "defaults", threads_per_block: int = 256) -> None:
    """Apply x <- x * a + b 8 * `steps` times to every element of a float32 CuPy array, in place, built with `switch` (GPU only)."""
    from ..validate import blocks_to_cover

    kernel = multiply_add_chain_c_kernel(switch)
    if values.dtype != np.float32 or values.ndim != 1:
        raise ValueError(f"values must be a 1D float32 array; got {values.dtype} with {values.ndim} dimension(s)")
    n = values.size
    kernel((blocks_to_cover(n, threads_per_block),), (threads_per_block,), (values, np.float32(a), np.float32(b), np.int32(steps), np.int64(n)))


#: Where flush-to-zero saves time: division, square root and a transcendental (the logarithm) take a slow path for a
#: subnormal operand unless it is flushed; an FFMA runs subnormals at full speed on current GPUs. Each operation is applied
#: 8 * `steps` times per element in registers and keeps a subnormal value subnormal (x / 0.999 grows by a factor of 1.67
#: over 512 steps; c * sqrt(x) and -d / log(x) have subnormal fixed points), so every step takes the slow path or is flushed.
SPECIAL_CHAIN_CUDA_C = r"""
extern "C" __global__ void special_chain_c(float* values, const int operation, const int steps, const long long n)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = values[i];
    const float divisor = 0.999f, root_scale = 3.1622776e-20f, log_scale = 1.0e-37f;
    for (int s = 0; s < steps; ++s) {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            if (operation == 0) x = x / divisor;
            else if (operation == 1) x = root_scale * sqrtf(x);
            else x = -log_scale / logf(x);
        }
    }
    values[i] = x;
}
"""
#: The operations of SPECIAL_CHAIN_CUDA_C, by the code its kernel takes.
SPECIAL_OPERATIONS = ("division", "square root", "logarithm")


@functools.cache
def _special_kernel(switch: str, device: int):
    from ..compilation import nvrtc_kernel

    return nvrtc_kernel(SPECIAL_CHAIN_CUDA_C, "special_chain_c", COMPILER_SWITCHES[switch])


def special_chain_c(values, operation: str, steps: int, switch: str = "defaults", threads_per_block: int = 256) -> None:
    """Apply one of SPECIAL_OPERATIONS 8 * `steps` times to every element of a float32 CuPy array, in place, built by NVRTC with
    `switch` (GPU only)."""
    from ..arrays import require_cupy
    from ..validate import blocks_to_cover

    if operation not in SPECIAL_OPERATIONS:
        raise ValueError(f"operation must be one of {list(SPECIAL_OPERATIONS)}; got {operation!r}")
    if switch not in COMPILER_SWITCHES:
        raise ValueError(f"switch must be one of {list(COMPILER_SWITCHES)}; got {switch!r}")
    cupy = require_cupy("CUDA C compiled with NVRTC's --ftz")
    if values.dtype != np.float32 or values.ndim != 1:
        raise ValueError(f"values must be a 1D float32 array; got {values.dtype} with {values.ndim} dimension(s)")
    kernel = _special_kernel(switch, cupy.cuda.Device().id)
    n = values.size
    kernel((blocks_to_cover(n, threads_per_block),), (threads_per_block,),
           (values, np.int32(SPECIAL_OPERATIONS.index(operation)), np.int32(steps), np.int64(n)))


def multiply_add_chain_c_reference(values: np.ndarray, a: float, b: float, steps: int) -> np.ndarray:
    """The chain in float64 from the float32 inputs and constants (the yardstick for both builds' rounding errors)."""
    x, a64, b64 = values.astype(np.float64), float(np.float32(a)), float(np.float32(b))
    for _ in range(8 * steps):
        x = x * a64 + b64
    return x


# ---------------------------------------------------------------------------------------------
# Intrinsics through libdevice (GPU only): sine and cosine together, and directed rounding.


@cuda.jit
def sin_cos_separate_kernel(sines, cosines, x):
    i = cuda.grid(1)
    if i < x.size:
        sines[i] = math.sin(x[i])
        cosines[i] = math.cos(x[i])


@cuda.jit
def sin_cos_together_kernel(sines, cosines, x):
    i = cuda.grid(1)
    if i < x.size:
        s, c = libdevice.sincosf(x[i])  # one call: the argument reduction is shared
        sines[i] = s
        cosines[i] = c


def _require_libdevice(feature: str) -> None:
    if mode.is_simulator():
        raise GPUOnlyFeature(feature, "the simulator runs Python's math module, which has no libdevice intrinsics")


@planned
def sin_cos(sines, cosines, x, together: bool = True, threads_per_block: int = 256):
    """sines, cosines <- sin(x), cos(x) for float32 device arrays; `together` uses libdevice.sincosf (GPU only)."""
    sines, cosines, x = as_numba(sines), as_numba(cosines), as_numba(x)
    _check_float32_pair(sines, x, ("sines", "x"))
    _check_float32_pair(cosines, x, ("cosines", "x"))
    blocks, tpb = launch_1d(x.shape[0], threads_per_block)
    if together:
        _require_libdevice("libdevice.sincosf")
        return bind(sin_cos_together_kernel, blocks, tpb, sines, cosines, x)
    else:
        return bind(sin_cos_separate_kernel, blocks, tpb, sines, cosines, x)


#: Rounding directions CUDA offers per instruction: to nearest even, toward zero, up (+inf), down (-inf).
ROUNDINGS = ("rn", "rz", "ru", "rd")


@cuda.jit
def add_rounded_kernel(out, a, b):
    """out[k, i] = a[i] + b[i] rounded to nearest, toward zero, up and down (k = 0..3)."""
    i = cuda.grid(1)
    if i < a.size:
        out[0, i] = libdevice.fadd_rn(a[i], b[i])
        out[1, i] = libdevice.fadd_rz(a[i], b[i])
        out[2, i] = libdevice.fadd_ru(a[i], b[i])
        out[3, i] = libdevice.fadd_rd(a[i], b[i])


@cuda.jit
def multiply_rounded_kernel(out, a, b):
    """out[k, i] = a[i] * b[i] rounded to nearest, toward zero, up and down (k = 0..3)."""
    i = cuda.grid(1)
    if i < a.size:
        out[0, i] = libdevice.fmul_rn(a[i], b[i])
        out[1, i] = libdevice.fmul_rz(a[i], b[i])
        out[2, i] = libdevice.fmul_ru(a[i], b[i])
        out[3, i] = libdevice.fmul_rd(a[i], b[i])


def rounded(out, a, b, operation: str = "add", threads_per_block: int = 256) -> None:
    """out[k] <- a + b (or a * b) rounded in direction ROUNDINGS[k], for float32 device arrays (GPU only)."""
    out, a, b = as_numba(out), as_numba(a), as_numba(b)
    check_device_array(a, "a", dtype=np.float32, ndim=1)
    check_device_array(b, "b", dtype=np.float32, ndim=1, shape=tuple(a.shape))
    check_device_array(out, "out", dtype=np.float32, ndim=2, shape=(len(ROUNDINGS), a.shape[0]))
    kernels = {"add": add_rounded_kernel, "multiply": multiply_rounded_kernel}
    if operation not in kernels:
        raise ValueError(f"operation must be 'add' or 'multiply'; got {operation!r}")
    _require_libdevice(f"Directed rounding (libdevice.f{'add' if operation == 'add' else 'mul'}_ru and friends)")
    blocks, tpb = launch_1d(a.shape[0], threads_per_block)
    kernels[operation][blocks, tpb](out, a, b)


def rounded_reference(a: np.ndarray, b: np.ndarray, operation: str = "add") -> np.ndarray:
    """NumPy reference of `rounded`: the exact result (float64 holds a float32 sum or product exactly here), rounded 4 ways."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 + b64 if operation == "add" else a64 * b64
    nearest = exact.astype(np.float32)
    up = np.where(nearest.astype(np.float64) < exact, np.nextafter(nearest, np.float32(np.inf)), nearest)
    down = np.where(nearest.astype(np.float64) > exact, np.nextafter(nearest, np.float32(-np.inf)), nearest)
    toward_zero = np.where(exact >= 0, down, up)
    return np.stack([nearest, toward_zero, up, down]).astype(np.float32)


@cuda.jit
def interval_sum_kernel(bounds, values):
    """One thread sums all values twice, rounding every addition down and up: bounds = [low, high]."""
    if cuda.grid(1) == 0:
        low = values[0]
        high = values[0]
        for k in range(1, values.size):
            low = libdevice.fadd_rd(low, values[k])
            high = libdevice.fadd_ru(high, values[k])
        bounds[0] = low
        bounds[1] = high


@planned
def interval_sum(bounds, values):
    """bounds <- [low, high], a float32 interval sure to hold the exact sum of `values` (one thread; GPU only)."""
    bounds, values = as_numba(bounds), as_numba(values)
    check_device_array(values, "values", dtype=np.float32, ndim=1)
    check_device_array(bounds, "bounds", dtype=np.float32, ndim=1, shape=(2,))
    if values.shape[0] < 1:
        raise ValueError("values must hold at least one element")
    _require_libdevice("Directed rounding (libdevice.fadd_rd / fadd_ru)")
    return bind(interval_sum_kernel, 1, 1, bounds, values)


# ---------------------------------------------------------------------------------------------
# Divergent warps: the branch is taken by thread (every warp runs both sides) or by warp.


@cuda.jit(device=True)
def _side_a(x, steps):
    for _ in range(steps):
        x = math.sin(x)
    return x


@cuda.jit(device=True)
def _side_b(x, steps):
    for _ in range(steps):
        x = math.cos(x)
    return x


@cuda.jit
def branch_by_thread_kernel(values, steps):
    """Even threads take one side, odd threads the other: every warp has both."""
    i = cuda.grid(1)
    if i < values.size:
        if i % 2 == 0:
            values[i] = _side_a(values[i], steps)
        else:
            values[i] = _side_b(values[i], steps)


@cuda.jit
def branch_by_warp_kernel(values, steps):
    """Even warps take one side, odd warps the other: no warp has both."""
    i = cuda.grid(1)
    if i < values.size:
        if (i // cuda.warpsize) % 2 == 0:
            values[i] = _side_a(values[i], steps)
        else:
            values[i] = _side_b(values[i], steps)


@cuda.jit
def parity_by_thread_kernel(x):
    """The book's example: x[i] = 0 for even i, 1 for odd i (a branch too small to matter)."""
    i = cuda.grid(1)
    if i < x.size:
        if i % 2 == 0:
            x[i] = 0
        else:
            x[i] = 1


@cuda.jit
def parity_by_warp_kernel(x):
    """The book's warp-uniform example: x[i] = 0 in even warps, 1 in odd warps."""
    i = cuda.grid(1)
    if i < x.size:
        if (i // cuda.warpsize) % 2 == 0:
            x[i] = 0
        else:
            x[i] = 1


BRANCHES = ("by_thread", "by_warp")


@planned
def branch(values, steps: int, split: str = "by_thread", threads_per_block: int = 256):
    """Apply sin (one side) or cos (other side) `steps` times per element of a float32 device array, split by thread or warp."""
    values = as_numba(values)
    check_device_array(values, "values", dtype=np.float32, ndim=1)
    if split not in BRANCHES:
        raise ValueError(f"split must be one of {BRANCHES}; got {split!r}")
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative int; got {steps!r}")
    blocks, tpb = launch_1d(values.shape[0], threads_per_block)
    check_whole_warps(tpb, "otherwise a block's last warp is partial and the by-warp split no longer follows warps")
    kernel = branch_by_thread_kernel if split == "by_thread" else branch_by_warp_kernel
    return bind(kernel, blocks, tpb, values, np.int32(steps))


def branch_reference(values: np.ndarray, steps: int, split: str = "by_thread", warp_size: int = 32) -> np.ndarray:
    """NumPy float64 reference of `branch`."""
    index = np.arange(values.size)
    side_a = (index % 2 == 0) if split == "by_thread" else ((index // warp_size) % 2 == 0)
    x = values.astype(np.float64)
    for _ in range(steps):
        x = np.where(side_a, np.sin(x), np.cos(x))
    return x


@planned
def parity(x, split: str = "by_thread", threads_per_block: int = 256):
    """The book's example: x <- 0/1 by even/odd element (`by_thread`) or by even/odd warp (`by_warp`), int32 array."""
    x = as_numba(x)
    check_device_array(x, "x", dtype=np.int32, ndim=1)
    if split not in BRANCHES:
        raise ValueError(f"split must be one of {BRANCHES}; got {split!r}")
    blocks, tpb = launch_1d(x.shape[0], threads_per_block)
    return bind((parity_by_thread_kernel if split == "by_thread" else parity_by_warp_kernel), blocks, tpb, x)
