"""Host-side finite-difference tools: coefficients, grids, references, norms and the temporal-blocking model."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from gpucourse import book
from gpucourse import finite_difference as fd


def test_taylor_system_gives_the_books_coefficients():
    assert fd.exact_central_coefficients(4) == fd.book_coefficients()
    np.testing.assert_allclose(fd.central_coefficients(4), [float(c) for c in fd.book_coefficients()], rtol=1e-13)
    assert fd.exact_central_coefficients(1) == (Fraction(1, 2),)  # the two-point central difference
    assert fd.exact_central_coefficients(2) == (Fraction(2, 3), Fraction(-1, 12))
    assert fd.order_of_accuracy(4) == 8
    with pytest.raises(ValueError):
        fd.central_coefficients(0)


@pytest.mark.parametrize("half_width", [1, 2, 3, 4, 5])
def test_order_of_accuracy_is_observed(half_width):
    """Doubling n divides the truncation error by about 2^(2N) on a smooth function."""
    errors = []
    for n in (24, 48):
        x = fd.periodic_grid(n)
        f = np.sin(2 * np.pi * x)[None, None, :]
        approx = fd.derivative_reference(f, "x", 1.0 / n, half_width)[0, 0]
        errors.append(np.max(np.abs(approx - 2 * np.pi * np.cos(2 * np.pi * x))))
    assert np.log2(errors[0] / errors[1]) == pytest.approx(2 * half_width, abs=0.3)


def test_reference_is_periodic_and_exact_for_a_linear_ramp_inside():
    rng = np.random.default_rng(0)
    f = rng.standard_normal((3, 4, 11))
    shifted = fd.derivative_reference(np.roll(f, 3, axis=2), "x", 0.1)
    np.testing.assert_allclose(shifted, np.roll(fd.derivative_reference(f, "x", 0.1), 3, axis=2), atol=1e-12)
    for direction, axis in fd.AXIS.items():
        g = rng.standard_normal((10, 12, 14))
        np.testing.assert_allclose(fd.derivative_reference(g, direction, 0.5),
                                   np.moveaxis(fd.derivative_reference(np.moveaxis(g, axis, 2), "x", 0.5), 2, axis), atol=1e-12)


def test_wave_and_grids():
    f, exact, h = fd.wave((2, 3, 16), "x")
    assert f.dtype == np.float32 and f.shape == (2, 3, 16) and h == 1 / 16
    assert np.allclose(f[0, 0], np.cos(2 * np.pi * np.arange(16) / 16), atol=1e-6)
    assert np.allclose(exact[1, 2], -2 * np.pi * np.sin(2 * np.pi * np.arange(16) / 16))
    g, _, _ = fd.wave((12, 3, 2), "z", like_book=False)
    assert np.allclose(g[:, 0, 0], np.cos(2 * np.pi * np.arange(12) / 12), atol=1e-7)
    assert fd.book_grid(64)[-1] == 1.0 and fd.periodic_grid(64)[-1] < 1.0
    with pytest.raises(ValueError, match="at least 9"):
        fd.periodic_grid(8)


def test_error_norms_and_rounding_study():
    assert fd.error_norms(np.array([1.0, 2.0]), np.array([1.0, 4.0])) == (pytest.approx(np.sqrt(2.0)), 2.0)
    study = fd.truncation_and_rounding([16, 64])
    # truncation falls like n^-8; float32 hits its floor, and the book-like f sits higher
    assert study["float64"][1] < 1e-8 < study["float64"][0]
    assert study["float32 like the book"][1] > study["float32 rounded f"][1] > study["float64"][1]
    book_max = book.figure("ch6_deriv_x_64x4_max_K20").number
    assert book_max / 3 < study["float32 like the book"][1] < 3 * book_max
    assert fd.stencil_amplification(1 / 64) == pytest.approx(64 * 2 * (4 / 5 + 1 / 5 + 4 / 105 + 1 / 280))


def test_stencil_coefficients_have_the_arrays_dtype():
    coefficients = fd.stencil_coefficients(0.5, np.float32)
    assert all(type(c) is np.float32 for c in coefficients)
    assert coefficients[0] == np.float32(1.6)


def test_stretched_grid():
    s, x, ds_dx = fd.stretched_grid(64, 0.0)
    np.testing.assert_allclose(x, s)
    np.testing.assert_allclose(ds_dx, 1.0)
    s, x, ds_dx = fd.stretched_grid(64, 0.5)
    assert x[0] == 0.0 and np.all(np.diff(x) > 0) and x[-1] < 1.0
    # spacing is smallest where points cluster, at s = 1/4 and 3/4, and ds/dx is the inverse of dx/ds
    spacing = np.diff(np.append(x, 1.0))
    assert np.argmin(spacing[:32]) in (15, 16)
    np.testing.assert_allclose(np.gradient(x, s)[5:-5], 1 / ds_dx[5:-5], rtol=5e-3)
    np.testing.assert_allclose(1 / ds_dx, 2 / 1.5 * (1 - 0.5 * np.sin(2 * np.pi * s) ** 2))
    with pytest.raises(ValueError, match="alpha"):
        fd.stretched_grid(16, 1.0)


def test_nonuniform_coefficients_reduce_to_uniform():
    uniform = fd.nonuniform_coefficients(32, 0.0)
    assert uniform.shape == (4, 32) and uniform.dtype == np.float32
    np.testing.assert_allclose(uniform[:, 7], fd.stencil_coefficients(1 / 32, np.float32), rtol=1e-6)
    f, exact = fd.stretched_wave((1, 1, 64), "x", 0.3, dtype=np.float64)
    approx = fd.nonuniform_reference(f, "x", fd.nonuniform_coefficients(64, 0.3, np.float64))
    assert fd.error_norms(approx, exact)[1] < 1e-4


def test_laplace_reference_reproduces_the_book():
    history = fd.laplace_residual_history(tuple(int(v) for v in book.figure("ch6_laplace_mesh").value.split(" x ")), 100, 10)
    for iteration, residual in history:
        printed = book.figure(f"ch6_laplace_residual_it{iteration}")
        assert f"{residual:.6f}" == printed.value


def test_laplace_strips_equal_the_whole_mesh():
    shape = (40, 17)
    a = fd.laplace_initial(shape)
    residuals = []
    for _ in range(12):
        new = fd.jacobi_step_reference(a)
        residuals.append(float(np.max(np.abs(new - a))))
        a = new
    assert [r for _, r in fd.laplace_residual_history(shape, 12, 1)] == residuals
    assert fd.laplace_exact(shape)[0, 8] == pytest.approx(1.0)


def test_heat_reference_keeps_the_boundary_and_the_sum_inside():
    rng = np.random.default_rng(1)
    u = rng.random((9, 11)).astype(np.float32)
    new = fd.heat_step_reference(u, 0.2)
    assert np.array_equal(new[0], u[0]) and np.array_equal(new[:, -1], u[:, -1])
    assert new.dtype == np.float32


def test_temporal_blocking_model():
    a, p, dims = fd.model_parameters()
    assert (a, p, dims) == (7, 32, 2)
    s = np.arange(1, 9)
    values = fd.useful_flops_per_access(s, a, p, dims)
    # the article's count: p^D reads and (p-2s)^D writes per block, a s (p-2s)^D useful flops
    np.testing.assert_allclose(values, a * s * (p - 2 * s) ** 2 / (p**2 + (p - 2 * s) ** 2))
    assert fd.best_steps_per_launch(a, p, dims) == 6
    assert fd.useful_flops_per_access(1, a, p, dims) == pytest.approx(a * 900 / 1924)
    # s = 1 with no overlap would be 1 read + 1 write: the 7/2 of the article's shared-memory kernel
    assert fd.useful_flops_per_access(1, a, 10**6, dims) == pytest.approx(7 / 2, rel=1e-5)
    assert fd.model_time_per_step_ms(1, p, dims, 10**6, 4, 1000.0) == pytest.approx(4e6 * 1924 / 900 / 1e12 * 1e3)
    with pytest.raises(ValueError, match="below p/2"):
        fd.useful_flops_per_access(16, a, p, dims)
