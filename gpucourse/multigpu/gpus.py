"""Several GPUs from one process: which devices there are, and making one current.

CUDA keeps one *current device* per host thread; allocations, launches, streams and events belong
to the device current when they are made. Numba and CuPy each track it: `on_device(d)` makes `d`
current for both for the length of a `with` block, so that a Numba kernel, a CuPy array and a
stream made inside it all live on `d`. Peer access and copies between GPUs are in `peer`.

In the simulator there is one stand-in device (ordinal 0).
"""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from .. import mode, timing
from ..arrays import require_cupy
from ..device import DeviceInfo, all_devices, simulated_device
from ..errors import DeviceOrdinalError
from ..report import Table

# ---------------------------------------------------------------------------------------------
# Devices


def devices() -> tuple[DeviceInfo, ...]:
    """Every GPU this process can see, in CUDA's order (the simulator's one stand-in device in simulator mode)."""
    if mode.is_simulator():
        return (simulated_device(),)
    return all_devices()


def device_count() -> int:
    """How many GPUs this process can see (1 in the simulator: its stand-in device)."""
    return len(devices())


def visible_devices_setting() -> str:
    """CUDA_VISIBLE_DEVICES in words: which physical GPUs this process was given, and in which order."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return "CUDA_VISIBLE_DEVICES is not set: every GPU of the machine is visible, in the driver's order."
    if not value.strip():
        return "CUDA_VISIBLE_DEVICES is empty: this process sees no GPU at all."
    return f"CUDA_VISIBLE_DEVICES={value}: ordinal 0 of this process is the GPU listed first, and so on."


def check_ordinal(ordinal: int) -> int:
    """Check that device `ordinal` exists in this process; return it as an int (DeviceOrdinalError otherwise)."""
    count = device_count()
    if not isinstance(ordinal, (int, np.integer)) or isinstance(ordinal, bool) or not 0 <= ordinal < count:
        seen = "the simulator's one stand-in device, 0" if mode.is_simulator() else f"{count} GPU(s), ordinals 0 to {count - 1}"
        raise DeviceOrdinalError(
            f"there is no device {ordinal!r}: this process sees {seen}. Ordinals count the GPUs this process can see "
            f"from 0 ({visible_devices_setting()}) Use an ordinal below {count}, or loop over range(device_count())."
        )
    return int(ordinal)


@contextlib.contextmanager
def on_device(ordinal: int) -> Iterator[DeviceInfo]:
    """Make GPU `ordinal` current for Numba and CuPy inside the block; yield its properties."""
    ordinal = check_ordinal(ordinal)
    info = devices()[ordinal]
    if mode.is_simulator():
        yield info
        return
    from numba import cuda

    cupy = require_cupy("selecting a GPU for CuPy")
    # Numba first: it pushes the device's primary context; CuPy's Device then finds it current and
    # restores it on exit, before Numba pops it.
    with cuda.gpus[ordinal], cupy.cuda.Device(ordinal):
        yield info


def device_table() -> Table:
    """The devices this process sees: ordinal, name, compute capability, SMs, memory and PCI bus."""
    table = Table(headers=["ordinal", "name", "compute capability", "SMs", "memory (GiB)", "PCI bus"],
                  title="Devices visible to this process", notes=[visible_devices_setting()])
    for info in devices():
        memory = None if info.total_memory_gib is None else round(info.total_memory_gib, 1)
        table.rows.append([info.ordinal, info.name, info.cc, info.multiprocessors, memory, info.pci_bus_id])
    return table


def memory_info(ordinal: int) -> tuple[int, int]:
    """(free, total) device memory of GPU `ordinal` in bytes (cudaMemGetInfo)."""
    with on_device(ordinal):
        cupy = require_cupy("cudaMemGetInfo")
        free, total = cupy.cuda.runtime.memGetInfo()
    return int(free), int(total)


def new_stream(ordinal: int):
    """A new non-blocking CuPy stream on GPU `ordinal` (None in the simulator, where there are no streams)."""
    if mode.is_simulator():
        check_ordinal(ordinal)
        return None
    with on_device(ordinal):
        cupy = require_cupy("CUDA streams")
        return cupy.cuda.Stream(non_blocking=True)


def synchronize_all(ordinals: Sequence[int] | None = None) -> None:
    """Wait until every listed GPU (default: all visible) has finished its queued work."""
    if mode.is_simulator():
        return
    cupy = require_cupy("device synchronization")
    for ordinal in sorted(set(range(device_count()) if ordinals is None else ordinals)):
        with cupy.cuda.Device(check_ordinal(ordinal)):
            cupy.cuda.runtime.deviceSynchronize()


def device_of(array) -> int:
    """The ordinal of the GPU that holds `array` (0 for host and simulator arrays)."""
    device = getattr(array, "device", None)
    return int(getattr(device, "id", 0) or 0) if device is not None and not isinstance(array, np.ndarray) else 0


def wall_times_ms(fn: Callable[[], object], ordinals: Sequence[int], repeat: int = 10, warmup: int = 1) -> list[float]:
    """Wall-clock ms of each of `repeat` calls of `fn()`, from idle GPUs to the end of its work on all of `ordinals`."""
    return timing.wall_times_ms(fn, repeat, warmup, sync=lambda: synchronize_all(ordinals))


def wall_time_ms(fn: Callable[[], object], ordinals: Sequence[int], repeat: int = 10, warmup: int = 1) -> float:
    """Median wall-clock ms of `fn()` from idle GPUs to the end of its work on all of `ordinals` (what a user waits)."""
    return statistics.median(wall_times_ms(fn, ordinals, repeat, warmup))
