"""FFTs as plans: cuFFT through CuPy on a GPU, NumPy's FFT in the simulator, behind one interface.

cuFFT works like FFTW: *make a plan* for one shape, precision and kind of transform (this is the
expensive part: cuFFT chooses an algorithm, computes twiddle factors and sizes a work area), then
*execute* it as often as needed. `transform(x, out, kind, direction, axes)` is a plan builder in the
sense of `gpucourse.launch`: the first call with a set of arrays checks them, finds (or makes) the
cuFFT plan for their shape and dtype and returns an `FFTLaunch`; every later call only executes.
An `FFTLaunch` can sit in a plan beside Numba kernels, and a CUDA graph captures it like a kernel.

Conventions (those of cuFFT and of the book, §7.1):

* the forward transform is unnormalized, and so is the inverse: inverse(forward(a)) = N a;
* a real-to-complex (R2C) transform of n real values along the last axis keeps n // 2 + 1 complex
  values (the others are their complex conjugates); complex-to-real (C2R) goes back;
* cuFFT may overwrite the input of a C2R transform. In the simulator the input is filled with NaN
  after a C2R transform, so that code that reads it again fails there too, not only on a GPU;
* a real transform can run in place (book §7.1) when the real array's last axis is padded to
  2 (n // 2 + 1) values, room for the n // 2 + 1 complex ones: `padded_real(shape)` makes such a
  buffer and hands back its two views, the real (n values per row, strided) and the complex.

In the simulator there is no cuFFT: `FFTLaunch` calls `numpy.fft` (which computes float32 data in
float32 since NumPy 2) and writes into the same output array. Everything else is the same code.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import mode
from .arrays import require_cupy
from .errors import ArrayArgumentError
from .launch import STREAMS, LibraryLaunch, planned, unowned
from .roofline import gflops
from .timing import Ceilings, Timing, alone, benchmark, synchronize

KINDS = ("C2C", "R2C", "C2R")
#: cuFFT's directions: a forward transform has exp(-i k x) in its sum, an inverse exp(+i k x).
FORWARD, INVERSE = -1, 1

#: The sizes cuFFT runs its fastest kernels for are products of these primes (book §7.1).
FAST_PRIMES = (2, 3, 5, 7)

# ---------------------------------------------------------------------------------------------
# Shapes and dtypes of the three kinds


def output_dtype(dtype, kind: str) -> np.dtype:
    """The dtype a transform of `kind` writes for input `dtype`: complex for C2C and R2C, real for C2R."""
    dtype = np.dtype(dtype)
    if kind == "C2R":
        if dtype not in (np.dtype(np.complex64), np.dtype(np.complex128)):
            raise ArrayArgumentError(f"a C2R transform reads complex64 or complex128; got {dtype.name}")
        return np.dtype(np.float32 if dtype == np.complex64 else np.float64)
    if kind == "R2C":
        if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ArrayArgumentError(f"an R2C transform reads float32 or float64; got {dtype.name}")
        return np.dtype(np.complex64 if dtype == np.float32 else np.complex128)
    if kind == "C2C":
        if dtype not in (np.dtype(np.complex64), np.dtype(np.complex128)):
            raise ArrayArgumentError(f"a C2C transform reads complex64 or complex128; got {dtype.name}. "
                                     "Use kind='R2C' for real data, or convert it with .astype(numpy.complex64).")
        return dtype
    raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")


def real_dtype(dtype) -> np.dtype:
    """float32 for float32 and complex64, float64 for float64 and complex128."""
    return np.dtype(np.float32 if np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64)) else np.float64)


def complex_dtype(dtype) -> np.dtype:
    """complex64 for float32 and complex64, complex128 for float64 and complex128."""
    return np.dtype(np.complex64 if real_dtype(dtype) == np.float32 else np.complex128)


def half_spectrum_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """Shape of the R2C output of a real array of `shape` (transformed along trailing axes): last axis n // 2 + 1."""
    shape = tuple(int(s) for s in shape)
    return shape[:-1] + (shape[-1] // 2 + 1,)


def _normal_axes(axes: Sequence[int] | int | None, ndim: int) -> tuple[int, ...]:
    if axes is None:
        axes = tuple(range(ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    normal = tuple(sorted(int(a) % ndim for a in axes))
    if not normal or len(set(normal)) != len(normal) or len(normal) > 3 or any(not -ndim <= int(a) < ndim for a in axes):
        raise ValueError(f"axes must be 1 to 3 different axes of a {ndim}-dimensional array; got {axes!r}")
    if normal != tuple(range(normal[0], normal[0] + len(normal))):
        raise ValueError(f"the transformed axes must be adjacent; got {axes!r}")
    return normal


def _layout(shape: tuple[int, ...], axes: tuple[int, ...], kind: str) -> str:
    """'trailing' (batch in front: what cuFFT does by default) or 'leading' (batch behind: strided, C2C only)."""
    ndim = len(shape)
    if axes[-1] == ndim - 1:
        return "trailing"
    if axes[0] == 0 and kind == "C2C":
        return "leading"
    if axes[0] == 0:
        raise ValueError(f"an {kind} transform must include the last axis (the one halved to n // 2 + 1); got axes {axes}")
    raise ValueError(f"the transformed axes must include the first or the last axis; got {axes} of a {ndim}-D array")


@dataclass(frozen=True)
class TransformSpec:
    """What a cuFFT plan depends on: input shape, dtypes, kind and transformed axes (not the arrays' addresses)."""

    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    in_dtype: np.dtype
    out_dtype: np.dtype
    kind: str
    axes: tuple[int, ...]
    padded: bool = False  #: an in-place R2C or C2R: the real side's last axis holds 2 (n // 2 + 1) values

    @property
    def layout(self) -> str:
        """'trailing': contiguous transforms, batches one after another; 'leading': strided transforms, batches interleaved."""
        return _layout(self.in_shape, self.axes, self.kind)

    @property
    def real_shape(self) -> tuple[int, ...]:
        """The transformed axes' lengths on the real (or, for C2C, either) side: what the transform's size N multiplies out."""
        shape = self.out_shape if self.kind == "C2R" else self.in_shape
        return tuple(shape[a] for a in self.axes)

    @property
    def points(self) -> int:
        """N: points of one transform (the product of the transformed lengths)."""
        return math.prod(self.real_shape)

    @property
    def batch(self) -> int:
        """How many independent transforms one execution computes."""
        shape = self.out_shape if self.kind == "C2R" else self.in_shape
        return math.prod(shape) // self.points

    @property
    def flops(self) -> float:
        """Floating-point operations by the usual count: 5 N log2 N per complex transform, half that for a real one."""
        per = 5.0 * self.points * math.log2(self.points) if self.points > 1 else 0.0
        return self.batch * (per if self.kind == "C2C" else per / 2)

    @property
    def bytes_moved(self) -> int:
        """Bytes a transform must move at least: its input read once and its output written once."""
        return math.prod(self.in_shape) * self.in_dtype.itemsize + math.prod(self.out_shape) * self.out_dtype.itemsize

    def describe(self) -> str:
        """'R2C 4096 x 4096 float32 -> complex64 (batch 1)' and the like."""
        lengths = " x ".join(str(n) for n in self.real_shape)
        where = ", in place (padded)" if self.padded else ""
        return f"{self.kind} {lengths} {self.in_dtype.name} -> {self.out_dtype.name} (batch {self.batch}, {self.layout} axes{where})"


def spec_for(x, out, kind: str = "C2C", axes: Sequence[int] | int | None = None) -> TransformSpec:
    """Check that `out` can hold the `kind` transform of `x` over `axes`; return the spec (raises saying what to change)."""
    x, out = simulated_array(x), simulated_array(out)
    for name, array in (("x", x), ("out", out)):
        if not hasattr(array, "shape") or not hasattr(array, "dtype"):
            raise ArrayArgumentError(f"{name} must be an array (CuPy on a GPU, NumPy in the simulator); got {type(array).__name__}")
        if isinstance(array, np.ndarray) and not mode.is_simulator():
            raise ArrayArgumentError(f"{name} is a NumPy array in host memory; cuFFT reads device memory. "
                                     f"Copy it first: {name}_d = cupy.asarray({name}).")
    padded = kind != "C2C" and _same_memory(x, out)
    real_side = x if kind == "R2C" else out
    for name, array in (("x", x), ("out", out)):
        if not _c_contiguous(array) and not (padded and array is real_side):
            raise ArrayArgumentError(f"{name} must be C-contiguous (a strided view is not a cuFFT layout); "
                                     "pass xp.ascontiguousarray(...) or choose the axes to transform instead")
    in_shape, out_shape = tuple(int(s) for s in x.shape), tuple(int(s) for s in out.shape)
    axes = _normal_axes(axes, len(in_shape))
    want_dtype = output_dtype(x.dtype, kind)
    _layout(in_shape, axes, kind)
    if kind == "R2C":
        want_shape = half_spectrum_shape(in_shape)
    elif kind == "C2R":
        if out_shape[:-1] != in_shape[:-1] or out_shape[-1] // 2 + 1 != in_shape[-1]:
            raise ArrayArgumentError(
                f"a C2R transform of a half spectrum of shape {in_shape} writes a real array whose last axis n has "
                f"n // 2 + 1 = {in_shape[-1]}: shape {in_shape[:-1] + (2 * in_shape[-1] - 2,)} (n even) or "
                f"{in_shape[:-1] + (2 * in_shape[-1] - 1,)} (n odd); got {out_shape}")
        want_shape = out_shape
    else:
        want_shape = in_shape
    if out_shape != want_shape:
        raise ArrayArgumentError(f"the {kind} transform of an array of shape {in_shape} has shape {want_shape}; out has {out_shape}")
    if np.dtype(out.dtype) != want_dtype:
        raise ArrayArgumentError(f"the {kind} transform of {np.dtype(x.dtype).name} data is {want_dtype.name}; out is "
                                 f"{np.dtype(out.dtype).name}. Allocate it with dtype={want_dtype.name}.")
    if padded:
        _check_padded(real_side, out if kind == "R2C" else x, kind)
    return TransformSpec(in_shape, out_shape, np.dtype(x.dtype), want_dtype, kind, axes, padded)


def _check_padded(real, spectrum, kind: str) -> None:
    """An in-place real transform: `real` must be the first n values of each padded row of the buffer `spectrum` is."""
    itemsize = np.dtype(real.dtype).itemsize
    if not _c_contiguous(spectrum) or tuple(real.strides[:-1]) != tuple(spectrum.strides[:-1]) or real.strides[-1] != itemsize:
        raise ArrayArgumentError(
            f"an in-place {kind} transform needs the real array's last axis padded to 2 (n // 2 + 1) values, so that the "
            f"n // 2 + 1 complex values fit in the same rows; the real array here has strides {tuple(real.strides)} and the "
            f"complex one {tuple(spectrum.strides)}. Make both views with fft.padded_real(shape), or use two arrays.")


def padded_real(shape: Sequence[int], dtype=np.float32) -> tuple:
    """One buffer for an in-place R2C or C2R transform of a real array of `shape`: (real view of `shape`, complex half-spectrum view).

    The buffer is the complex half spectrum (last axis n // 2 + 1); the real view is its first n
    values of every row of 2 (n // 2 + 1) reals (book §7.1: a real array of n + 2 for n even).
    """
    from .arrays import array_module

    shape = tuple(int(s) for s in shape)
    spectrum = array_module().zeros(half_spectrum_shape(shape), complex_dtype(dtype))
    real = spectrum.view(real_dtype(dtype))[..., : shape[-1]]
    return real, spectrum


def simulated_array(array):
    """In the simulator, the NumPy array behind a simulated device array (the same memory); anything else unchanged."""
    return getattr(array, "_ary", array) if mode.is_simulator() else array


def _c_contiguous(array) -> bool:
    flags = getattr(array, "flags", None)
    if flags is not None:
        return bool(flags["C_CONTIGUOUS"] if isinstance(flags, dict) else flags.c_contiguous)
    return True


def _pointer(array) -> int:
    if isinstance(array, np.ndarray):
        return array.__array_interface__["data"][0]
    return array.__cuda_array_interface__["data"][0]


def _same_memory(a, b) -> bool:
    return _pointer(a) == _pointer(b)


# ---------------------------------------------------------------------------------------------
# cuFFT plans, made once per spec (and stream slot) and kept


class SharedPlan:
    """One cuFFT plan (`plan`; the spec in the simulator), shared by the transforms of one spec and slot."""

    __slots__ = ("plan", "__weakref__")

    def __init__(self, plan) -> None:
        self.plan = plan


#: The plans in use, by spec and slot. Each holds a work area in device memory, so it lives only as
#: long as a transform (a launch of a plan) uses it: no cache keeps a work area past its use.
_PLANS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_PLAN_STATS = {"made": 0, "reused": 0}


def plan_parameters(spec: TransformSpec) -> dict:
    """The arguments of cufftPlanMany for `spec`: lengths, embeddings, strides, distances, cuFFT's type name and batch.

    Element m of transform b is read at ``b * idist + m * istride`` (m the flat index within one
    transform, inembed its shape). Trailing axes: the transforms lie one after another (stride 1).
    Leading axes (C2C only): the transforms interleave, transform b is "column" b and its
    consecutive elements sit `batch` values apart. These are the values cupyx.scipy.fft.get_fft_plan computes.
    """
    types = {("C2C", 8): "C2C", ("C2C", 16): "Z2Z", ("R2C", 4): "R2C", ("R2C", 8): "D2Z", ("C2R", 8): "C2R", ("C2R", 16): "Z2D"}
    in_dims = tuple(spec.in_shape[a] for a in spec.axes)
    out_dims = tuple(spec.out_shape[a] for a in spec.axes)
    if spec.padded:  # the real side's rows are 2 (n // 2 + 1) values long, of which the transform reads or writes n
        padded = 2 * (spec.real_shape[-1] // 2 + 1)
        in_dims, out_dims = (in_dims[:-1] + (padded,), out_dims) if spec.kind == "R2C" else (in_dims, out_dims[:-1] + (padded,))
    batch = spec.batch
    if spec.layout == "leading":
        istride = ostride = batch
        idist = odist = 1
    else:
        istride = ostride = 1
        idist, odist = math.prod(in_dims), math.prod(out_dims)
    return {"lengths": spec.real_shape, "inembed": in_dims, "istride": istride, "idist": idist, "onembed": out_dims,
            "ostride": ostride, "odist": odist, "fft_type": types[(spec.kind, spec.in_dtype.itemsize)], "batch": batch}


def _make_cufft_plan(spec: TransformSpec):
    """A new cuFFT plan for `spec` (GPU only), with its own work area.

    The plan is the one cupyx.scipy.fft.get_fft_plan makes for these arrays (notebook 7.1 shows that
    call), built here directly: get_fft_plan hands back CuPy's cached plan when there is one, and
    transforms that run at the same time on different streams need plans (work areas) of their own.
    """
    require_cupy("cuFFT plans")
    from cupy.cuda import cufft

    p = plan_parameters(spec)
    fft_type = getattr(cufft, f"CUFFT_{p['fft_type']}")
    if len(spec.axes) == 1 and spec.layout == "trailing" and not spec.padded:  # cufftPlan1d: contiguous transforms, one after another
        return cufft.Plan1d(p["lengths"][0], fft_type, p["batch"])
    last_size = spec.out_shape[-1] if spec.kind != "C2C" else None
    return cufft.PlanNd(p["lengths"], p["inembed"], p["istride"], p["idist"], p["onembed"], p["ostride"], p["odist"],
                        fft_type, p["batch"], "C", spec.axes[-1], last_size)


def cufft_plan(spec: TransformSpec, slot: int = 0) -> SharedPlan:
    """The cuFFT plan for `spec` (the spec itself in the simulator), made on first use and shared while it is in use.

    A plan has one work area in device memory, so two transforms of one plan must not run at the
    same time: transforms queued on different streams use different `slot`s (a plan each). The
    plan is freed, with its work area, when the last transform that uses it is.
    """
    key = (spec, slot)
    shared = _PLANS.get(key)
    if shared is not None:
        _PLAN_STATS["reused"] += 1
        return shared
    shared = _PLANS[key] = SharedPlan(spec if mode.is_simulator() else _make_cufft_plan(spec))
    _PLAN_STATS["made"] += 1
    return shared


def plan_statistics() -> dict[str, int]:
    """How many cuFFT plans `cufft_plan` made, how many times it handed out one in use, and how many are in use now."""
    return {**_PLAN_STATS, "kept": len(_PLANS)}


def clear_plans() -> None:
    """Forget the transform launcher's plans (their cuFFT plans go with the last transform using them) and the statistics."""
    transform.clear()
    _PLANS.clear()
    _PLAN_STATS.update(made=0, reused=0)


# ---------------------------------------------------------------------------------------------
# One transform of fixed arrays


class FFTLaunch(LibraryLaunch):
    """One transform of fixed arrays with a fixed plan: `launch(handle)` executes it on that stream."""

    __slots__ = ("spec", "direction", "name", "_plan", "_x", "_out", "_exec")

    def __init__(self, spec: TransformSpec, x, out, direction: int, slot: int = 0) -> None:
        self.spec, self.direction = spec, direction
        kind = spec.kind if spec.kind != "C2C" else ("C2C forward" if direction == FORWARD else "C2C inverse")
        self.name = f"cuFFT {kind} {'x'.join(str(n) for n in spec.real_shape)}"
        self._plan = cufft_plan(spec, slot)
        if mode.is_simulator():
            self._x, self._out = unowned(simulated_array(x)), unowned(simulated_array(out))
            self._exec = None
            return
        require_cupy("cuFFT")
        self._x, self._out = unowned(x), unowned(out)  # CuPy views (of Numba arrays too), no copies, no owners
        self._exec = self._plan.plan.fft

    def launch(self, handle: int = 0) -> None:
        """Execute the transform on the stream with integer handle `handle` (numpy.fft in the simulator)."""
        if self._exec is None:
            self._numpy()
            return
        with STREAMS.cupy(handle):  # CuPy's plan sets cuFFT's stream to the current one before executing
            self._exec(self._x, self._out, self.direction)

    def _numpy(self) -> None:
        spec, x, out = self.spec, self._x, self._out
        if spec.kind == "R2C":
            out[...] = np.fft.rfftn(x, axes=spec.axes)
        elif spec.kind == "C2R":
            out[...] = np.fft.irfftn(x, s=spec.real_shape, axes=spec.axes, norm="forward")  # unnormalized, as cuFFT
            if not spec.padded:  # (in place, the input's memory now holds the output)
                x[...] = np.nan  # cuFFT may overwrite a C2R input: make reuse fail here too
        elif self.direction == FORWARD:
            out[...] = np.fft.fftn(x, axes=spec.axes)
        else:
            out[...] = np.fft.ifftn(x, axes=spec.axes, norm="forward")

    def __repr__(self) -> str:
        return f"FFTLaunch({self.spec.describe()})"


@planned
def transform(x, out, kind: str = "C2C", direction: int = FORWARD, axes: Sequence[int] | int | None = None, slot: int = 0):
    """out = the unnormalized FFT of x over `axes` (default all): kind 'C2C' (direction FORWARD or INVERSE), 'R2C' or 'C2R'."""
    spec = spec_for(x, out, kind, axes)
    if direction not in (FORWARD, INVERSE):
        raise ValueError(f"direction must be fft.FORWARD ({FORWARD}) or fft.INVERSE ({INVERSE}); got {direction!r}")
    if kind == "R2C" and direction != FORWARD or kind == "C2R" and direction != INVERSE:
        raise ValueError(f"an {kind} transform has a fixed direction: " + ("FORWARD" if kind == "R2C" else "INVERSE"))
    return FFTLaunch(spec, x, out, direction, slot)


def forward_real(x, out, axes=None, slot: int = 0) -> None:
    """out = R2C transform of the real array x over `axes` (default all; they must include the last)."""
    transform(x, out, "R2C", FORWARD, axes, slot)


def inverse_real(spectrum, out, axes=None, slot: int = 0) -> None:
    """out = C2R (unnormalized) transform of the half spectrum over `axes`; the spectrum is overwritten."""
    transform(spectrum, out, "C2R", INVERSE, axes, slot)


# ---------------------------------------------------------------------------------------------
# Wave numbers and sizes


def wavenumbers(n: int, length: float = 2 * np.pi, half: bool = False) -> np.ndarray:
    """Wave numbers 2 pi m / length (float64) in the FFT's order (half: m = 0 ... n // 2).

    Even n: m = 0, 1, ..., n/2 - 1, -n/2, ..., -1 (the Nyquist mode counted negative); odd n: m = 0, 1,
    ..., (n - 1)/2, -(n - 1)/2, ..., -1 (no Nyquist mode). The same order as numpy.fft.fftfreq(n, 1/n).
    """
    if n < 1 or length <= 0:
        raise ValueError(f"n must be >= 1 and length > 0; got n={n}, length={length}")
    m = np.arange(n // 2 + 1) if half else np.fft.fftfreq(n, 1.0 / n)
    return 2 * np.pi / length * m


def is_fast_size(n: int, primes: tuple[int, ...] = FAST_PRIMES) -> bool:
    """True when n is a product of `primes` only (by default 2, 3, 5 and 7: the sizes cuFFT has its fastest kernels for)."""
    if n < 1:
        return False
    for p in primes:
        while n % p == 0:
            n //= p
    return n == 1


def next_fast_size(n: int, primes: tuple[int, ...] = FAST_PRIMES) -> int:
    """The smallest size >= n that is a product of `primes` only (by default 2, 3, 5 and 7)."""
    if n < 1:
        raise ValueError(f"n must be positive; got {n}")
    while not is_fast_size(n, primes):
        n += 1
    return n


# ---------------------------------------------------------------------------------------------
# Measuring transforms


@dataclass(frozen=True)
class TransformTiming:
    """A timed transform: its spec, the timing (ms per transform), and rates derived from it."""

    spec: TransformSpec
    timing: Timing

    @property
    def gflops(self) -> float:
        """GFLOP/s by the 5 N log2 N count (2.5 N log2 N for real transforms), at the median GPU time."""
        return gflops(self.spec.flops, self.timing.median_ms)

    @property
    def gbs(self) -> float:
        """Effective bandwidth in GB/s: input read once and output written once, at the median GPU time."""
        return self.timing.bandwidth_gbs(self.spec.bytes_moved)

    def fraction_of_copy(self, ceilings: Ceilings) -> float:
        """The effective bandwidth as a fraction of the measured device-to-device copy."""
        return ceilings.fraction_of_copy(self.gbs)

    def row(self, ceilings: Ceilings | None = None) -> list:
        """[transform, batch, us, GFLOP/s, GB/s, fraction of copy] for a report table."""
        fraction = None if ceilings is None or ceilings.simulated else round(self.fraction_of_copy(ceilings), 3)
        lengths = " x ".join(str(n) for n in self.spec.real_shape)
        rates = [None, None] if self.timing.simulated else [round(self.gflops, 1), round(self.gbs, 1)]  # none from Python threads
        return [f"{self.spec.kind} {lengths} {self.spec.in_dtype.name}", self.spec.batch, round(1e3 * self.timing.median_ms, 2), *rates, fraction]


def transform_arrays(shape: Sequence[int], dtype, kind: str, seed: int = 0) -> tuple:
    """Random input of `shape` and dtype (real for R2C, complex otherwise) and an output, on the device (xp arrays)."""
    from .arrays import array_module, random_array

    xp = array_module()
    shape = tuple(int(s) for s in shape)
    if kind == "R2C":
        x = xp.asarray(random_array(shape, real_dtype(dtype), seed))
        out = xp.empty(half_spectrum_shape(shape), complex_dtype(dtype))
    elif kind == "C2R":  # shape is the real output's; the input is a half spectrum
        x = xp.asarray(random_array(half_spectrum_shape(shape), complex_dtype(dtype), seed))
        out = xp.empty(shape, real_dtype(dtype))
    else:
        x = xp.asarray(random_array(shape, complex_dtype(dtype), seed))
        out = xp.empty(shape, complex_dtype(dtype))
    return x, out


def measure_transform(shape: Sequence[int], dtype, kind: str = "C2C", axes=None, repeat: int | None = None,
                      in_place: bool = False) -> TransformTiming:
    """Time one transform of random data of `shape` (the real shape for R2C/C2R), ms per transform, with its rates."""
    x, out = transform_arrays(shape, dtype, kind)
    if in_place:
        if kind != "C2C":
            raise ValueError("in_place is for C2C transforms only")
        out = x
    direction = INVERSE if kind == "C2R" else FORWARD
    plan = transform.plan(x, out, kind, direction, axes)
    # A C2R transform overwrites its input, so after the first call it transforms whatever is left
    # there: the time does not depend on the values.
    timing = benchmark(plan, repeat=repeat)
    return TransformTiming(plan.launches[0].spec, timing)


@alone
def plan_creation_ms(shape: Sequence[int], dtype, kind: str = "C2C", axes=None) -> float:
    """Wall-clock ms to make a new cuFFT plan for this transform (GPU only: the simulator has no plans)."""
    cupy = require_cupy("Timing cuFFT plan creation")
    in_shape = half_spectrum_shape(shape) if kind == "C2R" else tuple(shape)
    in_dtype = complex_dtype(dtype) if kind != "R2C" else real_dtype(dtype)
    x = cupy.empty(in_shape, in_dtype)  # a plan depends on shapes and dtypes only: no data needed
    out = cupy.empty(tuple(shape) if kind != "R2C" else half_spectrum_shape(shape), output_dtype(in_dtype, kind))
    spec = spec_for(x, out, kind, axes)
    synchronize()
    start = time.perf_counter()
    plan = _make_cufft_plan(spec)
    synchronize()
    elapsed = 1e3 * (time.perf_counter() - start)
    del plan
    return elapsed
