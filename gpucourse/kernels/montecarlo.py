"""Chapter 5 Monte Carlo kernels: pi from points in a quarter circle (book §5.2-5.3), European options (§5.5).

Pi. N points (x, y) uniform in the unit square; the fraction M/N that falls in the quarter circle
x^2 + y^2 <= 1 estimates pi/4, with a standard error of sqrt(p(1 - p)/N), p = pi/4. The book keeps
all x first and all y after them in one array of 2N numbers from cuRAND, and counts with a kernel
(here `count_inside`); `fused_pi` draws the points inside the kernel (xoroshiro128+) and never
stores them. How x^2 + y^2 is evaluated (`RULES`) decides a few points out of 10^8: see
`gpucourse.floating_point`.

Options. Each path draws one normal number Z, prices S_T = S exp(drift + vol Z) and adds the
discounted payoffs of a call and a put, and their squares, to float64 sums (block sums by shuffles,
then one atomic per block): one pass gives both prices and their standard errors
(`gpucourse.options.estimate_from_sums`). Each payoff is summed as its deviation from the payoff of
the median path (`gpucourse.options.median_payoffs`), so the sum of squares measures the spread,
not the mean, and the variance computed from it does not cancel.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numba
import numpy as np
from numba import cuda
from numba.cuda.random import xoroshiro128p_dtype, xoroshiro128p_type

from .. import mode
from ..arrays import require_cupy
from ..errors import ArrayArgumentError
from ..floating_point import fma32
from ..launch import bind, planned
from ..options import EuropeanOption, median_payoffs
from ..validate import blocks_to_cover, check_blocks, check_device_array, check_threads_per_block, check_whole_warps
from .random_numbers import copy_state, normal_float32, uniform_float32, uniform_float64
from .reductions import block_sum_shuffle, default_threads, resident_blocks
from .ufuncs import zero_kernel

#: How a kernel evaluates x^2 + y^2: as the compiler likes it, or with each rounding spelled out.
RULES = ("default", "separate", "fma_x", "fma_y")

# ---------------------------------------------------------------------------------------------
# x^2 + y^2, four ways. The simulator runs Python, where a * b + c always rounds twice and there is
# no libdevice; there the explicit roundings are plain operators and the fused ones are computed
# exactly by gpucourse.floating_point.fma32, so every rule means the same in both modes.

if mode.is_simulator():

    def _mul_rn(a, b):
        return a * b

    def _add_rn(a, b):
        return a + b

    def _fma(a, b, c):
        return fma32(a, b, c) if isinstance(a, np.float32) else np.float64(a) * b + c  # float64: no exact emulation needed here

else:
    from numba.cuda import libdevice

    def _mul_rn(a, b):
        return libdevice.fmul_rn(a, b)

    def _add_rn(a, b):
        return libdevice.fadd_rn(a, b)

    def _fma(a, b, c):
        return cuda.fma(a, b, c)


def _device(function):
    return function if mode.is_simulator() else cuda.jit(device=True, inline=True)(function)


mul_rn = _device(_mul_rn)
add_rn = _device(_add_rn)
fused = _device(_fma)


@_device
def squared_default(x, y):
    """x*x + y*y as written: the compiler may contract it into one fused multiply-add (the GPU does)."""
    return x * x + y * y


@_device
def squared_separate(x, y):
    """x*x + y*y with three roundings, never fused (libdevice's __fmul_rn / __fadd_rn on a GPU): a CPU's answer."""
    return add_rn(mul_rn(x, x), mul_rn(y, y))


@_device
def squared_fma_x(x, y):
    """fma(x, x, y*y): y*y rounded, then x*x added to it exactly and rounded once."""
    return fused(x, x, mul_rn(y, y))


@_device
def squared_fma_y(x, y):
    """fma(y, y, x*x): the book's GPU result for its three points."""
    return fused(y, y, mul_rn(x, x))


_SQUARED = {"default": squared_default, "separate": squared_separate, "fma_x": squared_fma_x, "fma_y": squared_fma_y}


def _check_rule(rule: str) -> None:
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}; got {rule!r}")


# ---------------------------------------------------------------------------------------------
# Pi from stored points: x = xy[:n], y = xy[n:]


@functools.cache
def squared_distance_kernel(rule: str):
    """A kernel (xy, out): out[i] = x_i^2 + y_i^2 by `rule` (x = xy[:n], y = xy[n:], n = out.size)."""
    _check_rule(rule)
    SQUARED = _SQUARED[rule]

    @cuda.jit
    def squared_distance(xy, out):
        n = out.size
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            out[i] = SQUARED(xy[i], xy[i + n])

    return squared_distance


@planned
def squared_distances(xy, out, rule: str = "default", threads_per_block: int | None = None):
    """out[i] <- x_i^2 + y_i^2 evaluated by `rule`, for the 2n-element point array xy (x first, then y)."""
    _check_points(xy, out.shape[0] if hasattr(out, "shape") else 0)
    check_device_array(out, "out", dtype=xy.dtype, ndim=1)
    (tpb,) = check_threads_per_block(threads_per_block or default_threads())
    blocks = resident_blocks(tpb, out.shape[0])
    return bind(squared_distance_kernel(rule), blocks, tpb, xy, out)


#: Why the kernels that end in block_sum_shuffle take only whole warps.
_WHOLE_WARPS = "its block sum shuffles values across whole warps (a partial warp leaves lanes of the full mask idle)"


@functools.cache
def count_inside_kernel(rule: str):
    """A kernel (xy, count): adds to count[0] how many points (xy[i], xy[i + n]) have x^2 + y^2 <= 1 (n = xy.size // 2)."""
    _check_rule(rule)
    SQUARED = _SQUARED[rule]

    @cuda.jit
    def count_inside(xy, count):
        n = xy.size // 2
        inside = 0
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            if SQUARED(xy[i], xy[i + n]) <= 1:
                inside += 1
        inside = block_sum_shuffle(cuda.shared.array(32, numba.int64), numba.int64(inside))
        if cuda.threadIdx.x == 0:
            cuda.atomic.add(count, 0, inside)

    return count_inside


def _check_points(xy, n: int | None = None) -> None:
    check_device_array(xy, "xy", ndim=1)
    if np.dtype(xy.dtype).name not in ("float32", "float64"):
        raise ArrayArgumentError(f"xy must be float32 or float64; got {np.dtype(xy.dtype).name}.")
    if xy.shape[0] % 2:
        raise ArrayArgumentError(f"xy holds all x, then all y: it needs an even number of elements; got {xy.shape[0]}.")
    if n is not None and xy.shape[0] != 2 * n:
        raise ArrayArgumentError(f"xy must hold 2 x {n} = {2 * n} numbers (x first, then y); got {xy.shape[0]}.")


def _check_count(count) -> None:
    check_device_array(count, "count", dtype=np.int64, shape=(1,))


@planned
def count_inside(xy, count, rule: str = "default", threads_per_block: int | None = None):
    """count[0] <- the number of points (xy[i], xy[i + n]) inside the quarter circle: zero it, then count (block sums + atomics)."""
    _check_points(xy)
    _check_count(count)
    (tpb,) = check_threads_per_block(threads_per_block or default_threads())
    check_whole_warps(tpb, _WHOLE_WARPS)
    blocks = resident_blocks(tpb, xy.shape[0] // 2)
    return bind(zero_kernel, 1, 1, count), bind(count_inside_kernel(rule), blocks, tpb, xy, count)


def pi_estimate(inside: int, n: int) -> float:
    """4 M / N."""
    return 4.0 * int(inside) / int(n)


def pi_standard_error(n: int) -> float:
    """The standard error of 4 M / N: 4 sqrt(p (1 - p) / N) with p = pi / 4."""
    p = math.pi / 4
    return 4.0 * math.sqrt(p * (1 - p) / n)


def host_count_inside(xy: np.ndarray) -> int:
    """The CPU's count (NumPy: x*x + y*y rounded three times, never fused), for the 2n-element host array xy."""
    xy = np.asarray(xy)
    n = xy.size // 2
    x, y = xy[:n], xy[n:]
    return int(np.count_nonzero(x * x + y * y <= xy.dtype.type(1)))


# ---------------------------------------------------------------------------------------------
# Pi with CuPy's element-wise and reduction kernels (GPU only)


@functools.cache
def cupy_count_kernel():
    """cupy.ReductionKernel counting x*x + y*y <= 1: the map and the sum in one kernel (the book's CUF kernel)."""
    cupy = require_cupy("cupy.ReductionKernel")
    return cupy.ReductionKernel("T x, T y", "int64 inside", "(x * x + y * y <= (T)1) ? 1 : 0", "a + b", "inside = a", "0",
                                "gpucourse_pi_count")


def cupy_count_inside(xy, out=None):
    """The count with cupy.ReductionKernel on the 2n-element CuPy array xy (a 0-d int64 array, or written to `out`)."""
    n = xy.size // 2
    return cupy_count_kernel()(xy[:n], xy[n:], out=out)


def cupy_count_nonzero(xy):
    """The count with plain CuPy: x*x, y*y, their sum and the mask are four temporary arrays; count_nonzero reads the last."""
    cupy = require_cupy("CuPy")
    n = xy.size // 2
    x, y = xy[:n], xy[n:]
    return cupy.count_nonzero(x * x + y * y <= 1)


# ---------------------------------------------------------------------------------------------
# Pi without stored points: each thread draws its points with its own xoroshiro128+ state


@functools.cache
def fused_pi_kernel(dtype_name: str):
    """A kernel (states, n, count): thread t draws points t, t + T, ... (T = states.size) and the block adds its count to count[0]."""
    DRAW = uniform_float32 if dtype_name == "float32" else uniform_float64

    @cuda.jit
    def fused_pi(states, n, count):
        t = cuda.grid(1)
        threads = states.size
        inside = 0
        if t < threads:
            state = cuda.local.array(1, xoroshiro128p_type)  # the thread's state, in registers while it draws
            copy_state(states, t, state, 0)
            for _ in range(t, n, threads):
                x = DRAW(state, 0)
                y = DRAW(state, 0)
                if x * x + y * y <= 1:
                    inside += 1
            copy_state(state, 0, states, t)
        inside = block_sum_shuffle(cuda.shared.array(32, numba.int64), numba.int64(inside))
        if cuda.threadIdx.x == 0:
            cuda.atomic.add(count, 0, inside)

    return fused_pi


@planned
def fused_pi(states, n: int, count, dtype: str = "float32", threads_per_block: int | None = None):
    """count[0] <- points inside out of n drawn in the kernel (one thread per state), never stored."""
    check_device_array(states, "states", dtype=xoroshiro128p_dtype, ndim=1)
    _check_count(count)
    if int(n) < 0:
        raise ValueError(f"n must be >= 0; got {n}")
    if np.dtype(dtype).name not in ("float32", "float64"):
        raise ArrayArgumentError(f"dtype must be float32 or float64; got {dtype}.")
    (tpb,) = check_threads_per_block(threads_per_block or default_threads())
    check_whole_warps(tpb, _WHOLE_WARPS)
    blocks = blocks_to_cover(states.shape[0], tpb)
    check_blocks(blocks)
    return bind(zero_kernel, 1, 1, count), bind(fused_pi_kernel(np.dtype(dtype).name), blocks, tpb, states, np.int64(n), count)


# ---------------------------------------------------------------------------------------------
# European options


@cuda.jit(device=True, inline=True)
def normal_float64(states, t):
    """A float64 standard normal number from two float64 uniforms (Box-Muller; 1 - u keeps the logarithm finite).

    numba.cuda.random's xoroshiro128p_normal_float64 builds its result from float32 uniforms.
    """
    u1 = 1.0 - uniform_float64(states, t)
    u2 = uniform_float64(states, t)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@cuda.jit(device=True, inline=True)
def add_payoffs(sums, call, put, call2, put2):
    """Add a block's four totals to sums[0..3] (each block sum by shuffles, then one atomic per sum from thread 0)."""
    call = block_sum_shuffle(cuda.shared.array(32, numba.float64), call)
    call2 = block_sum_shuffle(cuda.shared.array(32, numba.float64), call2)
    put = block_sum_shuffle(cuda.shared.array(32, numba.float64), put)
    put2 = block_sum_shuffle(cuda.shared.array(32, numba.float64), put2)
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(sums, 0, call)
        cuda.atomic.add(sums, 1, call2)
        cuda.atomic.add(sums, 2, put)
        cuda.atomic.add(sums, 3, put2)


@functools.cache
def european_fused_kernel(dtype_name: str):
    """A kernel (states, paths, S, E, drift, vol, discount, call_shift, put_shift, sums): each thread prices paths t, t + T, ...

    with draws from its state, and adds each payoff's deviation from its shift, and that deviation squared, to float64 sums.
    """
    FLOAT = numba.from_dtype(np.dtype(dtype_name))
    SINGLE = dtype_name == "float32"

    @cuda.jit
    def european_fused(states, paths, S, E, drift, vol, discount, call_shift, put_shift, sums):
        t = cuda.grid(1)
        threads = states.size
        call = 0.0
        put = 0.0
        call2 = 0.0
        put2 = 0.0
        zero = FLOAT(0)
        if t < threads:
            state = cuda.local.array(1, xoroshiro128p_type)  # the thread's state, in registers while it draws
            copy_state(states, t, state, 0)
            for _ in range(t, paths, threads):
                z = normal_float32(state, 0) if SINGLE else normal_float64(state, 0)
                final = S * math.exp(drift + vol * FLOAT(z))
                c = discount * max(final - E, zero) - call_shift  # the deviation from the median path's payoff
                p = discount * max(E - final, zero) - put_shift
                call += c
                put += p
                call2 += c * c
                put2 += p * p
            copy_state(state, 0, states, t)
        add_payoffs(sums, call, put, call2, put2)

    return european_fused


@functools.cache
def european_from_normals_kernel():
    """A kernel (z, S, E, drift, vol, discount, call_shift, put_shift, sums): the same pricing from stored normal numbers z."""

    @cuda.jit
    def european_from_normals(z, S, E, drift, vol, discount, call_shift, put_shift, sums):
        call = 0.0
        put = 0.0
        call2 = 0.0
        put2 = 0.0
        zero = z[0] * 0
        for i in range(cuda.grid(1), z.size, cuda.gridsize(1)):
            final = S * math.exp(drift + vol * z[i])
            c = discount * max(final - E, zero) - call_shift  # the deviation from the median path's payoff
            p = discount * max(E - final, zero) - put_shift
            call += c
            put += p
            call2 += c * c
            put2 += p * p
        add_payoffs(sums, call, put, call2, put2)

    return european_from_normals


@cuda.jit
def zero_four_kernel(sums):
    i = cuda.grid(1)
    if i < 4:
        sums[i] = 0


def _option_arguments(option: EuropeanOption, dtype) -> tuple:
    kind = np.dtype(dtype).type  # the shifts are float32 values, exact in either type
    return tuple(kind(v) for v in (option.S, option.E, option.drift, option.volatility, option.discount, *median_payoffs(option)))


def _check_sums(sums) -> None:
    check_device_array(sums, "sums", dtype=np.float64, shape=(4,))


@planned
def european_fused(states, paths: int, option: EuropeanOption, sums, dtype: str = "float32", threads_per_block: int | None = None):
    """sums <- [call, call^2, put, put^2] summed over `paths` paths drawn in the kernel (one thread per state)."""
    check_device_array(states, "states", dtype=xoroshiro128p_dtype, ndim=1)
    _check_sums(sums)
    name = np.dtype(dtype).name
    if name not in ("float32", "float64"):
        raise ArrayArgumentError(f"dtype must be float32 or float64; got {dtype}.")
    (tpb,) = check_threads_per_block(threads_per_block or default_threads())
    check_whole_warps(tpb, _WHOLE_WARPS)
    blocks = blocks_to_cover(states.shape[0], tpb)
    check_blocks(blocks)
    return (bind(zero_four_kernel, 1, 32, sums),
            bind(european_fused_kernel(name), blocks, tpb, states, np.int64(paths), *_option_arguments(option, name), sums))


@planned
def european_from_normals(z, option: EuropeanOption, sums, threads_per_block: int | None = None):
    """sums <- [call, call^2, put, put^2] summed over the paths of the stored normal numbers z (float32 or float64)."""
    check_device_array(z, "z", ndim=1)
    name = np.dtype(z.dtype).name
    if name not in ("float32", "float64"):
        raise ArrayArgumentError(f"z must be float32 or float64; got {name}.")
    _check_sums(sums)
    (tpb,) = check_threads_per_block(threads_per_block or default_threads())
    check_whole_warps(tpb, _WHOLE_WARPS)
    blocks = resident_blocks(tpb, z.shape[0])
    return bind(zero_four_kernel, 1, 32, sums), bind(european_from_normals_kernel(), blocks, tpb, z, *_option_arguments(option, name), sums)


# ---------------------------------------------------------------------------------------------
# Everything a notebook and tools/gpu_ch5.py compare, by name


def default_state_count(work: int) -> int:
    """xoroshiro128+ states for a job of `work` draws: one thread per state, enough to fill the GPU, never one per draw."""
    from ..device import current_device

    device = current_device()
    if device.simulated:
        return max(1, min(work, 64))
    full = (device.multiprocessors or 1) * (device.max_threads_per_multiprocessor or 2048)
    return max(32, min(full, work))


def pi_variants(n: int, seed: int = 1234, dtype: str = "float32", states=None) -> dict:
    """Ways to count n points, each a function of no arguments that leaves its count in its own array (see `pi_counts`).

    Returns {name: (call, count_array, reads_stored_points)}. The variants that generate write into
    one buffer; those that only count read another, filled once here, so all of them count the same
    points (their GB/s is meaningful: they read 2n stored numbers and generate nothing).
    """
    from ..arrays import array_module, to_device
    from .random_numbers import CurandGenerator, make_states, xoroshiro_uniform

    xp = array_module()
    dtype = np.dtype(dtype)
    states = states if states is not None else make_states(default_state_count(n), seed)
    variants: dict = {}
    xy = xp.empty(2 * n, dtype=dtype) if mode.on_gpu() else to_device(np.empty(2 * n, dtype=dtype))
    stored, _ = uniform_points(n, seed + 1, dtype.name)

    def counter():
        return xp.zeros(1, dtype=np.int64) if mode.on_gpu() else to_device(np.zeros(1, dtype=np.int64))

    fused_count, stored_count, two_step_count = counter(), counter(), counter()
    variants["fused: draw and count in one kernel (xoroshiro128+)"] = (
        lambda: fused_pi(states, n, fused_count, dtype.name), fused_count, False)
    variants["xoroshiro128+ kernel writes 2n numbers, then count"] = (
        lambda: (xoroshiro_uniform(xy, states), count_inside(xy, two_step_count)), two_step_count, False)
    variants["count stored points (Numba kernel)"] = (lambda: count_inside(stored, stored_count), stored_count, True)
    if mode.on_gpu():
        generator = CurandGenerator("xorwow", seed)
        curand_count, reduction_count, nonzero_count = counter(), counter(), counter()
        variants["cuRAND XORWOW writes 2n numbers, then count"] = (
            lambda: (generator.uniform(xy), count_inside(xy, curand_count)), curand_count, False)
        variants["count stored points (cupy.ReductionKernel, two inputs)"] = (
            lambda: reduction_count.__setitem__(0, cupy_count_inside(stored)), reduction_count, True)
        variants["count stored points (cupy.count_nonzero, temporaries)"] = (
            lambda: nonzero_count.__setitem__(0, cupy_count_nonzero(stored)), nonzero_count, True)
    return variants


def pi_counts(variants: dict) -> dict[str, int]:
    """The count each variant left in its array (run them first)."""
    from ..arrays import to_host

    return {name: int(to_host(count)[0]) for name, (_, count, _) in variants.items()}


def option_variants(paths: int, option: EuropeanOption, seed: int = 1234, states=None) -> dict:
    """Ways to price `paths` paths, {name: (call, sums_array)}: fused kernels in float32 and float64, and cuRAND normals then a pricing kernel."""
    from ..arrays import array_module, to_device
    from .random_numbers import CurandGenerator, make_states

    xp = array_module()
    states = states if states is not None else make_states(default_state_count(paths), seed)

    def sums():
        return xp.zeros(4, dtype=np.float64) if mode.on_gpu() else to_device(np.zeros(4, dtype=np.float64))

    variants: dict = {}
    for name in ("float32", "float64"):
        out = sums()
        variants[f"fused kernel, {name} (xoroshiro128+)"] = ((lambda o, d: lambda: european_fused(states, paths, option, o, d))(out, name), out)
    if mode.on_gpu():
        for name in ("float32", "float64"):
            z = xp.empty(paths + paths % 2, dtype=name)
            generator = CurandGenerator("xorwow", seed)
            out = sums()
            variants[f"cuRAND normals ({name}), then a pricing kernel"] = (
                (lambda g, zz, o: lambda: (g.normal(zz), european_from_normals(zz[:paths], option, o)))(generator, z, out), out)
    return variants


# ---------------------------------------------------------------------------------------------
# Experiments the notebooks and tools/gpu_ch5.py share


def curand_points(n: int, seed: int, dtype: str = "float32"):
    """2n uniform numbers from a fresh cuRAND default (XORWOW) generator seeded with `seed`: the book's x, then y. GPU only."""
    cupy = require_cupy("cuRAND")
    from .random_numbers import CurandGenerator

    xy = cupy.empty(2 * int(n), dtype=dtype)
    generator = CurandGenerator("default", seed)
    generator.uniform(xy)
    generator.close()
    return xy


def curand_pi(n: int, seed: int, dtype: str = "float32", rule: str = "default") -> int:
    """The book's experiment: the count of points inside among n points from cuRAND (seed `seed`), counted on the GPU. GPU only."""
    cupy = require_cupy("cuRAND")
    xy = curand_points(n, seed, dtype)
    count = cupy.zeros(1, dtype=np.int64)
    count_inside(xy, count, rule)
    return int(count.get()[0])


def inside_by_rule(xy, rules=RULES) -> dict[str, np.ndarray]:
    """For each rule, the host boolean array 'point i is inside' as the device computes it (plus 'host': NumPy's answer)."""
    from ..arrays import array_module, to_device, to_host

    n = xy.shape[0] // 2
    out = array_module().empty(n, dtype=xy.dtype) if mode.on_gpu() else to_device(np.empty(n, dtype=xy.dtype))
    result = {}
    for rule in rules:
        squared_distances(xy, out, rule)
        result[rule] = to_host(out) <= 1
    host = to_host(xy)
    result["host"] = host[:n] * host[:n] + host[n:] * host[n:] <= 1
    return result


def disagreements(inside: dict[str, np.ndarray], first: str, second: str) -> np.ndarray:
    """Indices of the points that `first` and `second` classify differently."""
    return np.flatnonzero(inside[first] != inside[second])


FMAD_SOURCE = r"""
extern "C" __global__ void squared_distance(const float* xy, float* out, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = xy[i] * xy[i] + xy[i + n] * xy[i + n];
}
"""


@functools.cache
def cupy_squared_distance_kernel(fmad: bool):
    """The same x*x + y*y in CUDA C, compiled by NVRTC with contraction on (--fmad=true) or off (--fmad=false). GPU only."""
    cupy = require_cupy("NVRTC's --fmad option")
    return cupy.RawKernel(FMAD_SOURCE, "squared_distance", options=(f"--fmad={'true' if fmad else 'false'}",))


def cupy_squared_distances(xy, out, fmad: bool) -> None:
    """out[i] <- x_i*x_i + y_i*y_i with the CUDA C kernel compiled with or without contraction (float32 CuPy arrays)."""
    n = out.size
    if xy.size != 2 * n or xy.dtype != np.float32 or out.dtype != np.float32:
        raise ArrayArgumentError("xy must be float32 with 2 * out.size elements, out float32")
    cupy_squared_distance_kernel(bool(fmad))((resident_blocks(256, n),), (256,), (xy, out, np.int64(n)))


def estimate_series(run: Callable, counts, repeats: int) -> dict[int, list]:
    """Call run(n) `repeats` times for each n in `counts`; return {n: [results]} (each call draws fresh numbers)."""
    return {int(n): [run(int(n)) for _ in range(int(repeats))] for n in counts}


def pi_convergence(counts, repeats: int, dtype: str = "float32", seed: int = 99) -> dict[int, list[float]]:
    """`repeats` estimates of pi for each point count, with the fused kernel; the streams continue, so no two share a draw."""
    from ..arrays import array_module, to_device, to_host
    from .random_numbers import make_states

    states = make_states(default_state_count(max(counts)), seed)
    count = array_module().zeros(1, dtype=np.int64) if mode.on_gpu() else to_device(np.zeros(1, np.int64))

    def estimate(n: int) -> float:
        fused_pi(states, n, count, dtype)
        return pi_estimate(int(to_host(count)[0]), n)

    return estimate_series(estimate, counts, repeats)


def option_convergence(paths_list, repeats: int, option: EuropeanOption, dtype: str = "float32", seed: int = 77) -> dict[int, list]:
    """`repeats` estimates (gpucourse.options.OptionEstimate) for each path count, with the fused kernel."""
    from ..arrays import array_module, to_device, to_host
    from ..options import estimate_from_sums
    from .random_numbers import make_states

    states = make_states(default_state_count(max(paths_list)), seed)
    sums = array_module().zeros(4, dtype=np.float64) if mode.on_gpu() else to_device(np.zeros(4, np.float64))

    def estimate(paths: int):
        european_fused(states, paths, option, sums, dtype)
        return estimate_from_sums(to_host(sums), paths, option)

    return estimate_series(estimate, paths_list, repeats)


def book_option_run(paths: int, option: EuropeanOption, dtype: str = "float32", seed: int = 1234, ordering: str | None = None):
    """The book's whole program (§5.5): make and seed a cuRAND generator, draw `paths` normals, price, read the result. GPU only."""
    cupy = require_cupy("cuRAND")
    from ..options import estimate_from_sums
    from .random_numbers import CurandGenerator

    generator = CurandGenerator("default", seed, ordering)
    z = cupy.empty(paths + paths % 2, dtype=dtype)
    sums = cupy.empty(4, dtype=np.float64)
    generator.normal(z)
    european_from_normals(z[:paths], option, sums)
    estimate = estimate_from_sums(sums.get(), paths, option)
    generator.close()
    return estimate


def uniform_points(n: int, seed: int, dtype: str = "float32"):
    """2n uniform numbers on the device (x first, then y) and where they came from: cuRAND's default generator on a GPU,
    the xoroshiro128+ kernel in the simulator (cuRAND needs a GPU)."""
    from ..arrays import to_device
    from .random_numbers import make_states, xoroshiro_uniform

    if mode.on_gpu():
        return curand_points(n, seed, dtype), f"cuRAND default (XORWOW) generator, seed {seed}"
    xy = to_device(np.empty(2 * int(n), dtype=dtype))
    xoroshiro_uniform(xy, make_states(default_state_count(2 * int(n)), seed))
    return xy, f"xoroshiro128+ kernel, seed {seed} (the simulator has no cuRAND)"
