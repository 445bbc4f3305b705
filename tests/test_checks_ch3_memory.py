"""The chapter 3 memory checks: right answers pass, and each usual mistake fails with a message that names it."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32

import gpucourse
from gpucourse import mode
from gpucourse.checks import CheckFailed, ch3_memory
from gpucourse.checks.ch3_memory import Access
from gpucourse.kernels import transfers

# --- Exercise 3.1 ------------------------------------------------------------------------------


@cuda.jit
def scale_coalesced(out, a, factor):
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[row, col] = a[row, col] * factor


@cuda.jit
def scale_strided(out, a, factor):
    row, col = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[row, col] = a[row, col] * factor


@cuda.jit
def scale_plus(out, a, factor):
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[row, col] = a[row, col] + factor


def coalesced(out, a, factor):
    rows, cols = a.shape
    scale_coalesced[((cols + 31) // 32, (rows + 7) // 8), (32, 8)](out, a, factor)


def strided(out, a, factor):
    rows, cols = a.shape
    scale_strided[((rows + 31) // 32, (cols + 7) // 8), (32, 8)](out, a, factor)


def rounded_down(out, a, factor):
    rows, cols = a.shape
    scale_coalesced[(cols // 32, rows // 8), (32, 8)](out, a, factor)


def plus(out, a, factor):
    rows, cols = a.shape
    scale_plus[((cols + 31) // 32, (rows + 7) // 8), (32, 8)](out, a, factor)


def test_scale_matrix_right_answer_passes(capsys):
    ch3_memory.check_scale_matrix(coalesced)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 3.1")


def test_scale_matrix_strided_answer_fails():
    with pytest.raises(CheckFailed, match="not coalesced.*elements apart"):
        ch3_memory.check_scale_matrix(strided)


def test_scale_matrix_wrong_cover_and_values():
    with pytest.raises(CheckFailed, match="never written.*columns with x"):
        ch3_memory.check_scale_matrix(rounded_down)
    with pytest.raises(CheckFailed, match="wrong values"):
        ch3_memory.check_scale_matrix(plus)


# --- Exercise 3.2 ------------------------------------------------------------------------------


def test_sectors_per_warp():
    ch3_memory.check_sectors_per_warp(lambda offset, stride, itemsize: len({((lane * stride + offset) * itemsize) // 32 for lane in range(32)}))
    with pytest.raises(CheckFailed, match="returned .*expected"):
        ch3_memory.check_sectors_per_warp(lambda offset, stride, itemsize: len({(lane * stride + offset) // 8 for lane in range(32)}))
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        ch3_memory.check_sectors_per_warp(lambda offset, stride, itemsize: 1 // 0)


# --- Exercise 3.3 ------------------------------------------------------------------------------

WIDE = 64
PADDED = WIDE + 1


@cuda.jit
def wide_conflicted_kernel(out, x):
    tile = cuda.shared.array((32, WIDE), float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = tile[t, 0]
    for k in range(1, WIDE):
        total += tile[t, k]
    out[base + t] = total


@cuda.jit
def wide_padded_kernel(out, x):
    tile = cuda.shared.array((32, PADDED), float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = tile[t, 0]
    for k in range(1, WIDE):
        total += tile[t, k]
    out[base + t] = total


@cuda.jit
def wide_half_kernel(out, x):
    tile = cuda.shared.array((32, PADDED), float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = tile[t, 0]
    for k in range(1, WIDE // 2):  # forgets half the row
        total += tile[t, k]
    out[base + t] = total


def wide_padded(out, x):
    wide_padded_kernel[x.shape[0] // 32, 32](out, x)


def wide_conflicted(out, x):
    wide_conflicted_kernel[x.shape[0] // 32, 32](out, x)


def wide_half(out, x):
    wide_half_kernel[x.shape[0] // 32, 32](out, x)


def test_wide_row_sums(capsys):
    ch3_memory.check_wide_row_sums(wide_padded)
    assert "1.0 pass(es)" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="passes per request"):
        ch3_memory.check_wide_row_sums(wide_conflicted)
    with pytest.raises(CheckFailed, match="wrong values"):
        ch3_memory.check_wide_row_sums(wide_half)


# --- Exercise 3.4 ------------------------------------------------------------------------------


def overlapped_right(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, stream)
        device_part.copy_to_host(host_part, stream=stream)


def overlapped_waiting(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, stream)
        device_part.copy_to_host(host_part, stream=stream)
        stream.synchronize()  # waits for each chunk: nothing overlaps
        cuda.synchronize()


def overlapped_no_copy_back(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, stream)


def overlapped_first_chunk_only(p):
    index, host_part, device_part = p.chunks[0]
    device_part.copy_to_device(host_part, stream=p.streams[0])
    transfers.unit_kernel_launch(device_part, 0, p.repeats, p.threads_per_block, p.streams[0])
    device_part.copy_to_host(host_part, stream=p.streams[0])


def test_overlapped(capsys):
    ch3_memory.check_overlapped(overlapped_right)
    assert "Exercise 3.4" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="still all zeros"):
        ch3_memory.check_overlapped(overlapped_no_copy_back)
    with pytest.raises(CheckFailed, match="wrong values"):
        ch3_memory.check_overlapped(overlapped_first_chunk_only)
    if mode.on_gpu():
        with pytest.raises(CheckFailed, match="do not overlap"):
            ch3_memory.check_overlapped(overlapped_waiting)
    else:  # the simulator cannot see overlap: a waiting version gives right values, and the check says what it cannot tell
        ch3_memory.check_overlapped(overlapped_waiting)
        assert "can only be checked on a GPU" in capsys.readouterr().out


# --- The access model the checks use ------------------------------------------------------------


def access(element: int, lane: int, array: str = "a", sequence: int = 0) -> Access:
    return Access(array, (0, 0, 0), (lane, 0, 0), (32, 1, 1), element, False, sequence)


def test_sector_and_bank_counts_by_hand():
    contiguous = [access(lane, lane) for lane in range(32)]
    assert ch3_memory.sectors_per_request(contiguous, "a", 4) == 4.0
    strided_accesses = [access(33 * lane, lane) for lane in range(32)]
    assert ch3_memory.sectors_per_request(strided_accesses, "a", 4) == 32.0
    column = [access(32 * lane, lane, "shared") for lane in range(32)]
    assert ch3_memory.shared_passes_per_request(column) == 32.0
    padded = [access(33 * lane, lane, "shared") for lane in range(32)]
    assert ch3_memory.shared_passes_per_request(padded) == 1.0
    broadcast = [access(5, lane, "shared") for lane in range(32)]
    assert ch3_memory.shared_passes_per_request(broadcast) == 1.0  # one word for every lane: no conflict
    assert ch3_memory.sectors_per_request([], "a", 4) == 0.0


def test_tracing_is_simulator_only():
    if mode.on_gpu():
        with pytest.raises(RuntimeError, match="simulator"):
            with ch3_memory.trace_accesses():
                pass
        return
    host = gpucourse.random_array((8, 40), np.float32, seed=1)
    out = ch3_memory.traced_device_array(np.zeros((8, 40), np.float32), "out")
    with ch3_memory.trace_accesses(shared=False) as log:
        coalesced(out, ch3_memory.traced_device_array(host, "a"), np.float32(2))
    accesses = log.accesses()
    reads = [a for a in accesses if a.array == "a" and not a.write]
    writes = [a for a in accesses if a.array == "out" and a.write]
    assert len(reads) == len(writes) == host.size  # every element read once and written once
    np.testing.assert_array_equal(out.copy_to_host(), host * np.float32(2))


def test_replay_in_a_simulator_process():
    """What the GPU checks rely on: the student's code, sent to a simulator process, traced there."""
    host = gpucourse.random_array((40, 40), np.float32, seed=2)
    arguments = [("traced", "out", np.zeros((40, 40), np.float32)), ("traced", "a", host), ("value", "factor", np.float32(2))]
    bad = ch3_memory.replayed_accesses(strided, arguments, shared=False)  # the good pattern is replayed by the check tests on a GPU
    assert len([a for a in bad if a.array == "a"]) == host.size
    assert ch3_memory.sectors_per_request(bad, "a", 4) >= 16
    shared = ch3_memory.replayed_accesses(wide_conflicted, [("traced", "out", np.zeros(32, np.float32)),
                                                            ("traced", "x", np.ones((32, WIDE), np.float32))], shared=True)
    assert ch3_memory.shared_passes_per_request(shared) == 32.0

    def closure_launcher(out, a, factor):  # uses `host` from the enclosing test: cannot travel
        scale_coalesced[(2, 1), (32, 8)](out, a + host, factor)

    with pytest.raises(ch3_memory.ReplayError, match="closure"):
        ch3_memory.replayed_accesses(closure_launcher, arguments, shared=False)
