"""Occupancy: how many warps of a kernel fit on one multiprocessor, and what stops more from fitting.

A block needs threads (warps), registers and shared memory, each allocated in units. The number of
blocks an SM holds at once is the smallest of four limits: warps, blocks, registers and shared
memory. Occupancy is the resident warps over the SM's maximum. The same arithmetic runs for the
learner's GPU (limits from its driver) and for the book's GPUs (limits from the book's Appendix A),
so the book's occupancy tables can be recomputed anywhere, the simulator included.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from . import book, mode
from .device import DeviceInfo, current_device
from .errors import GPUOnlyFeature, LaunchConfigError

# Allocation units by compute capability major version (NVIDIA's occupancy calculator):
# (registers are given out per warp in units of `register_unit`; warps in groups of
# `warp_granularity`; shared memory per block in units of `shared_unit` bytes).
_GRANULARITY = {
    2: {"register_unit": 64, "warp_granularity": 2, "shared_unit": 128},
    3: {"register_unit": 256, "warp_granularity": 4, "shared_unit": 256},
    5: {"register_unit": 256, "warp_granularity": 4, "shared_unit": 256},
    6: {"register_unit": 256, "warp_granularity": 4, "shared_unit": 256},
    7: {"register_unit": 256, "warp_granularity": 4, "shared_unit": 256},
}
_NEWER = {"register_unit": 256, "warp_granularity": 4, "shared_unit": 128}  # Ampere, Ada, Hopper, Blackwell


@dataclass(frozen=True)
class SMLimits:
    """What one multiprocessor offers resident blocks, and in which units it hands it out."""

    name: str
    compute_capability: tuple[int, int]
    registers_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_per_sm: int
    reserved_shared_per_block: int = 0
    max_registers_per_block: int | None = None
    register_unit: int = 256
    warp_granularity: int = 4
    shared_unit: int = 256
    warp_size: int = 32


def _granularity(major: int) -> dict[str, int]:
    return _GRANULARITY.get(major, _NEWER)


def sm_limits(device: DeviceInfo | None = None) -> SMLimits:
    """The limits of one SM of `device` (the current one by default), from its driver."""
    device = device or current_device()
    if device.simulated or device.max_registers_per_multiprocessor is None:
        raise GPUOnlyFeature(f"The SM limits of this device ({device.name})", "the simulator has no multiprocessors; "
                             "use book_sm_limits('Tesla K20') to work with a book GPU instead")
    return SMLimits(
        name=device.name,
        compute_capability=device.compute_capability,
        registers_per_sm=device.max_registers_per_multiprocessor,
        max_warps_per_sm=device.max_threads_per_multiprocessor // device.warp_size,
        max_blocks_per_sm=device.max_blocks_per_multiprocessor,
        shared_per_sm=device.max_shared_per_multiprocessor,
        reserved_shared_per_block=device.reserved_shared_per_block or 0,
        max_registers_per_block=device.max_registers_per_block,
        warp_size=device.warp_size,
        **_granularity(device.compute_capability[0]),
    )


def _leading_int(text: str) -> int:
    match = re.search(r"\d[\d,]*", text)
    if not match:
        raise ValueError(f"no number in {text!r}")
    return int(match.group().replace(",", ""))


def book_sm_limits(gpu: str) -> SMLimits:
    """The SM limits of one of the book's Tesla GPUs (e.g. 'Tesla K20', 'Tesla C2050'), from Appendix A."""
    figures = {f.quantity: f.value for f in book.figures("appA_", gpu=gpu) if f.gpu == gpu}
    if not figures:
        raise KeyError(f"the book's Appendix A has no GPU named {gpu!r}")
    major, minor = (int(x) for x in figures["compute capability"].split("."))
    kilo = 1024
    return SMLimits(
        name=f"{gpu} (book, Appendix A)",
        compute_capability=(major, minor),
        registers_per_sm=_leading_int(figures["32-bit registers per multiprocessor"]) * kilo,
        max_warps_per_sm=_leading_int(figures["maximum threads (warps) per multiprocessor"]) // 32,
        max_blocks_per_sm=_leading_int(figures["maximum thread blocks per multiprocessor"]),
        shared_per_sm=_leading_int(figures["shared memory per multiprocessor"]) * kilo,  # the largest configuration
        **_granularity(major),
    )


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM for one launch configuration, and the limit that binds."""

    threads_per_block: int
    registers_per_thread: int
    shared_bytes_per_block: int
    blocks_per_sm: int
    warps_per_block: int
    max_warps_per_sm: int
    limited_by: str
    limits: dict[str, int]

    @property
    def active_warps(self) -> int:
        """Warps resident on one SM."""
        return self.blocks_per_sm * self.warps_per_block

    @property
    def fraction(self) -> float:
        """Resident warps over the SM's maximum (the occupancy, 0 to 1)."""
        return self.active_warps / self.max_warps_per_sm

    def __str__(self) -> str:
        return (f"{self.threads_per_block} threads, {self.registers_per_thread} registers, {self.shared_bytes_per_block} B shared: "
                f"{self.blocks_per_sm} blocks/SM, {self.active_warps}/{self.max_warps_per_sm} warps, occupancy {self.fraction:.3f} "
                f"(limited by {self.limited_by})")


def _round_up(value: int, unit: int) -> int:
    return unit * math.ceil(value / unit)


def occupancy(threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int = 0, limits: SMLimits | None = None) -> Occupancy:
    """Blocks and warps per SM for a kernel using these resources, on `limits` (the current GPU by default)."""
    limits = limits or sm_limits()
    if threads_per_block < 1:
        raise LaunchConfigError(f"threads_per_block must be at least 1; got {threads_per_block}")
    warps_per_block = math.ceil(threads_per_block / limits.warp_size)
    by_warps = limits.max_warps_per_sm // warps_per_block
    candidates = {"warps": by_warps, "blocks": limits.max_blocks_per_sm}
    if registers_per_thread > 0:
        registers_per_warp = _round_up(registers_per_thread * limits.warp_size, limits.register_unit)
        if limits.max_registers_per_block and registers_per_warp * warps_per_block > limits.max_registers_per_block:
            raise LaunchConfigError(
                f"{threads_per_block} threads x {registers_per_thread} registers exceed the {limits.max_registers_per_block} "
                "registers a block may use: use fewer threads per block or cap registers (max_registers=...)."
            )
        warps_by_registers = limits.registers_per_sm // registers_per_warp
        warps_by_registers -= warps_by_registers % limits.warp_granularity
        candidates["registers"] = warps_by_registers // warps_per_block
    shared = shared_bytes_per_block + limits.reserved_shared_per_block if shared_bytes_per_block else 0
    if shared:
        shared_allocated = _round_up(shared, limits.shared_unit)
        if shared_allocated > limits.shared_per_sm:
            raise LaunchConfigError(f"{shared_bytes_per_block} B of shared memory per block exceed the {limits.shared_per_sm} B of one SM")
        candidates["shared memory"] = limits.shared_per_sm // shared_allocated
    blocks = min(candidates.values())
    if blocks == 0:
        raise LaunchConfigError(f"not even one block of {threads_per_block} threads fits on an SM of {limits.name}: {candidates}")
    order = ["warps", "blocks", "registers", "shared memory"]
    limited_by = next(name for name in order if candidates.get(name) == blocks)
    return Occupancy(threads_per_block, registers_per_thread, shared_bytes_per_block, blocks, warps_per_block,
                     limits.max_warps_per_sm, limited_by, candidates)


def kernel_occupancy(kernel, threads_per_block: int, dynamic_shared_bytes: int = 0, index: int = 0) -> Occupancy:
    """Occupancy of compiled version `index` of a Numba kernel on the current GPU, from its resource report."""
    from .compilation import resource_usage

    usage = resource_usage(kernel)[index]
    return occupancy(threads_per_block, usage.registers, usage.shared_bytes + dynamic_shared_bytes)


def api_blocks_per_sm(kernel, threads_per_block: int, dynamic_shared_bytes: int = 0, index: int = 0) -> int:
    """Resident blocks per SM as the CUDA occupancy API computes them (to check `kernel_occupancy` against)."""
    if mode.is_simulator():
        raise GPUOnlyFeature("The CUDA occupancy API", "the simulator has no multiprocessors")
    from numba import cuda

    _, compiled = list(kernel.overloads.items())[index]
    function = compiled._codelibrary.get_cufunc()
    return int(cuda.current_context().get_active_blocks_per_multiprocessor(function, threads_per_block, dynamic_shared_bytes))
