"""A small GPU on a big one: `GPUCOURSE_DEVICE_MEMORY` makes the course behave as on a card of that memory.

Set it before Python starts, e.g. ``GPUCOURSE_DEVICE_MEMORY=8GiB ./course lab`` (or ``16GB``,
``12000MiB``: a number and a unit, KB MB GB TB or KiB MiB GiB TiB). Then:

* `gpucourse.current_device()` reports that memory (`DeviceInfo.emulated_from_bytes` keeps the real
  size), so the problem sizes of `gpucourse.sizes` are those of such a card;
* on a GPU, when the course's mode starts, one allocation (the ballast) takes the real card's memory
  beyond the emulated size, on every GPU the process sees, so that an experiment that would not fit
  such a card fails here too. On a GPU this process has to itself, the ballast is the real total minus
  the emulated size: the CUDA context's own memory then counts against the emulated card, as it would
  on a real one. Where other processes hold memory too, it leaves this process the emulated size less
  a context's worth (`CONTEXT_BYTES`) of the free memory instead. It is made
  once per process, a plain cudaMalloc through Numba (whose primary context CuPy shares), and held
  until the process ends: device memory in use is higher by a constant;
* a process started by one that holds the ballast (an MPI rank, a script a notebook runs) sees
  `GPUCOURSE_BALLAST` in its environment and makes none on those GPUs: the first one's already limits them.
  Where a GPU has less free memory than that left, none is made there, and the banner says so;
* in simulator mode only the reported memory changes (there is no GPU memory to hold back).

The banner says plainly that it emulates a card of that size.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .errors import EnvironmentProblem

ENV_VAR = "GPUCOURSE_DEVICE_MEMORY"
#: Set by the process that holds a ballast: "pid:bus,bus,..." (PCI bus ids of the GPUs it holds back).
HELD_VAR = "GPUCOURSE_BALLAST"
#: The smallest card it makes sense to emulate: the CUDA context alone takes a few hundred MiB.
SMALLEST_BYTES = 2**30

_UNITS = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b)\s*$", re.IGNORECASE)
_HOW = (f"Write a number and a unit, e.g. {ENV_VAR}=8GiB, 16GB or 12000MiB (units: KB, MB, GB, TB, KiB, MiB, GiB, TiB), "
        f"at least 1 GiB; or unset {ENV_VAR} to use the whole GPU.")


def parse_memory_size(text: str) -> int:
    """Bytes in a memory size such as '8GiB', '16GB' or '12000MiB' (EnvironmentProblem, saying what to write, otherwise)."""
    match = _SIZE.match(text)
    if not match:
        raise EnvironmentProblem(f"{ENV_VAR}={text!r} is not a memory size. {_HOW}")
    nbytes = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if nbytes < SMALLEST_BYTES:
        raise EnvironmentProblem(f"{ENV_VAR}={text!r} is {nbytes / 2**20:.0f} MiB: too small for a GPU card (the CUDA context alone "
                                 f"takes a few hundred MiB). {_HOW}")
    return nbytes


def requested_bytes(environ: Mapping[str, str] | None = None) -> int | None:
    """The emulated memory in bytes that `GPUCOURSE_DEVICE_MEMORY` asks for (None when it is unset or empty)."""
    text = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    return parse_memory_size(text) if text else None


def gib(nbytes: float) -> str:
    """Bytes as GiB with one decimal, e.g. '8.0 GiB'."""
    return f"{nbytes / 2**30:.1f} GiB"


def ballast_bytes(total_bytes: int, emulated_bytes: int) -> int:
    """Bytes to hold back on a GPU of `total_bytes` so that it has what a card of `emulated_bytes` has: the difference."""
    if emulated_bytes > total_bytes:
        raise EnvironmentProblem(f"{ENV_VAR} asks for a card of {gib(emulated_bytes)}, more than this GPU's {gib(total_bytes)}: a GPU "
                                 f"can only emulate a smaller one. Give at most {total_bytes // 2**20}MiB, or unset {ENV_VAR}.")
    return total_bytes - emulated_bytes


@dataclass(frozen=True)
class Ballast:
    """What was held back on one GPU: its PCI bus id, its real memory, the bytes held (0: none), and why none or why fewer."""

    bus_id: str
    total_bytes: int
    held_bytes: int
    note: str = ""


@dataclass(frozen=True)
class GPUMemory:
    """How to reach one GPU's memory: its PCI bus id, (free, total) in bytes, and an allocation of n bytes (kept alive by its result)."""

    bus_id: str
    memory_info: Callable[[], tuple[int, int]]
    allocate: Callable[[int], object]


#: What a CUDA context holds on a current GPU, about (for the ballast on a GPU shared with other processes).
CONTEXT_BYTES = 512 * 2**20


def hold_ballast(emulated_bytes: int, gpus: Sequence[GPUMemory], held_by_parent: str = "") -> tuple[list[Ballast], list[object]]:
    """Hold back each GPU's memory beyond `emulated_bytes`; return what was held and the allocations (keep them alive).

    `held_by_parent` is the value of GPUCOURSE_BALLAST inherited from the process that started this
    one: its GPUs are limited already, so they get no second ballast.
    """
    parent_buses = set(held_by_parent.partition(":")[2].split(",")) - {""}
    records, allocations = [], []
    for gpu in gpus:
        free, total = gpu.memory_info()
        wanted = ballast_bytes(total, emulated_bytes)
        shared = wanted > free  # other processes hold memory: leave this one an emulated card's share of what is free
        if shared:
            wanted = free - (emulated_bytes - CONTEXT_BYTES)
        if gpu.bus_id in parent_buses:
            records.append(Ballast(gpu.bus_id, total, 0, "held back already by the process that started this one"))
        elif wanted <= 0 and shared:
            records.append(Ballast(gpu.bus_id, total, 0, f"only {gib(free)} free (other processes use the rest): "
                                                          "nothing held back; the card is at most that full"))
        elif shared:
            allocations.append(gpu.allocate(wanted))
            records.append(Ballast(gpu.bus_id, total, wanted, f"other processes use {gib(total - free)} of it: this one is left "
                                                              f"{gib(free - wanted)}, an emulated card less its context"))
        elif wanted > 0:
            allocations.append(gpu.allocate(wanted))
            records.append(Ballast(gpu.bus_id, total, wanted))
        else:
            records.append(Ballast(gpu.bus_id, total, 0, "the card has exactly the emulated memory"))
    return records, allocations


def held_marker(pid: int, records: Sequence[Ballast], inherited: str = "") -> str:
    """The GPUCOURSE_BALLAST value for child processes: this pid and every GPU limited here or by a parent."""
    buses = {r.bus_id for r in records if r.held_bytes} | (set(inherited.partition(":")[2].split(",")) - {""})
    return f"{pid}:{','.join(sorted(buses))}"


def _numba_gpus() -> list[GPUMemory]:
    from numba import cuda

    gpus = []
    for gpu in cuda.gpus:
        def memory_info(gpu=gpu) -> tuple[int, int]:
            with gpu:
                free, total = cuda.current_context().get_memory_info()
            return int(free), int(total)

        def allocate(nbytes: int, gpu=gpu) -> object:
            with gpu:
                context = cuda.current_context()
                size_pending_frees(context.memory_manager, context.get_memory_info()[1] - nbytes)  # the card left
                return context.memalloc(nbytes)

        bus = f"{gpu.PCI_DOMAIN_ID:04x}:{gpu.PCI_BUS_ID:02x}:{gpu.PCI_DEVICE_ID:02x}.0"
        gpus.append(GPUMemory(bus, memory_info, allocate))
    return gpus


#: The ballast of this process: what was held back on each GPU (empty without emulation, or in the simulator).
BALLAST: list[Ballast] = []
_ALLOCATIONS: list[object] = []  # the ballast itself: kept alive here until the process ends


def start(emulated_bytes: int | None, on_gpu: bool) -> None:
    """Hold the ballast when the course starts in gpu mode with an emulated memory size (once per process)."""
    if not emulated_bytes or not on_gpu or BALLAST:
        return
    inherited = os.environ.get(HELD_VAR, "")
    records, allocations = hold_ballast(emulated_bytes, _numba_gpus(), inherited)
    BALLAST.extend(records)
    _ALLOCATIONS.extend(allocations)
    os.environ[HELD_VAR] = held_marker(os.getpid(), records, inherited)


def size_pending_frees(memory_manager: object, emulated_bytes: int) -> None:
    """Let Numba's batch of pending frees grow as on the emulated card, not as on the real one.

    Numba gives freed device arrays back in batches: after 10 of them, or once they add up to 20 % of
    the card's memory (NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO). It takes that share of the real card:
    28 GB on a 141 GB H200 that emulates an 8 GiB card, where the card itself would hold back 1.6 GB.
    """
    pending = getattr(memory_manager, "deallocations", None)  # Numba's own memory manager has one; a plugin may not
    if pending is not None and hasattr(pending, "memory_capacity"):
        pending.memory_capacity = emulated_bytes


def describe(emulated_bytes: int | None, simulated: bool, ballast: Sequence[Ballast] = ()) -> str:
    """One or two sentences for the banner: which card is emulated and how (empty without emulation)."""
    if not emulated_bytes:
        return ""
    if simulated:
        return (f"Emulating a card of {gib(emulated_bytes)} ({ENV_VAR}): in simulator mode only the device memory reported "
                "changes; nothing is held back, and the sizes stay the simulator's.")
    parts = [f"Emulating a card of {gib(emulated_bytes)} ({ENV_VAR}): problem sizes follow {gib(emulated_bytes)}"]
    for record in ballast:
        if record.held_bytes:
            parts.append(f"GPU {record.bus_id}: {gib(record.held_bytes)} of its {gib(record.total_bytes)} are held back, so that "
                         "what would not fit such a card fails here too")
        else:
            parts.append(f"GPU {record.bus_id}: {record.note}")
    return "; ".join(parts) + "."
