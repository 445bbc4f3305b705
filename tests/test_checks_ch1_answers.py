"""Chapter 1 checks against answers written another way than the reference: right ones pass, typical wrong ones fail with their cause.

Each right answer takes a route the exercise text allows (other index arithmetic, an early return, a
helper device function, a while loop); each wrong one is a mistake the check must name first, alone.
"""

from __future__ import annotations

import math

import pytest
from numba import cuda

import gpucourse
from gpucourse.checks import CheckFailed, ch1

# --- Exercise 1.1 ------------------------------------------------------------------------------------


@cuda.jit(device=True)
def _sum_of(a, b):
    return a + b


@cuda.jit
def add_early_return(out, x, y):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= out.shape[0]:
        return
    out[i] = _sum_of(x[i], y[i])


def add_arrays_ceil(out, x, y, threads_per_block=256):
    add_early_return[math.ceil(out.size / threads_per_block), threads_per_block](out, x, y)


@cuda.jit
def add_guarded(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def add_unguarded(out, x, y):
    i = cuda.grid(1)
    out[i] = x[i] + y[i]


def add_arrays_fixed_block(out, x, y, threads_per_block=256):
    add_guarded[-(-out.size // 256), 256](out, x, y)  # the argument is ignored


def add_arrays_blocks_from_256(out, x, y, threads_per_block=256):
    add_guarded[-(-out.size // 256), threads_per_block](out, x, y)  # blocks counted for 256 threads whatever the size


def add_arrays_default_128(out, x, y, threads_per_block=128):
    add_guarded[-(-out.size // threads_per_block), threads_per_block](out, x, y)


def add_arrays_no_bounds_check(out, x, y, threads_per_block=256):
    add_unguarded[-(-out.size // threads_per_block), threads_per_block](out, x, y)


def test_add_arrays_right_another_way(capsys):
    ch1.check_add_arrays(add_arrays_ceil)
    assert "\u2705 Exercise 1.1" in capsys.readouterr().out


@pytest.mark.parametrize(("answer", "cause"), [
    (add_arrays_fixed_block, r"threads_per_block=96\) launched blocks of 256 threads"),
    (add_arrays_blocks_from_256, r"never written.*ceil\(301 / 96\) = 4 blocks"),
    (add_arrays_default_128, r"called without threads_per_block, add_arrays launches blocks of 128"),
])
def test_add_arrays_block_size_argument_is_used(answer, cause):
    with pytest.raises(CheckFailed, match=cause) as failed:
        ch1.check_add_arrays(answer)
    assert str(failed.value).count("\n  - ") == 1


def test_add_arrays_without_bounds_check_names_that_alone():
    """The same verdict in both modes, in each mode's words: the simulator stops at the index, a GPU finds the guard cells written."""
    cause = (r"indexed outside an array \(thread \d+ of block \d+: index \d+" if gpucourse.is_simulator()
             else r"wrote \d+ element\(s\) outside the output array")
    with pytest.raises(CheckFailed, match=cause) as failed:
        ch1.check_add_arrays(add_arrays_no_bounds_check)
    message = str(failed.value)
    assert "rounded up" not in message and "tid=" not in message and "ctaid" not in message
    assert message.count("\n  - ") == 1


# --- Exercise 1.2 ------------------------------------------------------------------------------------


@cuda.jit
def scale_rows_explicit(out, matrix, factors):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row >= out.shape[0] or col >= out.shape[1]:
        return
    factor = factors[row]
    out[row, col] = matrix[row, col] * factor


def scale_rows_ceil(out, matrix, factors):
    rows, cols = out.shape
    scale_rows_explicit[(math.ceil(cols / 16), math.ceil(rows / 8)), (16, 8)](out, matrix, factors)


def scale_rows_32_by_8(out, matrix, factors):
    rows, cols = out.shape
    scale_rows_explicit[(math.ceil(cols / 32), math.ceil(rows / 8)), (32, 8)](out, matrix, factors)


def test_scale_rows_right_another_way(capsys):
    ch1.check_scale_rows(scale_rows_ceil)
    assert "\u2705 Exercise 1.2" in capsys.readouterr().out


def test_scale_rows_block_shape_is_the_one_asked():
    with pytest.raises(CheckFailed, match=r"blocks of 32 x 8 threads; the exercise asks for 16 x 8") as failed:
        ch1.check_scale_rows(scale_rows_32_by_8)
    assert str(failed.value).count("\n  - ") == 1


# --- Exercise 1.3 ------------------------------------------------------------------------------------


@cuda.jit
def fill_while(out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    while i < out.shape[0]:
        out[i] = 3 * i + 1
        i += stride


def test_fill_grid_stride_right_another_way(capsys):
    ch1.check_fill_grid_stride(fill_while)
    assert "\u2705 Exercise 1.3" in capsys.readouterr().out


# --- Exercise 1.4 ------------------------------------------------------------------------------------


def config_ceil(n, threads_per_block, device):
    limit = device.max_threads_per_block
    if threads_per_block < 1 or threads_per_block > limit:
        raise ValueError(f"{threads_per_block} threads per block: this device runs 1 to {limit}")
    return math.ceil(n / threads_per_block), threads_per_block


def config_fixed_1024(n, threads_per_block, device):
    if not 0 < threads_per_block <= 1024:
        raise ValueError("threads_per_block must be between 1 and 1024")
    return -(-n // threads_per_block), threads_per_block


def config_names_1024(n, threads_per_block, device):
    if not 0 < threads_per_block <= device.max_threads_per_block:
        raise ValueError("threads_per_block must be between 1 and 1024")  # the limit of most GPUs, not of this device
    return -(-n // threads_per_block), threads_per_block


def test_launch_config_right_another_way(capsys):
    ch1.check_launch_config(config_ceil)
    assert "\u2705 Exercise 1.4" in capsys.readouterr().out


@pytest.mark.parametrize(("answer", "cause"), [
    (config_fixed_1024, r"threads_per_block=544 was accepted on a device whose limit is 512.*device.max_threads_per_block"),
    (config_names_1024, r"threads_per_block=544 on a device whose limit is 512 threads per block should name the limit, 512"),
])
def test_launch_config_reads_the_device_limit(answer, cause):
    with pytest.raises(CheckFailed, match=cause):
        ch1.check_launch_config(answer)
