"""Chapter 6 derivative kernels against a numpy.roll stencil in float64, on random data, outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse import finite_difference as fd
from gpucourse.errors import ArrayArgumentError, LaunchConfigError
from gpucourse.kernels import stencil

SHAPE = gpucourse.problem_size("ch6_test_shape")  # (nz, ny, nx), no axis a power of two


def spacing(direction: str, shape=SHAPE) -> float:
    return 1.0 / shape[fd.AXIS[direction]]


def run(direction: str, launch, dtype=np.float32, shape=SHAPE, seed: int = 0):
    """Launch on random data with a poisoned output; return (result, float64 reference, tolerance)."""
    host = gpucourse.random_array(shape, dtype, seed=seed)
    f = gpucourse.to_device(host)
    df = gpucourse.to_device(gpucourse.poisoned(shape, dtype))
    launch(f, df, stencil.coefficients_for(host, spacing(direction, shape)))
    reference = fd.derivative_reference(host, direction, spacing(direction, shape))
    # a few roundings of terms as large as the amplification of the stencil times |f| <= 1
    tolerance = 8 * np.finfo(dtype).eps * fd.stencil_amplification(spacing(direction, shape))
    return gpucourse.to_host(df), reference, tolerance


def assert_close(got: np.ndarray, reference: np.ndarray, tolerance: float) -> None:
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} outputs were never written"
    np.testing.assert_allclose(got, reference, rtol=0, atol=tolerance)


X_LAUNCHES = {
    "global (branch)": lambda f, df, c: stencil.deriv_x_global(f, df, c),
    "global (modulo)": lambda f, df, c: stencil.deriv_x_global(f, df, c, modulo=True, threads=(8, 4)),
    "book sPencils": lambda f, df, c: stencil.deriv_x_book(f, df, c, pencils=4),
    "book sPencils, one barrier": lambda f, df, c: stencil.deriv_x_book_variant(f, df, c, "one barrier", pencils=4),
    "tiled default": lambda f, df, c: stencil.deriv_x(f, df, c),
    "tiled, threads_x not dividing nx": lambda f, df, c: stencil.deriv_x(f, df, c, stencil.XTile(threads_x=5, pencils=6, rows=3)),
}


@pytest.mark.parametrize("name", list(X_LAUNCHES))
def test_x_derivative(name):
    got, reference, tolerance = run("x", X_LAUNCHES[name])
    assert_close(got, reference, tolerance)


def test_the_books_memory_only_and_math_only_x_kernels():
    """Memory only writes f itself (the book's df = f_s); math only computes the stencil but never stores it."""
    host = gpucourse.random_array(SHAPE, np.float32, seed=4)
    coefficients = stencil.coefficients_for(host, spacing("x"))
    copied = gpucourse.to_device(gpucourse.poisoned(SHAPE, np.float32))
    stencil.deriv_x_book_variant(gpucourse.to_device(host), copied, coefficients, "memory only", pencils=4)
    np.testing.assert_array_equal(gpucourse.to_host(copied), host)
    untouched = gpucourse.to_device(gpucourse.poisoned(SHAPE, np.float32))
    stencil.deriv_x_book_variant(gpucourse.to_device(host), untouched, coefficients, "math only", pencils=4)
    assert np.isnan(gpucourse.to_host(untouched)).all()
    with pytest.raises(ArrayArgumentError, match="variant must be one of"):
        stencil.deriv_x_book_variant(gpucourse.to_device(host), untouched, coefficients, "neither")


@pytest.mark.parametrize("memory", ["device", "constant"])
def test_the_books_x_kernel_with_per_point_coefficients(memory):
    """§6.1.4: the stretched grid's coefficients from device memory or compiled into constant memory, against numpy.roll."""
    host = gpucourse.random_array(SHAPE, np.float32, seed=6)
    coefficients = fd.nonuniform_coefficients(SHAPE[2], 0.5)
    df = gpucourse.to_device(gpucourse.poisoned(SHAPE, np.float32))
    given = coefficients if memory == "constant" else gpucourse.to_device(coefficients)
    stencil.deriv_x_book_per_point(gpucourse.to_device(host), df, given, memory, pencils=4)
    reference = fd.nonuniform_reference(host, "x", coefficients)
    tolerance = 8 * np.finfo(np.float32).eps * float(np.sum(2 * np.abs(coefficients), axis=0).max())
    assert_close(gpucourse.to_host(df), reference, tolerance)
    with pytest.raises(ArrayArgumentError):
        stencil.deriv_x_book_per_point(gpucourse.to_device(host), df, coefficients.astype(np.float64), "constant")


def axis_tiles(direction: str) -> dict[str, object]:
    n = SHAPE[fd.AXIS[direction]]
    return {
        "book sPencils": lambda f, df, c: stencil.derivative(f, df, direction, c, "book"),
        "lPencils, whole axis, 3 rows": lambda f, df, c: stencil.deriv_yz(f, df, direction, c, stencil.AxisTile(n, 8, 3)),
        "segment tile": lambda f, df, c: stencil.deriv_yz(f, df, direction, c, stencil.AxisTile(n // (3 if n % 3 == 0 else 2), 4, 2)),
        "registers": lambda f, df, c: stencil.deriv_yz_registers(f, df, direction, c, chunk=n // (3 if n % 3 == 0 else 2), pencils=8, rows=2),
        "transposed": lambda f, df, c: stencil.deriv_transposed(f, df, direction, c, swap_tile=8, swap_rows=2,
                                                                  x_tile=stencil.XTile(threads_x=4, pencils=4, rows=4)),
    }


@pytest.mark.parametrize("direction", ["y", "z"])
@pytest.mark.parametrize("name", ["book sPencils", "lPencils, whole axis, 3 rows", "segment tile", "registers", "transposed"])
def test_y_and_z_derivatives(direction, name):
    got, reference, tolerance = run(direction, axis_tiles(direction)[name], seed=1)
    assert_close(got, reference, tolerance)


def test_float64_kernels():
    for direction, launch in (("x", lambda f, df, c: stencil.deriv_x(f, df, c)),
                              ("z", lambda f, df, c: stencil.deriv_yz(f, df, "z", c))):
        got, reference, tolerance = run(direction, launch, dtype=np.float64, seed=2)
        assert got.dtype == np.float64
        assert_close(got, reference, tolerance)


@pytest.mark.parametrize("direction", ["x", "y"])
def test_per_point_coefficients(direction):
    n = SHAPE[fd.AXIS[direction]]
    host = gpucourse.random_array(SHAPE, np.float32, seed=3)
    coefficients = fd.nonuniform_coefficients(n, alpha=0.4)
    df = gpucourse.to_device(gpucourse.poisoned(SHAPE))
    stencil.derivative(gpucourse.to_device(host), df, direction, gpucourse.to_device(coefficients))
    reference = fd.nonuniform_reference(host, direction, coefficients)
    tolerance = 8 * np.finfo(np.float32).eps * float(np.sum(2 * np.abs(coefficients), axis=0).max())
    assert_close(gpucourse.to_host(df), reference, tolerance)


def test_analytic_error_is_float32_rounding():
    n = gpucourse.problem_size("ch6_book_grid")
    shape = (n, n, n)
    f, exact, h = fd.wave(shape, "x")
    df = gpucourse.to_device(gpucourse.poisoned(shape))
    stencil.deriv_x(gpucourse.to_device(f), df, stencil.coefficients_for(f, h))
    rms, largest = fd.error_norms(gpucourse.to_host(df), exact)
    host_rms, host_max = fd.error_norms(fd.stencil_float32(f, "x", h), exact)
    # the kernel does the host's float32 arithmetic: its errors match to a fraction of themselves
    assert rms == pytest.approx(host_rms, rel=0.2) and largest == pytest.approx(host_max, rel=0.5)
    book_max = gpucourse.book.figure("ch6_deriv_x_64x4_max_K20").number
    truncation = fd.error_norms(fd.derivative_reference(f.astype(np.float64), "x", h), exact)[1]
    assert largest < 3 * max(book_max, truncation)


def test_swap_last_axes():
    b, m, n = 3, SHAPE[1] + 1, SHAPE[2] + 3  # not multiples of the tile
    host = gpucourse.random_array((b, m, n), np.float32, seed=4)
    dst = gpucourse.to_device(gpucourse.poisoned((b, n, m)))
    stencil.swap_last_axes(gpucourse.to_device(host), dst, tile=8, rows=2)
    np.testing.assert_array_equal(gpucourse.to_host(dst), host.transpose(0, 2, 1))


def test_tiles_describe_themselves():
    tile = stencil.book_x_tile(64)
    assert (tile.threads_per_block, tile.points_per_thread(64), tile.shared_bytes(64, 4)) == (256, 1, 4 * 72 * 4)
    assert tile.shared_bytes(64, 4) == gpucourse.book.figure("ch6_deriv_x_smem_K20").number
    lpencils = stencil.book_lpencils_tile(64)
    assert lpencils.shared_bytes(4) == gpucourse.book.figure("ch6_deriv_y_lpencils_smem").number
    assert (lpencils.threads_per_block, lpencils.points_per_thread()) == (256, 8)
    assert "64x4" in tile.describe(64) and "32x64" in lpencils.describe()


def test_bad_arguments_say_what_to_change():
    f = gpucourse.to_device(np.zeros(SHAPE, np.float32))
    df = gpucourse.to_device(np.zeros(SHAPE, np.float32))
    good = stencil.coefficients_for(np.zeros(1, np.float32), 0.1)
    with pytest.raises(ArrayArgumentError, match="float64.*compiled for float32"):
        stencil.deriv_x(f, gpucourse.to_device(np.zeros(SHAPE, np.float64)), good)
    with pytest.raises(ArrayArgumentError, match="Python float"):
        stencil.deriv_x(f, df, (0.8, -0.2, 0.04, -0.004))
    with pytest.raises(ArrayArgumentError, match="shape"):
        stencil.deriv_x(f, gpucourse.to_device(np.zeros(SHAPE[::-1], np.float32)), good)
    with pytest.raises(ArrayArgumentError, match="at least 9 points"):
        small = gpucourse.to_device(np.zeros((4, 10, 10), np.float32))
        stencil.deriv_x(small, small, good)
    with pytest.raises(ArrayArgumentError, match="shape"):
        stencil.deriv_x(f, df, gpucourse.to_device(np.zeros((4, SHAPE[2] + 1), np.float32)))
    with pytest.raises(LaunchConfigError, match="multiple of rows"):
        stencil.deriv_x(f, df, good, stencil.XTile(threads_x=4, pencils=3, rows=2))
    with pytest.raises(LaunchConfigError, match="at most"):
        stencil.deriv_x(f, df, good, stencil.XTile(threads_x=SHAPE[2] + 1, pencils=1, rows=1))
    with pytest.raises(LaunchConfigError, match="threads per block"):
        stencil.deriv_x(f, df, good, stencil.XTile(threads_x=SHAPE[2], pencils=2048, rows=2048))
    with pytest.raises(LaunchConfigError, match="shared memory"):
        stencil.deriv_x(f, df, good, stencil.XTile(threads_x=1, pencils=1024, rows=1))
    with pytest.raises(LaunchConfigError, match="must divide"):
        stencil.deriv_yz(f, df, "y", good, stencil.AxisTile(length=SHAPE[1] - 1, pencils=4, rows=2))
    with pytest.raises(LaunchConfigError, match="must divide"):
        stencil.deriv_yz_registers(f, df, "z", good, chunk=SHAPE[0] + 1)
    with pytest.raises(ValueError, match="unknown method"):
        stencil.derivative(f, df, "y", good, "magic")
    with pytest.raises(ValueError, match="direction"):
        stencil.derivative(f, df, "w", good)
    with pytest.raises(ArrayArgumentError, match="host memory|array"):
        stencil.deriv_x([1.0], df, good)
    padded = gpucourse.to_device(np.zeros((SHAPE[0], SHAPE[1], SHAPE[2] + 2), np.float32))
    with pytest.raises(ArrayArgumentError, match="C-contiguous"):
        stencil.deriv_yz(padded[:, :, 1:-1], df, "z", good)
    assert stencil.is_c_contiguous(f) and not stencil.is_c_contiguous(padded[:, :, 1:-1])


def test_bytes_moved():
    assert stencil.bytes_moved((64, 64, 64), 4) == 2 * 64**3 * 4
