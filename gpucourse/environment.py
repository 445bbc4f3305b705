"""Find out, before Numba's CUDA target is imported, what this machine can run.

Everything here works without ``numba.cuda``: the NVIDIA driver is asked directly through
``ctypes``, package versions are read from their metadata, and the rules that pick the mode are
plain functions of what was found, so tests can feed them any situation.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field

from .errors import EnvironmentProblem

MODES = ("gpu", "simulator")

#: numba-cuda 0.30 breaks on NumPy 2.5 ("module 'numpy' has no attribute 'row_stack'"): the
#: first NumPy version it cannot use. Keep in step with the pin in pyproject.toml.
NUMPY_TOO_NEW = (2, 5)

# CUdevice_attribute values from cuda.h that the course reads (stable across CUDA 11-13).
_ATTRIBUTES = {
    "max_threads_per_block": 1,
    "max_block_dim_x": 2,
    "max_block_dim_y": 3,
    "max_block_dim_z": 4,
    "max_grid_dim_x": 5,
    "max_grid_dim_y": 6,
    "max_grid_dim_z": 7,
    "max_shared_per_block": 8,
    "total_constant_memory": 9,
    "warp_size": 10,
    "max_registers_per_block": 12,
    "clock_rate_khz": 13,
    "multiprocessors": 16,
    "kernel_exec_timeout": 17,
    "integrated": 18,
    "can_map_host_memory": 19,
    "compute_mode": 20,
    "concurrent_kernels": 31,
    "ecc_enabled": 32,
    "pci_bus_id": 33,
    "pci_device_id": 34,
    "memory_clock_khz": 36,
    "memory_bus_bits": 37,
    "l2_cache_bytes": 38,
    "max_threads_per_multiprocessor": 39,
    "async_engines": 40,
    "unified_addressing": 41,
    "pci_domain_id": 50,
    "cc_major": 75,
    "cc_minor": 76,
    "max_shared_per_multiprocessor": 81,
    "max_registers_per_multiprocessor": 82,
    "managed_memory": 83,
    "multi_gpu_board": 84,
    "single_to_double_perf_ratio": 87,
    "max_shared_per_block_optin": 97,
    "max_blocks_per_multiprocessor": 106,
    "reserved_shared_per_block": 111,
}

# Names of the CUresult codes a learner is most likely to meet when the driver starts.
_CU_RESULTS = {
    3: "CUDA_ERROR_NOT_INITIALIZED",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}


@dataclass(frozen=True)
class Finding:
    """One line of the environment diagnosis: what was seen, and what to do about it."""

    level: str  # "ok", "info", "warning" or "error"
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"[{self.level}] {self.message}"
        return f"{text} Fix: {self.fix}" if self.fix else text


@dataclass(frozen=True)
class DriverProbe:
    """What the NVIDIA driver said when asked directly (no CUDA toolkit involved)."""

    loaded: bool
    problem: str = ""
    driver_version: int | None = None  # CUDA version the driver supports, e.g. 12040 for 12.4
    devices: tuple[dict, ...] = field(default_factory=tuple)

    @property
    def usable(self) -> bool:
        """True when the driver loaded, initialised and reports at least one device."""
        return self.loaded and not self.problem and len(self.devices) > 0


def format_cuda_version(version: int | None) -> str:
    """Write a CUDA version integer such as 12040 as '12.4'."""
    if not version:
        return "unknown"
    return f"{version // 1000}.{(version % 1000) // 10}"


def _driver_library_names() -> list[str]:
    if sys.platform.startswith("win"):
        return ["nvcuda.dll"]
    if sys.platform == "darwin":
        return []
    return ["libcuda.so.1", "libcuda.so"]


def probe_driver() -> DriverProbe:
    """Ask the NVIDIA driver, through ctypes, for its version and devices; never raises."""
    names = _driver_library_names()
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        where = " or ".join(names) if names else "a CUDA driver (macOS has none)"
        return DriverProbe(loaded=False, problem=f"no NVIDIA driver found ({where} could not be loaded)")
    rc = lib.cuInit(0)
    version = ctypes.c_int(0)
    lib.cuDriverGetVersion(ctypes.byref(version))
    if rc != 0:
        name = _CU_RESULTS.get(rc, f"CUresult {rc}")
        return DriverProbe(
            loaded=True,
            problem=f"the NVIDIA driver is installed but failed to start ({name})",
            driver_version=version.value or None,
        )
    count = ctypes.c_int(0)
    lib.cuDeviceGetCount(ctypes.byref(count))
    devices = []
    for ordinal in range(count.value):
        handle = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(handle), ordinal) != 0:
            continue
        name_buffer = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name_buffer, 256, handle)
        total = ctypes.c_size_t(0)
        lib.cuDeviceTotalMem_v2(ctypes.byref(total), handle)
        info: dict = {"ordinal": ordinal, "name": name_buffer.value.decode(errors="replace"), "total_memory_bytes": total.value}
        for key, code in _ATTRIBUTES.items():
            value = ctypes.c_int(0)
            info[key] = value.value if lib.cuDeviceGetAttribute(ctypes.byref(value), code, handle) == 0 else None
        devices.append(info)
    if not devices:
        return DriverProbe(loaded=True, problem="the NVIDIA driver sees no GPU", driver_version=version.value or None)
    return DriverProbe(loaded=True, driver_version=version.value, devices=tuple(devices))


def parse_version(text: str) -> tuple[int, ...]:
    """Turn '2.4.6' or '0.30.4rc1' into a tuple of integers, ignoring suffixes."""
    parts = []
    for piece in text.split("."):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
    return tuple(parts)


def installed_version(distribution: str) -> str | None:
    """Return the installed version of a distribution, or None, without importing it."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_numpy(numpy_version: str, numba_cuda_version: str | None) -> Finding | None:
    """Say whether this NumPy is too new for numba-cuda (the break seen with NumPy 2.5)."""
    if parse_version(numpy_version)[:2] >= NUMPY_TOO_NEW:
        limit = ".".join(map(str, NUMPY_TOO_NEW))
        return Finding(
            "error",
            f"NumPy {numpy_version} is too new for numba-cuda {numba_cuda_version or '(not installed)'}, "
            f"which needs NumPy older than {limit}; importing numba.cuda would fail with an obscure "
            "AttributeError.",
            f"pip install 'numpy<{limit}' and restart the Python kernel.",
        )
    return None


def numba_cuda_state(modules: dict | None = None) -> str:
    """Tell whether numba.cuda is already imported: 'absent', 'gpu' or 'simulator'."""
    modules = sys.modules if modules is None else modules
    if "numba.cuda" not in modules:
        return "absent"
    return "simulator" if "numba.cuda.simulator_init" in modules else "gpu"


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def choose_mode(
    requested: str | None,
    simulator_env: str | None,
    already_imported: str,
    probe: DriverProbe,
) -> tuple[str, list[Finding]]:
    """Pick 'gpu' or 'simulator' from GPUCOURSE_MODE, NUMBA_ENABLE_CUDASIM, import state and driver.

    Raises EnvironmentProblem, with the fix in its message, when the wishes cannot be met.
    """
    requested = (requested or "auto").strip().lower()
    if requested not in ("auto", *MODES):
        raise EnvironmentProblem(
            f"GPUCOURSE_MODE={requested!r} is not a mode: use 'gpu', 'simulator' or 'auto' (or leave it unset)."
        )
    simulator_wanted = _flag(simulator_env)
    restart = "Restart the Python kernel and run `import gpucourse` before importing numba.cuda."
    findings: list[Finding] = []

    if requested == "gpu":
        if already_imported == "simulator" or (already_imported == "absent" and simulator_wanted):
            raise EnvironmentProblem(
                "GPUCOURSE_MODE=gpu, but Numba's CUDA simulator is switched on (NUMBA_ENABLE_CUDASIM=1). "
                "Unset NUMBA_ENABLE_CUDASIM, then " + restart[0].lower() + restart[1:]
            )
        if not probe.usable:
            raise EnvironmentProblem(
                f"GPUCOURSE_MODE=gpu, but {probe.problem}. Unset GPUCOURSE_MODE to run in the simulator, "
                "or install the NVIDIA driver on a machine with a CUDA GPU."
            )
        return "gpu", findings

    if requested == "simulator":
        if already_imported == "gpu":
            raise EnvironmentProblem(
                "GPUCOURSE_MODE=simulator, but numba.cuda was already imported for the GPU, and the "
                "simulator can only be switched on before that import. " + restart
            )
        findings.append(Finding("info", "GPUCOURSE_MODE=simulator: kernels run in Numba's CUDA simulator."))
        return "simulator", findings

    # auto
    if already_imported == "simulator":
        if probe.usable:
            findings.append(
                Finding(
                    "warning",
                    "numba.cuda was imported with the simulator switched on, so the GPU on this machine is not used.",
                    "Unset NUMBA_ENABLE_CUDASIM and " + restart[0].lower() + restart[1:],
                )
            )
        return "simulator", findings
    if already_imported == "gpu":
        if simulator_wanted:
            findings.append(
                Finding(
                    "warning",
                    "NUMBA_ENABLE_CUDASIM=1 was set after numba.cuda was imported, so it has no effect: "
                    "kernels run on the GPU.",
                    "To use the simulator, set it (or GPUCOURSE_MODE=simulator) before any import. " + restart,
                )
            )
        if not probe.usable:
            raise EnvironmentProblem(
                f"numba.cuda was imported before gpucourse, without the simulator, and {probe.problem}, "
                "so no kernel can run. " + restart + " It switches the simulator on for you."
            )
        return "gpu", findings
    if simulator_wanted:
        findings.append(Finding("info", "NUMBA_ENABLE_CUDASIM=1 is set: kernels run in Numba's CUDA simulator."))
        return "simulator", findings
    if probe.usable:
        return "gpu", findings
    findings.append(
        Finding(
            "info",
            f"No usable GPU: {probe.problem}. The course runs in Numba's CUDA simulator, with small problem sizes.",
            "Nothing, to follow the course; to time real kernels, use a machine with an NVIDIA GPU and driver.",
        )
    )
    return "simulator", findings


def explain_cuda_failure(message: str, driver_version: int | None, toolkit_version: tuple[int, int] | None) -> Finding:
    """Turn the text of a failed first kernel launch into a plain-words finding with a fix."""
    text = message.upper()
    driver = format_cuda_version(driver_version)
    toolkit = ".".join(map(str, toolkit_version)) if toolkit_version else "unknown"
    if "UNSUPPORTED_PTX_VERSION" in text or "PTX VERSION" in text or "UNSUPPORTED .VERSION" in text:
        return Finding(
            "error",
            f"The NVIDIA driver (it supports CUDA up to {driver}) is older than the CUDA toolkit Numba "
            f"compiles with (CUDA {toolkit}): the driver cannot load the PTX that the newer compiler writes "
            "(CUDA_ERROR_UNSUPPORTED_PTX_VERSION).",
            f"Update the NVIDIA driver, or install a toolkit no newer than the driver: "
            f"pip install 'cuda-toolkit[nvcc,nvrtc,cudart]=={driver}.*' (or conda install cuda-version={driver}), "
            "then restart the kernel.",
        )
    if "NVVM" in text or "LIBDEVICE" in text or "CUDA TOOLKIT" in text:
        return Finding(
            "error",
            "Numba found the GPU but not the CUDA compiler libraries (NVVM / libdevice) it needs to build kernels.",
            "pip install 'numba-cuda[cu12]' (or [cu13] for a CUDA 13 driver), or conda install cuda-nvcc, then restart.",
        )
    if "INSUFFICIENT_DRIVER" in text:
        return Finding(
            "error",
            f"The NVIDIA driver (CUDA {driver}) is too old for the CUDA runtime in this environment (CUDA {toolkit}).",
            "Update the NVIDIA driver, or install packages built for the driver's CUDA version.",
        )
    return Finding("error", f"A first test kernel failed to run: {message.strip()[:300]}", "Read the message above; restart the kernel after fixing.")


def check_toolkit_against_driver(driver_version: int | None, toolkit_version: tuple[int, int] | None) -> Finding | None:
    """Warn when the toolkit Numba uses is newer than what the driver supports."""
    if not driver_version or not toolkit_version:
        return None
    driver = (driver_version // 1000, (driver_version % 1000) // 10)
    if tuple(toolkit_version) > driver:
        return Finding(
            "warning",
            f"Numba uses CUDA {toolkit_version[0]}.{toolkit_version[1]}, newer than the driver's CUDA "
            f"{driver[0]}.{driver[1]}. Within one major version this can still work (the code is linked on the "
            "host); if kernels fail with CUDA_ERROR_UNSUPPORTED_PTX_VERSION, this is why.",
            "Update the NVIDIA driver, or install a CUDA toolkit no newer than the driver.",
        )
    return None


def cupy_installed() -> bool:
    """True when some CuPy wheel is installed (it is imported only when first used)."""
    return importlib.util.find_spec("cupy") is not None


def requested_mode() -> tuple[str | None, str | None]:
    """Read GPUCOURSE_MODE and NUMBA_ENABLE_CUDASIM from the environment."""
    return os.environ.get("GPUCOURSE_MODE"), os.environ.get("NUMBA_ENABLE_CUDASIM")
