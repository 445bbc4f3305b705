"""Problem sizes as functions of a device profile, the estimate of each notebook's GPU work, and the emulated small GPU.

Everything here runs without a GPU: the profiles of issue 18 are plain data, and the ballast is
tested with fake GPUs.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, gpu_only, run_python

import gpucourse
from gpucourse import emulation, mode, profiles, sizes, workload
from gpucourse.device import DeviceInfo, with_emulated_memory
from gpucourse.errors import EnvironmentProblem
from gpucourse.kernels import metrics
from gpucourse.profiles import PROFILES, DeviceProfile

PROFILE_NAMES = list(PROFILES)
GiB = 2**30


def _area(size) -> int:
    return math.prod(size) if isinstance(size, tuple) else size


# --- the profiles ------------------------------------------------------------------------------


def test_profiles_hold_the_issue_figures():
    expected = {  # name: (GB, GB/s, MiB of L2), issue 18; the H200 L2 is what the card reports (issue 29)
        "T4": (16, 320, 4), "L4": (24, 300, 48), "RTX 4060": (8, 272, 24), "RTX 3090": (24, 936, 6), "RTX 4090": (24, 1008, 72),
        "A100 40GB": (40, 1555, 40), "A100 80GB": (80, 2039, 40), "H100 SXM": (80, 3350, 50), "H200": (141, 4800, 60),
    }
    assert set(PROFILES) == set(expected)
    for name, (gb, gbs, l2_mib) in expected.items():
        profile = PROFILES[name]
        assert (profile.memory_bytes, profile.bandwidth_gbs, profile.l2_bytes) == (gb * 10**9, gbs, l2_mib * 2**20)
        assert profile.host_link_gbs in (15.75, 31.5, 63.0)
    assert PROFILES["RTX 4060"].host_link_gbs == 15.75  # eight lanes of PCIe 4.0
    assert PROFILES["T4"].ms_for_bytes(320e9 * 1e-3) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="positive memory"):
        DeviceProfile("broken", 0, 2**20, 100.0)


def _gpu_info(**changes) -> DeviceInfo:
    base = dict(name="Some GPU", compute_capability=(9, 0), simulated=False, multiprocessors=132, total_memory_bytes=80 * GiB,
                memory_clock_khz=2_619_000, memory_bus_bits=5120, l2_cache_bytes=50 * 2**20)
    return DeviceInfo(**{**base, **changes})


def test_profile_of_a_device_uses_what_it_reports():
    profile = profiles.profile_of(_gpu_info())
    assert (profile.name, profile.memory_bytes, profile.l2_bytes, profile.host_link_gbs) == ("Some GPU", 80 * GiB, 50 * 2**20, None)
    assert profile.bandwidth_gbs == pytest.approx(3352.32)  # 2 x 2619 MHz x 5120 bits
    small = profiles.profile_of(with_emulated_memory(_gpu_info(), 8 * GiB))
    assert small.memory_bytes == 8 * GiB and small.l2_bytes == 50 * 2**20
    with pytest.raises(ValueError, match="L2 cache size"):
        profiles.profile_of(_gpu_info(l2_cache_bytes=None))
    with pytest.raises(ValueError, match="simulator"):
        profiles.profile_of(gpucourse.device.simulated_device())


# --- the rules, on every profile -----------------------------------------------------------------


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_every_size_is_chosen_and_keeps_its_constraints(name):
    profile = PROFILES[name]
    chosen = sizes.sizes_for(profile)
    assert set(chosen) == set(sizes.SIZES)
    for experiment, entry in sizes.SIZES.items():
        size = chosen[experiment]
        if entry.streamed is not None and entry.follows_device:  # beyond L2, a Rule's size or one derived from others
            assert entry.streamed(size) >= sizes.BEYOND_L2 * profile.l2_bytes, (experiment, size)
        if not isinstance(entry.gpu, sizes.Rule):
            continue
        rule = entry.gpu
        if entry.held is not None:  # its share of the notebook's memory
            assert entry.held(size) <= rule.memory_share * sizes.SAFE_MEMORY_FRACTION * profile.memory_bytes, (experiment, size)
        if entry.moved is not None:  # the time budget of one call (or run)
            assert profile.ms_for_bytes(entry.moved(size)) <= rule.budget_ms, (experiment, size)
        if entry.book is not None and experiment != "ch6_laplace_run":  # never below the book's problem
            assert _area(size) >= _area(entry.book), (experiment, size)


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_bandwidth_arrays_are_four_times_the_l2(name):
    profile = PROFILES[name]
    z = sizes.sizes_for(profile)
    l2 = profile.l2_bytes
    assert 4 * z["ch2_copy"] >= 4 * l2 and 4 * z["ch2_limit"] >= 4 * l2 and 4 * z["ch3_ufunc"] >= 4 * l2
    assert 4 * _area(z["ch3_transpose"]) >= 4 * l2 and 4 * _area(z["ch6_heat"]) >= 4 * l2 and 4 * z["ch3_stencil"] ** 2 >= 4 * l2
    assert 8 * z["ch3_copy"] >= 4 * l2 and 4 * z["ch5_reduce"] >= 4 * l2 and 4 * z["ch5_random_numbers"] >= 4 * l2
    assert 4 * z["ch6_grid"] ** 3 >= 4 * l2 and 4 * max(z["ch6_table_grids"]) ** 3 >= 4 * l2
    assert 4 * z["ch3_coalescing"] >= 4 * l2 and 4 * z["ch2_latency"][0] * z["ch2_latency"][1] >= 4 * l2
    for exercise in ("exercise_1d", "ch2_exercise", "ch3_exercise_block_sums"):  # the checks that time a student's kernel
        assert 4 * z[exercise] >= 4 * l2
    for exercise in ("exercise_2d", "ch3_exercise_2d", "ch3_exercise_transpose", "ch6_exercise_laplace"):
        assert 4 * _area(z[exercise]) >= 4 * l2


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_structure_of_the_sizes(name):
    z = sizes.sizes_for(PROFILES[name])
    for experiment in ("exercise_1d", "ch2_exercise", "ch3_exercise_block_sums"):  # a power of two + 37: no block divides it
        n = z[experiment]
        assert n % 4 and n % 32 and (n - 37) & (n - 38) == 0, (experiment, n)
    for experiment in ("exercise_2d", "ch3_exercise_transpose", "ch6_exercise_laplace"):  # partial tiles on both sides
        rows, cols = z[experiment]
        assert rows % 32 and cols % 32, (experiment, rows, cols)
    assert z["exercise_2d"][1] % 2 == 1 and z["ch3_exercise_2d"][1] == 4099
    for experiment in ("ch2_copy", "ch2_limit", "ch3_ufunc", "ch3_copy", "ch3_tile_rows", "ch5_random_numbers", "ch5_pi", "ch5_reduce"):
        n = z[experiment]
        assert n & (n - 1) == 0, (experiment, n)  # powers of two: every block size and elements-per-thread factor divides them
    assert z["ch2_roofline"][0] & (z["ch2_roofline"][0] - 1) == 0 and z["ch3_reduce"][0] & (z["ch3_reduce"][0] - 1) == 0
    assert z["ch3_coalescing"] % 2**20 == 0
    for experiment in ("increment_2d", "ch3_transpose", "ch6_heat", "ch4_transpose", "ch4_mpi_transpose"):
        rows, cols = z[experiment]
        assert rows == cols and rows % 1024 == 0  # every tile (up to 64) divides them; they split over 2 and 4 GPUs
        assert (rows // 4) % 32 == 0
    assert z["ch3_stencil"] % 1024 == 0
    batch, ny, nx = z["ch7_batched"]
    assert all(v & (v - 1) == 0 for v in (batch, ny, nx, *z["ch7_strided"]))  # FFT sizes: powers of two
    assert z["ch6_grid"] % 128 == 0 and z["ch6_grid"] in z["ch6_table_grids"] and {64, 256} <= set(z["ch6_table_grids"])
    strides = z["ch3_strides"]
    assert strides == tuple(range(1, len(strides) + 1)) and len(strides) in (8, 16, 32)  # up to 8: every float32 in a sector of its own
    assert z["ch6_laplace"] == (4096, 4096)  # the book's mesh: its residuals compare digit by digit
    shape, sweeps, every = z["ch6_laplace_run"]
    assert shape == (4096, 4096) and sweeps % every == 0 and 100 <= sweeps <= 1000
    assert 100 <= z["ch6_heat_run"][1] <= 2000


def test_fixed_sizes_are_the_same_everywhere_and_the_simulator_keeps_its_own():
    for name, entry in sizes.SIZES.items():
        assert not isinstance(entry.simulator, sizes.Rule | sizes.Derived) and entry.unit, name
        assert sizes.problem_size(name, for_mode="simulator") == entry.simulator
        if not entry.follows_device:
            assert {repr(sizes.problem_size(name, profile=p)) for p in PROFILES.values()} == {repr(entry.gpu)}, name


def test_sizes_follow_memory_l2_and_bandwidth():
    h100 = PROFILES["H100 SXM"]
    assert sizes.problem_size("ch2_copy", profile=h100) == 1 << 26  # the size chosen for it, unchanged
    bigger_l2 = DeviceProfile("big L2", h100.memory_bytes, 200 * 2**20, h100.bandwidth_gbs)
    assert sizes.problem_size("ch2_copy", profile=bigger_l2) == 1 << 28  # raised: 4 x 200 MiB
    assert sizes.choose("ch2_copy", bigger_l2).why == "beyond L2"
    small = DeviceProfile("small", 15 * 10**8, 4 * 2**20, h100.bandwidth_gbs)
    assert sizes.problem_size("ch5_reduce", profile=small) < sizes.problem_size("ch5_reduce", profile=h100)  # lowered: memory
    assert sizes.choose("ch5_reduce", small).why == "fits in memory"
    slow = DeviceProfile("slow", h100.memory_bytes, 4 * 2**20, 200.0)
    assert sizes.choose("ch4_transpose", slow).why == "time budget"
    assert 8 * _area(sizes.problem_size("ch4_transpose", profile=slow)) <= slow.bytes_in_ms(sizes.CALL_BUDGET_MS)
    assert sizes.problem_size("ch6_laplace_run", profile=slow)[1] < 1000
    assert len(sizes.problem_size("ch3_strides", profile=PROFILES["RTX 4060"])) < 32  # the stride sweep shortened to fit 8 GB


def test_an_h200_emulating_small_cards_gets_every_size():
    """A large L2 beside little memory (an H200 run with GPUCOURSE_DEVICE_MEMORY): no real card is so, and every size still fits."""
    from dataclasses import replace

    for gib in (8, 16):
        card = replace(PROFILES["H200"], name=f"H200 as {gib} GiB", memory_bytes=gib * 2**30, l2_bytes=60 * 2**20)
        chosen = sizes.sizes_for(card)  # on the H200, 3.2's stride sweep once asked for 6.3 GiB of a 4 GiB share
        assert 4 in chosen["ch3_strides"] and 4 * sizes.problem_size("ch3_coalescing", profile=card) >= 4 * card.l2_bytes
        assert 12 * chosen["ch3_coalescing"] * (1 + max(chosen["ch3_strides"])) <= sizes.memory_for_notebook(card)


def test_a_profile_that_cannot_be_served_is_refused():
    tiny = DeviceProfile("tiny", 2 * 10**9, 256 * 2**20, 300.0)  # a 256 MiB L2 on a 2 GB card
    with pytest.raises(sizes.SizeConflict, match="tiny: ch3_coalescing cannot stay 4 x beyond"):
        sizes.choose("ch3_coalescing", tiny)


def test_current_device_path_in_simulator_mode():
    if mode.on_gpu():
        profile = profiles.current_profile()
        assert profile is profiles.current_profile()  # made once
        assert gpucourse.problem_size("ch2_copy") == sizes.problem_size("ch2_copy", profile=profile)
        return
    assert profiles.current_profile() is None
    assert gpucourse.problem_size("ch3_transpose") == (40, 70)
    assert sizes.problem_size("ch3_transpose", for_mode="gpu") == sizes.problem_size("ch3_transpose", profile=profiles.REFERENCE)
    with pytest.raises(ValueError, match="a profile describes a GPU"):
        sizes.problem_size("ch2_copy", for_mode="simulator", profile=PROFILES["T4"])
    with pytest.raises(KeyError, match="known sizes"):
        sizes.problem_size("no such experiment", profile=PROFILES["T4"])


def test_explain_says_why_a_size_differs_from_the_book():
    table = sizes.explain("ch3_transpose", "ch6_laplace_run", "ch3_strides", "ch7_poisson_book", profile=PROFILES["RTX 4060"])
    rows = {row[0]: row for row in table.rows}
    assert rows["ch3_transpose"][1] == "(8192, 8192)" and rows["ch3_transpose"][3] == "(1024, 1024) (§3.4)"
    assert rows["ch3_transpose"][2] == sizes.SIZES["ch3_transpose"].unit  # what the numbers of a size are, in words
    assert rows["ch3_transpose"][4].startswith("beyond L2") and "x the L2" in rows["ch3_transpose"][4]
    assert rows["ch6_laplace_run"][4].startswith("time budget") and "ms a run" in rows["ch6_laplace_run"][4]
    assert rows["ch3_strides"][1] == "1..8" and rows["ch3_strides"][4].startswith("fits in memory")
    assert rows["ch7_poisson_book"][4] == "the book's size"
    assert "RTX 4060" in table.title and "4 x the L2" in str(table)
    here = sizes.explain("ch3_transpose")
    if mode.is_simulator():
        assert here.rows[0][1] == "(40, 70)" and here.rows[0][4].startswith("simulator")
    with pytest.raises(ValueError, match="name at least one"):
        sizes.explain()


# --- the estimate of each notebook's GPU work ------------------------------------------------------


def test_benchmark_calls_follow_benchmarks_arithmetic():
    assert workload.benchmark_calls(10.0, repeat=20) == 2 + 3 + 1 + 25  # one call per sample when a call is longer than 2 ms
    assert workload.benchmark_calls(0.5, repeat=15) == 6 + 20 * 4  # four calls fill a 2-ms sample
    assert workload.benchmark_calls(1e-4, repeat=20) == 6 + 25 * 200  # at most 200 calls per sample


def test_estimate_of_one_notebook_by_hand():
    t4 = PROFILES["T4"]
    n = sizes.problem_size("ch2_limit", profile=t4)
    call_ms = 8 * n / (t4.bandwidth_gbs * 1e9) * 1e3  # a = f(b): read and write n float32
    expected_s = (7 * workload.benchmark_calls(call_ms, 20) + 4) * call_ms / 1e3
    assert workload.predicted_seconds(workload.notebook("02_metrics/02_bound_kernels.ipynb"), t4) == pytest.approx(expected_s)
    assert workload.held_bytes(workload.notebook("02_metrics/02_bound_kernels.ipynb"), t4) == 8 * n


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_every_notebook_fits_and_runs_in_under_a_minute(name):
    profile = PROFILES[name]
    for entry in workload.NOTEBOOKS:
        seconds = workload.predicted_seconds(entry, profile)
        assert 0 <= seconds < 60, (entry.path, seconds)
        assert workload.held_bytes(entry, profile) <= sizes.memory_for_notebook(profile), entry.path
    assert sum(workload.chapter_seconds(profile).values()) == pytest.approx(sum(workload.predicted_seconds(e, profile) for e in workload.NOTEBOOKS))


def test_a_faster_gpu_takes_less_time_for_the_same_sizes():
    t4 = PROFILES["T4"]
    fast = DeviceProfile("T4 at 4x", t4.memory_bytes, t4.l2_bytes, 4 * t4.bandwidth_gbs, t4.host_link_gbs)
    transpose = workload.notebook("03_optimization/04_transpose.ipynb")
    assert sizes.problem_size("ch3_transpose", profile=fast) == sizes.problem_size("ch3_transpose", profile=t4)
    assert workload.predicted_seconds(transpose, fast) < workload.predicted_seconds(transpose, t4)
    transfers = workload.notebook("03_optimization/01_transfers.ipynb")  # host copies: the link, not the memory, sets their time
    assert workload.predicted_seconds(transfers, fast) == pytest.approx(workload.predicted_seconds(transfers, t4), rel=0.05)


def test_every_chapter_notebook_has_a_model_and_its_explain_cell():
    on_disk = sorted(str(path.relative_to(ROOT / "chapters")) for path in (ROOT / "chapters").glob("*/*.ipynb"))
    assert sorted(entry.path for entry in workload.NOTEBOOKS) == on_disk
    for entry in workload.NOTEBOOKS:
        assert set(entry.holds) | set(entry.explains) <= set(sizes.SIZES)
        cells = json.loads((ROOT / "chapters" / entry.path).read_text())["cells"]
        calls = [("".join(c["source"])) for c in cells if c["cell_type"] == "code" and "sizes.explain(" in "".join(c["source"])]
        if not entry.explains:
            assert not calls, entry.path
            continue
        assert len(calls) == 1, entry.path
        assert re.findall(r'"(\w+)"', calls[0].split("#")[0]) == list(entry.explains), entry.path
        for name in entry.explains:  # each row has something to say: a size that follows the device, or one the book compares
            assert sizes.SIZES[name].follows_device or sizes.SIZES[name].book is not None, (entry.path, name)


def test_book_sizes_agree_with_the_books_figures():
    assert sizes.SIZES["ch3_stencil"].book == int(gpucourse.book.figure("ch3_tex_2d_n").number)
    assert sizes.SIZES["ch6_laplace"].book == tuple(int(v) for v in gpucourse.book.figure("ch6_laplace_mesh").value.split(" x "))
    assert sizes.SIZES["ch3_bandwidth_test"].book == int(gpucourse.book.figure("ch3_bwtest_size_E5540").number) * 2**20
    assert sizes.SIZES["ch4_alloc"].book * 4 == int(gpucourse.book.figure("ch4_direct_alloc_diff").number)
    assert sizes.SIZES["ch2_limit"].book == metrics.BOOK_LIMIT_N
    assert sizes.SIZES["ch3_coalescing"].book * 4 == int(gpucourse.book.figure("ch3_offset_transfer_size").number) * 2**20


def test_the_readme_table_is_the_generated_one():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- gpu-classes:begin -->\n", 1)[1].split("\n<!-- gpu-classes:end -->", 1)[0]
    assert block == workload.markdown_table(), "the README's table of GPU classes is stale: run python -m gpucourse sizes --table"
    assert "an estimate" in readme and "GPUCOURSE_DEVICE_MEMORY" in readme


def test_the_command_line(capsys):
    from gpucourse.__main__ import main

    assert main(["sizes", "--table"]) == 0
    assert capsys.readouterr().out.strip() == workload.markdown_table()
    assert main(["sizes", "--profile", "RTX 4060"]) == 0
    out = capsys.readouterr().out
    assert "Problem sizes on RTX 4060" in out and "ch3_strides" in out and "ch7_poisson" in out and "ch7_strided" not in out
    assert main(["sizes", "--profile", "T4", "--notebooks"]) == 0
    assert "ESTIMATE" in capsys.readouterr().out
    assert main(["sizes", "--profile", "GTX 480"]) == 2


# --- GPUCOURSE_DEVICE_MEMORY ---------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [("8GiB", 8 * GiB), ("16GB", 16 * 10**9), ("12000MiB", 12000 * 2**20), ("7.5 gib", int(7.5 * GiB)),
                                            (" 24gb ", 24 * 10**9), ("1TiB", 2**40)])
def test_memory_sizes_parse(text, expected):
    assert emulation.parse_memory_size(text) == expected


@pytest.mark.parametrize("text", ["8", "lots", "-8GiB", "8 GiB please", "8G", "0.5GiB", "100MB", ""])
def test_nonsense_is_refused_with_what_to_write(text):
    with pytest.raises(EnvironmentProblem, match=r"GPUCOURSE_DEVICE_MEMORY=8GiB, 16GB or 12000MiB"):
        emulation.parse_memory_size(text)


def test_the_variable_is_read_from_the_environment():
    assert emulation.requested_bytes({}) is None and emulation.requested_bytes({"GPUCOURSE_DEVICE_MEMORY": " "}) is None
    assert emulation.requested_bytes({"GPUCOURSE_DEVICE_MEMORY": "16GB"}) == 16 * 10**9


class FakeGPU:
    """A GPU's memory for the ballast: free and total bytes, and a record of what was allocated."""

    def __init__(self, bus: str, free: int, total: int) -> None:
        self.free, self.total, self.allocated = free, total, []
        self.memory = emulation.GPUMemory(bus, lambda: (self.free, self.total), self.allocate)

    def allocate(self, nbytes: int) -> object:
        self.allocated.append(nbytes)
        self.free -= nbytes
        return np.empty(0)  # stands for the allocation the caller keeps alive


def test_ballast_is_the_real_total_minus_the_emulated_card():
    h200, busy = FakeGPU("0000:1a:00.0", 139 * GiB, 140 * GiB), FakeGPU("0000:1b:00.0", 20 * GiB, 140 * GiB)
    full = FakeGPU("0000:1c:00.0", 6 * GiB, 140 * GiB)
    records, allocations = emulation.hold_ballast(8 * GiB, [h200.memory, busy.memory, full.memory])
    assert h200.allocated == [132 * GiB] and h200.free == 7 * GiB  # what an 8 GiB card has once its context is made
    # a GPU that other processes share: this process is left an 8 GiB card less a context
    assert busy.allocated == [20 * GiB - 8 * GiB + emulation.CONTEXT_BYTES] and busy.free == 8 * GiB - emulation.CONTEXT_BYTES
    assert "other processes use 120.0 GiB" in records[1].note and records[1].held_bytes == busy.allocated[0]
    assert full.allocated == [] and "only 6.0 GiB free" in records[2].note and records[2].held_bytes == 0
    assert len(allocations) == 2 and records[0] == emulation.Ballast("0000:1a:00.0", 140 * GiB, 132 * GiB)
    assert emulation.ballast_bytes(16 * GiB, 16 * GiB) == 0
    with pytest.raises(EnvironmentProblem, match="more than this GPU's 16.0 GiB.*at most 16384MiB"):
        emulation.ballast_bytes(16 * GiB, 24 * GiB)


def test_a_child_process_makes_no_second_ballast():
    parent_gpu = FakeGPU("0000:1a:00.0", 139 * GiB, 140 * GiB)
    records, _ = emulation.hold_ballast(8 * GiB, [parent_gpu.memory])
    marker = emulation.held_marker(4242, records)
    assert marker == "4242:0000:1a:00.0"
    child_view = FakeGPU("0000:1a:00.0", parent_gpu.free, 140 * GiB)
    other = FakeGPU("0000:1b:00.0", 139 * GiB, 140 * GiB)
    child_records, _ = emulation.hold_ballast(8 * GiB, [child_view.memory, other.memory], held_by_parent=marker)
    assert child_view.allocated == [] and "already" in child_records[0].note
    assert other.allocated == [132 * GiB]  # a GPU the parent did not limit gets its own
    assert emulation.held_marker(99, child_records, marker) == "99:0000:1a:00.0,0000:1b:00.0"


def test_the_ballast_is_made_once_per_process(monkeypatch):
    gpu = FakeGPU("0000:1a:00.0", 79 * GiB, 80 * GiB)
    monkeypatch.setattr(emulation, "_numba_gpus", lambda: [gpu.memory])
    monkeypatch.setattr(emulation, "BALLAST", [])
    monkeypatch.setattr(emulation, "_ALLOCATIONS", [])
    monkeypatch.delenv(emulation.HELD_VAR, raising=False)
    emulation.start(16 * GiB, on_gpu=True)
    emulation.start(16 * GiB, on_gpu=True)
    assert gpu.allocated == [64 * GiB] and len(emulation._ALLOCATIONS) == 1
    assert emulation.BALLAST[0].held_bytes == 64 * GiB
    assert os.environ[emulation.HELD_VAR] == f"{os.getpid()}:0000:1a:00.0"
    emulation.start(None, on_gpu=True)  # no emulation: nothing
    emulation.start(16 * GiB, on_gpu=False)  # the simulator: nothing to hold
    assert gpu.allocated == [64 * GiB]


def test_pending_frees_are_sized_for_the_card_left():
    class Pending:
        memory_capacity = 141 * GiB

    class Manager:
        deallocations = Pending()

    manager = Manager()
    emulation.size_pending_frees(manager, 8 * GiB)
    assert manager.deallocations.memory_capacity == 8 * GiB
    emulation.size_pending_frees(object(), 8 * GiB)  # a memory manager without Numba's batch: nothing to size


def test_banner_words():
    held = [emulation.Ballast("0000:1a:00.0", 140 * GiB, 132 * GiB)]
    on_gpu = emulation.describe(8 * GiB, simulated=False, ballast=held)
    assert on_gpu.startswith("Emulating a card of 8.0 GiB") and "132.0 GiB of its 140.0 GiB are held back" in on_gpu
    assert "only the device memory reported changes" in emulation.describe(8 * GiB, simulated=True)
    assert emulation.describe(None, simulated=False) == ""
    info = with_emulated_memory(_gpu_info(), 8 * GiB)
    assert info.total_memory_bytes == 8 * GiB and info.emulated_from_bytes == 80 * GiB
    assert "8.0 GiB (emulated: the card has 80.0 GiB)" in info.summary()
    assert with_emulated_memory(_gpu_info(), None) == _gpu_info()


def test_an_emulated_card_in_a_fresh_process():
    code = ("import gpucourse; b = gpucourse.banner(); print(b.headline()); print(str(b)); "
            "print(gpucourse.current_device().total_memory_bytes); print(gpucourse.problem_size('ch3_transpose'))")
    done = run_python(code, GPUCOURSE_MODE="simulator", GPUCOURSE_DEVICE_MEMORY="8GiB")
    assert done.returncode == 0, done.stderr
    headline, *rest = done.stdout.splitlines()
    assert "It emulates a card of 8.0 GiB (GPUCOURSE_DEVICE_MEMORY)" in headline
    assert "only the device memory reported changes" in done.stdout
    assert rest[-2:] == [str(8 * GiB), "(40, 70)"]  # the memory is reported; the simulator's sizes stay
    refused = run_python("import gpucourse", GPUCOURSE_MODE="simulator", GPUCOURSE_DEVICE_MEMORY="eight gigabytes")
    assert refused.returncode != 0 and "Write a number and a unit, e.g. GPUCOURSE_DEVICE_MEMORY=8GiB" in refused.stderr


def test_an_emulated_card_on_a_gpu_refuses_what_would_not_fit_it():
    if mode.is_simulator():  # no GPU memory here: the variable changes only what is reported (the test above)
        assert gpucourse.current_device().simulated and emulation.BALLAST == []
        gpu_only("GPU memory to hold back (the simulator holds none, checked)")
    code = ("import gpucourse, cupy; from gpucourse import emulation; from numba import cuda; free, total = cupy.cuda.runtime.memGetInfo(); "
            "print(free, total, emulation.BALLAST[0].held_bytes, cuda.current_context().memory_manager.deallocations.memory_capacity); "
            "ok = True\ntry:\n    cupy.empty(9 * 2**30, dtype=cupy.uint8)\nexcept cupy.cuda.memory.OutOfMemoryError:\n    ok = False\nprint(ok)")
    done = run_python(code, GPUCOURSE_DEVICE_MEMORY="8GiB")
    assert done.returncode == 0, done.stderr
    numbers, allocated = done.stdout.split("\n")[:2]
    free, total, held, pending_capacity = (int(v) for v in numbers.split())
    assert pending_capacity == total - held  # Numba's batch of pending frees is sized for the card left, not the real one
    assert held > 0  # the ballast: the whole card beyond 8 GiB, or (other tests hold memory too) all but 8 GiB less a context
    assert free < 8 * GiB  # what is left: no more than an 8 GiB card has
    assert allocated == "False"  # 9 GiB do not fit an 8 GiB card, so they do not fit here either


def test_readme_and_module_document_the_variable():
    assert "GPUCOURSE_DEVICE_MEMORY=8GiB" in emulation.__doc__ and "GPUCOURSE_DEVICE_MEMORY" in sizes.__doc__
    assert "GPUCOURSE_DEVICE_MEMORY=8GiB" in Path(ROOT / "README.md").read_text()
