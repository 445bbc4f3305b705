"""The chapter 3 (transpose, execution configuration) exercise checks: right answers pass, usual mistakes are named."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import mode
from gpucourse.checks import CheckFailed, ch3_execution
from gpucourse.occupancy import book_sm_limits, occupancy

TILE_DIM, BLOCK_ROWS = 32, 8
PADDED = (TILE_DIM, TILE_DIM + 1)
UNPADDED = (TILE_DIM, TILE_DIM)

# --- Exercise 3.4.1 ----------------------------------------------------------------------------


@cuda.jit
def transpose_padded(out, inp):
    tile = cuda.shared.array(PADDED, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE_DIM + tx
    y = cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE_DIM + tx
    y = cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < rows and y + j < cols:
            out[y + j, x] = tile[tx, ty + j]


@cuda.jit
def transpose_conflicted(out, inp):
    tile = cuda.shared.array(UNPADDED, float32)  # a named constant: the check still reads it
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE_DIM + tx
    y = cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE_DIM + tx
    y = cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < rows and y + j < cols:
            out[y + j, x] = tile[tx, ty + j]


@cuda.jit
def transpose_one_row_of_threads_per_tile(out, inp):
    tile = cuda.shared.array(PADDED, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE_DIM + tx
    y = cuda.blockIdx.y * TILE_DIM + ty
    if x < cols and y < rows:  # forgot the loop: only 8 of each tile's 32 rows
        tile[ty, tx] = inp[y, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE_DIM + tx
    y = cuda.blockIdx.x * TILE_DIM + ty
    if x < rows and y < cols:
        out[y, x] = tile[tx, ty]


@cuda.jit
def transpose_unguarded(out, inp):
    tile = cuda.shared.array(PADDED, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE_DIM + tx
    y = cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        tile[ty + j, tx] = inp[min(y + j, rows - 1), min(x, cols - 1)]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE_DIM + tx
    y = cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        out[y + j, x] = tile[tx, ty + j]  # no bounds check on the store


@cuda.jit
def copy_not_transpose(out, inp):
    tile = cuda.shared.array(PADDED, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE_DIM + tx
    y = cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
    cuda.syncthreads()
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows and y + j < out.shape[1] and x < out.shape[0]:
            out[x, y + j] = tile[ty + j, tx] + 1  # wrong values


@cuda.jit
def transpose_no_barrier(out, inp):
    tile = cuda.shared.array(PADDED, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE_DIM + tx
    y = cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
    # no cuda.syncthreads(): the 8 warps read tile columns other warps are still writing
    x = cuda.blockIdx.y * TILE_DIM + tx
    y = cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < rows and y + j < cols:
            out[y + j, x] = tile[tx, ty + j]


@cuda.jit
def transpose_strided_writes(out, inp):
    tile = cuda.shared.array(PADDED, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE_DIM + tx
    y = cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
    cuda.syncthreads()
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            out[x, y + j] = tile[ty + j, tx]  # staged, but threadIdx.x walks out's rows: a stride of rows elements


TWO_PADDED = (TILE_DIM, TILE_DIM + 2)


@cuda.jit
def transpose_padded_by_two(out, inp):
    tile = cuda.shared.array(TWO_PADDED, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE_DIM + tx
    y = cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE_DIM + tx
    y = cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < rows and y + j < cols:
            out[y + j, x] = tile[tx, ty + j]


def test_transpose_races_strides_and_two_way_conflicts_are_named():
    with pytest.raises(CheckFailed, match="race on shared memory.*A barrier is missing after line"):
        ch3_execution.check_no_bank_conflicts(transpose_no_barrier)
    with pytest.raises(CheckFailed, match="writes to out are not coalesced"):
        ch3_execution.check_no_bank_conflicts(transpose_strided_writes)
    with pytest.raises(CheckFailed, match="2-way bank conflict"):
        ch3_execution.check_no_bank_conflicts(transpose_padded_by_two)


def test_transpose_check_passes_the_padded_tile(capsys):
    assert ch3_execution.shared_array_shapes(transpose_padded) == [(32, 33)]
    ch3_execution.check_no_bank_conflicts(transpose_padded)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 3.4.1")


def test_transpose_check_names_the_bank_conflict():
    assert ch3_execution.shared_array_shapes(transpose_conflicted) == [(32, 32)]
    with pytest.raises(CheckFailed, match=r"32-way bank conflict.*shape \(32, 33\)"):
        ch3_execution.check_no_bank_conflicts(transpose_conflicted)


def test_transpose_check_names_missing_rows_bounds_and_values():
    with pytest.raises(CheckFailed, match="before any thread of the block wrote it.*loop j over 0, 8, 16, 24"):
        ch3_execution.check_no_bank_conflicts(transpose_one_row_of_threads_per_tile)
    with pytest.raises(CheckFailed, match="outside"):
        ch3_execution.check_no_bank_conflicts(transpose_unguarded)
    with pytest.raises(CheckFailed, match="wrong values"):
        ch3_execution.check_no_bank_conflicts(copy_not_transpose)


@cuda.jit
def no_shared(out, inp):
    x, y = cuda.grid(2)
    if y < inp.shape[0] and x < inp.shape[1]:
        out[x, y] = inp[y, x]


def transpose_shape_computed_inside(out, inp):
    tile = cuda.shared.array((TILE_DIM, TILE_DIM + 1), float32)  # fine in the simulator, refused by Numba on a GPU
    tile[0, 0] = inp[0, 0]
    out[0, 0] = tile[0, 0]


def test_transpose_check_wants_constant_shapes():
    assert ch3_execution.shared_array_declarations(transpose_shape_computed_inside) == [((32, 33), True)]
    assert ch3_execution.shared_array_declarations(transpose_padded) == [((32, 33), False)]
    with pytest.raises(CheckFailed, match="computed inside the kernel"):
        ch3_execution.check_no_bank_conflicts(cuda.jit(transpose_shape_computed_inside))


def test_transpose_check_wants_a_shared_tile():
    with pytest.raises(CheckFailed, match="declares no shared array"):
        ch3_execution.check_no_bank_conflicts(no_shared)


# --- Exercise 3.5.1 ----------------------------------------------------------------------------


def pick_right(registers, shared, limits):
    best, answer = -1.0, None
    for size in range(32, 1025, 32):
        try:
            fraction = occupancy(size, registers, shared, limits).fraction
        except Exception:
            continue
        if fraction > best:
            best, answer = fraction, size
    return answer


def test_pick_block_size_cases_are_not_trivial():
    answers = {(gpu, r, s): ch3_execution.best_block_size(r, s, book_sm_limits(gpu)) for gpu, r, s in ch3_execution.EXERCISE_351_CASES}
    assert answers[("Tesla K20", 8, 0)] == 128  # 16 blocks of 4 warps fill 64 warps
    assert answers[("Tesla C2050", 8, 0)] == 192  # 8 blocks of 6 warps fill 48: not a power of two
    assert answers[("Tesla K20", 16, 12 * 1024)] == 512  # 4 blocks fit the shared memory: 16 warps each


def test_pick_block_size_check(capsys):
    ch3_execution.check_pick_block_size(pick_right)
    assert "\u2705 Exercise 3.5.1" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="reaches occupancy 0.667"):
        ch3_execution.check_pick_block_size(lambda r, s, limits: 1024)  # more threads is not more occupancy
    with pytest.raises(CheckFailed, match="but so does the smaller"):
        ch3_execution.check_pick_block_size(lambda r, s, limits: 256 if pick_right(r, s, limits) <= 256 else 512)
    with pytest.raises(CheckFailed, match="multiple of the warp size"):
        ch3_execution.check_pick_block_size(lambda r, s, limits: 100)
    with pytest.raises(CheckFailed, match="return an int"):
        ch3_execution.check_pick_block_size(lambda r, s, limits: None)
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        ch3_execution.check_pick_block_size(lambda r, s, limits: 1 // 0)


def test_pick_block_size_check_notices_ignored_shared_memory():
    def ignores_shared(registers, shared, limits):
        return pick_right(registers, 0, limits)

    with pytest.raises(CheckFailed, match="limited by shared memory"):
        ch3_execution.check_pick_block_size(ignores_shared)


# --- Exercise 3.5.2 ----------------------------------------------------------------------------
ILP = 4


@cuda.jit
def copy_ilp_right(out, inp, owner):
    values = cuda.local.array(ILP, inp.dtype)
    first = cuda.blockIdx.x * cuda.blockDim.x * ILP + cuda.threadIdx.x
    for j in range(ILP):
        i = first + j * cuda.blockDim.x
        if i < inp.size:
            values[j] = inp[i]
    for j in range(ILP):
        i = first + j * cuda.blockDim.x
        if i < inp.size:
            out[i] = values[j]
            owner[i] = cuda.grid(1)


@cuda.jit
def copy_ilp_contiguous_per_thread(out, inp, owner):
    first = cuda.grid(1) * ILP  # each thread takes 4 neighbours: a warp's loads are 16 bytes apart
    for j in range(ILP):
        i = first + j
        if i < inp.size:
            out[i] = inp[i]
            owner[i] = cuda.grid(1)


@cuda.jit
def copy_one_per_thread(out, inp, owner):
    i = cuda.grid(1)
    if i < inp.size:
        out[i] = inp[i]
        owner[i] = i


@cuda.jit
def copy_ilp_unbatched(out, inp, owner):
    first = cuda.blockIdx.x * cuda.blockDim.x * ILP + cuda.threadIdx.x
    for j in range(ILP):
        i = first + j * cuda.blockDim.x
        if i < inp.size:
            out[i] = inp[i]  # load, then store, then the next load: one load in flight
            owner[i] = cuda.grid(1)


def test_copy_ilp_check(capsys):
    ch3_execution.check_copy_ilp(copy_ilp_right)
    assert "\u2705 Exercise 3.5.2" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="never written.*each thread copies 4"):
        ch3_execution.check_copy_ilp(copy_one_per_thread)
    with pytest.raises(CheckFailed, match="copied by thread 0, expected thread 1"):
        ch3_execution.check_copy_ilp(copy_ilp_contiguous_per_thread)


@cuda.jit
def copy_ilp_single_precision(out, inp, owner):
    values = cuda.local.array(ILP, float32)  # float32 registers for float64 data: the copy loses digits
    first = cuda.blockIdx.x * cuda.blockDim.x * ILP + cuda.threadIdx.x
    for j in range(ILP):
        i = first + j * cuda.blockDim.x
        if i < inp.size:
            values[j] = inp[i]
    for j in range(ILP):
        i = first + j * cuda.blockDim.x
        if i < inp.size:
            out[i] = values[j]
            owner[i] = cuda.grid(1)


def test_copy_ilp_check_sees_the_loads_in_both_modes():
    # the trace (simulator, or replayed in one on a GPU) shows the order of loads and stores; a GPU also reads the PTX
    with pytest.raises(CheckFailed, match="stores after only 1 load"):
        ch3_execution.check_copy_ilp(copy_ilp_unbatched)
    with pytest.raises(CheckFailed, match="wrong values"):
        ch3_execution.check_copy_ilp(copy_ilp_single_precision)
    if mode.on_gpu():
        assert ch3_execution._ptx_loads_before_first_store(copy_ilp_right) >= ILP
        assert ch3_execution._ptx_loads_before_first_store(copy_ilp_unbatched) < ILP


def test_shared_array_shapes_reads_keywords_and_closures():
    side = 16

    def kernel():
        a = cuda.shared.array(shape=(side, side + 1), dtype=np.float32)  # noqa: F841
        b = cuda.local.array(4, np.float32)  # noqa: F841  (not shared: ignored)

    assert ch3_execution.shared_array_shapes(kernel) == [(16, 17)]


# --- Exercise 3.6.1 ----------------------------------------------------------------------------


@cuda.jit
def by_warp_right(out, x, owner):
    g = cuda.grid(1)
    warp, lane = g // 32, g % 32
    k = 64 * (warp // 2) + 2 * lane + warp % 2
    if k < x.size:
        if warp % 2 == 0:
            out[k] = math.sin(x[k])
        else:
            out[k] = math.cos(x[k])
        owner[k] = g


@cuda.jit
def by_thread_divergent(out, x, owner):
    k = cuda.grid(1)
    if k < x.size:
        if k % 2 == 0:
            out[k] = math.sin(x[k])
        else:
            out[k] = math.cos(x[k])
        owner[k] = k


@cuda.jit
def by_warp_wrong_function(out, x, owner):
    g = cuda.grid(1)
    warp, lane = g // 32, g % 32
    k = 64 * (warp // 2) + 2 * lane + warp % 2
    if k < x.size:
        out[k] = math.sin(x[k])  # every element gets the sine
        owner[k] = g


@cuda.jit
def by_warp_halves(out, x, owner):
    g = cuda.grid(1)
    warp, lane = g // 32, g % 32
    k = 32 * warp + lane  # keeps the divergent layout, only one element per thread
    if k < x.size and warp < x.size // 64:  # and forgets the last elements
        if k % 2 == 0:
            out[k] = math.sin(x[k])
        else:
            out[k] = math.cos(x[k])
        owner[k] = g


@cuda.jit
def by_warp_float64(out, x, owner):
    g = cuda.grid(1)
    warp, lane = g // 32, g % 32
    k = 64 * (warp // 2) + 2 * lane + warp % 2
    if k < x.size:
        if warp % 2 == 0:
            out[k] = math.sin(x[k] * 1.0)  # sin of a float64: the double-precision sine, then back to float32
        else:
            out[k] = math.cos(x[k] * 1.0)
        owner[k] = g


def test_branch_by_warp_float64_is_named():
    with pytest.raises(CheckFailed, match="float64"):
        ch3_execution.check_branch_by_warp(by_warp_float64)


def test_branch_by_warp_check(capsys):
    ch3_execution.check_branch_by_warp(by_warp_right)
    assert "\u2705 Exercise 3.6.1" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="warp 0 .* both even and odd"):
        ch3_execution.check_branch_by_warp(by_thread_divergent)
    with pytest.raises(CheckFailed, match="wrong values; at index 1"):
        ch3_execution.check_branch_by_warp(by_warp_wrong_function)
    with pytest.raises(CheckFailed, match="never written.*64p"):
        ch3_execution.check_branch_by_warp(by_warp_halves)
