"""What a newcomer sees: numbers never shown as 0.0, simulated rates and conclusions said to be unmeasured, a busy sign
while a widget measures, whole button labels, integer ticks for integer parameters, no roof from the simulator, a failed
check as its message, and `./course --help` that exits 0."""

from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402  (after gpucourse: it picks the mode)

import gpucourse  # noqa: E402
from gpucourse import roofline, widgets  # noqa: E402
from gpucourse.checks import CheckFailed, ch1, short_traceback  # noqa: E402
from gpucourse.report import number  # noqa: E402
from gpucourse.timing import Timing  # noqa: E402


@pytest.mark.parametrize(("value", "text"), [(1.234e-5, "1.23e-05"), (0.0042, "4.20e-03"), (0.5, "0.5"), (12.345, "12.3"),
                                             (3004.4, "3004"), (0.0, "0"), (-2.5e-7, "-2.50e-07")])
def test_numbers_keep_their_digits(value, text):
    assert number(value) == text


def fake_timing(ms: float) -> Timing:
    return Timing(samples_ms=(ms,), calls_per_sample=1, clock="test")


def test_tuner_line_shows_a_tiny_rate_as_it_is():
    tuner = widgets.Tuner(lambda **c: (lambda: None), 1.0, {"threads_per_block": [32]})
    line = tuner.describe(widgets.Measurement((("threads_per_block", 32),), fake_timing(80.0), 1000.0))
    assert ": 1.25e-05 GB/s" in line and "0.0 GB/s" not in line


def test_simulated_rates_and_conclusions_are_said_to_be_unmeasured():
    """In the simulator a line shows the time, labelled, and says which rate or conclusion it does not give: never '0.0 GB/s'."""
    simulated = Timing(samples_ms=(80.0,), calls_per_sample=1, clock="simulator wall clock")
    tuner = widgets.Tuner(lambda **c: (lambda: None), 1.0, {"threads_per_block": [32]})
    line = tuner.describe(widgets.Measurement((("threads_per_block", 32),), simulated, 1000.0))
    assert line == "kernel {'threads_per_block': 32}: 80 ms of simulator wall clock; GB/s not measured in the simulator"
    assert gpucourse.rate(3.5e-05, simulated=True) == "GB/s not measured in the simulator"
    assert gpucourse.rate(912.34, "GFLOP/s", simulated=False) == "912 GFLOP/s" and gpucourse.rate(None, simulated=False) == "—"
    assert gpucourse.finding("padding makes it 1.9x faster", "what padding gains", simulated=False) == "padding makes it 1.9x faster"
    assert gpucourse.finding("padding makes it 0.2x faster", "what padding gains", simulated=True) == \
        "what padding gains: not measured in the simulator"
    assert [gpucourse.data_size(n) for n in (512, 2048, 3 * 2**19, 64 * 2**20, 6.4 * 2**30)] == ["512 B", "2 KiB", "1.5 MiB", "64 MiB", "6.4 GiB"]


def test_course_help_exits_zero_and_a_wrong_command_two():
    import subprocess

    from conftest import ROOT

    for argument in ("--help", "-h", "help"):
        done = subprocess.run([str(ROOT / "course"), argument], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "usage: ./course lab" in done.stdout and "./course site" in done.stdout, done
    wrong = subprocess.run([str(ROOT / "course"), "labb"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "unknown command: labb" in wrong.stderr and wrong.stdout == ""


def test_widget_shows_a_busy_sign_while_it_measures_and_keeps_its_button_label_whole():
    seen = []
    box = None

    def make_call(threads_per_block):
        if box is not None:
            seen.append(box.tuner_status.value)  # what the widget shows while this configuration is measured
        return lambda: None

    tuner = widgets.Tuner(make_call, 1e6, {"threads_per_block": [32, 64, 96]}, repeat=1, warmup=0)
    box = tuner.widget()
    assert box.tuner_status.value == ""
    box.tuner_controls["threads_per_block"].value = 64
    assert len(seen) == 1 and "measuring" in seen[0] and "threads_per_block = 64" in seen[0]
    assert box.tuner_status.value == ""  # gone once the plot is there
    box.tuner_controls["threads_per_block"].value = 32  # cached: no measurement, no sign
    assert len(seen) == 1
    assert box.tuner_sweep.description == "sweep threads_per_block" and box.tuner_sweep.layout.width == "auto"
    box.tuner_sweep.click()
    assert any("every threads_per_block" in text for text in seen) and box.tuner_status.value == ""
    plt.close("all")


def test_integer_parameters_get_integer_ticks():
    tuner = widgets.Tuner(lambda **c: (lambda: None), 1e6, {"streams": [1, 2, 3, 4]}, repeat=1, warmup=0)
    tuner.sweep("streams")
    ax = tuner.plot("streams")
    assert list(ax.get_xticks()) == [1, 2, 3, 4]
    many = widgets.Tuner(lambda **c: (lambda: None), 1e6, {"blocks": list(range(1, 15))}, repeat=1, warmup=0)
    many.sweep("blocks")
    ticks = many.plot("blocks").get_xticks()
    assert all(float(t).is_integer() for t in ticks)
    plt.close("all")


def test_simulator_roofs_give_no_fraction():
    point = roofline.RooflinePoint("k", flops=4e9, bytes_moved=1e9, ms=1.0)  # 4000 GFLOP/s at 4 flop/byte
    simulated = roofline.Roof(bandwidth_gbs=100.0, compute_gflops=1000.0, simulated=True)
    text = roofline.describe_point(point, simulated)
    assert "%" not in text and "GFLOP/s not measured in the simulator" in text and "4000" not in text
    if not gpucourse.is_simulator():
        real = roofline.Roof(bandwidth_gbs=2000.0, compute_gflops=50000.0)
        assert "50% of the roof" in roofline.describe_point(point, real)


@cuda.jit
def add_kernel(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def test_a_failed_check_reads_as_its_message_and_the_calling_line():
    def add_arrays(out, x, y, threads_per_block=64):  # a typical wrong answer: the blocks round down
        add_kernel[out.size // threads_per_block, threads_per_block](out, x, y)

    with pytest.raises(CheckFailed) as failure:
        ch1.check_add_arrays(add_arrays)
    lines = short_traceback(failure.value, failure.tb)
    assert lines[0].startswith("\u274c Exercise 1.1: not yet right.") and "rounded up" in lines[0]
    assert len(lines) == 2 and "ch1.check_add_arrays(add_arrays)" in lines[1]  # the student's own line, nothing of gpucourse
    assert sys.modules["gpucourse.checks"].PACKAGE_DIR.name == "gpucourse"
