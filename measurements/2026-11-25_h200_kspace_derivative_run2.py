"""The flat k-space derivative kernel (package version) on the GPU: variants at three cubes, and Nsight Compute."""
import sys, json
import numpy as np
import gpucourse
from gpucourse import spectral, profiler
from gpucourse.kernels import spectral as k

cp = gpucourse.array_module()
ceil = gpucourse.bandwidth_ceilings()
print(ceil, flush=True)
side0 = gpucourse.problem_size("ch7_spectral_grid")
print("ch7_spectral_grid:", side0, flush=True)
out = {"copy_gbs": ceil.copy_gbs, "rows": {}}
for side in (256, 384, side0):
    half = cp.asarray(gpucourse.random_array((side, side, side // 2 + 1), np.complex64, seed=4))
    nb = 2 * half.nbytes
    variants = [("first version", lambda: k.derivative_spectrum_simple(half, half, side, 2 * np.pi, 1))]
    for threads, per in ((256, 8), (256, 4), (256, 16), (512, 8), (128, 8), (512, 4)):
        variants.append((f"tuned threads {threads} per thread {per}",
                         lambda threads=threads, per=per: k.derivative_spectrum(half, half, side, 2 * np.pi, 1, threads, per)))
    for label, call in variants:
        t = gpucourse.benchmark(call, repeat=20)
        back = t.back_to_back_gbs(nb)
        row = {"us": 1e3 * t.median_ms, "of_copy": ceil.fraction_of_copy(t.bandwidth_gbs(nb)),
               "back_to_back_of_copy": None if back is None else ceil.fraction_of_copy(back)}
        out["rows"][f"{side}^3 {label}"] = row
        print(f"{side}^3 ({half.nbytes / 2**20:.0f} MiB)  {label:34s} {row['us']:8.1f} us  {row['of_copy']:.3f} of copy  "
              f"loop of calls {row['back_to_back_of_copy']:.3f}", flush=True)
    times = spectral.time_derivatives(side, np.float32, repeat=20)
    for label, tt in (("spectral", times.spectral), ("stencil", times.stencil)):
        f = ceil.fraction_of_copy(tt.bandwidth_gbs(times.bytes_moved))
        out["rows"][f"{side}^3 x derivative {label}"] = {"us": 1e3 * tt.median_ms, "of_copy": f}
        print(f"{side}^3 x derivative {label:10s} {1e3 * tt.median_ms:8.1f} us  {f:.3f} of copy", flush=True)
    del half
    cp.get_default_memory_pool().free_all_blocks()

code = f"""
import numpy as np, gpucourse
from gpucourse.kernels import spectral as kernels
cupy = gpucourse.require_cupy("x")
half = cupy.asarray(gpucourse.random_array(({side0}, {side0}, {side0 // 2 + 1}), np.complex64, seed=4))
kernels.derivative_spectrum_simple(half, half, {side0}, 2 * np.pi, 1)
kernels.derivative_spectrum(half, half, {side0}, 2 * np.pi, 1)
gpucourse.synchronize()
"""
p = profiler.profile(code, {"first version": "derivative_spectrum_simple", "tuned": "derivative_spectrum"})
print(f"ncu at {side0}^3:", flush=True)
print(p if p else p.refusal, flush=True)
if p:
    out["ncu"] = {q.label: {"us": q.duration_us, "dram_pct": q.dram_pct, "sm_pct": q.sm_pct, "occupancy_pct": q.occupancy_pct,
                            "registers": q.registers, "top_stall": list(q.top_stall or ())} for q in (p["first version"], p["tuned"])}
json.dump(out, open(sys.argv[1], "w"), indent=1)
