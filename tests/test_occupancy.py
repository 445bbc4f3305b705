"""The occupancy calculator reproduces the book's tables and, on a GPU, the CUDA occupancy API."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only

import gpucourse
from gpucourse import book, mode
from gpucourse.errors import GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import intro
from gpucourse.occupancy import api_blocks_per_sm, book_sm_limits, kernel_occupancy, occupancy, sm_limits

K20, C2050 = book_sm_limits("Tesla K20"), book_sm_limits("Tesla C2050")


def test_book_limits_from_appendix_a():
    assert (K20.registers_per_sm, K20.max_warps_per_sm, K20.max_blocks_per_sm, K20.shared_per_sm) == (65536, 64, 16, 49152)
    assert (C2050.registers_per_sm, C2050.max_warps_per_sm, C2050.max_blocks_per_sm) == (32768, 48, 8)
    with pytest.raises(KeyError):
        book_sm_limits("Tesla X9000")


@pytest.mark.parametrize("threads", [32, 64, 128, 256, 512, 1024])
@pytest.mark.parametrize("gpu, limits", [("K20", K20), ("C2050", C2050)])
def test_book_copy_kernel_occupancy_table(threads, gpu, limits):
    printed = book.figure(f"ch3_occ_copy_dp_occupancy_bs{threads}_{gpu}").number
    assert occupancy(threads, registers_per_thread=8, limits=limits).fraction == pytest.approx(printed, abs=1e-3)


@pytest.mark.parametrize("threads", [32, 64, 128, 256, 512, 1024])
def test_book_shared_memory_limited_table(threads):
    # The book requests enough dynamic shared memory that one block fits per SM.
    printed = book.figure(f"ch3_occ_copy_dp_smemlimited_occupancy_bs{threads}_K20").number
    result = occupancy(threads, registers_per_thread=8, shared_bytes_per_block=40 * 1024, limits=K20)
    assert result.blocks_per_sm == 1 and result.limited_by == "shared memory"
    assert result.fraction == pytest.approx(printed, abs=1e-3)


def test_book_lpencils_occupancy():
    tile_bytes = 32 * (64 + 8) * 4  # lPencils = 32 columns, 64 + 8 halo rows of float32
    assert occupancy(256, 23, tile_bytes, K20).fraction == pytest.approx(book.figure("ch6_deriv_y_lpencils_occ_K20").number)
    assert occupancy(256, 20, tile_bytes, C2050).fraction == pytest.approx(book.figure("art000_lpencils_occupancy").number, abs=0.01)


def test_register_limit():
    result = occupancy(256, 128, limits=K20)
    assert result.limited_by == "registers" and result.blocks_per_sm == 2
    assert book.figure("ch6_deriv_x_regs_limit_full_occ_K20").number == K20.registers_per_sm / (K20.max_warps_per_sm * 32)
    assert occupancy(256, 32, limits=K20).fraction == 1.0 and occupancy(256, 33, limits=K20).fraction < 1.0


def test_bad_requests():
    with pytest.raises(LaunchConfigError):
        occupancy(0, 8, limits=K20)
    with pytest.raises(LaunchConfigError, match="shared memory"):
        occupancy(128, 8, 64 * 1024, limits=K20)


def test_live_device_against_the_cuda_api():
    a = gpucourse.to_device(np.zeros(1024, np.float32))
    intro.increment(a, 1.0)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            sm_limits()
        with pytest.raises(GPUOnlyFeature):
            api_blocks_per_sm(intro.increment_kernel, 256)
        gpu_only("the CUDA occupancy API (refused in the simulator, checked)")
    for threads in (32, 64, 128, 256, 512, 1024):
        assert kernel_occupancy(intro.increment_kernel, threads).blocks_per_sm == api_blocks_per_sm(intro.increment_kernel, threads)
