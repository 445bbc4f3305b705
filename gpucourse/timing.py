"""Timing kernels honestly: device events, warm-up, repeats, medians, and launches queued behind a gate.

On a GPU a Numba launch costs the host tens of microseconds, longer than many kernels run. Events
recorded around launches issued one by one would then time the host, not the kernel. `benchmark`
therefore holds the stream with a tiny *gate* kernel that spins until the host has queued every
timed call, then lets them run back to back: the events see only GPU time.

That is half the truth. The other half is what a program calling `fn` in a loop gets, host costs
included: `benchmark` also times plain back-to-back calls (events, no gate) and says in words when
the two differ by more than 20 %. If `fn` waits for the GPU, the gate cannot hold its launches:
`benchmark` then finds the call that waits, names it, and times each call on its own. In simulator
mode the same function times with the wall clock, and says so.

Processes that share one GPU (a test run spread over workers, say) can take turns: with
`GPUCOURSE_TIMING_LOCK` naming a file, every timing function here holds that file locked while it
times, so that no two of them time at once.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import mode
from .arrays import require_cupy
from .errors import TimingError
from .launch import stream_handle

GATE_SOURCE = r"""
extern "C" __global__ void gpucourse_gate(const volatile int* flag, int* status, unsigned long long timeout_ns)
{
    // Spin until the host sets *flag, so that launches queued behind this kernel run back to back.
    // Give up after timeout_ns, so that a host that never sets the flag cannot hang the GPU.
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (*flag == 0) {
#if __CUDA_ARCH__ >= 700
        __nanosleep(1000);
#endif
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) { *status = 1; return; }
    }
    *status = 0;
}
"""


def effective_bandwidth_gbs(bytes_moved: float, milliseconds: float) -> float:
    """Effective bandwidth in GB/s (1e9 bytes per second) for `bytes_moved` bytes in `milliseconds` ms."""
    if milliseconds <= 0:
        raise ValueError(f"time must be positive; got {milliseconds} ms")
    return bytes_moved / (milliseconds * 1e-3) / 1e9


#: Back-to-back calls slower than the GPU time by more than this factor are reported in words.
BACK_TO_BACK_TOLERANCE = 1.2


@dataclass(frozen=True)
class Timing:
    """The result of `benchmark`: per-call times in ms and how they were taken."""

    samples_ms: tuple[float, ...]
    calls_per_sample: int
    clock: str
    host_ms_per_call: float | None = None
    gated: bool = False
    back_to_back_ms: float | None = None
    waits_at: str | None = None

    @property
    def median_ms(self) -> float:
        """Median time of one call, in ms."""
        return statistics.median(self.samples_ms)

    @property
    def min_ms(self) -> float:
        """Fastest sample, per call, in ms."""
        return min(self.samples_ms)

    @property
    def max_ms(self) -> float:
        """Slowest sample, per call, in ms."""
        return max(self.samples_ms)

    @property
    def simulated(self) -> bool:
        """True when the times were taken in the simulator (they say nothing about a GPU)."""
        return self.clock.startswith("simulator")

    @property
    def launch_bound(self) -> bool:
        """True when the host needs longer to issue a call than the GPU needs to run it."""
        return (not self.simulated) and self.host_ms_per_call is not None and self.host_ms_per_call > self.median_ms

    @property
    def back_to_back_slowdown(self) -> float | None:
        """Time per call of plain back-to-back calls over the GPU time per call (1.0: the host keeps up)."""
        if self.back_to_back_ms is None or self.simulated:
            return None
        return self.back_to_back_ms / self.median_ms

    @property
    def host_limited(self) -> bool:
        """True when calls issued back to back run more than 20 % slower than the GPU runs them."""
        slowdown = self.back_to_back_slowdown
        return slowdown is not None and slowdown > BACK_TO_BACK_TOLERANCE

    def bandwidth_gbs(self, bytes_moved: float) -> float:
        """Effective bandwidth in GB/s for a call that moves `bytes_moved` bytes, at the median GPU time."""
        return effective_bandwidth_gbs(bytes_moved, self.median_ms)

    def back_to_back_gbs(self, bytes_moved: float) -> float | None:
        """Effective bandwidth in GB/s a loop of plain calls reaches, host costs included (None if not measured)."""
        if self.back_to_back_ms is None:
            return None
        return effective_bandwidth_gbs(bytes_moved, self.back_to_back_ms)

    def verdict(self) -> str:
        """One sentence on how a loop of calls compares with the GPU time (empty when they agree)."""
        if self.waits_at:
            return f"each call waits for the GPU ({self.waits_at}), so calls cannot overlap: a loop of them pays every launch and wait in full"
        if not self.host_limited:
            return ""
        # the host's cost beside it only where the two agree: a host slower to queue a call than calls follow each other
        # back to back would be no cost of these calls (a disturbed sample)
        consistent = self.host_ms_per_call and self.host_ms_per_call <= BACK_TO_BACK_TOLERANCE * self.back_to_back_ms
        host = (f" (the host needs {1e3 * self.host_ms_per_call:.0f} us to queue one: the median of {len(self.samples_ms)} samples of "
                f"{self.calls_per_sample} calls)" if consistent else "")
        return (
            f"called back to back, each call takes {1e3 * self.back_to_back_ms:.0f} us, {self.back_to_back_slowdown:.1f}x the "
            f"{1e3 * self.median_ms:.0f} us the GPU needs{host}: the host, not the GPU, sets the pace. "
            "A plan (made once, then only launched) or a CUDA graph removes that cost"
        )

    def __str__(self) -> str:
        text = (
            f"median {self.median_ms:.4g} ms (min {self.min_ms:.4g}, max {self.max_ms:.4g}; "
            f"{len(self.samples_ms)} samples of {self.calls_per_sample} call(s), {self.clock})"
        )
        verdict = self.verdict()
        if verdict:
            text += "; " + verdict
        elif self.launch_bound:
            text += (
                f"; launch-bound: the host needs {1e3 * self.host_ms_per_call:.0f} us to issue a call, "
                f"the GPU {1e3 * self.median_ms:.0f} us to run it"
            )
        if self.simulated:
            text += "; simulator time, not GPU time"
        return text


#: The environment variable naming a lock file: set, every timing function holds it while it times.
TIMING_LOCK_VAR = "GPUCOURSE_TIMING_LOCK"
_LOCK_DEPTH = threading.local()  # how deep this thread is in timing functions that hold the lock


def alone(fn: Callable) -> Callable:
    """Decorate a timing function: while it runs, it holds the file GPUCOURSE_TIMING_LOCK names (if set) exclusively."""

    @functools.wraps(fn)
    def timed_alone(*args, **kwargs):
        path = os.environ.get(TIMING_LOCK_VAR)
        depth = getattr(_LOCK_DEPTH, "value", 0)
        if not path or depth:
            return fn(*args, **kwargs)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no file locks here, the processes are not kept apart
            return fn(*args, **kwargs)
        with open(path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            _LOCK_DEPTH.value = 1
            try:
                return fn(*args, **kwargs)
            finally:
                _LOCK_DEPTH.value = 0
                fcntl.flock(handle, fcntl.LOCK_UN)

    return timed_alone


def synchronize() -> None:
    """Wait until the current device has finished all queued work (a no-op in the simulator)."""
    if mode.is_simulator():
        return
    from numba import cuda

    cuda.synchronize()


class _Gate:
    """The gate kernel, its pinned host flag and its status word, for one device."""

    def __init__(self) -> None:
        cupy = require_cupy("the gated timing loop")
        self.kernel = cupy.RawKernel(GATE_SOURCE, "gpucourse_gate")
        self._flag_memory = cupy.cuda.alloc_pinned_memory(4)
        self.flag = np.frombuffer(self._flag_memory, dtype=np.int32, count=1)
        self.status = cupy.zeros(1, dtype=np.int32)

    def close(self, stream, timeout_ms: float) -> None:
        self.flag[0] = 0
        self.status.fill(0)
        self.kernel((1,), (1,), (self._flag_memory.ptr, self.status, np.uint64(int(timeout_ms * 1e6))), stream=stream)

    def open(self) -> None:
        self.flag[0] = 1

    def timed_out(self) -> bool:
        return bool(int(self.status.get()[0]))


@functools.cache
def _gate_for_device(ordinal: int) -> _Gate:
    return _Gate()


def _cupy_stream(stream):
    """`stream` (None: the legacy default stream) as a CuPy stream, to record events on."""
    cupy = require_cupy("CUDA event timing")
    if isinstance(stream, (cupy.cuda.Stream, cupy.cuda.ExternalStream)):
        return stream
    pointer = 0 if stream is None else stream_handle(stream)
    return cupy.cuda.Stream.null if pointer == 0 else cupy.cuda.ExternalStream(pointer)


def _simulated_benchmark(fn: Callable[[], object], warmup: int, repeat: int, calls_per_sample: int) -> Timing:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls_per_sample):
            fn()
        samples.append(1e3 * (time.perf_counter() - start) / calls_per_sample)
    return Timing(tuple(samples), calls_per_sample, "simulator wall clock")


def _library_folders() -> tuple[str, ...]:
    """Folders of this package and of the libraries under it (wherever they are installed): not the caller's own code."""
    folders = [str(Path(__file__).resolve().parent)]
    for name in ("numba", "numba.cuda", "numba_cuda", "cupy", "cupy_backends", "numpy", "cuda"):
        module = sys.modules.get(name)
        for folder in getattr(module, "__path__", None) or []:
            folders.append(str(Path(folder).resolve()))
    return tuple(folders)


def _where_it_waits(fn: Callable[[], object], gate: _Gate, cupy_stream, timeout_ms: float) -> str:
    """Call `fn` behind a closed gate and read, from another thread, where the call is stuck waiting."""
    main = threading.get_ident()
    seen: list = []
    running = threading.Event()

    def watch() -> None:
        time.sleep(min(0.05, timeout_ms / 4e3))
        if running.is_set():
            frame = sys._current_frames().get(main)
            if frame is not None:
                seen.extend(traceback.extract_stack(frame))

    gate.close(cupy_stream, timeout_ms)
    watcher = threading.Thread(target=watch, daemon=True)
    running.set()
    watcher.start()
    try:
        fn()
    finally:
        running.clear()
        gate.open()
        watcher.join()
    here = next((i for i, f in enumerate(seen) if f.name == "_where_it_waits"), None)
    if here is None or here + 1 >= len(seen):
        return "a call inside fn waits for the GPU (it could not be located)"
    inner = seen[-1]
    libraries = _library_folders()
    own = [f for f in seen[here + 1:] if "-packages" not in f.filename and not f.filename.startswith(libraries)]
    caller = own[-1] if own else seen[here + 1]  # the last line of the caller's own code on the way to the wait
    text = f"at {inner.filename.rsplit('/', 1)[-1]}:{inner.lineno} in {inner.name}()"
    if inner is not caller:
        text += f", reached from {caller.line or caller.name}"
    return text


@alone
def benchmark(
    fn: Callable[[], object],
    *,
    warmup: int = 2,
    repeat: int | None = None,
    calls_per_sample: int | None = None,
    min_sample_ms: float = 2.0,
    max_calls_per_sample: int = 200,
    back_to_back_repeat: int = 5,
    stream=None,
) -> Timing:
    """Time `fn()` (which queues GPU work) in ms per call: warm-up, then the median of `repeat` samples.

    On a GPU each sample queues `calls_per_sample` calls behind a gate and times them with CUDA
    events (GPU time); `back_to_back_repeat` more samples time plain back-to-back calls (what a loop
    gets, host costs included). If `fn` waits for the GPU, the gate cannot hold it: the call that
    waits is named in the result and each call is timed alone. In the simulator, the wall clock times each call, with no
    warm-up (there is no compiler or clock to warm up, and its times are no GPU's).
    """
    if warmup < 0 or (repeat is not None and repeat < 1):
        raise ValueError("warmup must be >= 0 and repeat >= 1")
    if mode.is_simulator():  # nothing to warm up (no compiler, no GPU clocks), and no number it gives is a GPU's
        return _simulated_benchmark(fn, 0, repeat or 3, calls_per_sample or 1)

    from numba import cuda

    cupy = require_cupy("CUDA event timing")
    repeat = repeat or 20
    cupy_stream = _cupy_stream(stream)
    gate = _gate_for_device(cuda.get_current_device().id)
    start_event, end_event = cupy.cuda.Event(), cupy.cuda.Event()

    for _ in range(max(warmup, 1)):  # compile, load modules, create handles: kept out of the numbers
        fn()
    cuda.synchronize()

    issue_start = time.perf_counter()
    for _ in range(3):
        fn()
    first_guess_ms = 1e3 * (time.perf_counter() - issue_start) / 3  # for the gate's time limit only: three calls are no measurement
    cuda.synchronize()
    issue_ms: list[float] = []  # the host's time to queue one call, from every gated sample (the GPU waits behind the gate)

    def gated_sample(calls: int) -> float | None:
        timeout_ms = 200.0 + 10.0 * calls * first_guess_ms
        gate.close(cupy_stream, timeout_ms)
        start_event.record(cupy_stream)
        queued = time.perf_counter()
        for _ in range(calls):
            fn()
        issue_ms.append(1e3 * (time.perf_counter() - queued) / calls)
        end_event.record(cupy_stream)
        gate.open()
        end_event.synchronize()
        cuda.synchronize()
        if gate.timed_out():
            return None
        return cupy.cuda.get_elapsed_time(start_event, end_event) / calls

    def plain_sample(calls: int) -> float:
        return back_to_back_us(fn, calls, cupy_stream) / 1e3

    first = gated_sample(1)
    gated = first is not None
    waits_at = None
    if not gated:  # fn waits for the GPU, so launches cannot be queued: find the wait, then time each call on its own
        waits_at = _where_it_waits(fn, gate, cupy_stream, 200.0 + 10.0 * first_guess_ms)
        cuda.synchronize()
        first = plain_sample(1)
    if calls_per_sample is None:
        calls_per_sample = int(min(max_calls_per_sample, max(1, math.ceil(min_sample_ms / max(first, 1e-6)))))
    samples = []
    for _ in range(repeat):
        value = gated_sample(calls_per_sample) if gated else plain_sample(calls_per_sample)
        if value is None:  # the host was interrupted while queueing (rare): take the sample again once
            value = gated_sample(calls_per_sample)
        if value is None:
            raise TimingError(
                "the gate that holds timed launches timed out twice: the host took too long to queue "
                f"{calls_per_sample} calls. Pass calls_per_sample= a smaller number."
            )
        samples.append(value)
    if gated:
        back_to_back = statistics.median(plain_sample(calls_per_sample) for _ in range(max(1, back_to_back_repeat)))
        clock = "CUDA events, launches queued behind a gate"
    else:
        back_to_back = statistics.median(samples)
        clock = "CUDA events, one call at a time (fn waits for the GPU)"
    # the host's cost per call: the median over every timed sample's queueing (repeat x calls_per_sample calls); a call that
    # waits for the GPU cannot be queued, so its host cost is not told apart from the GPU's
    host_ms_per_call = statistics.median(issue_ms[1:] or issue_ms) if gated else None
    return Timing(tuple(samples), calls_per_sample, clock, host_ms_per_call, gated, back_to_back, waits_at)


@alone
def wall_times_ms(fn: Callable[[], object], repeat: int = 3, warmup: int = 1, sync: Callable[[], None] | None = None) -> list[float]:
    """Wall-clock time of each of `repeat` calls of `fn()` in ms, from an idle device to the end of its work (what a user waits).

    `sync` waits for the devices concerned (default: the current device). The simulator skips the warm-up.
    """
    if repeat < 1 or warmup < 0:
        raise ValueError("repeat must be >= 1 and warmup >= 0")
    sync = sync or synchronize
    for _ in range(0 if mode.is_simulator() else warmup):  # the simulator has nothing to warm up
        fn()
    samples = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        samples.append(1e3 * (time.perf_counter() - start))
    return samples


def wall_time_ms(fn: Callable[[], object], repeat: int = 3, warmup: int = 1, sync: Callable[[], None] | None = None) -> float:
    """Median wall-clock time of `fn()` in ms, from an idle device to the end of its work (`wall_times_ms`' median)."""
    return statistics.median(wall_times_ms(fn, repeat, warmup, sync))


@dataclass(frozen=True)
class Ceilings:
    """The device's bandwidth ceilings in GB/s: theoretical peak and a measured device-to-device copy."""

    device: str
    theoretical_gbs: float | None
    copy_gbs: float
    copy_bytes: int
    simulated: bool

    def fraction_of_copy(self, gbs: float) -> float:
        """`gbs` as a fraction of the measured copy bandwidth."""
        return gbs / self.copy_gbs

    def fraction(self, gbs: float, one_way: bool = False) -> float | None:
        """`gbs` over its ceiling: the measured copy for traffic that reads and writes, the theoretical peak for one-way traffic.

        A kernel that only reads (a sum) or only writes (a generator) can outrun a copy, which
        interleaves reads and writes on the memory bus; the measured copy is no ceiling for it, the
        theoretical peak is. None where the peak is unknown (the simulator).
        """
        if not one_way:
            return self.fraction_of_copy(gbs)
        return gbs / self.theoretical_gbs if self.theoretical_gbs and not self.simulated else None

    def __str__(self) -> str:
        if self.simulated:
            return (
                f"{self.device}: no GPU ceilings. A host memory copy of {self.copy_bytes / 2**20:.0f} MiB moved "
                f"{self.copy_gbs:.1f} GB/s (host memory, not a GPU figure)."
            )
        theory = f"theoretical peak {self.theoretical_gbs:.0f} GB/s, " if self.theoretical_gbs else ""
        fraction = f" ({self.copy_gbs / self.theoretical_gbs:.0%} of peak)" if self.theoretical_gbs else ""
        return f"{self.device}: {theory}measured device-to-device copy {self.copy_gbs:.0f} GB/s{fraction}"


def _copy_size_bytes(device) -> int:
    size = 256 * 2**20
    if device.l2_cache_bytes:
        size = max(size, 16 * device.l2_cache_bytes)
    if device.total_memory_bytes:
        size = min(size, device.total_memory_bytes // 8)
    return size


@functools.cache
def _ceilings_for(ordinal: int, simulated: bool) -> Ceilings:
    from .device import current_device

    device = current_device()
    if simulated:
        nbytes = 64 * 2**20
        source = np.ones(nbytes // 4, dtype=np.float32)
        target = np.empty_like(source)
        timing = _simulated_benchmark(lambda: np.copyto(target, source), warmup=1, repeat=5, calls_per_sample=1)
        return Ceilings(device.name, None, timing.bandwidth_gbs(2 * nbytes), nbytes, True)
    cupy = require_cupy("the device-to-device copy ceiling")
    nbytes = _copy_size_bytes(device)
    timing = _timed_device_copy(cupy, nbytes)
    cupy.get_default_memory_pool().free_all_blocks()  # its two arrays go back to the device, not only to CuPy's pool
    return Ceilings(device.name, device.theoretical_bandwidth_gbs, timing.bandwidth_gbs(2 * nbytes), nbytes, False)


def _timed_device_copy(cupy, nbytes: int) -> Timing:
    """A device-to-device copy of `nbytes` (cudaMemcpyAsync), timed; its arrays are freed when this returns."""
    source = cupy.ones(nbytes // 4, dtype=cupy.float32)
    target = cupy.empty_like(source)
    kind = cupy.cuda.runtime.memcpyDeviceToDevice

    def copy() -> None:
        cupy.cuda.runtime.memcpyAsync(target.data.ptr, source.data.ptr, nbytes, kind, 0)

    return benchmark(copy, repeat=15)


def bandwidth_ceilings() -> Ceilings:
    """Measure (once per device and session) the practical copy ceiling and report it with the theoretical peak."""
    if mode.is_simulator():
        return _ceilings_for(0, True)
    from numba import cuda

    return _ceilings_for(cuda.get_current_device().id, False)


@alone
def host_cost_us(fn: Callable[[], object], calls: int = 200, batches: int = 5) -> float:
    """Host time in us to issue one call of `fn` (median over batches; the GPU is idle when each batch starts)."""
    if calls < 1 or batches < 1:
        raise ValueError("calls and batches must be >= 1")
    for _ in range(3):
        fn()
    samples = []
    for _ in range(batches):
        synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append(1e6 * (time.perf_counter() - start) / calls)
    synchronize()
    return statistics.median(samples)


@alone
def back_to_back_us(fn: Callable[[], object], calls: int = 200, stream=None) -> float:
    """GPU time in us per call of `calls` plain back-to-back calls of `fn`, idle gaps included (CUDA events, no gate)."""
    if mode.is_simulator():
        raise TimingError("back-to-back GPU time needs CUDA events: there are none in the simulator")
    cupy = require_cupy("CUDA event timing")
    cupy_stream = _cupy_stream(stream)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    synchronize()
    start.record(cupy_stream)
    for _ in range(calls):
        fn()
    end.record(cupy_stream)
    end.synchronize()
    return 1e3 * cupy.cuda.get_elapsed_time(start, end) / calls
