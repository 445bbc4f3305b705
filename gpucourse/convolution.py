"""FFT convolution of a stack of planes larger than one transfer, with copies and transforms overlapped on streams (book §7.3).

A convolution is a pointwise product in Fourier space: conv(A, B) = IFFT(FFT(A) * FFT(B)). The
book convolves two series of P complex planes that live in host memory, plane by plane, and asks
whether the copies or the computation bound the run. Three loops, as in the book:

* ``io_only``: only the copies (A and B in, the result out), one stream: the time the link needs;
* ``single_stream``: copies and compute in one stream, so each waits for the other;
* ``multi_stream``: plane p on stream p mod S: while one plane is transformed, the next is copied in
  and the previous one copied out (pinned host memory, a copy engine each way).

Each stream has its own device buffers and its own cuFFT plans (a plan's work area must not be used
by two streams at once), and its compute is one `gpucourse.launch` plan: three in-place C2C
transforms and the multiply kernel. `record_timeline` draws the three loops with `gpucourse.timeline`.
In the simulator there are no streams and no copies to overlap: the same code runs in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import fft, mode
from .arrays import array_module
from .errors import ArrayArgumentError, LaunchConfigError
from .kernels import spectral as kernels
from .launch import build, planned
from .report import data_size
from .timeline import Timeline, TimelineRecorder, maybe_span
from .timing import Timing, benchmark, effective_bandwidth_gbs

# ---------------------------------------------------------------------------------------------
# The compute of one plane: both planes forward, multiply, the product back (all in place)


@planned
def convolve_plane(a, b, slot: int = 0):
    """b = conv(a, b), circular, for two complex 2D device planes: FFT a, FFT b, b = a b / N, inverse FFT b (a is overwritten)."""
    if len(a.shape) != 2:
        raise ArrayArgumentError(f"a must be one 2D plane; got shape {tuple(a.shape)}")
    ny, nx = a.shape
    return (build(fft.transform, a, a, "C2C", fft.FORWARD, (0, 1), slot),
            build(fft.transform, b, b, "C2C", fft.FORWARD, (0, 1), slot),
            build(kernels.multiply_spectra, a, b, 1.0 / (nx * ny)),
            build(fft.transform, b, b, "C2C", fft.INVERSE, (0, 1), slot))


def convolution_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The circular 2D convolution of a and b by numpy.fft in complex128."""
    return np.fft.ifft2(np.fft.fft2(a.astype(np.complex128)) * np.fft.fft2(b.astype(np.complex128)))


def direct_circular_convolution(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum over (m, n) of a[m, n] b[j - m, i - n] (indices mod the shape), by definition: O(N^2), for small planes."""
    a, b = a.astype(np.complex128), b.astype(np.complex128)
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape), np.complex128)
    for m in range(a.shape[0]):
        for n in range(a.shape[1]):
            out += a[m, n] * np.roll(b, (m, n), axis=(0, 1))
    return out


# ---------------------------------------------------------------------------------------------
# Host planes, device buffers, streams


@dataclass
class ConvolutionPipeline:
    """Pinned host stacks A, B, C of `planes` planes, a pair of device planes per stream, the streams and their compute plans."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    a_dev: object
    b_dev: object
    streams: tuple
    computes: list = field(default_factory=list)
    timeline_streams: tuple = ()

    @property
    def planes(self) -> int:
        """Planes in each host stack."""
        return self.a.shape[0]

    @property
    def plane_bytes(self) -> int:
        """Bytes of one plane."""
        return self.a[0].nbytes

    @property
    def slots(self) -> int:
        """Streams (each with its own device buffers and plans)."""
        return len(self.streams)

    def bytes_copied(self) -> int:
        """Bytes one run copies: two planes in and one out, per plane."""
        return 3 * self.planes * self.plane_bytes


def _base_planes(shape: tuple[int, int], dtype, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    real = np.float32 if np.dtype(dtype) == np.complex64 else np.float64
    a0 = (rng.random(shape, dtype=real) - 0.5) + 1j * (rng.random(shape, dtype=real) - 0.5)
    b0 = (rng.random(shape, dtype=real) - 0.5) + 1j * (rng.random(shape, dtype=real) - 0.5)
    return a0.astype(dtype), b0.astype(dtype)


def make_pipeline(plane_shape: tuple[int, int], planes: int, streams: int, dtype=np.complex64, seed: int = 0) -> ConvolutionPipeline:
    """Pinned stacks with A[p] = (p + 1) A0 and B[p] = B0 rolled by p columns, device buffers, `streams` streams and plans."""
    from numba import cuda

    if planes < 1 or streams < 1:
        raise LaunchConfigError(f"planes and streams must be at least 1; got {planes} and {streams}")
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.complex64), np.dtype(np.complex128)):
        raise ArrayArgumentError(f"the planes must be complex64 or complex128; got {dtype.name}")
    shape = (planes, *plane_shape)
    a, b, c = (cuda.pinned_array(shape, dtype) for _ in range(3))
    a0, b0 = _base_planes(tuple(plane_shape), dtype, seed)
    for p in range(planes):  # distinct planes, cheap to make and to check: conv(A[p], B[p]) = (p + 1) roll(conv(A0, B0), p)
        np.multiply(a0, p + 1, out=a[p])
        b[p] = np.roll(b0, p, axis=1)
    c[...] = np.nan
    return with_streams(a, b, c, streams)


def with_streams(a: np.ndarray, b: np.ndarray, c: np.ndarray, streams: int) -> ConvolutionPipeline:
    """A pipeline over existing pinned stacks with `streams` streams, each with its device planes and compute plan."""
    from numba import cuda

    if streams < 1:
        raise LaunchConfigError(f"streams must be at least 1; got {streams}")
    plane_shape, dtype = a.shape[1:], a.dtype
    xp = array_module()
    a_dev, b_dev = xp.empty((streams, *plane_shape), dtype), xp.empty((streams, *plane_shape), dtype)
    if mode.is_simulator():
        stream_list, timeline_streams = (None,) * streams, (None,) * streams
    else:
        import cupy

        stream_list = tuple(cupy.cuda.Stream() for _ in range(streams))  # blocking streams: they wait for the legacy default stream
        timeline_streams = tuple(cuda.external_stream(s.ptr) for s in stream_list)  # the same streams, for Numba's events
    pipeline = ConvolutionPipeline(a, b, c, a_dev, b_dev, stream_list, timeline_streams=timeline_streams)
    pipeline.computes = [convolve_plane.plan(a_dev[k], b_dev[k], k) for k in range(streams)]
    return pipeline


def expected_plane(p: ConvolutionPipeline, index: int, base: np.ndarray | None = None) -> np.ndarray:
    """What C[index] must hold after a run: (index + 1) times conv(A0, B0) rolled by index columns (complex128)."""
    if base is None:
        base = convolution_reference(p.a[0], p.b[0])
    return (index + 1) * np.roll(base, index, axis=1)


def max_relative_error(p: ConvolutionPipeline, indices=None) -> float:
    """Largest |C - expected| / max |expected| over the planes `indices` (default: first, middle and last)."""
    base = convolution_reference(p.a[0], p.b[0])
    indices = indices if indices is not None else sorted({0, p.planes // 2, p.planes - 1})
    worst = 0.0
    for index in indices:
        want = expected_plane(p, index, base)
        worst = max(worst, float(np.max(np.abs(p.c[index] - want)) / np.max(np.abs(want))))
    return worst


# ---------------------------------------------------------------------------------------------
# Copies (queued on a stream: the host memory is pinned)


def copy_in(device_plane, host_plane: np.ndarray, stream) -> None:
    """Queue a copy host -> device of one plane on `stream` (a plain copy in the simulator)."""
    if stream is None:
        np.copyto(device_plane, host_plane)
        return
    import cupy

    runtime = cupy.cuda.runtime
    runtime.memcpyAsync(device_plane.data.ptr, host_plane.ctypes.data, host_plane.nbytes, runtime.memcpyHostToDevice, stream.ptr)


def copy_out(host_plane: np.ndarray, device_plane, stream) -> None:
    """Queue a copy device -> host of one plane on `stream` (a plain copy in the simulator)."""
    if stream is None:
        np.copyto(host_plane, device_plane)
        return
    import cupy

    runtime = cupy.cuda.runtime
    runtime.memcpyAsync(host_plane.ctypes.data, device_plane.data.ptr, host_plane.nbytes, runtime.memcpyDeviceToHost, stream.ptr)


# ---------------------------------------------------------------------------------------------
# The book's three loops


def _plane_ops(p: ConvolutionPipeline, recorder: TimelineRecorder | None):
    def h2d(index: int, slot: int) -> None:
        stream = p.streams[slot]
        with maybe_span(recorder, f"stream {slot + 1}", "H2D", f"A, B {index}", p.timeline_streams[slot]):
            copy_in(p.a_dev[slot], p.a[index], stream)  # A and B back to back: the book's fix for the K10
            copy_in(p.b_dev[slot], p.b[index], stream)

    def compute(slot: int, index: int) -> None:
        with maybe_span(recorder, f"stream {slot + 1}", "kernel", f"FFTs {index}", p.timeline_streams[slot]):
            p.computes[slot](stream=p.streams[slot])

    def d2h(index: int, slot: int, source=None) -> None:
        with maybe_span(recorder, f"stream {slot + 1}", "D2H", f"C {index}", p.timeline_streams[slot]):
            copy_out(p.c[index], p.b_dev[slot] if source is None else source, p.streams[slot])

    return h2d, compute, d2h


def io_only(p: ConvolutionPipeline, recorder: TimelineRecorder | None = None) -> None:
    """Only the copies, in one stream: A and B in, a plane out, for every plane (the book's first loop)."""
    h2d, _, d2h = _plane_ops(p, recorder)
    for index in range(p.planes):
        h2d(index, 0)
        d2h(index, 0, p.a_dev[0])


def single_stream(p: ConvolutionPipeline, recorder: TimelineRecorder | None = None) -> None:
    """Copy in, convolve, copy out, plane after plane, all in one stream (the book's second loop)."""
    h2d, compute, d2h = _plane_ops(p, recorder)
    for index in range(p.planes):
        h2d(index, 0)
        compute(0, index)
        d2h(index, 0)


def multi_stream(p: ConvolutionPipeline, recorder: TimelineRecorder | None = None) -> None:
    """Plane p on stream p mod S, each stream with its own buffers and plans (the book's third loop)."""
    h2d, compute, d2h = _plane_ops(p, recorder)
    for index in range(p.planes):
        slot = index % p.slots
        h2d(index, slot)
        compute(slot, index)
        d2h(index, slot)


SCHEDULES: dict[str, Callable[..., None]] = {"I/O only": io_only, "single stream": single_stream, "multi stream": multi_stream}
BOOK_SUFFIX = {"I/O only": "io_only", "single stream": "single_stream", "multi stream": "multi_stream"}


def run(p: ConvolutionPipeline, schedule: str) -> float:
    """Run one schedule from a poisoned C and wait; return the max relative error (NaN for 'I/O only', which convolves nothing)."""
    from .timing import synchronize

    p.c[...] = np.nan
    SCHEDULES[schedule](p)
    synchronize()
    return float("nan") if schedule == "I/O only" else max_relative_error(p)


def time_run(run_once: Callable[[], object], repeat: int | None = None) -> Timing:
    """Time a whole loop over the planes, ms per run: CUDA events before and after each plain run, median of `repeat`.

    No gate here (`gpucourse.benchmark` holds the GPU until the host has queued everything): one run
    queues thousands of operations, more than a stream's queue holds, so the host would wait on a
    full queue behind a closed gate. A run lasts tens of milliseconds and the host issues it faster
    than the GPU executes it, so the events measure the GPU's time, as a program running the loop sees it.
    """
    if mode.is_simulator():
        return benchmark(run_once, repeat=repeat, warmup=1)
    from .timing import back_to_back_us

    run_once()  # warm-up: every plan made, every kernel loaded
    samples = tuple(back_to_back_us(run_once, calls=1) / 1e3 for _ in range(repeat or 10))
    return Timing(samples, 1, "CUDA events around each run (no gate: see convolution.time_run)", back_to_back_ms=float(np.median(samples)))


def time_schedules(p: ConvolutionPipeline, repeat: int | None = None) -> dict[str, Timing]:
    """Time each loop as a whole (every copy and transform of every plane), ms per run."""
    return {name: time_run(lambda loop=loop: loop(p), repeat) for name, loop in SCHEDULES.items()}


def record_timeline(p: ConvolutionPipeline, schedule: str, planes: int | None = None) -> Timeline:
    """Run `schedule` on the first `planes` planes with a span around every copy and compute; return the Timeline.

    On a GPU the streams are held (behind the gate kernel of `gpucourse.timing`, on the legacy default
    stream, which the pipeline's streams wait for) until the host has queued every operation and
    its events: recording an event costs the host microseconds, and a timeline paced by the host
    would show the host, not the GPU. The queued planes must fit in the streams' queues: keep `planes` small.
    """
    if planes is not None and planes < p.planes:
        p = ConvolutionPipeline(p.a[:planes], p.b[:planes], p.c[:planes], p.a_dev, p.b_dev, p.streams, p.computes, p.timeline_streams)
    if mode.is_simulator():
        recorder = TimelineRecorder()
        SCHEDULES[schedule](p, recorder)
        return recorder.finish()
    import cupy
    from numba import cuda

    from .errors import TimingError
    from .timing import _gate_for_device

    gate = _gate_for_device(cuda.get_current_device().id)
    gate.close(cupy.cuda.Stream.null, 5000.0)
    try:
        recorder = TimelineRecorder()  # its origin event waits behind the gate too
        SCHEDULES[schedule](p, recorder)
    finally:
        gate.open()
    timeline = recorder.finish()
    if gate.timed_out():
        raise TimingError(f"the gate held the streams for 5 s while the host queued {p.planes} planes: record fewer planes")
    return timeline


# ---------------------------------------------------------------------------------------------
# What bounds the run: the book's estimate and a model from the pieces


def book_estimate(io_only_time: float, single_stream_time: float) -> float:
    """The book's expected time with perfect overlap: the compute (single stream - I/O only) or 2/3 of the I/O, whichever is longer.

    Two of every three copies go host to device; with a copy engine each way, those two set the
    pace of the copies while the third runs beside them, so the copies need 2/3 of the I/O-only time.
    """
    compute = single_stream_time - io_only_time
    return max(compute, 2.0 * io_only_time / 3.0)


@dataclass(frozen=True)
class PlaneTimes:
    """GPU time (ms) of each piece of one plane measured alone: the two copies in, the compute, the copy out."""

    h2d_ms: float
    compute_ms: float
    d2h_ms: float
    plane_bytes: int
    simulated: bool

    @property
    def h2d_gbs(self) -> float:
        """Host-to-device bandwidth of the two copies in, GB/s."""
        return effective_bandwidth_gbs(2 * self.plane_bytes, self.h2d_ms)

    @property
    def d2h_gbs(self) -> float:
        """Device-to-host bandwidth of the copy out, GB/s."""
        return effective_bandwidth_gbs(self.plane_bytes, self.d2h_ms)

    @property
    def bound(self) -> str:
        """Which piece is the longest: 'transfers (host to device)', 'transfers (device to host)' or 'compute'."""
        longest = max(self.h2d_ms, self.compute_ms, self.d2h_ms)
        if longest == self.compute_ms:
            return "compute"
        return "transfers (host to device)" if longest == self.h2d_ms else "transfers (device to host)"

    def predicted_ms(self, planes: int) -> tuple[float, float]:
        """A model, not a measurement: (one stream, perfectly overlapped) ms for `planes` planes.

        One stream: every piece of every plane in turn. Overlapped: one plane's pieces, then the
        longest piece once per further plane (a copy engine each way and the compute all busy at once).
        """
        per_plane = self.h2d_ms + self.compute_ms + self.d2h_ms
        return planes * per_plane, per_plane + (planes - 1) * max(self.h2d_ms, self.compute_ms, self.d2h_ms)


def measure_plane_times(p: ConvolutionPipeline, repeat: int | None = None) -> PlaneTimes:
    """Time one plane's copies in (A and B), its compute and its copy out, each alone, on stream 0."""
    stream = p.streams[0]
    h2d, compute, d2h = _plane_ops(p, None)
    copies_in = benchmark(lambda: h2d(0, 0), repeat=repeat, stream=stream)
    work = benchmark(lambda: compute(0, 0), repeat=repeat, stream=stream)
    copy_back = benchmark(lambda: d2h(0, 0), repeat=repeat, stream=stream)
    return PlaneTimes(copies_in.median_ms, work.median_ms, copy_back.median_ms, p.plane_bytes, copies_in.simulated)


def overlap_table(times: dict[str, Timing], planes: int, plane_shape: tuple[int, int], device_name: str):
    """Then and now: the book's three loops on the K20X and the K10 (ms) beside this device's, with the book's estimate."""
    from . import book
    from .report import Table

    headers = ["loop", "book K20X (ms)", "book K10 (ms)", "book K10, copies reordered (ms)", f"now: {device_name} (ms)"]
    setup = book.figure("ch7_conv_io_only_K20X")  # the figures' notes start with the book's problem: planes, size, streams
    table = Table(headers, title=f"FFT convolution of {planes} planes of {plane_shape[0]} x {plane_shape[1]}: the book's times beside this device's",
                  notes=[f"Book: {setup.notes.split(';')[0]} ({setup.where})."])
    for name in SCHEDULES:
        suffix = BOOK_SUFFIX[name]
        row = [name, 1e3 * book.figure(f"ch7_conv_{suffix}_K20X").number, 1e3 * book.figure(f"ch7_conv_{suffix}_K10").number,
               1e3 * book.figure(f"ch7_conv_{suffix}_fixed_K10").number, round(times[name].median_ms, 3)]
        table.rows.append(row)
    io, single = (times[name].median_ms for name in ("I/O only", "single stream"))
    book_k20x = book_estimate(book.figure("ch7_conv_io_only_K20X").number, book.figure("ch7_conv_single_stream_K20X").number)
    book_k10 = book_estimate(book.figure("ch7_conv_io_only_K10").number, book.figure("ch7_conv_single_stream_K10").number)
    table.rows.append(["estimate: max(single - I/O, 2/3 I/O)", round(1e3 * book_k20x, 1), round(1e3 * book_k10, 1), None,
                       round(book_estimate(io, single), 3)])
    if any(t.simulated for t in times.values()):
        table.notes.append("Simulator: every operation runs alone, in order; these times say nothing about a GPU.")
    return table


def transfer_floor_ms(p: ConvolutionPipeline, h2d_gbs: float, d2h_gbs: float) -> float:
    """The least time the copies of one run can take with a copy engine each way: max(bytes in / H2D rate, bytes out / D2H rate), ms."""
    bytes_in, bytes_out = 2 * p.planes * p.plane_bytes, p.planes * p.plane_bytes
    return 1e3 * max(bytes_in / (h2d_gbs * 1e9), bytes_out / (d2h_gbs * 1e9))


def describe(p: ConvolutionPipeline) -> str:
    """One line: planes, plane shape and dtype, bytes per stack, streams."""
    ny, nx = p.a.shape[1:]
    return (f"{p.planes} planes of {ny} x {nx} {p.a.dtype.name} ({data_size(p.planes * p.plane_bytes)} per stack, "
            f"{data_size(3 * p.planes * p.plane_bytes)} pinned in all), {p.slots} stream(s)")
