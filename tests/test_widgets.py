"""The widget logic without a browser: tuning, caching, series, plot data, tables, and the widgets themselves."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import gpucourse  # noqa: E402
from gpucourse import mode, plotting, widgets  # noqa: E402
from gpucourse.device import DeviceInfo  # noqa: E402
from gpucourse.kernels import metrics  # noqa: E402
from gpucourse.timing import Ceilings  # noqa: E402

GPU_CEILINGS = Ceilings("a GPU", theoretical_gbs=3352.0, copy_gbs=3000.0, copy_bytes=2**30, simulated=False)


def small_device(**changes) -> DeviceInfo:
    base = dict(name="test GPU", compute_capability=(9, 0), simulated=False, warp_size=32, max_threads_per_block=1024)
    return DeviceInfo(**{**base, **changes})


def test_block_size_lists():
    assert widgets.warp_multiples(small_device()) == list(range(32, 1025, 32))
    assert widgets.warp_multiples(small_device(), largest=128) == [32, 64, 96, 128]
    assert widgets.warp_multiples(small_device(max_threads_per_block=512), largest=4096)[-1] == 512
    assert widgets.power_of_two_block_sizes(small_device()) == [32, 64, 128, 256, 512, 1024]


@pytest.fixture()
def copy_arrays():
    n = gpucourse.problem_size("ch2_test")
    inp = gpucourse.to_device(gpucourse.random_array(n, np.float32, seed=1))
    out = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    return n, inp, out


def make_copy_tuner(copy_arrays, ceilings=None):
    n, inp, out = copy_arrays
    calls = []

    def launch(out_, inp_, threads_per_block, elements_per_thread, access_bytes):
        calls.append((threads_per_block, elements_per_thread, access_bytes))
        metrics.copy_variant(out_, inp_, threads_per_block, elements_per_thread, access_bytes)

    tuner = widgets.block_size_tuner(launch, out, inp, bytes_moved=8 * n, name="copy", ceilings=ceilings, largest=64,
                                     elements_per_thread=[1, 4], access_bytes=[4, 16])
    tuner.repeat, tuner.warmup = 1, 0  # the logic, not the speed, is under test
    return tuner, calls


def test_tuner_measures_caches_and_copies(copy_arrays):
    n, inp, out = copy_arrays
    tuner, calls = make_copy_tuner(copy_arrays)
    assert tuner.parameters == {"threads_per_block": [32, 64], "elements_per_thread": [1, 4], "access_bytes": [4, 16]}
    first = tuner.measure(threads_per_block=64, elements_per_thread=4, access_bytes=16)
    assert first.params == {"threads_per_block": 64, "elements_per_thread": 4, "access_bytes": 16}
    np.testing.assert_array_equal(gpucourse.to_host(out), gpucourse.to_host(inp))  # the tuned launches really copy
    launches = len(calls)
    again = tuner.measure(access_bytes=16, elements_per_thread=4, threads_per_block=64)  # same config, other order
    assert again is first and len(calls) == launches and tuner.calls_made == 1  # cached: nothing relaunched
    assert first.bytes_moved == 8 * n
    assert first.gbs == pytest.approx(8 * n / (first.timing.median_ms * 1e-3) / 1e9)
    defaults = tuner.measure()  # parameters left out take their first value
    assert defaults.params == {"threads_per_block": 32, "elements_per_thread": 1, "access_bytes": 4}
    with pytest.raises(KeyError, match="unknown parameter"):
        tuner.measure(blocks=3)


def test_sweep_series_best_and_table(copy_arrays):
    tuner, _ = make_copy_tuner(copy_arrays, ceilings=GPU_CEILINGS)
    for ept in (1, 4):
        measured = tuner.sweep("threads_per_block", elements_per_thread=ept, access_bytes=4)
        assert [m.params["threads_per_block"] for m in measured] == [32, 64]
    x, gbs = tuner.series("threads_per_block", elements_per_thread=4, access_bytes=4)
    assert x == [32, 64] and len(gbs) == 2 and all(g > 0 for g in gbs)
    lines = tuner.series_by("threads_per_block", "elements_per_thread", access_bytes=4)
    assert list(lines) == ["elements per thread = 1", "elements per thread = 4"]
    assert tuner.series("threads_per_block", elements_per_thread=1, access_bytes=16) == ([], [])  # nothing measured there
    best = tuner.best()
    assert best.gbs == max(m.gbs for m in tuner.cache.values())
    assert tuner.best(elements_per_thread=1).params["elements_per_thread"] == 1
    table = tuner.table(access_bytes=4)
    assert len(table.rows) == 4 and table.rows[0][:3] == [32, 1, 4]
    if mode.is_simulator():  # simulated times: the time, labelled, and no GB/s or fraction of a ceiling
        assert table.headers[3:] == ["simulator time (ms)"] and "GB/s not measured in the simulator" in table.notes[0]
        assert table.rows[0][3] == tuner.cache[(("access_bytes", 4), ("elements_per_thread", 1), ("threads_per_block", 32))].timing.median_ms
        assert tuner.describe(best).startswith("copy, threads per block ") and "ms of simulator wall clock; GB/s not measured in the " \
            "simulator" in tuner.describe(best) and "{" not in tuner.describe(best)
        assert not re.search(r"\d GB/s", tuner.describe(best) + str(table))
    else:
        assert table.headers[-1] == "fraction of copy"
        assert table.rows[0][-1] == pytest.approx(table.rows[0][-2] / 3000.0)
        assert tuner.describe(best).startswith("copy, threads per block ") and "of the measured copy" in tuner.describe(best)
    with pytest.raises(KeyError, match="another parameter"):
        tuner.series_by("threads_per_block", "threads_per_block")
    with pytest.raises(ValueError, match="nothing measured"):
        make_copy_tuner(copy_arrays)[0].best()


def test_sweep_skips_refused_configurations(copy_arrays):
    tuner, _ = make_copy_tuner(copy_arrays)
    refused = 2 * gpucourse.current_device().max_threads_per_block
    with pytest.raises(gpucourse.LaunchConfigError, match="limit"):
        tuner.sweep("threads_per_block", [32, refused])
    measured = tuner.sweep("threads_per_block", [32, refused], skip_refused=True)
    assert [m.params["threads_per_block"] for m in measured] == [32]
    assert any("LaunchConfigError" in message for message in tuner.refused.values())


def test_tuner_rejects_empty_parameters():
    with pytest.raises(ValueError, match="at least one"):
        widgets.Tuner(lambda: None, 1.0, {})
    with pytest.raises(ValueError, match="offer no values"):
        widgets.Tuner(lambda **c: None, 1.0, {"threads_per_block": []})


def test_plot_data_holds_what_the_plot_shows(copy_arrays):
    tuner, _ = make_copy_tuner(copy_arrays, ceilings=GPU_CEILINGS)
    tuner.sweep("threads_per_block", elements_per_thread=1, access_bytes=4)
    data = tuner.plot_data("threads_per_block", highlight={"threads_per_block": 64}, elements_per_thread=1, access_bytes=4)
    (label, (x, gbs)), = data.lines.items()
    assert label == "copy" and x == [32, 64]
    assert data.theoretical_gbs == 3352.0 and data.copy_gbs == 3000.0
    assert data.fractions_of_copy("copy") == pytest.approx([g / 3000.0 for g in gbs])
    assert data.highlight == (64, gbs[1])
    assert data.simulated == mode.is_simulator()
    by = tuner.plot_data("threads_per_block", by="elements_per_thread", access_bytes=4)
    assert list(by.lines) == ["copy, elements per thread = 1"]
    simulated = widgets.Tuner(lambda **c: (lambda: None), 1.0, {"a": [1]},
                              ceilings=Ceilings("sim", None, 10.0, 1, simulated=True)).plot_data("a")
    assert simulated.copy_gbs is None and simulated.theoretical_gbs is None and simulated.fractions_of_copy("kernel") is None


def test_plot_draws_lines_ceilings_and_marks(copy_arrays, tmp_path):
    tuner, _ = make_copy_tuner(copy_arrays, ceilings=GPU_CEILINGS)
    tuner.sweep("threads_per_block", elements_per_thread=1, access_bytes=4)
    tuner.sweep("threads_per_block", elements_per_thread=4, access_bytes=4)
    ax = tuner.plot("threads_per_block", by="elements_per_thread", highlight={"threads_per_block": 32}, access_bytes=4)
    assert ax.get_xlabel() == "threads per block"
    if mode.is_simulator():  # no GB/s axis, no curve of Python threads' rates: a row of dots per line where configurations ran
        assert ax.get_ylabel() == "" and [t.get_text() for t in ax.get_yticklabels()] == ["copy, elements per thread = 1",
                                                                                        "copy, elements per thread = 4"]
        assert {tuple(line.get_ydata()) for line in ax.get_lines()} == {(0, 0), (1, 1), (0,)}  # two rows and the star
        assert plotting.is_simulator_plot(ax) and "not measured in the simulator" in ax.texts[0].get_text()
        assert "GB/s" not in " ".join(t.get_text() for t in ax.texts) + ax.get_ylabel()
    else:
        labels = [line.get_label() for line in ax.get_lines()]
        assert "copy, elements per thread = 1" in labels and "copy, elements per thread = 4" in labels
        assert "theoretical peak 3352 GB/s" in labels and "measured copy 3000 GB/s" in labels and "current" in labels
        assert ax.get_ylim()[0] == 0 and not plotting.is_simulator_plot(ax)
    png = tmp_path / "tuner.png"
    ax.figure.savefig(png, dpi=60)
    assert png.stat().st_size > 5000 and png.read_bytes()[:4] == b"\x89PNG"
    plt.close("all")


def test_plot_bandwidth_and_bars_keep_their_api(tmp_path):
    ax = plotting.plot_bandwidth([32, 64], [100.0, 200.0], xlabel="threads", ceilings=GPU_CEILINGS, label="k", simulated=True)
    assert any("simulator" in t.get_text() for t in ax.texts)
    ax = plotting.bar_bandwidth(["a", "b"], [0.001, 2500.0], ceilings=GPU_CEILINGS)
    assert [t.get_text() for t in ax.texts] == ["0.001", "2500"]
    plotting.add_fraction_axis(ax, GPU_CEILINGS)
    plt.close("all")


def test_widget_builds_and_reruns(copy_arrays):
    tuner, calls = make_copy_tuner(copy_arrays, ceilings=GPU_CEILINGS)
    box = tuner.widget()
    controls = box.tuner_controls
    assert set(controls) == {"threads_per_block", "elements_per_thread", "access_bytes"}
    assert type(controls["threads_per_block"]).__name__ == "SelectionSlider"
    assert tuner.calls_made == 1  # the widget measured its first configuration
    controls["threads_per_block"].value = 64  # what moving the slider does
    assert tuner.calls_made == 2 and (64, 1, 4) in calls
    controls["threads_per_block"].value = 32  # back: cached
    assert tuner.calls_made == 2
    note = box.children[0].value
    assert ("Simulator mode" in note) == mode.is_simulator()
    plt.close("all")


def test_sweep_button_says_what_it_did(copy_arrays, capsys):
    """A sweep that finds every value measured already changes nothing on screen: the widget says so in words."""
    tuner, _ = make_copy_tuner(copy_arrays, ceilings=GPU_CEILINGS)
    box = tuner.widget()  # measures 32 (its first configuration)
    capsys.readouterr()
    box.tuner_sweep.click()  # measures 64 (outside a notebook the Output area's prints reach stdout)
    assert tuner.calls_made == 2
    assert "sweep of threads per block: 1 value measured now, 1 taken from the cache" in capsys.readouterr().out
    box.tuner_sweep.click()  # nothing left to measure
    again = capsys.readouterr().out.strip().splitlines()[-1]
    assert tuner.calls_made == 2
    assert again == "sweep of threads per block: all 2 values were measured before (cached), so the plot shows them already"
    plt.close("all")
