"""Device profiles: the few numbers of a GPU that the course's problem sizes depend on.

A `DeviceProfile` holds a GPU's memory, its L2 cache, its theoretical peak memory bandwidth and that
of its host link. `PROFILES` names the GPUs learners are likely to have (a T4 or an L4 in a notebook
service, a gaming card, an A100 or a Hopper); `current_profile()` describes the GPU the course runs
on now, from `gpucourse.current_device()` (so an emulated memory size, `GPUCOURSE_DEVICE_MEMORY`, is
the memory it reports). `gpucourse.sizes` turns a profile into problem sizes.

Units: bytes for memory and cache, GB/s (1e9 bytes per second) for bandwidths.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from . import mode
from .device import DeviceInfo, current_device

GB = 10**9
MiB = 2**20

#: Theoretical peak of a PCIe x16 link in one direction (GB/s), by generation: 8, 16 and 32 GT/s
#: per lane with 128b/130b encoding. A link of 8 lanes has half.
PCIE_X16_GBS = {3: 15.75, 4: 31.5, 5: 63.0}


@dataclass(frozen=True)
class DeviceProfile:
    """What problem sizes depend on: memory (bytes), L2 cache (bytes), peak DRAM and host-link bandwidth (GB/s)."""

    name: str
    memory_bytes: int
    l2_bytes: int
    bandwidth_gbs: float
    host_link_gbs: float | None = None  # None: not known (the driver does not report the link)

    def __post_init__(self) -> None:
        if self.memory_bytes <= 0 or self.l2_bytes < 0 or self.bandwidth_gbs <= 0:
            raise ValueError(f"a device profile needs positive memory and bandwidth and a non-negative L2; got {self}")

    def bytes_in_ms(self, ms: float) -> float:
        """Bytes the memory moves in `ms` milliseconds at the theoretical peak."""
        return self.bandwidth_gbs * 1e9 * ms * 1e-3

    def ms_for_bytes(self, nbytes: float) -> float:
        """Milliseconds to move `nbytes` through device memory at the theoretical peak."""
        return nbytes / (self.bandwidth_gbs * 1e9) * 1e3

    def summary(self) -> str:
        """One line: name, memory, L2 and bandwidth."""
        link = f", host link {self.host_link_gbs:g} GB/s" if self.host_link_gbs else ""
        return (f"{self.name}: {self.memory_bytes / GB:g} GB memory, {self.l2_bytes / MiB:g} MiB L2, "
                f"{self.bandwidth_gbs:g} GB/s peak{link}")


def _profile(name: str, memory_gb: float, l2_mib: float, bandwidth_gbs: float, pcie_gen: int, lanes: int = 16) -> DeviceProfile:
    return DeviceProfile(name, int(memory_gb * GB), int(l2_mib * MiB), float(bandwidth_gbs), PCIE_X16_GBS[pcie_gen] * lanes / 16)


#: The GPU classes of issue 18, from their makers' data sheets. Memory is the size in the card's name
#: in GB (1e9 bytes): the driver reports a little more (an "8 GB" card has 8 GiB), so the figure errs
#: on the safe side. The L2 is counted in MiB, the larger reading, which errs on the safe side for
#: sizes that must stay beyond it. Bandwidths are theoretical peaks. The H200's L2 is what the card
#: reports (60 MiB, measurements/gpu_ci/2026-11-25_h200/), not the H100's 50 MiB its data sheet repeats.
PROFILES: dict[str, DeviceProfile] = {
    profile.name: profile
    for profile in (
        _profile("T4", 16, 4, 320, pcie_gen=3),
        _profile("L4", 24, 48, 300, pcie_gen=4),
        _profile("RTX 4060", 8, 24, 272, pcie_gen=4, lanes=8),
        _profile("RTX 3090", 24, 6, 936, pcie_gen=4),
        _profile("RTX 4090", 24, 72, 1008, pcie_gen=4),
        _profile("A100 40GB", 40, 40, 1555, pcie_gen=4),
        _profile("A100 80GB", 80, 40, 2039, pcie_gen=4),
        _profile("H100 SXM", 80, 50, 3350, pcie_gen=5),
        _profile("H200", 141, 60, 4800, pcie_gen=5),
    )
}

#: The GPU the course's sizes were first chosen for; `problem_size(name, for_mode="gpu")` answers for
#: it in simulator mode, where there is no device to ask.
REFERENCE = PROFILES["H100 SXM"]


def profile_of(device: DeviceInfo) -> DeviceProfile:
    """The profile of a GPU described by `device` (its reported memory, which an emulated size replaces)."""
    missing = [name for name, value in (("memory", device.total_memory_bytes), ("L2 cache size", device.l2_cache_bytes),
                                        ("memory clock and bus width", device.theoretical_bandwidth_gbs)) if not value]
    if device.simulated or missing:
        what = "it is the simulator's stand-in" if device.simulated else "the driver did not report its " + ", ".join(missing)
        raise ValueError(f"no device profile for {device.name}: {what}. Pass a profile from gpucourse.profiles.PROFILES instead.")
    return DeviceProfile(device.name, int(device.total_memory_bytes), int(device.l2_cache_bytes), float(device.theoretical_bandwidth_gbs))


@functools.cache
def _profile_for(ordinal: int) -> DeviceProfile:
    return profile_of(current_device())


def current_profile() -> DeviceProfile | None:
    """The profile of the GPU the course runs on now (made once per GPU); None in simulator mode."""
    if mode.is_simulator():
        return None
    return _profile_for(current_device().ordinal)
