"""Chapter 3 execution checks (3.4.1, 3.5.1, 3.5.2, 3.6.1) against answers nobody tuned them on: wrong ones by kind (an
input changed, bounds of the other side, a tile read untransposed, 1024 left out, the largest size of the best, a fixed
block size, owners not written), each named by its cause in at most five lines, and right ones written another way.
"""

from __future__ import annotations

import math

import pytest
from answers_common import caught, passes
from numba import cuda, float32, float64

import gpucourse
from gpucourse.checks import ch3_execution
from gpucourse.occupancy import occupancy

TILE_DIM, BLOCK_ROWS, ILP = 32, 8, 4
TILE = (TILE_DIM, TILE_DIM + 1)
ODD_TILE = (TILE_DIM, TILE_DIM + 3)


# --- Exercise 3.4.1 ----------------------------------------------------------------------------------


@cuda.jit
def transpose_clearing(out, inp):
    tile = cuda.shared.array(TILE, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.blockIdx.x * TILE_DIM + tx, cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
            inp[y + j, x] = 0  # "moved" into the tile
    cuda.syncthreads()
    x, y = cuda.blockIdx.y * TILE_DIM + tx, cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < rows and y + j < cols:
            out[y + j, x] = tile[tx, ty + j]


@cuda.jit
def transpose_load_bounds_for_stores(out, inp):
    tile = cuda.shared.array(TILE, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.blockIdx.x * TILE_DIM + tx, cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
    cuda.syncthreads()
    x, y = cuda.blockIdx.y * TILE_DIM + tx, cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:  # the loads' bounds: out is (cols, rows)
            out[y + j, x] = tile[tx, ty + j]


@cuda.jit
def transpose_tile_as_loaded(out, inp):
    tile = cuda.shared.array(TILE, float32)
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.blockIdx.x * TILE_DIM + tx, cuda.blockIdx.y * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
    cuda.syncthreads()
    x, y = cuda.blockIdx.y * TILE_DIM + tx, cuda.blockIdx.x * TILE_DIM + ty
    for j in range(0, TILE_DIM, BLOCK_ROWS):
        if x < rows and y + j < cols:
            out[y + j, x] = tile[ty + j, tx]  # the tile read as it was loaded: blocks move, elements inside do not


@pytest.mark.parametrize(("answer", "causes"), [
    (transpose_clearing, ["changed inp in place"]),
    (transpose_load_bounds_for_stores, ["(indexed outside|never written|outside the output)"]),
    (transpose_tile_as_loaded, ["(wrong values|before any thread of the block wrote it)"]),
])
def test_transpose_wrong_answers_are_named(answer, causes):
    caught(ch3_execution.check_no_bank_conflicts, answer, causes=causes)


@cuda.jit(device=True)
def _inside(row, col, rows, cols):
    return row < rows and col < cols


@cuda.jit
def transpose_by_four(out, inp):
    tile = cuda.shared.array(ODD_TILE, float32)  # rows of 35 words: 3 * r % 32 differs for every r, no conflict either
    rows, cols = inp.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    first_row, first_col = cuda.blockIdx.y * TILE_DIM, cuda.blockIdx.x * TILE_DIM
    for step in range(4):
        r = ty + BLOCK_ROWS * step
        if _inside(first_row + r, first_col + tx, rows, cols):
            tile[r, tx] = inp[first_row + r, first_col + tx]
    cuda.syncthreads()
    for step in range(4):
        r = ty + BLOCK_ROWS * step
        if _inside(first_col + r, first_row + tx, cols, rows):
            out[first_col + r, first_row + tx] = tile[tx, r]


@cuda.jit
def transpose_early_exit_free(out, inp):
    tile = cuda.shared.array(TILE, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.blockIdx.x, cuda.blockIdx.y
    j = 0
    while j < TILE_DIM:
        row, col = by * TILE_DIM + ty + j, bx * TILE_DIM + tx
        if row < inp.shape[0] and col < inp.shape[1]:
            tile[ty + j, tx] = inp[row, col]
        j += BLOCK_ROWS
    cuda.syncthreads()  # every thread reaches it: no return before
    j = 0
    while j < TILE_DIM:
        row, col = bx * TILE_DIM + ty + j, by * TILE_DIM + tx
        if row < out.shape[0] and col < out.shape[1]:
            out[row, col] = tile[tx, ty + j]
        j += BLOCK_ROWS


@pytest.mark.parametrize("answer", [transpose_by_four, transpose_early_exit_free])
def test_transpose_right_answers_pass(answer, capsys):
    passes(ch3_execution.check_no_bank_conflicts, answer, capsys=capsys, exercise="3.4.1")


# --- Exercise 3.5.1 ----------------------------------------------------------------------------------


def _fraction(threads, registers, shared, limits):
    try:
        return occupancy(threads, registers, shared, limits).fraction
    except gpucourse.LaunchConfigError:
        return None


def pick_below_1024(registers, shared, limits):
    best, size = -1.0, None
    for threads in range(32, 1024, 32):  # 1024 left out
        fraction = _fraction(threads, registers, shared, limits)
        if fraction is not None and fraction > best:
            best, size = fraction, threads
    return size


def pick_largest_of_best(registers, shared, limits):
    best, size = -1.0, None
    for threads in range(32, 1025, 32):
        fraction = _fraction(threads, registers, shared, limits)
        if fraction is not None and fraction >= best:  # a tie moves to the larger size
            best, size = fraction, threads
    return size


def pick_powers_of_two(registers, shared, limits):
    best, size = -1.0, None
    for threads in (32, 64, 128, 256, 512, 1024):
        fraction = _fraction(threads, registers, shared, limits)
        if fraction is not None and fraction > best:
            best, size = fraction, threads
    return size


@pytest.mark.parametrize(("answer", "causes"), [
    (pick_below_1024, ["only 1024 reaches it", r"range\(32, 1025, 32\)"]),
    (pick_largest_of_best, ["but so does the smaller"]),
    (pick_powers_of_two, [r"C2050 limits\) returned 256", "(Try every multiple of 32|so does the smaller 192)"]),
])
def test_pick_block_size_wrong_answers_are_named(answer, causes):
    caught(ch3_execution.check_pick_block_size, answer, causes=causes)


def pick_by_key(registers, shared, limits):
    reached = [(fraction, -threads) for threads in range(32, 1025, 32)
               if (fraction := _fraction(threads, registers, shared, limits)) is not None]
    return -max(reached)[1]


def pick_in_two_passes(registers, shared, limits):
    fractions = {threads: _fraction(threads, registers, shared, limits) for threads in range(limits.warp_size, 1025, limits.warp_size)}
    best = max(f for f in fractions.values() if f is not None)
    return next(threads for threads, f in fractions.items() if f == best)


@pytest.mark.parametrize("answer", [pick_by_key, pick_in_two_passes])
def test_pick_block_size_right_answers_pass(answer, capsys):
    passes(ch3_execution.check_pick_block_size, answer, capsys=capsys, exercise="3.5.1")


# --- Exercise 3.5.2 ----------------------------------------------------------------------------------


@cuda.jit
def copy_ilp_thread_owner(out, inp, owner):
    values = cuda.local.array(ILP, float64)
    first = cuda.blockIdx.x * cuda.blockDim.x * ILP + cuda.threadIdx.x
    for j in range(ILP):
        if first + j * cuda.blockDim.x < inp.size:
            values[j] = inp[first + j * cuda.blockDim.x]
    for j in range(ILP):
        i = first + j * cuda.blockDim.x
        if i < inp.size:
            out[i] = values[j]
            owner[i] = cuda.threadIdx.x  # the thread's index in its block, not in the grid


@cuda.jit
def copy_ilp_fixed_64(out, inp, owner):
    values = cuda.local.array(ILP, float64)
    first = cuda.blockIdx.x * 64 * ILP + cuda.threadIdx.x  # blocks assumed to be 64 threads
    for j in range(ILP):
        if first + j * 64 < inp.size:
            values[j] = inp[first + j * 64]
    for j in range(ILP):
        i = first + j * 64
        if i < inp.size:
            out[i] = values[j]
            owner[i] = cuda.grid(1)


@cuda.jit
def copy_ilp_swapping(out, inp, owner):
    values = cuda.local.array(ILP, float64)
    first = cuda.blockIdx.x * cuda.blockDim.x * ILP + cuda.threadIdx.x
    for j in range(ILP):
        i = first + j * cuda.blockDim.x
        if i < inp.size:
            values[j] = inp[i]
            inp[i] = -values[j]  # marks what was copied, in the input
    for j in range(ILP):
        i = first + j * cuda.blockDim.x
        if i < inp.size:
            out[i] = values[j]
            owner[i] = cuda.grid(1)


@pytest.mark.parametrize(("answer", "causes"), [
    (copy_ilp_thread_owner, ["was copied by thread", "owner\\[k\\] = cuda.grid\\(1\\)"]),
    (copy_ilp_fixed_64, ["blocks of 32", "(never written|copied by thread|outside)"]),
    (copy_ilp_swapping, ["changed inp in place"]),
])
def test_copy_ilp_wrong_answers_are_named(answer, causes):
    caught(ch3_execution.check_copy_ilp, answer, causes=causes)


@cuda.jit
def copy_ilp_named(out, inp, owner):
    step = cuda.blockDim.x
    i = cuda.blockIdx.x * step * ILP + cuda.threadIdx.x
    me = cuda.grid(1)
    n = inp.size
    if i + 3 * step < n:
        a, b, c, d = inp[i], inp[i + step], inp[i + 2 * step], inp[i + 3 * step]
        out[i], out[i + step], out[i + 2 * step], out[i + 3 * step] = a, b, c, d
        owner[i], owner[i + step], owner[i + 2 * step], owner[i + 3 * step] = me, me, me, me
    else:
        held = cuda.local.array(ILP, float64)
        for j in range(ILP):
            if i + j * step < n:
                held[j] = inp[i + j * step]
        for j in range(ILP):
            if i + j * step < n:
                out[i + j * step] = held[j]
                owner[i + j * step] = me


@cuda.jit(device=True)
def _element(j):
    return cuda.blockIdx.x * cuda.blockDim.x * ILP + cuda.threadIdx.x + j * cuda.blockDim.x


@cuda.jit
def copy_ilp_helper(out, inp, owner):
    held = cuda.local.array(ILP, float64)
    j = 0
    while j < ILP:
        if _element(j) < inp.shape[0]:
            held[j] = inp[_element(j)]
        j += 1
    j = 0
    while j < ILP:
        k = _element(j)
        if k < out.shape[0]:
            out[k] = held[j]
            owner[k] = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        j += 1


@pytest.mark.parametrize("answer", [copy_ilp_named, copy_ilp_helper])
def test_copy_ilp_right_answers_pass(answer, capsys):
    passes(ch3_execution.check_copy_ilp, answer, capsys=capsys, exercise="3.5.2")


# --- Exercise 3.6.1 ----------------------------------------------------------------------------------


@cuda.jit
def by_warp_halves(out, x, owner):
    g = cuda.grid(1)
    warp, lane = g // 32, g % 32
    k = 64 * (warp // 2) + 32 * (warp % 2) + lane  # contiguous halves: each warp holds both parities
    if k < x.size:
        out[k] = math.sin(x[k]) if k % 2 == 0 else math.cos(x[k])
        owner[k] = g


@cuda.jit
def by_warp_no_owner(out, x, owner):
    g = cuda.grid(1)
    warp, lane = g // 32, g % 32
    k = 64 * (warp // 2) + 2 * lane + warp % 2
    if k < x.size:
        out[k] = math.sin(x[k]) if warp % 2 == 0 else math.cos(x[k])


@cuda.jit
def by_warp_reduces_x(out, x, owner):
    g = cuda.grid(1)
    warp, lane = g // 32, g % 32
    k = 64 * (warp // 2) + 2 * lane + warp % 2
    if k < x.size:
        x[k] = x[k] % float32(6.2831855)  # "reduced" in place
        out[k] = math.sin(x[k]) if warp % 2 == 0 else math.cos(x[k])
        owner[k] = g


@pytest.mark.parametrize(("answer", "causes"), [
    (by_warp_halves, ["handled both even and odd elements"]),
    (by_warp_no_owner, ["owner\\[\\d+\\] was never written"]),
    (by_warp_reduces_x, ["changed x in place"]),
])
def test_branch_by_warp_wrong_answers_are_named(answer, causes):
    caught(ch3_execution.check_branch_by_warp, answer, causes=causes)


@cuda.jit(device=True)
def _sin_or_cos(value, even):
    if even:
        return math.sin(value)
    return math.cos(value)


@cuda.jit
def by_warp_from_block(out, x, owner):
    warps_per_block = cuda.blockDim.x // 32
    warp = cuda.blockIdx.x * warps_per_block + cuda.threadIdx.x // 32
    lane = cuda.threadIdx.x % 32
    k = (warp // 2) * 64 + lane * 2 + (warp & 1)
    if k < x.shape[0]:
        out[k] = _sin_or_cos(x[k], warp % 2 == 0)
        owner[k] = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x


@cuda.jit
def by_warp_early_return(out, x, owner):
    g = cuda.grid(1)
    k = ((g >> 6) << 6) + ((g & 31) << 1) + ((g >> 5) & 1)
    if k >= x.size:
        return
    owner[k] = g
    if (g >> 5) & 1:
        out[k] = math.cos(x[k])
        return
    out[k] = math.sin(x[k])


@pytest.mark.parametrize("answer", [by_warp_from_block, by_warp_early_return])
def test_branch_by_warp_right_answers_pass(answer, capsys):
    passes(ch3_execution.check_branch_by_warp, answer, capsys=capsys, exercise="3.6.1")
