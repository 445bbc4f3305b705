"""Roofline arithmetic against hand-computed values, the plot data, the plot and the widget."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import gpucourse  # noqa: E402
from gpucourse import mode, roofline  # noqa: E402
from gpucourse.device import DeviceInfo  # noqa: E402
from gpucourse.kernels import metrics  # noqa: E402
from gpucourse.timing import Ceilings  # noqa: E402

# An H100-like roof: 3000 GB/s copy, 60 000 GFLOP/s of fused multiply-adds. Ridge: 60 000 / 3000 = 20 flop/byte.
ROOF = roofline.Roof(3000.0, 60000.0)


def test_intensity_and_ridge_by_hand():
    assert roofline.arithmetic_intensity(2e9, 12e9) == pytest.approx(1 / 6)  # axpy in float32: 2 flops per 12 bytes
    assert roofline.ridge_point(3000.0, 60000.0) == pytest.approx(20.0)
    assert ROOF.ridge == pytest.approx(20.0)
    assert roofline.gflops(1e9, 1.0) == pytest.approx(1000.0)  # 1e9 flops in 1 ms
    for bad in ((1.0, 0.0), (-1.0, 8.0)):
        with pytest.raises(ValueError):
            roofline.arithmetic_intensity(*bad)
    with pytest.raises(ValueError):
        roofline.ridge_point(0.0, 1.0)
    with pytest.raises(ValueError):
        roofline.gflops(1.0, 0.0)


@pytest.mark.parametrize("intensity, expected", [
    (0.0, 0.0),
    (1 / 6, 500.0),        # axpy: 1/6 x 3000
    (1.0, 3000.0),         # memory-bound: 1 x 3000
    (20.0, 60000.0),       # the ridge: both roofs meet
    (128.0, 60000.0),      # compute-bound: flat
])
def test_attainable_by_hand(intensity, expected):
    assert roofline.attainable_gflops(intensity, 3000.0, 60000.0) == pytest.approx(expected)
    assert ROOF.attainable(intensity) == pytest.approx(expected)


def test_point_properties_by_hand():
    # The intensity kernel with 4 loop steps on 2**20 float32: 32 flops and 8 bytes per element, 4 flop/byte.
    n = 2**20
    point = roofline.RooflinePoint("4 steps", metrics.intensity_flops(n, 4), metrics.intensity_bytes(n, 4), ms=0.004)
    assert point.intensity == pytest.approx(4.0)
    assert point.gbs == pytest.approx(8 * n / 4e-6 / 1e9)               # 2097.152 GB/s
    assert point.gflops == pytest.approx(32 * n / 4e-6 / 1e9)           # 8388.608 GFLOP/s
    assert point.bound(ROOF) == "memory"
    assert point.fraction_of_roof(ROOF) == pytest.approx(8388.608 / 12000.0)
    compute = roofline.RooflinePoint("heavy", 64e9, 1e9, ms=2.0)        # 64 flop/byte, 32 000 GFLOP/s
    assert compute.bound(ROOF) == "compute" and compute.fraction_of_roof(ROOF) == pytest.approx(32000 / 60000)


def test_roof_curve_and_data():
    x, y = roofline.roof_curve(ROOF, 0.1, 1000.0, samples=9)
    assert x[0] == pytest.approx(0.1) and x[-1] == pytest.approx(1000.0) and 20.0 in x  # the ridge is on the curve
    assert y == [ROOF.attainable(v) for v in x] and max(y) == 60000.0
    with pytest.raises(ValueError):
        roofline.roof_curve(ROOF, 0.0, 1.0)
    points = [roofline.RooflinePoint("a", 1e9, 1e9, 1.0), roofline.RooflinePoint("b", 1e11, 1e9, 10.0),
              roofline.RooflinePoint("copy", 0.0, 1e9, 1.0)]
    data = roofline.roofline_data(ROOF, points, extra_roofs=[roofline.Roof(3352.0, 66908.0, "theoretical", "theoretical")])
    assert [p["name"] for p in data.points] == ["a", "b"]  # a kernel without flops has no place on a log-log roofline
    assert data.points[0]["attainable"] == pytest.approx(3000.0) and data.points[1]["bound"] == "compute"
    assert data.curve_x[0] == pytest.approx(1.0 / 4) and data.curve_x[-1] == pytest.approx(100.0 * 4)
    assert len(data.extra_curves) == 1 and data.ridge == pytest.approx(20.0)
    table = roofline.roofline_table(data)
    assert table.rows[1][0] == "b" and table.rows[1][-1] == "compute" and "ridge at 20" in table.title


def test_device_roofs(device):
    ceilings = gpucourse.bandwidth_ceilings()
    roof, extras = roofline.device_roofs(ceilings, 1234.0)
    assert roof.bandwidth_gbs == ceilings.copy_gbs and roof.compute_gflops == 1234.0
    if mode.is_simulator():
        assert roof.simulated and extras == []
    else:
        expected = metrics.theoretical_fp32_gflops(device.multiprocessors, device.clock_rate_khz, device.compute_capability)
        assert [e.compute_gflops for e in extras] == ([expected] if expected else [])
    gpu = DeviceInfo(name="H100-like", compute_capability=(9, 0), simulated=False, multiprocessors=132, clock_rate_khz=1_980_000,
                     memory_clock_khz=2_619_000, memory_bus_bits=5120)
    _, extras = roofline.device_roofs(Ceilings("H100-like", 3352.32, 3000.0, 1, False), 50000.0, gpu)
    assert extras[0].compute_gflops == pytest.approx(66908.16) and extras[0].bandwidth_gbs == pytest.approx(3352.32)


def test_plot_roofline_and_png(tmp_path):
    points = [roofline.RooflinePoint(f"{s} steps", 8.0 * s * 1e6, 8e6, 0.01 * s) for s in (1, 8, 64)]
    data = roofline.roofline_data(ROOF, points)
    ax = roofline.plot_roofline(data, highlight="8 steps")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(label.startswith("roof: measured copy 3000 GB/s") for label in labels) and "8 steps" in labels
    png = tmp_path / "roofline.png"
    ax.figure.savefig(png, dpi=60)
    assert png.stat().st_size > 5000
    plt.close("all")


def test_a_simulated_roof_shows_no_figures():
    """A host memory copy set against simulated flops is no roof: intensities only, no GFLOP/s, GB/s, ridge or side."""
    simulated = roofline.Roof(18.7, 0.000156, simulated=True)
    point = roofline.RooflinePoint("16 steps", 16 * 8e3, 8e3, 40.0)
    data = roofline.roofline_data(simulated, [point])
    table = roofline.roofline_table(data)
    assert table.headers == ["kernel", "flop/byte"] and table.rows == [["16 steps", 16.0]]
    assert "not measured in the simulator" in table.notes[0]
    text = roofline.describe_point(point, simulated)
    assert text.startswith("16 steps: 16 flop/byte; GFLOP/s not measured in the simulator") and "bound" not in text
    labels = [line.get_label() for line in roofline.plot_roofline(data).get_lines()]
    assert not any("GB/s" in label or "GFLOP/s" in label for label in labels)
    plt.close("all")


def test_roofline_widget_measures_each_value_once():
    n, steps_list = gpucourse.problem_size("ch2_test"), gpucourse.problem_size("ch2_roofline")[1]
    x = gpucourse.to_device(gpucourse.random_array(n, np.float32, seed=1))
    y = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    measured = []

    def measure(steps):
        measured.append(steps)
        timing = gpucourse.benchmark(lambda: metrics.intensity(y, x, steps), warmup=0, repeat=1)
        return roofline.RooflinePoint(f"{steps} steps", metrics.intensity_flops(n, steps), metrics.intensity_bytes(n, 4), timing.median_ms)

    box = roofline.roofline_widget(measure, steps_list[:2], ROOF)
    box.roofline_slider.value = steps_list[1]
    box.roofline_slider.value = steps_list[0]  # cached
    assert measured == list(steps_list[:2]) and len(box.roofline_cache) == 2
    np.testing.assert_allclose(gpucourse.to_host(y), metrics.intensity_reference(gpucourse.to_host(x), steps_list[1]),
                               rtol=1e-5, atol=1e-6)
    plt.close("all")


def test_a_point_above_the_roof_is_a_wrong_count():
    """On a GPU no kernel beats the roof: a point above it (by more than the noise of the measured roof) raises, saying why."""
    fine = roofline.RooflinePoint("copy-like", 1e6, 8e6, 8e6 / 3000e9 * 1e3 / 1.05)  # 5 % above a measured roof: noise
    assert roofline.roofline_data(ROOF, [fine]).points[0]["fraction_of_roof"] == pytest.approx(1.05)
    wrong = roofline.RooflinePoint("bytes from L2", 1e6, 8e6, 8e6 / 3000e9 * 1e3 / 2)  # twice the copy's rate
    with pytest.raises(ValueError, match=r"2\.00 times the roof there .* a count is wrong: bytes counted that never reach"):
        roofline.roofline_data(ROOF, [wrong])
    simulated = roofline.Roof(5.5, 1e-4, simulated=True)  # the simulator's "roof" is a host copy: its points are not checked
    data = roofline.roofline_data(simulated, [wrong])
    ax = roofline.plot_roofline(data)
    assert ax.get_ylabel() == "" and [line.get_xdata()[0] for line in ax.get_lines()] == [wrong.intensity]  # the intensity only
    assert "not measured in the simulator" in " ".join(t.get_text() for t in ax.texts)
    plt.close("all")
