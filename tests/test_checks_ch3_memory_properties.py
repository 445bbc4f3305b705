"""Chapter 3 memory checks (3.1 to 3.4, 3.7.1) against answers nobody tuned them on: wrong ones by kind (the work on the
host, an input changed, bounds of the other axis, lines for sectors, chunks of a fixed number, float64 declared), each
named by its cause in at most five lines, and right ones written another way than the reference, which pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from answers_common import caught, passes
from numba import cuda, float32
from test_checks_ch3_memory import scale_coalesced

import gpucourse
from gpucourse.checks import ch3_memory
from gpucourse.kernels import transfers

WIDE = ch3_memory.WIDE


# --- Exercise 3.1 ------------------------------------------------------------------------------------


def scale_on_host(out, a, factor):
    out[:, :] = a.copy_to_host() * factor


@cuda.jit
def scale_in_place_kernel(out, a, factor):
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        a[row, col] *= factor
        out[row, col] = a[row, col]


@cuda.jit
def scale_other_axis_kernel(out, a, factor):
    col, row = cuda.grid(2)
    if row < a.shape[1] and col < a.shape[0]:  # each bound checked against the other axis
        out[row, col] = a[row, col] * factor


def launched(kernel, floor_columns=False):
    def scale_matrix(out, a, factor):
        rows, cols = a.shape
        x_blocks = max(1, cols // 32) if floor_columns else -(-cols // 32)
        kernel[(x_blocks, -(-rows // 8)), (32, 8)](out, a, factor)

    return scale_matrix


@pytest.mark.parametrize(("answer", "causes"), [
    (scale_on_host, ("no kernel was launched",)),
    (launched(scale_in_place_kernel), ("changed a in place",)),
    (launched(scale_coalesced, floor_columns=True), ("never written", "columns with x")),
    (launched(scale_other_axis_kernel), ("(outside|never written)",)),
])
def test_scale_matrix_wrong_answers_are_named(answer, causes):
    caught(ch3_memory.check_scale_matrix, answer, causes=causes)


@cuda.jit
def scale_grid_stride_kernel(out, a, factor):
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    while row < a.shape[0]:
        col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        while col < a.shape[1]:
            out[row, col] = a[row, col] * factor
            col += cuda.gridDim.x * cuda.blockDim.x
        row += cuda.gridDim.y * cuda.blockDim.y


def scale_grid_stride(out, a, factor):
    scale_grid_stride_kernel[(-(-a.shape[1] // 32), -(-a.shape[0] // 8)), (32, 8)](out, a, factor)


@cuda.jit(device=True)
def _scaled(value, factor):
    return value * factor


@cuda.jit
def scale_helper_kernel(out, a, factor):
    col = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    row = cuda.blockIdx.y * 8 + cuda.threadIdx.y
    if row >= out.shape[0] or col >= out.shape[1]:
        return
    out[row, col] = _scaled(a[row, col], factor)


def scale_with_helper(out, a, factor):
    scale_helper_kernel[(math.ceil(a.shape[1] / 32), math.ceil(a.shape[0] / 8)), (32, 8)](out, a, factor)


@pytest.mark.parametrize("answer", [scale_grid_stride, scale_with_helper])
def test_scale_matrix_right_answers_pass(answer, capsys):
    passes(ch3_memory.check_scale_matrix, answer, capsys=capsys, exercise="3.1")


# --- Exercise 3.2 ------------------------------------------------------------------------------------


def sectors_as_lines(offset, stride, itemsize):
    return len({((lane * stride + offset) * itemsize) // 128 for lane in range(32)})  # 128-byte lines, not 32-byte sectors


def sectors_of_31_lanes(offset, stride, itemsize):
    return len({((lane * stride + offset) * itemsize) // 32 for lane in range(31)})


def sectors_offset_in_bytes(offset, stride, itemsize):
    return len({(lane * stride * itemsize + offset) // 32 for lane in range(32)})  # the offset counted in bytes


def sectors_by_formula(offset, stride, itemsize):
    return min(32, math.ceil(32 * stride * itemsize / 32))  # neither the offset nor the shared sectors


@pytest.mark.parametrize(("answer", "causes"), [
    (sectors_as_lines, (r"sectors_per_warp\(0, 1, 4\) returned 1; expected 4", "byte // 32")),
    (sectors_of_31_lanes, ("returned", "over all 32 lanes")),
    (sectors_offset_in_bytes, (r"sectors_per_warp\(8, 1, 4\) returned 5; expected 5|returned \d+; expected \d+",)),
    (sectors_by_formula, (r"sectors_per_warp\(1, 1, 4\) returned 4; expected 5",)),
])
def test_sectors_per_warp_wrong_answers_are_named(answer, causes):
    caught(ch3_memory.check_sectors_per_warp, answer, causes=causes)


def sectors_shifted(offset, stride, itemsize):
    return len(set(map(lambda lane: ((lane * stride + offset) * itemsize) >> 5, range(32))))  # noqa: C417


def sectors_counting_changes(offset, stride, itemsize):
    seen = []
    for lane in range(32):
        sector = (offset + stride * lane) * itemsize // 32
        if sector not in seen:
            seen.append(sector)
    return len(seen)


@pytest.mark.parametrize("answer", [sectors_shifted, sectors_counting_changes])
def test_sectors_per_warp_right_answers_pass(answer, capsys):
    passes(ch3_memory.check_sectors_per_warp, answer, capsys=capsys, exercise="3.2")


# --- Exercise 3.3 ------------------------------------------------------------------------------------

PADDED = WIDE + 1
PADDED_3 = WIDE + 3


def row_sums_on_host(out, x):
    out.copy_to_device(x.copy_to_host().sum(axis=1))


@cuda.jit
def row_sums_into_x_kernel(out, x):
    tile = cuda.shared.array((32, PADDED), float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = float32(0)
    for k in range(WIDE):
        total += tile[t, k]
    x[base + t, 0] = total  # kept in the input as well
    out[base + t] = total


@cuda.jit
def row_sums_short_kernel(out, x):
    tile = cuda.shared.array((32, PADDED), float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = tile[t, 0]
    for k in range(1, WIDE - 1):  # one column short
        total += tile[t, k]
    out[base + t] = total


def blocks_of_32(kernel):
    def wide_row_sums(out, x):
        kernel[x.shape[0] // 32, 32](out, x)

    return wide_row_sums


@pytest.mark.parametrize(("answer", "causes"), [
    (row_sums_on_host, ("no kernel was launched",)),
    (blocks_of_32(row_sums_into_x_kernel), ("changed x in place",)),
    (blocks_of_32(row_sums_short_kernel), ("wrong values",)),
])
def test_wide_row_sums_wrong_answers_are_named(answer, causes):
    caught(ch3_memory.check_wide_row_sums, answer, causes=causes)


@cuda.jit
def row_sums_flat_load_kernel(out, x):
    tile = cuda.shared.array((32, PADDED_3), float32)  # any odd row length spreads the 32 rows over 32 banks
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    k = t
    while k < 32 * WIDE:
        tile[k // WIDE, k % WIDE] = x[base + k // WIDE, k % WIDE]
        k += 32
    cuda.syncthreads()
    total = float32(0)
    c = 0
    while c < WIDE:
        total += tile[t, c]
        c += 1
    out[base + t] = total


@cuda.jit(device=True)
def _half_sum(tile, row, start):
    total = float32(0)
    for c in range(start, start + WIDE // 2):
        total += tile[row, c]
    return total


@cuda.jit
def row_sums_halves_kernel(out, x):
    tile = cuda.shared.array((32, PADDED), float32)
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * 32
    for r in range(32):
        tile[r, t] = x[first + r, t]
        tile[r, t + 32] = x[first + r, t + 32]
    cuda.syncthreads()
    out[first + t] = _half_sum(tile, t, 0) + _half_sum(tile, t, WIDE // 2)


@pytest.mark.parametrize("answer", [blocks_of_32(row_sums_flat_load_kernel), blocks_of_32(row_sums_halves_kernel)])
def test_wide_row_sums_right_answers_pass(answer, capsys):
    passes(ch3_memory.check_wide_row_sums, answer, capsys=capsys, exercise="3.3")


# --- Exercise 3.4 ------------------------------------------------------------------------------------


def overlapped_four_chunks(p):
    for k in range(4):  # the notebook's 4, not len(p.chunks)
        index, host_part, device_part = p.chunks[k]
        stream = p.streams[k]
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, stream)
        device_part.copy_to_host(host_part, stream=stream)


def overlapped_offset_in_blocks(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index * p.threads_per_block, p.repeats, p.threads_per_block, stream)
        device_part.copy_to_host(host_part, stream=stream)


def overlapped_copy_back_first(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        device_part.copy_to_host(host_part, stream=stream)  # before the kernel: the copy back carries the input
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, stream)


@pytest.mark.parametrize(("answer", "causes"), [
    (overlapped_four_chunks, ("raised IndexError", "chunk", "len\\(p.chunks\\)")),
    (overlapped_offset_in_blocks, ("got offset", "index \\* len\\(host_part\\)")),
    (overlapped_copy_back_first, ("(wrong values|still all zeros)",)),
])
def test_overlapped_wrong_answers_are_named(answer, causes):
    caught(ch3_memory.check_overlapped, answer, causes=causes)


def overlapped_enumerated(p):
    step = len(p.host) // len(p.streams)
    for k, (_, host_part, device_part) in enumerate(p.chunks):
        stream = p.streams[k]
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, k * step, p.repeats, p.threads_per_block, stream=stream)
        device_part.copy_to_host(host_part, stream=stream)


def overlapped_running_offset(p):
    offset, k = 0, 0
    while k < len(p.chunks):
        _, host_part, device_part = p.chunks[k]
        device_part.copy_to_device(host_part, stream=p.streams[k])
        transfers.unit_kernel_launch(device_part, offset, p.repeats, p.threads_per_block, p.streams[k])
        device_part.copy_to_host(host_part, stream=p.streams[k])
        offset += len(host_part)
        k += 1


@pytest.mark.parametrize("answer", [overlapped_enumerated, overlapped_running_offset])
def test_overlapped_right_answers_pass(answer, capsys):
    passes(ch3_memory.check_overlapped, answer, capsys=capsys, exercise="3.4")


# --- Exercise 3.7.1 ----------------------------------------------------------------------------------


def rel_diff(x, y):
    return abs(x - y) / (abs(x) + abs(y) + float32(1))


def rel_diff_float(x, y):
    half = 0.5  # a Python float: float64 in a kernel, and so is all arithmetic it touches
    return abs(x - y) / (abs(x) + abs(y) + half + half)


def ufunc_of(signature):
    def make():
        from numba import vectorize

        return vectorize([signature], target="cuda")(rel_diff)

    return make


def elementwise_of(in_params="float32 x, float32 y", out_params="float32 d", code="d = fabsf(x - y) / (fabsf(x) + fabsf(y) + 1.0f)"):
    def make():
        cupy = gpucourse.require_cupy("cupy.ElementwiseKernel")
        return cupy.ElementwiseKernel(in_params, out_params, code, "rel_diff_fresh")

    return make


def reduction_of(in_params="float32 d", out_params="float32 m", map_expr="d", reduce_expr="max(a, b)"):
    def make():
        cupy = gpucourse.require_cupy("cupy.ReductionKernel")
        return cupy.ReductionKernel(in_params, out_params, map_expr, reduce_expr, "m = a", "0", "largest_fresh")

    return make


@pytest.mark.parametrize(("answers", "causes"), [
    ((rel_diff_float, ufunc_of("float32(float32, float32)"), elementwise_of(), reduction_of()), ("computes in float64", "line")),
    ((rel_diff, ufunc_of("float64(float32, float32)"), elementwise_of(), reduction_of()), ("signature is float64\\(float32",)),
    ((rel_diff, ufunc_of("float32(float32, float32)"), elementwise_of(code="d = (double)fabsf(x - y) / (fabsf(x) + fabsf(y) + 1.0f)"),
      reduction_of()), ("ElementwiseKernel's C code", "a double")),
    ((rel_diff, ufunc_of("float32(float32, float32)"), elementwise_of(in_params="float64 x, float64 y"), reduction_of()),
     ("declares in_params \"float64 x, float64 y\"",)),
    ((rel_diff, ufunc_of("float32(float32, float32)"), elementwise_of(), reduction_of(map_expr="d * 1.0")),
     ("ReductionKernel's C code", "the literal 1.0", "1.0f")),
])
def test_ufunc_kernels_wrong_answers_are_named(answers, causes):
    caught(ch3_memory.check_ufunc_kernels, *answers, causes=causes)


def rel_diff_branches(x, y):
    d = x - y
    if d < 0:
        d = -d
    return d / (abs(x) + abs(y) + float32(1.0))


def ufunc_with_string_signature():
    from numba import vectorize

    return vectorize("float32(float32, float32)", target="cuda")(rel_diff_branches)


def rel_diff_max_min(x, y):
    return (max(x, y) - min(x, y)) / (abs(x) + abs(y) + float32(1))


@pytest.mark.parametrize("answers", [
    (rel_diff_branches, ufunc_with_string_signature, elementwise_of("T x, T y", "T d", "d = abs(x - y) / (abs(x) + abs(y) + (T)1)"),
     reduction_of("T d", "T m", "d", "(a > b ? a : b)")),
    (rel_diff_max_min, ufunc_of("float32(float32, float32)"),
     elementwise_of(code="float t = fabsf(x) + fabsf(y); d = fabsf(x - y) / (t + 1.f)"), reduction_of(reduce_expr="fmaxf(a, b)")),
])
def test_ufunc_kernels_right_answers_pass(answers, capsys):
    passes(ch3_memory.check_ufunc_kernels, *answers, capsys=capsys, exercise="3.7.1")
    assert np.float32  # the right answers' values are checked on a GPU, their types and C code in both modes
