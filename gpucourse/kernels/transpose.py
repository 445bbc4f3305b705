"""Chapter 3 kernels: matrix transpose (book §3.4, App. D.2), from a plain copy to diagonal block order.

Every kernel works on a tile of TILE x TILE elements with a block of TILE x BLOCK_ROWS threads, so
each thread moves TILE // BLOCK_ROWS elements (the book: 32 x 32 tiles, 32 x 8 threads, four
elements per thread). The tile shape must be known when the kernel is compiled (it sizes a shared
memory array), so `kernels(tile, block_rows, dtype)` builds one set of kernels per shape and caches it.

Arrays are NumPy's row-major (C order): `inp[row, col]`, neighbouring columns are neighbours in
memory, so `threadIdx.x` walks columns. The book's Fortran arrays are column-major; its `x` walks
the first index for the same reason. Matrices need not be multiples of the tile: every access is
bounds-checked, so edge tiles are partly idle instead of reading or writing out of range.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import cuda

from ..arrays import require_cupy
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import bind, planned
from ..validate import (
    blocks_to_cover,
    check_blocks,
    check_device_array,
    check_float_dtype,
    check_shared_memory,
    check_threads_per_block,
)

#: The kernels in the order the book builds them up, and the name each has in the book's table.
VARIANTS: tuple[str, ...] = ("copy", "copy_shared", "naive", "coalesced", "no_bank_conflicts", "diagonal")
BOOK_NAMES: dict[str, str | None] = {
    "copy": None,  # the book lists its code (App. D.2) but prints no figure for it in §3.4
    "copy_shared": "copySharedMem",
    "naive": "transposeNaive",
    "coalesced": "transposeCoalesced",
    "no_bank_conflicts": "transposeNoBankConflict",
    "diagonal": "transposeDiagonal",
}
#: Variants that copy (out has the shape of inp) rather than transpose (out has the transposed shape).
COPIES = ("copy", "copy_shared")
#: The book's configuration.
BOOK_TILE, BOOK_BLOCK_ROWS = 32, 8


@dataclass(frozen=True)
class TransposeKernels:
    """The six kernels compiled for one tile shape and one dtype."""

    tile: int
    block_rows: int
    dtype: np.dtype
    copy: object
    copy_shared: object
    naive: object
    coalesced: object
    no_bank_conflicts: object
    diagonal: object

    def __getitem__(self, variant: str):
        if variant not in VARIANTS:
            raise KeyError(f"no transpose variant {variant!r}; choose one of {', '.join(VARIANTS)}")
        return getattr(self, variant)


def _build(tile: int, block_rows: int, dtype: np.dtype) -> TransposeKernels:
    TILE = tile  # compile-time constants of the kernels below
    PADDED = tile + 1  # a shared array's shape must be constants: TILE + 1 written in the kernel is not
    PER_THREAD = tile // block_rows  # elements each thread moves
    ROWS = tuple(np.uint32(j) for j in range(0, tile, block_rows))  # a thread's rows in its tile: 0, 8, 16, 24
    SCALAR = dtype.type

    # Every kernel works in two phases. Loads: each thread reads its PER_THREAD elements, all issued
    # before any is used, so several loads are in flight per thread (the load batching of §3.5.2).
    # Their indices are clamped to the last row and column, so a load never needs a branch (a branch
    # would make each load wait for the one before); edge threads read a duplicate, never used.
    # Stores: checked against the bounds, so nothing is written outside `out`.
    # Indices are unsigned (np.uint32): Numba, like NumPy, lets a negative index count from the end,
    # and tests the sign of every signed index; an unsigned index skips those instructions.

    @cuda.jit
    def copy(out, inp):
        """Reference copy with the transpose's access pattern, no shared memory: the speed to aim for."""
        values = cuda.local.array(PER_THREAD, SCALAR)  # registers: the loops are unrolled
        last_row, last_col = np.uint32(inp.shape[0] - 1), np.uint32(inp.shape[1] - 1)
        x = np.uint32(cuda.blockIdx.x * TILE + cuda.threadIdx.x)  # column: consecutive threads, consecutive addresses
        y = np.uint32(cuda.blockIdx.y * TILE + cuda.threadIdx.y)  # first row of this thread's strip
        for k in range(PER_THREAD):
            values[k] = inp[min(y + ROWS[k], last_row), min(x, last_col)]
        for k in range(PER_THREAD):
            if y + ROWS[k] <= last_row and x <= last_col:
                out[y + ROWS[k], x] = values[k]

    @cuda.jit
    def copy_shared(out, inp):
        """Copy through a shared-memory tile: the cost of the staging alone, before any transposing."""
        tile_ = cuda.shared.array((TILE, TILE), SCALAR)
        last_row, last_col = np.uint32(inp.shape[0] - 1), np.uint32(inp.shape[1] - 1)
        tx, ty = np.uint32(cuda.threadIdx.x), np.uint32(cuda.threadIdx.y)
        x = np.uint32(cuda.blockIdx.x * TILE) + tx
        y = np.uint32(cuda.blockIdx.y * TILE) + ty
        for j in ROWS:
            tile_[ty + j, tx] = inp[min(y + j, last_row), min(x, last_col)]
        cuda.syncthreads()  # not needed (each thread reads back what it wrote); kept to match the transposes
        for j in ROWS:
            if y + j <= last_row and x <= last_col:
                out[y + j, x] = tile_[ty + j, tx]

    @cuda.jit
    def naive(out, inp):
        """Read a row, write a column: reads coalesced, writes strided by a whole row of `out`."""
        values = cuda.local.array(PER_THREAD, SCALAR)
        last_row, last_col = np.uint32(inp.shape[0] - 1), np.uint32(inp.shape[1] - 1)
        x = np.uint32(cuda.blockIdx.x * TILE + cuda.threadIdx.x)
        y = np.uint32(cuda.blockIdx.y * TILE + cuda.threadIdx.y)
        for k in range(PER_THREAD):
            values[k] = inp[min(y + ROWS[k], last_row), min(x, last_col)]
        for k in range(PER_THREAD):
            if y + ROWS[k] <= last_row and x <= last_col:
                out[x, y + ROWS[k]] = values[k]  # neighbouring threads write a whole row of `out` apart

    @cuda.jit
    def coalesced(out, inp):
        """Stage a tile in shared memory so that both the global reads and the global writes walk rows."""
        tile_ = cuda.shared.array((TILE, TILE), SCALAR)
        last_row, last_col = np.uint32(inp.shape[0] - 1), np.uint32(inp.shape[1] - 1)
        tx, ty = np.uint32(cuda.threadIdx.x), np.uint32(cuda.threadIdx.y)
        x = np.uint32(cuda.blockIdx.x * TILE) + tx
        y = np.uint32(cuda.blockIdx.y * TILE) + ty
        for j in ROWS:
            tile_[ty + j, tx] = inp[min(y + j, last_row), min(x, last_col)]
        cuda.syncthreads()  # a thread now writes elements that other threads loaded
        x = np.uint32(cuda.blockIdx.y * TILE) + tx  # the block's tile lands at the mirrored place in `out`
        y = np.uint32(cuda.blockIdx.x * TILE) + ty
        for j in ROWS:
            if y + j <= last_col and x <= last_row:
                out[y + j, x] = tile_[tx, ty + j]  # a warp reads a tile column: rows TILE apart, one bank

    @cuda.jit
    def no_bank_conflicts(out, inp):
        """As `coalesced`, with each tile row padded by one element so that a tile column spans all banks."""
        tile_ = cuda.shared.array((TILE, PADDED), SCALAR)
        last_row, last_col = np.uint32(inp.shape[0] - 1), np.uint32(inp.shape[1] - 1)
        tx, ty = np.uint32(cuda.threadIdx.x), np.uint32(cuda.threadIdx.y)
        x = np.uint32(cuda.blockIdx.x * TILE) + tx
        y = np.uint32(cuda.blockIdx.y * TILE) + ty
        for j in ROWS:
            tile_[ty + j, tx] = inp[min(y + j, last_row), min(x, last_col)]
        cuda.syncthreads()
        x = np.uint32(cuda.blockIdx.y * TILE) + tx
        y = np.uint32(cuda.blockIdx.x * TILE) + ty
        for j in ROWS:
            if y + j <= last_col and x <= last_row:
                out[y + j, x] = tile_[tx, ty + j]  # rows TILE + 1 apart: each thread its own bank

    @cuda.jit
    def diagonal(out, inp):
        """As `no_bank_conflicts`, with blocks renumbered along diagonals (against partition camping)."""
        tile_ = cuda.shared.array((TILE, PADDED), SCALAR)
        if cuda.gridDim.x == cuda.gridDim.y:
            block_y = cuda.blockIdx.x
            block_x = (cuda.blockIdx.x + cuda.blockIdx.y) % cuda.gridDim.x
        else:  # any grid: number the blocks in order, then read that number diagonally
            block = cuda.blockIdx.x + cuda.gridDim.x * cuda.blockIdx.y
            block_y = block % cuda.gridDim.y
            block_x = (block // cuda.gridDim.y + block_y) % cuda.gridDim.x
        last_row, last_col = np.uint32(inp.shape[0] - 1), np.uint32(inp.shape[1] - 1)
        tx, ty = np.uint32(cuda.threadIdx.x), np.uint32(cuda.threadIdx.y)
        x = np.uint32(block_x * TILE) + tx
        y = np.uint32(block_y * TILE) + ty
        for j in ROWS:
            tile_[ty + j, tx] = inp[min(y + j, last_row), min(x, last_col)]
        cuda.syncthreads()
        x = np.uint32(block_y * TILE) + tx
        y = np.uint32(block_x * TILE) + ty
        for j in ROWS:
            if y + j <= last_col and x <= last_row:
                out[y + j, x] = tile_[tx, ty + j]

    return TransposeKernels(tile, block_rows, dtype, copy, copy_shared, naive, coalesced, no_bank_conflicts, diagonal)


@functools.cache
def _kernels_cached(tile: int, block_rows: int, dtype_name: str) -> TransposeKernels:
    return _build(tile, block_rows, np.dtype(dtype_name))


def check_tile(tile: int, block_rows: int, dtype=np.float32) -> tuple[int, int]:
    """Check a tile shape: TILE x BLOCK_ROWS threads per block, BLOCK_ROWS dividing TILE, the tile fitting in shared memory."""
    for name, value in (("tile", tile), ("block_rows", block_rows)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise LaunchConfigError(f"{name} must be a positive int; got {value!r}.")
    if tile % block_rows:
        raise LaunchConfigError(
            f"block_rows={block_rows} does not divide tile={tile}: each thread moves tile // block_rows elements, "
            f"so the rows of threads must fit the tile a whole number of times. Try block_rows in "
            f"{[d for d in (1, 2, 4, 8, 16, 32) if tile % d == 0]}."
        )
    check_threads_per_block((tile, block_rows))
    check_shared_memory(tile * (tile + 1) * np.dtype(dtype).itemsize)
    return int(tile), int(block_rows)


def kernels(tile: int = BOOK_TILE, block_rows: int = BOOK_BLOCK_ROWS, dtype=np.float32) -> TransposeKernels:
    """The six transpose kernels for a TILE x TILE tile, TILE x BLOCK_ROWS threads and float32 or float64 data."""
    dtype = check_float_dtype(dtype)
    tile, block_rows = check_tile(tile, block_rows, dtype)
    return _kernels_cached(tile, block_rows, dtype.name)


def launch_config(shape: tuple[int, int], tile: int, block_rows: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) covering a (rows, cols) input with one block per TILE x TILE tile."""
    rows, cols = shape
    blocks = (blocks_to_cover(cols, tile), blocks_to_cover(rows, tile))
    check_blocks(blocks)
    return blocks, (tile, block_rows)


def output_shape(variant: str, shape: tuple[int, int]) -> tuple[int, int]:
    """The shape of `out` for `variant` on an input of `shape`: the same for copies, transposed otherwise."""
    if variant not in VARIANTS:
        raise KeyError(f"no transpose variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    rows, cols = shape
    return (rows, cols) if variant in COPIES else (cols, rows)


@planned
def transpose(out, inp, variant: str = "no_bank_conflicts", tile: int = BOOK_TILE, block_rows: int = BOOK_BLOCK_ROWS):
    """out <- inp.T (or a copy, for the variants 'copy' and 'copy_shared') for 2D float32/float64 device arrays."""
    check_device_array(inp, "inp", ndim=2)
    dtype = check_float_dtype(inp.dtype, "inp.dtype")
    if min(inp.shape) < 1 or max(inp.shape) >= 2**31:
        raise ArrayArgumentError(f"inp has shape {tuple(inp.shape)}: each side must hold 1 to 2**31 - 1 elements.")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
    check_device_array(out, "out", dtype=dtype, ndim=2, shape=output_shape(variant, inp.shape))
    kernel = kernels(tile, block_rows, dtype)[variant]
    blocks, threads = launch_config(inp.shape, tile, block_rows)
    return bind(kernel, blocks, threads, out, inp)


def bytes_moved(inp) -> int:
    """Bytes a copy or transpose of `inp` reads plus writes (each element once each way)."""
    return 2 * int(np.prod(inp.shape)) * np.dtype(inp.dtype).itemsize


def cupy_transpose(inp):
    """CuPy's own transposed copy, `cupy.ascontiguousarray(inp.T)` (GPU only): the library anchor."""
    cupy = require_cupy("CuPy's transposed copy (cupy.ascontiguousarray(a.T))")
    return cupy.ascontiguousarray(inp.T)


def transpose_reference(inp: np.ndarray) -> np.ndarray:
    """NumPy reference: a C-ordered copy of inp.T."""
    return np.ascontiguousarray(np.asarray(inp).T)


# ---------------------------------------------------------------------------------------------
# Shared memory banks: why a 32 x 32 tile conflicts and a 32 x 33 tile does not.


def bank_of(row: int, col: int, row_length: int, banks: int = 32) -> int:
    """The shared memory bank (of `banks` 4-byte banks) holding 4-byte element [row, col] of a tile with `row_length`-element rows."""
    return (row * row_length + col) % banks


def column_read_conflict(row_length: int, threads: int = 32, banks: int = 32) -> int:
    """How many ways the worst bank conflict is (1 = none) when a warp reads one column of a tile of 4-byte elements."""
    if row_length < 1:
        raise ValueError(f"row_length must be positive; got {row_length}")
    per_bank: dict[int, int] = {}
    for thread in range(threads):  # thread t of the warp reads element [t, 0]: a different word each
        bank = bank_of(thread, 0, row_length, banks)
        per_bank[bank] = per_bank.get(bank, 0) + 1
    return max(per_bank.values())
