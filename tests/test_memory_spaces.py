"""Memory-space kernels against NumPy; GPU-only paths refuse clearly in the simulator; compiler reports on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only

import gpucourse
from gpucourse import compilation, mode
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import memory_spaces as ms

TPB = gpucourse.problem_size("ch3_threads_per_block")
EPS32 = np.finfo(np.float32).eps


def poisoned_device(shape):
    return gpucourse.to_device(gpucourse.poisoned(shape, np.float32))


@pytest.mark.parametrize("stride", [1, 5, 32])
def test_strided_read(stride):
    n = gpucourse.problem_size("ch3_test_elements")
    a = gpucourse.random_array(n * stride, np.float32, seed=stride)
    b = poisoned_device(n)
    ms.strided_read(b, gpucourse.to_device(a), stride, "global", TPB)
    np.testing.assert_array_equal(gpucourse.to_host(b), a[::stride][:n] + np.float32(1))
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="ldcg"):
            ms.strided_read(b, gpucourse.to_device(a), stride, "L2 only (ldcg)", TPB)
        gpu_only("the ld.global.cg load (refused in the simulator, checked)")
    b = poisoned_device(n)
    ms.strided_read(b, gpucourse.to_device(a), stride, "L2 only (ldcg)", TPB)
    np.testing.assert_array_equal(gpucourse.to_host(b), a[::stride][:n] + np.float32(1))


def test_strided_read_arguments():
    a, b = gpucourse.to_device(np.zeros(10, np.float32)), gpucourse.to_device(np.zeros(5, np.float32))
    with pytest.raises(ArrayArgumentError, match="n \\* stride"):
        ms.strided_read(b, a, 3)
    with pytest.raises(ValueError, match="positive"):
        ms.strided_read(b, a, 0)
    with pytest.raises(ValueError, match="path"):
        ms.strided_read(b, a, 1, path="texture")
    with pytest.raises(ArrayArgumentError, match="float64"):
        ms.strided_read(b, gpucourse.to_device(np.zeros(10, np.float64)), 1)


@pytest.mark.parametrize("path", ms.CUDA_C_PATHS)
def test_cuda_c_strided_reads(path, monkeypatch):
    n, stride = gpucourse.problem_size("ch3_test_elements"), 7
    a = gpucourse.random_array(n * stride, np.float32, seed=11)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            ms.cuda_c_strided_read(np.zeros(n, np.float32), a, stride, path)
        with pytest.raises(GPUOnlyFeature, match="Texture"):
            ms.linear_texture(a)
        gpu_only("CUDA C kernels and textures (refused in the simulator, checked)")
    import cupy

    a_gpu, b_gpu = cupy.asarray(a), cupy.full(n, cupy.nan, dtype=cupy.float32)
    texture = ms.linear_texture(a_gpu) if path == "CUDA C texture" else None
    ms.cuda_c_strided_read(b_gpu, a_gpu, stride, path, texture, TPB)
    np.testing.assert_array_equal(b_gpu.get(), a[::stride][:n] + np.float32(1))
    if path == "CUDA C texture":
        with pytest.raises(ValueError, match="texture_object"):
            ms.cuda_c_strided_read(b_gpu, a_gpu, stride, path)
        monkeypatch.setattr(ms, "max_linear_texture_elements", lambda: 16)
        with pytest.raises(LaunchConfigError, match="1D linear texture"):
            ms.linear_texture(a_gpu)


@pytest.mark.parametrize("points", [4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_averages(points, dtype):
    side = gpucourse.problem_size("ch3_test_side")
    a = gpucourse.random_array((side + 2, side + 7), dtype, seed=points)  # not square, not a multiple of the block
    b = gpucourse.to_device(gpucourse.poisoned((side, side + 5), dtype))
    ms.average(b, gpucourse.to_device(a), points)
    tolerance = 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(gpucourse.to_host(b), ms.average_reference(a, points), rtol=tolerance, atol=tolerance)
    assert ms.average_bytes(2, 3) == 4 * (6 + 20)
    with pytest.raises(ValueError, match="4 or 8"):
        ms.average(b, gpucourse.to_device(a), 5)
    with pytest.raises(ArrayArgumentError, match="halo"):
        ms.average(b, b, points)


@pytest.mark.parametrize("points", [4, 8])
def test_cuda_c_averages(points):
    side = gpucourse.problem_size("ch3_test_side")
    a = gpucourse.random_array((side + 2, side + 5), np.float32, seed=20 + points)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            ms.cuda_c_average(np.zeros((side, side + 3), np.float32), a, points)
        gpu_only("CUDA C kernels and textures (refused in the simulator, checked)")
    import cupy

    a_gpu = cupy.asarray(a)
    for texture in (None, ms.linear_texture(a_gpu.ravel())):
        b_gpu = cupy.full((side, side + 3), cupy.nan, dtype=cupy.float32)
        ms.cuda_c_average(b_gpu, a_gpu, points, texture)
        np.testing.assert_allclose(b_gpu.get(), ms.average_reference(a, points), rtol=4 * EPS32, atol=4 * EPS32)


@pytest.mark.parametrize("variant, k", [("static", 1), ("dynamic", 0), ("dynamic", 1), ("large", 200)])
def test_local_memory_kernels(variant, k):
    n = gpucourse.problem_size("ch3_test_elements")
    values = gpucourse.random_array(n, np.float32, seed=30)
    out = poisoned_device(n)
    ms.local_memory_demo(out, gpucourse.to_device(values), variant, k)
    np.testing.assert_array_equal(gpucourse.to_host(out), ms.local_memory_reference(values, variant, k))


def test_local_memory_arguments():
    out = poisoned_device(8)
    with pytest.raises(ValueError, match="variant"):
        ms.local_memory_demo(out, out, "huge")
    with pytest.raises(ValueError, match="indices 0 and 1"):
        ms.local_memory_demo(out, out, "dynamic", k=2)
    with pytest.raises(ValueError, match="0..255"):
        ms.local_memory_demo(out, out, "large", k=256)
    with pytest.raises(ArrayArgumentError, match="shape"):
        ms.local_memory_demo(out, poisoned_device(9), "static")


def test_register_hungry_kernel_with_and_without_a_register_limit():
    n, rounds = gpucourse.problem_size("ch3_test_elements"), gpucourse.problem_size("ch3_hungry")[1]
    values = gpucourse.random_array((ms.HUNGRY, n), np.float32, seed=31, low=-0.5, high=0.5)
    reference = ms.register_hungry_reference(values, rounds)
    for kernel in (None, ms.register_limited(24)):
        out = poisoned_device(n)
        ms.register_hungry(out, gpucourse.to_device(values), rounds, kernel)
        np.testing.assert_allclose(gpucourse.to_host(out), reference, rtol=1e-5, atol=1e-5)
    with pytest.raises(LaunchConfigError, match="between 16 and 255"):
        ms.register_limited(8)
    with pytest.raises(ArrayArgumentError, match="shape"):
        ms.register_hungry(poisoned_device(n), gpucourse.to_device(values[:, :-1]))


def test_compiler_reports_local_memory_and_spills():
    """The reports the notebook reads: registers for static indices, local memory for run-time ones, spills under a limit."""
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            compilation.resource_usage(ms.local_static_kernel)
        # nothing is compiled in the simulator: the limited kernel runs the same Python source, once built
        assert ms.register_limited(24) is ms.register_limited(24)
        assert gpucourse.source.source_of(ms.register_limited(24)) == gpucourse.source.source_of(ms.register_hungry_kernel)
        gpu_only("the compiler's resource reports (refused in the simulator, checked)")
    n = 256  # launch each kernel once first: a report reads a compiled kernel, and no other test may have compiled it here
    values, hungry = gpucourse.to_device(np.ones(n, np.float32)), gpucourse.to_device(np.ones((ms.HUNGRY, n), np.float32))
    for variant in ("static", "large"):
        ms.local_memory_demo(poisoned_device(n), values, variant, 1)
    for kernel in (None, ms.register_limited(24)):
        ms.register_hungry(poisoned_device(n), hungry, 1, kernel)
    (static,) = compilation.resource_usage(ms.local_static_kernel)
    (large,) = compilation.resource_usage(ms.local_large_kernel)
    assert static.local_bytes == 0
    assert large.local_bytes >= 4 * ms.LARGE_LOCAL
    (free,) = compilation.resource_usage(ms.register_hungry_kernel)
    (limited,) = compilation.resource_usage(ms.register_limited(24))
    assert limited.registers <= 24 < free.registers
    assert free.local_bytes == 0 and limited.local_bytes > 0  # what did not fit in 24 registers spilled
    x = gpucourse.to_device(np.ones(64, np.float32))
    ms.table_reads(poisoned_device(64), x, 1, 2, "constant")  # compile it, so that its PTX exists
    assert compilation.count_matches(compilation.ptx(ms.constant_table_kernel), r"ld\.const") > 0


@pytest.mark.parametrize("distinct", [1, 7, 32])
@pytest.mark.parametrize("space", ms.TABLE_SPACES)
def test_table_reads(distinct, space):
    n, reads = gpucourse.problem_size("ch3_test_elements"), gpucourse.problem_size("ch3_constant")[1]
    x = gpucourse.random_array(n, np.float32, seed=40)
    out = poisoned_device(n)
    ms.table_reads(out, gpucourse.to_device(x), distinct, reads, space, gpucourse.to_device(ms.COEFFICIENTS), TPB)
    np.testing.assert_allclose(gpucourse.to_host(out), ms.table_reads_reference(x, distinct, reads, TPB), rtol=1e-5 * reads, atol=1e-5 * reads)


def test_table_reads_arguments():
    out = poisoned_device(64)
    with pytest.raises(ValueError, match="distinct"):
        ms.table_reads(out, out, 33, 4)
    with pytest.raises(ValueError, match="reads"):
        ms.table_reads(out, out, 1, 0)
    with pytest.raises(LaunchConfigError, match="multiple of 32"):
        ms.table_reads(out, out, 1, 4, threads_per_block=48)
    with pytest.raises(ValueError, match="needs table"):
        ms.table_reads(out, out, 1, 4, "global")
    with pytest.raises(ValueError, match="space"):
        ms.table_reads(out, out, 1, 4, "texture")


@pytest.mark.parametrize("distinct", [1, 32])
def test_cuda_c_constant_table(distinct):
    n, reads = gpucourse.problem_size("ch3_test_elements"), gpucourse.problem_size("ch3_constant")[1]
    x = gpucourse.random_array(n, np.float32, seed=41)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="__constant__"):
            ms.cuda_c_table_reads(np.zeros(n, np.float32), x, distinct, reads)
        gpu_only("CUDA C __constant__ memory (refused in the simulator, checked)")
    import cupy

    out = cupy.full(n, cupy.nan, dtype=cupy.float32)
    ms.cuda_c_table_reads(out, cupy.asarray(x), distinct, reads, TPB)
    np.testing.assert_allclose(out.get(), ms.table_reads_reference(x, distinct, reads, TPB), rtol=1e-5 * reads, atol=1e-5 * reads)


def test_bank_conflict_degree_by_hand():
    assert [ms.bank_conflict_degree(s) for s in (0, 1, 2, 3, 4, 8, 16, 32, 33)] == [1, 1, 2, 1, 4, 8, 16, 32, 1]


@pytest.mark.parametrize("stride", [1, 2, 32, 33])
def test_shared_stride_reads(stride):
    n, reads = gpucourse.problem_size("ch3_test_elements"), gpucourse.problem_size("ch3_banks")[1]
    table = gpucourse.random_array(ms.SHARED_WORDS, np.float32, seed=50)
    out = poisoned_device(n)
    ms.shared_stride_reads(out, gpucourse.to_device(table), stride, reads, TPB)
    np.testing.assert_allclose(gpucourse.to_host(out), ms.shared_stride_reference(table, n, stride, reads, TPB),
                               rtol=1e-5 * reads, atol=1e-5 * reads)
    with pytest.raises(LaunchConfigError, match="multiple of 32"):
        ms.shared_stride_reads(out, gpucourse.to_device(table), stride, reads, 40)
    with pytest.raises(ArrayArgumentError, match="shape"):
        ms.shared_stride_reads(out, out, stride, reads)


@pytest.mark.parametrize("padded", [False, True])
def test_tile_row_sums(padded):
    rows = gpucourse.problem_size("ch3_test_elements") // 32 * 32
    x = gpucourse.random_array((rows, ms.TILE), np.float32, seed=60)
    out = poisoned_device(rows)
    ms.tile_row_sums(out, gpucourse.to_device(x), padded)
    np.testing.assert_allclose(gpucourse.to_host(out), x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    with pytest.raises(ArrayArgumentError, match="multiple of 32 rows"):
        ms.tile_row_sums(out, gpucourse.to_device(x[:-1]), padded)
    assert ms.tile_bytes(rows) == 4 * rows * 33


@pytest.mark.parametrize("dynamic, n", [(False, ms.REVERSE_STATIC), (True, ms.REVERSE_STATIC), (True, 200)])
def test_reversal_through_shared_memory(dynamic, n):
    host = gpucourse.random_array(n, np.int32, seed=n, low=-1000, high=1000)
    d = gpucourse.to_device(host)
    ms.reverse(d, dynamic=dynamic)
    assert np.array_equal(gpucourse.to_host(d), host[::-1])


def test_reversal_refuses_what_one_block_cannot_hold(device):
    with pytest.raises(gpucourse.ArrayArgumentError, match="dynamic=True"):
        ms.reverse(gpucourse.to_device(np.zeros(10, np.int32)))
    with pytest.raises(gpucourse.LaunchConfigError, match="threads per block"):
        ms.reverse(gpucourse.to_device(np.zeros(device.max_threads_per_block + 1, np.int32)), dynamic=True)
    with pytest.raises(gpucourse.ArrayArgumentError, match="int32"):
        ms.reverse(gpucourse.to_device(np.zeros(64, np.float32)))
