"""Probe for the launch-path work (issue 9), run once on the lent H100 before the launchers were converted.

    python3 tools/gpu_launch_probe.py OUT_DIR

Measures, with the copy ceiling of the same run: host cost per call of a raw Numba launch, a bound
kernel (gpucourse.launch), a planned launcher (Numba and CuPy arrays) and a CuPy RawKernel; graph
replay through CuPy stream capture and through a cuda.core graph builder; stream ordering of a plan
behind a gated stream; the benchmark's locator of a waiting call; and 512^3 derivative tiles.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import gpucourse  # noqa: E402
from gpucourse import graphs, launch  # noqa: E402
from gpucourse.kernels import stencil  # noqa: E402
from gpucourse.timing import _gate_for_device, benchmark  # noqa: E402

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
OUT.mkdir(parents=True, exist_ok=True)
R: dict = {}


def log(*a):
    print(*a, flush=True)


def host_us(fn, n=2000):
    for _ in range(20):
        fn()
    import cupy
    cupy.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t) / n * 1e6
    cupy.cuda.runtime.deviceSynchronize()
    return host


def main():
    import cupy
    from numba import cuda

    ceil = gpucourse.bandwidth_ceilings()
    R["ceilings"] = str(ceil)
    R["copy_gbs"] = ceil.copy_gbs
    log(ceil)
    n = 256
    shape = (n, n, n)
    host = gpucourse.random_array(shape, np.float32, seed=1)
    f_nb = cuda.to_device(host)
    df_nb = cuda.device_array(shape, np.float32)
    f_cp = cupy.asarray(host)
    df_cp = cupy.empty(shape, np.float32)
    coef = stencil.coefficients_for(host, 2 * np.pi / n)
    tile = stencil.default_x_tile(shape)
    kernel = stencil.deriv_x_kernel(n, tile.threads_x, tile.pencils, tile.rows, "float32")
    blocks = (-(-n // tile.pencils), n)
    threads = (tile.threads_x, tile.rows)
    nbytes = stencil.bytes_moved(shape, 4)

    raw = lambda: kernel[blocks, threads](f_nb, df_nb, coef)  # noqa: E731
    raw_cp = lambda: kernel[blocks, threads](f_cp, df_cp, coef)  # noqa: E731
    bound_nb = launch.bind(kernel, blocks, threads, f_nb, df_nb, coef)
    bound_cp = launch.bind(kernel, blocks, threads, f_cp, df_cp, coef)

    @launch.planned
    def deriv(f, df, c):
        return launch.bind(kernel, blocks, threads, f, df, c)

    plan_cp = deriv.plan(f_cp, df_cp, coef)
    old_api = lambda: stencil.derivative(f_cp, df_cp, "x", coef)  # noqa: E731
    src = r'extern "C" __global__ void k(const float* a, float* b, int n){int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n) b[i]=a[i];}'
    rk = cupy.RawKernel(src, "k")
    x1 = cupy.zeros(1 << 20, np.float32)
    y1 = cupy.zeros_like(x1)
    rawkernel = lambda: rk((4096,), (256,), (x1, y1, np.int32(1 << 20)))  # noqa: E731
    # correctness of each path
    ref = None
    for name, fn, out in (("raw", raw, df_nb), ("bound_nb", lambda: bound_nb.launch(0), df_nb), ("bound_cp", lambda: bound_cp.launch(0), df_cp),
                          ("planned_cp", lambda: deriv(f_cp, df_cp, coef), df_cp), ("plan_cp", plan_cp, df_cp)):
        if hasattr(out, "fill"):
            out.fill(np.nan)
        else:
            out.copy_to_device(np.full(shape, np.nan, np.float32))
        fn()
        got = gpucourse.to_host(out)
        if ref is None:
            ref = got
        R[f"same_{name}"] = bool(np.array_equal(got, ref))
        log("result", name, R[f"same_{name}"])
    costs = {}
    for name, fn in (("raw_numba_arrays", raw), ("raw_cupy_arrays", raw_cp), ("old_derivative_cupy", old_api),
                     ("bound_numba", lambda: bound_nb.launch(0)), ("bound_cupy", lambda: bound_cp.launch(0)),
                     ("planned_launcher_cupy", lambda: deriv(f_cp, df_cp, coef)), ("planned_launcher_numba", lambda: deriv(f_nb, df_nb, coef)),
                     ("plan_call", plan_cp), ("cupy_rawkernel", rawkernel),
                     ("get_current_stream", lambda: cupy.cuda.get_current_stream().ptr),
                     ("key_cupy", lambda: launch._key((f_cp, df_cp, coef))), ("key_numba", lambda: launch._key((f_nb, df_nb, coef)))):
        costs[name] = host_us(fn, 300 if "old" in name or "raw" in name else 2000)
        log(f"host us/call {name:28s} {costs[name]:8.2f}")
    R["host_us"] = costs
    # back to back: events around 1000 calls
    def b2b(fn, calls=1000):
        s, e = cupy.cuda.Event(), cupy.cuda.Event()
        fn(); cupy.cuda.runtime.deviceSynchronize()
        s.record()
        for _ in range(calls):
            fn()
        e.record(); e.synchronize()
        return cupy.cuda.get_elapsed_time(s, e) / calls
    b2 = {}
    for name, fn in (("raw_numba", raw), ("plan_cp", plan_cp), ("planned_launcher_cp", lambda: deriv(f_cp, df_cp, coef))):
        ms = b2b(fn)
        b2[name] = {"ms": ms, "fraction": nbytes / ms / 1e6 / ceil.copy_gbs}
        log(f"back-to-back {name:24s} {ms*1e3:8.1f} us {b2[name]['fraction']:.3f} of copy")
    # graphs: CuPy capture
    t0 = time.perf_counter()
    g = graphs.capture(lambda: [plan_cp() for _ in range(50)], "x50")
    R["capture_s"] = time.perf_counter() - t0
    ms = b2b(g.launch, 20) / 50
    b2["graph_cupy_capture"] = {"ms": ms, "fraction": nbytes / ms / 1e6 / ceil.copy_gbs}
    log(f"graph (cupy capture) per kernel {ms*1e3:.1f} us {b2['graph_cupy_capture']['fraction']:.3f}")
    costs["graph_launch_50"] = host_us(g.launch, 200)
    # graphs: cuda.core builder
    try:
        from cuda.core import Device, launch as core_launch
        dev = Device()
        gb = dev.create_graph_builder()
        gb.begin_building()
        for _ in range(50):
            core_launch(gb, bound_cp._config, bound_cp._kernel, *bound_cp._args)
        cg = gb.end_building().complete()
        st = launch.STREAMS.core(0)
        def core_graph():
            cg.launch(st)
        ms = b2b(core_graph, 20) / 50
        b2["graph_cuda_core_builder"] = {"ms": ms, "fraction": nbytes / ms / 1e6 / ceil.copy_gbs}
        costs["graph_core_launch_50"] = host_us(core_graph, 200)
        log(f"graph (cuda.core builder) per kernel {ms*1e3:.1f} us {b2['graph_cuda_core_builder']['fraction']:.3f}")
    except Exception as exc:
        R["core_graph_error"] = f"{type(exc).__name__}: {exc}"
        log("core graph error", R["core_graph_error"])
    R["back_to_back"] = b2
    # gated reference
    t = benchmark(plan_cp, repeat=10)
    R["gated_plan"] = {"ms": t.median_ms, "b2b_ms": t.back_to_back_ms, "fraction": t.bandwidth_gbs(nbytes) / ceil.copy_gbs, "text": str(t)}
    log("gated plan", t)
    t = benchmark(old_api, repeat=5)
    R["gated_old_api"] = {"ms": t.median_ms, "b2b_ms": t.back_to_back_ms, "waits_at": t.waits_at, "text": str(t)}
    log("gated old api", t)
    # stream ordering: producer on stream A held by a gate, plan on stream B
    gate = _gate_for_device(0)
    A = cupy.cuda.Stream(non_blocking=True)
    B = cupy.cuda.Stream(non_blocking=True)
    src_f = cupy.asarray(host)
    out = cupy.empty(shape, np.float32)
    with A:
        p2 = deriv.plan(src_f, out, coef)  # made while A is current: the arrays are ready on A
        gate.close(A, 2000.0)
        src_f *= 2  # queued on A behind the gate
    t0 = time.perf_counter()
    p2(stream=B)  # must wait for A on the device
    R["ordering_host_ms"] = (time.perf_counter() - t0) * 1e3
    gate.open()
    B.synchronize()
    R["ordering_correct"] = bool(np.allclose(out.get(), 2 * ref, rtol=1e-5, atol=1e-4))
    R["gate_timed_out"] = gate.timed_out()
    log("ordering", R["ordering_host_ms"], R["ordering_correct"], R["gate_timed_out"])
    # no host sync on the same stream: the gate holds the stream; plan call must return at once
    gate.close(cupy.cuda.Stream.null, 2000.0)
    t0 = time.perf_counter()
    for _ in range(10):
        deriv(f_cp, df_cp, coef)
    R["same_stream_host_ms"] = (time.perf_counter() - t0) * 1e3
    gate.open()
    cupy.cuda.runtime.deviceSynchronize()
    R["same_stream_timed_out"] = gate.timed_out()
    log("same stream host ms", R["same_stream_host_ms"], R["same_stream_timed_out"])
    # waits_at locator
    def waits():
        plan_cp()
        float(df_cp[0, 0, 0])
    t = benchmark(waits, repeat=3)
    R["waits_at"] = t.waits_at
    log("waits_at:", t.waits_at)
    # 512^3 derivatives: default tiles and a sweep
    del f_nb, df_nb, f_cp, df_cp, src_f, out
    cupy.get_default_memory_pool().free_all_blocks()
    n = 512
    shape = (n, n, n)
    f = cupy.random.random(shape, dtype=np.float32)
    df = cupy.empty_like(f)
    c = stencil.coefficients_for(f, 2 * np.pi / n)
    nbytes = stencil.bytes_moved(shape, 4)
    sweep = []
    def rec(name, call):
        try:
            t = benchmark(call, repeat=10)
            fr = t.bandwidth_gbs(nbytes) / ceil.copy_gbs
            sweep.append({"name": name, "ms": t.median_ms, "fraction": fr})
            log(f"512 {name:60s} {t.median_ms*1e3:8.1f} us {fr:.3f}")
        except Exception as exc:
            sweep.append({"name": name, "error": str(exc)})
            log("512", name, "error", exc)
    ff, dd = cuda.as_cuda_array(f, sync=False), cuda.as_cuda_array(df, sync=False)
    rec("x default", lambda: stencil.deriv_x(ff, dd, c))
    for tx, p, r in ((32, 8, 8), (64, 8, 8), (128, 4, 4), (32, 16, 8), (64, 4, 2), (128, 8, 4), (256, 4, 4), (32, 4, 4), (64, 16, 8)):
        tt = stencil.XTile(tx, p, r)
        k = stencil.deriv_x_kernel(n, tx, p, r, "float32")
        rec(f"x tile {tt}", lambda k=k, p=p, tx=tx, r=r: k[(-(-n // p), n), (tx, r)](ff, dd, c))
    for d in ("y", "z"):
        rec(f"{d} default", lambda d=d: stencil.deriv_yz(ff, dd, d, c))
        for L, P, Rr in ((64, 32, 4), (64, 32, 8), (128, 32, 8), (32, 32, 4), (128, 32, 16), (64, 64, 4), (256, 32, 16), (32, 32, 2), (128, 32, 4)):
            tt = stencil.AxisTile(L, P, Rr)
            rec(f"{d} tile {tt}", lambda d=d, tt=tt: stencil.deriv_yz(ff, dd, d, c, tt))
    R["sweep512"] = sweep
    (OUT / "probe.json").write_text(json.dumps(R, indent=1, default=str))


if __name__ == "__main__":
    main()
