"""Execution configuration: copy kernels, dynamic shared memory as an occupancy limiter, ILP, tables."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only

import gpucourse
from gpucourse import book, mode
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import execution as E
from gpucourse.occupancy import api_blocks_per_sm, book_sm_limits, kernel_occupancy

N = gpucourse.problem_size("ch3_copy_test")  # not a multiple of any block size
BLOCK_SIZES = gpucourse.problem_size("ch3_block_sizes")


def fresh(n: int = N, dtype=np.float64):
    host = gpucourse.random_array(n, dtype, seed=n)
    return host, gpucourse.to_device(host), gpucourse.to_device(gpucourse.poisoned(n, dtype))


@pytest.mark.parametrize("threads", BLOCK_SIZES)
def test_copy_with_and_without_the_shared_memory_limiter(threads):
    for shared in (0, E.shared_bytes_for_one_block()):
        host, inp, out = fresh()
        E.copy(out, inp, threads, shared_bytes=shared)
        np.testing.assert_array_equal(gpucourse.to_host(out), host)


@pytest.mark.parametrize("ilp", [1, 2, 4, 8])
def test_copy_ilp(ilp):
    host, inp, out = fresh(dtype=np.float32)
    E.copy_ilp(out, inp, BLOCK_SIZES[0], ilp=ilp, shared_bytes=E.shared_bytes_for_one_block())
    np.testing.assert_array_equal(gpucourse.to_host(out), host)


def test_copy_ilp_shorter_than_one_block():
    host, inp, out = fresh(n=5)
    E.copy_ilp(out, inp, 64, ilp=4)
    np.testing.assert_array_equal(gpucourse.to_host(out), host)


def test_bad_launches_say_what_to_change(device):
    host, inp, out = fresh(n=64)
    limit = E.dynamic_shared_limit()
    with pytest.raises(LaunchConfigError, match=f"at most {limit}"):
        E.copy(out, inp, 32, shared_bytes=limit + 1)
    with pytest.raises(LaunchConfigError, match="non-negative"):
        E.copy(out, inp, 32, shared_bytes=-1)
    with pytest.raises(LaunchConfigError, match="ilp must be"):
        E.copy_ilp(out, inp, 32, ilp=0)
    with pytest.raises(LaunchConfigError, match="limit"):
        E.copy(out, inp, device.max_threads_per_block + 32)
    with pytest.raises(ArrayArgumentError, match="compiled for float64"):
        E.copy(gpucourse.to_device(np.zeros(64, np.float32)), inp)
    with pytest.raises(ArrayArgumentError, match="shape"):
        E.copy_ilp(gpucourse.to_device(np.zeros(65, np.float64)), inp)


def test_shared_limiter_leaves_room_for_one_block():
    assert E.shared_bytes_for_one_block() == int(0.9 * E.dynamic_shared_limit())
    for gpu in E.BOOK_GPUS:
        limits = book_sm_limits(gpu)
        for threads in E.BOOK_BLOCK_SIZES:
            result = E.book_occupancy(gpu, threads, shared_limited=True)
            assert result.blocks_per_sm == 1 and result.limits["shared memory"] == 1
            assert result.fraction == pytest.approx(threads / 32 / limits.max_warps_per_sm)
    for threads in E.BOOK_BLOCK_SIZES:  # the book prints the K20 shared-limited column
        printed = book.figure(f"ch3_occ_copy_dp_smemlimited_occupancy_bs{threads}_K20").number
        assert E.book_occupancy("Tesla K20", threads, shared_limited=True).fraction == pytest.approx(printed, abs=1e-3)


@pytest.mark.parametrize("gpu", E.BOOK_GPUS)
def test_book_table_recomputed(gpu):
    table = E.book_block_size_table(gpu)
    assert [row[0] for row in table.rows] == list(E.BOOK_BLOCK_SIZES)
    for threads, printed, computed, gbs, limited_by in table.rows:
        assert computed == pytest.approx(printed, abs=1e-3), threads
        assert gbs > 0 and limited_by in ("warps", "blocks", "registers")
    assert E.book_figure_or_none("ch3_no_such_figure") is None


def test_occupancy_table_names_the_binding_limit():
    k20 = book_sm_limits("Tesla K20")
    table = E.occupancy_table(32, 8, 0, k20)  # 16 blocks of one warp: a quarter of the K20's 64 warps
    binding = [row for row in table.rows if row[2] == "yes"]
    assert len(binding) == 1 and binding[0][0].startswith("blocks") and binding[0][1] == 16
    assert "occupancy 0.250" in table.notes[0]
    table = E.occupancy_table(256, 64, 0, k20)
    assert [row for row in table.rows if row[2] == "yes"][0][0].startswith("registers")
    with pytest.raises(LaunchConfigError, match="shared memory"):
        E.occupancy_table(256, 8, 64 * 1024, k20)


def test_occupancy_widget_reacts(capsys):
    choices = E.limits_by_name()
    assert list(choices)[-2:] == ["Tesla K20 (book)", "Tesla C2050 (book)"]
    assert len(choices) == (3 if mode.on_gpu() else 2)
    box = E.occupancy_widget({"Tesla C2050 (book)": book_sm_limits("Tesla C2050")})
    gpu, threads, registers, shared, output = box.children
    threads.value = 1024  # one 1024-thread block on a C2050 (1536 threads per SM): occupancy 2/3
    assert "occupancy 0.667" in capsys.readouterr().out
    shared.value = 96  # more than an SM holds: the widget says so instead of failing
    assert "Cannot launch" in capsys.readouterr().out


def test_occupancy_calculator_against_the_cuda_api():
    host, inp, out = fresh(n=4096)
    shared = E.shared_bytes_for_one_block()
    E.copy(out, inp, 128, shared_bytes=shared)
    E.copy_ilp(out, inp, 128, ilp=4, shared_bytes=shared)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            api_blocks_per_sm(E.copy_kernel, 128, shared)
        assert E.occupancy_here(E.copy_kernel, 128) is None
        gpu_only("the CUDA occupancy API to compare the calculator with (refused in the simulator, checked)")
    assert E.occupancy_here(E.copy_kernel, 128, shared).blocks_per_sm == 1
    for kernel in (E.copy_kernel, E.copy_ilp_kernel(4)):
        for threads in E.BOOK_BLOCK_SIZES:
            for dynamic in (0, shared):
                calculated = kernel_occupancy(kernel, threads, dynamic).blocks_per_sm
                assert calculated == api_blocks_per_sm(kernel, threads, dynamic), (kernel, threads, dynamic)
        assert kernel_occupancy(kernel, 1024, shared).blocks_per_sm == 1
