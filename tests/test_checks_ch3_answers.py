"""Chapter 3 checks against answers written another way than the reference: right ones pass, typical wrong ones fail with their cause.

Right answers take routes the exercise texts allow (explicit indices, a rotated read order instead of a
padded tile, the book's second issue order, a downward scan, bit operations, helper variables); each
wrong one is a mistake the check must name first, alone, in words without the trace's vocabulary.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import mode
from gpucourse.arrays import random_array
from gpucourse.checks import CheckFailed, ch3_execution, ch3_memory
from gpucourse.errors import LaunchConfigError
from gpucourse.kernels import transfers
from gpucourse.occupancy import occupancy

#: An index past an array's end, in each mode's words: the simulator stops at it; a GPU finds the guard cells around the
#: output written (the same verdict, found another way).
OUT_OF_RANGE = r"indexed outside an array|wrote \d+ element\(s\) outside the output array"


def one_cause(failed: pytest.ExceptionInfo) -> str:
    """The message of a failed check, asserted to name one problem, in at most five lines, without trace words."""
    message = str(failed.value)
    assert message.count("\n  - ") == 1, message
    assert len(message.splitlines()) <= 5 and not any(word in message for word in ("tid=", "ctaid", "_Traced")), message
    return message


# --- Exercise 3.1 ------------------------------------------------------------------------------------


@cuda.jit
def scale_explicit(out, a, factor):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row >= a.shape[0] or col >= a.shape[1]:
        return
    out[row, col] = factor * a[row, col]


def scale_matrix_ceil(out, a, factor):
    rows, cols = a.shape
    scale_explicit[(math.ceil(cols / 32), math.ceil(rows / 8)), (32, 8)](out, a, factor)


def scale_matrix_flat(out, a, factor):
    rows, cols = a.shape
    scale_explicit[(math.ceil(cols / 256), rows), (256, 1)](out, a, factor)


def scale_matrix_narrow(out, a, factor):
    rows, cols = a.shape
    scale_explicit[(math.ceil(cols / 8), math.ceil(rows / 32)), (8, 32)](out, a, factor)


def test_scale_matrix_right_another_way(capsys):
    ch3_memory.check_scale_matrix(scale_matrix_ceil)
    assert "\u2705 Exercise 3.1" in capsys.readouterr().out


def test_scale_matrix_block_shapes_are_named_in_plain_words():
    with pytest.raises(CheckFailed, match=r"your blocks are 256 x 1 threads; the exercise asks for 32 x 8") as failed:
        ch3_memory.check_scale_matrix(scale_matrix_flat)
    assert "1 rows" not in one_cause(failed) and "pieces" not in str(failed.value)
    with pytest.raises(CheckFailed, match=r"your blocks are 8 x 32 threads: a warp then reads 4 rows of 8 floats, 4 separate pieces"):
        ch3_memory.check_scale_matrix(scale_matrix_narrow)


# --- Exercise 3.2 ------------------------------------------------------------------------------------


def sectors_in_a_loop(offset, stride, itemsize):
    seen = []
    for lane in range(32):
        sector = (lane * stride + offset) * itemsize // 32
        if sector not in seen:
            seen.append(sector)
    return len(seen)


def sectors_with_numpy(offset, stride, itemsize):
    return np.unique((np.arange(32) * stride + offset) * itemsize // 32).size


@pytest.mark.parametrize("answer", [sectors_in_a_loop, sectors_with_numpy])
def test_sectors_per_warp_right_another_way(answer, capsys):
    ch3_memory.check_sectors_per_warp(answer)
    assert "\u2705 Exercise 3.2" in capsys.readouterr().out


# --- Exercise 3.3 ------------------------------------------------------------------------------------
WIDE = 64


@cuda.jit
def row_sums_rotated_kernel(out, x):
    tile = cuda.shared.array((32, WIDE), float32)  # no padding: thread t starts its row at column t instead
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = float32(0)
    for k in range(WIDE):
        total += tile[t, (k + t) % WIDE]  # words 64 t + (k + t) % 64: lane t in bank (k + t) % 32
    out[base + t] = total


def row_sums_rotated(out, x):
    row_sums_rotated_kernel[x.shape[0] // 32, 32](out, x)


@cuda.jit
def row_sums_global_kernel(out, x):
    t = cuda.threadIdx.x
    row = cuda.blockIdx.x * 32 + t
    total = x[row, 0]
    for k in range(1, WIDE):
        total += x[row, k]  # a warp reads a column of x: 32 rows, 32 sectors
    out[row] = total


def row_sums_global(out, x):
    row_sums_global_kernel[x.shape[0] // 32, 32](out, x)


def test_wide_row_sums_right_another_way(capsys):
    ch3_memory.check_wide_row_sums(row_sums_rotated)
    out = capsys.readouterr().out
    assert "\u2705 Exercise 3.3" in out and "one pass (no bank conflict)" in out


def test_wide_row_sums_without_the_tile_is_named():
    with pytest.raises(CheckFailed, match=r"the reads of x are not coalesced.*shared tile") as failed:
        ch3_memory.check_wide_row_sums(row_sums_global)
    assert "0.0 pass" not in one_cause(failed)


# --- Exercise 3.4 ------------------------------------------------------------------------------------


def overlapped_by_stage(p):
    """The book's second version: every copy in, then every kernel, then every copy out, each chunk on its own stream."""
    work = list(zip(p.chunks, p.streams))
    for (_, host_part, device_part), stream in work:
        device_part.copy_to_device(host_part, stream=stream)
    for (index, host_part, device_part), stream in work:
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, stream)
    for (_, host_part, device_part), stream in work:
        device_part.copy_to_host(host_part, stream=stream)


def test_overlapped_right_another_way(capsys):
    ch3_memory.check_overlapped(overlapped_by_stage)
    assert "\u2705 Exercise 3.4" in capsys.readouterr().out


# --- Exercise 3.4.1 ----------------------------------------------------------------------------------
TILE_DIM, BLOCK_ROWS = 32, 8
TILE_SHAPE = (TILE_DIM, TILE_DIM + 1)


@cuda.jit(device=True)
def _inside(row, col, shape):
    return row < shape[0] and col < shape[1]


@cuda.jit
def transpose_while(out, inp):
    tile = cuda.shared.array(TILE_SHAPE, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.blockIdx.x * TILE_DIM + tx, cuda.blockIdx.y * TILE_DIM + ty
    j = 0
    while j < TILE_DIM:
        if _inside(row + j, col, inp.shape):
            tile[ty + j, tx] = inp[row + j, col]
        j += BLOCK_ROWS
    cuda.syncthreads()
    col, row = cuda.blockIdx.y * TILE_DIM + tx, cuda.blockIdx.x * TILE_DIM + ty
    j = 0
    while j < TILE_DIM:
        if _inside(row + j, col, out.shape):
            out[row + j, col] = tile[tx, ty + j]
        j += BLOCK_ROWS


@cuda.jit
def transpose_unchecked(out, inp):
    tile = cuda.shared.array(TILE_SHAPE, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.blockIdx.x * TILE_DIM + tx, cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        tile[ty + j, tx] = inp[row + j, col]  # no bounds check: the sides are not multiples of 32
    cuda.syncthreads()
    col, row = cuda.blockIdx.y * TILE_DIM + tx, cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        out[row + j, col] = tile[tx, ty + j]


@cuda.jit
def transpose_swizzled(out, inp):
    tile = cuda.shared.array((TILE_DIM, TILE_DIM), float32)  # no padding: row r of the tile is rotated by r instead
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.blockIdx.x * TILE_DIM + tx, cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, (tx + ty + j) % TILE_DIM] = inp[y + j, x]
    cuda.syncthreads()
    x, y = cuda.blockIdx.y * TILE_DIM + tx, cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < rows and y + j < cols:
            out[y + j, x] = tile[tx, (ty + j + tx) % TILE_DIM]  # lane tx in bank (ty + j + tx) % 32


@pytest.mark.parametrize("answer", [transpose_while, transpose_swizzled])
def test_transpose_right_another_way(answer, capsys):
    ch3_execution.check_no_bank_conflicts(answer)
    assert "\u2705 Exercise 3.4.1" in capsys.readouterr().out


def test_transpose_out_of_range_is_named_alone():
    with pytest.raises(CheckFailed, match=OUT_OF_RANGE) as failed:
        ch3_execution.check_no_bank_conflicts(transpose_unchecked)
    assert "never written" not in one_cause(failed)


# --- Exercise 3.5.1 ----------------------------------------------------------------------------------


def pick_downwards(registers_per_thread, shared_bytes_per_block, limits):
    best = None
    for threads in range(1024, 0, -32):
        try:
            fraction = occupancy(threads, registers_per_thread, shared_bytes_per_block, limits).fraction
        except LaunchConfigError:
            continue
        if best is None or fraction >= best[0]:  # downwards, ties go to the smaller size
            best = (fraction, threads)
    return best[1]


def pick_without_refusals(registers_per_thread, shared_bytes_per_block, limits):
    fractions = {threads: occupancy(threads, registers_per_thread, shared_bytes_per_block, limits).fraction
                 for threads in range(32, 1025, 32)}
    return min(t for t, f in fractions.items() if f == max(fractions.values()))


def test_pick_block_size_right_another_way(capsys):
    ch3_execution.check_pick_block_size(pick_downwards)
    assert "\u2705 Exercise 3.5.1" in capsys.readouterr().out


def test_pick_block_size_refusal_path_is_exercised():
    refused = r"raised LaunchConfigError: with this kernel, blocks of 672 threads or more cannot run at all. Catch gpucourse.LaunchConfigError"
    with pytest.raises(CheckFailed, match=refused) as failed:
        ch3_execution.check_pick_block_size(pick_without_refusals)
    one_cause(failed)


# --- Exercise 3.5.2 ----------------------------------------------------------------------------------
ILP = 4


@cuda.jit
def copy_ilp_while(out, inp, owner):
    values = cuda.local.array(ILP, inp.dtype)
    step = cuda.blockDim.x
    first = cuda.blockIdx.x * step * ILP + cuda.threadIdx.x
    j = 0
    while j < ILP:
        if first + j * step < inp.shape[0]:
            values[j] = inp[first + j * step]
        j += 1
    me = cuda.grid(1)
    j = 0
    while j < ILP:
        i = first + j * step
        if i < out.shape[0]:
            out[i] = values[j]
            owner[i] = me
        j += 1


@cuda.jit
def copy_ilp_four_names(out, inp, owner):
    step = cuda.blockDim.x
    i = cuda.blockIdx.x * step * ILP + cuda.threadIdx.x
    me = cuda.grid(1)
    if i + 3 * step < inp.shape[0]:  # four named values instead of a local array
        a, b, c, d = inp[i], inp[i + step], inp[i + 2 * step], inp[i + 3 * step]
        out[i], out[i + step], out[i + 2 * step], out[i + 3 * step] = a, b, c, d
        owner[i], owner[i + step], owner[i + 2 * step], owner[i + 3 * step] = me, me, me, me
    else:
        for j in range(ILP):
            k = i + j * step
            if k < inp.shape[0]:
                out[k] = inp[k]
                owner[k] = me


@pytest.mark.parametrize("answer", [copy_ilp_while, copy_ilp_four_names])
def test_copy_ilp_right_another_way(answer, capsys):
    ch3_execution.check_copy_ilp(answer)
    assert "\u2705 Exercise 3.5.2" in capsys.readouterr().out


# --- Exercise 3.6.1 ----------------------------------------------------------------------------------


@cuda.jit
def by_warp_bits(out, x, owner):
    g = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    warp, lane = g >> 5, g & 31
    k = (warp >> 1) * 64 + lane * 2 + (warp & 1)
    if k >= x.shape[0]:
        return
    owner[k] = g
    if warp & 1:
        out[k] = math.cos(x[k])
    else:
        out[k] = math.sin(x[k])


@cuda.jit
def by_warp_unchecked(out, x, owner):
    g = cuda.grid(1)
    warp, lane = g // 32, g % 32
    k = 64 * (warp // 2) + 2 * lane + warp % 2
    if warp % 2 == 0:  # no bounds check: n is odd and not a multiple of a block
        out[k] = math.sin(x[k])
    else:
        out[k] = math.cos(x[k])
    owner[k] = g


def test_branch_by_warp_right_another_way(capsys):
    ch3_execution.check_branch_by_warp(by_warp_bits)
    assert "\u2705 Exercise 3.6.1" in capsys.readouterr().out


def test_branch_by_warp_out_of_range_is_named_alone():
    with pytest.raises(CheckFailed, match=OUT_OF_RANGE) as failed:
        ch3_execution.check_branch_by_warp(by_warp_unchecked)
    assert "never written" not in one_cause(failed)


# --- Exercise 3.7.1 ----------------------------------------------------------------------------------


def rel_diff_steps(x, y):
    difference = math.fabs(x - y)
    scale = math.fabs(x) + math.fabs(y) + np.float32(1)
    return difference / scale


def rel_diff_float64_branch(x, y):
    if x < y:  # the check's first pair takes this branch
        return (y - x) / (abs(x) + abs(y) + float32(1))
    return (x - y) / (abs(x) + abs(y) + 1.0)  # a float64 literal in the other branch


def rel_diff_cast(x, y):
    return float32(abs(x - y) / (abs(x) + abs(y) + 1.0))  # float64 arithmetic, hidden by the cast


def rel_diff_numpy_cast(x, y):
    d = np.float32(abs(x - y) / (abs(x) + abs(y) + 1))
    return d


def no_kernel():
    raise RuntimeError("needs a GPU")  # what numba.vectorize(target='cuda') and CuPy do in the simulator


def test_rel_diff_element_right_another_way(capsys):
    if mode.is_simulator():
        ch3_memory.check_ufunc_kernels(rel_diff_steps, no_kernel, no_kernel, no_kernel)
    else:  # on a GPU the three kernels are made and judged as well
        from numba import vectorize

        ch3_memory.check_ufunc_kernels(rel_diff_steps, lambda: vectorize(["float32(float32, float32)"], target="cuda")(rel_diff_steps),
                                       ch3_memory._rel_diff_elementwise_reference, ch3_memory._max_reference)
    assert "\u2705 Exercise 3.7.1" in capsys.readouterr().out


@pytest.mark.parametrize(("element", "line"), [
    (rel_diff_float64_branch, "return (x - y) / (abs(x) + abs(y) + 1.0)"),
    (rel_diff_cast, "return float32(abs(x - y) / (abs(x) + abs(y) + 1.0))"),
    (rel_diff_numpy_cast, "d = np.float32(abs(x - y) / (abs(x) + abs(y) + 1))"),
])
def test_rel_diff_float64_is_found_where_it_is_computed(element, line):
    x = random_array(1000, np.float32, seed=371, low=-4, high=4)  # the check's data: its first pair takes the float32 branch
    y = random_array(1000, np.float32, seed=372, low=-4, high=4)
    assert x[0] < y[0] and (x >= y).any()
    with pytest.raises(CheckFailed, match=r"rel_diff_element computes in float64 at line \d+") as failed:
        ch3_memory.check_ufunc_kernels(element, no_kernel, no_kernel, no_kernel)
    message = one_cause(failed)
    assert f"(`{line}" in message and "float32(" in message
    assert len(message.split("`): ", 1)[1]) < 300  # the advice after the line it names: what to write instead, briefly
