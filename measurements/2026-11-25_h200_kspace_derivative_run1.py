"""Exploration (not kept): the k-space derivative and the 7.2 comparison at 256^3, 384^3 and 512^3 on the H200."""
import sys, json, time
import numpy as np
import gpucourse
from gpucourse import spectral, profiler, sizes
from gpucourse.kernels import spectral as k
from numba import cuda
from gpucourse.kernels.indexing import u32, flat
from gpucourse.kernels.stencil import nonneg
from gpucourse.launch import bind

cp = gpucourse.array_module()
ceil = gpucourse.bandwidth_ceilings()
print(ceil, flush=True)
print("ch7_spectral_grid now:", gpucourse.problem_size("ch7_spectral_grid"), "ch6_grid:", gpucourse.problem_size("ch6_grid"), flush=True)
copy = ceil.copy_gbs if hasattr(ceil, "copy_gbs") else None
out = {}

def frac(t, nbytes):
    return ceil.fraction_of_copy(t.bandwidth_gbs(nbytes))

# a flat variant: thread t takes P elements t, t + T, ..., T = all threads; column = e % m
P = 8
@cuda.jit
def flat_deriv(s, o, total, m, k_unit, norm, nyquist):
    t = u32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
    T = u32(cuda.gridDim.x * cuda.blockDim.x)
    vals = cuda.local.array(8, np.complex64)
    e = t
    for q in range(8):
        if e < total:
            vals[q] = s[nonneg(e)]
        e += T
    e = t
    for q in range(8):
        if e < total:
            i = e % m
            f = k_unit * np.float32(i) * norm
            if i == nyquist:
                f = np.float32(0)
            v = vals[q]
            o[nonneg(e)] = np.complex64(complex(-v.imag * f, v.real * f))
        e += T

for side in (256, 384, 512):
    half = cp.asarray(gpucourse.random_array((side, side, side // 2 + 1), np.complex64, seed=4))
    nb = 2 * half.nbytes
    row = {}
    t = gpucourse.benchmark(lambda: k.derivative_spectrum_simple(half, half, side, 2 * np.pi, 1), repeat=20)
    row["simple"] = frac(t, nb)
    for block, rows in (((256, 1), 16), ((256, 1), 8), ((128, 2), 16), ((128, 1), 16), ((64, 4), 16), ((512, 1), 8), ((128, 2), 8), ((256, 2), 8), ((32, 8), 16)):
        t = gpucourse.benchmark(lambda: k.derivative_spectrum(half, half, side, 2 * np.pi, 1, block, rows), repeat=20)
        row[f"tuned {block} {rows}"] = frac(t, nb)
    fl = half.reshape(-1)
    total = fl.size
    m = side // 2 + 1
    for threads in (256, 512):
        blocks = -(-total // (threads * 8))
        args = (fl, fl, np.uint32(total), np.uint32(m), np.float32(1.0), np.float32(1.0 / side), np.uint32(side // 2))
        t = gpucourse.benchmark(lambda: flat_deriv[blocks, threads](*args), repeat=20)
        row[f"flat {threads} x8"] = frac(t, nb)
    for key, v in row.items():
        print(f"{side}^3 half spectrum {half.nbytes/2**20:.0f} MiB  {key:28s} {v:.3f} of copy", flush=True)
    times = spectral.time_derivatives(side, np.float32, repeat=20)
    for label, tt in (("spectral", times.spectral), ("stencil", times.stencil)):
        g = tt.bandwidth_gbs(times.bytes_moved)
        row[label] = ceil.fraction_of_copy(g)
        print(f"{side}^3 {label:10s} {1e3*tt.median_ms:8.1f} us  {row[label]:.3f} of copy", flush=True)
    out[side] = row
    del half, fl
    cp.get_default_memory_pool().free_all_blocks()

for side in (256, 512):
    code = f"""
import numpy as np, gpucourse
from gpucourse.kernels import spectral as kernels
from gpucourse import spectral
cupy = gpucourse.require_cupy("x")
half = cupy.asarray(gpucourse.random_array(({side}, {side}, {side // 2 + 1}), np.complex64, seed=4))
kernels.derivative_spectrum(half, half, {side}, 2 * np.pi, 1)
f = cupy.asarray(gpucourse.random_array(({side},)*3, np.float32, seed=7)); df = cupy.empty_like(f)
spectral.time_derivatives  # noqa
from gpucourse.kernels import stencil
stencil.deriv_x(f, df, stencil.coefficients_for(f, 2 * np.pi / {side}))
gpucourse.synchronize()
"""
    p = profiler.profile(code, {"kspace": "derivative_spectrum", "stencil": "deriv_x"})
    print(f"ncu {side}^3:", flush=True)
    print(p if p else p.refusal, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
