"""Chapter 1 kernels against NumPy references on random data (outputs poisoned first)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only

import gpucourse
from gpucourse import mode
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import intro


def test_increment_one_block(device):
    n = min(device.max_threads_per_block, gpucourse.problem_size("threads_per_block"))
    host = gpucourse.random_array(n, np.int32, seed=1, low=-1000, high=1000)
    a = gpucourse.to_device(host)
    intro.increment_one_block(a, 3)
    assert np.array_equal(gpucourse.to_host(a), host + 3)
    with pytest.raises(LaunchConfigError, match="limit"):
        intro.increment_one_block(gpucourse.to_device(np.zeros(device.max_threads_per_block + 1, np.int32)), 1)
    with pytest.raises(ArrayArgumentError, match="int32"):
        intro.increment_one_block(gpucourse.to_device(np.zeros(4, np.float32)), 1)


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_increment_many_blocks(dtype):
    n = gpucourse.problem_size("increment") + 13  # not a multiple of the block size
    host = gpucourse.random_array(n, dtype, seed=2, low=-100, high=100)
    a = gpucourse.to_device(host)
    intro.increment(a, 3, threads_per_block=128)
    np.testing.assert_array_equal(gpucourse.to_host(a), host + dtype(3))


def test_increment_grid_stride_covers_more_than_the_grid():
    n = gpucourse.problem_size("increment") + 5
    host = gpucourse.random_array(n, np.float32, seed=3)
    a = gpucourse.to_device(host)
    intro.increment_grid_stride(a, 2.0, blocks=2, threads_per_block=64)  # 128 threads, many more elements
    np.testing.assert_array_equal(gpucourse.to_host(a), host + np.float32(2))


@pytest.mark.parametrize("column_major", [False, True])
def test_increment_2d(column_major):
    rows, cols = gpucourse.problem_size("increment_2d")
    shape = (rows + 3, cols + 5)
    host = gpucourse.random_array(shape, np.float32, seed=4)
    a = gpucourse.to_device(host)
    intro.increment_2d(a, 1.5, threads_per_block=(16, 4), column_major=column_major)
    np.testing.assert_array_equal(gpucourse.to_host(a), host + np.float32(1.5))


def test_launch_2d_orientation():
    blocks, threads = intro.launch_2d((100, 300), (32, 8))
    assert threads == (32, 8) and blocks == (10, 13)  # x across the 300 columns, y across the 100 rows


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-6), (np.float64, 1e-15)])
def test_axpy_in_both_precisions(dtype, rtol):
    n = gpucourse.problem_size("saxpy") + 7
    x, y = gpucourse.random_array(n, dtype, seed=5), gpucourse.random_array(n, dtype, seed=6)
    y_d = gpucourse.to_device(y)
    intro.axpy(2.5, gpucourse.to_device(x), y_d)
    got = gpucourse.to_host(y_d)
    assert got.dtype == dtype
    reference = 2.5 * x.astype(np.float64) + y.astype(np.float64)
    np.testing.assert_allclose(got, reference, rtol=rtol, atol=4 * np.finfo(dtype).eps)


def test_axpy_refuses_mixed_precision():
    x = gpucourse.to_device(np.zeros(8, np.float64))
    y = gpucourse.to_device(np.zeros(8, np.float32))
    with pytest.raises(ArrayArgumentError, match="float64.*compiled for float32"):
        intro.axpy(1.0, x, y)
    with pytest.raises(ArrayArgumentError, match="float32 or float64"):
        intro.axpy(1.0, gpucourse.to_device(np.zeros(8, np.int32)), gpucourse.to_device(np.zeros(8, np.int32)))


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-4), (np.float64, 1e-12)])
def test_multiply_add_chain(dtype, rtol):
    n, steps = gpucourse.problem_size("fp_rate_check")
    host = gpucourse.random_array(n, dtype, seed=7)
    values = gpucourse.to_device(host)
    intro.multiply_add_chain(values, steps)
    np.testing.assert_allclose(gpucourse.to_host(values), intro.multiply_add_chain_reference(host, steps), rtol=rtol, atol=1e-6)
    assert intro.multiply_add_flops(n, steps) == 4 * n * steps


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float64, 1e-13)])
def test_matmul_naive(dtype, rtol):
    n = gpucourse.problem_size("sgemm")
    a = gpucourse.random_array((n, n + 3), dtype, seed=8)
    b = gpucourse.random_array((n + 3, n - 1), dtype, seed=9)
    c = gpucourse.to_device(gpucourse.poisoned((n, n - 1), dtype))
    intro.matmul_naive(gpucourse.to_device(a), gpucourse.to_device(b), c)
    reference = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(gpucourse.to_host(c), reference, rtol=rtol, atol=rtol * n)
    assert intro.matmul_flops(2, 3, 4) == 48
    with pytest.raises(ValueError, match="inner sizes"):
        intro.matmul_naive(gpucourse.to_device(a), gpucourse.to_device(a), gpucourse.to_device(np.zeros((n, n + 3), dtype)))


def test_increment_cuda_c():
    n = gpucourse.problem_size("increment") + 1
    host = gpucourse.random_array(n, np.float32, seed=10)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="RawKernel"):
            intro.increment_cuda_c(host, 1.0)
        gpu_only("a cupy.RawKernel (refused in the simulator, checked)")
    import cupy

    a = cupy.asarray(host)
    intro.increment_cuda_c(a, 1.0)
    np.testing.assert_array_equal(a.get(), host + np.float32(1))


@pytest.mark.parametrize("typed", [True, False])
def test_scale_both_ways(typed):
    n = gpucourse.problem_size("saxpy") + 3
    host = gpucourse.random_array(n, np.float32, seed=11)
    x = gpucourse.to_device(host)
    intro.scale(x, 0.1, typed=typed)
    got = gpucourse.to_host(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 0.1 * host.astype(np.float64), rtol=1e-7, atol=1e-30)
    with pytest.raises(ValueError, match="literal 0.1"):
        intro.scale(x, 3.0, typed=False)


def test_float_literal_makes_double_precision_instructions():
    from gpucourse import compilation

    x = gpucourse.to_device(np.ones(64, np.float32))
    intro.scale(x, 0.1, typed=True)
    intro.scale(x, 0.1, typed=False)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="PTX"):
            compilation.ptx(intro.scale_by_literal_kernel)
        gpu_only("the PTX of a launched kernel; tests/test_stack.py asserts the same float64 instructions without one")
    literal = compilation.count_matches(compilation.ptx(intro.scale_by_literal_kernel), r"\.f64")
    typed = compilation.count_matches(compilation.ptx(intro.scale_by_typed_constant_kernel), r"\.f64")
    assert literal > 0 and typed == 0
    usage = compilation.resource_usage(intro.scale_by_typed_constant_kernel)
    assert usage[0].registers > 0 and usage[0].local_bytes == 0


def test_unchecked_kernel_writes_past_the_end():
    from gpucourse.checks import run_guarded

    n = 100
    initial = np.zeros(n, np.float32)
    got, problems = run_guarded(lambda out: intro.increment_unchecked_kernel[2, 64](out, np.float32(1)), (n,), np.float32,
                                initial=initial)
    if mode.is_simulator():  # the simulator checks every index and stops the kernel
        assert problems and "indexed outside" in problems[0]
    else:  # the GPU does not check: the 28 extra threads write into the guard cells
        assert problems and "28 element(s) outside" in problems[0]
        assert np.array_equal(got, initial + 1)


def test_run_python_script():
    from gpucourse.errors import EnvironmentProblem
    from gpucourse.scripts import last_lines, run_python

    result = run_python("import gpucourse; print(gpucourse.MODE)", env={**__import__("os").environ, "GPUCOURSE_MODE": gpucourse.MODE})
    assert result.returncode == 0 and result.stdout.strip() == gpucourse.MODE
    assert last_lines("a\n\nb\nc\n", 2) == "b\nc"
    with pytest.raises(EnvironmentProblem, match="not on the PATH"):
        run_python("pass", tool=["no-such-profiler-xyz"])


def test_jit_variant_runs_the_same_source():
    from gpucourse import compilation

    n = 64
    a = gpucourse.random_array((n, n), np.float32, seed=12)
    c = gpucourse.to_device(gpucourse.poisoned((n, n), np.float32))
    tight = compilation.jit_variant(intro.matmul_naive_kernel, max_registers=16)
    tight[(4, 4), (16, 16)](gpucourse.to_device(a), gpucourse.to_device(a), c)
    np.testing.assert_allclose(gpucourse.to_host(c), a.astype(np.float64) @ a.astype(np.float64), rtol=1e-5, atol=1e-4)
    if mode.on_gpu():  # a tighter budget: fewer registers, or values spilled to local memory
        intro.matmul_naive_kernel[(4, 4), (16, 16)](gpucourse.to_device(a), gpucourse.to_device(a), c)  # compiled here, whatever ran before
        default = compilation.resource_usage(intro.matmul_naive_kernel)
        capped = compilation.resource_usage(tight)[0]
        assert capped.registers < max(u.registers for u in default) or capped.local_bytes > 0
