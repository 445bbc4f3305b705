"""Watching a student's kernels run: which thread touches which element, between which barriers, with what type.

In the simulator every CUDA thread is a Python thread, so a check can watch the kernel work.
`traced_run` runs a student's launcher on small traced arrays and returns a `Trace`:

* every element access to the traced arrays and to shared memory, with the block, the thread, how
  many `cuda.syncthreads()` the thread had passed (its *barrier interval*) and the source line;
* the launches made (kernel, grid, block);
* float64 values stored into float32 arrays, and the kernel lines that compute a float64 (a local
  variable that becomes one, or a value cast down by float32(...) or np.complex64(...)), so that a
  final cast does not hide double-precision arithmetic. The kernels are re-made with their number
  literals as NumPy float64 / int64 scalars, so that Python's arithmetic promotes as Numba's does
  (float32 * 2.0 and float32 * 2 are float64 in a compiled kernel; NumPy 2 would keep float32),
  and with Numba's rules where NumPy's differ: float32 ** 2 and pow(float32, 2) stay float32,
  max(float32, 0.0) is float64, and arithmetic between literals is a constant (Numba folds it).

Shared memory is poisoned (NaN, or the integer minimum) at the start of every block. Each static
shared array is its own, per block, keyed by the line of the kernel that declares it, and named
after its variable ("shared tile"; the simulator's own key, the caller's line, would be the trace's). From a trace,
`sectors_per_request` counts the 32-byte sectors of each warp request (coalescing),
`shared_passes_per_request` the bank passes, and `races` the shared-memory hazards: two threads
touching one element in one barrier interval, one of them writing (what compute-sanitizer's
racecheck reports on a GPU).

On a GPU nothing can be watched from Python: the launcher and every function, kernel and value it
reaches are sent to a simulator subprocess (code objects, pickled values) and traced there.
"""

from __future__ import annotations

import builtins
import contextlib
import dis
import importlib
import json
import linecache
import marshal
import math
import operator
import os
import pickle
import re
import subprocess
import sys
import threading
import types
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import mode
from .remote import evidence

# ---------------------------------------------------------------------------------------------
# What a trace holds


@dataclass(frozen=True)
class Access:
    """One element access by one simulated thread: which array, thread and element, read or write, when and where."""

    array: str
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    block_dim: tuple[int, int, int]
    element: int
    write: bool
    sequence: int  # the how-many-th access of this thread to this array (same kind)
    epoch: int = 0  # how many cuda.syncthreads() the thread had passed
    where: tuple[str, int] = ("", 0)  # (file, line) of the access in the student's code
    launch: int = 0  # the how-many-th launch of the traced run (from 0)
    atomic: bool = False  # made by a cuda.atomic function


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the kernel's name, grid and block (3 dimensions each)."""

    name: str
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]


@dataclass
class Trace:
    """Everything one traced run saw."""

    accesses: list[Access]
    launches: list[Launch] = field(default_factory=list)
    float64_stores: dict[str, int] = field(default_factory=dict)  # "array (its dtype)" -> float64 or complex128 values stored
    float64_lines: list[tuple[str, int]] = field(default_factory=list)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: (launch, block, thread) -> the (file, line) of each cuda.syncthreads() the thread reached, in order
    barriers: dict[tuple, list[tuple[str, int]]] = field(default_factory=dict)
    #: (file, line) of kernel lines that computed a float64 (or complex128) value from float32 ones, then cast or kept
    float64_origins: list[tuple[str, int]] = field(default_factory=list)

    def of(self, array: str) -> list[Access]:
        """The accesses to one array."""
        return [a for a in self.accesses if a.array == array]


class _AccessLog:
    def __init__(self) -> None:
        self.entries: list[tuple] = []
        self.lock = threading.Lock()
        self.float64_stores: dict[str, int] = defaultdict(int)
        self.float64_lines: set[tuple[str, int]] = set()
        self.launches: list[Launch] = []
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.barriers: dict[tuple, list[tuple[str, int]]] = defaultdict(list)
        self.float64_origins: set[tuple[str, int]] = set()

    def float64_made(self, where: tuple[str, int]) -> None:
        """Note a kernel line that made a float64 value from narrower ones (a local, an argument or a cast's operand)."""
        with self.lock:
            self.float64_origins.add(where)

    def barrier(self, thread) -> None:
        """Note that a simulated thread reached a cuda.syncthreads()."""
        where = _user_line(sys._getframe(2))
        with self.lock:
            self.barriers[(len(self.launches) - 1, tuple(thread.blockIdx), tuple(thread.threadIdx))].append(where)

    def add(self, array: str, index, shape, write: bool, value=None, narrow: bool = False) -> None:
        thread = threading.current_thread()
        if not hasattr(thread, "threadIdx"):  # host code (filling, copying back) is not a CUDA thread
            return
        try:
            if isinstance(index, tuple):
                element = int(np.ravel_multi_index(tuple(int(i) for i in index), shape)) if len(shape) == len(index) else -1
            else:
                element = int(index)
        except (TypeError, ValueError):  # a slice, or an index out of range (the simulator raises IndexError next)
            element = -1
        where = _user_line(sys._getframe(2))
        block_dim = tuple(thread._manager._block_dim) if hasattr(thread, "_manager") else (0, 0, 0)
        epoch = getattr(thread, "_gpucourse_epoch", 0)
        atomic = getattr(thread, "_gpucourse_atomic", False)
        with self.lock:
            launch = len(self.launches) - 1
            self.shapes[array] = tuple(shape)
            self.entries.append((array, tuple(thread.blockIdx), tuple(thread.threadIdx), block_dim, element, write, epoch, where,
                                 launch, atomic))
            if write and narrow and isinstance(value, (np.float64, np.complex128, complex)):
                self.float64_stores[f"{array} ({'complex64' if isinstance(value, complex) else 'float32'})"] += 1
                self.float64_lines.add(where)

    def accesses(self) -> list[Access]:
        counters: dict[tuple, int] = defaultdict(int)
        result = []
        for array, block, thread, block_dim, element, write, epoch, where, launch, atomic in self.entries:
            key = (array, launch, block, thread, write)
            result.append(Access(array, block, thread, block_dim, element, write, counters[key], epoch, where, launch, atomic))
            counters[key] += 1
        return result

    def trace(self) -> Trace:
        shared = [name for name in self.shapes if is_shared(name)]
        if len(shared) == 1:  # the name earlier checks read the one shared array's shape under
            self.shapes.setdefault("shared", self.shapes[shared[0]])
        return Trace(self.accesses(), list(self.launches), dict(self.float64_stores), sorted(self.float64_lines), dict(self.shapes),
                     {key: list(lines) for key, lines in self.barriers.items()}, sorted(self.float64_origins, key=lambda w: w[1]))


#: Files whose frames are machinery, not the code checked: Numba's simulator, NumPy, this module.
_MACHINERY = tuple(str(Path(module.__file__).resolve().parent) for module in (np,)) + (str(Path(__file__).resolve()),)


def _machinery(filename: str) -> bool:
    return filename.startswith(_MACHINERY) or "/numba/" in filename or "/numba_cuda/" in filename


def _user_line(frame) -> tuple[str, int]:
    """(file, line) of the nearest frame, from `frame` outwards, that is the checked code rather than Numba's simulator or NumPy."""
    first = frame
    while frame is not None and _machinery(str(Path(frame.f_code.co_filename))):
        frame = frame.f_back
    frame = frame or first
    return (frame.f_code.co_filename, frame.f_lineno)


class _Traced(np.ndarray):
    """A NumPy array that logs every element access made from a simulated CUDA thread."""

    _log: _AccessLog | None = None
    _name: str = "array"

    def __getitem__(self, index):
        if _Traced._log is not None and getattr(self, "_traced_shape", None) is not None:
            _Traced._log.add(self._name, index, self._traced_shape, write=False)
        return super().__getitem__(index)

    def __setitem__(self, index, value):
        if _Traced._log is not None and getattr(self, "_traced_shape", None) is not None:
            _Traced._log.add(self._name, index, self._traced_shape, write=True, value=value,
                             narrow=self.dtype in (np.float32, np.complex64))
        super().__setitem__(index, value)


def traced_device_array(host: np.ndarray, name: str):
    """A simulated device array over a copy of `host` whose element accesses are logged by `trace_accesses` (simulator only)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class TracedDeviceArray(FakeCUDAArray):
        """The simulator's device array, whose slices and views stay device arrays (copy_to_device on a slice, x[:n])."""

        def __getitem__(self, index):
            item = self._ary.__getitem__(index)
            return TracedDeviceArray(item, stream=self.stream) if isinstance(item, np.ndarray) else item

    traced = np.array(host, copy=True).view(_Traced)
    traced._name = name
    traced._traced_shape = host.shape
    return TracedDeviceArray(traced)


def is_shared(array: str) -> bool:
    """Whether a traced array name is a shared array ("shared", or "shared <variable>" when a kernel declares several)."""
    return array == "shared" or array.startswith("shared ")


def _shared_name(where: tuple[str, int]) -> str:
    """The variable a cuda.shared.array is assigned to at `where` (its source line), for messages."""
    match = re.match(r"\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=[^=]", source_line(*where))
    return match.group(1) if match else f"declared at line {where[1]}"


def poison_fill(array: np.ndarray) -> None:
    """Fill an array with the course's poison value (NaN for floats, the integer minimum for integers)."""
    if array.dtype.kind in "fc":
        array.fill(np.nan)
    elif array.dtype.kind in "iu":
        array.fill(np.iinfo(array.dtype).min)


@contextlib.contextmanager
def trace_accesses(shared: bool = True, poison_shared: bool = True, typed: bool = False) -> Iterator[_AccessLog]:
    """Log accesses to traced arrays (and, if `shared`, to shared arrays), barriers and launches made inside the block.

    With `typed`, thread and block indices are int32 and cuda.grid / cuda.gridsize int64, as Numba types them (so that
    float32 * threadIdx.x is float64 here too).
    """
    if not mode.is_simulator():
        raise RuntimeError("memory accesses can only be watched in the simulator")
    from numba.cuda.simulator import kernel as simulated
    from numba.cuda.simulator import kernelapi

    log = _AccessLog()
    original_array = kernelapi.FakeCUDAShared.array
    original_sync = simulated.BlockThread.syncthreads
    original_call = simulated.FakeCUDAKernel.__call__
    poisoned_for: dict[int, tuple] = {}
    poison_lock = threading.Lock()
    shared_names: dict[tuple, str] = {}

    def traced_shared(self, shape, dtype, alignment=None):
        where = _user_line(sys._getframe(1))
        if isinstance(dtype, type) and issubclass(dtype, np.generic):  # np.float32 as well as Numba's float32
            dtype = np.dtype(dtype)
        if shape == 0:
            array = original_array(self, shape, dtype, alignment)  # dynamic shared memory: one buffer for every declaration
            key = ("dynamic",)
        else:  # a static array is one per declaration in the kernel (the simulator's own key, the caller's line, would be this function)
            from numba.core import types
            from numba.np import numpy_support

            key = where
            block = tuple(getattr(threading.current_thread(), "blockIdx", ()))  # blocks that run at once have arrays of their own
            with poison_lock:
                array = self._allocations.get(("gpucourse", where, block))
                if array is None:
                    array = np.empty(shape, numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else dtype)
                    self._allocations[("gpucourse", where, block)] = array
        with poison_lock:
            if key not in shared_names:
                shared_names[key] = _shared_name(where)
            name = shared_names[key]
        thread = threading.current_thread()
        if poison_shared and hasattr(thread, "blockIdx"):
            with poison_lock:  # the first thread of each block to declare it poisons it (the simulator reuses one array)
                block = tuple(thread.blockIdx)
                address = array.__array_interface__["data"][0]  # dynamic shared memory is a new view at each call
                if poisoned_for.get(address) != block:
                    poisoned_for[address] = block
                    poison_fill(array)
        if not shared:
            return array
        view = array.view(_Traced)
        view._name = f"shared {name}"
        view._traced_shape = array.shape
        return view

    def counted_sync(self):
        self._gpucourse_epoch = getattr(self, "_gpucourse_epoch", 0) + 1
        log.barrier(self)
        return original_sync(self)

    def marked(function):
        def atomic(self, *args):  # the accesses the simulator makes for an atomic are marked as one atomic update
            thread = threading.current_thread()
            thread._gpucourse_atomic = True
            try:
                return function(self, *args)
            finally:
                thread._gpucourse_atomic = False

        return atomic

    atomics = {name: value for name, value in vars(kernelapi.FakeCUDAAtomic).items() if callable(value) and not name.startswith("__")}
    module = kernelapi.FakeCUDAModule
    untyped = {name: vars(module)[name] for name in ("__init__", "threadIdx", "blockIdx", "grid", "gridsize")}

    def int32_dims(dims):
        return kernelapi.Dim3(*(np.int32(v) for v in dims))

    def int64s(value):
        return tuple(np.int64(v) for v in value) if isinstance(value, tuple) else np.int64(value)

    def typed_init(self, grid_dim, block_dim, dynshared_size):
        untyped["__init__"](self, grid_dim, block_dim, dynshared_size)
        self.gridDim, self.blockDim = int32_dims(self.gridDim), int32_dims(self.blockDim)

    typed_members = {
        "__init__": typed_init,
        "threadIdx": property(lambda self: int32_dims(threading.current_thread().threadIdx)),
        "blockIdx": property(lambda self: int32_dims(threading.current_thread().blockIdx)),
        "grid": lambda self, n: int64s(untyped["grid"](self, n)),
        "gridsize": lambda self, n: int64s(untyped["gridsize"](self, n)),
    }

    def recorded_call(self, *args):
        if not (self._device or simulated._kernel_context):
            grid, block = simulated.normalize_kernel_dimensions(self.grid_dim, self.block_dim)
            log.launches.append(Launch(getattr(self.fn, "__name__", "kernel"), tuple(grid), tuple(block)))
            poisoned_for.clear()  # a new launch allocates its shared arrays anew
            # Python numbers passed to a kernel are float64 and int64 there, as Numba types them
            args = tuple(_Given64(a) if type(a) is float or type(a) is np.float64 else np.int64(a) if type(a) is int else a for a in args)
        return original_call(self, *args)

    from ..simulation import switching_often

    pacing = switching_often()
    pacing.__enter__()
    thread_tracing = threading.gettrace()
    if typed:
        threading.settrace(_float64_watcher(log))
    _Traced._log = log
    kernelapi.FakeCUDAShared.array = traced_shared
    simulated.BlockThread.syncthreads = counted_sync
    simulated.FakeCUDAKernel.__call__ = recorded_call
    for name, function in atomics.items():
        setattr(kernelapi.FakeCUDAAtomic, name, marked(function))
    if typed:
        for name, member in typed_members.items():
            setattr(module, name, member)
    try:
        yield log
    finally:
        threading.settrace(thread_tracing)
        pacing.__exit__(None, None, None)
        _Traced._log = None
        kernelapi.FakeCUDAShared.array = original_array
        simulated.BlockThread.syncthreads = original_sync
        simulated.FakeCUDAKernel.__call__ = original_call
        for name, function in atomics.items():
            setattr(kernelapi.FakeCUDAAtomic, name, function)
        for name, member in untyped.items():
            setattr(module, name, member)


@contextlib.contextmanager
def poisoned_shared_memory() -> Iterator[None]:
    """In the simulator, poison every shared array at the start of each block (a no-op on a GPU)."""
    if not mode.is_simulator():
        yield
        return
    with trace_accesses(shared=False, poison_shared=True):
        yield


# ---------------------------------------------------------------------------------------------
# Reading a trace


def _warp_requests(accesses: Sequence[Access], array: str, write: bool) -> dict[tuple, list[tuple[int, int]]]:
    """Group accesses into warp requests: (block, warp, sequence) -> [(lane, element), ...]."""
    requests: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for access in accesses:
        if access.array != array or access.write != write or access.element < 0:
            continue
        bx, by, _ = access.block_dim
        tx, ty, tz = access.thread
        linear = tx + bx * (ty + by * tz)
        requests[(access.block, linear // 32, access.sequence)].append((linear % 32, access.element))
    return requests


def sectors_per_request(accesses: Sequence[Access], array: str, itemsize: int, write: bool = False) -> float:
    """Mean number of 32-byte sectors a warp's request to `array` touches (4 for 32 neighbouring float32)."""
    requests = _warp_requests(accesses, array, write)
    if not requests:
        return 0.0
    return sum(len({element * itemsize // 32 for _, element in lanes}) for lanes in requests.values()) / len(requests)


def shared_passes_per_request(accesses: Sequence[Access], itemsize: int = 4, write: bool = False) -> float:
    """Mean passes per warp request to shared memory: the most different 32-bit words that share one bank."""
    totals = []
    requests = [lanes for name in sorted({a.array for a in accesses if is_shared(a.array)})
                for lanes in _warp_requests(accesses, name, write=write).values()]
    for lanes in requests:
        per_bank: dict[int, set[int]] = defaultdict(set)
        for _, element in lanes:
            word = element * itemsize // 4
            per_bank[word % 32].add(word)
        totals.append(max(len(words) for words in per_bank.values()))
    return sum(totals) / len(totals) if totals else 0.0


def first_request_example(accesses: Sequence[Access], array: str, shape: tuple[int, ...], write: bool = False) -> str:
    """Words on the first warp request to `array` whose lanes are furthest apart: which lanes touch which elements."""
    lanes = sorted(next(iter(_warp_requests(accesses, array, write=write).values()), []))
    if len(lanes) < 2:
        return ""
    (lane0, e0), (lane1, e1) = lanes[0], lanes[1]
    where0, where1 = np.unravel_index(e0, shape), np.unravel_index(e1, shape)
    verb = "write" if write else "read"
    return (f"lanes {lane0} and {lane1} of the first warp {verb} {array}[{', '.join(map(str, where0))}] and "
            f"{array}[{', '.join(map(str, where1))}], {abs(e1 - e0)} elements apart")


@dataclass(frozen=True)
class Race:
    """Two threads of one block touching one shared element between the same two barriers, at least one writing."""

    block: tuple[int, int, int]
    element: int
    first: Access  # the write
    second: Access  # the other thread's access
    hazards: int  # how many shared elements were raced on in all

    def describe(self, shape: tuple[int, ...] | None = None) -> str:
        """The race in words, naming both lines and where the barrier goes."""
        index = ", ".join(map(str, np.unravel_index(self.element, shape))) if shape else str(self.element)
        array = f" `{self.first.array[7:]}`" if self.first.array.startswith("shared ") else ""
        verb = "writes" if self.second.write else "reads"
        w_line, o_line = self.first.where[1], self.second.where[1]
        w_text = source_line(*self.first.where)
        o_text = source_line(*self.second.where)
        text = (f"thread {self.first.thread} writes shared element{array} [{index}] at line {w_line} (`{w_text}`) and thread "
                f"{self.second.thread} {verb} it at line {o_line} (`{o_text}`) with no cuda.syncthreads() between them. ")
        if o_line > w_line or not w_line:
            text += (f"A barrier is missing after line {w_line} and before line {o_line}: every thread must finish writing "
                     "the tile before any thread reads what another wrote.")
        else:
            text += (f"Line {o_line} comes before line {w_line}, so the next write (a later pass of the loop) overwrites what "
                     "another thread may still be reading: put a cuda.syncthreads() at the end of the loop body as well.")
        return text


def races(accesses: Sequence[Access]) -> Race | None:
    """The first shared-memory race in a trace (None if every conflicting pair is separated by a barrier)."""
    groups: dict[tuple, list[Access]] = defaultdict(list)
    for access in accesses:
        if is_shared(access.array) and access.element >= 0:
            groups[(access.launch, access.block, access.array, access.element, access.epoch)].append(access)
    found: list[tuple[Access, Access, tuple, int]] = []
    for (_, block, _, element, _), group in groups.items():
        writers = [a for a in group if a.write and not a.atomic]
        if not writers:
            continue
        threads = {a.thread for a in group}
        if len(threads) < 2:
            continue
        write = writers[0]
        other = next((a for a in group if a.thread != write.thread and not a.write), None) or next(a for a in group if a.thread != write.thread)
        found.append((write, other, block, element))
    if not found:
        return None
    write, other, block, element = min(found, key=lambda f: (f[2], f[0].where[1], f[1].where[1], f[3]))
    return Race(block, element, write, other, len(found))


def _index_text(array: str, element: int, shapes: dict[str, tuple[int, ...]]) -> str:
    shape = shapes.get(array)
    index = ", ".join(map(str, np.unravel_index(element, shape))) if shape and element >= 0 else str(element)
    if array.startswith("shared "):
        return f"{array[7:]}[{index}] (shared)"
    return f"{array}[{index}]"


def _line_text(where: tuple[str, int]) -> str:
    return f"line {where[1]} (`{source_line(*where)}`)"


def _block_text(block: tuple[int, ...]) -> str:
    return f"block {block[0]}" if block[1:] in ((0, 0), (0,), ()) else f"block {tuple(block)}"


def divergent_barrier(trace: Trace) -> str | None:
    """Words for a cuda.syncthreads() that some threads of a block reach and others do not (None if every block agrees).

    Each thread's barriers are listed in the order it reached them; in a block, every thread must
    reach the same barriers. The first place where two threads' lists part names the barrier.
    """
    blocks: dict[tuple, dict[tuple, list]] = defaultdict(dict)
    for (launch, block, thread), lines in trace.barriers.items():
        blocks[(launch, block)][thread] = lines
    for (launch, block), threads in sorted(blocks.items()):
        size = math.prod(trace.launches[launch].threads) if 0 <= launch < len(trace.launches) else len(threads)
        if len(threads) == size and len({tuple(lines) for lines in threads.values()}) == 1:
            continue
        longest = max(len(lines) for lines in threads.values())
        for position in range(longest):
            reached = [lines[position] for lines in threads.values() if len(lines) > position]
            if len(reached) < size or len(set(reached)) > 1:
                break
        lines = sorted(set(reached), key=lambda w: w[1])
        if len(lines) > 1:
            return (f"threads of {_block_text(block)} reach different barriers ({' and '.join(_line_text(w) for w in lines)}): "
                    "every thread of a block must reach the same cuda.syncthreads(), the same number of times. Put one barrier "
                    "outside the branches.")
        return (f"the cuda.syncthreads() at {_line_text(lines[0])} is reached by {len(reached)} of the {size} threads of "
                f"{_block_text(block)}, not by the others: it sits inside an `if` (or after a `return`). Every thread of a block "
                "must reach every barrier, or the block hangs or runs on early (undefined behaviour): move it out of the branch.")
    return None


def uninitialised_shared_read(trace: Trace) -> str | None:
    """Words for a read of a shared element that no thread of the block had written yet (None if there is none)."""
    written: set[tuple] = set()
    for access in trace.accesses:  # in the order they happened
        if not is_shared(access.array) or access.element < 0:
            continue
        key = (access.launch, access.block, access.array, access.element)
        if access.write:
            written.add(key)
        elif key not in written:
            return (f"thread {access.thread} of {_block_text(access.block)} reads {_index_text(access.array, access.element, trace.shapes)} "
                    f"at {_line_text(access.where)} before any thread of the block wrote it: shared memory starts with whatever "
                    "was there before. Every slot the kernel reads must be written first, then a cuda.syncthreads().")
    return None


def block_race(trace: Trace) -> str | None:
    """Words for one element of a traced (global) array that two blocks of one launch touch, at least one writing without an atomic."""
    groups: dict[tuple, list[Access]] = defaultdict(list)
    for access in trace.accesses:
        if not is_shared(access.array) and access.element >= 0:
            groups[(access.launch, access.array, access.element)].append(access)
    for (_, array, element), group in sorted(groups.items(), key=lambda item: item[0]):
        plain_writes = [a for a in group if a.write and not a.atomic]
        if not plain_writes or len({a.block for a in group}) < 2:
            continue
        write = plain_writes[0]
        others = [a for a in group if a.block != write.block]  # never empty: the group spans two blocks at least
        other = others[0]
        name = _index_text(array, element, trace.shapes)
        if not any(a.write for a in others):
            return (f"{_block_text(write.block)} writes {name} at {_line_text(write.where)} and {_block_text(other.block)} reads it "
                    f"at {_line_text(other.where)} in the same launch: blocks run in any order and never wait for each other, so "
                    "the read may come before the write. A value another block computes is there only for the next launch: "
                    "compute what you need in the block that reads it.")
        if all(a.atomic for a in others):
            return (f"{_block_text(write.block)} writes {name} at {_line_text(write.where)} while other blocks of the same launch "
                    f"add to it with atomics at {_line_text(other.where)}: blocks run in any order, at the same time, so the "
                    "plain write can come after another block's addition and wipe it out. Set it before the kernel "
                    "(a launch of its own), not inside the kernel that adds to it.")
        blocks = sorted({a.block for a in group if not a.atomic})
        return (f"blocks update `{name}` without an atomic: {_block_text(blocks[0])} and {_block_text(blocks[1])} both read and "
                f"write it at {_line_text(write.where)}. Blocks run at the same time, so two of them can read the same old value "
                f"and one addition is lost. Use cuda.atomic.add({array}, {element}, value) for the update.")
    return _thread_race(groups, trace)


def _thread_race(groups: dict[tuple, list[Access]], trace: Trace) -> str | None:
    """Words for a global element one thread writes and another thread of its block reads with no barrier between (None if none)."""
    for (_, array, element), group in sorted(groups.items(), key=lambda item: item[0]):
        for write in (a for a in group if a.write and not a.atomic):
            other = next((a for a in group if not a.write and not a.atomic and a.block == write.block and a.thread != write.thread
                          and a.epoch == write.epoch), None)
            if other is not None:
                return (f"thread {other.thread} reads {_index_text(array, element, trace.shapes)} at {_line_text(other.where)}, which "
                        f"thread {write.thread} of the same block writes at {_line_text(write.where)}, with no cuda.syncthreads() "
                        "between them: the read may come before the write.")
    return None


def atomics_per_launch(trace: Trace, array: str) -> list[tuple[int, int]]:
    """For each launch that updates `array` atomically: (atomic updates made, blocks launched)."""
    counts: dict[int, int] = defaultdict(int)
    for access in trace.accesses:
        if access.array == array and access.atomic and access.write:
            counts[access.launch] += 1
    return [(count, math.prod(trace.launches[launch].blocks)) for launch, count in sorted(counts.items())]


def divergent_warp_levels(trace: Trace) -> tuple[int, int]:
    """(warp-levels in which only some lanes of a warp wrote shared memory, levels) over the barrier intervals after the first.

    A level is a barrier interval of a block; a warp diverges there if some, not all, of its lanes
    store to shared memory (the `if` of a tree level taken by part of the warp). The halving tree with
    contiguous active threads diverges only in its last five levels, in one warp each.
    """
    active: dict[tuple, set[int]] = defaultdict(set)
    sizes: dict[tuple, int] = {}
    for access in trace.accesses:
        if not is_shared(access.array) or not access.write or access.epoch == 0:
            continue
        bx, by, bz = access.block_dim
        linear = access.thread[0] + bx * (access.thread[1] + by * access.thread[2])
        active[(access.launch, access.block, access.epoch)].add(linear)
        sizes[(access.launch, access.block)] = bx * by * bz
    divergent = 0
    for (launch, block, _), lanes in active.items():
        size = sizes[(launch, block)]
        for warp in {lane // 32 for lane in lanes}:
            width = min(32, size - 32 * warp)
            if len({lane for lane in lanes if lane // 32 == warp}) < width:
                divergent += 1
    return divergent, len(active)


def source_line(filename: str, line: int) -> str:
    """The text of one source line (notebook cells included, where IPython keeps them), stripped."""
    return linecache.getline(filename, line).strip() if filename and line else "?"


# ---------------------------------------------------------------------------------------------
# Re-making a student's code: in this process (simulator) or in another one (GPU)


class ReplayError(RuntimeError):
    """The code uses something that cannot be sent to another process (an open file, a lock...)."""


_LIBRARIES = {"gpucourse", "numpy", "numba", "math", "cupy", "builtins", "functools", "itertools", "operator", "cmath"}


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names(constant)
    return names


class _Describer:
    """Describe a launcher and everything it reaches, for `_rebuild` (portable: with code objects and pickles)."""

    def __init__(self, portable: bool) -> None:
        self.portable = portable
        self.functions: dict[str, dict] = {}
        self.globals: dict[str, tuple] = {}

    def value(self, value, what: str) -> tuple:
        if isinstance(value, types.ModuleType):
            return ("module", value.__name__)
        python = getattr(value, "py_func", None)
        function = python if python is not None else value
        if isinstance(function, types.FunctionType):
            module = (getattr(function, "__module__", None) or "").split(".")[0]
            if module in _LIBRARIES and "<locals>" not in function.__qualname__:
                return ("import", function.__module__, function.__qualname__)
            return ("function", self.function(value))
        kind = type(value)
        if kind.__module__.split(".")[0] == "gpucourse" and hasattr(value, "__qualname__") and "<locals>" not in value.__qualname__:
            return ("import", value.__module__, value.__qualname__)  # a planned launcher of the package, and the like
        if not self.portable:
            return ("object", value)
        try:
            return ("value", pickle.dumps(value))
        except Exception as exc:  # anything that cannot travel makes the replay impossible
            raise ReplayError(f"{what} ({type(value).__name__}) cannot be sent to another process: {exc}") from exc

    def function(self, value) -> str:
        python = getattr(value, "py_func", None) or value
        key = str(id(python))
        if key in self.functions:
            return key
        if python is not value:
            device = getattr(value, "_device", None)
            if device is None:
                device = bool(getattr(value, "targetoptions", {}).get("device", False))
            kind = "device" if device else "kernel"
        else:
            kind = "python"
        record: dict = {"name": python.__name__, "kind": kind, "code": marshal.dumps(python.__code__) if self.portable else python.__code__}
        self.functions[key] = record
        record["defaults"] = [self.value(v, f"a default argument of {python.__name__}") for v in (python.__defaults__ or ())]
        record["kwdefaults"] = {name: self.value(v, f"the default of {name!r} in {python.__name__}")
                                for name, v in (python.__kwdefaults__ or {}).items()}
        record["closure"] = [self.value(cell.cell_contents, f"the variable {name!r} {python.__name__} uses from an enclosing function")
                             for name, cell in zip(python.__code__.co_freevars, python.__closure__ or ())]
        for name in sorted(_names(python.__code__)):
            if name in self.globals or name not in python.__globals__:
                continue
            self.globals[name] = ("pending",)  # guards against recursion
            self.globals[name] = self.value(python.__globals__[name], f"the global {name!r}")
        return key


class _Given64(np.float64):
    """A float64 the kernel was given (a Python float argument): converting it is no float64 arithmetic."""


class _Constant64(np.float64):
    """A float literal of a kernel, as Numba types it (float64); arithmetic between constants stays a constant (Numba folds it).

    NumPy scalars defer to it (no __array_ufunc__), so that `2 * math.pi` is a constant too; with anything else the
    result is NumPy's plain float64, as in a compiled kernel.
    """

    __array_ufunc__ = None
    __hash__ = np.float64.__hash__


class _ConstantInt(np.int64):
    """An int literal of a kernel (int64, as Numba types it); only _Constant64 tells it apart from a computed int64."""


class _ConstantComplex(np.complex128):
    """A complex literal of a kernel (complex128): converting it is no complex128 arithmetic."""


_QUIET = (_Given64, _Constant64, _ConstantComplex)


def _constant_operation(name: str, reflected: bool):
    def operation(self, other):
        plain = np.float64(self)
        if isinstance(other, np.ndarray):
            return getattr(np.asarray(other), f"__{name}__")(plain) if reflected else getattr(plain, f"__{name}__")(other)
        result = getattr(other, f"__{name}__")(plain) if reflected else getattr(plain, f"__{name}__")(other)
        if result is NotImplemented:  # a Python int (a range() index) against a float: the float's side does it
            result = getattr(plain, f"__r{name}__")(other) if reflected else getattr(other, f"__r{name}__")(plain)
        if result is NotImplemented:
            return NotImplemented
        constant = isinstance(other, (_Constant64, _ConstantInt))
        return _Constant64(result) if constant and isinstance(result, (np.floating, float)) else result

    return operation


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(_Constant64, f"__{_name}__", _constant_operation(_name, False))
    setattr(_Constant64, f"__r{_name}__", _constant_operation(_name, True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(_Constant64, f"__{_name}__", (lambda op: lambda self, other: getattr(np.float64(self), op)(other))(f"__{_name}__"))
_Constant64.__neg__ = lambda self: _Constant64(-np.float64(self))
_Constant64.__pos__ = lambda self: self
_Constant64.__abs__ = lambda self: _Constant64(abs(np.float64(self)))


class _IntExponent:
    """An int literal used as a power's exponent: float32 ** int is float32 in a compiled kernel (NumPy would give float64)."""

    __array_ufunc__ = None

    def __init__(self, value: int) -> None:
        self.value = value

    def __rpow__(self, base):
        if isinstance(base, (np.float32, np.float64, np.complex128)) or (isinstance(base, np.ndarray) and base.dtype.kind == "f"):
            return base ** base.dtype.type(self.value)
        if isinstance(base, np.complex64):
            return np.complex128(base) ** self.value
        if isinstance(base, (np.integer, int)):
            return np.int64(base) ** np.int64(self.value) if self.value >= 0 else np.float64(base) ** self.value
        return base ** self.value


def _typed_constants(code: types.CodeType) -> types.CodeType:
    """The same code with float, int and complex literals as Numba types them (float64, int64, complex128; see _Constant64).

    An int literal that is a power's exponent (`sigma ** 2`) becomes an _IntExponent, which keeps float32 ** 2 in float32.
    """
    constants = []
    for constant in code.co_consts:
        if type(constant) is float:
            constants.append(_Constant64(constant))
        elif type(constant) is complex:
            constants.append(_ConstantComplex(constant))
        elif type(constant) is int:
            constants.append(_ConstantInt(constant))
        elif isinstance(constant, types.CodeType):
            constants.append(_typed_constants(constant))
        else:
            constants.append(constant)
    raw = bytearray(code.co_code)
    instructions = list(dis.get_instructions(code))
    power = {8, 21}  # BINARY_OP's arguments for ** and **=
    for load, following in zip(instructions, instructions[1:]):
        if (load.opname == "LOAD_CONST" and following.opname == "BINARY_OP" and following.arg in power
                and type(load.argval) is int and len(constants) < 256 and raw[load.offset + 1] == load.arg):
            raw[load.offset + 1] = len(constants)
            constants.append(_IntExponent(load.argval))
    return code.replace(co_consts=tuple(constants), co_code=bytes(raw))


_KERNEL_CODES: set[types.CodeType] = set()  # code objects of rebuilt kernels and device functions, watched for float64


def _wide(value) -> bool:
    """Whether a value is float64 / complex128 made by the kernel's arithmetic (not a literal, not a given argument)."""
    return isinstance(value, (np.float64, np.complex128)) and not isinstance(value, _QUIET)


def _float64_watcher(log: _AccessLog):
    """A trace function for simulated threads: the kernel lines after which a local variable first holds a computed float64."""

    def local(frame, event, arg):
        if event == "line" or event == "return":
            seen = local.seen.setdefault(id(frame), set())
            for name, value in frame.f_locals.items():
                if name not in seen and _wide(value):
                    seen.add(name)
                    log.float64_made((frame.f_code.co_filename, local.previous.get(id(frame), frame.f_lineno)))
            if event == "return" and _wide(arg):
                log.float64_made((frame.f_code.co_filename, frame.f_lineno))
            local.previous[id(frame)] = frame.f_lineno
        return local

    local.seen = {}
    local.previous = {}

    started = [0]

    def thread_start(frame, event, arg):
        """The first event of a new thread: watch the first 64 threads, then every eighth, at a fraction of the cost of all."""
        started[0] += 1  # not atomic, and need not be: it only thins the watching
        if started[0] > 64 and started[0] % 8:
            sys.settrace(None)
            return None
        sys.settrace(call)
        return call(frame, event, arg)

    def call(frame, event, arg):
        if event != "call" or frame.f_code not in _KERNEL_CODES:
            return None
        arguments = frame.f_code.co_varnames[:frame.f_code.co_argcount]
        wide = {name for name in arguments if _wide(frame.f_locals.get(name))}
        if wide and frame.f_back is not None:  # a float64 computed in the call's arguments
            log.float64_made(_user_line(frame.f_back))
        local.seen[id(frame)] = set(wide)  # a float64 given is no arithmetic; an argument that becomes one later is
        local.previous.pop(id(frame), None)
        return local

    return thread_start


def _checked_cast(kind: type):
    """np.float32 or np.complex64 (or Numba's float32, complex64) as a kernel calls it: a computed float64 cast down is noted."""

    class Checked(kind):
        def __new__(cls, *args):
            if args and _Traced._log is not None and hasattr(threading.current_thread(), "threadIdx") and any(_wide(a) for a in args):
                _Traced._log.float64_made(_user_line(sys._getframe(1)))
            return kind(*args)

    Checked.__name__ = Checked.__qualname__ = kind.__name__
    return Checked


_CHECKED = {np.float32: _checked_cast(np.float32), np.complex64: _checked_cast(np.complex64)}


class _TypedNumpy:
    """`numpy` as a kernel sees it in a traced run: np.float32(x) and np.complex64(x) note a computed float64 they narrow."""

    def __getattr__(self, name: str):
        value = getattr(np, name)
        if isinstance(value, float):  # np.pi: a constant, as math.pi
            return _Constant64(value)
        if isinstance(value, np.ufunc):  # np.sqrt(2.0): a literal goes in as the float64 it is, and a constant comes out
            def typed(*args, **options):
                result = value(*(np.float64(a) if isinstance(a, _Constant64) else a for a in args), **options)
                constant = all(isinstance(a, (_Constant64, _ConstantInt)) for a in args)
                return _Constant64(result) if constant and isinstance(result, np.float64) else result

            return typed
        return _CHECKED.get(value, value)


def _numba_extreme(choose: Callable):
    """max() or min() as Numba types it: of numbers, the result has the type all of them promote to (float32 and 0.0: float64)."""
    def extreme(*args, **options):
        result = choose(*args, **options)
        if len(args) < 2 or options or not all(isinstance(a, (np.generic, int, float)) for a in args):
            return result
        kind = np.result_type(*(np.asarray(a).dtype if isinstance(a, np.generic) else type(a) for a in args)).type
        if isinstance(result, kind) or kind is not np.float64:
            return kind(result) if not isinstance(result, kind) else result
        return _Constant64(result) if all(isinstance(a, (_Constant64, _ConstantInt)) for a in args) else np.float64(result)

    return extreme


class _numba_range:  # noqa: N801 - it stands for the builtin range
    """range() as Numba types it: its values are int64 (float32 * a loop index is float64), not Python ints."""

    def __init__(self, *bounds) -> None:
        self.values = builtins.range(*(operator.index(b) for b in bounds))

    def __iter__(self) -> Iterator[np.int64]:
        return map(np.int64, self.values)

    def __reversed__(self) -> Iterator[np.int64]:
        return map(np.int64, reversed(self.values))

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index):
        item = self.values[index]
        return item if isinstance(item, builtins.range) else np.int64(item)


def _numba_pow(base, exponent, modulo=None):
    """pow() as Numba types it: a float32 to an integer power stays float32."""
    if modulo is None and isinstance(exponent, (int, np.integer)) and isinstance(base, np.floating):
        return base ** base.dtype.type(exponent)
    return builtins.pow(base, exponent) if modulo is None else builtins.pow(base, exponent, modulo)


def _numba_complex(real=0, imag=None):
    """complex() as Numba types it: complex64 from float32 values, complex128 otherwise."""
    imag = real.dtype.type(0) if imag is None and isinstance(real, np.float32) else (0 if imag is None else imag)
    if isinstance(real, np.float32) and isinstance(imag, np.float32):
        return np.complex64(complex(real, imag))
    return np.complex128(complex(real, imag))


def _numba_typed(value):
    """A Python number as Numba freezes a global or a closure variable in a kernel: a float64, int64 or complex128 constant."""
    kinds = {float: _Constant64, int: _ConstantInt, complex: _ConstantComplex}
    return kinds[type(value)](value) if type(value) in kinds else value


class _TypedMath:
    """`math` as a compiled kernel types it: sin(float32) is float32, sin(float64) or sin(int) float64, math.pi float64."""

    def __getattr__(self, name: str):
        import math

        value = getattr(math, name)
        if isinstance(value, float):
            return _Constant64(value)
        if not callable(value):
            return value

        def typed(*args):
            result = value(*args)
            if not isinstance(result, float):
                return result
            if all(isinstance(a, np.float32) for a in args):
                return np.float32(result)
            return _Constant64(result) if all(isinstance(a, (_Constant64, _ConstantInt)) for a in args) else np.float64(result)

        return typed


def _rebuild(payload: dict, typed_constants: bool, jit_options: dict | None = None):
    """Make the described launcher again, in a fresh namespace, its kernels compiled anew; return it."""
    from numba import cuda

    namespace: dict = {"__builtins__": builtins}
    if typed_constants:
        namespace.update(complex=_numba_complex, float=np.float64, max=_numba_extreme(builtins.max), min=_numba_extreme(builtins.min),
                         pow=_numba_pow, range=_numba_range)
    made: dict[str, object] = {}
    options = dict(jit_options or {})

    def materialize(description: tuple):
        kind = description[0]
        if kind == "module":
            if typed_constants and description[1] == "math":
                return _TypedMath()
            if typed_constants and description[1] == "numpy":
                return _TypedNumpy()
            return importlib.import_module(description[1])
        if kind == "import":
            target = importlib.import_module(description[1])
            for part in description[2].split("."):
                target = getattr(target, part)
            return target
        if kind in ("value", "object"):
            value = pickle.loads(description[1]) if kind == "value" else description[1]
            if typed_constants:
                from numba import complex64, float32
                from numba.core import types as numba_types

                value = {float32: np.float32, complex64: np.complex64}.get(value, value) if isinstance(value, numba_types.Type) else value
                return _CHECKED.get(value, _numba_typed(value)) if isinstance(value, (type, float, int, complex)) else value
            return value
        if kind == "function":
            return build(description[1])
        raise ReplayError(f"cannot rebuild {description!r}")

    def build(key: str):
        if key in made:
            return made[key]
        record = payload["functions"][key]
        code = record["code"]
        code = marshal.loads(code) if isinstance(code, bytes) else code
        if typed_constants and record["kind"] != "python":
            code = _typed_constants(code)
            _KERNEL_CODES.add(code)
        cells = tuple(types.CellType() for _ in record["closure"])
        function = types.FunctionType(code, namespace, record["name"], None, cells or None)
        if record["kind"] == "kernel":
            result = cuda.jit(**options)(function)
        elif record["kind"] == "device":
            result = cuda.jit(device=True, **options)(function)
        else:
            result = function
        made[key] = result
        function.__defaults__ = tuple(materialize(d) for d in record["defaults"]) or None
        function.__kwdefaults__ = {name: materialize(d) for name, d in record.get("kwdefaults", {}).items()} or None
        for cell, description in zip(cells, record["closure"]):
            cell.cell_contents = materialize(description)
        return result

    for name, description in payload["globals"].items():
        if description[0] != "pending":
            namespace[name] = materialize(description)
    return materialize(payload["entry"])


def describe_launcher(entry: Callable, portable: bool) -> dict:
    """A launcher and everything it reaches, described for `_rebuild`."""
    describer = _Describer(portable)
    entry_description = describer.value(entry, "the function checked")
    return {"functions": describer.functions, "globals": describer.globals, "entry": entry_description}


def _prepared(arguments: Sequence[tuple[str, str, object]]) -> list:
    return [traced_device_array(value, name) if kind == "traced" else value for kind, name, value in arguments]


def _trace_here(payload: dict, arguments, shared: bool) -> Trace:
    """Rebuild and run the launcher in this (simulator) process, traced."""
    launcher = _rebuild(payload, typed_constants=True)
    prepared = _prepared(arguments)
    with trace_accesses(shared=shared, typed=True) as log:
        launcher(*prepared)
    return log.trace()


def _plain(value):
    """NumPy scalars (a traced index or element is often one) as the Python numbers JSON knows."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"a trace holds a {type(value).__name__}, which JSON cannot carry")


def _trace_to_json(trace: Trace) -> str:
    return json.dumps({
        "accesses": [[a.array, a.block, a.thread, a.block_dim, a.element, a.write, a.sequence, a.epoch, a.where, a.launch, a.atomic]
                     for a in trace.accesses],
        "barriers": [[list(key[1]), list(key[2]), key[0], lines] for key, lines in trace.barriers.items()],
        "launches": [[x.name, x.blocks, x.threads] for x in trace.launches],
        "float64_stores": trace.float64_stores,
        "float64_lines": trace.float64_lines,
        "shapes": trace.shapes,
        "float64_origins": trace.float64_origins,
    }, default=_plain)


def _trace_from_json(text: str) -> Trace:
    data = json.loads(text)
    accesses = [Access(r[0], tuple(r[1]), tuple(r[2]), tuple(r[3]), r[4], r[5], r[6], r[7], tuple(r[8]), r[9], r[10])
                for r in data["accesses"]]
    barriers = {(launch, tuple(block), tuple(thread)): [tuple(w) for w in lines] for block, thread, launch, lines in data["barriers"]}
    launches = [Launch(r[0], tuple(r[1]), tuple(r[2])) for r in data["launches"]]
    shapes = {name: tuple(shape) for name, shape in data["shapes"].items()}
    return Trace(accesses, launches, data["float64_stores"], [tuple(w) for w in data["float64_lines"]], shapes, barriers,
                 [tuple(w) for w in data["float64_origins"]])


_REPLAY_SCRIPT = r"""
import pickle, sys
import gpucourse
from gpucourse.checks import trace
job = pickle.loads(sys.stdin.buffer.read())
result = trace._trace_here(job["payload"], job["arguments"], job["shared"])
sys.stdout.write("TRACE" + trace._trace_to_json(result))
"""


def in_simulator_subprocess(script: str, job: dict, marker: str, failure: str, timeout: float = 600) -> str:
    """Run `script` in a Python subprocess in simulator mode, `job` pickled on its stdin, and return what it prints after
    `marker`; raise ReplayError (`failure`, then the end of its stderr) if it fails or prints no marker. `timeout` in s."""
    environment = {**os.environ, "GPUCOURSE_MODE": "simulator", "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run([sys.executable, "-c", script], input=pickle.dumps(job), capture_output=True, env=environment, timeout=timeout)
    output = done.stdout.decode()
    if done.returncode != 0 or marker not in output:
        raise ReplayError(f"{failure}: {done.stderr.decode()[-1500:]}")
    return output.split(marker, 1)[1]


def replayed_trace(entry: Callable, arguments: Sequence[tuple[str, str, object]], shared: bool = True) -> Trace:
    """Run `entry(*arguments)` in a simulator subprocess and return what was traced there."""
    job = {"payload": describe_launcher(entry, portable=True), "arguments": list(arguments), "shared": shared}
    return _trace_from_json(in_simulator_subprocess(_REPLAY_SCRIPT, job, "TRACE", "the replay in the simulator failed"))


@evidence  # under autograde: recorded where the answer runs, replayed by the grader (remote.py)
def traced_run(entry: Callable, arguments: Sequence[tuple[str, str, object]], shared: bool = True) -> Trace:
    """What `entry(*arguments)` does, traced: in this process in the simulator, replayed in a simulator process on a GPU.

    `arguments`: ("traced", name, host array) for arrays to watch, ("value", name, value) for the rest.
    """
    if mode.on_gpu():
        return replayed_trace(entry, arguments, shared)
    return _trace_here(describe_launcher(entry, portable=False), arguments, shared)


def float64_message(trace: Trace) -> str | None:
    """Words for float64 arithmetic seen in a trace of a float32 kernel (None if there is none).

    The lines that computed a float64 come first (even where a cast to float32 hides it from the stores); the
    lines that stored one are named only when no computing line was seen.
    """
    complex_only = bool(trace.float64_stores) and all(key.endswith("(complex64)") for key in trace.float64_stores)
    if trace.float64_origins:
        text = source_line(*trace.float64_origins[0])
        evidence = f"float64 arithmetic at line {trace.float64_origins[0][1]} (`{text}`)"
        complex_words = "1j" in text
    elif trace.float64_stores:
        lines = ", ".join(f"line {line} (`{source_line(file, line)}`)" for file, line in trace.float64_lines[:2])
        kinds = ("complex128", "complex64") if complex_only else ("float64", "float32")
        evidence = f"{kinds[0]} values were stored into a {kinds[1]} array at {lines}"
        complex_words = complex_only
    else:
        return None
    if complex_words:
        return float64_advice(evidence) + " A Python complex such as 1j is complex128: build np.complex64(complex(re, im)) from float32 parts."
    return float64_advice(evidence)


def float64_advice(evidence: str) -> str:
    """The advice that goes with float64 arithmetic found in a float32 kernel."""
    return (f"{evidence}: the kernel computes in double precision, 2x to 64x slower than float32 on most GPUs. In a kernel "
            "2.0 is a float64 and 2 an int64, and float32 * either is float64; a cast afterwards does not undo it. Write "
            "float32(2.0) (from numba import float32) and pass numpy.float32 values.")


@evidence  # under autograde: recorded where the answer runs, replayed by the grader (remote.py)
def float64_origin(function: Callable, arguments: Sequence[object]) -> tuple[str, int] | None:
    """Where a scalar function (the element function of a ufunc) first makes a float64 from float32 arguments, as Numba types it.

    The function is made again with its number literals, and the Python numbers it reads from its
    globals, as NumPy float64 / int64 scalars (Numba's types), and run once on `arguments` with
    Python's line tracing: the first line after which a local variable, or the returned value, is a
    computed float64 is the line that widened the arithmetic; so is a line that casts a computed float64
    back to float32 (float32(...) or numpy.float32(...) hides the slow arithmetic, it does not undo it).
    A literal alone is no float64 arithmetic (Numba folds float32(1.0)). Runs in either mode (plain Python).
    Returns (file, line), or None if every value stayed float32.
    """
    python = getattr(function, "py_func", None) or function
    code = _literals_apart(_typed_constants(python.__code__))
    found: list[int] = []

    def computed64(value) -> bool:  # a literal is a subclass of np.float64: only computed values are exactly float64
        return type(value) in (np.float64, np.complex128)

    def narrowing(cast):
        def narrowed(value, *rest):
            frame = sys._getframe(1)
            if frame.f_code is code and computed64(value) and not found:
                found.append(frame.f_lineno)
            return cast(value, *rest)

        return narrowed

    from numba import types as numba_types

    casts = {id(kind): narrowing(kind) for kind in (np.float32, np.complex64, numba_types.float32, numba_types.complex64)}

    def typed_global(value):
        if value is math:
            return _TypedMath()
        if value is np:
            return types.SimpleNamespace(**{**vars(np), "float32": casts[id(np.float32)], "complex64": casts[id(np.complex64)]})
        return casts.get(id(value), _numba_typed(value))

    names = {name: typed_global(value) for name, value in python.__globals__.items()}
    cells = tuple(types.CellType(typed_global(c.cell_contents)) for c in python.__closure__ or ())
    typed = types.FunctionType(code, names, python.__name__, python.__defaults__, cells or None)
    wide = (np.float64, np.complex128)

    def watch(frame, event, arg):
        if frame.f_code is not code or found:
            return watch if frame.f_code is code else None
        if event == "line" and watch.previous and any(computed64(v) for v in frame.f_locals.values()):
            found.append(watch.previous)
        elif event == "return" and isinstance(arg, wide):
            found.append(frame.f_lineno)
        watch.previous = frame.f_lineno
        return watch

    watch.previous = 0
    previous = sys.gettrace()
    sys.settrace(watch)
    try:
        typed(*arguments)
    finally:
        sys.settrace(previous)
    return (python.__code__.co_filename, found[0]) if found else None


class _Literal64(np.float64):
    """A float literal of an element function: float64 as Numba types it, but alone (float32(1.0)) no float64 arithmetic."""


def _literals_apart(code: types.CodeType) -> types.CodeType:
    """The same code with its float64 literals (exactly np.float64) as _Literal64, so that a cast of one is not taken for arithmetic."""
    constants = tuple(_Literal64(c) if type(c) is np.float64 else _literals_apart(c) if isinstance(c, types.CodeType) else c
                      for c in code.co_consts)
    return code.replace(co_consts=constants)


# ---------------------------------------------------------------------------------------------
# Judging a trace: the checks' verdicts in words


def uncoalesced(trace: Trace, array: str, itemsize: int, write: bool = False) -> tuple[float, float] | None:
    """(sectors, ideal) per warp request to `array` when they are well above the coalesced minimum, else None.

    The ideal of a request is the sectors its lanes would touch if they read neighbouring elements
    from the same first element; a broadcast (every lane one element) is below it.
    """
    requests = _warp_requests(trace.accesses, array, write)
    if not requests:
        return None
    actual = ideal = 0.0
    for lanes in requests.values():
        elements = [e for _, e in lanes]
        actual += len({e * itemsize // 32 for e in elements})
        start = min(elements)
        ideal += len({(start + k) * itemsize // 32 for k in range(len(elements))})
    actual, ideal = actual / len(requests), ideal / len(requests)
    return (actual, ideal) if actual > 1.5 * ideal + 0.5 else None


def rewritten(trace: Trace, array: str) -> tuple[int, int]:
    """(elements of `array` written more than once, the most writes of one element)."""
    counts: dict[int, int] = defaultdict(int)
    for access in trace.accesses:
        if access.array == array and access.write and access.element >= 0:
            counts[access.element] += 1
    repeated = [c for c in counts.values() if c > 1]
    return len(repeated), max(repeated, default=1)


def loads_before_first_store(trace: Trace, loaded: str, stored: str, per_thread: int) -> int | None:
    """Fewest loads from `loaded` a thread makes before its first store to `stored`, among threads making `per_thread` loads."""
    events: dict[tuple, list[bool]] = defaultdict(list)
    for access in trace.accesses:
        if access.array == loaded and not access.write:
            events[(access.block, access.thread)].append(False)
        elif access.array == stored and access.write:
            events[(access.block, access.thread)].append(True)
    counts = []
    for sequence in events.values():
        if sequence.count(False) < per_thread:
            continue  # a thread at the end of the array: it may copy fewer
        counts.append(sequence.index(True) if True in sequence else len(sequence))
    return min(counts) if counts else None


def race_problem(trace: Trace) -> str | None:
    """Words for the first shared-memory race of a trace (None if there is none)."""
    race = races(trace.accesses)
    return None if race is None else "a race on shared memory: " + race.describe(trace.shapes.get(race.first.array))

