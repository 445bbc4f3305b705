"""The float64 rules of the checks agree with what the compilers make, compiled without a GPU in the CUDA 12 stack
(tools/stack_venv.py; on a GPU machine, this environment): a float64 argument gives the Numba kernel a float64 parameter in
its PTX, a float32 one does not; a C literal with no f suffix puts float64 instructions into NVRTC's PTX, 1.0f does not.
The rules themselves (`float64_argument_problems`, `c_float64_problems`) read arguments and source, the same in both modes.
(The C rule names every `double` an answer writes, also where NVRTC narrows it away, e.g. an exact product of two floats
cast back to float: the cases here are ones the compiler keeps.)"""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
from test_stack import environment_for, stack_python  # noqa: F401 - the fixture: the environment under test

from gpucourse.checks.launches import RecordedLaunch, c_float64_problems, float64_argument_problems

OPERATIONS = ("d[i] = fabsf(x[i] - y[i]) / (fabsf(x[i]) + fabsf(y[i]) + 1.0)",
              "d[i] = fabsf(x[i] - y[i]) / (fabsf(x[i]) + fabsf(y[i]) + 1.0f)",
              "d[i] = x[i] * 2.5e-1f + y[i] * 3",
              "double t = (double)x[i] * y[i] + (double)y[i] * x[i] * x[i]; d[i] = (float)t")

COMPILE = """
import json, sys
from cupy_backends.cuda.libs import nvrtc  # CuPy's NVRTC compiles without a GPU (gpucourse is left out: it would pick the simulator)
from numba import cuda, float32, float64, types

def nvrtc_ptx(code):
    program = nvrtc.createProgram(code, "k.cu", (), ())
    try:
        nvrtc.compileProgram(program, ("-arch=compute_80",))
        ptx = nvrtc.getPTX(program)
    finally:
        nvrtc.destroyProgram(program)
    return ptx if isinstance(ptx, str) else ptx.decode()

def scale(z, out, s):
    i = cuda.grid(1)
    if i < z.size:
        out[i] = z[i] * float32(s)  # cast at once: only the parameter is float64

found = {"numba": {}, "nvrtc": {}}
for name, scalar in (("float64", float64), ("float32", float32)):
    ptx, _ = cuda.compile_ptx(scale, (types.float32[::1], types.float32[::1], scalar), cc=(8, 0))
    found["numba"][name] = ".param .f64" in ptx
for operation in json.loads(sys.argv[1]):
    code = ('extern "C" __global__ void k(const float* x, const float* y, float* d, int n) '
            '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { %s; } }' % operation)
    found["nvrtc"][operation] = ".f64" in nvrtc_ptx(code)
print("FOUND" + json.dumps(found))
"""


@pytest.fixture(scope="module")
def compiled(stack_python) -> dict:  # noqa: F811 - the fixture imported above
    done = subprocess.run([str(stack_python), "-c", COMPILE, json.dumps(OPERATIONS)], capture_output=True, text=True,
                          env=environment_for(stack_python), timeout=600)
    assert "FOUND" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout.split("FOUND", 1)[1])


def test_a_float64_argument_is_a_float64_parameter_in_the_ptx(compiled):
    def kernel(z, out, s):  # stands for an answer's kernel (its code is outside the package)
        pass

    for name, value in (("float64", math.sqrt(2.0)), ("float32", np.float32(math.sqrt(2.0)))):
        launch = RecordedLaunch(kernel, (1, 1, 1), (64, 1, 1), (np.ones(64, np.float32), np.zeros(64, np.float32), value))
        assert bool(float64_argument_problems([launch])) == compiled["numba"][name], name


@pytest.mark.parametrize("operation", OPERATIONS)
def test_double_in_c_source_is_float64_in_nvrtcs_ptx(compiled, operation):
    assert bool(c_float64_problems(operation, "the kernel")) == compiled["nvrtc"][operation]
