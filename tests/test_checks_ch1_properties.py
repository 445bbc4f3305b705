"""Chapter 1 checks against answers nobody tuned them on: wrong ones by kind (the work done on the host, inputs changed,
block sizes that are not multiples of 32, edges of a rule, n^2 work), each named by its cause in at most five lines, and
right ones written another way than the reference, which pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from answers_common import caught, passes
from numba import cuda
from test_checks import scale_rows_right
from test_invariants import add_into_x
from test_invariants import scale_in_place as scale_in_place_kernel

from gpucourse.checks import ch1

# --- Exercise 1.1 ------------------------------------------------------------------------------------


def add_on_host(out, x, y, threads_per_block=256):
    out.copy_to_device(x.copy_to_host() + y.copy_to_host())


def add_accumulating(out, x, y, threads_per_block=256):
    add_into_x[-(-out.size // threads_per_block), threads_per_block](out, x, y)


@cuda.jit
def add_kernel(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def add_warp_rounded(out, x, y, threads_per_block=256):
    threads = 32 * math.ceil(threads_per_block / 32)  # blocks of whole warps: not the size asked for
    add_kernel[-(-out.size // threads), threads](out, x, y)


@cuda.jit
def add_short_by_one(out, x, y):
    i = cuda.grid(1)
    if i < out.size - 1:
        out[i] = x[i] + y[i]


def add_off_by_one(out, x, y, threads_per_block=256):
    add_short_by_one[-(-out.size // threads_per_block), threads_per_block](out, x, y)


@pytest.mark.parametrize(("answer", "causes"), [
    (add_on_host, ["no kernel was launched", "host"]),
    (add_accumulating, ["changed x in place", "left as it was"]),
    (add_warp_rounded, [r"threads_per_block=33\) launched blocks of 64 threads", "not only multiples of 32"]),
    (add_off_by_one, ["never written", r"first at index \d+"]),
])
def test_add_arrays_wrong_answers_are_named(answer, causes):
    caught(ch1.check_add_arrays, answer, causes=causes)


@cuda.jit
def add_while_kernel(out, x, y):
    i = cuda.threadIdx.x + cuda.blockDim.x * cuda.blockIdx.x
    while i < out.shape[0]:
        out[i] = x[i] + y[i]
        i += cuda.blockDim.x * cuda.gridDim.x


def add_grid_stride_while(out, x, y, threads_per_block=256):
    blocks = (out.shape[0] - 1) // threads_per_block + 1
    add_while_kernel[blocks, threads_per_block](out, x, y)


@cuda.jit(device=True)
def _global_index():
    return cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x


@cuda.jit
def add_helper_kernel(out, x, y):
    i = _global_index()
    if i >= len(out):
        return
    a = x[i]
    b = y[i]
    out[i] = a + b


def add_divmod(out, x, y, threads_per_block=256):
    blocks, rest = divmod(len(out), threads_per_block)
    add_helper_kernel[blocks + (rest > 0), threads_per_block](out, x, y)


@pytest.mark.parametrize("answer", [add_grid_stride_while, add_divmod])
def test_add_arrays_right_answers_pass(answer, capsys):
    passes(ch1.check_add_arrays, answer, capsys=capsys, exercise="1.1")


# --- Exercise 1.2 ------------------------------------------------------------------------------------


def scale_on_host(out, matrix, factors):
    out[:, :] = matrix.copy_to_host() * factors.copy_to_host()[:, None]


def scale_in_place(out, matrix, factors):
    rows, cols = out.shape
    scale_in_place_kernel[(-(-cols // 16), -(-rows // 8)), (16, 8)](out, matrix, factors)


@cuda.jit
def scale_by_column_factor(out, matrix, factors):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = matrix[row, col] * factors[col % factors.size]


def scale_wrong_factor(out, matrix, factors):
    rows, cols = out.shape
    scale_by_column_factor[(-(-cols // 16), -(-rows // 8)), (16, 8)](out, matrix, factors)


def scale_rows_floor(out, matrix, factors):
    rows, cols = out.shape
    scale_rows_right[(-(-cols // 16), max(1, rows // 8)), (16, 8)](out, matrix, factors)  # the last rows' blocks left out


@pytest.mark.parametrize(("answer", "causes"), [
    (scale_on_host, ["no kernel was launched"]),
    (scale_in_place, ["changed matrix in place"]),
    (scale_wrong_factor, ["wrong values"]),
    (scale_rows_floor, ["never written", "rows"]),
])
def test_scale_rows_wrong_answers_are_named(answer, causes):
    caught(ch1.check_scale_rows, answer, causes=causes)


@cuda.jit
def scale_grid_stride_kernel(out, matrix, factors):
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    while row < out.shape[0]:
        col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        while col < out.shape[1]:
            out[row, col] = matrix[row, col] * factors[row]
            col += cuda.blockDim.x * cuda.gridDim.x
        row += cuda.blockDim.y * cuda.gridDim.y


def scale_grid_stride(out, matrix, factors):
    rows, cols = out.shape
    scale_grid_stride_kernel[(-(-cols // 16), -(-rows // 8)), (16, 8)](out, matrix, factors)  # the loops would cover a smaller grid too


@cuda.jit(device=True)
def _times(value, factor):
    return value * factor


@cuda.jit
def scale_helper_kernel(out, matrix, factors):
    x, y = cuda.grid(2)
    if y >= out.shape[0] or x >= out.shape[1]:
        return
    out[y, x] = _times(matrix[y, x], factors[y])


def scale_with_helper(out, matrix, factors):
    threads = (16, 8)
    blocks = tuple(math.ceil(extent / size) for extent, size in zip(out.shape[::-1], threads))
    scale_helper_kernel[blocks, threads](out, matrix, factors)


@pytest.mark.parametrize("answer", [scale_grid_stride, scale_with_helper])
def test_scale_rows_right_answers_pass(answer, capsys):
    passes(ch1.check_scale_rows, answer, capsys=capsys, exercise="1.2")


# --- Exercise 1.3 ------------------------------------------------------------------------------------


@cuda.jit
def fill_scanning(out):
    mine, threads = cuda.grid(1), cuda.gridsize(1)
    for i in range(out.size):
        if i % threads == mine:
            out[i] = 3 * i + 1


@cuda.jit
def fill_by_counting(out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        value = 1
        for _ in range(i):
            value += 3
        out[i] = value


@cuda.jit
def fill_block_stride(out):
    for i in range(cuda.grid(1), out.size, cuda.blockDim.x):  # the block's size, not the grid's
        out[i] = 3 * i + 1


@cuda.jit
def fill_from_thread_index(out):
    for i in range(cuda.threadIdx.x, out.size, cuda.gridsize(1)):  # every block starts at the same elements
        out[i] = 3 * i + 1


@pytest.mark.parametrize(("answer", "causes"), [
    (fill_scanning, ["about n² work", "whole array"]),
    (fill_by_counting, ["about n² work", "elements before its own"]),
    (fill_block_stride, ["written by several threads", "cuda.gridsize\\(1\\)"]),
    (fill_from_thread_index, ["never written", r"fill_kernel\[\d+, \d+\]"]),
])
def test_fill_grid_stride_wrong_answers_are_named(answer, causes):
    caught(ch1.check_fill_grid_stride, answer, causes=causes)


@cuda.jit
def fill_in_rounds(out):
    step = cuda.gridsize(1)
    for first in range(0, out.size, step):
        i = first + cuda.grid(1)
        if i < out.size:
            out[i] = 3 * i + 1


@cuda.jit(device=True)
def _value_of(i):
    return 3 * i + 1


@cuda.jit
def fill_with_helper(out):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    stride = cuda.gridDim.x * cuda.blockDim.x
    while i < len(out):
        out[i] = _value_of(i)
        i += stride


@pytest.mark.parametrize("answer", [fill_in_rounds, fill_with_helper])
def test_fill_grid_stride_right_answers_pass(answer, capsys):
    passes(ch1.check_fill_grid_stride, answer, capsys=capsys, exercise="1.3")


# --- Exercise 1.4 ------------------------------------------------------------------------------------


def config_warps_only(n, threads_per_block, device):
    if threads_per_block % 32 or not 0 < threads_per_block <= device.max_threads_per_block:
        raise ValueError(f"threads_per_block must be a multiple of 32 up to {device.max_threads_per_block}")
    return -(-n // threads_per_block), threads_per_block


def config_below_limit(n, threads_per_block, device):
    if not 0 < threads_per_block < device.max_threads_per_block:  # the limit itself is allowed
        raise ValueError(f"at most {device.max_threads_per_block} threads per block")
    return -(-n // threads_per_block), threads_per_block


def config_numpy_ceil(n, threads_per_block, device):
    if not 0 < threads_per_block <= device.max_threads_per_block:
        raise ValueError(f"at most {device.max_threads_per_block} threads per block")
    return np.ceil(n / threads_per_block), threads_per_block


def config_plus_one(n, threads_per_block, device):
    if not 0 < threads_per_block <= device.max_threads_per_block:
        raise ValueError(f"at most {device.max_threads_per_block} threads per block")
    return n // threads_per_block + 1, threads_per_block


def config_silent(n, threads_per_block, device):
    if not 0 < threads_per_block <= device.max_threads_per_block:
        return None  # nothing to launch, but no error either
    return -(-n // threads_per_block), threads_per_block


@pytest.mark.parametrize(("answer", "causes"), [
    (config_warps_only, ["raised ValueError", "valid request", "not a multiple of 32"]),
    (config_below_limit, ["raised ValueError", "valid request", r"threads_per_block = (1024|512)"]),
    (config_numpy_ceil, ["return ints"]),
    (config_plus_one, [r"launch_config\(1024, 256, device\) returned \(5, 256\)", "round the blocks up"]),
    (config_silent, ["was accepted", "raise ValueError"]),
])
def test_launch_config_wrong_answers_are_named(answer, causes):
    caught(ch1.check_launch_config, answer, causes=causes)


def config_divmod(n, threads_per_block, device):
    limit = device.max_threads_per_block
    if threads_per_block not in range(1, limit + 1):
        raise ValueError(f"{threads_per_block} threads per block: {device.name} takes 1 to {limit}")
    blocks, rest = divmod(n, threads_per_block)
    return blocks + (1 if rest else 0), threads_per_block


def config_checks_apart(n, threads_per_block, device):
    if threads_per_block <= 0:
        raise ValueError(f"a block needs at least one thread (and at most {device.max_threads_per_block})")
    if threads_per_block > device.max_threads_per_block:
        raise ValueError(f"the device's limit is {device.max_threads_per_block} threads per block")
    return [math.ceil(n / threads_per_block), threads_per_block]


@pytest.mark.parametrize("answer", [config_divmod, config_checks_apart])
def test_launch_config_right_answers_pass(answer, capsys):
    passes(ch1.check_launch_config, answer, capsys=capsys, exercise="1.4")
