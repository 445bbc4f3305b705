"""Chapter 3, host-device transfers: pageable vs pinned memory, batching, and overlap with streams.

The book's §3.1 in Python. A copy from *pageable* host memory (any NumPy array) is staged by the
driver through a pinned buffer and makes the host wait; a copy from *pinned* (page-locked) memory
(`cuda.pinned_array`) goes straight to the GPU's copy engine and can be queued on a stream. Queued
copies and kernels in different streams can overlap: `StagedPipeline` runs the book's sequential
version and its three staged versions of one element-wise job, each of which `gpucourse.timeline`
can draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numba import cuda, float32

from .. import book, mode
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import bind, planned
from ..report import Table
from ..timeline import TimelineRecorder, maybe_span
from ..timing import Ceilings, Timing, benchmark
from ..validate import blocks_to_cover, check_blocks, check_device_array, check_threads_per_block

DIRECTIONS = ("H2D", "D2H")

# ---------------------------------------------------------------------------------------------
# 1. Pageable and pinned host memory.


def host_array(n: int, dtype=np.float32, pinned: bool = False) -> np.ndarray:
    """A host array of `n` elements, in pinned (page-locked) memory or in ordinary pageable memory."""
    if n < 1:
        raise ArrayArgumentError(f"a host array needs at least one element; got n={n}")
    return cuda.pinned_array(n, dtype=dtype) if pinned else np.empty(n, dtype=dtype)


def transfer_call(direction: str, host: np.ndarray, device, stream=None) -> Callable[[], None]:
    """A function of no arguments that copies `host` to `device` ('H2D') or back ('D2H').

    With a `stream` the copy is queued (cuMemcpyAsync) and the call returns at once; that needs
    pinned host memory to be truly asynchronous. Without one the copy is synchronous: the host
    waits until it is done, as it always does for pageable memory.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
    check_device_array(device, "device", dtype=host.dtype)
    if host.nbytes != device.nbytes:
        raise ArrayArgumentError(f"host has {host.nbytes} bytes but device has {device.nbytes}: a copy needs equal sizes")
    if direction == "H2D":
        if stream is None:
            return lambda: device.copy_to_device(host)
        return lambda: device.copy_to_device(host, stream=stream)
    if stream is None:
        return lambda: device.copy_to_host(host)
    return lambda: device.copy_to_host(host, stream=stream)


@dataclass(frozen=True)
class TransferMeasurement:
    """One timed host-device copy: its size (bytes), direction, memory kind and timing."""

    nbytes: int
    direction: str
    pinned: bool
    timing: Timing

    @property
    def gbs(self) -> float:
        """Bandwidth in GB/s (1e9 bytes per second): bytes copied over the median time."""
        return self.timing.bandwidth_gbs(self.nbytes)

    @property
    def memory(self) -> str:
        """'pinned' or 'pageable'."""
        return "pinned" if self.pinned else "pageable"


def measure_transfer(nbytes: int, direction: str, pinned: bool, repeat: int | None = None) -> TransferMeasurement:
    """Time one copy of `nbytes` bytes (float32 data) in `direction` from pinned or pageable memory."""
    n = max(1, nbytes // 4)
    host = host_array(n, np.float32, pinned)
    host[:] = np.arange(n, dtype=np.float32)  # touch every page, so the first copy does not pay for page faults
    device = cuda.device_array(n, dtype=np.float32)
    stream = cuda.stream() if pinned else None
    timing = benchmark(transfer_call(direction, host, device, stream), repeat=repeat, stream=stream)
    return TransferMeasurement(4 * n, direction, pinned, timing)


def transfer_sweep(sizes_bytes: Sequence[int], repeat: int | None = None) -> list[TransferMeasurement]:
    """Time H2D and D2H copies from pageable and from pinned memory for every size in `sizes_bytes`."""
    return [measure_transfer(size, direction, pinned, repeat)
            for pinned in (False, True) for direction in DIRECTIONS for size in sizes_bytes]


def plot_transfer_sweep(measurements: Sequence[TransferMeasurement], ax=None, title: str | None = None):
    """GB/s against transfer size, one line per (memory, direction); return the axes."""
    import matplotlib.pyplot as plt

    from ..plotting import mark_simulated

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    colours = {"H2D": "tab:blue", "D2H": "tab:orange"}
    for memory, line in (("pinned", "-"), ("pageable", "--")):
        for direction in DIRECTIONS:
            points = sorted((m.nbytes, m.gbs) for m in measurements if m.memory == memory and m.direction == direction)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o" if direction == "H2D" else "s", linestyle=line,
                        color=colours[direction], label=f"{memory} {direction}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("transfer size (bytes)")
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or "Host-device bandwidth against transfer size")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    mark_simulated(ax, any(m.timing.simulated for m in measurements))
    return ax


BOOK_HOSTS = {"E5540": "Xeon E5540 + Tesla K20", "E52667": "Xeon E5-2667 + Tesla K20m"}


def transfer_table(measurements: Sequence[TransferMeasurement], device_name: str) -> Table:
    """Then and now: the book's 16 MB BandwidthTest on two hosts beside this machine's copies."""
    mine = {(m.memory, m.direction): m for m in measurements}
    sizes = {m.nbytes for m in measurements}
    size_text = ", ".join(f"{s / 2**20:g} MiB" for s in sorted(sizes))
    table = Table(
        headers=["copy", *(f"book: {host}" for host in BOOK_HOSTS.values()), f"now: {device_name} ({size_text})", "pinned / pageable now"],
        title="Host-device bandwidth (GB/s): the book's 16 MB test beside this machine",
        notes=[f"Book figures: {book.figure('ch3_bwtest_pinned_H2D_E5540').where}; this machine: medians, "
               + ("simulator wall clock (NumPy copies, not a GPU)." if any(m.timing.simulated for m in measurements)
                  else "timed with CUDA events.")],
    )
    for memory in ("pageable", "pinned"):
        for direction in DIRECTIONS:
            book_values = [book.figure(f"ch3_bwtest_{memory}_{direction}_{host}").number for host in BOOK_HOSTS]
            now = mine.get((memory, direction))
            ratio = None
            if memory == "pinned" and now is not None and ("pageable", direction) in mine:
                ratio = f"{now.gbs / mine[('pageable', direction)].gbs:.2f}x"
            table.rows.append([f"{memory} {direction}", *book_values, None if now is None else round(now.gbs, 2), ratio])
    return table


# ---------------------------------------------------------------------------------------------
# 2. Batching: one large copy against many small ones of the same total size.


def piecewise_copy_call(host: np.ndarray, device, pieces: int, stream) -> Callable[[], None]:
    """A function that copies `host` to `device` as `pieces` queued copies of equal size (host must be pinned)."""
    n = host.shape[0]
    if pieces < 1 or n % pieces:
        raise ValueError(f"pieces must divide the {n} elements evenly; got {pieces}")
    check_device_array(device, "device", dtype=host.dtype, shape=host.shape)
    step = n // pieces
    # Slice once, outside the timed call: making a device view costs the host microseconds.
    pairs = [(host[k:k + step], device[k:k + step]) for k in range(0, n, step)]

    def copy_in_pieces() -> None:
        for host_part, device_part in pairs:
            device_part.copy_to_device(host_part, stream=stream)

    return copy_in_pieces


@dataclass(frozen=True)
class BatchingResult:
    """One copy of `nbytes` against `pieces` copies of nbytes/pieces each, pinned, host to device."""

    nbytes: int
    pieces: int
    whole: Timing
    in_pieces: Timing

    @property
    def overhead_per_copy_us(self) -> float:
        """Extra GPU time (µs) that each small copy costs beyond its share of the single copy."""
        return 1e3 * (self.in_pieces.median_ms - self.whole.median_ms) / (self.pieces - 1) if self.pieces > 1 else 0.0

    @property
    def slowdown(self) -> float:
        """How many times longer the pieces take than the single copy."""
        return self.in_pieces.median_ms / self.whole.median_ms


def measure_batching(nbytes: int, pieces: int, repeat: int | None = None) -> BatchingResult:
    """Time a pinned H2D copy of `nbytes` bytes as one copy and as `pieces` copies."""
    n = nbytes // 4
    host = host_array(n, np.float32, pinned=True)
    host[:] = np.arange(n, dtype=np.float32)
    device = cuda.device_array(n, dtype=np.float32)
    stream = cuda.stream()
    whole = benchmark(piecewise_copy_call(host, device, 1, stream), repeat=repeat, stream=stream)
    in_pieces = benchmark(piecewise_copy_call(host, device, pieces, stream), repeat=repeat, stream=stream)
    return BatchingResult(4 * n, pieces, whole, in_pieces)


# ---------------------------------------------------------------------------------------------
# 3. Overlapping copies and kernels with streams (book §3.1.3).


@cuda.jit
def unit_kernel(a, offset, repeats):
    """a[i] += 1, computed the long way: the mean of sqrt(sin(x)**2 + cos(x)**2) over `repeats` angles."""
    i = cuda.grid(1)
    if i < a.size:
        total = float32(0)
        for j in range(repeats):
            x = float32(i + offset + j)  # the element's global index, so a chunk gets the same angles as the whole array
            s = math.sin(x)
            c = math.cos(x)
            total += math.sqrt(s * s + c * c)
        a[i] += total / float32(repeats)


@planned
def unit_kernel_plan(a, offset: int, repeats: int, threads_per_block: int):
    """The plan of `unit_kernel` over the float32 device array `a` (a whole array or a chunk of one)."""
    check_device_array(a, "a", dtype=np.float32, ndim=1)
    (tpb,) = check_threads_per_block(threads_per_block)
    if repeats < 1:
        raise LaunchConfigError(f"repeats must be at least 1; got {repeats}")
    blocks = blocks_to_cover(a.shape[0], tpb)
    check_blocks(blocks)
    return bind(unit_kernel, blocks, tpb, a, np.int64(offset), np.int32(repeats))


def unit_kernel_launch(a, offset: int, repeats: int, threads_per_block: int, stream=None) -> None:
    """Launch `unit_kernel` over the float32 device array `a` (a whole array or a chunk of one) on `stream`."""
    unit_kernel_plan(a, offset, repeats, threads_per_block, stream=stream)


@dataclass
class StagedPipeline:
    """Pinned host data, its device copy and the streams of the book's overlap experiment."""

    host: np.ndarray
    device: object
    streams: tuple
    threads_per_block: int
    repeats: int
    chunks: list = field(default_factory=list)

    @property
    def n(self) -> int:
        """Elements in the whole array."""
        return self.host.shape[0]

    @property
    def nbytes_moved(self) -> int:
        """Bytes copied per run: the array to the device and back."""
        return 2 * self.host.nbytes

    def reset(self) -> None:
        """Zero the host data, as the book does before each version (the result should then be all ones)."""
        self.host[:] = 0

    def max_error(self) -> float:
        """Largest |a - 1| after one run from zeros (the kernel adds exactly one, up to rounding)."""
        return float(np.max(np.abs(self.host.astype(np.float64) - 1.0)))


def make_pipeline(n: int, streams: int, threads_per_block: int = 256, repeats: int = 1) -> StagedPipeline:
    """Allocate `n` pinned float32 elements, a device array and `streams` streams, split into equal chunks."""
    if streams < 1 or n % streams:
        raise LaunchConfigError(f"the {n} elements must split evenly over the streams; got streams={streams}")
    (tpb,) = check_threads_per_block(threads_per_block)
    if repeats < 1:
        raise LaunchConfigError(f"repeats must be at least 1; got {repeats}")
    host = host_array(n, np.float32, pinned=True)
    host[:] = 0
    device = cuda.device_array(n, dtype=np.float32)
    stream_list = tuple(cuda.stream() for _ in range(streams))
    step = n // streams
    chunks = [(k, host[k * step:(k + 1) * step], device[k * step:(k + 1) * step]) for k in range(streams)]
    return StagedPipeline(host, device, stream_list, tpb, repeats, chunks)


def run_sequential(p: StagedPipeline, recorder: TimelineRecorder | None = None) -> None:
    """The baseline: the whole array to the device, one kernel over it, the whole array back, in one stream."""
    stream = p.streams[0]
    with maybe_span(recorder, "stream 1", "H2D", "H2D all", stream):
        p.device.copy_to_device(p.host, stream=stream)
    with maybe_span(recorder, "stream 1", "kernel", "kernel all", stream):
        unit_kernel_launch(p.device, 0, p.repeats, p.threads_per_block, stream)
    with maybe_span(recorder, "stream 1", "D2H", "D2H all", stream):
        p.device.copy_to_host(p.host, stream=stream)


def _chunk_ops(p: StagedPipeline, recorder: TimelineRecorder | None):
    step = p.n // len(p.streams)

    def h2d(k: int) -> None:
        index, host_part, device_part = p.chunks[k]
        with maybe_span(recorder, f"stream {k + 1}", "H2D", f"H2D {k + 1}", p.streams[k]):
            device_part.copy_to_device(host_part, stream=p.streams[k])

    def kernel(k: int) -> None:
        index, host_part, device_part = p.chunks[k]
        with maybe_span(recorder, f"stream {k + 1}", "kernel", f"kernel {k + 1}", p.streams[k]):
            unit_kernel_launch(device_part, index * step, p.repeats, p.threads_per_block, p.streams[k])

    def d2h(k: int) -> None:
        index, host_part, device_part = p.chunks[k]
        with maybe_span(recorder, f"stream {k + 1}", "D2H", f"D2H {k + 1}", p.streams[k]):
            device_part.copy_to_host(host_part, stream=p.streams[k])

    return h2d, kernel, d2h


def run_staged_v1(p: StagedPipeline, recorder: TimelineRecorder | None = None) -> None:
    """Version 1: for each stream in turn, issue its chunk's copy in, kernel and copy out."""
    h2d, kernel, d2h = _chunk_ops(p, recorder)
    for k in range(len(p.streams)):
        h2d(k)
        kernel(k)
        d2h(k)


def run_staged_v2(p: StagedPipeline, recorder: TimelineRecorder | None = None) -> None:
    """Version 2: issue every chunk's copy in, then every kernel, then every copy out."""
    h2d, kernel, d2h = _chunk_ops(p, recorder)
    for k in range(len(p.streams)):
        h2d(k)
    for k in range(len(p.streams)):
        kernel(k)
    for k in range(len(p.streams)):
        d2h(k)


def run_staged_v3(p: StagedPipeline, recorder: TimelineRecorder | None = None) -> None:
    """Version 3: as version 2, with an event recorded after each kernel (the book's fix for Fermi)."""
    h2d, kernel, d2h = _chunk_ops(p, recorder)
    marker = cuda.event(timing=False) if mode.on_gpu() else cuda.event()
    for k in range(len(p.streams)):
        h2d(k)
    for k in range(len(p.streams)):
        kernel(k)
        marker.record(p.streams[k])
    for k in range(len(p.streams)):
        d2h(k)


#: The book's four versions, by the name the notebook shows; the value is the function that issues one run.
SCHEDULES: dict[str, Callable[..., None]] = {
    "sequential": run_sequential,
    "staged V1": run_staged_v1,
    "staged V2": run_staged_v2,
    "staged V3": run_staged_v3,
}

#: The id suffix of each version in the book's figures (ch3_async_<suffix>_<GPU>).
BOOK_SUFFIX = {"sequential": "seq", "staged V1": "v1", "staged V2": "v2", "staged V3": "v3"}
BOOK_ASYNC_GPUS = ("C1060", "C2050", "K20")


def check_schedule(p: StagedPipeline, schedule: str) -> float:
    """Run `schedule` once from zeros and return the maximum error (should be a few float32 ulps of 1)."""
    if schedule not in SCHEDULES:
        raise KeyError(f"no schedule {schedule!r}; choose one of {list(SCHEDULES)}")
    p.reset()
    SCHEDULES[schedule](p)
    cuda.synchronize()
    return p.max_error()


def record_timeline(p: StagedPipeline, schedule: str, serialize_kinds: bool = True):
    """Run `schedule` once untimed (a warm-up: kernels compiled and bound), then once with a span around each copy and kernel."""
    SCHEDULES[schedule](p)  # a first run pays for compiling and binding on the host, which would delay the issue of later work
    cuda.synchronize()
    recorder = TimelineRecorder(serialize_kinds=serialize_kinds)
    SCHEDULES[schedule](p, recorder)
    return recorder.finish()


def time_schedules(p: StagedPipeline, repeat: int | None = None) -> dict[str, Timing]:
    """Time each version as a whole (all its copies and kernels, queued behind the gate); ms per run."""
    return {name: benchmark(lambda run=run: run(p), repeat=repeat) for name, run in SCHEDULES.items()}


@dataclass(frozen=True)
class StageTimes:
    """GPU time (ms) of each piece of one chunk, measured alone: copy in, kernel with one angle, copy out."""

    h2d_ms: float
    kernel_ms_per_repeat: float
    d2h_ms: float
    simulated: bool

    def balanced_repeats(self, largest: int = 256) -> int:
        """Angles per element that make the kernel take about as long as the slower copy (1 in the simulator)."""
        if self.simulated:
            return 1
        return int(min(largest, max(1, round(max(self.h2d_ms, self.d2h_ms) / self.kernel_ms_per_repeat))))

    def predicted_ms(self, chunks: int, repeats: int) -> tuple[float, float]:
        """A model, not a measurement: (sequential, perfectly overlapped) ms for `chunks` chunks with `repeats` angles.

        Sequential: every piece of every chunk one after another. Overlapped: one chunk's pieces,
        then the slowest piece once per further chunk (a copy engine each way and the kernels all busy at once).
        """
        kernel = repeats * self.kernel_ms_per_repeat
        per_chunk = self.h2d_ms + kernel + self.d2h_ms
        return chunks * per_chunk, per_chunk + (chunks - 1) * max(self.h2d_ms, kernel, self.d2h_ms)


def measure_stage_times(p: StagedPipeline, repeat: int | None = None) -> StageTimes:
    """Time one chunk's copy in, its kernel (one angle per element) and its copy out, each alone."""
    stream = p.streams[0]
    index, host_part, device_part = p.chunks[0]
    h2d = benchmark(transfer_call("H2D", host_part, device_part, stream), repeat=repeat, stream=stream)
    kernel = benchmark(lambda: unit_kernel_launch(device_part, 0, 1, p.threads_per_block, stream), repeat=repeat, stream=stream)
    d2h = benchmark(transfer_call("D2H", host_part, device_part, stream), repeat=repeat, stream=stream)
    return StageTimes(h2d.median_ms, kernel.median_ms, d2h.median_ms, h2d.simulated)


def async_table(times: dict[str, Timing], device_name: str, ceilings: Ceilings | None = None) -> Table:
    """Then and now: the book's times (ms) for the four versions on three GPUs beside this device's."""
    headers = ["version", *(f"book {gpu} (ms)" for gpu in BOOK_ASYNC_GPUS), f"now: {device_name} (ms)", "speed-up over sequential now"]
    table = Table(headers=headers, title="Sequential and staged transfers: the book's times beside this device's",
                  notes=[f"Book: n = 4M floats, 4 streams ({book.figure('ch3_async_seq_K20').where}). "
                         "Now: the sizes printed above; the speed-ups compare this device's versions with each other."])
    sequential = times["sequential"].median_ms
    simulated = any(timing.simulated for timing in times.values())
    if simulated:
        table.notes.append("Simulator: these times measure Python threads (every operation runs alone), so no speed-up is shown.")
    for name, timing in times.items():
        suffix = BOOK_SUFFIX[name]
        book_values = [book.figure(f"ch3_async_{suffix}_{gpu}").number for gpu in BOOK_ASYNC_GPUS]
        speedup = None if simulated else f"{sequential / timing.median_ms:.2f}x"
        table.rows.append([name, *book_values, round(timing.median_ms, 4), speedup])
    return table


def stream_count_tuner(n: int, stream_counts: Sequence[int], threads_per_block: int, repeats: int,
                       schedule: str = "staged V1", ceilings: Ceilings | None = None, repeat: int | None = None):
    """A Tuner over the number of streams for one staged version; 'bandwidth' counts both copies."""
    from ..widgets import Tuner

    pipelines: dict[int, StagedPipeline] = {}

    def make_call(streams: int):
        if streams not in pipelines:
            pipelines[streams] = make_pipeline(n, streams, threads_per_block, repeats)
        pipeline = pipelines[streams]
        return lambda: SCHEDULES[schedule](pipeline)

    return Tuner(make_call, 2 * 4 * n, {"streams": list(stream_counts)}, name=f"{schedule}, copies in and out", ceilings=ceilings,
                 repeat=repeat)
