"""Chapter 2's measurements, their part of the then-and-now report, and `python -m gpucourse bench`."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

import gpucourse
from gpucourse import bench, book, mode
from gpucourse.kernels import metrics
from gpucourse.thenandnow import ch2, core


@pytest.fixture(scope="module")
def report():
    return bench.measure(repeat=1 if mode.is_simulator() else 5)


def test_measure_covers_the_chapter(report):
    assert report.simulated == mode.is_simulator()
    assert sorted(report.copy_sweep_gbs) == sorted(gpucourse.problem_size("ch2_block_sizes"))
    assert all(g > 0 for g in report.copy_sweep_gbs.values()) and report.ilp_gbs > 0 and report.wide_gbs > 0
    assert set(report.limit) == {False, True}
    for fastmath, times in report.limit.items():
        assert times.fastmath == fastmath and times.n == gpucourse.problem_size("ch2_limit")
    tpb, gbs = report.best_copy
    assert gbs == max(report.copy_sweep_gbs.values()) and report.copy_sweep_gbs[tpb] == gbs
    name, fastest = report.best_copy_class
    assert fastest >= gbs and "threads per block" in name
    if mode.on_gpu():
        assert report.same_size_memcpy_gbs > 0 and report.launch.host_ms_per_call > 0
    else:
        assert report.same_size_memcpy_gbs is None


def test_report_sets_the_book_beside_this_device(report):
    ctx = core.Context.make(repeat=1)
    sections = {section.title.split(" (")[0]: section for section in ch2.sections(report, ctx)}
    rows = {row.quantity: row for section in sections.values() for row in section.rows}
    peaks = rows["theoretical peak bandwidth (2 × memory clock × bus width)"]
    assert [c.text for c in peaks.book] == ["76.80 GB/s", "102.40 GB/s", "144.00 GB/s", "160.00 GB/s", "208.00 GB/s"]
    assert all(c.fraction is None for c in peaks.book)  # a ceiling is not set against another ceiling
    tpb, best = report.best_copy
    here = "" if mode.is_simulator() else f"; here {tpb} threads per block"  # the simulator's best block size means nothing
    copy = rows[f"simple copy kernel at its best block size (Table 2.1){here}"]
    assert copy.here == best and [c.fraction for c in copy.book] == [pytest.approx(1.0)] * 4
    fast = rows["base kernel effective bandwidth, fast math (Tesla K20)"]
    assert fast.book[0].fraction == pytest.approx(book.figure("ch2_effbw_base_fastmath_K20").number / 145.0)
    verdict = rows["limiting factor, no fast math"]
    assert "book C2050: math-bound" in verdict.note and "book K20: memory-bound" in verdict.note  # computed from the book's times
    if mode.is_simulator():  # no verdict from simulated times
        assert verdict.here is None and "this device: not measured in the simulator" in verdict.note
    else:
        assert verdict.here.split()[0] == report.limit[False].classification.label
    scaled = rows["base kernel time, no fast math (here scaled to the book's n = 8 Mi)"]
    assert scaled.here == pytest.approx(1e3 * report.limit[False].base.median_ms * metrics.BOOK_LIMIT_N / report.limit[False].n)
    if mode.is_simulator():
        assert all(row.here_fraction is None for row in rows.values())  # no fraction of a GPU ceiling without a GPU
    else:
        ceiling = rows["device-to-device copy (the practical ceiling)"]
        assert ceiling.here_fraction == pytest.approx(1.0)


def test_cli_bench_and_info():
    result = subprocess.run([sys.executable, "-m", "gpucourse", "bench", "--repeat", "1"], capture_output=True, text=True, cwd=ROOT,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert "then and now" in result.stdout and "K20" in result.stdout and "limiting factor" in result.stdout
    if mode.is_simulator():
        assert "every time below is a simulator time" in result.stdout
    else:
        assert "GPU MODE" in result.stdout
    info = subprocess.run([sys.executable, "-m", "gpucourse", "info", "--no-ceilings"], capture_output=True, text=True, cwd=ROOT)
    assert info.returncode == 0 and "Device:" in info.stdout
    help_text = subprocess.run([sys.executable, "-m", "gpucourse", "--help"], capture_output=True, text=True, cwd=ROOT).stdout
    assert "bench" in help_text and "exercises" in help_text and "info" in help_text
