"""Chapter 3 part A on a GPU, in one run: transfers and overlap, coalescing, memory spaces, ufunc-style kernels.

Run from the repository root: `python3 tools/gpu_ch3_memory.py` (everything: bench.json, timeline.png and
sweeps.png in $OUT, default /tmp/ch3_memory_out, and a short table at the end) or
`python3 tools/gpu_ch3_memory.py lite` (batching and the tile kernels' machine code only: bench_lite.json). It uses the package's
own functions and the notebooks' problem sizes, so its numbers are the ones the notebooks show.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import gpucourse  # noqa: E402
from gpucourse import compilation  # noqa: E402
from gpucourse.kernels import coalescing, transfers, ufuncs  # noqa: E402
from gpucourse.kernels import memory_spaces as ms  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp/ch3_memory_out"))
OUT.mkdir(parents=True, exist_ok=True)
size = gpucourse.problem_size
REPEAT = size("ch3_repeats")
TPB = size("ch3_threads_per_block")
results: dict = {}
started = time.perf_counter()


def stamp(label: str) -> None:
    print(f"[{time.perf_counter() - started:6.1f} s] {label}", flush=True)


def section_environment() -> None:
    print("python", platform.python_version(), "mode", gpucourse.MODE)
    print(gpucourse.banner())
    if gpucourse.on_gpu():
        query = "name,driver_version,pcie.link.gen.current,pcie.link.width.current,ecc.mode.current"
        print(subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"], capture_output=True, text=True).stdout)
    ceilings = gpucourse.bandwidth_ceilings()
    print(ceilings)
    device = gpucourse.current_device()
    results["device"] = {"name": device.name, "async_engines": device.async_engines, "copy_gbs": ceilings.copy_gbs,
                         "theoretical_gbs": ceilings.theoretical_gbs}


def section_transfers() -> None:
    stamp("transfers")
    test = transfers.transfer_sweep([size("ch3_bandwidth_test")], repeat=REPEAT)
    results["bandwidth_test"] = {f"{m.memory} {m.direction}": m.gbs for m in test}
    print(transfers.transfer_table(test, gpucourse.current_device().name))
    sweep = transfers.transfer_sweep(size("ch3_transfer_sizes"), repeat=REPEAT)
    results["transfer_sweep"] = [{"bytes": m.nbytes, "memory": m.memory, "direction": m.direction, "gbs": m.gbs,
                                  "us": 1e3 * m.timing.median_ms} for m in sweep]
    for m in sweep:
        print(f"  {m.memory:8s} {m.direction} {m.nbytes:>10d} B {m.gbs:8.2f} GB/s {1e3 * m.timing.median_ms:10.1f} us")
    total, pieces = size("ch3_batching")
    batch = transfers.measure_batching(total, pieces, repeat=REPEAT)
    results["batching"] = {"bytes": total, "pieces": pieces, "whole_ms": batch.whole.median_ms, "pieces_ms": batch.in_pieces.median_ms,
                           "overhead_us": batch.overhead_per_copy_us, "host_ms_pieces": batch.in_pieces.host_ms_per_call}
    print(f"  batching: 1 copy {batch.whole.median_ms:.3f} ms, {pieces} copies {batch.in_pieces.median_ms:.3f} ms, "
          f"{batch.overhead_per_copy_us:.2f} us per extra copy; host {batch.in_pieces.host_ms_per_call} ms to issue them")


def section_async() -> None:
    stamp("staged transfers")
    n, streams = size("ch3_async")
    pipeline = transfers.make_pipeline(n, streams, TPB)
    stages = transfers.measure_stage_times(pipeline, repeat=REPEAT)
    pipeline.repeats = stages.balanced_repeats()
    errors = {name: transfers.check_schedule(pipeline, name) for name in transfers.SCHEDULES}
    times = transfers.time_schedules(pipeline, repeat=REPEAT)
    model = stages.predicted_ms(streams, pipeline.repeats)
    fig, axes = plt.subplots(len(transfers.SCHEDULES) + 1, 1, figsize=(11, 2.3 * (len(transfers.SCHEDULES) + 1)), sharex=True)
    timelines = {}
    for ax, name in zip(axes, transfers.SCHEDULES):
        timelines[name] = transfers.record_timeline(pipeline, name)
        timelines[name].plot(ax=ax, title=f"{name}: {timelines[name].total_ms:.3g} ms (timeline run)")
    raw = transfers.record_timeline(pipeline, "staged V1", serialize_kinds=False)
    raw.plot(ax=axes[-1], title="staged V1, raw events (bars start when the stream reached them)")
    axes[-1].set_xlim(0, 1.02 * max(t.total_ms for t in [*timelines.values(), raw]))
    fig.suptitle(f"{gpucourse.current_device().name}: {n} floats, {streams} streams, {pipeline.repeats} angle(s) per element")
    fig.tight_layout()
    fig.savefig(OUT / "timeline.png", dpi=90)
    plt.close(fig)
    results["async"] = {
        "n": n, "streams": streams, "repeats": pipeline.repeats,
        "stage_ms": {"h2d": stages.h2d_ms, "kernel_per_repeat": stages.kernel_ms_per_repeat, "d2h": stages.d2h_ms},
        "max_error": errors, "ms": {name: t.median_ms for name, t in times.items()},
        "model_ms": {"sequential": model[0], "overlapped": model[1]},
        "overlap_ms": {name: t.overlap_ms() for name, t in timelines.items()},
        "timeline_total_ms": {name: t.total_ms for name, t in timelines.items()},
        "spans": {name: [(s.lane, s.kind, round(s.start_ms, 4), round(s.end_ms, 4)) for s in t.spans] for name, t in timelines.items()},
        "raw_v1_spans": [(s.lane, s.kind, round(s.start_ms, 4), round(s.end_ms, 4)) for s in raw.spans],
    }
    print(transfers.async_table(times, gpucourse.current_device().name))
    for name, timeline in timelines.items():
        print(f"  {name:11s} {timeline.summary()}")
    counts = size("ch3_stream_counts")
    tuner = transfers.stream_count_tuner(n, counts, TPB, pipeline.repeats, repeat=REPEAT)
    results["stream_counts_ms"] = {m.params["streams"]: m.timing.median_ms for m in tuner.sweep("streams")}
    print("  streams -> ms:", results["stream_counts_ms"])


def section_coalescing(axes) -> None:
    stamp("coalescing")
    ceilings = gpucourse.bandwidth_ceilings()
    n = size("ch3_coalescing")
    results["coalescing"] = {}
    for kind, ax in (("offset", axes[0]), ("stride", axes[1])):
        values = size(f"ch3_{kind}s")
        tuner = coalescing.coalescing_tuner(kind, n, values, TPB, ceilings, repeat=REPEAT)
        for dtype in ("float32", "float64"):
            measured = tuner.sweep(kind, dtype=dtype)
            gbs = [m.gbs for m in measured]
            results["coalescing"][f"{kind} {dtype}"] = dict(zip(values, gbs))
            ax.plot(values, gbs, marker="o", label=dtype)
            print(f"  {kind} {dtype}: " + " ".join(f"{v}:{g:.0f}" for v, g in zip(values, gbs)))
        ax.set(xlabel=kind, ylabel="GB/s", title=f"{kind} kernel")
        ax.axhline(ceilings.copy_gbs, color="green", linestyle=":")
        ax.legend()


def section_memory_spaces(ax) -> None:
    stamp("memory spaces: strided reads")
    n = size("ch3_texture")
    strides = size("ch3_texture_strides")
    a = gpucourse.to_device(gpucourse.random_array(n * max(strides), np.float32, seed=1))
    b = gpucourse.device_empty(n, np.float32)
    paths = {"Numba global": lambda s: ms.strided_read(b, a, s, "global", TPB),
             "Numba ldcg": lambda s: ms.strided_read(b, a, s, "L2 only (ldcg)", TPB)}
    if gpucourse.on_gpu():
        import cupy as cp

        a_cupy, b_cupy = cp.asarray(a), cp.asarray(b)
        texture = ms.linear_texture(a_cupy)
        for path in ms.CUDA_C_PATHS:
            paths[path] = lambda s, path=path: ms.cuda_c_strided_read(b_cupy, a_cupy, s, path, texture, TPB)
    results["strided_reads"] = {}
    for name, launch in paths.items():
        try:
            gbs = [gpucourse.benchmark(lambda s=s, launch=launch: launch(s), repeat=REPEAT).bandwidth_gbs(ms.strided_read_bytes(n))
                   for s in strides]
        except gpucourse.GPUOnlyFeature as exc:
            print("  skipped:", exc)
            continue
        results["strided_reads"][name] = dict(zip(strides, gbs))
        ax.plot(strides, gbs, marker="o", label=name)
        print(f"  {name:16s} " + " ".join(f"{s}:{g:.0f}" for s, g in zip(strides, gbs)))
    ax.set(xscale="log", yscale="log", xlabel="stride", ylabel="GB/s", title="strided reads by load path")
    ax.legend(fontsize=7)

    stamp("memory spaces: averages")
    side = size("ch3_stencil")
    mesh = gpucourse.to_device(gpucourse.random_array((side + 2, side + 2), np.float32, seed=2))
    out = gpucourse.device_empty((side, side), np.float32)
    nbytes = ms.average_bytes(side, side)
    averages = {}
    for points in (4, 8):
        averages[f"{points} Numba global"] = gpucourse.benchmark(lambda p=points: ms.average(out, mesh, p), repeat=REPEAT).bandwidth_gbs(nbytes)
        if gpucourse.on_gpu():
            import cupy as cp

            mesh_cupy, out_cupy = cp.asarray(mesh), cp.asarray(out)
            texture = ms.linear_texture(mesh_cupy.ravel())
            for label, tex in (("CUDA C global", None), ("CUDA C texture", texture)):
                averages[f"{points} {label}"] = gpucourse.benchmark(lambda o=out_cupy, m=mesh_cupy, p=points, t=tex: ms.cuda_c_average(o, m, p, t),
                                                                    repeat=REPEAT).bandwidth_gbs(nbytes)
    results["averages_gbs"] = averages
    print("  averages GB/s:", {k: round(v, 1) for k, v in averages.items()})

    stamp("memory spaces: local memory and spills")
    n_local = size("ch3_local")
    values = gpucourse.to_device(gpucourse.random_array(n_local, np.float32, seed=3))
    result = gpucourse.device_empty(n_local, np.float32)
    for variant in ("static", "dynamic", "large"):
        ms.local_memory_demo(result, values, variant, 1)
    threads, rounds = size("ch3_hungry")
    state = gpucourse.to_device(gpucourse.random_array((ms.HUNGRY, threads), np.float32, seed=4, low=-0.5, high=0.5))
    hungry = gpucourse.device_empty(threads, np.float32)
    spill_ms = {}
    for label, kernel in (("free", ms.register_hungry_kernel), ("max_registers=24", ms.register_limited(24))):
        spill_ms[label] = gpucourse.benchmark(lambda k=kernel: ms.register_hungry(hungry, state, rounds, k), repeat=REPEAT).median_ms
    results["spill_ms"] = spill_ms
    reports = {}
    if gpucourse.on_gpu():
        for name, kernel in (("local static", ms.local_static_kernel), ("local dynamic", ms.local_dynamic_kernel),
                             ("local large", ms.local_large_kernel), ("hungry free", ms.register_hungry_kernel),
                             ("hungry max24", ms.register_limited(24))):
            (usage,) = compilation.resource_usage(kernel)
            local_lines = compilation.count_matches(compilation.ptx(kernel), r"\b(ld|st)\.local")
            reports[name] = {"registers": usage.registers, "local_bytes": usage.local_bytes, "ptx_local_lines": local_lines}
    results["resource_reports"] = reports
    print("  reports:", reports, "spill ms:", spill_ms)

    stamp("memory spaces: constant memory")
    n_table, reads = size("ch3_constant")
    x = gpucourse.to_device(gpucourse.random_array(n_table, np.float32, seed=5))
    table_out = gpucourse.device_empty(n_table, np.float32)
    table_global = gpucourse.to_device(ms.COEFFICIENTS)
    launches = {"Numba constant": lambda d: ms.table_reads(table_out, x, d, reads, "constant", None, TPB),
                "Numba global": lambda d: ms.table_reads(table_out, x, d, reads, "global", table_global, TPB)}
    if gpucourse.on_gpu():
        import cupy as cp

        x_cupy, out_cupy = cp.asarray(x), cp.asarray(table_out)
        launches["CUDA C __constant__"] = lambda d: ms.cuda_c_table_reads(out_cupy, x_cupy, d, reads, TPB)
    distincts = size("ch3_distinct")
    results["constant_ms"] = {name: dict(zip(distincts, [gpucourse.benchmark(lambda d=d, launch=launch: launch(d), repeat=REPEAT).median_ms
                                                                  for d in distincts]))
                              for name, launch in launches.items()}
    print("  constant ms:", {k: {d: round(t, 4) for d, t in v.items()} for k, v in results["constant_ms"].items()})

    stamp("memory spaces: shared memory banks")
    n_banks, bank_reads = size("ch3_banks")
    table = gpucourse.to_device(gpucourse.random_array(ms.SHARED_WORDS, np.float32, seed=6))
    bank_out = gpucourse.device_empty(n_banks, np.float32)
    bank_ms = {s: gpucourse.benchmark(lambda s=s: ms.shared_stride_reads(bank_out, table, s, bank_reads, TPB), repeat=REPEAT).median_ms
               for s in size("ch3_bank_strides")}
    results["bank_ms"] = bank_ms
    print("  bank stride -> ms:", {s: round(t, 4) for s, t in bank_ms.items()})
    rows = size("ch3_tile_rows")
    tiles = gpucourse.to_device(gpucourse.random_array((rows, ms.TILE), np.float32, seed=7))
    sums = gpucourse.device_empty(rows, np.float32)
    results["tile_ms"] = {str(padded): gpucourse.benchmark(lambda p=padded: ms.tile_row_sums(sums, tiles, p), repeat=REPEAT).median_ms
                          for padded in (False, True)}
    print("  tile row sums ms (padded?):", results["tile_ms"])


def section_ufuncs() -> None:
    stamp("ufunc-style kernels")
    book_n = size("ch3_ufunc_book")
    small = gpucourse.to_device(np.ones(book_n, np.int32))
    book_times = {}
    for name, run in ufuncs.increment_variants(small, 3, TPB, 4).items():
        timing = gpucourse.benchmark(run, repeat=REPEAT)
        book_times[name] = {"gpu_us": 1e3 * timing.median_ms, "host_us": None if timing.host_ms_per_call is None else 1e3 * timing.host_ms_per_call,
                            "launch_bound": timing.launch_bound}
    results["ufunc_book_size"] = book_times
    n = size("ch3_ufunc")
    big = gpucourse.to_device(gpucourse.random_array(n, np.float32, seed=8))
    nbytes = ufuncs.increment_bytes(n, np.float32)
    results["ufunc_gbs"] = {name: gpucourse.benchmark(run, repeat=REPEAT).bandwidth_gbs(nbytes)
                            for name, run in ufuncs.increment_variants(big, 1.0, TPB, 4).items()}
    n_sum, blocks = size("ch3_reduce")
    values = gpucourse.to_device(gpucourse.random_array(n_sum, np.float32, seed=9, low=0.0, high=1.0))
    total = gpucourse.to_device(np.zeros(1, np.float32))
    results["sum_gbs"] = {name: gpucourse.benchmark(run, repeat=REPEAT).bandwidth_gbs(4 * n_sum)
                          for name, run in ufuncs.sum_variants(values, total, blocks, TPB).items()}
    results["ilp_gbs"] = {k: gpucourse.benchmark(lambda k=k: ufuncs.handwritten_increment(big, 1.0, TPB, k), repeat=REPEAT).bandwidth_gbs(nbytes)
                          for k in size("ch3_ilp_factors")}
    print("  book size:", book_times)
    print("  increment GB/s:", {k: round(v) for k, v in results["ufunc_gbs"].items()})
    print("  sum GB/s:", {k: round(v) for k, v in results["sum_gbs"].items()})
    print("  ILP GB/s:", {k: round(v) for k, v in results["ilp_gbs"].items()})


def final_table() -> None:
    copy = results["device"]["copy_gbs"]
    bw = results["bandwidth_test"]
    asy = results["async"]
    best = min((k for k in asy["ms"] if k != "sequential"), key=lambda k: asy["ms"][k])
    co = results["coalescing"]
    lines = [
        ("copy ceiling GB/s", f"{copy:.0f}"),
        ("16 MiB pinned/pageable H2D", f"{bw['pinned H2D']:.2f} / {bw['pageable H2D']:.2f} GB/s = {bw['pinned H2D'] / bw['pageable H2D']:.2f}x"),
        ("16 MiB pinned/pageable D2H", f"{bw['pinned D2H']:.2f} / {bw['pageable D2H']:.2f} GB/s = {bw['pinned D2H'] / bw['pageable D2H']:.2f}x"),
        ("async sequential / best staged", f"{asy['ms']['sequential']:.3f} / {asy['ms'][best]:.3f} ms ({best}) = "
                                           f"{asy['ms']['sequential'] / asy['ms'][best]:.2f}x; overlap {asy['overlap_ms'][best]:.3f} ms"),
        ("offset f32 0 / worst", f"{co['offset float32'][0]:.0f} / {min(co['offset float32'].values()):.0f} GB/s"),
        ("stride f32 1 / 2 / 32", " / ".join(f"{co['stride float32'][s]:.0f}" for s in (1, 2, 32) if s in co["stride float32"])),
        ("texture/global at largest stride", " ".join(f"{k}:{list(v.values())[-1]:.0f}" for k, v in results["strided_reads"].items())),
        ("avg8 global/texture", " / ".join(f"{results['averages_gbs'].get(k, 0):.0f}" for k in ("8 CUDA C global", "8 CUDA C texture"))),
        ("constant 1 vs 32 words", " ".join(f"{k}:{v[1]:.3f}/{v[32]:.3f}ms" for k, v in results["constant_ms"].items() if 32 in v)),
        ("tile conflict / padded ms", f"{results['tile_ms']['False']:.4f} / {results['tile_ms']['True']:.4f}"),
        ("increment GB/s", " ".join(f"{k[:14]}:{v:.0f}" for k, v in results["ufunc_gbs"].items())),
    ]
    print("\n==== chapter 3 part A summary ====")
    for label, value in lines:
        print(f"{label:34s} {value}")


def section_lite() -> None:
    """The two measurements the second GPU run added: batching in few enough copies to queue, and the tile kernels' shared loads."""
    stamp("batching")
    total, pieces = size("ch3_batching")
    batch = transfers.measure_batching(total, pieces, repeat=REPEAT)
    results["batching"] = {"bytes": total, "pieces": pieces, "whole_ms": batch.whole.median_ms, "pieces_ms": batch.in_pieces.median_ms,
                           "overhead_us": batch.overhead_per_copy_us, "host_ms_pieces": batch.in_pieces.host_ms_per_call,
                           "clock_pieces": batch.in_pieces.clock}
    print("  batching:", results["batching"])
    stamp("tile kernels: shared loads in the machine code")
    rows = size("ch3_tile_rows")
    tiles = gpucourse.to_device(gpucourse.random_array((rows, ms.TILE), np.float32, seed=7))
    sums = gpucourse.device_empty(rows, np.float32)
    results["tile_ms"], results["tile_sass"] = {}, {}
    for padded, kernel in ((False, ms.tile_row_sums_kernel), (True, ms.tile_row_sums_padded_kernel)):
        results["tile_ms"][str(padded)] = gpucourse.benchmark(lambda p=padded: ms.tile_row_sums(sums, tiles, p), repeat=REPEAT).median_ms
        if gpucourse.on_gpu():
            listing = compilation.sass(kernel)
            results["tile_sass"][kernel.__name__] = {"LDS.128": compilation.count_matches(listing, r"\bLDS\.128\b"),
                                                     "LDS": compilation.count_matches(listing, r"\bLDS\s")}
    print("  tile ms:", results["tile_ms"], "shared loads:", results["tile_sass"])


def main(sections: list[str]) -> int:
    section_environment()
    if sections == ["lite"]:
        section_lite()
        (OUT / "bench_lite.json").write_text(json.dumps(results, indent=1, default=str))
        stamp("done")
        return 0
    section_transfers()
    section_async()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    section_coalescing(axes[:2])
    section_memory_spaces(axes[2])
    fig.tight_layout()
    fig.savefig(OUT / "sweeps.png", dpi=80)
    plt.close(fig)
    section_ufuncs()
    (OUT / "bench.json").write_text(json.dumps(results, indent=1, default=str))
    stamp("done")
    final_table()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))  # `lite`: only the measurements the second GPU run added
