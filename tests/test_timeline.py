"""The timeline of copies and kernels: interval arithmetic by hand, the engine model, and a real recording."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402

import gpucourse  # noqa: E402
from gpucourse import mode  # noqa: E402
from gpucourse.kernels import intro  # noqa: E402
from gpucourse.timeline import Span, Timeline, TimelineRecorder, _union_ms, maybe_span, serialize_by_kind  # noqa: E402


def test_union_counts_overlaps_once():
    assert _union_ms([]) == 0.0
    assert _union_ms([(0.0, 1.0), (0.5, 2.0), (3.0, 4.0)]) == pytest.approx(3.0)
    assert _union_ms([(2.0, 3.0), (0.0, 5.0)]) == pytest.approx(5.0)


def two_stream_timeline() -> Timeline:
    # stream 1: H2D 0-2, kernel 2-3, D2H 3-5; stream 2: H2D 2-4, kernel 4-5, D2H 5-7 (ms)
    spans = (Span("stream 1", "H2D", "H2D 1", 0, 2), Span("stream 1", "kernel", "kernel 1", 2, 3), Span("stream 1", "D2H", "D2H 1", 3, 5),
             Span("stream 2", "H2D", "H2D 2", 2, 4), Span("stream 2", "kernel", "kernel 2", 4, 5), Span("stream 2", "D2H", "D2H 2", 5, 7))
    return Timeline(spans, "CUDA events per stream")


def test_busy_and_overlap_by_hand():
    timeline = two_stream_timeline()
    assert timeline.total_ms == pytest.approx(7.0)
    assert timeline.busy_ms("H2D") == pytest.approx(4.0)
    assert timeline.busy_ms("kernel") == pytest.approx(2.0)
    assert timeline.busy_ms() == pytest.approx(7.0)
    # two kinds at once: H2D 2 beside kernel 1 (2-3) and D2H 1 (3-4); D2H 1 beside kernel 2 (4-5): 3 ms
    assert timeline.overlap_ms() == pytest.approx(3.0)
    assert timeline.lanes == ["stream 1", "stream 2"]
    shuffled = Timeline(tuple(Span(f"stream {k}", "kernel", "k", 0, 1) for k in (10, 2, 1)), "CUDA events per stream")
    assert shuffled.lanes == ["stream 1", "stream 2", "stream 10"]
    assert not timeline.simulated and "two kinds at once for 3 ms" in timeline.summary()


def test_serialize_by_kind_waits_for_the_engine():
    # Both copies were reached at t=0, but one copy engine ran them one after the other (ends at 2 and 4).
    raw = [Span("stream 1", "H2D", "a", 0, 2), Span("stream 2", "H2D", "b", 0, 4), Span("stream 2", "kernel", "k", 4, 5)]
    spans = {s.label: s for s in serialize_by_kind(raw)}
    assert (spans["a"].start_ms, spans["a"].end_ms) == (0, 2)
    assert (spans["b"].start_ms, spans["b"].end_ms) == (2, 4)  # started when the engine was free
    assert (spans["k"].start_ms, spans["k"].end_ms) == (4, 5)


def test_plot_has_a_row_per_lane():
    ax = two_stream_timeline().plot(title="two streams")
    ax.figure.canvas.draw()  # tick labels are filled in when the figure is drawn
    assert [label.get_text() for label in ax.get_yticklabels()] == ["stream 2", "stream 1"]
    assert ax.get_xlim() == pytest.approx((0.0, 7.14))
    assert ax.get_title(loc="left") == "two streams"


def test_recording_real_copies_and_a_kernel():
    n = gpucourse.problem_size("increment")
    host = cuda.pinned_array(n, np.float32)
    host[:] = gpucourse.random_array(n, np.float32, seed=1)
    expected = host + np.float32(1)
    device = cuda.device_array(n, np.float32)
    stream = cuda.stream()
    recorder = TimelineRecorder()
    with recorder.span("stream 1", "H2D", "in", stream):
        device.copy_to_device(host, stream=stream)
    with recorder.span("stream 1", "kernel", "increment", stream):
        intro.increment_kernel[gpucourse.validate.blocks_to_cover(n, 64), 64, stream](device, np.float32(1))
    with maybe_span(None, "stream 1", "D2H", "untimed", stream):  # no recorder: nothing recorded
        pass
    with recorder.span("stream 1", "D2H", "out", stream):
        device.copy_to_host(host, stream=stream)
    timeline = recorder.finish()
    np.testing.assert_array_equal(host, expected)
    assert [s.label for s in timeline.spans] == ["in", "increment", "out"]
    assert all(s.end_ms >= s.start_ms >= 0 for s in timeline.spans)
    assert timeline.spans[0].end_ms <= timeline.spans[1].start_ms + 1e-3  # one stream: in order
    if mode.on_gpu():
        assert timeline.clock == "CUDA events per stream" and not timeline.simulated
    else:
        assert timeline.simulated and "nothing can overlap" in timeline.summary()
        assert timeline.overlap_ms() == 0.0
