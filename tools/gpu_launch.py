"""The launch path measured as a user meets it (issue: launch once, call cheaply), in one run on a GPU.

    python3 tools/gpu_launch.py OUT_DIR

Every figure is a ratio to the device-to-device copy measured in the same run. Writes
OUT_DIR/launch.json and prints a table at the end. Measures:

1. host cost per call of `derivative` (x, y, z; 256^3) and `transpose` (8192^2) through the public
   API with CuPy and with Numba arrays, against a raw Numba launch of the same compiled kernel;
2. 1000 back-to-back calls timed with plain events (no gate): transpose through the public API,
   derivatives through a CUDA graph and in a plain loop;
3. heat_run (4096^2, 2000 steps, global and 4 steps per launch) and jacobi_iterations (4096^2,
   1000 sweeps) end to end against the gated GPU time of the same steps;
4. derivatives x, y, z at 512^3 (gated and back to back);
5. the chapter-2 launch-cost table.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import gpucourse  # noqa: E402  (first: it picks the mode)
from gpucourse import finite_difference as fd  # noqa: E402
from gpucourse import graphs, launch_costs  # noqa: E402
from gpucourse.kernels import heat, laplace, stencil, transpose  # noqa: E402
from gpucourse.timing import back_to_back_us, benchmark, host_cost_us  # noqa: E402

RESULTS: dict = {}


def log(*parts) -> None:
    print(*parts, flush=True)


def raw_launch(bound, args):
    """A raw Numba launch of the compiled kernel a plan holds, with the same configuration."""
    kernel = bound.kernel
    return lambda: kernel[bound.blocks, bound.threads, 0, bound.shared_bytes](*args)


def host_costs(copy_gbs: float) -> None:
    import cupy
    from numba import cuda

    n = 256
    shape = (n, n, n)
    host = gpucourse.random_array(shape, np.float32, seed=1)
    f_cp, df_cp = cupy.asarray(host), cupy.empty(shape, np.float32)
    f_nb, df_nb = cuda.as_cuda_array(f_cp, sync=False), cuda.as_cuda_array(df_cp, sync=False)
    c = stencil.coefficients_for(host, 2 * np.pi / n)
    rows = []
    for direction in "xyz":
        plan = stencil.derivative.plan(f_nb, df_nb, direction, c)
        (bound,) = plan.launches
        src, dst = (f_nb, df_nb) if direction != "z" else (stencil.middle_axis_view(f_nb, "z"), stencil.middle_axis_view(df_nb, "z"))
        raw = host_cost_us(raw_launch(bound, (src, dst, c)))
        api_cp = host_cost_us(lambda d=direction: stencil.derivative(f_cp, df_cp, d, c))
        api_nb = host_cost_us(lambda d=direction: stencil.derivative(f_nb, df_nb, d, c))
        rows.append({"call": f"derivative {direction} 256^3", "raw_numba_us": raw, "api_cupy_us": api_cp, "api_numba_us": api_nb,
                     "ratio_cupy": api_cp / raw, "ratio_numba": api_nb / raw})
    m = 8192
    a_cp = cupy.asarray(gpucourse.random_array((m, m), np.float32, seed=2))
    t_cp = cupy.empty((m, m), np.float32)
    a_nb, t_nb = cuda.as_cuda_array(a_cp, sync=False), cuda.as_cuda_array(t_cp, sync=False)
    (bound,) = transpose.transpose.plan(t_nb, a_nb).launches
    raw = host_cost_us(raw_launch(bound, (t_nb, a_nb)))
    api_cp = host_cost_us(lambda: transpose.transpose(t_cp, a_cp))
    api_nb = host_cost_us(lambda: transpose.transpose(t_nb, a_nb))
    rows.append({"call": "transpose 8192^2", "raw_numba_us": raw, "api_cupy_us": api_cp, "api_numba_us": api_nb,
                 "ratio_cupy": api_cp / raw, "ratio_numba": api_nb / raw})
    for row in rows:
        log(f"host cost {row['call']:22s} raw Numba {row['raw_numba_us']:6.1f} us | API, CuPy arrays {row['api_cupy_us']:6.1f} us "
            f"({row['ratio_cupy']:.2f}x) | API, Numba arrays {row['api_numba_us']:6.1f} us ({row['ratio_numba']:.2f}x)")
    RESULTS["host_cost"] = rows

    # back to back, 1000 calls, plain events
    loops = []
    nbytes = transpose.bytes_moved(a_cp)
    for label, call in (("transpose 8192^2, public API, CuPy arrays", lambda: transpose.transpose(t_cp, a_cp)),
                        ("transpose 8192^2, public API, Numba arrays", lambda: transpose.transpose(t_nb, a_nb))):
        us = back_to_back_us(call, 1000)
        loops.append({"what": label, "us_per_call": us, "fraction_of_copy": nbytes / us / 1e3 / copy_gbs})
    nbytes = stencil.bytes_moved(shape, 4)
    for direction in "xyz":
        plain = back_to_back_us(lambda d=direction: stencil.derivative(f_cp, df_cp, d, c), 1000)
        loops.append({"what": f"derivative {direction} 256^3, plain loop", "us_per_call": plain, "fraction_of_copy": nbytes / plain / 1e3 / copy_gbs})
        graph = graphs.capture(lambda d=direction: [stencil.derivative(f_cp, df_cp, d, c) for _ in range(100)], f"100 {direction} derivatives")
        per = back_to_back_us(graph.launch, 10) / 100
        loops.append({"what": f"derivative {direction} 256^3, graph of 100", "us_per_call": per, "fraction_of_copy": nbytes / per / 1e3 / copy_gbs})
    for row in loops:
        log(f"1000 back to back: {row['what']:46s} {row['us_per_call']:8.1f} us/call  {row['fraction_of_copy']:.3f} of copy")
    RESULTS["back_to_back"] = loops


def run_row(run) -> dict:
    return {"gpu_ms": run.gpu_ms, "device_wall_ms": run.device_wall_ms, "graph_wall_ms": run.graph_wall_ms, "plain_wall_ms": run.plain_wall_ms,
            "device_ratio": run.device_ratio, "graph_ratio": run.graph_ratio, "plain_ratio": run.plain_ratio, "gpu_us_per_step": run.gpu_us_per_step}


def runs() -> None:
    shape, steps = gpucourse.problem_size("ch6_heat_run")
    host = gpucourse.random_array(shape, np.float32, seed=5, low=0.0, high=1.0)
    out = []
    for label, method, s in (("heat, global step", "global", 1), ("heat, shared, 4 steps per launch", "shared", 4)):
        run = heat.run_times(host, steps, 0.2, method, 32, s, repeat=3)
        out.append({"what": f"{label}, {shape[0]}x{shape[1]}, {steps} steps", **run_row(run)})
    shape, iterations, every = gpucourse.problem_size("ch6_laplace_run")
    initial = fd.laplace_initial(shape)
    for method in ("global", "shared"):
        run = laplace.iteration_times(initial, iterations, method, every, gpucourse.problem_size("ch6_laplace_block"), repeat=3)
        out.append({"what": f"jacobi_iterations {method}, {shape[0]}x{shape[1]}, {iterations} sweeps, residual every {every}", **run_row(run)})
    for row in out:
        log(f"{row['what']:62s} GPU {row['gpu_ms']:7.1f} ms | device data, graph {row['device_wall_ms']:7.1f} ms "
            f"({row['device_ratio']:.2f}x) | host data, graph {row['graph_wall_ms']:7.1f} ms ({row['graph_ratio']:.2f}x), "
            f"plain {row['plain_wall_ms']:7.1f} ms ({row['plain_ratio']:.2f}x)")
    RESULTS["runs"] = out


def large_derivatives(copy_gbs: float) -> None:
    import cupy

    n = 512
    shape = (n, n, n)
    f = cupy.asarray(gpucourse.random_array(shape, np.float32, seed=7))
    df = cupy.empty(shape, np.float32)
    c = stencil.coefficients_for(f, 2 * np.pi / n)
    nbytes = stencil.bytes_moved(shape, 4)
    host = gpucourse.to_host(f).astype(np.float64)
    rows = []
    for direction in "xyz":
        df.fill(np.nan)
        stencil.derivative(f, df, direction, c)
        reference = fd.derivative_reference(host[:16], direction, 2 * np.pi / n) if direction != "z" else None
        correct = bool(np.isfinite(gpucourse.to_host(df)).all())
        if reference is not None:  # x and y derivatives of the first 16 z-planes need no z neighbours
            correct = correct and bool(np.allclose(gpucourse.to_host(df[:16]), reference, atol=1e-3))
        timing = benchmark(lambda d=direction: stencil.derivative(f, df, d, c), repeat=15)
        rows.append({"direction": direction, "gpu_us": 1e3 * timing.median_ms, "fraction_of_copy": timing.bandwidth_gbs(nbytes) / copy_gbs,
                     "back_to_back_fraction": timing.back_to_back_gbs(nbytes) / copy_gbs, "written_and_checked": correct,
                     "tile": repr(stencil.default_x_tile(shape) if direction == "x" else stencil.default_axis_tile(shape, direction))})
        log(f"512^3 {direction}: {1e3 * timing.median_ms:8.1f} us  {rows[-1]['fraction_of_copy']:.3f} of copy (gated), "
            f"{rows[-1]['back_to_back_fraction']:.3f} back to back, checked {correct}, {rows[-1]['tile']}")
    RESULTS["derivatives_512"] = rows


def axis_tiles(copy_gbs: float) -> None:
    """The y/z tile at 256^3 and 512^3: 32 or 64 columns, 4 or 8 points per thread (the default was chosen from this)."""
    import cupy

    rows = []
    tiles = (stencil.AxisTile(64, 32, 4), stencil.AxisTile(64, 64, 4), stencil.AxisTile(64, 64, 8), stencil.AxisTile(32, 64, 4),
             stencil.AxisTile(32, 64, 8))
    for n in (256, 512):
        shape = (n, n, n)
        arrays = (cupy.asarray(gpucourse.random_array(shape, np.float32, seed=8)), cupy.empty(shape, np.float32),
                  stencil.coefficients_for(np.zeros(1, np.float32), 1.0 / n))
        for direction in "yz":
            for tile in tiles:
                timing = benchmark(lambda t=tile, d=direction, a=arrays: stencil.deriv_yz(a[0], a[1], d, a[2], t), repeat=10)
                fraction = timing.bandwidth_gbs(stencil.bytes_moved(shape, 4)) / copy_gbs
                rows.append({"grid": n, "direction": direction, "tile": repr(tile), "fraction_of_copy": fraction})
                log(f"{n}^3 {direction} {tile}: {fraction:.3f} of copy")
        arrays = None
        stencil.deriv_yz.clear()
        cupy.get_default_memory_pool().free_all_blocks()
    RESULTS["axis_tiles"] = rows


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    ceilings = gpucourse.bandwidth_ceilings()
    log(ceilings)
    device = gpucourse.current_device()
    RESULTS["meta"] = {"device": device.name, "driver_cuda": device.driver_cuda_version, "copy_gbs": ceilings.copy_gbs,
                       "theoretical_gbs": ceilings.theoretical_gbs, "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}
    import cupy

    for step in (lambda: host_costs(ceilings.copy_gbs), runs, lambda: large_derivatives(ceilings.copy_gbs),
                 lambda: axis_tiles(ceilings.copy_gbs)):
        step()
        cupy.get_default_memory_pool().free_all_blocks()  # each step's arrays are gone with it
    n = gpucourse.problem_size("ch2_short_kernel")
    costs = launch_costs.measure_launch_costs(n)
    log(launch_costs.launch_cost_table(costs, n, None))
    RESULTS["launch_costs"] = [cost.__dict__ for cost in costs]
    RESULTS["meta"]["seconds"] = time.time() - started
    (out / "launch.json").write_text(json.dumps(RESULTS, indent=1, default=str))
    log(f"done in {RESULTS['meta']['seconds']:.0f} s")


if __name__ == "__main__":
    main()
