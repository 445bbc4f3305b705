"""Chapter 7 on a GPU in one run: cuFFT rates, spectral derivatives, the Poisson solve against its FFTs, the streamed convolution.

    python3 tools/gpu_ch7.py [--out DIR]

Checks every result before timing it, prints each figure as it is measured and a short table at the
end, and writes every number to DIR/ch7_results.json and the convolution timelines to
DIR/ch7_timeline.png. Runs in the simulator too (tiny sizes, host times) to test the script itself.
The measurements of record are in measurements/ch7.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import gpucourse  # noqa: E402  (first: it picks the mode)
from gpucourse import book, fft, spectral  # noqa: E402
from gpucourse import convolution as conv  # noqa: E402

RESULTS: dict = {}
SUMMARY: list[tuple[str, str]] = []
REPEAT = gpucourse.problem_size("ch7_repeat")


def log(*parts) -> None:
    print(*parts, flush=True)


def section(name: str):
    """Run a measurement section; a failure is logged with its traceback and the run goes on."""

    def wrap(function):
        def run(*args, **kwargs):
            log(f"\n=== {name} ===")
            start = time.perf_counter()
            try:
                function(*args, **kwargs)
            except Exception as exc:  # a section that fails must not hide the others
                log(f"!! {name} failed: {type(exc).__name__}: {exc}")
                traceback.print_exc()
                RESULTS.setdefault("failures", []).append(f"{name}: {type(exc).__name__}: {exc}")
            log(f"--- {name}: {time.perf_counter() - start:.1f} s")
        return run

    return wrap


def timing_dict(timing) -> dict:
    return {"median_ms": timing.median_ms, "min_ms": timing.min_ms, "max_ms": timing.max_ms, "back_to_back_ms": timing.back_to_back_ms,
            "host_ms_per_call": timing.host_ms_per_call, "clock": timing.clock, "verdict": timing.verdict()}


@section("cuFFT transforms")
def transforms(ceilings) -> None:
    rows = []
    for kind, shape, dtype in gpucourse.problem_size("ch7_transforms"):
        measured = fft.measure_transform(shape, np.dtype(dtype), kind, repeat=REPEAT)
        fraction = None if ceilings.simulated else measured.fraction_of_copy(ceilings)
        rows.append({"transform": measured.spec.describe(), "us": 1e3 * measured.timing.median_ms, "gflops": measured.gflops,
                     "gbs": measured.gbs, "fraction_of_copy": fraction, "bytes": measured.spec.bytes_moved,
                     "timing": timing_dict(measured.timing)})
        log(f"  {measured.spec.describe():62s} {1e3 * measured.timing.median_ms:9.1f} us {measured.gflops:8.1f} GFLOP/s "
            f"{measured.gbs:8.1f} GB/s" + ("" if fraction is None else f" {fraction:5.2f} of copy"))
        if kind in ("R2C", "C2R", "C2C") and len(shape) == 2 and shape[0] >= 4096 and fraction is not None:
            SUMMARY.append((f"2D {kind} {shape[0]}^2 {dtype}", f"{measured.gbs:.0f} GB/s = {fraction:.2f} of copy, "
                                                                 f"{1e3 * measured.timing.median_ms:.0f} us"))
        if kind == "C2C" and dtype == "complex128" and shape == (1024, 1024):
            SUMMARY.append(("Z2Z 1024^2 (book K20X: 700 us, 150 GFLOP/s)",
                            f"{1e3 * measured.timing.median_ms:.1f} us, {measured.gflops:.0f} GFLOP/s"))
    RESULTS["transforms"] = rows
    if not gpucourse.is_simulator():
        plans = []
        for shape in gpucourse.problem_size("ch7_plan_shapes"):
            make = float(np.median([fft.plan_creation_ms(shape, np.complex64, "C2C") for _ in range(3)]))
            run = fft.measure_transform(shape, np.complex64, "C2C", repeat=5).timing.median_ms
            plans.append({"shape": shape, "make_ms": make, "execute_ms": run})
            log(f"  plan {shape}: make {make:.3f} ms, execute {run:.4f} ms ({make / run:.0f} executions)")
        RESULTS["plans"] = plans
        lengths = {}
        for length in gpucourse.problem_size("ch7_fast_sizes"):
            measured = fft.measure_transform((1024, length), np.complex64, "C2C", axes=(-1,), repeat=5)
            lengths[length] = 1e6 * measured.timing.median_ms / (1024 * length)
            log(f"  1D C2C n = {length} x 1024: {lengths[length]:.4f} ns per point")
        RESULTS["fast_sizes_ns_per_point"] = lengths


@section("spectral derivatives")
def derivatives(ceilings) -> None:
    n = gpucourse.problem_size("ch7_book_derivative_points")
    x = spectral.periodic_points(n)
    f, exact, _ = spectral.book_wave(x)
    book_errors = {}
    for dtype in (np.float64, np.float32):
        got = spectral.derivative_of(f.astype(dtype))
        book_errors[np.dtype(dtype).name] = float(np.max(np.abs(got - exact)))
    RESULTS["book_derivative_max_error"] = book_errors
    log(f"  book's n = 8 example, max error: {book_errors}")
    sizes = (12, 16, 24, 32, 64, 128, 256) if not gpucourse.is_simulator() else (12, 16)
    study = {}
    for dtype in ("float64", "float32"):
        study[dtype] = [(p.n, p.spectral, p.stencil) for p in spectral.convergence_study(sizes, np.dtype(dtype))]
        log(f"  convergence {dtype}: " + "; ".join(f"n={n}: {s:.1e} vs {t:.1e}" for n, s, t in study[dtype]))
    RESULTS["convergence"] = study
    side = gpucourse.problem_size("ch7_spectral_grid")
    times = spectral.time_derivatives(side, np.float32, repeat=REPEAT)
    entry = {"n": side, "spectral": timing_dict(times.spectral), "stencil": timing_dict(times.stencil), "ratio": times.ratio}
    for name, timing in (("spectral", times.spectral), ("stencil", times.stencil)):
        gbs = timing.bandwidth_gbs(times.bytes_moved)
        entry[f"{name}_gbs"] = gbs
        log(f"  {side}^3 float32 x derivative, {name:8s}: {1e3 * timing.median_ms:8.1f} us, {gbs:7.1f} GB/s (2 x 4 n^3 bytes)")
    RESULTS["derivative_times"] = entry
    SUMMARY.append((f"x derivative {side}^3 float32", f"spectral {1e3 * times.spectral.median_ms:.0f} us, stencil "
                                                      f"{1e3 * times.stencil.median_ms:.0f} us ({times.ratio:.1f}x)"))


@section("Poisson")
def poisson(ceilings) -> None:
    n_book = gpucourse.problem_size("ch7_poisson_book")
    problem = spectral.book_poisson_problem(n_book)
    errors = {}
    for method in ("r2c", "book"):
        for dtype in (np.float64, np.float32):
            _, (linf, l2) = spectral.solve_problem(problem, dtype, method)
            errors[f"{method} {np.dtype(dtype).name}"] = (linf, l2)
            log(f"  book problem {n_book}^2, {method:4s} {np.dtype(dtype).name}: Linf {linf!r}, book L2 {l2!r}")
    log(f"  book, K20X: Linf {book.figure('ch7_poisson_linf_K20X').value}, L2 {book.figure('ch7_poisson_l2_K20X').value}")
    RESULTS["poisson_book_errors"] = errors
    n = gpucourse.problem_size("ch7_poisson")
    times = spectral.time_poisson((n, n), np.float32, repeat=REPEAT)
    entry = {"n": n, "ratio_gpu": times.ratio, "ratio_back_to_back": times.back_to_back_ratio}
    for name in ("ffts", "solve", "graph", "book"):
        timing = getattr(times, name)
        entry[name] = timing_dict(timing)
        log(f"  {n}^2 float32 {name:6s}: GPU {1e3 * timing.median_ms:8.1f} us, back to back "
            f"{1e3 * (timing.back_to_back_ms or float('nan')):8.1f} us  {timing.verdict()}")
    log(f"  solve / two FFTs: {times.ratio:.3f} (GPU), {times.back_to_back_ratio or float('nan'):.3f} (back to back)")
    RESULTS["poisson_times"] = entry
    SUMMARY.append((f"Poisson {n}^2 float32 / its two FFTs (at most 1.5)",
                    f"{times.ratio:.3f} GPU ({1e3 * times.solve.median_ms:.0f} / {1e3 * times.ffts.median_ms:.0f} us), "
                    f"{times.back_to_back_ratio or float('nan'):.3f} back to back"))
    sweep = []
    for side in gpucourse.problem_size("ch7_poisson_sizes"):
        t = spectral.time_poisson((side, side), np.float32, repeat=10, book=False)
        sweep.append({"n": side, "solve": timing_dict(t.solve), "ffts": timing_dict(t.ffts), "graph": timing_dict(t.graph), "ratio": t.ratio})
        log(f"  n = {side:5d}: GPU {1e3 * t.solve.median_ms:8.1f} us; back to back plan "
            f"{1e3 * (t.solve.back_to_back_ms or float('nan')):8.1f} us, graph {1e3 * (t.graph.back_to_back_ms or float('nan')):8.1f} us; "
            f"ratio {t.ratio:.3f}")
    RESULTS["poisson_sizes"] = sweep
    variants = spectral.division_variants((n, n), np.float32, repeat=REPEAT)
    nbytes = spectral.division_bytes((n, n), np.float32)
    RESULTS["division_variants"] = {}
    for label, timing in variants.items():
        gbs = timing.bandwidth_gbs(nbytes[label])
        fraction = None if ceilings.simulated else ceilings.fraction_of_copy(gbs)
        RESULTS["division_variants"][label] = {**timing_dict(timing), "gbs": gbs, "fraction_of_copy": fraction}
        log(f"  division, {label:38s}: {1e3 * timing.median_ms:8.1f} us {gbs:8.1f} GB/s" + ("" if fraction is None else f" {fraction:.2f} of copy"))
    SUMMARY.append(("k-space division " + ", ".join(f"{k.split(' (')[0]}" for k in variants),
                    ", ".join(f"{1e3 * t.median_ms:.0f}" for t in variants.values()) + " us"))
    # the book's end-to-end time: copies in and out included (1024^2 float64)
    from numba import cuda

    rho_host, u_host = cuda.pinned_array((n_book, n_book), np.float64), cuda.pinned_array((n_book, n_book), np.float64)
    rho_host[...] = problem.rho
    xp = gpucourse.array_module()
    rho_dev = xp.empty((n_book, n_book), np.float64)
    u_dev = xp.empty_like(rho_dev)
    solve = spectral.poisson_solve.plan(rho_dev, u_dev)
    stream = None if gpucourse.is_simulator() else gpucourse.require_cupy("streams").cuda.Stream()

    def end_to_end() -> None:
        conv.copy_in(rho_dev, rho_host, stream)
        solve(stream=stream)
        conv.copy_out(u_host, u_dev, stream)

    timing = gpucourse.benchmark(end_to_end, repeat=REPEAT, stream=stream)
    alone = gpucourse.benchmark(lambda: solve(stream=stream), repeat=REPEAT, stream=stream)
    RESULTS["end_to_end_1024_float64"] = {"with_copies": timing_dict(timing), "solve": timing_dict(alone), "errors": problem.errors(u_host)}
    log(f"  end to end {n_book}^2 float64: {timing.median_ms:.3f} ms (solve alone {alone.median_ms:.3f} ms); book K20X "
        f"{book.figure('ch7_poisson_time_K20X').number} ms; errors {problem.errors(u_host)}")
    SUMMARY.append((f"end to end {n_book}^2 float64 (book K20X 5.75 ms)", f"{timing.median_ms:.3f} ms, solve {alone.median_ms:.3f} ms"))


@section("streamed convolution")
def convolution(out_dir: Path) -> None:
    plane_shape, planes, streams = gpucourse.problem_size("ch7_convolution")
    pipeline = conv.make_pipeline(plane_shape, planes, streams)
    log("  " + conv.describe(pipeline))
    errors = {name: conv.run(pipeline, name) for name in conv.SCHEDULES}
    log(f"  results: {errors}")
    if not np.array_equal(pipeline.c, pipeline.c):  # NaN left anywhere: some plane never came back
        raise RuntimeError("some result planes were never written")
    times = conv.time_schedules(pipeline, repeat=REPEAT)
    for name, timing in times.items():
        log(f"  {name:14s}: {timing.median_ms:8.3f} ms  {timing}")
    speedup = times["single stream"].median_ms / times["multi stream"].median_ms
    pieces = conv.measure_plane_times(pipeline, repeat=REPEAT)
    one_stream_model, overlapped_model = pieces.predicted_ms(planes)
    floor = conv.transfer_floor_ms(pipeline, pieces.h2d_gbs, pieces.d2h_gbs)
    estimate = conv.book_estimate(times["I/O only"].median_ms, times["single stream"].median_ms)
    log(f"  one plane: in {1e3 * pieces.h2d_ms:.1f} us ({pieces.h2d_gbs:.1f} GB/s), compute {1e3 * pieces.compute_ms:.1f} us, "
        f"out {1e3 * pieces.d2h_ms:.1f} us ({pieces.d2h_gbs:.1f} GB/s); bound by {pieces.bound}")
    log(f"  model: one stream {one_stream_model:.2f} ms, overlapped {overlapped_model:.2f} ms; book estimate {estimate:.2f} ms; "
        f"transfer floor {floor:.2f} ms")
    timelines = {}
    shown = gpucourse.problem_size("ch7_timeline_planes")
    for name in ("single stream", "multi stream"):
        timelines[name] = conv.record_timeline(pipeline, name, planes=shown)
        log(f"  timeline {name}: {timelines[name].summary()}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 1, figsize=(11, 4.5), sharex=True)
        for ax, (name, timeline) in zip(axes, timelines.items()):
            timeline.plot(ax=ax, title=f"{name}, first {shown} planes: {timeline.total_ms:.3g} ms")
        fig.tight_layout()
        fig.savefig(out_dir / "ch7_timeline.png", dpi=110)
    except Exception as exc:  # the plot is a convenience; the numbers are in the log
        log(f"  (timeline plot not saved: {exc})")
    sweep = {}
    for count in gpucourse.problem_size("ch7_stream_counts"):
        p = conv.with_streams(pipeline.a, pipeline.b, pipeline.c, count)
        sweep[count] = conv.time_run(lambda p=p: conv.multi_stream(p), repeat=5).median_ms
        log(f"  {count} stream(s): {sweep[count]:.3f} ms")
    RESULTS["convolution"] = {
        "describe": conv.describe(pipeline), "errors": errors, "times": {k: timing_dict(v) for k, v in times.items()},
        "speedup_multi_over_single": speedup, "plane": {"h2d_ms": pieces.h2d_ms, "compute_ms": pieces.compute_ms, "d2h_ms": pieces.d2h_ms,
                                                        "h2d_gbs": pieces.h2d_gbs, "d2h_gbs": pieces.d2h_gbs, "bound": pieces.bound},
        "model_ms": {"one_stream": one_stream_model, "overlapped": overlapped_model, "book_estimate": estimate, "transfer_floor": floor},
        "timelines": {k: {"total_ms": t.total_ms, "overlap_ms": t.overlap_ms(), "summary": t.summary()} for k, t in timelines.items()},
        "stream_sweep_ms": sweep}
    SUMMARY.append(("convolution, single / multi stream", f"{times['single stream'].median_ms:.2f} / {times['multi stream'].median_ms:.2f} ms "
                                                          f"({speedup:.2f}x); I/O only {times['I/O only'].median_ms:.2f} ms"))
    SUMMARY.append(("timeline overlap (multi stream)", f"two kinds at once {timelines['multi stream'].overlap_ms():.2f} of "
                                                       f"{timelines['multi stream'].total_ms:.2f} ms (single stream: "
                                                       f"{timelines['single stream'].overlap_ms():.2f})"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="folder for ch7_results.json and ch7_timeline.png")
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    gpucourse.banner()
    ceilings = gpucourse.bandwidth_ceilings()
    device = gpucourse.current_device()
    log(ceilings)
    RESULTS["device"] = device.name
    RESULTS["ceilings"] = {"theoretical_gbs": ceilings.theoretical_gbs, "copy_gbs": ceilings.copy_gbs}
    try:
        import cupy

        RESULTS["versions"] = {"cupy": cupy.__version__, "cufft": cupy.cuda.cufft.getVersion(), "numpy": np.__version__}
    except Exception:  # the simulator has no CuPy
        RESULTS["versions"] = {"numpy": np.__version__}
    SUMMARY.append(("copy ceiling", f"{ceilings.copy_gbs:.0f} GB/s"))
    transforms(ceilings)
    derivatives(ceilings)
    poisson(ceilings)
    convolution(out_dir)
    RESULTS["seconds"] = time.perf_counter() - start
    (out_dir / "ch7_results.json").write_text(json.dumps(RESULTS, indent=1, default=str))
    log(f"\n=== summary ({device.name}, {RESULTS['seconds']:.0f} s) ===")
    for label, value in SUMMARY:
        log(f"  {label:58s} {value}")
    if RESULTS.get("failures"):
        log("FAILURES: " + "; ".join(RESULTS["failures"]))
        sys.exit(1)


if __name__ == "__main__":
    main()
