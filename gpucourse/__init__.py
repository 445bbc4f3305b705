"""gpucourse: the helper package of the GPU Programming in Python course.

Import it first, before numba.cuda: it finds out whether a usable CUDA GPU is there and picks the
mode ('gpu' or 'simulator') before Numba's CUDA target loads. Everything a notebook and the tests
share lives here: device properties, problem sizes, timing, checks and the kernels of each chapter.
"""

from __future__ import annotations

from . import mode as _mode  # noqa: I001  (first: chooses the mode and imports numba.cuda)
from .arrays import array_module, as_numba, device_empty, gpu_only, poisoned, random_array, require_cupy, to_device, to_host
from .banner import banner, diagnose
from .device import DeviceInfo, current_device, select_device, theoretical_bandwidth_gbs
from .errors import (
    ArrayArgumentError,
    CourseError,
    EnvironmentProblem,
    GPUOnlyFeature,
    LaunchConfigError,
    TimingError,
)
from .report import data_size, finding, gpu_value, rate
from .sizes import problem_size
from .source import show_source
from .timing import Timing, bandwidth_ceilings, benchmark, effective_bandwidth_gbs, synchronize

if _mode.is_simulator():  # supply the warp shuffles, make shared arrays thread-safe (see gpucourse.simulation)
    from .simulation import add_warp_functions as _add_warp_functions
    from .simulation import serialize_shared_arrays as _serialize_shared_arrays

    _add_warp_functions()
    _serialize_shared_arrays()

MODE: str = _mode.MODE
is_simulator = _mode.is_simulator
on_gpu = _mode.on_gpu

__version__ = "0.1.0"

__all__ = [
    "MODE",
    "ArrayArgumentError",
    "CourseError",
    "DeviceInfo",
    "EnvironmentProblem",
    "GPUOnlyFeature",
    "LaunchConfigError",
    "Timing",
    "TimingError",
    "array_module",
    "as_numba",
    "bandwidth_ceilings",
    "banner",
    "benchmark",
    "current_device",
    "data_size",
    "device_empty",
    "diagnose",
    "effective_bandwidth_gbs",
    "finding",
    "gpu_only",
    "gpu_value",
    "is_simulator",
    "on_gpu",
    "poisoned",
    "problem_size",
    "random_array",
    "rate",
    "require_cupy",
    "select_device",
    "show_source",
    "synchronize",
    "theoretical_bandwidth_gbs",
    "to_device",
    "to_host",
]
