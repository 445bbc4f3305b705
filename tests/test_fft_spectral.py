"""Spectral derivatives and the periodic Poisson solver against analytic functions, in float32 and float64, outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse import book, fft, mode, spectral
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.graphs import capture
from gpucourse.kernels import spectral as kernels

xp = gpucourse.array_module()
NZ, NY, NX = gpucourse.problem_size("ch7_test_shape")
MESH = gpucourse.problem_size("ch7_test_mesh")
EPS = {np.float32: float(np.finfo(np.float32).eps), np.float64: float(np.finfo(np.float64).eps)}


def device(host):
    return xp.array(host, order="C", copy=True)


def poisoned(shape, dtype):
    return device(gpucourse.poisoned(shape, dtype))


# --- derivatives ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_book_derivative_is_exact_to_rounding(dtype):
    """cos 2x + sin 3x on 8 points: every mode is on the grid, so only rounding is left (book §7.2: 1e-15 and 2e-6)."""
    n = gpucourse.problem_size("ch7_book_derivative_points")
    x = spectral.periodic_points(n)
    f, first, second = spectral.book_wave(x)
    book_worst = max(abs(fig.number) for fig in book.figures("ch7_specderiv_" + ("dp" if dtype == np.float64 else "sp")))
    for order, exact in ((1, first), (2, second)):
        got = spectral.derivative_of(f.astype(dtype), order=order)
        assert got.dtype == dtype
        error = np.max(np.abs(got - exact))
        # 40 ulps of the largest value (|f''| <= 13): the book's own worst error is within the same bound
        assert error < 40 * EPS[dtype] * np.max(np.abs(exact)), (order, error)
        assert book_worst < 40 * EPS[dtype] * 13


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("nx", [NX, NX - 1])  # even n has a Nyquist column, odd n has none
def test_derivative_of_random_data_matches_numpy(order, dtype, nx):
    host = gpucourse.random_array((NZ, NY, nx), dtype, seed=order + nx)
    df = poisoned(host.shape, dtype)
    spectral.spectral_derivative(device(host), df, 3.0, order)
    want = spectral.spectral_derivative_reference(host, 3.0, order)
    got = gpucourse.to_host(df)
    assert not np.isnan(got).any()
    # FFT rounding: a few ulps times log2 n of the largest coefficient, amplified by k^order
    np.testing.assert_allclose(got, want, rtol=0, atol=50 * EPS[dtype] * np.max(np.abs(want)))


def test_derivative_takes_numba_device_arrays():
    """A Numba device array works as well as a CuPy one (a simulated one's shape refuses the index -1)."""
    host = gpucourse.random_array((NY, NX), np.float32, seed=5)
    df = gpucourse.to_device(gpucourse.poisoned(host.shape, np.float32))
    spectral.spectral_derivative(gpucourse.to_device(host), df, 3.0, 1)
    want = spectral.spectral_derivative_reference(host, 3.0, 1)
    np.testing.assert_allclose(gpucourse.to_host(df), want, rtol=0, atol=50 * EPS[np.float32] * np.max(np.abs(want)))


def test_spectral_convergence_against_the_stencil():
    """d/dx exp(sin x): the spectral error falls to rounding by n = 32; the order-8 stencil is still far above it."""
    points = spectral.convergence_study((16, 32), np.float64)
    assert points[0].spectral < 1e-6 and points[1].spectral < 1e-12
    assert points[1].stencil > 1e3 * points[1].spectral
    ratio = points[0].stencil / points[1].stencil  # algebraic: halving h divides the error by about 2^8
    assert 2**6 < ratio < 2**10


def test_derivative_kernel_nyquist_and_poisoning():
    n = NX
    spectrum_host = gpucourse.random_array((NY, n // 2 + 1), np.complex128, seed=9)
    out = poisoned(spectrum_host.shape, np.complex128)
    kernels.derivative_spectrum(device(spectrum_host), out, n, 2 * np.pi, 1)
    got = gpucourse.to_host(out)
    k = np.arange(n // 2 + 1)
    want = spectrum_host * 1j * k / n
    want[:, -1] = 0  # even n: the Nyquist column is zeroed
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    odd = n + 1  # the same number of columns, no Nyquist column
    out = poisoned(spectrum_host.shape, np.complex128)
    kernels.derivative_spectrum(device(spectrum_host), out, odd, 2 * np.pi, 1)
    np.testing.assert_allclose(gpucourse.to_host(out), spectrum_host * 1j * k / odd, rtol=1e-14, atol=1e-14)


# --- Poisson ---------------------------------------------------------------------------------------

#: The smooth problem (max |u| = e) on the test mesh (at least 20 points across x): spectral truncation below 1e-10,
#: float32 rounding about 1e-6.
POISSON_TOLERANCE = {np.float32: 2e-5, np.float64: 1e-9}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_poisson_smooth_problem(dtype):
    problem = spectral.smooth_poisson_problem(MESH, (1.0, 2.0))  # not square, lengths differ: a swapped axis shows
    rho = device(problem.rho.astype(dtype))
    u = poisoned(MESH, dtype)
    spectral.poisson_solve(rho, u, problem.lengths)
    got = gpucourse.to_host(u)
    assert got.dtype == dtype and not np.isnan(got).any()
    max_error, _ = problem.errors(got)
    assert max_error < POISSON_TOLERANCE[dtype], max_error


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_poisson_book_problem_both_paths(dtype):
    """The book's Gaussian: our R2C path and the book's C2C path agree, and the error is the book's 2.3e-5 (not periodic at the edge)."""
    problem = spectral.book_poisson_problem(gpucourse.problem_size("ch7_poisson_book"))
    ours, (ours_error, _) = spectral.solve_problem(problem, dtype, "r2c")
    theirs, (book_error, _) = spectral.solve_problem(problem, dtype, "book")
    np.testing.assert_allclose(ours - ours[0, 0], theirs, rtol=0, atol=2000 * EPS[dtype])  # two algorithms: rounding differs
    assert 2.0e-5 < ours_error < 3.0e-5 if dtype == np.float64 else ours_error < 1e-4
    assert abs(ours_error - book_error) < 2000 * EPS[dtype]


def test_poisson_spectral_convergence():
    """Doubling n from 8 to 16 to 32 squares the error (exponential convergence) until float64 rounding."""
    errors = [spectral.solve_problem(spectral.smooth_poisson_problem((n, n)), np.float64)[1][0] for n in (8, 16, 32)]
    assert errors[0] > 1e-4 and errors[1] < 1e-4 * errors[0] and errors[2] < 1e-13


def test_poisson_graph_and_division_variants():
    problem = spectral.smooth_poisson_problem(MESH)
    rho = device(problem.rho.astype(np.float64))
    u = poisoned(MESH, np.float64)
    solve = spectral.poisson_solve.plan(rho, u, problem.lengths)
    solve()
    graph = capture(solve, "solve")
    u[...] = np.nan
    graph.launch()
    assert problem.errors(u)[0] < POISSON_TOLERANCE[np.float64]

    spectrum_host = gpucourse.random_array(fft.half_spectrum_shape(MESH), np.complex64, seed=12)
    by_kernel = poisoned(spectrum_host.shape, np.complex64)
    kernels.poisson_spectrum(device(spectrum_host), by_kernel, MESH[1], (1.0, 2.0))
    by_expression = device(spectrum_host)
    by_expression *= spectral.inverse_laplacian(MESH, (1.0, 2.0), np.float32)
    np.testing.assert_allclose(gpucourse.to_host(by_kernel), gpucourse.to_host(by_expression), rtol=1e-6, atol=1e-12)
    assert gpucourse.to_host(by_kernel)[0, 0] == 0
    in_place = device(spectrum_host)
    try:
        kernels.poisson_elementwise(in_place, MESH[1], (1.0, 2.0))
    except GPUOnlyFeature:
        assert mode.is_simulator()
    else:
        np.testing.assert_allclose(gpucourse.to_host(in_place), gpucourse.to_host(by_kernel), rtol=1e-6, atol=1e-12)


def test_bad_arguments_say_what_to_change():
    rho = device(np.zeros(MESH, np.float32))
    with pytest.raises(ArrayArgumentError, match="2D"):
        spectral.poisson_solve(device(np.zeros((2, *MESH), np.float32)), device(np.zeros((2, *MESH), np.float32)))
    with pytest.raises(ArrayArgumentError, match="dtype float64"):
        spectral.poisson_solve(rho, device(np.zeros(MESH, np.float64)))
    with pytest.raises(ArrayArgumentError, match="float32 or float64"):
        spectral.spectral_derivative(device(np.zeros(MESH, np.complex64)), device(np.zeros(MESH, np.complex64)))
    with pytest.raises(ArrayArgumentError, match="columns"):
        kernels.poisson_spectrum(device(np.zeros((4, 5), np.complex64)), device(np.zeros((4, 5), np.complex64)), 16)
    with pytest.raises(ValueError, match="order must be 1 or 2"):
        spectral.spectral_derivative(rho, device(np.zeros(MESH, np.float32)), 1.0, 3)
    with pytest.raises(ArrayArgumentError, match="shape"):
        spectral.spectral_derivative(rho, device(np.zeros(MESH, np.float32)), work=device(np.zeros((3, 3), np.complex64)))


# --- the tuned k-space kernels against their first versions ---------------------------------------


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("block, rows", [(None, None), ((32, 2), 3), ((64, 1), 5)])
def test_tuned_poisson_kernel_gives_the_first_versions_bits(dtype, block, rows):
    """Rows per thread and every load first change the order of the loads, not the arithmetic: the same bits, last rows partial."""
    ny, nx = MESH[0] + 3, MESH[1] + 1
    host = gpucourse.random_array((ny, nx // 2 + 1), dtype, seed=21)
    first, tuned = device(host), poisoned(host.shape, dtype)
    kernels.poisson_spectrum_simple(first, first, nx, (1.0, 2.0))
    kernels.poisson_spectrum(device(host), tuned, nx, (1.0, 2.0), block, rows)
    assert np.array_equal(gpucourse.to_host(tuned), gpucourse.to_host(first))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("threads, per_thread", [(None, None), (32, 3), (64, 5), (1, 1)])
@pytest.mark.parametrize("nx", [MESH[1] + 1, MESH[1]])  # odd and even n: the Nyquist column only for even n
def test_tuned_derivative_kernel_gives_the_first_versions_bits(dtype, threads, per_thread, nx):
    """The flat kernel finds each value's column by a remainder: the same factor, the same bits, the grid's last values partial."""
    host = gpucourse.random_array((MESH[0] + 3, nx // 2 + 1), dtype, seed=22)
    for order in (1, 2):
        first, tuned = device(host), poisoned(host.shape, dtype)
        kernels.derivative_spectrum_simple(first, first, nx, 3.0, order)
        kernels.derivative_spectrum(device(host), tuned, nx, 3.0, order, threads, per_thread)
        assert np.array_equal(gpucourse.to_host(tuned), gpucourse.to_host(first)), order
    first, in_place = device(host), device(host)  # in place, as the spectral derivative's plan calls it
    kernels.derivative_spectrum_simple(first, first, nx, 3.0, 1)
    kernels.derivative_spectrum(in_place, in_place, nx, 3.0, 1, threads, per_thread)
    assert np.array_equal(gpucourse.to_host(in_place), gpucourse.to_host(first))


def test_tuned_spectrum_kernels_refuse_bad_rows():
    spectrum = device(np.zeros((4, 9), np.complex64))
    with pytest.raises(LaunchConfigError, match="rows per thread"):
        kernels.poisson_spectrum(spectrum, spectrum, 16, (1.0, 1.0), None, 0)
    with pytest.raises(LaunchConfigError, match="values per thread must be an integer from 1 to 64"):
        kernels.derivative_spectrum(spectrum, spectrum, 16, 1.0, 1, None, 65)
    with pytest.raises(LaunchConfigError, match="threads"):
        kernels.derivative_spectrum(spectrum, spectrum, 16, 1.0, 1, 4096)
