"""The course's mode, chosen once, when gpucourse is first imported, before numba.cuda is.

``gpu``: kernels run on the GPU through Numba and CuPy. ``simulator``: kernels run in Numba's CUDA
simulator (each CUDA thread a Python thread) and NumPy stands in for CuPy's arrays.
"""

from __future__ import annotations

import os
import sys

from . import emulation, environment
from .errors import EnvironmentProblem

_requested, _simulator_env = environment.requested_mode()
PROBE: environment.DriverProbe = environment.probe_driver()
MODE, _findings = environment.choose_mode(_requested, _simulator_env, environment.numba_cuda_state(), PROBE)

_numpy_version = environment.installed_version("numpy") or "0"
_numpy_finding = environment.check_numpy(_numpy_version, environment.installed_version("numba-cuda"))
if _numpy_finding is not None:
    raise EnvironmentProblem(f"{_numpy_finding.message} Fix: {_numpy_finding.fix}")

if MODE == "simulator" and environment.numba_cuda_state() == "absent":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if "numba.core.config" in sys.modules:  # numba was imported first: make it read the switch again
        sys.modules["numba.core.config"].reload_config()

try:
    from numba import cuda  # noqa: F401  (imported here, after the switch above, on purpose)
except ImportError as exc:  # missing cuda-bindings, or a NumPy numba itself refuses
    raise EnvironmentProblem(
        f"numba.cuda could not be imported: {exc}. Fix: reinstall the course's packages "
        "(pip install -e '.[cuda12]' or '.[cuda13]', or the README's set-up command) and restart."
    ) from exc

if (environment.numba_cuda_state() == "simulator") != (MODE == "simulator"):  # pragma: no cover - defensive
    raise EnvironmentProblem(
        f"gpucourse chose mode {MODE!r} but numba.cuda loaded in the other mode. Restart the Python kernel "
        "and import gpucourse before anything else."
    )

FINDINGS: tuple[environment.Finding, ...] = tuple(_findings)

#: GPUCOURSE_DEVICE_MEMORY in bytes (None: the whole GPU). On a GPU the memory beyond it is held back now.
EMULATED_MEMORY: int | None = emulation.requested_bytes()
emulation.start(EMULATED_MEMORY, MODE == "gpu")


def is_simulator() -> bool:
    """True when kernels run in Numba's CUDA simulator rather than on a GPU."""
    return MODE == "simulator"


def on_gpu() -> bool:
    """True when kernels run on a real CUDA GPU."""
    return MODE == "gpu"
