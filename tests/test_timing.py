"""The timing helper: arithmetic checked by hand, real kernels timed, and the launch-bound case named."""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse import mode
from gpucourse.kernels import intro
from gpucourse.timing import Timing, benchmark, effective_bandwidth_gbs


def test_effective_bandwidth_by_hand():
    # The book's base kernel on a K20: 2 arrays of 8 Mi floats... here simply 2e9 bytes in 10 ms = 200 GB/s.
    assert effective_bandwidth_gbs(2e9, 10.0) == pytest.approx(200.0)
    assert effective_bandwidth_gbs(4 * 2**20 * 2, 0.5) == pytest.approx(16.777216)
    with pytest.raises(ValueError):
        effective_bandwidth_gbs(1, 0)


def test_timing_statistics_and_launch_bound():
    timing = Timing((3.0, 1.0, 2.0), calls_per_sample=10, clock="CUDA events", host_ms_per_call=2.5, gated=True)
    assert (timing.median_ms, timing.min_ms, timing.max_ms) == (2.0, 1.0, 3.0)
    assert timing.launch_bound and "launch-bound" in str(timing)
    assert timing.bandwidth_gbs(2e6) == pytest.approx(1.0)
    quick_host = Timing((3.0,), 1, "CUDA events", host_ms_per_call=0.05)
    assert not quick_host.launch_bound
    simulated = Timing((3.0,), 1, "simulator wall clock", host_ms_per_call=9.0)
    assert simulated.simulated and not simulated.launch_bound and "not GPU time" in str(simulated)


def test_benchmark_a_kernel():
    n = gpucourse.problem_size("increment")
    a = gpucourse.to_device(np.zeros(n, np.float32))
    timing = benchmark(lambda: intro.increment(a, 1.0), repeat=3)
    assert len(timing.samples_ms) == 3 and all(s > 0 for s in timing.samples_ms)
    assert timing.min_ms <= timing.median_ms <= timing.max_ms
    b = gpucourse.to_device(np.zeros(n, np.float32))
    thrice = benchmark(lambda: [intro.increment(b, 1.0) for _ in range(3)], repeat=3)  # measured in the same run
    assert thrice.median_ms > 1.5 * timing.median_ms, (thrice.median_ms, timing.median_ms)
    # samples + warm-up + host-cost calls + first sample, and on a GPU 5 samples of plain back-to-back calls
    calls = 3 * timing.calls_per_sample + max(1, 2) + 3 + 1 + 5 * timing.calls_per_sample
    result = gpucourse.to_host(a)
    assert result.min() == result.max() == pytest.approx(calls if mode.on_gpu() else 3)  # the simulator: no warm-up
    if mode.on_gpu():
        assert timing.gated and timing.clock.startswith("CUDA events")
        assert timing.host_ms_per_call > 0
    else:
        assert timing.simulated


def test_benchmark_of_a_synchronizing_call_is_not_gated():
    a = gpucourse.to_device(np.zeros(1024, np.float32))

    def increment_and_wait():
        intro.increment(a, 1.0)
        gpucourse.synchronize()

    timing = benchmark(increment_and_wait, repeat=2, calls_per_sample=2)
    if mode.on_gpu():
        assert not timing.gated and "one call at a time" in timing.clock
        # the result names the call that waits, and says what that does to a loop
        assert "synchronize" in timing.waits_at and "gpucourse.synchronize()" in timing.waits_at, timing.waits_at
        assert "waits for the GPU" in str(timing) and timing.back_to_back_ms == timing.median_ms
    else:
        assert timing.waits_at is None
    assert len(timing.samples_ms) == 2


def test_back_to_back_figure_and_its_verdict():
    gpu = Timing((0.05,), 40, "CUDA events", host_ms_per_call=0.09, gated=True, back_to_back_ms=0.092)
    assert gpu.host_limited and gpu.back_to_back_slowdown == pytest.approx(1.84)
    assert "1.8x" in gpu.verdict() and "90 us to queue one" in str(gpu) and "plan" in gpu.verdict()
    assert "the median of 1 samples of 40 calls" in gpu.verdict()  # the host's cost says how many calls it was measured on
    disagreeing = Timing((0.05,), 40, "CUDA events", host_ms_per_call=0.2, gated=True, back_to_back_ms=0.092)
    assert "to queue one" not in disagreeing.verdict() and "1.8x" in disagreeing.verdict()  # 200 us a call, yet 92 us apart: not said
    assert gpu.back_to_back_gbs(1e6) == pytest.approx(1e6 / 0.092e-3 / 1e9)
    keeps_up = Timing((0.05,), 40, "CUDA events", host_ms_per_call=0.01, gated=True, back_to_back_ms=0.055)
    assert not keeps_up.host_limited and keeps_up.verdict() == ""
    simulated = Timing((3.0,), 1, "simulator wall clock", back_to_back_ms=9.0)
    assert simulated.back_to_back_slowdown is None and not simulated.host_limited


def test_benchmark_reports_both_figures():
    a = gpucourse.to_device(np.zeros(gpucourse.problem_size("increment"), np.float32))
    timing = benchmark(lambda: intro.increment(a, 1.0), repeat=3)
    if mode.on_gpu():
        # a planned launch costs the host far less than this kernel runs: the loop keeps pace with the GPU
        assert timing.back_to_back_ms is not None and timing.back_to_back_slowdown < 1.2, timing
        assert not timing.host_limited and timing.waits_at is None
    else:
        assert timing.back_to_back_ms is None and timing.verdict() == ""


def test_benchmark_rejects_bad_arguments():
    with pytest.raises(ValueError):
        benchmark(lambda: None, repeat=0)


def test_launch_bound_kernel_is_named():
    tiny = gpucourse.to_device(np.zeros(32, np.float32))
    timing = benchmark(lambda: intro.increment(tiny, 1.0), repeat=5)
    if mode.on_gpu():
        assert timing.launch_bound, timing  # Numba needs tens of us to issue a launch that runs in a few
    else:  # the simulator has no launch cost to set against a GPU time: it never claims launch-bound
        assert timing.simulated and not timing.launch_bound


def test_ceilings():
    ceilings = gpucourse.bandwidth_ceilings()
    assert ceilings.copy_gbs > 0 and ceilings.copy_bytes > 0
    assert gpucourse.bandwidth_ceilings() is ceilings  # measured once per device
    if mode.on_gpu():
        assert not ceilings.simulated
        assert 0.3 * ceilings.theoretical_gbs < ceilings.copy_gbs < 1.05 * ceilings.theoretical_gbs
        assert "measured device-to-device copy" in str(ceilings)
    else:
        assert ceilings.simulated and ceilings.theoretical_gbs is None and "not a GPU figure" in str(ceilings)
    assert ceilings.fraction_of_copy(ceilings.copy_gbs) == pytest.approx(1.0)
