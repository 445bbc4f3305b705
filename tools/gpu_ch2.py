"""Chapter 2 on a GPU, in one run: every measurement the notebooks and measurements/ch2.md rely on.

    python3 tools/gpu_ch2.py            # writes gpu_ch2 results and plots under $OUT (or /tmp/gpu_ch2)

It measures, in this order and in the same process: the bandwidth ceilings (CuPy's device-to-
device copy), CuPy copies of the chapter's own arrays, the Numba copies (one float32 per thread
over block sizes 32 ... 1024, several elements per thread, 16-byte accesses) through the same
Tuner the notebook uses, the latency of one load and the bytes in flight per SM, the
limiting-factor experiment with and without fast math (with PTX and register reports), the host's
cost of one launch, and the roofline (FMA rate, intensity sweep, axpy). It saves the sweep, the
tuner and the roofline plots as PNG, all numbers as JSON, and prints a short table last.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

import gpucourse  # before numba.cuda: chooses the mode

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from gpucourse import compilation, occupancy, roofline  # noqa: E402
from gpucourse.kernels import intro, metrics  # noqa: E402
from gpucourse.widgets import block_size_tuner  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp/gpu_ch2"))
OUT.mkdir(parents=True, exist_ok=True)
results: dict[str, object] = {}
started = time.perf_counter()


def say(text: str) -> None:
    print(f"[{time.perf_counter() - started:6.1f} s] {text}", flush=True)


def smi() -> str:
    try:
        query = "name,driver_version,clocks.current.sm,clocks.max.sm,clocks.current.memory,ecc.mode.current,power.draw,temperature.gpu"
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi unavailable: {exc}"


say(f"mode {gpucourse.MODE}, python {platform.python_version()}")
print(gpucourse.banner())
results["nvidia_smi_before"] = smi()
print(results["nvidia_smi_before"])
device = gpucourse.current_device()
results["device"] = device.summary()

# --- ceilings ------------------------------------------------------------------------------------
ceilings = gpucourse.bandwidth_ceilings()
say(str(ceilings))
results["ceilings"] = {"theoretical_gbs": ceilings.theoretical_gbs, "copy_gbs": ceilings.copy_gbs, "copy_bytes": ceilings.copy_bytes}

n = gpucourse.problem_size("ch2_copy")
inp = gpucourse.to_device(gpucourse.random_array(n, np.float32, seed=1))
out = gpucourse.device_empty(n, np.float32)
nbytes = 8 * n
same_size = {}
with gpucourse.gpu_only():
    cp = gpucourse.require_cupy("CuPy copies of the chapter's arrays")
    cp_in, cp_out = cp.asarray(inp), cp.asarray(out)
    kind = cp.cuda.runtime.memcpyDeviceToDevice
    same_size["cudaMemcpy"] = gpucourse.benchmark(
        lambda: cp.cuda.runtime.memcpyAsync(cp_out.data.ptr, cp_in.data.ptr, 4 * n, kind, 0)).bandwidth_gbs(nbytes)
    same_size["cupy.copyto"] = gpucourse.benchmark(lambda: cp.copyto(cp_out, cp_in)).bandwidth_gbs(nbytes)
say(f"same-size CuPy copies of {n} float32: {same_size}")
results["same_size_cupy_gbs"] = same_size

# --- Numba copies, through the notebook's tuner -------------------------------------------------------
tuner = block_size_tuner(metrics.copy_variant, out, inp, bytes_moved=nbytes, name="Numba copy", ceilings=ceilings,
                         largest=gpucourse.problem_size("ch2_tuner_largest_block"),
                         elements_per_thread=gpucourse.problem_size("ch2_elements_per_thread"),
                         access_bytes=list(metrics.COPY_ACCESS_BYTES))
block_sizes = gpucourse.problem_size("ch2_block_sizes")
per_thread = gpucourse.problem_size("ch2_elements_per_thread")
for access in metrics.COPY_ACCESS_BYTES:
    for ept in per_thread:
        tuner.sweep("threads_per_block", block_sizes, elements_per_thread=ept, access_bytes=access)
        metrics.copy_variant(out, inp, block_sizes[0], ept, access)
        assert np.array_equal(gpucourse.to_host(out), gpucourse.to_host(inp)), (ept, access)
say("copy sweeps done")
copies = []
for m in tuner.cache.values():
    p = m.params
    copies.append({**p, "median_ms": m.timing.median_ms, "min_ms": m.timing.min_ms, "max_ms": m.timing.max_ms, "gbs": m.gbs,
                   "fraction_of_copy": ceilings.fraction_of_copy(m.gbs)})
results["copies"] = copies
print(tuner.table())
best = tuner.best()
results["best_numba_copy"] = {**best.params, "gbs": best.gbs, "fraction_of_ceiling": ceilings.fraction_of_copy(best.gbs),
                              "fraction_of_same_size_memcpy": best.gbs / same_size["cudaMemcpy"] if same_size else None}

ax = tuner.plot("threads_per_block", elements_per_thread=1, access_bytes=4)
ax.figure.savefig(OUT / "sweep.png", dpi=110, bbox_inches="tight")
plt.close("all")
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for ax, access in zip(axes, metrics.COPY_ACCESS_BYTES):
    tuner.plot("threads_per_block", by="elements_per_thread", highlight={"threads_per_block": best.params["threads_per_block"],
               "elements_per_thread": best.params["elements_per_thread"], "access_bytes": best.params["access_bytes"]}
               if access == best.params["access_bytes"] else None, access_bytes=access, ax=ax)
    ax.set_title(f"{access}-byte accesses")
fig.tight_layout()
fig.savefig(OUT / "tuner.png", dpi=110, bbox_inches="tight")
plt.close("all")

# --- latency and bytes in flight ----------------------------------------------------------------------
slots, slot_stride, chase_steps = gpucourse.problem_size("ch2_latency")
latency = metrics.load_latency(slots, slot_stride, chase_steps)
latency_ns = latency.ns
say(f"latency of one dependent load: {latency_ns:.0f} ns ({latency.timing})")
results["latency_ns"] = latency_ns
in_flight_rows = []
with gpucourse.gpu_only():
    limits = occupancy.sm_limits()
    for m in tuner.cache.values():
        p = m.params
        registers = metrics.copy_registers(p["elements_per_thread"], p["access_bytes"])
        model = metrics.in_flight(p["threads_per_block"], p["elements_per_thread"], p["access_bytes"], registers, limits,
                                  device.multiprocessors, latency_ns, ceilings.copy_gbs)
        in_flight_rows.append({**p, "registers": registers, "resident_threads_per_sm": model.resident_threads_per_sm,
                               "limited_by": model.limited_by, "bytes_in_flight_per_sm": model.bytes_in_flight_per_sm,
                               "cap_gbs": model.cap_gbs, "gbs": m.gbs,
                               "implied_latency_ns": metrics.implied_latency_ns(model.bytes_in_flight_per_sm, device.multiprocessors, m.gbs)})
    for row in sorted(in_flight_rows, key=lambda r: (r["access_bytes"], r["elements_per_thread"], r["threads_per_block"])):
        print(f"tpb {row['threads_per_block']:5d} ept {row['elements_per_thread']} {row['access_bytes']:2d} B  regs {row['registers']:3d}  "
              f"resident {row['resident_threads_per_sm']:5d} ({row['limited_by']:9s})  in flight {row['bytes_in_flight_per_sm']:7d} B/SM  "
              f"cap {row['cap_gbs']:6.0f}  measured {row['gbs']:6.0f} GB/s  implied {row['implied_latency_ns']:6.0f} ns")
results["in_flight"] = in_flight_rows

# --- the limiting-factor experiment ---------------------------------------------------------------------
n_limit = gpucourse.problem_size("ch2_limit")
tpb_limit = gpucourse.problem_size("ch2_threads_per_block")
b = gpucourse.to_device(gpucourse.random_array(n_limit, np.float32, seed=2))
a = gpucourse.device_empty(n_limit, np.float32)
reference = np.sin(gpucourse.to_host(b).astype(np.float64))
limit = {}
for fastmath in (False, True):
    metrics.base(a, b, fastmath, tpb_limit)
    error = float(np.abs(gpucourse.to_host(a) - reference).max())
    times = metrics.time_limit_experiment(a, b, fastmath, tpb_limit)
    c = times.classification
    limit["fastmath" if fastmath else "precise"] = {
        "base_ms": times.base.median_ms, "memory_ms": times.memory.median_ms, "math_ms": times.math.median_ms,
        "memory_share": c.memory_share, "math_share": c.math_share, "overlap": c.overlap, "label": c.label,
        "base_gbs": times.base_gbs, "memory_gbs": times.memory_gbs, "max_abs_error": error}
    say(f"limit fastmath={fastmath}: base {times.base.median_ms:.4f} ms, memory {times.memory.median_ms:.4f}, "
        f"math {times.math.median_ms:.4f} -> {c}; max error {error:.2e}")
results["limit"] = limit
with gpucourse.gpu_only():
    approx, arithmetic = r"sin\.approx", r"^\s+(fma|mul|add|sub)\."
    ptx_report = {}
    for name, kernel in (("precise", metrics.base_kernel), ("fastmath", metrics.base_fastmath_kernel)):
        text = compilation.ptx(kernel)
        ptx_report[name] = {"sin_approx": compilation.count_matches(text, approx), "arithmetic": compilation.count_matches(text, arithmetic),
                            "lines": len(text.splitlines())}
    results["ptx"] = ptx_report
    say(f"PTX: {ptx_report}")
    regs = {}
    for name, kernel in (("base", metrics.base_kernel), ("base_fastmath", metrics.base_fastmath_kernel), ("memory", metrics.copy_kernel),
                         ("math", metrics.math_kernel), ("math_fastmath", metrics.math_fastmath_kernel)):
        usage = [u for u in compilation.resource_usage(kernel) if "float32" in u.signature][0]
        occ = occupancy.occupancy(tpb_limit, usage.registers)
        regs[name] = {"registers": usage.registers, "occupancy": occ.fraction, "limited_by": occ.limited_by}
    results["limit_resources"] = regs
    say(f"registers/occupancy: {regs}")
    access_forms = {}
    for label, kernel, type_name in (("4 B x 1", metrics.copy_kernel, "float32"), ("4 B x 4", metrics.ilp_copy_kernel(4), "float32"),
                                     ("16 B x 1", metrics.ilp_copy_kernel(1), "complex128")):
        index = [i for i, u in enumerate(compilation.resource_usage(kernel)) if type_name in u.signature][0]
        ptx_text = compilation.ptx(kernel, index=index)
        forms = {"ptx": sorted(set(re.findall(r"\b(?:ld|st)\.global[\w.]*", ptx_text)))}
        try:
            sass_text = compilation.sass(kernel, index=index)
            forms["sass"] = sorted(set(re.findall(r"\b(?:LDG|STG)[\w.]*", sass_text)))
        except Exception as exc:  # nvdisasm missing: keep the PTX forms
            forms["sass"] = [f"{type(exc).__name__}: {exc}"]
        access_forms[label] = forms
    results["access_forms"] = access_forms
    say(f"global memory instructions: {access_forms}")
    empty = gpucourse.benchmark(lambda: metrics.grid_only(a, tpb_limit))
    results["grid_only_ms"] = empty.median_ms
    say(f"the math kernel's grid without the sine: {empty}")

# --- host cost of a launch --------------------------------------------------------------------------------
short = gpucourse.to_device(np.zeros(gpucourse.problem_size("ch2_short_kernel"), np.float32))
short_out = gpucourse.device_empty(short.shape[0], np.float32)
launch = gpucourse.benchmark(lambda: metrics.copy(short_out, short))
results["launch"] = {"gpu_ms": launch.median_ms, "host_ms": launch.host_ms_per_call, "launch_bound": launch.launch_bound}
say(f"short copy: {launch}")

# --- roofline ---------------------------------------------------------------------------------------------
peak_threads, peak_steps = gpucourse.problem_size("ch2_peak_flops")
peak_out = gpucourse.device_empty(peak_threads, np.float32)
peak = gpucourse.benchmark(lambda: metrics.fma_peak(peak_out, peak_steps))
compute = roofline.gflops(metrics.fma_peak_flops(peak_threads, peak_steps), peak.median_ms)
roof, theoretical = roofline.device_roofs(ceilings, compute)
n_roof, step_counts = gpucourse.problem_size("ch2_roofline")
x = gpucourse.to_device(gpucourse.random_array(n_roof, np.float32, seed=3))
y = gpucourse.to_device(np.zeros(n_roof, np.float32))
points = []
for steps in step_counts:
    t = gpucourse.benchmark(lambda s=steps: metrics.intensity(y, x, s))
    points.append(roofline.RooflinePoint(f"{steps} steps", metrics.intensity_flops(n_roof, steps), metrics.intensity_bytes(n_roof, 4), t.median_ms))
axpy = gpucourse.benchmark(lambda: intro.axpy(2.0, x, y))
points.append(roofline.RooflinePoint("axpy", 2 * n_roof, 12 * n_roof, axpy.median_ms))
data = roofline.roofline_data(roof, points, theoretical)
print(roofline.roofline_table(data))
results["roofline"] = {"compute_gflops": compute, "theoretical_gflops": [r.compute_gflops for r in theoretical], "ridge": roof.ridge,
                       "points": data.points}
ax = roofline.plot_roofline(data)
ax.figure.savefig(OUT / "roofline.png", dpi=110, bbox_inches="tight")
plt.close("all")

# --- ncu on the profiling script of notebook 2.1 (its commands, its filter) ------------------------------------
profile_script = Path(tempfile.mkdtemp()) / "profile_copy.py"
profile_script.write_text(
    "import numpy as np\nimport gpucourse\nfrom gpucourse.kernels import metrics\n"
    "n = gpucourse.problem_size('ch2_copy')\ninp = gpucourse.to_device(gpucourse.random_array(n, np.float32))\n"
    "out = gpucourse.device_empty(n, np.float32)\nfor threads_per_block in (32, 256):\n    metrics.copy(out, inp, threads_per_block)\n"
    "gpucourse.synchronize()\n")
wanted = ("copy_kernel", "Block Size", "Duration", "DRAM Throughput", "Memory Throughput", "Achieved Occupancy", "Theoretical Occupancy")
try:
    ncu = subprocess.run(["ncu", "--clock-control", "none", "--kernel-name", "regex:copy", "--section", "SpeedOfLight", "--section", "Occupancy",
                          sys.executable, str(profile_script)], capture_output=True, text=True, timeout=120)
    kept = [line.rstrip() for line in ncu.stdout.splitlines() if any(word in line for word in wanted)]
    results["ncu_copy"] = kept or (ncu.stdout + ncu.stderr)[-3000:]
except (OSError, subprocess.SubprocessError) as exc:
    results["ncu_copy"] = f"ncu did not run: {exc}"
say("ncu on the copy at 32 and 256 threads per block:\n" + (results["ncu_copy"] if isinstance(results["ncu_copy"], str)
                                                            else "\n".join(results["ncu_copy"])))

results["nvidia_smi_after"] = smi()
(OUT / "results.json").write_text(json.dumps(results, indent=1, default=float))

# --- the short table, last --------------------------------------------------------------------------------
simple = {c["threads_per_block"]: c["gbs"] for c in copies if c["elements_per_thread"] == 1 and c["access_bytes"] == 4}
if gpucourse.is_simulator():
    say("simulator: the summary below needs a GPU")
    sys.exit(0)
print("\n==== chapter 2 on", device.name, "====")
print(f"theoretical peak {ceilings.theoretical_gbs:.0f} GB/s; cudaMemcpy ceiling ({ceilings.copy_bytes / 2**20:.0f} MiB) "
      f"{ceilings.copy_gbs:.0f} GB/s = {ceilings.copy_gbs / ceilings.theoretical_gbs:.1%} of peak")
print(f"same arrays ({n} float32): cudaMemcpy {same_size['cudaMemcpy']:.0f} GB/s, cupy.copyto {same_size['cupy.copyto']:.0f} GB/s")
for tpb, gbs in sorted(simple.items()):
    print(f"  simple copy {tpb:5d} threads/block: {gbs:6.0f} GB/s = {ceilings.fraction_of_copy(gbs):.2f} of ceiling")
for access in metrics.COPY_ACCESS_BYTES:
    for ept in per_thread:
        m = tuner.best(elements_per_thread=ept, access_bytes=access)
        print(f"  {access:2d} B x {ept}: best {m.params['threads_per_block']:4d} threads/block {m.gbs:6.0f} GB/s "
              f"= {ceilings.fraction_of_copy(m.gbs):.3f}")
bn = results["best_numba_copy"]
print(f"BEST NUMBA COPY {bn['threads_per_block']} threads, {bn['elements_per_thread']} x {bn['access_bytes']} B: {bn['gbs']:.0f} GB/s = "
      f"{bn['fraction_of_ceiling']:.3f} of the ceiling, {bn['fraction_of_same_size_memcpy']:.3f} of cudaMemcpy on the same arrays "
      f"(acceptance >= 0.95: {'MET' if min(bn['fraction_of_ceiling'], bn['fraction_of_same_size_memcpy']) >= 0.95 else 'NOT MET'})")
print(f"latency {latency_ns:.0f} ns; launch: host {1e3 * launch.host_ms_per_call:.1f} us, GPU {1e3 * launch.median_ms:.1f} us")
print(f"block rate (32 threads x 4 B): {metrics.blocks_per_second(simple[min(simple)], metrics.bytes_per_block(min(simple), 1, 4)) / 1e9:.3f} "
      f"billion blocks/s; the math kernel's grid alone {1e3 * results['grid_only_ms']:.1f} us")
for key, v in limit.items():
    print(f"limit {key:8s}: base {1e3 * v['base_ms']:.1f} us, memory {1e3 * v['memory_ms']:.1f} us, math {1e3 * v['math_ms']:.1f} us -> "
          f"{v['label']} ({v['memory_share']:.0%} / {v['math_share']:.0%}); base {v['base_gbs']:.0f} GB/s; max error {v['max_abs_error']:.1e}")
print(f"FMA rate {compute:.0f} GFLOP/s (theoretical {results['roofline']['theoretical_gflops']}), ridge {roof.ridge:.1f} flop/B")
say("done")
sys.exit(0)
