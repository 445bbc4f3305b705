"""Chapter 6.2 Jacobi kernels against the host sweep, on random data, outputs poisoned first; the tuned ones against the book's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only

import gpucourse
from gpucourse import finite_difference as fd
from gpucourse import mode
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import indexing, laplace

SHAPE = tuple(n + 3 for n in gpucourse.problem_size("ch6_laplace_test"))  # not a multiple of the block
BLOCK = gpucourse.problem_size("ch6_laplace_block")


def poisoned_interior(host: np.ndarray) -> np.ndarray:
    """The boundary as given (it is never written), NaN inside (every interior point must be)."""
    out = host.copy()
    out[1:-1, 1:-1] = np.nan
    return out


def sweep(launch, host: np.ndarray) -> np.ndarray:
    a_new = gpucourse.to_device(poisoned_interior(host))
    launch(gpucourse.to_device(host), a_new)
    return gpucourse.to_host(a_new)


@pytest.mark.parametrize("dtype, tolerance", [(np.float32, 2e-7), (np.float64, 1e-15)])
@pytest.mark.parametrize("method", ["global_book", "shared_book", "global", "shared"])
def test_one_sweep_matches_the_host(method, dtype, tolerance):
    host = gpucourse.random_array(SHAPE, dtype, seed=5)
    launcher, _ = laplace.sweep_call(gpucourse.to_device(host), gpucourse.to_device(host), method)
    got = sweep(lambda a, b: launcher(a, b, BLOCK) if method.endswith("_book") else launcher(a, b), host)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, fd.jacobi_step_reference(host), rtol=0, atol=tolerance * 2)


@pytest.mark.parametrize("options", [dict(), dict(block=(32, 2), rows=3), dict(block=(64, 1), rows=5),
                                     dict(block=(8, 3), rows=4, shuffles=False), dict(block=(32, 4), rows=1, shuffles=False)])
def test_tuned_global_sweep_gives_the_books_bits(options):
    """Rows per thread, shuffles or loads: the same update in the same order, so the same bits as the book's kernel."""
    host = gpucourse.random_array(SHAPE, np.float32, seed=8)
    book = sweep(lambda a, b: laplace.jacobi_global_book(a, b, BLOCK), host)
    tuned = sweep(lambda a, b: laplace.jacobi_global(a, b, **options), host)
    assert np.array_equal(tuned, book)


@pytest.mark.parametrize("block, rows", [((32, 4), 16), ((8, 3), 4), ((2, 5), 3), ((64, 2), 1)])
def test_tuned_shared_sweep_gives_the_books_bits(block, rows):
    host = gpucourse.random_array(SHAPE, np.float32, seed=6)
    book = sweep(lambda a, b: laplace.jacobi_shared_book(a, b, (8, 3)), host)
    assert np.array_equal(book, sweep(lambda a, b: laplace.jacobi_global_book(a, b, BLOCK), host))
    assert np.array_equal(sweep(lambda a, b: laplace.jacobi_shared(a, b, block, rows), host), book)


def test_iterations_follow_the_host_and_converge_in_the_right_direction():
    shape = gpucourse.problem_size("ch6_laplace_test")
    iterations, every = gpucourse.problem_size("ch6_laplace_iterations")
    initial = fd.laplace_initial(shape)
    host = fd.laplace_residual_history(shape, iterations, every)
    for method in ("global", "shared", "global_book", "shared_book"):
        final, history = laplace.jacobi_iterations(initial, iterations, method, every)
        assert [n for n, _ in history] == [n for n, _ in host]
        np.testing.assert_allclose([r for _, r in history], [r for _, r in host], rtol=1e-5)
        assert history[-1][1] < history[0][1]
        assert np.array_equal(final[0], initial[0]) and np.array_equal(final[-1], initial[-1])


def test_gpu_only_paths():
    host = fd.laplace_initial((64, 64))
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            laplace.TextureReader(host)
        for launcher in (laplace.jacobi_readonly, laplace.jacobi_readonly_book):
            with pytest.raises(GPUOnlyFeature):
                launcher(host, host.copy())
        gpu_only("textures and read-only loads (refused in the simulator, checked)")
    shape = (67, 96)  # texture rows must be whole multiples of 32 bytes; 67 rows are no multiple of any tile
    source_host = gpucourse.random_array(shape, np.float32, seed=7)
    book = sweep(lambda a, b: laplace.jacobi_global_book(a, b), source_host)
    for method in ("texture", "readonly", "texture_book", "readonly_book"):
        source = gpucourse.to_device(source_host)
        target = gpucourse.to_device(poisoned_interior(source_host))
        laplace.sweeper(source, target, method)(0)
        got = gpucourse.to_host(target)
        np.testing.assert_allclose(got, fd.jacobi_step_reference(source_host), atol=4e-7)
        assert np.array_equal(got, book), f"{method} differs from the book's global sweep"
    source = gpucourse.to_device(source_host)
    for options in (dict(shuffles=True), dict(shuffles=False), dict(block=(64, 2), rows=5, shuffles=True),
                    dict(block=(32, 3), rows=1, shuffles=True), dict(block=(16, 4), rows=7, shuffles=False)):
        target = gpucourse.to_device(poisoned_interior(source_host))
        laplace.jacobi_readonly(source, target, **options)
        assert np.array_equal(gpucourse.to_host(target), book), f"the read-only sweep with {options} differs from the book's"
    with pytest.raises(LaunchConfigError, match="multiple of 32"):
        laplace.jacobi_readonly(source, target, block=(16, 4), shuffles=True)
    with pytest.raises(LaunchConfigError, match="multiple of"):
        laplace.TextureReader(gpucourse.to_device(np.zeros((8, 13), np.float32)))


def test_bad_arguments():
    a = gpucourse.to_device(np.zeros(SHAPE, np.float32))
    with pytest.raises(ArrayArgumentError, match="float64"):
        laplace.jacobi_global(a, gpucourse.to_device(np.zeros(SHAPE, np.float64)))
    with pytest.raises(ArrayArgumentError, match="shape"):
        laplace.jacobi_shared(a, gpucourse.to_device(np.zeros((SHAPE[0], SHAPE[1] + 1), np.float32)))
    with pytest.raises(LaunchConfigError, match="limit"):
        laplace.jacobi_global_book(a, a, (64, 32))
    with pytest.raises(LaunchConfigError, match="multiple of 32"):
        laplace.jacobi_global(a, a, (16, 4), 16, True)
    with pytest.raises(LaunchConfigError, match="rows"):
        laplace.jacobi_global(a, a, (32, 4), 0)
    with pytest.raises(LaunchConfigError, match="3 x 3"):
        laplace.jacobi_global(gpucourse.to_device(np.zeros((2, 8), np.float32)), gpucourse.to_device(np.zeros((2, 8), np.float32)))
    with pytest.raises(ArrayArgumentError, match="C-contiguous"):
        strided = gpucourse.to_device(np.zeros((SHAPE[0], 2 * SHAPE[1]), np.float32))[:, ::2]
        laplace.jacobi_global(strided, strided)
    with pytest.raises(ArrayArgumentError, match="32-bit"):
        indexing.check_32bit((2**16, 2**15 + 1))
    with pytest.raises(ValueError, match="unknown method"):
        laplace.sweeper(a, a, "magic")
    assert laplace.bytes_per_sweep((10, 20), 4) == 1600
