"""Chapter 5, random numbers (book §5.1): cuRAND's generators through CuPy, and Numba's xoroshiro128+ in kernels.

Two ways to get random numbers on a GPU:

* the **host API** of cuRAND (the book's `curandCreateGenerator` ... `curandGenerateUniform`): one
  call fills an array. `CurandGenerator` wraps it through CuPy (`cupy.cuda.curand`), step for step as
  the book does; `cupy.random.default_rng()` and its bit generators (XORWOW, Philox, MRG32k3a) are
  CuPy's own interface to the same family of generators. GPU only.
* a **generator inside the kernel**: `numba.cuda.random` gives each thread an xoroshiro128+ state
  (`create_xoroshiro128p_states`), and the kernel draws what it needs without writing it to memory.
  The states are made on the host, each one 2**64 steps further along the sequence than the one
  before (a "jump" of 128 iterations per state), so making one state per number costs far more than
  generating the number; a grid-stride loop over few states is the fix.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
import weakref

import numpy as np
from numba import cuda
from numba.cuda.random import (
    create_xoroshiro128p_states,
    xoroshiro128p_dtype,
    xoroshiro128p_normal_float32,
    xoroshiro128p_type,
    xoroshiro128p_uniform_float32,
    xoroshiro128p_uniform_float64,
)

from .. import mode
from ..arrays import require_cupy
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import bind, planned
from ..timing import alone
from ..validate import blocks_to_cover, check_blocks, check_device_array, check_threads_per_block
from .reductions import default_threads

#: cuRAND's pseudo-random generator types (curandRngType_t), by the names the course uses.
CURAND_KINDS: dict[str, int] = {"default": 100, "xorwow": 101, "mrg32k3a": 121, "mtgp32": 141, "mt19937": 142, "philox": 161}
#: cuRAND's orderings (curandOrdering_t): how the results of the many parallel streams are laid out in the output.
CURAND_ORDERINGS: dict[str, int] = {"best": 100, "default": 101, "seeded": 102, "legacy": 103}
#: CuPy's bit generators for `cupy.random.Generator`, by name.
BIT_GENERATORS = ("XORWOW", "Philox4x3210", "MRG32k3a")


def _cupy_array(out, name: str, dtypes: tuple[str, ...]):
    cupy = require_cupy("cuRAND")
    if not isinstance(out, cupy.ndarray):
        raise ArrayArgumentError(f"{name} must be a CuPy array (cuRAND writes device memory); got {type(out).__name__}.")
    if np.dtype(out.dtype).name not in dtypes:
        raise ArrayArgumentError(f"{name} must be {' or '.join(dtypes)}; got {np.dtype(out.dtype).name}.")
    if not out.flags.c_contiguous:
        raise ArrayArgumentError(f"{name} must be contiguous: cuRAND fills a block of memory.")
    return cupy


class CurandGenerator:
    """A cuRAND host-API generator made through CuPy: create, seed, generate into arrays; destroyed with the object. GPU only."""

    def __init__(self, kind: str = "default", seed: int = 1234, ordering: str | None = None) -> None:
        require_cupy("cuRAND")
        from cupy.cuda import curand

        if kind not in CURAND_KINDS:
            raise ValueError(f"kind must be one of {', '.join(CURAND_KINDS)}; got {kind!r}")
        self._curand = curand
        self.kind, self.seed, self.ordering = kind, int(seed), ordering
        self.handle = curand.createGenerator(CURAND_KINDS[kind])
        self._finalizer = weakref.finalize(self, curand.destroyGenerator, self.handle)
        if ordering is not None:
            if ordering not in CURAND_ORDERINGS:
                raise ValueError(f"ordering must be one of {', '.join(CURAND_ORDERINGS)}; got {ordering!r}")
            if not hasattr(curand, "setGeneratorOrdering"):
                from ..errors import EnvironmentProblem

                raise EnvironmentProblem("this CuPy's cuRAND binding has no setGeneratorOrdering: upgrade CuPy to choose an ordering")
            curand.setGeneratorOrdering(self.handle, CURAND_ORDERINGS[ordering])
        curand.setPseudoRandomGeneratorSeed(self.handle, self.seed)

    def _on_current_stream(self) -> None:
        import cupy

        self._curand.setStream(self.handle, cupy.cuda.get_current_stream().ptr)

    def uniform(self, out) -> None:
        """Fill the float32 or float64 CuPy array `out` with uniform numbers in (0, 1] (curandGenerateUniform[Double])."""
        _cupy_array(out, "out", ("float32", "float64"))
        self._on_current_stream()
        generate = self._curand.generateUniform if out.dtype == np.float32 else self._curand.generateUniformDouble
        generate(self.handle, out.data.ptr, out.size)

    def normal(self, out, mean: float = 0.0, std: float = 1.0) -> None:
        """Fill `out` (float32 or float64, an even number of elements) with normal numbers (curandGenerateNormal[Double])."""
        _cupy_array(out, "out", ("float32", "float64"))
        if out.size % 2:
            raise ArrayArgumentError(f"cuRAND makes normal numbers in pairs (Box-Muller): out needs an even size; got {out.size}.")
        self._on_current_stream()
        generate = self._curand.generateNormal if out.dtype == np.float32 else self._curand.generateNormalDouble
        generate(self.handle, out.data.ptr, out.size, float(mean), float(std))

    def close(self) -> None:
        """Destroy the generator now (curandDestroyGenerator)."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"CurandGenerator({self.kind!r}, seed={self.seed}, ordering={self.ordering!r})"


def first_uniforms(count: int = 4, dtype=np.float32, seed: int = 1234, kind: str = "default") -> np.ndarray:
    """The first `count` uniform numbers of a fresh cuRAND generator (the book's first example prints 4 of 20). GPU only."""
    cupy = require_cupy("cuRAND")
    out = cupy.empty(max(count, 20), dtype=dtype)
    generator = CurandGenerator(kind, seed)
    generator.uniform(out)
    generator.close()
    return out[:count].get()


def bit_generator(name: str, seed: int):
    """`cupy.random.Generator` over the CuPy bit generator `name` (XORWOW, Philox4x3210, MRG32k3a). GPU only."""
    cupy = require_cupy("cupy.random bit generators")
    if name not in BIT_GENERATORS:
        raise ValueError(f"name must be one of {', '.join(BIT_GENERATORS)}; got {name!r}")
    return cupy.random.Generator(getattr(cupy.random, name)(seed))


# ---------------------------------------------------------------------------------------------
# xoroshiro128+ inside kernels (numba.cuda.random): both modes
#
# The course's kernels draw through `uniform_float32`, `uniform_float64` and `normal_float32`: on a
# GPU these are numba.cuda.random's own device functions; in the simulator they are twins in plain
# Python, the same arithmetic on Python integers, because the simulator runs numba.cuda.random's
# functions through Numba's object mode, about a millisecond per number.

_MASK64 = (1 << 64) - 1

if mode.is_simulator():

    def _rotl(x: int, k: int) -> int:
        return ((x << k) | (x >> (64 - k))) & _MASK64

    def _next(states, t) -> int:
        state = states[t]
        s0, s1 = int(state["s0"]), int(state["s1"])
        result = (s0 + s1) & _MASK64
        s1 ^= s0
        state["s0"] = _rotl(s0, 55) ^ s1 ^ ((s1 << 14) & _MASK64)
        state["s1"] = _rotl(s1, 36)
        return result

    def uniform_float64(states, t):
        """The next float64 in [0, 1) of thread t's stream (53 random bits)."""
        return np.float64((_next(states, t) >> 11) * 2.0**-53)

    def uniform_float32(states, t):
        """The next float32 of thread t's stream: the float64 draw rounded to float32 (it can round up to 1.0)."""
        return np.float32(uniform_float64(states, t))

    def normal_float32(states, t):
        """A float32 standard normal number (Box-Muller from two float32 uniforms, the second value dropped)."""
        u1 = uniform_float32(states, t)
        u2 = uniform_float32(states, t)
        return np.float32(math.sqrt(-2.0 * math.log(u1)) * math.cos(np.float32(2 * math.pi) * u2))

else:
    uniform_float32 = xoroshiro128p_uniform_float32
    uniform_float64 = xoroshiro128p_uniform_float64
    normal_float32 = xoroshiro128p_normal_float32


@cuda.jit(device=True, inline=True)
def copy_state(source, i, target, j):
    """target[j] <- source[i], one 8-byte word at a time (a record copy would move 16 single bytes)."""
    target[j]["s0"] = source[i]["s0"]
    target[j]["s1"] = source[i]["s1"]


def make_states(count: int, seed: int, subsequence_start: int = 0):
    """`count` xoroshiro128+ states on the device, each 2**64 draws after the one before (made on the host)."""
    if count < 1:
        raise LaunchConfigError(f"ask for at least one state; got {count}")
    with warnings.catch_warnings(), np.errstate(over="ignore"):
        # In the simulator Numba compiles the host-side jumps in object mode and says so; uint64 overflow is the algorithm.
        warnings.simplefilter("ignore", category=getattr(__import__("numba").core.errors, "NumbaWarning", Warning))
        return create_xoroshiro128p_states(int(count), seed=seed, subsequence_start=subsequence_start)


def identical_states(count: int, seed: int):
    """`count` copies of ONE xoroshiro128+ state (the mistake of seeding every thread alike), on the device."""
    one = make_states(1, seed).copy_to_host()
    return cuda.to_device(np.repeat(one, int(count)))


@alone
def state_creation_seconds(count: int, seed: int = 1, repeat: int = 3) -> float:
    """Median host time in s to make `count` states with `create_xoroshiro128p_states` (jumps and the copy)."""
    make_states(1, seed)  # compile the host-side jump function first
    samples = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        states = make_states(count, seed)
        cuda.synchronize()
        samples.append(time.perf_counter() - start)
        del states
    return float(np.median(samples))


@functools.cache
def uniform_kernel(dtype_name: str, state_in_registers: bool = True):
    """A kernel (states, out): thread t draws with states[t] into out[t], out[t + threads], ... (a grid-stride loop).

    With `state_in_registers` the thread copies its state into a local variable first and writes it
    back at the end; otherwise every draw reads and writes the 16-byte state in global memory.
    """
    DRAW = uniform_float32 if dtype_name == "float32" else uniform_float64

    if state_in_registers:

        @cuda.jit
        def fill_uniform(states, out):
            t = cuda.grid(1)
            threads = states.size
            if t < threads:
                state = cuda.local.array(1, xoroshiro128p_type)
                copy_state(states, t, state, 0)
                for i in range(t, out.size, threads):
                    out[i] = DRAW(state, 0)
                copy_state(state, 0, states, t)

        return fill_uniform

    @cuda.jit
    def fill_uniform_global_state(states, out):
        t = cuda.grid(1)
        threads = states.size
        if t < threads:
            for i in range(t, out.size, threads):
                out[i] = DRAW(states, t)

    return fill_uniform_global_state


@planned
def xoroshiro_uniform(out, states, threads_per_block: int | None = None, state_in_registers: bool = True):
    """out <- uniform numbers in [0, 1), one thread per state and a grid-stride loop over out (float32 or float64)."""
    check_device_array(out, "out", ndim=1)
    check_device_array(states, "states", dtype=xoroshiro128p_dtype, ndim=1)
    name = np.dtype(out.dtype).name
    if name not in ("float32", "float64"):
        raise ArrayArgumentError(f"out must be float32 or float64; got {name}.")
    (tpb,) = check_threads_per_block(threads_per_block or default_threads())
    blocks = blocks_to_cover(states.shape[0], tpb)
    check_blocks(blocks)
    return bind(uniform_kernel(name, bool(state_in_registers)), blocks, tpb, states, out)


@cuda.jit
def streams_kernel(states, out):
    """out[k, t] <- the k-th uniform float64 of thread t's stream (threads across columns: coalesced writes)."""
    t = cuda.grid(1)
    if t < out.shape[1]:
        state = cuda.local.array(1, xoroshiro128p_type)
        copy_state(states, t, state, 0)
        for k in range(out.shape[0]):
            out[k, t] = uniform_float64(state, 0)
        copy_state(state, 0, states, t)


def thread_streams(states, per_stream: int):
    """A (per_stream, states) host array: column t holds the first `per_stream` numbers of thread t's stream."""
    check_device_array(states, "states", dtype=xoroshiro128p_dtype, ndim=1)
    count = states.shape[0]
    out = cuda.device_array((int(per_stream), count), dtype=np.float64)
    threads = min(128, count)
    streams_kernel[blocks_to_cover(count, threads), threads](states, out)
    return out.copy_to_host()


def largest_correlation(columns: np.ndarray) -> float:
    """The largest |correlation| between two different columns (streams) of `columns`."""
    matrix = np.corrcoef(columns, rowvar=False)
    np.fill_diagonal(matrix, 0.0)
    return float(np.nanmax(np.abs(matrix)))


def independent_correlation_scale(per_stream: int, streams: int) -> float:
    """About the largest |correlation| among `streams` independent streams of `per_stream` numbers: sqrt(2 ln(pairs)/per_stream)."""
    pairs = max(2, streams * (streams - 1) // 2)
    return float(np.sqrt(2 * np.log(pairs) / per_stream))


# ---------------------------------------------------------------------------------------------
# Throughput of every generator, as the notebook and tools/gpu_ch5.py measure it


def generator_calls(n: int, dtype=np.float32, seed: int = 1234, states: int | None = None, threads_per_block: int | None = None) -> dict:
    """Functions of no arguments that each fill one n-element array with uniform numbers, by generator name.

    cuRAND's host-API generators and CuPy's bit generators are GPU only (left out in the simulator);
    the xoroshiro128+ kernel runs in both modes with `states` states (default: one per 16 numbers, at most 2**18).
    """
    from .. import mode
    from ..arrays import array_module, to_device

    calls: dict = {}
    dtype = np.dtype(dtype)
    count = states or max(1, min(n // 16, 1 << 18))
    xoroshiro_states = make_states(count, seed)
    xp = array_module()
    out_numba = to_device(np.empty(n, dtype=dtype)) if mode.is_simulator() else xp.empty(n, dtype=dtype)
    calls[f"xoroshiro128+ (Numba kernel, {count} states)"] = lambda: xoroshiro_uniform(out_numba, xoroshiro_states, threads_per_block)
    calls[f"xoroshiro128+, state in global memory ({count} states)"] = lambda: xoroshiro_uniform(out_numba, xoroshiro_states,
                                                                                                 threads_per_block, False)
    if mode.on_gpu():
        cupy = require_cupy("cuRAND")
        out = cupy.empty(n, dtype=dtype)
        for kind in ("xorwow", "philox", "mrg32k3a", "mtgp32"):
            generator = CurandGenerator(kind, seed)
            calls[f"cuRAND {kind} (host API)"] = (lambda g: lambda: g.uniform(out))(generator)
        for name in BIT_GENERATORS:
            calls[f"cupy.random.Generator({name})"] = _fill_with(bit_generator(name, seed), out)
    return calls


def _fill_with(generator, out):
    """A function of no arguments that fills `out` from a cupy.random.Generator (in place if this CuPy allows `out=`)."""
    try:
        generator.random(dtype=out.dtype, out=out)
        return lambda: generator.random(dtype=out.dtype, out=out)
    except TypeError:  # an older CuPy without out=: each call allocates its array from the memory pool
        return lambda: generator.random(out.size, dtype=out.dtype)


@alone
def seeding_cost_ms(n: int, dtype=np.float32, kind: str = "default", ordering: str | None = None, seed: int = 1234) -> tuple[float, float]:
    """GPU time in ms of the first generate call of a fresh cuRAND generator (which seeds its states) and of the next one. GPU only."""
    cupy = require_cupy("cuRAND")
    out = cupy.empty(int(n), dtype=dtype)
    generator = CurandGenerator(kind, seed, ordering)
    times = []
    for _ in range(2):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        generator.uniform(out)
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    generator.close()
    return times[0], times[1]


def ones_in_float32_uniforms(out) -> int:
    """How many of the float32 'uniforms in [0, 1)' in `out` are exactly 1.0 (a float64 draw just below 1 rounds up to it)."""
    from ..arrays import to_host

    if mode.on_gpu():
        import cupy

        return int(cupy.count_nonzero(cupy.asarray(out) == 1))
    return int(np.count_nonzero(to_host(out) == 1))
