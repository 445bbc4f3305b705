"""Chapter 2 kernels: what limits a kernel, how much bandwidth it reaches, and why.

1. The book's limiting-factor experiment (§2.2): a *base* kernel (``a = sin(b)``), a *memory*
   kernel with the same loads and stores but no math, and a *math* kernel with the math but no
   memory traffic, each compiled with and without fast math.
2. Copy kernels that differ only in how many bytes each thread keeps in flight: one element per
   thread, several elements per thread (instruction-level parallelism), and 16-byte elements
   through a ``complex128`` view of the data.
3. Kernels for the roofline: a kernel whose arithmetic intensity is set by a loop count, a kernel
   that measures the device's fused multiply-add rate, and a pointer chase that measures the
   latency of one load from device memory.

Every kernel has a launcher that checks its arguments, so that a wrong dtype, a block over the
device's limit or a misaligned view is a clear Python error.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numba
import numpy as np
from numba import cuda

from .. import book
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import bind, build, planned
from ..timing import Timing, benchmark
from ..validate import (
    blocks_to_cover,
    check_blocks,
    check_device_array,
    check_float_dtype,
    check_same_shape,
    check_threads_per_block,
)

# ---------------------------------------------------------------------------------------------
# 1. The limiting-factor experiment. Each kernel body is written once and compiled twice: with
#    fastmath=True, Numba replaces float32 sin by the hardware approximation (sin.approx.f32).


def _base(a, b):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = math.sin(b[i])


def _math(a, x0, dx, write_threshold):
    i = cuda.grid(1)
    # The argument varies across the threads of a warp, so the sine cannot be computed once per
    # warp; it stays in [x0, x0 + blockDim * dx), the range the base kernel's data cover. The lane
    # is cast to int16 because float32 * int16 stays float32, while float32 * int32 is float64.
    v = math.sin(x0 + dx * numba.int16(cuda.threadIdx.x))
    # A store the compiler cannot prove dead: it depends on the result and on an argument. With
    # write_threshold above 1 it never happens, so the kernel touches no device memory.
    if v > write_threshold and i < a.size:
        a[i] = v


def _grid_only(a, x0, dx, write_threshold):
    i = cuda.grid(1)
    v = x0 + dx * numba.int16(cuda.threadIdx.x)  # the math kernel's argument, without its sine
    if v > write_threshold and i < a.size:
        a[i] = v


base_kernel = cuda.jit(_base)
base_fastmath_kernel = cuda.jit(fastmath=True)(_base)
math_kernel = cuda.jit(_math)
math_fastmath_kernel = cuda.jit(fastmath=True)(_math)
grid_only_kernel = cuda.jit(_grid_only)


@cuda.jit
def copy_kernel(out, inp):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = inp[i]


def _one_per_thread(a, b, threads_per_block: int) -> tuple[int, int]:
    check_device_array(a, "a", ndim=1)
    dtype = check_float_dtype(a.dtype, "a.dtype")
    check_device_array(b, "b", dtype=dtype, ndim=1)
    check_same_shape(a, b, ("a", "b"))
    (tpb,) = check_threads_per_block(threads_per_block)
    blocks = blocks_to_cover(a.shape[0], tpb)
    check_blocks(blocks)
    return blocks, tpb


@planned
def base(a, b, fastmath: bool = False, threads_per_block: int = 256):
    """The book's base kernel: a[i] = sin(b[i]) for float32/float64 device arrays, one thread per element."""
    blocks, tpb = _one_per_thread(a, b, threads_per_block)
    kernel = base_fastmath_kernel if fastmath else base_kernel
    return bind(kernel, blocks, tpb, a, b)


@planned
def memory_only(a, b, threads_per_block: int = 256):
    """The book's memory kernel: a[i] = b[i], the base kernel's loads and stores without its math."""
    blocks, tpb = _one_per_thread(a, b, threads_per_block)
    return bind(copy_kernel, blocks, tpb, a, b)


@planned
def math_only(a, fastmath: bool = False, threads_per_block: int = 256, write_threshold: float = 2.0,
              x0: float = -0.5, dx: float | None = None):
    """The book's math kernel: one sine per thread of `a`'s length, stored only if it exceeds `write_threshold`.

    With the default threshold (2.0, above any sine) nothing is written. The argument of thread t
    of a block is x0 + dx * t, with dx = 1 / threads_per_block by default (arguments in [x0, x0 + 1)).
    """
    check_device_array(a, "a", ndim=1)
    dtype = check_float_dtype(a.dtype, "a.dtype")
    (tpb,) = check_threads_per_block(threads_per_block)
    blocks = blocks_to_cover(a.shape[0], tpb)
    check_blocks(blocks)
    step = 1.0 / tpb if dx is None else dx
    kernel = math_fastmath_kernel if fastmath else math_kernel
    return bind(kernel, blocks, tpb, a, dtype.type(x0), dtype.type(step), dtype.type(write_threshold))


@planned
def grid_only(a, threads_per_block: int = 256, write_threshold: float = 2.0, x0: float = -0.5, dx: float | None = None):
    """The math kernel without its sine: the same grid, the same argument and the same (never taken) store."""
    check_device_array(a, "a", ndim=1)
    dtype = check_float_dtype(a.dtype, "a.dtype")
    (tpb,) = check_threads_per_block(threads_per_block)
    blocks = blocks_to_cover(a.shape[0], tpb)
    check_blocks(blocks)
    step = 1.0 / tpb if dx is None else dx
    return bind(grid_only_kernel, blocks, tpb, a, dtype.type(x0), dtype.type(step), dtype.type(write_threshold))


def math_only_reference(n: int, threads_per_block: int = 256, x0: float = -0.5, dx: float | None = None,
                        dtype=np.float32) -> np.ndarray:
    """What `math_only(..., write_threshold=-2)` writes (every element), computed in float64 with NumPy."""
    step = np.float64(dtype(1.0 / threads_per_block if dx is None else dx))
    lane = np.arange(n) % threads_per_block
    return np.sin(np.float64(dtype(x0)) + step * lane)


@dataclass(frozen=True)
class BoundClassification:
    """What limits a kernel, judged from the times of its base, memory-only and math-only versions."""

    label: str
    memory_share: float
    math_share: float
    overlap: float
    reason: str

    def __str__(self) -> str:
        return f"{self.label}: {self.reason}"


#: Below this share of the base time, neither memory nor math alone explains the kernel's time.
LATENCY_SHARE = 0.6


def classify_bound(base_ms: float, memory_ms: float, math_ms: float) -> BoundClassification:
    """Classify a kernel as memory-, math- or latency-bound from three times (ms, or any one unit).

    The part whose time comes closest to the base kernel's time limits it. If neither comes close
    (both under LATENCY_SHARE of the base time) the two overlap poorly: too little work is in
    flight to hide either, which the book calls latency-bound.
    """
    if min(base_ms, memory_ms, math_ms) <= 0:
        raise ValueError(f"times must be positive; got base={base_ms}, memory={memory_ms}, math={math_ms}")
    memory_share, math_share = memory_ms / base_ms, math_ms / base_ms
    # The fraction of the shorter part that runs hidden under the longer one (1: fully hidden).
    overlap = max(0.0, min(1.0, (memory_ms + math_ms - base_ms) / min(memory_ms, math_ms)))
    if max(memory_share, math_share) < LATENCY_SHARE:
        label = "latency-bound"
        reason = (f"memory alone takes {memory_share:.0%} and math alone {math_share:.0%} of the base time: "
                  "neither explains it, so too little work is in flight to overlap them")
    elif memory_ms >= math_ms:
        label = "memory-bound"
        reason = f"memory alone takes {memory_share:.0%} of the base time, math alone {math_share:.0%}"
    else:
        label = "math-bound"
        reason = f"math alone takes {math_share:.0%} of the base time, memory alone {memory_share:.0%}"
    return BoundClassification(label, memory_share, math_share, overlap, reason)


def pace_of(limit: LimitTimes, empty_ms: float, copy_gbs: float, near_copy: float = 0.9) -> BoundClassification:
    """What sets this device's pace: the book's rule (classify_bound) checked against the empty grid's time (ms) and the
    memory kernel's share of the device-to-device copy (GB/s).

    The book's rule reads three times alone. On a current GPU the math kernel may take just the time of starting its
    threads (the empty grid's), and the memory kernel may move bytes well below the copy: then neither the arithmetic
    nor the memory's bandwidth sets the pace, and the kernel is latency-bound (notebook 2.3 shows what does).
    """
    base_ms, memory_ms, math_ms = limit.base.median_ms, limit.memory.median_ms, limit.math.median_ms
    rule = classify_bound(base_ms, memory_ms, math_ms)
    of_copy = limit.memory_gbs / copy_gbs
    sine_share = max(0.0, math_ms - empty_ms) / base_ms  # the arithmetic's own time, less starting the threads
    if rule.label == "memory-bound" and of_copy >= near_copy:
        return BoundClassification(rule.label, rule.memory_share, rule.math_share, rule.overlap,
                                   f"{rule.reason}, and the memory kernel moves bytes at {of_copy:.0%} of the copy")
    if rule.label == "math-bound" and sine_share >= LATENCY_SHARE:
        return BoundClassification(rule.label, rule.memory_share, rule.math_share, rule.overlap,
                                   f"{rule.reason}; the arithmetic's own time, beyond starting the threads, is {sine_share:.0%} of it")
    if rule.label == "latency-bound":
        return rule
    reason = (f"the book's rule reads {rule.label} ({rule.reason}), but math alone takes {math_ms / empty_ms:.2f} times the "
              f"empty grid's {1e3 * empty_ms:.0f} µs (the arithmetic's own share: {sine_share:.0%} of the base time) and the "
              f"memory kernel moves bytes at {of_copy:.0%} of the copy: starting the blocks ({1e3 * empty_ms:.0f} µs) and memory "
              f"alone ({1e3 * memory_ms:.0f} µs) each take less than the kernel's {1e3 * base_ms:.0f} µs, so neither limit sets "
              "the pace: the loads in flight do (notebook 2.3)")
    return BoundClassification("latency-bound", rule.memory_share, rule.math_share, rule.overlap, reason)


BOOK_LIMIT_GPUS = ("C2050", "K20")  # the GPUs of the book's limiting-factor runs (§2.2)


def book_limit_times(gpu: str, fastmath: bool) -> dict[str, float]:
    """The book's base, memory and math kernel times (us) on 'C2050' or 'K20', from gpucourse.book."""
    variant = "fastmath" if fastmath else "nofastmath"
    return {kind: book.figure(f"ch2_limit_{kind}_{variant}_{gpu}").number for kind in ("base", "memory", "math")}


BOOK_LIMIT_N = 8 * 1024 * 1024  # elements of the book's limitingFactor program (n = 8*1024*1024 floats)


@dataclass(frozen=True)
class LimitTimes:
    """The limiting-factor experiment on this device: the three kernels' timings for one fast-math setting."""

    fastmath: bool
    n: int
    itemsize: int
    base: Timing
    memory: Timing
    math: Timing

    @property
    def classification(self) -> BoundClassification:
        """What limits the base kernel, from the three median times."""
        return classify_bound(self.base.median_ms, self.memory.median_ms, self.math.median_ms)

    @property
    def bytes_moved(self) -> int:
        """Bytes the base and memory kernels move: each element read once and written once."""
        return 2 * self.n * self.itemsize

    @property
    def base_gbs(self) -> float:
        """Effective bandwidth of the base kernel in GB/s."""
        return self.base.bandwidth_gbs(self.bytes_moved)

    @property
    def memory_gbs(self) -> float:
        """Effective bandwidth of the memory kernel in GB/s."""
        return self.memory.bandwidth_gbs(self.bytes_moved)


def time_limit_experiment(a, b, fastmath: bool, threads_per_block: int = 256, repeat: int | None = None,
                          warmup: int = 2) -> LimitTimes:
    """Time the base, memory-only and math-only kernels on a = f(b) with `gpucourse.benchmark`."""
    timings = {
        "base": benchmark(lambda: base(a, b, fastmath, threads_per_block), repeat=repeat, warmup=warmup),
        "memory": benchmark(lambda: memory_only(a, b, threads_per_block), repeat=repeat, warmup=warmup),
        "math": benchmark(lambda: math_only(a, fastmath, threads_per_block), repeat=repeat, warmup=warmup),
    }
    return LimitTimes(fastmath, int(a.shape[0]), int(a.dtype.itemsize), **timings)


# ---------------------------------------------------------------------------------------------
# 2. Copies that keep more bytes in flight per thread. A thread that loads several elements
#    before it stores any has several loads in flight at once; the compiler keeps the local
#    array in registers because every index into it is known once the loops are unrolled.


@functools.cache
def ilp_copy_kernel(elements_per_thread: int):
    """The copy kernel in which each thread moves `elements_per_thread` elements, all loaded before any is stored."""
    if elements_per_thread < 1:
        raise LaunchConfigError(f"elements_per_thread must be at least 1; got {elements_per_thread}")
    ept = int(elements_per_thread)  # a compile-time constant of the kernel below

    @cuda.jit
    def copy_ilp_kernel(out, inp):
        # A block covers ept * blockDim consecutive elements; thread t takes t, t + blockDim, ...,
        # so each of its loads is one coalesced access of the whole warp.
        start = cuda.blockIdx.x * cuda.blockDim.x * ept + cuda.threadIdx.x
        step = cuda.blockDim.x
        held = cuda.local.array(ept, inp.dtype)
        for k in range(ept):
            j = start + k * step
            if j < inp.size:
                held[k] = inp[j]
        for k in range(ept):
            j = start + k * step
            if j < out.size:
                out[j] = held[k]

    return copy_ilp_kernel


@planned
def copy_ilp(out, inp, elements_per_thread: int = 4, threads_per_block: int = 256):
    """out[:] = inp[:] for 1D device arrays of one dtype, each thread moving `elements_per_thread` elements."""
    check_device_array(out, "out", ndim=1)
    check_device_array(inp, "inp", dtype=out.dtype, ndim=1)
    check_same_shape(out, inp, ("out", "inp"))
    (tpb,) = check_threads_per_block(threads_per_block)
    kernel = ilp_copy_kernel(elements_per_thread)
    blocks = blocks_to_cover(out.shape[0], tpb * elements_per_thread)
    check_blocks(blocks)
    return bind(kernel, blocks, tpb, out, inp)


@planned
def copy(out, inp, threads_per_block: int = 256):
    """out[:] = inp[:], one element per thread (the book's simple copy kernel)."""
    check_device_array(out, "out", ndim=1)
    check_device_array(inp, "inp", dtype=out.dtype, ndim=1)
    check_same_shape(out, inp, ("out", "inp"))
    (tpb,) = check_threads_per_block(threads_per_block)
    blocks = blocks_to_cover(out.shape[0], tpb)
    check_blocks(blocks)
    return bind(copy_kernel, blocks, tpb, out, inp)


WIDE_BYTES = 16  # a float4's worth: the widest access a CUDA thread can make
# A 16-byte type Numba can copy. It moves one as two 8-byte loads issued back to back (LDG.E.64 on an
# H100, measurements/ch2.md), not one 128-bit load, but each thread still has 16 bytes on their way.
WIDE_DTYPE = np.dtype(np.complex128)


def device_address(array) -> int:
    """The address of an array's first element (device pointer on a GPU, host address in the simulator)."""
    interface = getattr(array, "__cuda_array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    host = getattr(array, "_ary", array)  # the simulator's FakeCUDAArray wraps a NumPy array
    return int(np.asarray(host).ctypes.data)


def wide_split(n: int, itemsize: int) -> tuple[int, int]:
    """How `copy_wide` splits n elements of `itemsize` bytes: (16-byte words, elements left over at the end)."""
    if itemsize < 1 or WIDE_BYTES % itemsize:
        raise ArrayArgumentError(f"elements of {itemsize} bytes do not pack into {WIDE_BYTES}-byte words; use copy() instead")
    per_word = WIDE_BYTES // itemsize
    return n // per_word, n % per_word


@planned
def copy_wide(out, inp, threads_per_block: int = 256, elements_per_thread: int = 1):
    """out[:] = inp[:] in 16-byte elements: the arrays are viewed as complex128 (no copy).

    Works for any element size that divides 16 (float32: 4 elements per access). Elements past
    the last whole 16-byte word (fewer than 16 / itemsize) are copied by a second, tiny launch.
    Both arrays must start on a 16-byte boundary, as every allocation does.
    """
    check_device_array(out, "out", ndim=1)
    check_device_array(inp, "inp", dtype=out.dtype, ndim=1)
    check_same_shape(out, inp, ("out", "inp"))
    if not (out.strides[0] == inp.strides[0] == out.dtype.itemsize):
        raise ArrayArgumentError("copy_wide needs contiguous arrays; got a strided view. Copy it with copy() instead.")
    words, rest = wide_split(out.shape[0], out.dtype.itemsize)
    for name, array in (("out", out), ("inp", inp)):
        if device_address(array) % WIDE_BYTES:
            raise ArrayArgumentError(
                f"{name} does not start on a {WIDE_BYTES}-byte boundary (it is a slice at an odd offset), so it cannot "
                f"be read {WIDE_BYTES} bytes at a time. Pass the whole allocation, or use copy()."
            )
    body = words * (WIDE_BYTES // out.dtype.itemsize)
    launches = []
    if words:
        launches.append(build(copy_ilp, out[:body].view(WIDE_DTYPE), inp[:body].view(WIDE_DTYPE), elements_per_thread, threads_per_block))
    if rest:  # a one-block launch for the last few elements, on purpose
        launches.append(build(copy, out[body:], inp[body:], threads_per_block=32))
    return launches


COPY_ACCESS_BYTES = (4, 16)  # float32 element by element, or 16 bytes (four float32) per access


@planned
def copy_variant(out, inp, threads_per_block: int = 256, elements_per_thread: int = 1, access_bytes: int = 4):
    """One copy of float32 arrays, `elements_per_thread` elements of `access_bytes` (4, or 16 as complex128) bytes per thread."""
    if access_bytes == out.dtype.itemsize and elements_per_thread == 1:
        return build(copy, out, inp, threads_per_block)  # the book's simple copy kernel
    if access_bytes == out.dtype.itemsize:
        return build(copy_ilp, out, inp, elements_per_thread, threads_per_block)
    if access_bytes == WIDE_BYTES:
        return build(copy_wide, out, inp, threads_per_block, elements_per_thread)
    raise LaunchConfigError(f"access_bytes must be {out.dtype.itemsize} (one element) or {WIDE_BYTES}; got {access_bytes}")


def copy_variant_kernel(elements_per_thread: int = 1, access_bytes: int = 4):
    """The kernel `copy_variant` launches for this configuration (for its compiler report)."""
    if elements_per_thread == 1 and access_bytes == 4:
        return copy_kernel
    return ilp_copy_kernel(elements_per_thread)


def copy_registers(elements_per_thread: int = 1, access_bytes: int = 4) -> int:
    """Registers per thread of the float32 copy `copy_variant` runs for this configuration (after it ran once; GPU only)."""
    from ..compilation import resource_usage

    wanted = "complex128" if access_bytes == WIDE_BYTES else "float32"
    usages = resource_usage(copy_variant_kernel(elements_per_thread, access_bytes))
    for usage in usages:
        if wanted in usage.signature:
            return usage.registers
    raise ValueError(f"the copy for {elements_per_thread} x {access_bytes} bytes has not been compiled for {wanted} yet: run it once")


@dataclass(frozen=True)
class InFlight:
    """How many bytes of loads one SM keeps on their way for a copy configuration, and the bandwidth that allows."""

    threads_per_block: int
    elements_per_thread: int
    access_bytes: int
    registers: int
    resident_threads_per_sm: int
    limited_by: str
    bytes_in_flight_per_sm: int
    cap_gbs: float


def in_flight(threads_per_block: int, elements_per_thread: int, access_bytes: int, registers: int, limits,
              multiprocessors: int, latency_ns: float, ceiling_gbs: float | None = None) -> InFlight:
    """Resident threads per SM (from the occupancy rules), their loads in flight, and the copy bandwidth cap (GB/s).

    Each resident thread issues all its `elements_per_thread` loads of `access_bytes` before it
    waits, so an SM has resident threads x elements x access bytes on their way. Little's law
    turns that into a bandwidth; `ceiling_gbs` (the measured copy), if given, caps it.
    """
    from ..occupancy import occupancy

    occ = occupancy(threads_per_block, registers, 0, limits)
    resident = occ.active_warps * limits.warp_size
    nbytes = resident * elements_per_thread * access_bytes
    cap = copy_bandwidth_cap_gbs(nbytes, multiprocessors, latency_ns)
    if ceiling_gbs is not None:
        cap = min(cap, ceiling_gbs)
    return InFlight(threads_per_block, elements_per_thread, access_bytes, registers, resident, occ.limited_by, nbytes, cap)


def copy_bandwidth_cap_gbs(bytes_in_flight_per_sm: float, multiprocessors: int, latency_ns: float) -> float:
    """The most effective GB/s a copy can reach when each SM has `bytes_in_flight_per_sm` bytes of loads on their way.

    Each SM then reads bytes_in_flight / latency bytes per ns, and a copy writes as much as it
    reads: effective bandwidth (read + written) is twice the read rate.
    """
    return 2 * multiprocessors * latency_limited_gbs(bytes_in_flight_per_sm, latency_ns)


# ---------------------------------------------------------------------------------------------
# 3. The roofline. `intensity_kernel` reads one element, applies 4 * steps dependent fused
#    multiply-adds to it and writes it: 8 * steps flops for 2 * itemsize bytes, so the loop count
#    sets the arithmetic intensity. cuda.fma makes each step one instruction whatever the compiler
#    would otherwise contract.


@cuda.jit
def intensity_kernel(out, inp, a, b, steps):
    i = cuda.grid(1)
    if i < out.size:
        x = inp[i]
        for _ in range(steps):
            x = cuda.fma(x, a, b)
            x = cuda.fma(x, a, b)
            x = cuda.fma(x, a, b)
            x = cuda.fma(x, a, b)
        out[i] = x


INTENSITY_A, INTENSITY_B = 0.999, 0.001  # x -> 0.999 x + 0.001 stays near [-1, 1] for any number of steps


@planned
def intensity(out, inp, steps: int, threads_per_block: int = 256):
    """out = f^(4*steps)(inp) with f(x) = 0.999 x + 0.001, one fused multiply-add per application (float32/float64)."""
    check_device_array(out, "out", ndim=1)
    dtype = check_float_dtype(out.dtype, "out.dtype")
    check_device_array(inp, "inp", dtype=dtype, ndim=1)
    check_same_shape(out, inp, ("out", "inp"))
    if steps < 0:
        raise ValueError(f"steps must be >= 0; got {steps}")
    (tpb,) = check_threads_per_block(threads_per_block)
    blocks = blocks_to_cover(out.shape[0], tpb)
    check_blocks(blocks)
    return bind(intensity_kernel, blocks, tpb, out, inp, dtype.type(INTENSITY_A), dtype.type(INTENSITY_B), np.int32(steps))


def intensity_reference(inp: np.ndarray, steps: int) -> np.ndarray:
    """`intensity` computed with NumPy in float64."""
    x = inp.astype(np.float64)
    a, b = np.float64(inp.dtype.type(INTENSITY_A)), np.float64(inp.dtype.type(INTENSITY_B))
    for _ in range(4 * steps):
        x = x * a + b
    return x


def intensity_flops(n: int, steps: int) -> int:
    """Floating-point operations of `intensity` on n elements: 4 * steps fused multiply-adds of 2 flops each."""
    return 8 * steps * n


def intensity_bytes(n: int, itemsize: int) -> int:
    """Bytes `intensity` moves through device memory: each element read once and written once."""
    return 2 * n * itemsize


@cuda.jit
def fma_peak_kernel(out, a, b, steps):
    i = cuda.grid(1)
    # Four independent chains: a warp can issue the next multiply-add of another chain while one
    # waits for its previous result, so the arithmetic units never wait on latency.
    x0 = a * numba.int16(cuda.threadIdx.x & 7)  # int16: float32 * int16 stays float32
    x1 = x0 + b
    x2 = x1 + b
    x3 = x2 + b
    for _ in range(steps):
        x0 = cuda.fma(x0, a, b)
        x1 = cuda.fma(x1, a, b)
        x2 = cuda.fma(x2, a, b)
        x3 = cuda.fma(x3, a, b)
        x0 = cuda.fma(x0, a, b)
        x1 = cuda.fma(x1, a, b)
        x2 = cuda.fma(x2, a, b)
        x3 = cuda.fma(x3, a, b)
        x0 = cuda.fma(x0, a, b)
        x1 = cuda.fma(x1, a, b)
        x2 = cuda.fma(x2, a, b)
        x3 = cuda.fma(x3, a, b)
        x0 = cuda.fma(x0, a, b)
        x1 = cuda.fma(x1, a, b)
        x2 = cuda.fma(x2, a, b)
        x3 = cuda.fma(x3, a, b)
    if i < out.size:
        out[i] = x0 + x1 + x2 + x3  # stored, so that the compiler keeps the arithmetic


@planned
def fma_peak(out, steps: int, threads_per_block: int = 256):
    """Run 16 * steps fused multiply-adds in each of out.size threads (float32/float64) and store their sum."""
    check_device_array(out, "out", ndim=1)
    dtype = check_float_dtype(out.dtype, "out.dtype")
    if steps < 0:
        raise ValueError(f"steps must be >= 0; got {steps}")
    (tpb,) = check_threads_per_block(threads_per_block)
    blocks = blocks_to_cover(out.shape[0], tpb)
    check_blocks(blocks)
    return bind(fma_peak_kernel, blocks, tpb, out, dtype.type(INTENSITY_A), dtype.type(INTENSITY_B), np.int32(steps))


def fma_peak_reference(n: int, steps: int, threads_per_block: int = 256, dtype=np.float32) -> np.ndarray:
    """What `fma_peak` stores, computed with NumPy in float64."""
    a, b = np.float64(dtype(INTENSITY_A)), np.float64(dtype(INTENSITY_B))
    x0 = np.float64(dtype(a)) * (np.arange(n) % threads_per_block & 7)
    x0 = x0.astype(dtype).astype(np.float64)
    chains = [x0, x0 + b, x0 + 2 * b, x0 + 3 * b]
    for _ in range(4 * steps):
        chains = [x * a + b for x in chains]
    return chains[0] + chains[1] + chains[2] + chains[3]


def fma_peak_flops(n: int, steps: int) -> int:
    """Floating-point operations of `fma_peak` with n threads: 16 * steps fused multiply-adds of 2 flops each."""
    return 32 * steps * n


#: FP32 lanes per SM by compute capability (NVIDIA's architecture whitepapers); the driver does not report them.
FP32_LANES_PER_SM = {
    (2, 0): 32, (2, 1): 48, (3, 0): 192, (3, 5): 192, (3, 7): 192, (5, 0): 128, (5, 2): 128, (5, 3): 128,
    (6, 0): 64, (6, 1): 128, (6, 2): 128, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128,
    (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (10, 3): 128, (12, 0): 128, (12, 1): 128,
}

#: FP64 lanes per SM by compute capability (same sources); consumer parts have few.
FP64_LANES_PER_SM = {
    (2, 0): 16, (3, 0): 8, (3, 5): 64, (3, 7): 64, (6, 0): 32, (7, 0): 32, (7, 5): 2, (8, 0): 32, (8, 6): 2, (8, 9): 2,
    (9, 0): 64, (10, 0): 64, (12, 0): 2,
}


def theoretical_fp32_gflops(multiprocessors: int, clock_khz: float, compute_capability: tuple[int, int]) -> float | None:
    """Peak float32 GFLOP/s: SMs x FP32 lanes x 2 flops per fused multiply-add x clock; None for an unknown architecture."""
    lanes = FP32_LANES_PER_SM.get(tuple(compute_capability))
    if lanes is None:
        return None
    return multiprocessors * lanes * 2 * clock_khz * 1e3 / 1e9


# ---------------------------------------------------------------------------------------------
# 4. Latency: one thread follows a chain of indices through a large array. Each load needs the
#    result of the one before, so the time per step is the latency of one load from memory.


@cuda.jit
def pointer_chase_kernel(chain, slot_stride, steps, position):
    if cuda.grid(1) == 0:
        slot = position[0]  # carry on where the last launch stopped: every step lands on a line not yet in a cache
        for _ in range(steps):
            slot = chain[slot * slot_stride]
        position[0] = slot


def make_chain(slots: int, slot_stride: int, seed: int = 0) -> np.ndarray:
    """An int32 array of slots * slot_stride elements whose slot heads form one random cycle through all slots.

    chain[s * slot_stride] holds the next slot after s; the slots are `slot_stride` elements apart,
    so that every step lands on a different cache line.
    """
    if slots < 2 or slot_stride < 1:
        raise ValueError(f"need at least 2 slots and a stride of at least 1; got {slots}, {slot_stride}")
    if slots * slot_stride >= 2**31:
        raise ValueError("the chain must have fewer than 2**31 elements (int32 indices)")
    order = np.random.default_rng(seed).permutation(slots).astype(np.int32)
    chain = np.zeros(slots * slot_stride, dtype=np.int32)
    chain[order * slot_stride] = np.roll(order, -1)  # one cycle: order[0] -> order[1] -> ... -> order[0]
    return chain


def chase_reference(chain: np.ndarray, slot_stride: int, steps: int, start: int = 0) -> int:
    """The slot `pointer_chase` reaches from slot `start`, followed on the host."""
    slot = int(start)
    for _ in range(steps):
        slot = int(chain[slot * slot_stride])
    return slot


@planned
def pointer_chase(chain, slot_stride: int, steps: int, position):
    """Follow `steps` links of `chain` (from `make_chain`) in one thread, from slot position[0]; store the slot reached there."""
    check_device_array(chain, "chain", dtype=np.int32, ndim=1)
    check_device_array(position, "position", dtype=np.int32, ndim=1)
    if chain.shape[0] % slot_stride:
        raise ArrayArgumentError(f"chain has {chain.shape[0]} elements, not a whole number of slots of {slot_stride}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0; got {steps}")
    return bind(pointer_chase_kernel, 1, 1, chain, np.int32(slot_stride), np.int32(steps), position)  # one thread, on purpose


@dataclass(frozen=True)
class Latency:
    """The latency of one dependent load (ns) and the timing it comes from."""

    ns: float
    steps: int
    timing: Timing


def load_latency(slots: int, slot_stride: int, steps: int, repeat: int = 5, seed: int = 0) -> Latency:
    """Time `steps` dependent loads through a fresh chain of `slots` slots; return the time of one (ns)."""
    from ..arrays import device_empty, to_device

    chain = to_device(make_chain(slots, slot_stride, seed))
    position = to_device(np.zeros(1, np.int32))
    # The upload left part of the chain in the L2 cache: stream twice its size through the cache first.
    scratch_in = device_empty(2 * chain.shape[0], np.int32)
    scratch_out = device_empty(2 * chain.shape[0], np.int32)
    copy(scratch_out, scratch_in)
    timing = benchmark(lambda: pointer_chase(chain, slot_stride, steps, position), repeat=repeat)
    return Latency(timing.median_ms * 1e6 / steps, steps, timing)


# ---------------------------------------------------------------------------------------------
# 5. Little's law: bytes in flight = bandwidth x latency. GB/s x ns = bytes, no other factor.


def bytes_in_flight_needed(bandwidth_gbs: float, latency_ns: float) -> float:
    """Bytes that must be on their way at every moment to sustain `bandwidth_gbs` GB/s when a load takes `latency_ns` ns."""
    if bandwidth_gbs < 0 or latency_ns <= 0:
        raise ValueError("bandwidth must be >= 0 and latency > 0")
    return bandwidth_gbs * latency_ns


def latency_limited_gbs(bytes_in_flight: float, latency_ns: float) -> float:
    """The most GB/s that `bytes_in_flight` bytes on their way can sustain when a load takes `latency_ns` ns."""
    if latency_ns <= 0:
        raise ValueError("latency must be positive")
    return bytes_in_flight / latency_ns


def implied_latency_ns(bytes_in_flight_per_sm: float, multiprocessors: int, copy_gbs: float) -> float:
    """The time per load (ns) that Little's law implies for a copy reaching `copy_gbs` effective GB/s with these bytes in flight."""
    if copy_gbs <= 0:
        raise ValueError("bandwidth must be positive")
    return 2 * multiprocessors * bytes_in_flight_per_sm / copy_gbs


def bytes_per_block(threads_per_block: int, elements_per_thread: int, access_bytes: int) -> int:
    """Bytes one block of a copy reads (it writes as many): threads x accesses per thread x bytes per access."""
    return threads_per_block * elements_per_thread * access_bytes


def blocks_per_second(copy_gbs: float, block_bytes: int) -> float:
    """Blocks a copy ran per second to reach `copy_gbs` effective GB/s with blocks that each read `block_bytes` bytes."""
    if block_bytes <= 0:
        raise ValueError("a block must move at least one byte")
    return copy_gbs * 1e9 / (2 * block_bytes)


def measure_fma_rate(dtype=np.float32, repeat: int | None = None) -> float:
    """This device's fused multiply-add rate in GFLOP/s for `dtype` (float32 or float64), timed with `fma_peak` at `ch2_peak_flops` sizes."""
    from ..arrays import device_empty
    from ..roofline import gflops
    from ..sizes import problem_size

    threads, steps = problem_size("ch2_peak_flops")
    out = device_empty(threads, check_float_dtype(dtype))
    timing = benchmark(lambda: fma_peak(out, steps), repeat=repeat)
    return gflops(fma_peak_flops(threads, steps), timing.median_ms)
