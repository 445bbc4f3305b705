"""Host-device transfers: pinned and pageable copies, batching, and the book's sequential and staged versions."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import gpucourse
from gpucourse import book, mode
from gpucourse.errors import ArrayArgumentError, LaunchConfigError
from gpucourse.kernels import transfers

REPEAT = 2


@pytest.mark.parametrize("pinned", [False, True])
def test_round_trip_through_the_device(pinned):
    n = gpucourse.problem_size("ch3_bandwidth_test") // 4 + 3
    data = gpucourse.random_array(n, np.float32, seed=1)
    host = transfers.host_array(n, np.float32, pinned)
    host[:] = data
    device = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    stream = cuda.stream() if pinned else None
    transfers.transfer_call("H2D", host, device, stream)()
    host[:] = np.nan
    transfers.transfer_call("D2H", host, device, stream)()
    if stream is not None:
        stream.synchronize()
    np.testing.assert_array_equal(host, data)


def test_transfer_arguments_are_checked():
    device = gpucourse.to_device(np.zeros(8, np.float32))
    with pytest.raises(ValueError, match="direction"):
        transfers.transfer_call("H2H", np.zeros(8, np.float32), device)
    with pytest.raises(ArrayArgumentError, match="equal sizes"):
        transfers.transfer_call("H2D", np.zeros(9, np.float32), device)
    with pytest.raises(ArrayArgumentError, match="float64"):
        transfers.transfer_call("H2D", np.zeros(8, np.float64), device)
    with pytest.raises(ArrayArgumentError, match="at least one"):
        transfers.host_array(0)


def test_measure_transfer_and_the_book_table():
    size = gpucourse.problem_size("ch3_bandwidth_test")
    measurements = transfers.transfer_sweep([size], repeat=REPEAT)
    assert {(m.memory, m.direction) for m in measurements} == {(p, d) for p in ("pinned", "pageable") for d in ("H2D", "D2H")}
    assert all(m.nbytes == size and m.gbs > 0 for m in measurements)
    if mode.on_gpu():
        pinned = next(m for m in measurements if m.pinned)
        pageable = next(m for m in measurements if not m.pinned)
        assert pinned.timing.gated and not pageable.timing.gated  # the pageable copy makes the host wait
    table = transfers.transfer_table(measurements, "this GPU")
    assert len(table.rows) == 4
    assert table.rows[0][1] == book.figure("ch3_bwtest_pageable_H2D_E5540").number
    assert table.rows[3][2] == book.figure("ch3_bwtest_pinned_D2H_E52667").number
    assert table.rows[2][4].endswith("x") and table.rows[0][4] is None


def test_piecewise_copy_covers_everything():
    total, pieces = gpucourse.problem_size("ch3_batching")
    n = total // 4
    host = transfers.host_array(n, np.float32, pinned=True)
    host[:] = gpucourse.random_array(n, np.float32, seed=2)
    device = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    stream = cuda.stream()
    transfers.piecewise_copy_call(host, device, pieces, stream)()
    stream.synchronize()
    np.testing.assert_array_equal(gpucourse.to_host(device), host)
    with pytest.raises(ValueError, match="evenly"):
        transfers.piecewise_copy_call(host, device, 3 if n % 3 else 7, stream)


def test_batching_result():
    total, pieces = gpucourse.problem_size("ch3_batching")
    result = transfers.measure_batching(total, pieces, repeat=REPEAT)
    assert result.pieces == pieces and result.nbytes == total
    assert result.whole.median_ms > 0 and result.in_pieces.median_ms > 0
    if mode.on_gpu():
        assert result.slowdown > 1 and result.overhead_per_copy_us > 0  # many small copies cost more than one


@pytest.mark.parametrize("offset, repeats", [(0, 1), (1000, 3)])
def test_unit_kernel_adds_one(offset, repeats):
    n = gpucourse.problem_size("ch3_test_elements")
    start = gpucourse.random_array(n, np.float32, seed=3)
    a = gpucourse.to_device(start)
    transfers.unit_kernel_launch(a, offset, repeats, gpucourse.problem_size("ch3_threads_per_block"))
    angles = (np.arange(n)[:, None] + offset + np.arange(repeats)[None, :]).astype(np.float32).astype(np.float64)
    reference = start + np.mean(np.sqrt(np.sin(angles) ** 2 + np.cos(angles) ** 2), axis=1)
    np.testing.assert_allclose(gpucourse.to_host(a), reference, rtol=0, atol=4 * np.finfo(np.float32).eps * 2)
    with pytest.raises(LaunchConfigError, match="repeats"):
        transfers.unit_kernel_launch(a, 0, 0, 64)
    with pytest.raises(ArrayArgumentError, match="float32"):
        transfers.unit_kernel_launch(gpucourse.to_device(np.zeros(4, np.float64)), 0, 1, 64)


def test_pipeline_arguments():
    with pytest.raises(LaunchConfigError, match="evenly"):
        transfers.make_pipeline(10, 4)
    with pytest.raises(LaunchConfigError, match="repeats"):
        transfers.make_pipeline(16, 4, 64, repeats=0)
    with pytest.raises(LaunchConfigError, match="limit"):
        transfers.make_pipeline(16, 4, 4096)


@pytest.fixture(scope="module")
def pipeline():
    n, streams = gpucourse.problem_size("ch3_test_async")
    return transfers.make_pipeline(n, streams, gpucourse.problem_size("ch3_threads_per_block"))


@pytest.mark.parametrize("schedule", list(transfers.SCHEDULES))
def test_every_schedule_computes_ones(pipeline, schedule):
    pipeline.device.copy_to_device(np.full(pipeline.n, np.nan, np.float32))  # poison the device copy
    error = transfers.check_schedule(pipeline, schedule)
    assert error <= 4 * np.finfo(np.float32).eps  # the book: 1.2e-7 to 2.4e-7 on its GPUs
    assert book.figure("ch3_async_maxerr_K20").number <= 4 * np.finfo(np.float32).eps


def test_timelines_of_the_schedules(pipeline):
    streams = len(pipeline.streams)
    sequential = transfers.record_timeline(pipeline, "sequential")
    assert len(sequential.spans) == 3 and sequential.lanes == ["stream 1"]
    staged = transfers.record_timeline(pipeline, "staged V2")
    assert len(staged.spans) == 3 * streams and len(staged.lanes) == streams
    assert {s.kind for s in staged.spans} == {"H2D", "kernel", "D2H"}
    if mode.on_gpu():
        assert staged.overlap_ms() > 0  # some copy runs beside a kernel or a copy the other way
    else:
        assert staged.simulated and staged.overlap_ms() == 0.0
    with pytest.raises(KeyError, match="schedule"):
        transfers.check_schedule(pipeline, "staged V9")


def test_schedule_times_and_the_book_table(pipeline):
    times = transfers.time_schedules(pipeline, repeat=REPEAT)
    assert list(times) == list(transfers.SCHEDULES)
    table = transfers.async_table(times, "this GPU")
    assert table.rows[0][1] == book.figure("ch3_async_seq_C1060").number
    assert table.rows[1][3] == book.figure("ch3_async_v1_K20").number
    if mode.on_gpu():
        best = min(times[name].median_ms for name in ("staged V1", "staged V2", "staged V3"))
        assert best < times["sequential"].median_ms  # overlap pays
        assert table.rows[0][5] == "1.00x"
    else:
        assert table.rows[0][5] is None and "Simulator" in table.notes[-1]


def test_stage_times_and_balanced_repeats(pipeline):
    stages = transfers.measure_stage_times(pipeline, repeat=REPEAT)
    assert stages.h2d_ms > 0 and stages.kernel_ms_per_repeat > 0 and stages.d2h_ms > 0
    if mode.is_simulator():
        assert stages.balanced_repeats() == 1
    assert transfers.StageTimes(2.0, 0.1, 1.0, False).balanced_repeats() == 20
    assert transfers.StageTimes(2.0, 0.001, 1.0, False).balanced_repeats(largest=64) == 64
    assert transfers.StageTimes(0.01, 1.0, 0.01, False).balanced_repeats() == 1


def test_stream_count_tuner():
    n = gpucourse.problem_size("ch3_test_async")[0]
    counts = tuple(gpucourse.problem_size("ch3_stream_counts")[::3])
    tuner = transfers.stream_count_tuner(n, counts, gpucourse.problem_size("ch3_threads_per_block"), 1, repeat=REPEAT)
    measured = tuner.sweep("streams")
    assert [m.params["streams"] for m in measured] == list(counts)
    assert all(m.gbs > 0 for m in measured)
