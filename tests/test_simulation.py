"""The simulator helpers change how fast the simulator runs, never what a kernel computes."""

from __future__ import annotations

import sys

import numpy as np
from numba import cuda

import gpucourse
from gpucourse import mode
from gpucourse.simulation import SIMULATOR_SWITCH_INTERVAL, device_function, paced


def triple(x):
    return 3 * x


fast_triple = device_function(triple)


@cuda.jit
def apply_triple(out, values):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = fast_triple(values[i])


def test_device_function_computes_the_same():
    values = gpucourse.random_array(100, np.float32, seed=1)
    out = gpucourse.to_device(gpucourse.poisoned(100, np.float32))
    apply_triple[2, 64](out, gpucourse.to_device(values))
    np.testing.assert_allclose(gpucourse.to_host(out), 3 * values, rtol=1e-7)
    assert (fast_triple is triple) == mode.is_simulator()


def test_paced_sets_and_restores_the_switch_interval():
    seen = []
    before = sys.getswitchinterval()
    wrapped = paced(lambda: seen.append(sys.getswitchinterval()) or "done")
    assert wrapped() == "done"
    assert abs(sys.getswitchinterval() - before) < 1e-9
    expected = min(before, SIMULATOR_SWITCH_INTERVAL) if mode.is_simulator() else before
    assert len(seen) == 1 and abs(seen[0] - expected) < 1e-9  # the interpreter rounds the interval to its clock
