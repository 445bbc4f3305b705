"""Transpose kernels against NumPy on random matrices whose sides are not multiples of the tile."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only

import gpucourse
from gpucourse import book, mode
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import transpose as T

SHAPES = gpucourse.problem_size("ch3_transpose_test")
TILE, BLOCK_ROWS = gpucourse.problem_size("ch3_transpose_test_tile")


def run(variant: str, host: np.ndarray, tile: int = TILE, block_rows: int = BLOCK_ROWS) -> np.ndarray:
    out = gpucourse.to_device(gpucourse.poisoned(T.output_shape(variant, host.shape), host.dtype))
    T.transpose(out, gpucourse.to_device(host), variant, tile, block_rows)
    return gpucourse.to_host(out)


def test_test_shapes_are_awkward():
    (rows_a, cols_a), (rows_b, cols_b) = SHAPES
    assert rows_a % TILE and cols_a % TILE and rows_b % TILE  # partial tiles at the edges
    assert T.launch_config((rows_a, cols_a), TILE, BLOCK_ROWS)[0][0] != T.launch_config((rows_a, cols_a), TILE, BLOCK_ROWS)[0][1]
    blocks_b = T.launch_config((rows_b, cols_b), TILE, BLOCK_ROWS)[0]
    assert blocks_b[0] == blocks_b[1]  # the diagonal kernel's square-grid branch


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("variant", T.VARIANTS)
def test_every_variant_against_numpy(variant, shape):
    host = gpucourse.random_array(shape, np.float32, seed=sum(shape))
    expected = host if variant in T.COPIES else T.transpose_reference(host)
    got = run(variant, host)
    assert not np.isnan(got).any(), "some elements were never written"
    np.testing.assert_array_equal(got, expected)  # a copy moves bits: exact


def test_book_configuration_and_float64():
    rows, cols = SHAPES[0]
    host = gpucourse.random_array((rows, cols), np.float64, seed=5)
    got = run("no_bank_conflicts", host, T.BOOK_TILE, T.BOOK_BLOCK_ROWS)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, host.T)
    host32 = host.astype(np.float32)
    out = gpucourse.to_device(gpucourse.poisoned((cols, rows), np.float32))
    T.transpose(out, gpucourse.to_device(host32))  # the defaults are the book's 32 x 32 tile, 32 x 8 threads
    np.testing.assert_array_equal(gpucourse.to_host(out), host32.T)


def test_one_row_and_one_column():
    for shape in ((1, 2 * TILE + 1), (2 * TILE + 1, 1)):
        host = gpucourse.random_array(shape, np.float32, seed=9)
        np.testing.assert_array_equal(run("diagonal", host), host.T)


def test_bad_arguments_say_what_to_change():
    rows, cols = SHAPES[0]
    inp = gpucourse.to_device(gpucourse.random_array((rows, cols), np.float32))
    out = gpucourse.to_device(np.zeros((cols, rows), np.float32))
    with pytest.raises(ArrayArgumentError, match=rf"must have shape \({cols}, {rows}\)"):
        T.transpose(gpucourse.to_device(np.zeros((rows, cols), np.float32)), inp, "naive")
    with pytest.raises(ArrayArgumentError, match="compiled for float32"):
        T.transpose(gpucourse.to_device(np.zeros((cols, rows), np.float64)), inp)
    with pytest.raises(ArrayArgumentError, match="float32 or float64"):
        T.transpose(out, gpucourse.to_device(np.zeros((rows, cols), np.int32)))
    with pytest.raises(ArrayArgumentError, match="2 dimension"):
        T.transpose(out, gpucourse.to_device(np.zeros(rows, np.float32)))
    with pytest.raises(ArrayArgumentError, match="each side must hold"):
        T.transpose(gpucourse.to_device(np.zeros((cols, 0), np.float32)), gpucourse.to_device(np.zeros((0, cols), np.float32)))
    with pytest.raises(ValueError, match="variant must be one of"):
        T.transpose(out, inp, "fast")
    with pytest.raises(LaunchConfigError, match="does not divide"):
        T.transpose(out, inp, tile=32, block_rows=6)
    with pytest.raises(LaunchConfigError, match="2048 threads"):
        T.transpose(out, inp, tile=64, block_rows=32)
    with pytest.raises(LaunchConfigError, match="shared memory"):
        T.transpose(out, inp, tile=128, block_rows=4)
    with pytest.raises(LaunchConfigError, match="positive int"):
        T.kernels(0, 1)
    with pytest.raises(KeyError, match="no transpose variant"):
        T.kernels()["fastest"]


def test_kernels_are_built_once_per_shape():
    assert T.kernels(16, 4) is T.kernels(16, 4)
    assert T.kernels(16, 4) is not T.kernels(16, 8)
    assert T.kernels(16, 4, np.float64).dtype == np.float64


def test_sizes_and_names():
    assert T.output_shape("copy", (3, 5)) == (3, 5) and T.output_shape("naive", (3, 5)) == (5, 3)
    assert T.bytes_moved(np.zeros((3, 5), np.float32)) == 2 * 3 * 5 * 4
    for variant, name in T.BOOK_NAMES.items():
        if name is not None:
            assert book.figures(f"ch3_transpose_{name}_K20"), variant  # every book row exists, by id


def test_bank_conflicts_of_a_tile_column():
    # 32 x 32 float32 tile: a warp reading a column hits one bank 32 times, as the book says
    assert T.column_read_conflict(32) == book.figure("ch3_transpose_bankconflict_way_cc2x").number == 32
    assert T.column_read_conflict(33) == 1  # the padded tile of transposeNoBankConflict
    assert T.column_read_conflict(16) == 16 and T.column_read_conflict(31) == 1 and T.column_read_conflict(64) == 32
    assert [T.bank_of(r, 0, 33) for r in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError):
        T.column_read_conflict(0)


def test_cupy_anchor_and_shared_memory_report():
    rows, cols = SHAPES[0]
    host = gpucourse.random_array((rows, cols), np.float32, seed=3)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="ascontiguousarray"):
            T.cupy_transpose(host)
        gpu_only("CuPy and the compiler's shared-memory report (refused in the simulator, checked)")
    import cupy

    from gpucourse.compilation import resource_usage

    got = T.cupy_transpose(cupy.asarray(host))
    np.testing.assert_array_equal(got.get(), host.T)
    out = cupy.full((cols, rows), cupy.nan, dtype=cupy.float32)
    T.transpose(out, cupy.asarray(host), "no_bank_conflicts", 32, 8)  # CuPy arrays are accepted too
    np.testing.assert_array_equal(out.get(), host.T)
    kernels = T.kernels(32, 8)
    assert resource_usage(kernels.no_bank_conflicts)[0].shared_bytes == 32 * 33 * 4
    run("coalesced", host, 32, 8)
    assert resource_usage(kernels.coalesced)[0].shared_bytes == 32 * 32 * 4
    assert resource_usage(kernels.no_bank_conflicts)[0].local_bytes == 0  # the batched loads live in registers
