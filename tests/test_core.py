"""Device properties, validation, arrays, sizes, book figures and reports."""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse import book, mode, profiles, sizes, validate
from gpucourse.device import DeviceInfo, theoretical_bandwidth_gbs
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.report import Table, tesla_table


@pytest.mark.parametrize(
    "clock_khz, bus_bits, expected_gbs, book_id",
    [(1_500_000, 384, 144.0, "ch2_peakbw_C2050"), (2_600_000, 320, 208.0, "ch2_peakbw_K20"), (800_000, 512, 102.4, "ch2_peakbw_C1060")],
)
def test_theoretical_bandwidth_matches_the_book(clock_khz, bus_bits, expected_gbs, book_id):
    assert theoretical_bandwidth_gbs(clock_khz, bus_bits) == pytest.approx(expected_gbs)
    assert book.figure(book_id).number == pytest.approx(expected_gbs)


def test_current_device(device):
    assert isinstance(device, DeviceInfo)
    assert device.max_threads_per_block >= 512 and device.warp_size == 32
    if mode.on_gpu():
        assert device.multiprocessors > 0 and device.theoretical_bandwidth_gbs > 0
        assert device.total_memory_gib > 0.5
        assert device.name in device.summary()
        assert gpucourse.select_device(device.ordinal) == device
    else:
        assert device.simulated and device.theoretical_bandwidth_gbs is None
        assert "simulator" in device.summary().lower()
        with pytest.raises(IndexError):
            gpucourse.select_device(1)


def test_threads_per_block_limits(device):
    assert validate.check_threads_per_block(256) == (256,)
    assert validate.check_threads_per_block((32, 8)) == (32, 8)
    with pytest.raises(LaunchConfigError, match=f"limit of {device.max_threads_per_block}"):
        validate.check_threads_per_block(device.max_threads_per_block + 32)
    with pytest.raises(LaunchConfigError, match="dimension z"):
        validate.check_threads_per_block((1, 1, device.max_block_dim[2] + 1))
    with pytest.raises(LaunchConfigError, match="positive"):
        validate.check_threads_per_block(0)
    with pytest.raises(LaunchConfigError, match="tuple of 1 to 3"):
        validate.check_threads_per_block((2, 2, 2, 2))
    with pytest.raises(LaunchConfigError, match="grid-stride"):
        validate.check_blocks((1, device.max_grid_dim[1] + 1))
    with pytest.raises(LaunchConfigError, match="shared memory"):
        validate.check_shared_memory(device.max_shared_per_block + 1)


@pytest.mark.parametrize("n, tpb, blocks", [(1, 256, 1), (256, 256, 1), (257, 256, 2), (0, 32, 1), (10**6, 128, 7813)])
def test_blocks_to_cover(n, tpb, blocks):
    assert validate.blocks_to_cover(n, tpb) == blocks


def test_launch_configurations(device):
    assert validate.launch_1d(1000, 256) == (4, 256)
    assert validate.launch_2d((100, 300), (32, 8)) == ((10, 13), (32, 8))  # x across the 300 columns
    with pytest.raises(LaunchConfigError, match="limit"):
        validate.launch_1d(10, device.max_threads_per_block + 32)
    with pytest.raises(LaunchConfigError, match="limit"):
        validate.launch_2d((10, 10), (device.max_threads_per_block, 2))


def test_array_checks():
    device_array = gpucourse.to_device(np.zeros(8, np.float32))
    assert validate.check_device_array(device_array, "a", dtype=np.float32, ndim=1) is device_array
    with pytest.raises(ArrayArgumentError, match="must be an array"):
        validate.check_device_array([1, 2, 3], "a")
    with pytest.raises(ArrayArgumentError, match="dtype float32.*compiled for float64"):
        validate.check_device_array(device_array, "a", dtype=np.float64)
    with pytest.raises(ArrayArgumentError, match="2 dimension"):
        validate.check_device_array(device_array, "a", ndim=2)
    with pytest.raises(ArrayArgumentError, match="shape"):
        validate.check_device_array(device_array, "a", shape=(9,))
    host = np.zeros(8, np.float32)
    if mode.on_gpu():
        with pytest.raises(ArrayArgumentError, match="host memory.*cuda.to_device"):
            validate.check_device_array(host, "a")
    else:  # NumPy stands in for device memory in the simulator
        assert validate.check_device_array(host, "a") is host
    with pytest.raises(ArrayArgumentError, match="float32 or float64"):
        validate.check_float_dtype(np.int32)


def test_cupy_only_features():
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="cuBLAS SGEMM"):
            gpucourse.require_cupy("cuBLAS SGEMM")
        assert gpucourse.array_module() is np
    else:
        assert gpucourse.require_cupy("anything").__name__ == "cupy"


def test_gpu_only_block_prints_one_line(capsys):
    with gpucourse.gpu_only():
        raise GPUOnlyFeature("a CuPy texture")
    assert capsys.readouterr().out.strip() == "Skipped in simulator mode: a CuPy texture needs a CUDA GPU."
    with pytest.raises(ValueError), gpucourse.gpu_only():
        raise ValueError("other errors pass through")


def test_arrays_round_trip_and_poison():
    host = gpucourse.random_array((3, 5), np.float64, seed=3)
    assert np.array_equal(host, gpucourse.random_array((3, 5), np.float64, seed=3))
    assert not np.array_equal(host, gpucourse.random_array((3, 5), np.float64, seed=4))
    assert np.array_equal(gpucourse.to_host(gpucourse.to_device(host)), host)
    assert gpucourse.random_array(4, np.int32, low=0, high=10).dtype == np.int32
    assert np.iscomplexobj(gpucourse.random_array(4, np.complex64))
    assert np.isnan(gpucourse.poisoned(4)).all()
    assert (gpucourse.poisoned(4, np.int32) == np.iinfo(np.int32).min).all()
    with pytest.raises(TypeError):
        gpucourse.poisoned(2, bool)


def test_every_size_has_both_modes():
    for name, entry in sizes.SIZES.items():
        assert entry.gpu is not None and entry.simulator is not None and entry.unit, name
        assert sizes.problem_size(name) == (sizes.choose(name, profiles.current_profile()).size if mode.on_gpu() else entry.simulator)
    assert sizes.problem_size("increment", for_mode="gpu") > sizes.problem_size("increment", for_mode="simulator")
    with pytest.raises(KeyError, match="known sizes"):
        sizes.problem_size("no such experiment")
    with pytest.raises(ValueError):
        sizes.problem_size("increment", for_mode="tpu")


def test_book_figures():
    fig = book.figure("ch2_tab2_1_copy_eccon_K20")
    assert (fig.value, fig.unit, fig.gpu) == ("145", "GB/s", "Tesla K20")
    assert fig.number == 145.0
    assert "Tesla K20" in fig.quote() and "CUDA Fortran" in fig.quote()
    assert book.figure("appA_peak_bw_C2050").value == "144*" and book.figure("appA_peak_bw_C2050").number == 144.0
    assert [f.id for f in book.figures("appA_", quantity="theoretical peak bandwidth", gpu="C2050")] == ["appA_peak_bw_C2050"]
    assert len(book.figures("ch6_")) > 50
    assert all("K20" in f.gpu for f in book.figures("ch2_limit", gpu="K20"))
    with pytest.raises(KeyError, match="ids starting alike"):
        book.figure("ch2_tab2_1_copy_eccon_K99")
    with pytest.raises(ValueError):
        _ = book.figure("ch2_event_resolution").number  # printed as words


def test_tesla_table_has_this_device(device):
    table = tesla_table(device)
    assert table.headers[-1] == ("simulator (no GPU)" if device.simulated else device.name)
    rows = {row[0]: row for row in table.rows}
    assert rows["maximum threads per thread block"][-1] == device.max_threads_per_block
    assert rows["memory bus width"][4] == "384"  # the C2050 column, as printed
    if mode.on_gpu():
        assert rows["theoretical peak bandwidth"][-1] == pytest.approx(device.theoretical_bandwidth_gbs, rel=1e-3)
    assert "<table>" in table._repr_html_() and "C2050" in str(table)


def test_table_renders_missing_values():
    table = Table(["a", "b"], [[1, None], [2.5, "x"]], title="t", notes=["n"])
    assert "—" in str(table) and "n" in str(table) and "<caption" in table._repr_html_()


def test_show_source_shows_the_kernel():
    from gpucourse.kernels import intro

    listing = gpucourse.show_source(intro.increment_kernel)
    assert "def increment_kernel" in str(listing) and "cuda.grid(1)" in str(listing)
    assert "<" in listing._repr_html_()
