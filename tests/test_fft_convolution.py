"""FFT convolution of a stack of planes on streams: every loop gives the circular convolution; the book's estimate; the timeline."""

from __future__ import annotations

import numpy as np

import gpucourse
from gpucourse import book
from gpucourse import convolution as conv

xp = gpucourse.array_module()
PLANE, PLANES, STREAMS = gpucourse.problem_size("ch7_convolution")
TEST_PLANE = (6, 10) if gpucourse.is_simulator() else (48, 80)


def test_one_plane_against_the_definition():
    a = gpucourse.random_array(TEST_PLANE, np.complex64, seed=1)
    b = gpucourse.random_array(TEST_PLANE, np.complex64, seed=2)
    a_dev, b_dev = xp.array(a, copy=True), xp.array(b, copy=True)
    conv.convolve_plane(a_dev, b_dev)
    want = conv.direct_circular_convolution(a, b)
    np.testing.assert_allclose(gpucourse.to_host(b_dev), want, rtol=0, atol=1e-5 * np.max(np.abs(want)))


def test_every_loop_convolves_every_plane():
    planes = min(PLANES, 2 * STREAMS + 1)  # every stream used twice, and one more plane
    p = conv.make_pipeline(PLANE, planes, STREAMS)
    assert conv.run(p, "I/O only") != conv.run(p, "I/O only")  # NaN: nothing convolved
    np.testing.assert_array_equal(p.c, p.a)  # ... but every plane of A went in and came back
    for schedule in ("single stream", "multi stream"):
        assert conv.run(p, schedule) < 1e-5, schedule
        assert conv.max_relative_error(p, range(planes)) < 1e-5


def test_the_book_estimate_reproduces_the_book():
    """max(single - I/O, 2/3 I/O): 0.149 s on the K20X ("0.15 s") and the compute, 0.092 s, on the K10."""
    figure = lambda name: book.figure(name).number  # noqa: E731
    k20x = conv.book_estimate(figure("ch7_conv_io_only_K20X"), figure("ch7_conv_single_stream_K20X"))
    k10 = conv.book_estimate(figure("ch7_conv_io_only_K10"), figure("ch7_conv_single_stream_K10"))
    assert abs(k20x - 0.15) < 0.002
    assert abs(k10 - figure("ch7_conv_compute_K10")) < 0.0005
    assert k10 > figure("ch7_conv_two_thirds_io_K10")


def test_plane_times_model():
    times = conv.PlaneTimes(h2d_ms=2.0, compute_ms=1.0, d2h_ms=1.0, plane_bytes=10**6, simulated=False)
    assert times.bound == "transfers (host to device)"
    assert times.predicted_ms(10) == (40.0, 4.0 + 9 * 2.0)
    assert times.h2d_gbs == 1.0 and times.d2h_gbs == 1.0
    assert conv.PlaneTimes(1.0, 3.0, 1.0, 1, False).bound == "compute"


def test_the_timeline_has_every_copy_and_compute():
    p = conv.make_pipeline(PLANE, min(PLANES, 4), STREAMS)
    timeline = conv.record_timeline(p, "multi stream", planes=3)
    kinds = [span.kind for span in timeline.spans]
    assert kinds.count("H2D") == kinds.count("kernel") == kinds.count("D2H") == 3
    assert len(timeline.lanes) == min(3, STREAMS)
    assert conv.max_relative_error(p, range(3)) < 1e-5
