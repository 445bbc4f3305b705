"""Chapter 7 of the report: cuFFT's first transforms and rates, spectral derivatives, the streamed convolution, the Poisson solver."""

from __future__ import annotations

import numpy as np

from .. import convolution as conv
from .. import fft, spectral, stencil2d
from ..arrays import array_module, to_host
from ..sizes import problem_size
from .core import BookCell, ChapterPlan, Context, Row, Section, cells

STEPS = ("ch7: the book's first transforms", "ch7: transform rates", "ch7: spectral derivatives", "ch7: streamed convolution",
         "ch7: Poisson solver")

NOT_MEASURED = {
    r"ch7_cufft_max_(sp|dp)": "limits of cuFFT in CUDA 5; today's limits are in the cuFFT documentation (notebook 7.1 says so)",
    r"ch7_conv_bidir_bw_K20X": "a bandwidth the book read off its timeline; the rows give this machine's copy rates each way, measured alone",
    r"ch7_conv_cufkernel_time_K20X": "the time of the book's multiply kernel alone, read off its trace; the rows time the whole compute of a "
                                     "plane (three FFTs and the multiply)",
    r"ch7_poisson_nvprof_(real2complex|complex2real|memcpy_DtoD)_K20X|ch7_poisson_r2c1d_speedup": "kernels of the book's C2C path that "
        "convert between real and complex arrays; the course's solver uses R2C and C2R transforms and has no such kernels",
    r"ch7_poisson_time_nvprof_run_K20X": "the same run under nvprof; the end-to-end row times this machine's run without a profiler",
}


def _book_signal(n: int) -> np.ndarray:
    x = 2 * np.pi * np.arange(n) / n
    return np.cos(2 * x) + np.sin(3 * x)


def first_transforms(ctx: Context) -> list[Section]:
    """The book's N = 16 transforms of cos 2x + sin 3x: C2C, R2C in place, and the shifted spectrum."""
    ctx.step(STEPS[0])
    section = Section("The book's first transforms, N = 16, f = cos 2x + sin 3x (§7.1)")
    xp = array_module()
    n = problem_size("ch7_book_points")
    signal = _book_signal(n)
    c2c_in = xp.asarray(signal.astype(np.complex64))
    c2c_out = xp.empty_like(c2c_in)
    fft.transform(c2c_in, c2c_out, "C2C", fft.FORWARD)
    values = to_host(c2c_out) / n
    for figure_id, k, part in (("ch7_fft_c2c_coef_kp2_re", 2, "real"), ("ch7_fft_c2c_coef_kp3_im", 3, "imag"),
                               ("ch7_fft_c2c_coef_km3_im", -3, "imag"), ("ch7_fft_c2c_coef_km2_re", -2, "real")):
        value = getattr(values[k % n], part)
        section.rows.append(Row(f"C2C coefficient k = {k:+d}, {part} part, over N", cells(figure_id), round(float(value), 6)))
    r2c_in = xp.asarray(signal.astype(np.float32))
    r2c_out = xp.empty(n // 2 + 1, np.complex64)
    fft.transform(r2c_in, r2c_out, "R2C", fft.FORWARD)
    half = to_host(r2c_out) / n
    section.rows.append(Row("R2C coefficient k = 2, real part, over N", cells("ch7_fft_r2c_coef_kp2_re"), round(float(half[2].real), 6)))
    section.rows.append(Row("R2C coefficient k = 3, imaginary part, over N", cells("ch7_fft_r2c_coef_kp3_im"), round(float(half[3].imag), 6)))
    shifted_in = xp.asarray(((signal + n) * (-1.0) ** np.arange(n)).astype(np.complex64))
    shifted = xp.empty_like(shifted_in)
    fft.transform(shifted_in, shifted, "C2C", fft.FORWARD)
    section.rows.append(Row("shifted spectrum (f + N times (-1)^j): k = 0 over N", cells("ch7_fft_shift_k0"),
                            round(float((to_host(shifted) / n)[n // 2].real), 6)))
    return [section]


def rates(ctx: Context) -> list[Section]:
    """2D transforms: the book's 1024^2 double-complex transform and the large float32 ones, against the copy ceiling."""
    ctx.step(STEPS[1])
    section = Section("Transform rates (§7.4's 1024² figure; GFLOP/s by 5 N log2 N)")
    side = problem_size("ch7_poisson_book")
    book_size = fft.measure_transform((side, side), np.complex128, "C2C", repeat=ctx.repeat)
    section.rows.append(Row(f"the book's 2D transform: {book_size.spec.describe()}", cells("ch7_poisson_fft_time_K20X"),
                            1e3 * book_size.timing.median_ms, "us", None if ctx.simulated else book_size.fraction_of_copy(ctx.ceilings)))
    section.rows.append(Row("its rate by the 5 N log2 N count", cells("ch7_poisson_fft_gflops_K20X"), book_size.gflops,
                            "GFLOP/s" if not ctx.simulated else "GFLOP/s (simulator: NumPy's FFT)"))
    for kind, shape, dtype in problem_size("ch7_transforms"):
        measured = fft.measure_transform(shape, np.dtype(dtype), kind, repeat=ctx.repeat)
        section.rows.append(Row(f"{measured.spec.describe()}", [], 1e3 * measured.timing.median_ms, "us",
                                None if ctx.simulated else measured.fraction_of_copy(ctx.ceilings),
                                note=f"{measured.gflops:.0f} GFLOP/s, {measured.gbs:.0f} GB/s"
                                     + (" (simulator: NumPy's FFT)" if ctx.simulated else "")))
    return [section]


def derivatives(ctx: Context) -> list[Section]:
    """The book's 8-point spectral derivative, point by point, and the time per derivative beside chapter 6's stencil."""
    ctx.step(STEPS[2])
    section = Section("Spectral derivatives (§7.2)")
    n = problem_size("ch7_book_derivative_points")
    x = spectral.periodic_points(n)
    f, exact, _ = spectral.book_wave(x)
    for dtype, tag in ((np.float64, "dp"), (np.float32, "sp")):
        errors = spectral.derivative_of(f.astype(dtype)) - exact
        section.rows.append(Row(f"error of the spectral derivative at the {n} points, {np.dtype(dtype).name}",
                                [BookCell.of(f"ch7_specderiv_{tag}_err_p{k}") for k in range(1, n + 1)],
                                ", ".join(f"{e:.2e}" for e in errors), "abs", note="the book's and this GPU's are rounding noise"))
    side = problem_size("ch7_spectral_grid")
    times = spectral.time_derivatives(side, np.float32, repeat=ctx.repeat)
    section.rows.append(Row(f"x derivative of a {side}^3 float32 cube: spectral over chapter 6's stencil", [], round(times.ratio, 2), "x",
                            note="" if ctx.simulated else
                            f"spectral {1e3 * times.spectral.median_ms:.1f} us, stencil {1e3 * times.stencil.median_ms:.1f} us"))
    return [section]


def convolution(ctx: Context) -> list[Section]:
    """The book's three convolution loops (copies only, one stream, four streams) and its per-plane analysis."""
    ctx.step(STEPS[3])
    plane_shape, planes, streams = problem_size("ch7_convolution")
    section = Section(f"FFT convolution with streams: {planes} planes of {plane_shape[0]} x {plane_shape[1]} complex64, "
                      f"{streams} streams (§7.3)")
    pipeline = conv.make_pipeline(plane_shape, planes, streams)
    errors = [conv.run(pipeline, name) for name in conv.SCHEDULES]
    worst = max(error for error in errors if error == error)  # the I/O-only loop convolves nothing: its NaN is no error
    times = conv.time_schedules(pipeline, repeat=ctx.repeat)
    for name in conv.SCHEDULES:
        suffix = conv.BOOK_SUFFIX[name]
        section.rows.append(Row(f"{name}: time of the whole loop", cells(f"ch7_conv_{suffix}_K20X", f"ch7_conv_{suffix}_K10",
                                                                         f"ch7_conv_{suffix}_fixed_K10"), times[name].median_ms / 1e3, "s"))
    estimate = conv.book_estimate(times["I/O only"].median_ms, times["single stream"].median_ms)
    section.rows.append(Row("the book's estimate of the overlapped time: max(single - I/O, 2/3 of I/O)",
                            cells("ch7_conv_model_K20X", "ch7_conv_compute_K10", "ch7_conv_two_thirds_io_K10"), estimate / 1e3, "s",
                            note="" if ctx.simulated else f"measured with streams: {times['multi stream'].median_ms / 1e3:.4g} s"))
    pieces = conv.measure_plane_times(pipeline, repeat=ctx.repeat)
    one_fft = fft.measure_transform(plane_shape, np.complex64, "C2C", repeat=ctx.repeat)
    section.rows.append(Row("one plane's FFT", cells("ch7_conv_fft_time_K20X"), 1e3 * one_fft.timing.median_ms, "us"))
    section.rows.append(Row("compute of one plane (3 FFTs and the multiply)", cells("ch7_conv_compute_per_plane_K20X"),
                            1e3 * pieces.compute_ms, "us"))
    section.rows.append(Row("transfer of one plane to the device", cells("ch7_conv_transfer_per_plane_K20X"), 1e3 * pieces.h2d_ms / 2, "us"))
    section.rows.append(Row("transfers before the first convolution (a plane of each input)", cells("ch7_conv_startup_K20X"),
                            1e3 * pieces.h2d_ms, "us"))
    section.rows.append(Row("host-to-device bandwidth (pinned)", [BookCell.of("ch7_conv_h2d_bw_K20X", as_bandwidth=False),
                                                                  BookCell.of("ch7_conv_bw_K10", as_bandwidth=False)], pieces.h2d_gbs, "GB/s"))
    section.rows.append(Row("device-to-host bandwidth (pinned)", [BookCell.of("ch7_conv_d2h_bw_K20X", as_bandwidth=False)], pieces.d2h_gbs, "GB/s",
                            note=("" if ctx.simulated else f"one plane is bound by {pieces.bound}; ")
                            + f"largest relative error of any loop {worst:.1e}"))
    return [section]


def poisson(ctx: Context) -> list[Section]:
    """The book's Poisson problem: errors, the whole solve with its copies, its pieces; the large float32 solve against its FFTs."""
    ctx.step(STEPS[4])
    section = Section("The periodic Poisson solver (§7.4)")
    n_book = problem_size("ch7_poisson_book")
    problem = spectral.book_poisson_problem(n_book)
    _, (linf, l2) = spectral.solve_problem(problem, np.float64, "r2c")
    section.rows.append(Row(f"L-infinity error, {n_book}^2 float64", cells("ch7_poisson_linf_K20X"), linf, "abs"))
    section.rows.append(Row(f"the book's L2 error, {n_book}^2 float64", cells("ch7_poisson_l2_K20X"), l2, "abs"))
    xp = array_module()
    rho_dev = xp.asarray(problem.rho)
    u_dev = xp.empty_like(rho_dev)
    solve = spectral.poisson_solve.plan(rho_dev, u_dev)
    ffts = spectral.two_ffts.plan(rho_dev, u_dev)
    rho_host, u_host = problem.rho.copy(), np.empty_like(problem.rho)
    stream = None
    if not ctx.simulated:
        from numba import cuda

        from ..arrays import require_cupy

        rho_host, u_host = cuda.pinned_array(problem.rho.shape, np.float64), cuda.pinned_array(problem.rho.shape, np.float64)
        rho_host[...] = problem.rho
        stream = require_cupy("a stream").cuda.Stream()

    def end_to_end() -> None:
        conv.copy_in(rho_dev, rho_host, stream)
        solve(stream=stream)
        conv.copy_out(u_host, u_dev, stream)

    whole = ctx.time(end_to_end)
    section.rows.append(Row(f"whole solve, {n_book}^2 float64, copies in and out included", cells("ch7_poisson_time_K20X"),
                            whole.median_ms, "ms", note="pinned host arrays"))
    copy_in = ctx.time(lambda: conv.copy_in(rho_dev, rho_host, stream))
    copy_out = ctx.time(lambda: conv.copy_out(u_host, u_dev, stream))
    nbytes = problem.rho.nbytes
    section.rows.append(Row("copy of rho to the device", cells("ch7_poisson_nvprof_memcpy_HtoD_K20X"), copy_in.median_ms, "ms"))
    section.rows.append(Row("copy of u to the host", cells("ch7_poisson_nvprof_memcpy_DtoH_K20X"), copy_out.median_ms, "ms"))
    section.rows.append(Row("host-to-device bandwidth", [BookCell.of("ch7_poisson_h2d_bw_K20X", as_bandwidth=False)],
                            copy_in.bandwidth_gbs(nbytes), "GB/s"))
    section.rows.append(Row("device-to-host bandwidth", [BookCell.of("ch7_poisson_d2h_bw_K20X", as_bandwidth=False)],
                            copy_out.bandwidth_gbs(nbytes), "GB/s"))
    two = ctx.time(ffts)
    section.rows.append(Row("the two transforms (forward and inverse)",
                            cells("ch7_poisson_nvprof_fft_radix_fwd_K20X", "ch7_poisson_nvprof_fft_radix_inv_K20X",
                                  "ch7_poisson_nvprof_fft_vector_fwd_K20X", "ch7_poisson_nvprof_fft_vector_inv_K20X"),
                            1e3 * two.median_ms, "us", note="R2C and C2R here; the book's double-complex C2C ran in two cuFFT kernels each way"))
    alone = ctx.time(solve)
    section.rows.append(Row("the division in Fourier space (one kernel)", cells("ch7_poisson_nvprof_solve_K20X"),
                            1e3 * (alone.median_ms - two.median_ms), "us", note="the solve's time less its two transforms"))
    division = stencil2d.measure(repeat=ctx.repeat, parts=("kspace",))  # the record's mesh (measurements/stencil2d.json)
    for label, m in division.rows.items():
        section.rows.append(Row(f"{label}: one pass over the {division.shape[0]} x {division.shape[1] // 2 + 1} complex64 half spectrum",
                                [], m.us, "us", None if ctx.simulated else m.of_copy,
                                note="simulator time" if ctx.simulated else f"a loop of public calls {m.back_to_back_of_copy:.2f} of copy"))
    n = problem_size("ch7_poisson")
    timed = spectral.time_poisson((n, n), np.float32, repeat=ctx.repeat, book=False)
    section.rows.append(Row(f"{n}^2 float32 solve over its two FFTs alone", [], round(timed.ratio, 3), "x",
                            note="" if ctx.simulated else f"{1e3 * timed.solve.median_ms:.0f} us"
                            + ("" if timed.back_to_back_ratio is None else f"; back to back as a graph: {timed.back_to_back_ratio:.3f}")))
    return [section]


def measure(ctx: Context) -> list[Section]:
    """Every chapter-7 section of the report."""
    return first_transforms(ctx) + rates(ctx) + derivatives(ctx) + convolution(ctx) + poisson(ctx)


PLAN = ChapterPlan(7, "FFT", STEPS, measure, NOT_MEASURED)
