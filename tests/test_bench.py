"""`python -m gpucourse bench`: the measurements, the then-and-now table, and the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

import gpucourse
from gpucourse import bench, book, mode
from gpucourse.kernels import metrics


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


def test_table_sets_the_book_beside_this_device(report):
    table = bench.bench_table(report)
    assert table.headers == ["quantity", "book figure", "its GPU", "book / its copy ceiling", "this device", "this / measured copy"]
    by_quantity = {}
    for row in table.rows:
        by_quantity.setdefault(row[0], []).append(row)
    peaks = by_quantity["theoretical peak bandwidth"]
    assert [r[1] for r in peaks] == ["144.00 GB/s", "208.00 GB/s"] and [r[2] for r in peaks] == ["Tesla C2050", "Tesla K20"]
    assert peaks[1][3] == pytest.approx(208.0 / 145.0)  # the K20's peak over its Table 2.1 copy, ECC on
    fast = by_quantity["base kernel sin(b), fast math: effective bandwidth"]
    assert [r[1] for r in fast] == ["106 GB/s", "139 GB/s"]
    assert fast[1][3] == pytest.approx(book.figure("ch2_effbw_base_fastmath_K20").number / 145.0)
    verdicts = by_quantity["limiting factor, no fast math (memory / math time over base)"]
    assert verdicts[0][1].startswith("math-bound") and verdicts[1][1].startswith("memory-bound")  # computed from the book's times
    assert verdicts[0][4].split()[0] == report.limit[False].classification.label
    slow = [r for r in table.rows if r[0].startswith("base kernel sin(b), no fast math")]
    assert slow[1][1] == f"{metrics.BOOK_LIMIT_N * 8 / 529.568e-6 / 1e9:.0f} GB/s (from its time)"
    text = str(table)
    if mode.is_simulator():
        assert text.startswith("SIMULATOR MODE") and "simulator" in text.lower()
        assert all(r[5] is None for r in table.rows)  # no fraction of a GPU ceiling without a GPU
    else:
        copy_row = by_quantity["device-to-device copy (cudaMemcpy): the ceiling"][0]
        assert copy_row[5] == pytest.approx(1.0) and "Fastest Numba copy" in text


def test_cli_bench_and_info():
    result = subprocess.run([sys.executable, "-m", "gpucourse", "bench", "--repeat", "1"], capture_output=True, text=True, cwd=ROOT,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert "then and now" in result.stdout and "Tesla K20" in result.stdout and "limiting factor" in result.stdout
    if mode.is_simulator():
        assert "every time below is a simulator time" in result.stdout
    else:
        assert "GPU MODE" in result.stdout
    info = subprocess.run([sys.executable, "-m", "gpucourse", "info", "--no-ceilings"], capture_output=True, text=True, cwd=ROOT)
    assert info.returncode == 0 and "Device:" in info.stdout
    help_text = subprocess.run([sys.executable, "-m", "gpucourse", "--help"], capture_output=True, text=True, cwd=ROOT).stdout
    assert "bench" in help_text and "exercises" in help_text and "info" in help_text
