"""The offset and stride kernels against NumPy, the sector model by hand, and the sweep tuner."""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse.errors import ArrayArgumentError, LaunchConfigError
from gpucourse.kernels import coalescing

TPB = gpucourse.problem_size("ch3_threads_per_block")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [0, 1, 13])
def test_offset_increment(dtype, offset):
    n = gpucourse.problem_size("ch3_test_elements")
    start = gpucourse.random_array(n + 20, dtype, seed=offset)
    a = gpucourse.to_device(start)
    coalescing.offset_increment(a, n, offset, TPB)
    expected = start.copy()
    expected[offset:offset + n] += dtype(1)
    np.testing.assert_array_equal(gpucourse.to_host(a), expected)  # untouched elements keep their values


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride", [1, 3, 32])
def test_stride_increment(dtype, stride):
    n = gpucourse.problem_size("ch3_test_elements")
    start = gpucourse.random_array(n * stride + 3, dtype, seed=stride)
    a = gpucourse.to_device(start)
    coalescing.stride_increment(a, n, stride, TPB)
    expected = start.copy()
    expected[0:n * stride:stride] += dtype(1)
    np.testing.assert_array_equal(gpucourse.to_host(a), expected)


def test_bad_arguments_are_named():
    a = gpucourse.to_device(np.zeros(100, np.float32))
    with pytest.raises(ValueError, match="largest offset"):
        coalescing.offset_increment(a, 90, 20)
    with pytest.raises(ValueError, match="largest stride"):
        coalescing.stride_increment(a, 50, 3)
    with pytest.raises(ValueError, match="positive"):
        coalescing.stride_increment(a, 10, 0)
    with pytest.raises(ValueError, match="non-negative"):
        coalescing.offset_increment(a, 10, -1)
    with pytest.raises(ArrayArgumentError, match="float32 or float64"):
        coalescing.offset_increment(gpucourse.to_device(np.zeros(100, np.int32)), 10, 0)
    with pytest.raises(LaunchConfigError, match="limit"):
        coalescing.offset_increment(a, 10, 0, threads_per_block=4096)
    if gpucourse.on_gpu():
        with pytest.raises(ArrayArgumentError, match="host memory"):
            coalescing.offset_increment(np.zeros(100, np.float32), 10, 0)


def test_sector_model_by_hand():
    # A warp of 32 float32 reads 128 bytes: 4 sectors when aligned, 5 when shifted by one element.
    assert coalescing.warp_sectors(0, 1, 4) == 4
    assert coalescing.warp_sectors(1, 1, 4) == 5
    assert coalescing.warp_sectors(8, 1, 4) == 4  # 32 bytes: a whole sector
    assert coalescing.warp_sectors(0, 2, 4) == 8
    assert coalescing.warp_sectors(0, 8, 4) == 32 and coalescing.warp_sectors(0, 32, 4) == 32
    assert coalescing.warp_sectors(0, 1, 8) == 8 and coalescing.warp_sectors(0, 4, 8) == 32
    assert coalescing.sector_efficiency(0, 1, 4) == pytest.approx(1.0)
    assert coalescing.sector_efficiency(0, 2, 4) == pytest.approx(0.5)
    assert coalescing.sector_efficiency(0, 16, 8) == pytest.approx(0.25)
    assert coalescing.dram_efficiency(1, 4) == 1.0 and coalescing.dram_efficiency(4, 4) == pytest.approx(0.25)
    assert coalescing.dram_efficiency(32, 4) == pytest.approx(0.125) and coalescing.dram_efficiency(32, 8) == pytest.approx(0.25)
    assert coalescing.stride_where_sectors_saturate(4) == 8 and coalescing.stride_where_sectors_saturate(8) == 4
    assert coalescing.predicted_fraction("offset", 5, "float32") == 1.0
    assert coalescing.predicted_fraction("stride", 2, "float64") == pytest.approx(0.5)
    assert coalescing.bytes_moved(10, np.float64) == 160


@pytest.mark.parametrize("kind", ["offset", "stride"])
def test_tuner_sweeps(kind):
    sweep = gpucourse.problem_size(f"ch3_{kind}s")
    values = tuple(sweep[:2]) + tuple(sweep[-1:])  # the notebook sweeps them all; here the ends suffice
    n = gpucourse.problem_size("ch3_test_elements")
    tuner = coalescing.coalescing_tuner(kind, n, values, TPB, repeat=2)
    for dtype in ("float32", "float64"):
        measured = tuner.sweep(kind, dtype=dtype)
        assert [m.params[kind] for m in measured] == list(values)
        assert all(m.gbs > 0 and m.bytes_moved == coalescing.bytes_moved(n, dtype) for m in measured)
    x, gbs = tuner.series(kind, dtype="float64")
    assert list(x) == list(values) and len(gbs) == len(values)
    if gpucourse.on_gpu() and kind == "stride":
        first, last = tuner.measure(stride=values[0], dtype="float32"), tuner.measure(stride=values[-1], dtype="float32")
        assert last.gbs < 0.5 * first.gbs  # wide strides waste most of each sector
    with pytest.raises(ValueError, match="kind"):
        coalescing.coalescing_tuner("diagonal", n, values, TPB)
