"""Spectral methods of chapter 7: derivatives and the periodic Poisson solver by FFT, with their test problems.

A spectral derivative of a periodic function sampled at n points is exact for every Fourier mode the
grid can hold: transform, multiply each coefficient by i k (or -k^2), transform back (book §7.2).
The periodic Poisson equation is the same idea in 2D: divide each coefficient by -(kx^2 + ky^2)
(book §7.4 and appendix D.6). Each solver here is a *plan builder* made of three launches, a
real-to-complex FFT, one kernel in Fourier space and a complex-to-real FFT, so that after the first
call a solve costs three launches (or one graph launch) and no allocation:

* `spectral_derivative(f, df, length, order)`: the derivative along the last axis of f;
* `poisson_solve(rho, u, lengths)`: the zero-mean periodic solution of u_xx + u_yy = rho;
* `poisson_solve_book(rho, u, lengths)`: the book's way, complex-to-complex transforms with a
  conversion kernel before and after (five launches), kept for comparison.

The host references (NumPy, float64) and the test problems with analytic solutions live here too:
the book's functions (cos 2x + sin 3x, the Gaussian source of §7.4) and smooth periodic ones whose
spectra never end, on which spectral accuracy can be seen against the order-8 stencil of chapter 6.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import fft
from .arrays import array_module, to_host
from .errors import ArrayArgumentError
from .graphs import capture
from .kernels import spectral as kernels
from .launch import build, owned, planned
from .timing import Timing, benchmark
from .validate import check_device_array, check_float_dtype

# ---------------------------------------------------------------------------------------------
# Test functions with exact derivatives


def periodic_points(n: int, length: float = 2 * np.pi, start: float = 0.0) -> np.ndarray:
    """n points start + j length / n, j = 0 ... n - 1 (float64): a period, each point once."""
    if n < 1:
        raise ValueError(f"n must be at least 1; got {n}")
    return start + np.arange(n, dtype=np.float64) * (length / n)


def book_wave(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The book's f = cos 2x + sin 3x (§7.1, §7.2): (f, f', f'') at x, float64."""
    return (np.cos(2 * x) + np.sin(3 * x), -2 * np.sin(2 * x) + 3 * np.cos(3 * x), -4 * np.cos(2 * x) - 9 * np.sin(3 * x))


def smooth_wave(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f = exp(sin x), smooth and periodic but with infinitely many Fourier modes: (f, f', f'') at x, float64."""
    f = np.exp(np.sin(x))
    return f, np.cos(x) * f, (np.cos(x) ** 2 - np.sin(x)) * f


def spectral_derivative_reference(f: np.ndarray, length: float = 2 * np.pi, order: int = 1) -> np.ndarray:
    """The spectral derivative along the last axis by numpy.fft in float64 (Nyquist term zeroed for order 1)."""
    values = np.asarray(f, dtype=np.float64)
    n = values.shape[-1]
    k = fft.wavenumbers(n, length, half=True)
    if order == 1:
        factor = 1j * k
        if n % 2 == 0:
            factor[-1] = 0
    elif order == 2:
        factor = -(k**2)
    else:
        raise ValueError(f"order must be 1 or 2; got {order}")
    return np.fft.irfft(np.fft.rfft(values, axis=-1) * factor, n=n, axis=-1)


# ---------------------------------------------------------------------------------------------
# Spectral derivatives on the device


def _check_real_pair(f, df, names: tuple[str, str] = ("f", "df")) -> np.dtype:
    check_device_array(f, names[0])
    dtype = check_float_dtype(f.dtype, f"{names[0]}.dtype")
    check_device_array(df, names[1], dtype=dtype, shape=tuple(f.shape))
    return dtype


def derivative_work(f):
    """The scratch half spectrum `spectral_derivative` needs for arrays like f (allocate once, reuse)."""
    return array_module().empty(fft.half_spectrum_shape(f.shape), fft.complex_dtype(f.dtype))


@planned
def spectral_derivative(f, df, length: float = 2 * np.pi, order: int = 1, work=None):
    """df = the order-1 or order-2 derivative of the periodic f along its last axis (period `length`): R2C, one kernel, C2R."""
    _check_real_pair(f, df)
    n = tuple(f.shape)[-1]  # a simulated Numba array's shape refuses negative indices
    if n < 2:
        raise ArrayArgumentError(f"the last axis needs at least 2 points; got {n}")
    spectrum = work if work is not None else owned(derivative_work(f))[0]
    check_device_array(spectrum, "work", dtype=fft.complex_dtype(f.dtype), shape=fft.half_spectrum_shape(f.shape))
    return (build(fft.transform, f, spectrum, "R2C", fft.FORWARD, (-1,)),
            build(kernels.derivative_spectrum, spectrum, spectrum, n, length, order),
            build(fft.transform, spectrum, df, "C2R", fft.INVERSE, (-1,)))


def derivative_of(f_host: np.ndarray, length: float = 2 * np.pi, order: int = 1) -> np.ndarray:
    """Copy f to the device, take its spectral derivative along the last axis there, and return it (a host array)."""
    xp = array_module()
    f = xp.asarray(np.ascontiguousarray(f_host))
    df = xp.empty_like(f)
    spectral_derivative.plan(f, df, length, order)()
    return to_host(df)


# ---------------------------------------------------------------------------------------------
# Spectral against stencil: error against n (float64 or float32) and time per derivative


@dataclass(frozen=True)
class ConvergencePoint:
    """Maximum errors of the spectral and the order-8 stencil derivative of exp(sin x) at n points."""

    n: int
    spectral: float
    stencil: float


def convergence_study(sizes: Sequence[int], dtype=np.float64, rows: int = 9) -> list[ConvergencePoint]:
    """For each n: the max error of d/dx exp(sin x) on [0, 2 pi) by FFT and by chapter 6's stencil kernel, both on the device.

    The function varies along x only, on a (rows, rows, n) grid (the stencil kernels need at least 9
    points along every axis).
    """
    from .kernels import stencil

    xp = array_module()
    points = []
    for n in sizes:
        x = periodic_points(n)
        f_line, exact, _ = smooth_wave(x)
        f = xp.asarray(np.ascontiguousarray(np.broadcast_to(f_line.astype(dtype), (rows, rows, n))))
        df = xp.empty_like(f)
        spectral_derivative.plan(f, df, 2 * np.pi, 1)()
        spectral_error = float(np.max(np.abs(to_host(df).astype(np.float64) - exact)))
        df_stencil = xp.empty_like(f)
        stencil.deriv_x.plan(f, df_stencil, stencil.coefficients_for(f, 2 * np.pi / n))()
        stencil_error = float(np.max(np.abs(to_host(df_stencil).astype(np.float64) - exact)))
        points.append(ConvergencePoint(n, spectral_error, stencil_error))
    return points


def plot_convergence(points_by_dtype: dict[str, list[ConvergencePoint]], ax=None, simulated: bool = False):
    """Log-log plot of max error against n: spectral and stencil, one pair of lines per precision; return the axes."""
    import matplotlib.pyplot as plt

    from .plotting import mark_simulated

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    styles = {"float64": "-", "float32": "--"}
    for label, points in points_by_dtype.items():
        n = [p.n for p in points]
        style = styles.get(label, ":")
        ax.loglog(n, [max(p.spectral, 1e-17) for p in points], "o" + style, color="tab:blue", label=f"spectral ({label})")
        ax.loglog(n, [max(p.stencil, 1e-17) for p in points], "s" + style, color="tab:orange", label=f"8th-order stencil ({label})")
    sizes = sorted({p.n for points in points_by_dtype.values() for p in points})
    if sizes:  # the slope an order-8 method must follow
        reference = np.array(sizes, dtype=np.float64)
        first = next(iter(points_by_dtype.values()))[0].stencil
        ax.loglog(reference, first * (reference[0] / reference) ** 8, ":", color="grey", label="slope n^-8")
    ax.set_xlabel("points per period n")
    ax.set_ylabel("max |error| of d/dx exp(sin x)")
    ax.set_title("Spectral (exponential) against algebraic (n^-8) convergence", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    mark_simulated(ax, simulated, measured=False)  # errors are computed as on a GPU: only the sizes are the simulator's
    return ax


@dataclass(frozen=True)
class DerivativeTimes:
    """Time per x derivative of an n^3 float32 (or float64) grid: spectral (three launches) and chapter 6's stencil."""

    n: int
    dtype: str
    spectral: Timing
    stencil: Timing

    @property
    def bytes_moved(self) -> int:
        """The least a derivative must move: f read once, df written once."""
        return 2 * self.n**3 * np.dtype(self.dtype).itemsize

    @property
    def ratio(self) -> float:
        """Spectral time over stencil time."""
        return self.spectral.median_ms / self.stencil.median_ms


def time_derivatives(n: int, dtype=np.float32, repeat: int | None = None) -> DerivativeTimes:
    """Time the spectral and the stencil x derivative of the same random n^3 grid (ms per derivative)."""
    from .arrays import random_array
    from .kernels import stencil

    xp = array_module()
    f = xp.asarray(random_array((n, n, n), dtype, seed=7))
    df = xp.empty_like(f)
    spectral = spectral_derivative.plan(f, df, 2 * np.pi, 1)
    tiled = stencil.deriv_x.plan(f, df, stencil.coefficients_for(f, 2 * np.pi / n))
    return DerivativeTimes(n, np.dtype(dtype).name, benchmark(spectral, repeat=repeat), benchmark(tiled, repeat=repeat))


# ---------------------------------------------------------------------------------------------
# The periodic Poisson equation


def poisson_work(rho):
    """The scratch half spectrum `poisson_solve` needs for a mesh like rho."""
    return array_module().empty(fft.half_spectrum_shape(rho.shape), fft.complex_dtype(rho.dtype))


@planned
def poisson_solve(rho, u, lengths: tuple[float, float] = (1.0, 1.0), work=None):
    """u = the zero-mean periodic solution of u_xx + u_yy = rho on an (ny, nx) mesh of size lengths = (Lx, Ly): R2C, one kernel, C2R."""
    _check_real_pair(rho, u, ("rho", "u"))
    if len(rho.shape) != 2:
        raise ArrayArgumentError(f"rho must be a 2D (ny, nx) mesh; got shape {tuple(rho.shape)}")
    spectrum = work if work is not None else owned(poisson_work(rho))[0]
    check_device_array(spectrum, "work", dtype=fft.complex_dtype(rho.dtype), shape=fft.half_spectrum_shape(rho.shape))
    return (build(fft.transform, rho, spectrum, "R2C", fft.FORWARD, (0, 1)),
            build(kernels.poisson_spectrum, spectrum, spectrum, rho.shape[1], lengths),
            build(fft.transform, spectrum, u, "C2R", fft.INVERSE, (0, 1)))


@planned
def two_ffts(rho, u, work=None):
    """The two transforms of `poisson_solve` alone (R2C then C2R, nothing between): the floor a solve is measured against."""
    _check_real_pair(rho, u, ("rho", "u"))
    spectrum = work if work is not None else owned(poisson_work(rho))[0]
    return (build(fft.transform, rho, spectrum, "R2C", fft.FORWARD, (0, 1)),
            build(fft.transform, spectrum, u, "C2R", fft.INVERSE, (0, 1)))


def book_wavenumbers(n: int, length: float, dtype) -> np.ndarray:
    """The book's kx (or ky) array: 2 pi / L times 0, 1, ..., n/2 - 1, -n/2, ..., -1, in `dtype`."""
    return fft.wavenumbers(n, length).astype(dtype)


@dataclass(frozen=True)
class BookWork:
    """Scratch of the book's C2C path: the complex mesh and the two wave-number arrays (device arrays)."""

    complex_mesh: object
    kx: object
    ky: object


def book_work(rho, lengths: tuple[float, float] = (1.0, 1.0)) -> BookWork:
    """Allocate the book path's complex mesh and copy its wave numbers to the device."""
    xp = array_module()
    ny, nx = rho.shape
    dtype = np.dtype(rho.dtype)
    return BookWork(xp.empty((ny, nx), fft.complex_dtype(dtype)), xp.asarray(book_wavenumbers(nx, lengths[0], dtype)),
                    xp.asarray(book_wavenumbers(ny, lengths[1], dtype)))


@planned
def poisson_solve_book(rho, u, lengths: tuple[float, float] = (1.0, 1.0), work: BookWork | None = None):
    """The book's solve (appendix D.6): real to complex, C2C forward, divide, C2C inverse, complex to real minus the corner value."""
    _check_real_pair(rho, u, ("rho", "u"))
    if len(rho.shape) != 2:
        raise ArrayArgumentError(f"rho must be a 2D (ny, nx) mesh; got shape {tuple(rho.shape)}")
    if work is None:
        work = book_work(rho, lengths)
        owned(work.complex_mesh, work.kx, work.ky)
    c = work.complex_mesh
    blocks = min(64, -(-rho.size // 128))  # the book's <<<64, 128>>>, fewer blocks for a mesh smaller than that
    return (build(kernels.book_real_to_complex, rho, c, blocks),
            build(fft.transform, c, c, "C2C", fft.FORWARD, (0, 1)),
            build(kernels.book_poisson_divide, c, work.kx, work.ky),
            build(fft.transform, c, c, "C2C", fft.INVERSE, (0, 1)),
            build(kernels.book_complex_to_real, c, u))


def inverse_laplacian(shape: tuple[int, int], lengths: tuple[float, float] = (1.0, 1.0), dtype=np.float32):
    """-1 / (kx^2 + ky^2) / (nx ny) on the (ny, nx // 2 + 1) half spectrum, 0 at the zero mode (an xp array): what a NumPy user precomputes."""
    ny, nx = shape
    kx = fft.wavenumbers(nx, lengths[0], half=True)
    ky = fft.wavenumbers(ny, lengths[1])
    k2 = kx[None, :] ** 2 + ky[:, None] ** 2
    k2[0, 0] = 1.0
    factor = -1.0 / k2 / (nx * ny)
    factor[0, 0] = 0.0
    return array_module().asarray(factor.astype(dtype))


# ---------------------------------------------------------------------------------------------
# Test problems with analytic solutions


@dataclass(frozen=True)
class PoissonProblem:
    """A 2D periodic Poisson problem on an (ny, nx) mesh: source rho (float64), exact u (float64), the mesh size and how to compare."""

    rho: np.ndarray
    exact: np.ndarray
    lengths: tuple[float, float]
    name: str
    corner_constant: bool  # True: compare u - u[0, 0] (the book's constant); False: compare zero-mean solutions

    def errors(self, u) -> tuple[float, float]:
        """(max |error|, the book's L2 figure sqrt(sum err^2) / (nx ny)) of a computed solution u (any array kind)."""
        u = to_host(u).astype(np.float64)
        if self.corner_constant:
            error = (u - u[0, 0]) - self.exact
        else:
            error = u - self.exact
        return float(np.max(np.abs(error))), float(np.sqrt(np.sum(error**2)) / error.size)


def book_poisson_problem(n: int, alpha: float = 0.1, length: float = 1.0) -> PoissonProblem:
    """The book's problem (§7.4): rho = (r^2 - 2 alpha^2) / alpha^4 exp(-r^2 / (2 alpha^2)) on [-L/2, L/2)^2; u -> exp(-r^2 / (2 alpha^2)).

    The Gaussian is not exactly periodic (it is exp(-L^2 / (8 alpha^2)) at the edges, not zero), so
    the error does not fall below about 1e-5 however fine the mesh: the book's own L-infinity figure.
    """
    h = length / n
    x = -length / 2 + h * np.arange(n)
    r2 = x[None, :] ** 2 + x[:, None] ** 2
    a2 = alpha**2
    gaussian = np.exp(-r2 / (2 * a2))
    return PoissonProblem(gaussian * (r2 - 2 * a2) / a2**2, gaussian, (length, length), f"book Gaussian, alpha = {alpha}", True)


def smooth_poisson_problem(shape: tuple[int, int], lengths: tuple[float, float] = (1.0, 1.0)) -> PoissonProblem:
    """A smooth periodic problem with infinitely many modes: u = exp(sin(2 pi x / Lx)) cos(4 pi y / Ly), which has zero mean."""
    ny, nx = shape
    sx, sy = 2 * np.pi / lengths[0], 2 * np.pi / lengths[1]
    x = periodic_points(nx, lengths[0])
    y = periodic_points(ny, lengths[1])
    g = np.exp(np.sin(sx * x))
    g_xx = sx**2 * (np.cos(sx * x) ** 2 - np.sin(sx * x)) * g
    h = np.cos(2 * sy * y)
    u = h[:, None] * g[None, :]
    rho = h[:, None] * g_xx[None, :] - 4 * sy**2 * u
    return PoissonProblem(rho, u, tuple(float(v) for v in lengths), "exp(sin 2 pi x) cos 4 pi y", False)


def solve_problem(problem: PoissonProblem, dtype=np.float32, method: str = "r2c") -> tuple[np.ndarray, tuple[float, float]]:
    """Solve `problem` on the device in `dtype` by 'r2c' (ours) or 'book' (C2C); return (u on the host, (max error, book L2))."""
    xp = array_module()
    rho = xp.asarray(problem.rho.astype(dtype))
    u = xp.empty_like(rho)
    solver = {"r2c": poisson_solve, "book": poisson_solve_book}[method]
    solver.plan(rho, u, problem.lengths)()
    host = to_host(u)
    return host, problem.errors(host)


# ---------------------------------------------------------------------------------------------
# Timing the solve


@dataclass(frozen=True)
class PoissonTimes:
    """GPU times (ms per solve) of one mesh: the solve, its two FFTs alone, the book's C2C path, and the solve as a graph."""

    shape: tuple[int, int]
    dtype: str
    solve: Timing
    ffts: Timing
    book: Timing | None
    graph: Timing | None

    @property
    def ratio(self) -> float:
        """Solve over its two FFTs alone, GPU times (the acceptance asks at most 1.5)."""
        return self.solve.median_ms / self.ffts.median_ms

    @property
    def back_to_back_ratio(self) -> float | None:
        """The same ratio for plain back-to-back calls, host costs included (the faster of the plan and the graph)."""
        if self.solve.back_to_back_ms is None or self.ffts.back_to_back_ms is None:
            return None
        solve = self.solve.back_to_back_ms
        if self.graph is not None and self.graph.back_to_back_ms is not None:
            solve = min(solve, self.graph.back_to_back_ms)
        return solve / self.ffts.back_to_back_ms


def time_poisson(shape: tuple[int, int], dtype=np.float32, repeat: int | None = None, book: bool = True, graph: bool = True) -> PoissonTimes:
    """Time a solve of an (ny, nx) mesh of random data, its two FFTs alone, the book's path and a graph of the solve (ms each)."""
    from .arrays import random_array

    xp = array_module()
    rho = xp.asarray(random_array(shape, dtype, seed=11))
    u = xp.empty_like(rho)
    work = poisson_work(rho)
    solve = poisson_solve.plan(rho, u, (1.0, 1.0), work)
    ffts = two_ffts.plan(rho, u, work)
    solve()  # made and run once before the capture: every kernel loaded, every cuFFT plan made
    graph_timing = None
    if graph:
        recorded = capture(solve, f"Poisson solve {shape}")
        graph_timing = benchmark(recorded.launch, repeat=repeat)
    book_timing = benchmark(poisson_solve_book.plan(rho, u, (1.0, 1.0)), repeat=repeat) if book else None
    return PoissonTimes(tuple(shape), np.dtype(dtype).name, benchmark(solve, repeat=repeat), benchmark(ffts, repeat=repeat),
                        book_timing, graph_timing)


def division_variants(shape: tuple[int, int], dtype=np.float32, repeat: int | None = None) -> dict[str, Timing]:
    """Time the k-space division alone three ways: the Numba kernel, a CuPy ElementwiseKernel (GPU only), a CuPy (xp) expression."""
    from .arrays import random_array
    from .errors import GPUOnlyFeature

    xp = array_module()
    ny, nx = shape
    spectrum = xp.asarray(random_array(fft.half_spectrum_shape(shape), fft.complex_dtype(dtype), seed=3))
    factor = inverse_laplacian(shape, (1.0, 1.0), dtype)
    results = {"Numba kernel": benchmark(kernels.poisson_spectrum.plan(spectrum, spectrum, nx, (1.0, 1.0)), repeat=repeat)}
    try:
        results["CuPy ElementwiseKernel"] = benchmark(kernels.poisson_elementwise.plan(spectrum, nx, (1.0, 1.0)), repeat=repeat)
    except GPUOnlyFeature:
        pass

    # spectrum *= factor, written so that it can be timed: complex values times a precomputed real array
    results["CuPy expression (spectrum *= factor)"] = benchmark(lambda: xp.multiply(spectrum, factor, out=spectrum), repeat=repeat)
    return results


def division_bytes(shape: tuple[int, int], dtype=np.float32) -> dict[str, int]:
    """Bytes each division variant must move: the spectrum read and written, plus the factor array for the expression."""
    points = math.prod(fft.half_spectrum_shape(shape))
    complex_bytes = fft.complex_dtype(dtype).itemsize
    base = 2 * points * complex_bytes
    return {"Numba kernel": base, "CuPy ElementwiseKernel": base,
            "CuPy expression (spectrum *= factor)": base + points * np.dtype(dtype).itemsize}
