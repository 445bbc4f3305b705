"""Exercise checks catch each usual mistake and say what it is; right answers pass."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import gpucourse
from gpucourse.checks import CheckFailed, array_problems, ch1, run_guarded
from gpucourse.device import DeviceInfo


@cuda.jit
def add_right(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def add_unguarded(out, x, y):
    i = cuda.grid(1)
    if i < x.size + 16:  # reads and writes past the end of the arrays
        out[i] = x[i % x.size] + y[i % x.size]


@cuda.jit
def add_wrong(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] - y[i]


def launch(kernel, blocks=None):
    def run(out, x, y):
        n = out.shape[0]
        kernel[blocks or -(-n // 64), 64](out, x, y)

    return run


def test_right_answer_passes(capsys):
    ch1.check_add_arrays(launch(add_right))
    assert capsys.readouterr().out.startswith("\u2705 Exercise 1.1")


def test_too_few_blocks_is_named():
    with pytest.raises(CheckFailed, match="never written.*rounded up"):
        ch1.check_add_arrays(launch(add_right, blocks=1))


def test_missing_bounds_check_is_named():
    with pytest.raises(CheckFailed, match="outside"):
        ch1.check_add_arrays(launch(add_unguarded))


def test_wrong_values_are_named():
    with pytest.raises(CheckFailed, match="wrong values; at index 0 got"):
        ch1.check_add_arrays(launch(add_wrong))


def test_returning_nothing_and_wrong_dtype():
    expected = np.arange(4, dtype=np.float32)
    assert "is None" in array_problems(None, expected)[0]
    assert "should be an array" in array_problems(3, expected)[0]
    assert "shape" in array_problems(np.zeros(5, np.float32), expected)[0]
    assert any("dtype float64" in p for p in array_problems(expected.astype(np.float64), expected))
    assert array_problems(expected.copy(), expected) == []


def test_run_guarded_in_place():
    initial = np.arange(10, dtype=np.float32)
    got, problems = run_guarded(lambda out: None, (10,), np.float32, initial=initial)
    assert problems == [] and np.array_equal(got, initial)


@cuda.jit
def scale_rows_right(out, matrix, factors):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = matrix[row, col] * factors[row]


@cuda.jit
def scale_rows_swapped(out, matrix, factors):
    row, col = cuda.grid(2)  # x on rows, but the launch below covers x with the columns
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = matrix[row, col] * factors[row]


def launch_2d(kernel):
    def run(out, matrix, factors):
        rows, cols = out.shape
        kernel[(-(-cols // 16), -(-rows // 8)), (16, 8)](out, matrix, factors)

    return run


def test_scale_rows():
    ch1.check_scale_rows(launch_2d(scale_rows_right))
    with pytest.raises(CheckFailed, match="Exercise 1.2"):
        ch1.check_scale_rows(launch_2d(scale_rows_swapped))


@cuda.jit
def fill_stride(out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = 3 * i + 1


@cuda.jit
def fill_one_pass(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 3 * i + 1


def test_fill_grid_stride():
    ch1.check_fill_grid_stride(fill_stride)
    with pytest.raises(CheckFailed, match="cuda.gridsize"):
        ch1.check_fill_grid_stride(fill_one_pass)


def good_config(n: int, threads: int, device: DeviceInfo) -> tuple[int, int]:
    if not 0 < threads <= device.max_threads_per_block:
        raise ValueError(f"threads_per_block must be in 1..{device.max_threads_per_block}")
    return -(-n // threads), threads


def test_launch_config():
    ch1.check_launch_config(good_config)
    with pytest.raises(CheckFailed, match="round the blocks up"):
        ch1.check_launch_config(lambda n, t, d: (n // t, t) if 0 < t <= d.max_threads_per_block else good_config(n, t, d))
    with pytest.raises(CheckFailed, match="was accepted"):
        ch1.check_launch_config(lambda n, t, d: (-(-n // max(t, 1)), t))
    with pytest.raises(CheckFailed, match="raise ValueError instead"):
        ch1.check_launch_config(lambda n, t, d: good_config(n, t, d) if 0 < t <= d.max_threads_per_block else 1 / 0)


def test_check_sizes_come_from_the_table():
    assert gpucourse.problem_size("exercise_1d") % 64 != 0  # not a multiple of any block size
