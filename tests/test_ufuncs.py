"""Ufunc-style kernels and the hand-written ones they replace, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only
from numba import cuda

import gpucourse
from gpucourse import mode
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import ufuncs

TPB = gpucourse.problem_size("ch3_threads_per_block")


def element_types():
    return [np.int32, np.float32, np.float64]


@pytest.mark.parametrize("dtype", element_types())
@pytest.mark.parametrize("per_thread", [1, 4])
def test_handwritten_increment(dtype, per_thread):
    n = gpucourse.problem_size("ch3_test_elements")
    start = gpucourse.random_array(n, dtype, seed=1, low=-100, high=100)
    a = gpucourse.to_device(start)
    ufuncs.handwritten_increment(a, 3, TPB, per_thread)
    np.testing.assert_array_equal(gpucourse.to_host(a), start + dtype(3))


def test_handwritten_increment_arguments():
    a = gpucourse.to_device(np.zeros(10, np.float32))
    with pytest.raises(LaunchConfigError, match="elements_per_thread"):
        ufuncs.handwritten_increment(a, 1, 64, 0)
    with pytest.raises(ArrayArgumentError, match="host memory" if mode.on_gpu() else "1 dimension"):
        ufuncs.handwritten_increment(np.zeros(10, np.float32) if mode.on_gpu() else gpucourse.to_device(np.zeros((2, 2))), 1)


@pytest.mark.parametrize("dtype", element_types())
def test_ufunc_and_elementwise_increment(dtype):
    n = gpucourse.problem_size("ch3_test_elements")
    start = gpucourse.random_array(n, dtype, seed=2, low=-100, high=100)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="vectorize"):
            ufuncs.ufunc_increment(gpucourse.to_device(start), 3)
        with pytest.raises(GPUOnlyFeature, match="ElementwiseKernel"):
            ufuncs.elementwise_increment(start, 3)
        gpu_only("CUDA ufuncs and CuPy ElementwiseKernels (refused in the simulator, checked)")
    import cupy

    a = gpucourse.to_device(start)
    ufuncs.ufunc_increment(a, 3)
    np.testing.assert_array_equal(a.copy_to_host(), start + dtype(3))
    c = cupy.asarray(start)
    ufuncs.elementwise_increment(c, 3)
    ufuncs.elementwise_increment(c, 2, block_size=128)
    np.testing.assert_array_equal(c.get(), (start + dtype(3)) + dtype(2))  # two roundings in float32, as on the GPU
    with pytest.raises(TypeError, match="dtype"):
        ufuncs.increment_ufunc(3, "int8")


def test_streamed_ufunc_increment():
    n = gpucourse.problem_size("ch3_test_elements") // 4 * 4
    start = gpucourse.random_array(n, np.float32, seed=3)
    streams = [cuda.stream() for _ in range(4)]
    a = gpucourse.to_device(start)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            ufuncs.streamed_ufunc_increment(a, 1.0, streams)
        gpu_only("CUDA ufuncs on streams (refused in the simulator, checked)")
    ufuncs.streamed_ufunc_increment(a, 1.0, streams)
    cuda.synchronize()
    np.testing.assert_array_equal(a.copy_to_host(), start + np.float32(1))
    with pytest.raises(LaunchConfigError, match="evenly"):
        ufuncs.streamed_ufunc_increment(gpucourse.to_device(start[:-1]), 1.0, streams)


@pytest.mark.parametrize("blocks_factor", [1, 3])
def test_sums(blocks_factor):
    n, blocks = gpucourse.problem_size("ch3_test_elements"), gpucourse.problem_size("ch3_reduce")[1]
    x = gpucourse.random_array(n, np.float32, seed=4, low=0.0, high=1.0)
    reference = x.astype(np.float64).sum()
    x_device = gpucourse.to_device(x)
    result = gpucourse.to_device(gpucourse.poisoned(1, np.float32))
    ufuncs.handwritten_sum(x_device, result, blocks * blocks_factor, TPB)
    assert gpucourse.to_host(result)[0] == pytest.approx(reference, rel=1e-5)
    result = gpucourse.to_device(gpucourse.poisoned(1, np.float32))
    ufuncs.numba_sum(x_device, result)
    assert gpucourse.to_host(result)[0] == pytest.approx(reference, rel=1e-5)
    if mode.on_gpu():
        assert float(ufuncs.cupy_reduction_sum(x_device)) == pytest.approx(reference, rel=1e-5)
    else:
        with pytest.raises(GPUOnlyFeature, match="ReductionKernel"):
            ufuncs.cupy_reduction_sum(x)


def test_sum_arguments():
    x = gpucourse.to_device(np.zeros(64, np.float32))
    result = gpucourse.to_device(np.zeros(1, np.float32))
    with pytest.raises(LaunchConfigError, match="power of two"):
        ufuncs.handwritten_sum(x, result, 2, 96)
    with pytest.raises(ArrayArgumentError, match="shape"):
        ufuncs.handwritten_sum(x, x, 2, 64)
    with pytest.raises(ArrayArgumentError, match="float32"):
        ufuncs.numba_sum(gpucourse.to_device(np.zeros(64, np.float64)), result)


def test_variants_all_increment_and_sum():
    n = gpucourse.problem_size("ch3_test_elements")
    start = gpucourse.random_array(n, np.float32, seed=5)
    a = gpucourse.to_device(start)
    variants = ufuncs.increment_variants(a, 1.0, TPB, ilp=4)
    assert len(variants) == (5 if mode.on_gpu() else 2)
    for run in variants.values():
        run()
    gpucourse.synchronize()
    np.testing.assert_allclose(gpucourse.to_host(a), start + len(variants), rtol=1e-6)
    _, blocks = gpucourse.problem_size("ch3_reduce")
    result = gpucourse.to_device(np.zeros(1, np.float32))
    sums = ufuncs.sum_variants(a, result, blocks, TPB)
    assert len(sums) == (4 if mode.on_gpu() else 2)
    assert ufuncs.increment_bytes(10, np.float32) == 80
