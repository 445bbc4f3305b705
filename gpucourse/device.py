"""The chosen device and its properties: limits, clocks, memory and theoretical peak bandwidth."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from . import environment, mode

#: In the simulator there is no hardware: these are the limits of every CUDA GPU since Fermi,
#: which the course enforces so that code written in the simulator also launches on a GPU.
SIMULATED_LIMITS = {
    "max_threads_per_block": 1024,
    "max_block_dim": (1024, 1024, 64),
    "max_grid_dim": (2**31 - 1, 65535, 65535),
    "warp_size": 32,
    "max_shared_per_block": 48 * 1024,
}


def theoretical_bandwidth_gbs(memory_clock_khz: float, bus_width_bits: int, transfers_per_clock: int = 2) -> float:
    """Peak DRAM bandwidth in GB/s (1e9 B/s) from memory clock (kHz) and bus width (bits), double data rate."""
    return transfers_per_clock * memory_clock_khz * 1e3 * (bus_width_bits / 8) / 1e9


@dataclass(frozen=True)
class DeviceInfo:
    """Properties of one CUDA device, as the driver reports them (None where unknown)."""

    name: str
    compute_capability: tuple[int, int]
    simulated: bool
    ordinal: int = 0
    multiprocessors: int | None = None
    total_memory_bytes: int | None = None
    memory_clock_khz: int | None = None
    memory_bus_bits: int | None = None
    l2_cache_bytes: int | None = None
    clock_rate_khz: int | None = None
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_block_dim: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dim: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_per_block: int = 48 * 1024
    max_shared_per_block_optin: int | None = None
    max_shared_per_multiprocessor: int | None = None
    reserved_shared_per_block: int | None = None
    max_registers_per_block: int | None = None
    max_registers_per_multiprocessor: int | None = None
    max_threads_per_multiprocessor: int | None = None
    max_blocks_per_multiprocessor: int | None = None
    total_constant_memory: int | None = None
    ecc_enabled: bool | None = None
    single_to_double_perf_ratio: int | None = None
    async_engines: int | None = None
    concurrent_kernels: bool | None = None
    unified_addressing: bool | None = None
    can_map_host_memory: bool | None = None
    compute_mode: int | None = None
    pci_bus_id: str | None = None
    driver_cuda_version: int | None = None
    emulated_from_bytes: int | None = None  # the real memory, when GPUCOURSE_DEVICE_MEMORY makes total_memory_bytes an emulated card's

    @property
    def theoretical_bandwidth_gbs(self) -> float | None:
        """Peak DRAM bandwidth in GB/s from memory clock and bus width; None in the simulator."""
        if not self.memory_clock_khz or not self.memory_bus_bits:
            return None
        return theoretical_bandwidth_gbs(self.memory_clock_khz, self.memory_bus_bits)

    @property
    def total_memory_gib(self) -> float | None:
        """Device memory in GiB (2**30 bytes)."""
        return None if self.total_memory_bytes is None else self.total_memory_bytes / 2**30

    @property
    def cc(self) -> str:
        """Compute capability written as 'major.minor'."""
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"

    def summary(self) -> str:
        """One line: name, compute capability, SMs, memory and peak bandwidth."""
        if self.simulated:
            memory = f", {self.total_memory_gib:.1f} GiB of memory reported (emulated)" if self.total_memory_bytes else ""
            return f"{self.name} (no GPU: limits of a CUDA GPU are enforced, speed is not modelled{memory})"
        parts = [self.name, f"compute capability {self.cc}", f"{self.multiprocessors} SMs"]
        if self.total_memory_gib is not None:
            parts.append(f"{self.total_memory_gib:.1f} GiB" + (f" (emulated: the card has {self.emulated_from_bytes / 2**30:.1f} GiB)"
                                                               if self.emulated_from_bytes else ""))
        if self.theoretical_bandwidth_gbs is not None:
            parts.append(f"theoretical peak {self.theoretical_bandwidth_gbs:.0f} GB/s")
        return ", ".join(parts)


def _from_probe(info: dict, driver_version: int | None) -> DeviceInfo:
    def flag(key: str) -> bool | None:
        return None if info.get(key) is None else bool(info[key])

    bus = None
    if info.get("pci_bus_id") is not None:
        bus = f"{info.get('pci_domain_id') or 0:04x}:{info['pci_bus_id']:02x}:{info.get('pci_device_id') or 0:02x}.0"
    return DeviceInfo(
        name=info["name"],
        compute_capability=(info["cc_major"], info["cc_minor"]),
        simulated=False,
        ordinal=info["ordinal"],
        multiprocessors=info["multiprocessors"],
        total_memory_bytes=info["total_memory_bytes"],
        memory_clock_khz=info["memory_clock_khz"],
        memory_bus_bits=info["memory_bus_bits"],
        l2_cache_bytes=info["l2_cache_bytes"],
        clock_rate_khz=info["clock_rate_khz"],
        warp_size=info["warp_size"],
        max_threads_per_block=info["max_threads_per_block"],
        max_block_dim=(info["max_block_dim_x"], info["max_block_dim_y"], info["max_block_dim_z"]),
        max_grid_dim=(info["max_grid_dim_x"], info["max_grid_dim_y"], info["max_grid_dim_z"]),
        max_shared_per_block=info["max_shared_per_block"],
        max_shared_per_block_optin=info["max_shared_per_block_optin"],
        max_shared_per_multiprocessor=info["max_shared_per_multiprocessor"],
        reserved_shared_per_block=info["reserved_shared_per_block"],
        max_registers_per_block=info["max_registers_per_block"],
        max_registers_per_multiprocessor=info["max_registers_per_multiprocessor"],
        max_threads_per_multiprocessor=info["max_threads_per_multiprocessor"],
        max_blocks_per_multiprocessor=info["max_blocks_per_multiprocessor"],
        total_constant_memory=info["total_constant_memory"],
        ecc_enabled=flag("ecc_enabled"),
        single_to_double_perf_ratio=info["single_to_double_perf_ratio"],
        async_engines=info["async_engines"],
        concurrent_kernels=flag("concurrent_kernels"),
        unified_addressing=flag("unified_addressing"),
        can_map_host_memory=flag("can_map_host_memory"),
        compute_mode=info["compute_mode"],
        pci_bus_id=bus,
        driver_cuda_version=driver_version,
    )


def with_emulated_memory(info: DeviceInfo, emulated_bytes: int | None) -> DeviceInfo:
    """`info` reporting `emulated_bytes` of memory (GPUCOURSE_DEVICE_MEMORY), the real size kept; unchanged for None."""
    if not emulated_bytes:
        return info
    return dataclasses.replace(info, total_memory_bytes=emulated_bytes, emulated_from_bytes=info.total_memory_bytes)


def simulated_device() -> DeviceInfo:
    """The stand-in description used in simulator mode (with the emulated memory, if GPUCOURSE_DEVICE_MEMORY gives one)."""
    return with_emulated_memory(_simulated_device(), mode.EMULATED_MEMORY)


def _simulated_device() -> DeviceInfo:
    limits = SIMULATED_LIMITS
    return DeviceInfo(
        name="Numba CUDA simulator",
        compute_capability=(5, 2),
        simulated=True,
        warp_size=limits["warp_size"],
        max_threads_per_block=limits["max_threads_per_block"],
        max_block_dim=limits["max_block_dim"],
        max_grid_dim=limits["max_grid_dim"],
        max_shared_per_block=limits["max_shared_per_block"],
    )


def all_devices() -> tuple[DeviceInfo, ...]:
    """Every GPU the driver reports (empty in simulator mode)."""
    if mode.is_simulator():
        return ()
    return tuple(with_emulated_memory(_from_probe(d, mode.PROBE.driver_version), mode.EMULATED_MEMORY) for d in mode.PROBE.devices)


@functools.cache
def _device_by_ordinal(ordinal: int) -> DeviceInfo:
    for info in mode.PROBE.devices:
        if info["ordinal"] == ordinal:
            return with_emulated_memory(_from_probe(info, mode.PROBE.driver_version), mode.EMULATED_MEMORY)
    raise IndexError(f"no GPU with ordinal {ordinal}: the driver reports {len(mode.PROBE.devices)} device(s)")


def current_device() -> DeviceInfo:
    """Properties of the device Numba launches on now (the simulator's stand-in in simulator mode)."""
    if mode.is_simulator():
        return simulated_device()
    from numba import cuda

    return _device_by_ordinal(cuda.get_current_device().id)


def select_device(ordinal: int) -> DeviceInfo:
    """Make GPU `ordinal` current for Numba and CuPy, and return its properties."""
    if mode.is_simulator():
        if ordinal != 0:
            raise IndexError("the simulator has a single device, 0")
        return simulated_device()
    from numba import cuda

    info = _device_by_ordinal(ordinal)
    cuda.select_device(ordinal)
    if environment.cupy_installed():
        import cupy

        cupy.cuda.Device(ordinal).use()
    return info
