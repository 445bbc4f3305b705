"""What each GPU class of the course allows one kernel launch: the limits of its compute capability.

Every figure comes from NVIDIA's CUDA C++ Programming Guide, "Compute Capabilities", table "Technical
Specifications per Compute Capability" (CUDA 12.9 and 13.0 editions; the rows named in each field's comment).
The course's kernels are compiled for each of these classes and checked against them (tests/test_stack.py);
the tuned launch shapes are checked against the same table (`check_launch`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import LaunchConfigError
from .occupancy import SMLimits, _granularity, occupancy

KIB = 1024


@dataclass(frozen=True)
class Architecture:
    """The per-launch and per-SM limits of one compute capability (bytes, threads, 32-bit registers)."""

    compute_capability: tuple[int, int]
    example_gpus: str
    max_threads_per_block: int  # "Maximum number of threads per block"
    max_threads_per_sm: int  # "Maximum number of resident threads per SM"
    max_blocks_per_sm: int  # "Maximum number of resident blocks per SM"
    registers_per_sm: int  # "Number of 32-bit registers per SM"
    max_registers_per_block: int  # "Maximum number of 32-bit registers per thread block"
    max_registers_per_thread: int  # "Maximum number of 32-bit registers per thread"
    shared_per_sm_bytes: int  # "Maximum amount of shared memory per SM"
    shared_per_block_optin_bytes: int  # "Maximum amount of shared memory per thread block" (with the opt-in attribute)
    reserved_shared_per_block_bytes: int  # "Shared Memory" section of each architecture: 1 KB per block kept by the system from 8.0 on
    ldg: bool = True  # __ldg / ld.global.nc, the read-only data cache load: compute capability 3.5 and later

    @property
    def sm(self) -> str:
        """The architecture's name for the compilers, e.g. 'sm_75'."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def shared_per_block_bytes(self) -> int:
        """Shared memory one block gets without opting in (static plus dynamic): 48 KiB on every class."""
        # The guide: "Kernels relying on shared memory allocations over 48 KB per block are architecture-specific, as
        # such they must use dynamic shared memory ... and require an explicit opt-in using cudaFuncSetAttribute()".
        # Numba's launch and CuPy's RawKernel (without max_dynamic_shared_size_bytes) stay within it.
        return 48 * KIB


# One row per GPU class of the README's table; 10.0 and 12.0 need CUDA 12.8 or later to compile for.
ARCHITECTURES: dict[str, Architecture] = {
    arch.sm: arch
    for arch in (
        Architecture((7, 5), "T4, RTX 20xx", 1024, 1024, 16, 64 * KIB, 64 * KIB, 255, 64 * KIB, 64 * KIB, 0),
        Architecture((8, 0), "A100, A30", 1024, 2048, 32, 64 * KIB, 64 * KIB, 255, 164 * KIB, 163 * KIB, KIB),
        Architecture((8, 6), "A10, A40, RTX 30xx", 1024, 1536, 16, 64 * KIB, 64 * KIB, 255, 100 * KIB, 99 * KIB, KIB),
        Architecture((8, 9), "L4, L40S, RTX 40xx", 1024, 1536, 24, 64 * KIB, 64 * KIB, 255, 100 * KIB, 99 * KIB, KIB),
        Architecture((9, 0), "H100, H200", 1024, 2048, 32, 64 * KIB, 64 * KIB, 255, 228 * KIB, 227 * KIB, KIB),
        Architecture((10, 0), "B200, GB200", 1024, 2048, 32, 64 * KIB, 64 * KIB, 255, 228 * KIB, 227 * KIB, KIB),
        Architecture((12, 0), "RTX PRO 6000 Blackwell, RTX 50xx", 1024, 1536, 32, 64 * KIB, 64 * KIB, 255, 100 * KIB, 99 * KIB, KIB),
    )
}


def architecture(compute_capability: tuple[int, int]) -> Architecture:
    """The table's row for a compute capability; a newer minor version of a listed major (8.7 on 8.6) falls back to it."""
    key = "sm_{}{}".format(*compute_capability)
    if key in ARCHITECTURES:
        return ARCHITECTURES[key]
    same_major = [a for a in ARCHITECTURES.values() if a.compute_capability[0] == compute_capability[0]
                  and a.compute_capability <= tuple(compute_capability)]
    if not same_major:
        raise KeyError(f"compute capability {compute_capability} is not in gpucourse.architectures")
    return max(same_major, key=lambda a: a.compute_capability)


@dataclass(frozen=True)
class Resources:
    """What ptxas reports for one compiled kernel (per thread: registers, local bytes; per block: static shared bytes)."""

    registers: int
    static_shared_bytes: int
    local_bytes: int
    spill_bytes: int


def sm_limits(arch: Architecture) -> SMLimits:
    """The table's row as gpucourse.occupancy's SM limits, with the allocation units of its compute capability."""
    return SMLimits(
        name=f"compute capability {arch.compute_capability[0]}.{arch.compute_capability[1]} ({arch.example_gpus})",
        compute_capability=arch.compute_capability,
        registers_per_sm=arch.registers_per_sm,
        max_warps_per_sm=arch.max_threads_per_sm // 32,
        max_blocks_per_sm=arch.max_blocks_per_sm,
        shared_per_sm=arch.shared_per_sm_bytes,
        reserved_shared_per_block=arch.reserved_shared_per_block_bytes,
        max_registers_per_block=arch.max_registers_per_block,
        **_granularity(arch.compute_capability[0]),
    )


def check_launch(arch: Architecture, resources: Resources, threads_per_block: int, dynamic_shared_bytes: int = 0) -> list[str]:
    """The limits of `arch` that a launch of `threads_per_block` threads with these resources breaks (empty: it fits)."""
    problems = []
    if threads_per_block > arch.max_threads_per_block:
        problems.append(f"{threads_per_block} threads per block > {arch.max_threads_per_block}")
    if resources.registers > arch.max_registers_per_thread:
        problems.append(f"{resources.registers} registers per thread > {arch.max_registers_per_thread}")
    shared = resources.static_shared_bytes + dynamic_shared_bytes
    if shared > arch.shared_per_block_bytes:
        problems.append(f"{shared} bytes of shared memory per block > {arch.shared_per_block_bytes} (without the opt-in)")
    if not problems:
        try:  # registers per block, in the units they are handed out (per warp, 256 at a time), and a block per SM
            occupancy(threads_per_block, resources.registers, shared, sm_limits(arch))
        except LaunchConfigError as refused:
            problems.append(str(refused))
    return problems
