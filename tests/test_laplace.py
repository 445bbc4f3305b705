"""Chapter 6.2 Jacobi kernels against the host sweep, on random data, outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse import finite_difference as fd
from gpucourse import mode
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import laplace

SHAPE = tuple(n + 3 for n in gpucourse.problem_size("ch6_laplace_test"))  # not a multiple of the block
BLOCK = gpucourse.problem_size("ch6_laplace_block")


def poisoned_interior(host: np.ndarray) -> np.ndarray:
    """The boundary as given (it is never written), NaN inside (every interior point must be)."""
    out = host.copy()
    out[1:-1, 1:-1] = np.nan
    return out


@pytest.mark.parametrize("dtype, tolerance", [(np.float32, 2e-7), (np.float64, 1e-15)])
@pytest.mark.parametrize("method", ["global", "shared"])
def test_one_sweep_matches_the_host(method, dtype, tolerance):
    host = gpucourse.random_array(SHAPE, dtype, seed=5)
    a_new = gpucourse.to_device(poisoned_interior(host))
    getattr(laplace, f"jacobi_{method}")(gpucourse.to_device(host), a_new, BLOCK)
    got = gpucourse.to_host(a_new)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, fd.jacobi_step_reference(host), rtol=0, atol=tolerance * 2)


def test_shared_tile_with_odd_block():
    host = gpucourse.random_array(SHAPE, np.float32, seed=6)
    a_new = gpucourse.to_device(poisoned_interior(host))
    laplace.jacobi_shared(gpucourse.to_device(host), a_new, (8, 3))
    np.testing.assert_allclose(gpucourse.to_host(a_new), fd.jacobi_step_reference(host), atol=4e-7)


def test_iterations_follow_the_host_and_converge_in_the_right_direction():
    shape = gpucourse.problem_size("ch6_laplace_test")
    iterations, every = gpucourse.problem_size("ch6_laplace_iterations")
    initial = fd.laplace_initial(shape)
    host = fd.laplace_residual_history(shape, iterations, every)
    for method in ("global", "shared"):
        final, history = laplace.jacobi_iterations(initial, iterations, method, every, BLOCK)
        assert [n for n, _ in history] == [n for n, _ in host]
        np.testing.assert_allclose([r for _, r in history], [r for _, r in host], rtol=1e-5)
        assert history[-1][1] < history[0][1]
        assert np.array_equal(final[0], initial[0]) and np.array_equal(final[-1], initial[-1])


def test_gpu_only_paths():
    host = fd.laplace_initial((64, 64))
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            laplace.TextureReader(host)
        with pytest.raises(GPUOnlyFeature):
            laplace.jacobi_readonly(host, host.copy())
        return
    expected = fd.jacobi_step_reference(gpucourse.random_array((64, 96), np.float32, seed=7))
    for method in ("texture", "readonly"):
        source = gpucourse.to_device(gpucourse.random_array((64, 96), np.float32, seed=7))
        target = gpucourse.to_device(poisoned_interior(gpucourse.to_host(source)))
        laplace.sweeper(source, target, method)(0)
        np.testing.assert_allclose(gpucourse.to_host(target), expected, atol=4e-7)
    with pytest.raises(LaunchConfigError, match="multiple of"):
        laplace.TextureReader(gpucourse.to_device(np.zeros((8, 13), np.float32)))


def test_bad_arguments():
    a = gpucourse.to_device(np.zeros(SHAPE, np.float32))
    with pytest.raises(ArrayArgumentError, match="float64"):
        laplace.jacobi_global(a, gpucourse.to_device(np.zeros(SHAPE, np.float64)))
    with pytest.raises(ArrayArgumentError, match="shape"):
        laplace.jacobi_shared(a, gpucourse.to_device(np.zeros((SHAPE[0], SHAPE[1] + 1), np.float32)))
    with pytest.raises(LaunchConfigError, match="limit"):
        laplace.jacobi_global(a, a, (64, 32))
    with pytest.raises(LaunchConfigError, match="3 x 3"):
        laplace.jacobi_global(gpucourse.to_device(np.zeros((2, 8), np.float32)), gpucourse.to_device(np.zeros((2, 8), np.float32)))
    with pytest.raises(ValueError, match="unknown method"):
        laplace.sweeper(a, a, "magic")
    assert laplace.bytes_per_sweep((10, 20), 4) == 1600
