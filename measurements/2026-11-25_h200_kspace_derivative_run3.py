import numpy as np, gpucourse
from gpucourse.kernels import spectral as k
cp = gpucourse.array_module(); ceil = gpucourse.bandwidth_ceilings(); print(ceil)
side = gpucourse.problem_size("ch7_spectral_grid")
half = cp.asarray(gpucourse.random_array((side, side, side // 2 + 1), np.complex64, seed=4)); nb = 2 * half.nbytes
for label, f in (("first version", k.derivative_spectrum_simple), ("tuned", k.derivative_spectrum)):
    t = gpucourse.benchmark(lambda: f(half, half, side, 2 * np.pi, 1), repeat=20)
    print(f"{side}^3 {label:14s} {1e3*t.median_ms:8.1f} us {ceil.fraction_of_copy(t.bandwidth_gbs(nb)):.3f} of copy, loop of calls {ceil.fraction_of_copy(t.back_to_back_gbs(nb)):.3f}")
