"""Helpers that keep simulator mode fast enough to teach with; on a GPU they change nothing.

The simulator runs every CUDA thread as a Python thread. Two things make kernels much slower there
than they need to be: Python's default thread-switch interval, which leaves threads waiting at each
barrier, and simulated device-function calls, which swap module globals on every call.

The simulator of numba-cuda 0.30 also lacks the warp shuffles (`cuda.shfl_down_sync` and its kin);
`add_warp_functions` supplies them, so that the same kernel source runs in both modes.

Its `cuda.shared.array` is not thread-safe either: the first threads of a block to reach the line can
each allocate an array of their own, so that they write a tile the others never read (the stencil
tiles of chapters 6 and 7 came out with garbage now and then). `serialize_shared_arrays` makes the
first allocation happen once per block, and gives each block arrays of its own.

Finally, the simulator runs the blocks of a grid one after another, so that a race between blocks
(two blocks updating one element of global memory without an atomic) never shows there.
`interleaved_blocks` runs the blocks of each launch at the same time, as a GPU does.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
from numba import cuda

from .mode import is_simulator

#: GIL switch interval (s) while a simulated kernel runs. The simulator runs each CUDA thread as a
#: Python thread and a manager thread polls them at every barrier; Python's default of 5 ms between
#: thread switches leaves most of that time waiting. 0.1 ms makes kernels with barriers 3-10x faster.
SIMULATOR_SWITCH_INTERVAL = 1e-4


def device_function(function: Callable) -> Callable:
    """An inlined CUDA device function on a GPU; in the simulator, the plain Python function.

    A simulated call of a `cuda.jit(device=True)` function swaps module globals on every call, which
    made chapter 6's stencil kernels several times slower in the simulator; plain Python does the same work.
    """
    if is_simulator():
        return function
    return cuda.jit(device=True, inline=True)(function)


@contextlib.contextmanager
def switching_often() -> Iterator[None]:
    """Inside the block, Python switches threads at least every SIMULATOR_SWITCH_INTERVAL seconds (threads wait at barriers)."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, SIMULATOR_SWITCH_INTERVAL))
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def paced(launcher: Callable) -> Callable:
    """Decorate a launcher so that, in simulator mode, Python switches threads often while it runs."""

    @functools.wraps(launcher)
    def run(*args, **kwargs):
        if not is_simulator():
            return launcher(*args, **kwargs)
        with switching_often():
            return launcher(*args, **kwargs)

    return run


# ---------------------------------------------------------------------------------------------
# Warp-level functions the simulator lacks (numba-cuda 0.30 simulates no shuffles)

#: Seconds a simulated lane waits at a shuffle for the other lanes named in its mask before giving up.
WARP_WAIT_S = 60.0
_WARPS_LOCK = threading.Lock()


class _SimulatedWarp:
    """The lanes of one simulated warp that take part in warp-level calls with one mask: a barrier and a mailbox."""

    def __init__(self, lanes: int) -> None:
        self.barrier = threading.Barrier(lanes, timeout=WARP_WAIT_S)
        self.values: list = [None] * 32


def _members(mask: int) -> tuple[_SimulatedWarp, int, int]:
    """This simulated thread's warp (for `mask`), its lane and the lanes that take part."""
    thread = threading.current_thread()
    manager = getattr(thread, "_manager", None)
    if manager is None:
        raise RuntimeError("warp-level functions can only be called inside a simulated kernel")
    block_threads = 1
    for extent in manager._block_dim:
        block_threads *= extent
    lane, warp_index = thread.thread_id % 32, thread.thread_id // 32
    existing = (1 << min(32, block_threads - 32 * warp_index)) - 1
    members = int(mask) & existing
    if not members >> lane & 1:
        raise RuntimeError(f"lane {lane} called a warp-level function with mask {int(mask):#010x}, which leaves it out")
    with _WARPS_LOCK:
        warps = manager.__dict__.setdefault("_gpucourse_warps", {})
        warp = warps.get((warp_index, members))
        if warp is None:
            warp = warps[(warp_index, members)] = _SimulatedWarp(bin(members).count("1"))
    return warp, lane, members


def _wait(warp: _SimulatedWarp, lane: int, members: int) -> None:
    try:
        warp.barrier.wait()
    except threading.BrokenBarrierError:
        raise RuntimeError(
            f"lane {lane} waited {WARP_WAIT_S:.0f} s at a warp-level call for the lanes of mask {members:#010x}: some never "
            "came (an early return, or a branch only part of the warp takes). On a GPU that is undefined behaviour; give "
            "every lane named in the mask the same path to the call."
        ) from None


def _exchange(mask: int, value, source_lane: Callable[[int], int]):
    warp, lane, members = _members(mask)
    warp.values[lane] = value
    _wait(warp, lane, members)
    source = source_lane(lane)
    result = warp.values[source] if 0 <= source < 32 and members >> source & 1 else value
    _wait(warp, lane, members)
    return result


def _shfl_sync(self, mask, value, src_lane):
    return _exchange(mask, value, lambda lane: int(src_lane) % 32)


def _shfl_up_sync(self, mask, value, delta):
    return _exchange(mask, value, lambda lane: lane - int(delta))


def _shfl_down_sync(self, mask, value, delta):
    return _exchange(mask, value, lambda lane: lane + int(delta))


def _shfl_xor_sync(self, mask, value, lane_mask):
    return _exchange(mask, value, lambda lane: lane ^ int(lane_mask))


def _syncwarp(self, mask=0xFFFFFFFF):
    warp, lane, members = _members(mask)
    _wait(warp, lane, members)


def add_warp_functions() -> None:
    """Give the simulator's `cuda` module the warp shuffles and `syncwarp` (numba-cuda's simulator has none).

    Each simulated lane posts its value, waits at a barrier for the other lanes of its mask, reads
    the source lane's value and waits again: the semantics of the `*_sync` shuffles for lanes that
    all take part. Only missing functions are added; nothing the simulator has is changed.
    """
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    for name, function in (("shfl_sync", _shfl_sync), ("shfl_up_sync", _shfl_up_sync), ("shfl_down_sync", _shfl_down_sync),
                           ("shfl_xor_sync", _shfl_xor_sync), ("syncwarp", _syncwarp)):
        if not hasattr(FakeCUDAModule, name):
            setattr(FakeCUDAModule, name, function)


_SHARED_LOCK = threading.Lock()


def _shared_array(self, shape, dtype, alignment=None):
    """`cuda.shared.array` in the simulator: one array per block and source line, allocated under a lock.

    Dynamic shared memory (shape 0) is one buffer per block, of the launch's size, that every dynamic
    array of the block views (as on a GPU). Keyed by block, so that blocks running at once
    (`interleaved_blocks`) do not share memory.
    """
    if alignment is not None:  # a refusal: the simulator's own code says why
        return _SIMULATOR_SHARED_ARRAY(self, shape, dtype, alignment)
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(dtype, types.Type):  # a Numba type such as float32
        dtype = numpy_support.as_dtype(dtype)
    dtype = np.dtype(dtype)
    block = tuple(getattr(threading.current_thread(), "blockIdx", ()))
    if shape == 0:
        with _SHARED_LOCK:
            buffer = self._allocations.get(("dynamic", block))
            if buffer is None:
                buffer = self._allocations[("dynamic", block)] = np.zeros(self._dynshared_size, np.byte)
        return np.frombuffer(buffer.data, dtype=dtype, count=self._dynshared_size // dtype.itemsize)
    caller = sys._getframe(1)
    key = (caller.f_code.co_filename, caller.f_lineno, block)  # the simulator's key, the calling line, and the block
    with _SHARED_LOCK:
        array = self._allocations.get(key)
        if array is None:
            array = np.empty(shape, dtype)
            self._allocations[key] = array
    return array


_SIMULATOR_SHARED_ARRAY: Callable | None = None


def serialize_shared_arrays() -> None:
    """Make the simulator's `cuda.shared.array` allocate each block's array once, under a lock (see the module's note)."""
    global _SIMULATOR_SHARED_ARRAY
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    if FakeCUDAShared.array is _shared_array:
        return
    probe = FakeCUDAShared(0)
    if not isinstance(getattr(probe, "_allocations", None), dict) or not hasattr(probe, "_dynshared_size"):
        return  # a simulator this code does not know: leave it
    _SIMULATOR_SHARED_ARRAY = FakeCUDAShared.array
    FakeCUDAShared.array = _shared_array


# ---------------------------------------------------------------------------------------------
# Blocks that run at the same time


class _Launch:
    """The blocks of one simulated launch, each in a Python thread of its own, and what they raised."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, run: Callable[[], None]) -> None:
        def body() -> None:
            try:
                run()
            except BaseException as exc:  # noqa: BLE001 - raised again in the launching thread
                self.errors.append(exc)

        thread = threading.Thread(target=body, daemon=True)
        self.threads.append(thread)
        thread.start()

    def finish(self) -> None:
        for thread in self.threads:
            thread.join()


_LAUNCHES: list[_Launch] = []  # the launch being made (the host thread makes one at a time)


@contextlib.contextmanager
def interleaved_blocks() -> Iterator[None]:
    """Inside the block, the simulator runs all blocks of a launch at once (each block's threads as before); a no-op on a GPU.

    Each block's `BlockManager.run` is started in a thread of its own instead of being waited for,
    and the launch waits for all of them before it returns (and raises the first error a block
    raised). A simulated thread gives way to the others after each read of a kernel argument, so that a
    read-add-write of one element by two blocks loses updates, as on a GPU. Shared arrays are per block (`serialize_shared_arrays`).
    """
    if not is_simulator():
        yield
        return
    from numba.cuda.simulator import kernel as simulated
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray

    serialize_shared_arrays()
    one_at_a_time = simulated.BlockManager
    plain_read = FakeWithinKernelCUDAArray.__getitem__

    def read_then_yield(self, index):  # another thread may run between a read and the write that follows it
        value = plain_read(self, index)
        time.sleep(0)
        return value

    original_swap = simulated.swapped_cuda_module

    class ConcurrentBlock(one_at_a_time):
        def run(self, grid_point, *args):
            if not _LAUNCHES:
                return one_at_a_time.run(self, grid_point, *args)
            _LAUNCHES[-1].start(lambda: one_at_a_time.run(self, grid_point, *args))
            return None

    @contextlib.contextmanager
    def swapped(fn, fake_cuda_module):
        if hasattr(threading.current_thread(), "blockIdx"):  # a device function called by a simulated thread
            with original_swap(fn, fake_cuda_module):
                yield
            return
        launch = _Launch()
        _LAUNCHES.append(launch)
        try:
            with original_swap(fn, fake_cuda_module):
                try:
                    yield  # the simulator starts the blocks here
                finally:
                    launch.finish()
        finally:
            _LAUNCHES.pop()
        if launch.errors:
            raise launch.errors[0]

    simulated.BlockManager = ConcurrentBlock
    simulated.swapped_cuda_module = swapped
    FakeWithinKernelCUDAArray.__getitem__ = read_then_yield
    try:
        with switching_often():
            yield
    finally:
        simulated.BlockManager = one_at_a_time
        simulated.swapped_cuda_module = original_swap
        FakeWithinKernelCUDAArray.__getitem__ = plain_read
