"""gpucourse.profiler: parsing Nsight Compute's raw CSV (recorded on an H200), and the one-line refusals."""

from __future__ import annotations

import html
import stat
import sys
from pathlib import Path

import pytest

from gpucourse import mode, profiler

RECORDED = Path(__file__).parent / "data" / "ncu_raw_h200.csv"  # tools/gpu_stencil2d.py, run 3 (measurements/stencil2d.md)
LABELS = {"Jacobi global, the book's": "jacobi_global_book", "Jacobi global, tuned": "jacobi_global_rows",
          "Jacobi shared, the book's": "jacobi_shared_book", "Jacobi shared, tuned": "jacobi_shared_rows",
          "heat one step, the article's": "heat_step_global_article", "heat one step, tuned": "heat_step_rows",
          "heat shared tile, the article's": "heat_steps_shared", "heat multi-step, tuned": "heat_steps_registers",
          "k-space Poisson, first version": "poisson_spectrum_simple", "k-space Poisson, tuned": "poisson_spectrum_rows"}


def test_parses_the_recorded_output():
    profiles = profiler.parse_raw_csv(RECORDED.read_text(), LABELS)
    assert [p.label for p in profiles] == list(LABELS)  # one row per kernel, in launch order, each labelled
    for p in profiles:
        assert 50 < p.duration_us < 5000, p  # 8192^2 float32: hundreds of microseconds (ncu printed us)
        for value in (p.dram_pct, p.sm_pct, p.occupancy_pct, p.memory_pct):
            assert 0 < value <= 100, p
        assert p.memory_pct >= p.dram_pct - 1e-9  # 'memory' is the busiest of L1, L2 and DRAM
        assert p.registers and 10 < p.registers < 256
        assert p.top_stall is not None and "selected" not in p.stalls
        assert p.kernel in {"jacobi_global_book_kernel", "heat_step_global_article_kernel"} or p.kernel == LABELS[p.label]
    run = profiler.ProfileRun(profiles)
    by = {p.label: p for p in profiles}
    assert by["heat shared tile, the article's"].top_stall[0] == "barrier"  # two barriers a step
    assert by["Jacobi global, the book's"].top_stall[0] == "long_scoreboard"  # waiting for loads
    assert by["Jacobi global, the book's"].dram_pct < by["Jacobi shared, tuned"].dram_pct
    assert run["k-space Poisson, tuned"].duration_us < run["k-space Poisson, first version"].duration_us
    table = run.table()
    assert len(table.rows) == len(LABELS) and "DRAM %" in table.headers
    assert "jacobi_global_book" not in str(table) and "Jacobi global, the book's" in str(table)
    with pytest.raises(KeyError, match="labels"):
        run["nothing"]


def test_durations_in_other_units_and_unlabelled_kernels():
    text = RECORDED.read_text()
    lines = text.splitlines()
    units = next(i for i, line in enumerate(lines) if line.startswith('"ID"')) + 1
    header = lines[units - 1].split('","')
    column = header.index("gpu__time_duration.sum")
    cells = lines[units].split('","')
    assert cells[column] == "ns"  # what ncu printed on the H200
    cells[column] = "us"
    changed = "\n".join(lines[:units] + ['","'.join(cells)] + lines[units + 1:])
    first = profiler.parse_raw_csv(text)[0]
    assert profiler.parse_raw_csv(changed)[0].duration_us == pytest.approx(1e3 * first.duration_us)
    assert first.label == "jacobi_global_book_kernel"  # no labels: the kernel's function name
    assert profiler.parse_raw_csv("no table here\n==PROF== done") == ()


def test_kernel_names():
    assert profiler.kernel_function("laplace::jacobi_global_rows[v3,cw51](Array<float, 1, C, mutable, aligned>)") == "jacobi_global_rows"
    assert profiler.kernel_function("jacobi_readonly_rows") == "jacobi_readonly_rows"
    assert profiler.kernel_function("void copy_kernel<float>(float *)") == "void copy_kernel"


def test_refuses_in_the_simulator(monkeypatch):
    monkeypatch.setattr(profiler.mode, "is_simulator", lambda: True)
    run = profiler.profile("print(1)", {"x": "x"})
    assert not run and "simulator" in run.refusal and "\n" not in run.refusal
    assert run.refusal in str(run) and html.escape(run.refusal) in run._repr_html_()


def test_refuses_without_ncu(monkeypatch):
    monkeypatch.setattr(profiler.mode, "is_simulator", lambda: False)
    monkeypatch.setattr(profiler, "NCU_FALLBACKS", ("/nonexistent/ncu",))
    monkeypatch.setenv("PATH", "/nonexistent")
    run = profiler.profile("print(1)", {"x": "x"})
    assert not run and "not installed" in run.refusal and "\n" not in run.refusal


def fake_ncu(folder: Path, message: str) -> str:
    """An executable that prints what ncu prints when it may not read the counters, and fails."""
    path = folder / "ncu"
    path.write_text(f"#!/bin/sh\necho '{message}'\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_refuses_without_permission(monkeypatch, tmp_path):
    monkeypatch.setattr(profiler.mode, "is_simulator", lambda: False)
    ncu = fake_ncu(tmp_path, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
                             "on the target device 0.")
    run = profiler.profile("print(1)", {"x": "x"}, ncu=ncu)
    assert not run and "ERR_NVGPUCTRPERM" in run.refusal and "\n" not in run.refusal
    assert run.command[0] == ncu and "--clock-control" in run.command and "none" in run.command


def test_other_failures_say_what_happened(monkeypatch, tmp_path):
    monkeypatch.setattr(profiler.mode, "is_simulator", lambda: False)
    run = profiler.profile("print(1)", {"x": "x"}, ncu=fake_ncu(tmp_path, "==ERROR== Failed to find a kernel"))
    assert not run and run.refusal.startswith("Nsight Compute failed: Failed to find a kernel")
    assert profiler.refusal_in("all is well") is None


def test_counters_that_were_not_read_are_a_refusal_not_a_profile(monkeypatch, tmp_path):
    """On an H200 with eleven other test processes on the GPU, ncu once printed nan for every counter of the kernel."""
    monkeypatch.setattr(profiler.mode, "is_simulator", lambda: False)
    table = ('"ID","Kernel Name","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed"\n'
             '"","","nsecond","%"\n"0","jacobi_global_book_kernel(float *, float *)","nan","n/a"\n')
    path = tmp_path / "ncu"
    path.write_text(f"#!{sys.executable}\nimport sys\nopen(sys.argv[sys.argv.index('--log-file') + 1], 'w').write({table!r})\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    assert profiler._number("nan") is None and profiler._number("12.5") == 12.5
    run = profiler.profile("print(1)", {"book": "jacobi_global_book"}, ncu=str(path))
    assert not run and "found jacobi_global_book_kernel but printed no value" in run.refusal and "\n" not in run.refusal


def test_profiles_a_kernel_here():
    """On a GPU with ncu and the right to read its counters: a real profile. Anywhere else: one line that says why not."""
    code = ("import numpy as np\nimport gpucourse\nfrom gpucourse.kernels import laplace\n"
            "a = gpucourse.to_device(gpucourse.random_array((1024, 1024), np.float32, seed=1))\n"
            "b = gpucourse.device_empty((1024, 1024), np.float32)\nlaplace.jacobi_global_book(a, b)\ngpucourse.synchronize()\n")
    run = profiler.profile(code, {"book": "jacobi_global_book"})
    if not run:
        assert run.refusal and "\n" not in run.refusal
        assert mode.is_simulator() or profiler.find_ncu() is None or profiler.PERMISSION in run.refusal, run.refusal
        pytest.skip(f"needs a GPU with ncu and the right to read its counters; the one-line refusal was checked: {run.refusal}")
    assert run["book"].kernel == "jacobi_global_book_kernel" and run["book"].dram_pct > 0 and run["book"].duration_us > 0


def test_two_labels_for_one_kernel_take_its_launches_in_order():
    """Notebook 2.1 profiles one copy kernel launched twice: the first launch takes the first label, the second the second."""
    profiles = profiler.parse_raw_csv(RECORDED.read_text(), {"first launch": "jacobi", "second launch": "jacobi"})
    assert [p.label for p in profiles[:3]] == ["first launch", "second launch", "first launch"]  # labels used up: the first matching
    assert profiles[0].kernel == "jacobi_global_book_kernel" and profiles[1].kernel == "jacobi_global_rows"


def test_dram_bytes_in_any_unit_give_the_actual_throughput():
    header = ('"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","dram__bytes_write.sum",'
              '"dram__throughput.avg.pct_of_peak_sustained_elapsed"\n')
    table = header + '"","","us","Mbyte","Kbyte","%"\n"0","stride_kernel(Array<float, 1>)","100","268.44","134217.73","40"\n'
    (profile,) = profiler.parse_raw_csv(table, {"stride 1": "stride_kernel"})
    assert profile.dram_bytes == pytest.approx(268.44e6 + 134.21773e6)
    assert profile.actual_throughput_gbs == pytest.approx(profile.dram_bytes / 100e3)  # bytes per ns = GB/s
    (recorded,) = profiler.parse_raw_csv(RECORDED.read_text(), LABELS)[:1]
    assert recorded.dram_bytes is None and recorded.actual_throughput_gbs is None  # that run did not count bytes
