"""Chapter 2 kernels against NumPy references (outputs poisoned first), their arithmetic by hand, and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse import book, mode
from gpucourse.errors import ArrayArgumentError, LaunchConfigError
from gpucourse.kernels import metrics

TPB = gpucourse.problem_size("ch2_threads_per_block")


def odd_length() -> int:
    return gpucourse.problem_size("ch2_test") + 13  # not a multiple of any block size or of 4


# --- the limiting-factor kernels ---------------------------------------------------------------


@pytest.mark.parametrize("fastmath", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_base_kernel_is_sine(dtype, fastmath):
    n = odd_length()
    b = gpucourse.random_array(n, dtype, seed=1)
    a = gpucourse.to_device(gpucourse.poisoned(n, dtype))
    metrics.base(a, gpucourse.to_device(b), fastmath=fastmath, threads_per_block=TPB)
    got = gpucourse.to_host(a)
    # The hardware sine of fast math is accurate to about 2**-21.4 absolute on [-pi, pi].
    atol = 1e-6 if fastmath and dtype == np.float32 else 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(got, np.sin(b.astype(np.float64)), rtol=0, atol=atol)


def test_memory_kernel_copies():
    n = odd_length()
    b = gpucourse.random_array(n, np.float32, seed=2)
    a = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    metrics.memory_only(a, gpucourse.to_device(b), threads_per_block=TPB)
    np.testing.assert_array_equal(gpucourse.to_host(a), b)


@pytest.mark.parametrize("fastmath", [False, True])
def test_math_kernel_writes_nothing_unless_asked(fastmath):
    n = odd_length()
    initial = gpucourse.random_array(n, np.float32, seed=3)
    a = gpucourse.to_device(initial)
    metrics.math_only(a, fastmath=fastmath, threads_per_block=TPB)  # default threshold: no store
    np.testing.assert_array_equal(gpucourse.to_host(a), initial)
    a = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    metrics.math_only(a, fastmath=fastmath, threads_per_block=TPB, write_threshold=-2.0)  # every sine stored
    atol = 1e-6 if fastmath else 4 * np.finfo(np.float32).eps
    np.testing.assert_allclose(gpucourse.to_host(a), metrics.math_only_reference(n, TPB), rtol=0, atol=atol)


def test_grid_only_kernel_is_the_math_kernel_without_its_sine():
    n = odd_length()
    initial = gpucourse.random_array(n, np.float32, seed=31)
    a = gpucourse.to_device(initial)
    metrics.grid_only(a, threads_per_block=TPB)
    np.testing.assert_array_equal(gpucourse.to_host(a), initial)
    a = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    metrics.grid_only(a, threads_per_block=TPB, write_threshold=-2.0)
    arguments = np.arcsin(metrics.math_only_reference(n, TPB))  # the sine's arguments, in [-0.5, 0.5)
    np.testing.assert_allclose(gpucourse.to_host(a), arguments, rtol=0, atol=1e-6)


def test_limit_kernels_refuse_bad_arguments():
    a32 = gpucourse.to_device(np.zeros(64, np.float32))
    with pytest.raises(ArrayArgumentError, match="float64.*compiled for float32"):
        metrics.base(a32, gpucourse.to_device(np.zeros(64, np.float64)))
    with pytest.raises(ArrayArgumentError, match="shape"):
        metrics.memory_only(a32, gpucourse.to_device(np.zeros(65, np.float32)))
    with pytest.raises(ArrayArgumentError, match="float32 or float64"):
        metrics.math_only(gpucourse.to_device(np.zeros(64, np.int32)))
    with pytest.raises(LaunchConfigError, match="limit"):
        metrics.base(a32, a32, threads_per_block=2048)
    with pytest.raises(ArrayArgumentError, match="must be an array"):
        metrics.memory_only(a32, [0.0] * 64)


def test_time_limit_experiment_runs_all_three():
    n = gpucourse.problem_size("ch2_test")
    b = gpucourse.to_device(gpucourse.random_array(n, np.float32, seed=4))
    a = gpucourse.to_device(np.zeros(n, np.float32))
    times = metrics.time_limit_experiment(a, b, fastmath=True, threads_per_block=TPB, repeat=1, warmup=0)
    assert times.n == n and times.bytes_moved == 8 * n
    assert all(t.median_ms > 0 for t in (times.base, times.memory, times.math))
    assert times.classification.label in ("memory-bound", "math-bound", "latency-bound")
    assert times.base_gbs == pytest.approx(8 * n / (times.base.median_ms * 1e-3) / 1e9)
    np.testing.assert_array_equal(gpucourse.to_host(a), gpucourse.to_host(b))  # the memory kernel ran last on a


# --- classification by hand and against the book's conclusions -----------------------------------


def test_classify_by_hand():
    memory = metrics.classify_bound(100.0, 95.0, 30.0)
    assert memory.label == "memory-bound" and memory.memory_share == pytest.approx(0.95)
    assert memory.overlap == pytest.approx(25.0 / 30.0)  # 95 + 30 - 100 of the 30 ms of math are hidden
    assert metrics.classify_bound(100.0, 40.0, 90.0).label == "math-bound"
    latency = metrics.classify_bound(100.0, 50.0, 45.0)
    assert latency.label == "latency-bound" and latency.overlap == 0.0 and "neither" in str(latency)
    with pytest.raises(ValueError):
        metrics.classify_bound(0.0, 1.0, 1.0)


def test_the_pace_checks_the_books_rule_against_the_empty_grid_and_the_copy():
    """Notebook 2.2's verdict: the H100 run of the issue (base 225 us, memory 178, math 159 = the empty grid's, memory at half the
    copy) reads memory-bound by the book's rule and is latency-bound; each sentence names every time it rests on."""
    from gpucourse.timing import Timing

    def limit(base_us, memory_us, math_us, n=2**24):
        timing = {k: Timing((v / 1e3,), 1, "CUDA events") for k, v in (("base", base_us), ("memory", memory_us), ("math", math_us))}
        return metrics.LimitTimes(False, n, 4, **timing)

    h100 = limit(225.0, 178.0, 159.0)
    copy_gbs = h100.memory_gbs / 0.5  # the memory kernel at half the copy
    assert metrics.classify_bound(225.0, 178.0, 159.0).label == "memory-bound"
    pace = metrics.pace_of(h100, 0.159, copy_gbs)
    assert pace.label == "latency-bound" and "reads memory-bound" in pace.reason
    assert all(f"{v} us" in pace.reason.replace("µs", "us") for v in (159, 178, 225)) and "50% of the copy" in pace.reason
    fast_memory = limit(100.0, 95.0, 30.0)
    assert metrics.pace_of(fast_memory, 0.02, fast_memory.memory_gbs / 0.95).label == "memory-bound"
    assert metrics.pace_of(fast_memory, 0.02, fast_memory.memory_gbs / 0.5).label == "latency-bound"
    math_heavy = limit(100.0, 40.0, 90.0)
    assert metrics.pace_of(math_heavy, 0.01, math_heavy.memory_gbs).label == "math-bound"  # the sine's own 80 us
    assert metrics.pace_of(math_heavy, 0.085, math_heavy.memory_gbs).label == "latency-bound"  # its time is starting threads


@pytest.mark.parametrize("gpu, fastmath, expected", [
    ("C2050", False, "math-bound"),    # "the limiting factor ... is the math operations"
    ("C2050", True, "memory-bound"),   # "The base kernel is now memory bound"
    ("K20", False, "memory-bound"),    # "the base kernel is more memory bound on the K20"
    ("K20", True, "memory-bound"),     # "with the fastmath option, the base kernel is memory bound"
])
def test_classification_of_the_books_runs(gpu, fastmath, expected):
    t = metrics.book_limit_times(gpu, fastmath)
    assert metrics.classify_bound(t["base"], t["memory"], t["math"]).label == expected


def test_book_shares_match_the_printed_percentages():
    t = metrics.book_limit_times("C2050", False)
    c = metrics.classify_bound(t["base"], t["memory"], t["math"])
    # The book truncates: 784.384 / 850.912 = 92.2% and 625.920 / 850.912 = 73.6% print as 92% and 73%.
    assert int(100 * c.math_share) == book.figure("ch2_limit_math_pct_of_base_C2050").number
    assert int(100 * c.memory_share) == book.figure("ch2_limit_mem_pct_of_base_C2050").number


def test_book_effective_bandwidth_recomputed():
    # §2.3.2: 8 * 1024**2 floats read and written in the base kernel's fast-math time.
    for gpu in ("C2050", "K20"):
        us = metrics.book_limit_times(gpu, True)["base"]
        gbs = gpucourse.effective_bandwidth_gbs(metrics.BOOK_LIMIT_N * 4 * 2, us * 1e-3)
        assert round(gbs) == pytest.approx(book.figure(f"ch2_effbw_base_fastmath_{gpu}").number, abs=1)


# --- copies -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("elements_per_thread", [1, 2, 4, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_copy_ilp(dtype, elements_per_thread):
    n = odd_length()
    inp = gpucourse.random_array(n, dtype, seed=5)
    out = gpucourse.to_device(gpucourse.poisoned(n, dtype))
    metrics.copy_ilp(out, gpucourse.to_device(inp), elements_per_thread=elements_per_thread, threads_per_block=32)
    np.testing.assert_array_equal(gpucourse.to_host(out), inp)


def test_copy_one_per_thread():
    n = odd_length()
    inp = gpucourse.random_array(n, np.float32, seed=6)
    out = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    metrics.copy(out, gpucourse.to_device(inp), threads_per_block=TPB)
    np.testing.assert_array_equal(gpucourse.to_host(out), inp)


@pytest.mark.parametrize("extra", [0, 1, 2, 3])
@pytest.mark.parametrize("elements_per_thread", [1, 2])
def test_copy_wide_any_length(extra, elements_per_thread):
    n = gpucourse.problem_size("ch2_test") + extra  # 0 to 3 float32 past the last 16-byte word
    inp = gpucourse.random_array(n, np.float32, seed=7)
    out = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    metrics.copy_wide(out, gpucourse.to_device(inp), threads_per_block=32, elements_per_thread=elements_per_thread)
    np.testing.assert_array_equal(gpucourse.to_host(out), inp)


def test_copy_wide_float64_and_tiny():
    for n in (1, 3, 5):
        inp = gpucourse.random_array(n, np.float64, seed=8)
        out = gpucourse.to_device(gpucourse.poisoned(n, np.float64))
        metrics.copy_wide(out, gpucourse.to_device(inp))
        np.testing.assert_array_equal(gpucourse.to_host(out), inp)
    assert metrics.wide_split(10, 4) == (2, 2) and metrics.wide_split(10, 8) == (5, 0)


def test_copy_wide_refuses_what_it_cannot_read_16_bytes_at_a_time():
    n = 64
    whole = gpucourse.to_device(np.zeros(n + 1, np.float32))
    other = gpucourse.to_device(np.zeros(n, np.float32))
    with pytest.raises(ArrayArgumentError, match="16-byte boundary"):
        metrics.copy_wide(other, whole[1:])  # 4 bytes past an aligned start
    with pytest.raises(ArrayArgumentError, match="do not pack"):
        metrics.wide_split(n, 3)
    with pytest.raises(ArrayArgumentError, match="contiguous"):
        metrics.copy_wide(gpucourse.to_device(np.zeros(32, np.float32)), gpucourse.to_device(np.zeros(64, np.float32))[::2])


def test_copy_variant_and_its_errors():
    n = odd_length()
    inp = gpucourse.random_array(n, np.float32, seed=9)
    for access in metrics.COPY_ACCESS_BYTES:
        out = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
        metrics.copy_variant(out, gpucourse.to_device(inp), 32, 2, access)
        np.testing.assert_array_equal(gpucourse.to_host(out), inp)
    with pytest.raises(LaunchConfigError, match="access_bytes"):
        metrics.copy_variant(out, out, 32, 1, 8)
    with pytest.raises(LaunchConfigError, match="at least 1"):
        metrics.copy_ilp(out, out, elements_per_thread=0)
    with pytest.raises(ArrayArgumentError, match="dtype"):
        metrics.copy_ilp(out, gpucourse.to_device(np.zeros(n, np.float64)))


# --- roofline kernels ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float64, 1e-14)])
def test_intensity_kernel(dtype, rtol):
    _, steps_list = gpucourse.problem_size("ch2_roofline")
    n = odd_length()
    inp = gpucourse.random_array(n, dtype, seed=10)
    for steps in (0, *steps_list[:2]):
        out = gpucourse.to_device(gpucourse.poisoned(n, dtype))
        metrics.intensity(out, gpucourse.to_device(inp), steps, threads_per_block=TPB)
        np.testing.assert_allclose(gpucourse.to_host(out), metrics.intensity_reference(inp, steps), rtol=rtol, atol=rtol)
    assert metrics.intensity_flops(10, 3) == 240 and metrics.intensity_bytes(10, 4) == 80
    with pytest.raises(ValueError, match="steps"):
        metrics.intensity(out, out, -1)


def test_fma_peak_kernel():
    n, steps = odd_length(), gpucourse.problem_size("ch2_test_steps")
    out = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    metrics.fma_peak(out, steps, threads_per_block=TPB)
    # x -> a x + b contracts towards 1 by 0.999 a step; in float32 it may stop anywhere within
    # 0.5 ulp / (1 - a), about 500 ulp = 6e-5, of the exact fixed point.
    np.testing.assert_allclose(gpucourse.to_host(out), metrics.fma_peak_reference(n, steps, TPB), rtol=1e-4)
    assert metrics.fma_peak_flops(1000, 2) == 64000
    with pytest.raises(ArrayArgumentError, match="float32 or float64"):
        metrics.fma_peak(gpucourse.to_device(np.zeros(4, np.int64)), 1)


def test_theoretical_fp32_peak_by_hand():
    # An H100 SXM: 132 SMs x 128 lanes x 2 flops x 1.98 GHz = 66 908 GFLOP/s.
    assert metrics.theoretical_fp32_gflops(132, 1_980_000, (9, 0)) == pytest.approx(66908.16)
    # The book's K20 (Appendix A): 13 SMs x 192 lanes x 2 x 0.706 GHz = 3524 GFLOP/s.
    assert metrics.theoretical_fp32_gflops(13, 706_000, (3, 5)) == pytest.approx(3524.352)
    assert metrics.theoretical_fp32_gflops(10, 1e6, (1, 0)) is None


def test_pointer_chase_follows_the_cycle():
    slots, stride, steps = gpucourse.problem_size("ch2_latency")
    chain = metrics.make_chain(slots, stride, seed=3)
    heads = chain[::stride]
    assert sorted(heads) == list(range(slots))  # a permutation of the slots ...
    seen, slot = set(), 0
    for _ in range(slots):
        seen.add(slot)
        slot = int(chain[slot * stride])
    assert len(seen) == slots and slot == 0  # ... that is one cycle through all of them
    chain_d = gpucourse.to_device(chain)
    position = gpucourse.to_device(np.zeros(1, np.int32))
    metrics.pointer_chase(chain_d, stride, steps, position)
    first = metrics.chase_reference(chain, stride, steps)
    assert int(gpucourse.to_host(position)[0]) == first
    metrics.pointer_chase(chain_d, stride, steps, position)  # a second launch carries on from there
    assert int(gpucourse.to_host(position)[0]) == metrics.chase_reference(chain, stride, steps, start=first)
    with pytest.raises(ArrayArgumentError, match="whole number of slots"):
        metrics.pointer_chase(gpucourse.to_device(chain[:-1]), stride, steps, position)
    with pytest.raises(ArrayArgumentError, match="int32"):
        metrics.pointer_chase(chain_d, stride, steps, gpucourse.to_device(np.zeros(1, np.int64)))
    with pytest.raises(ValueError, match="2 slots"):
        metrics.make_chain(1, 4)


def test_load_latency():
    slots, stride, steps = gpucourse.problem_size("ch2_latency")
    latency = metrics.load_latency(slots, stride, steps, repeat=2)
    assert latency.steps == steps and latency.ns == pytest.approx(latency.timing.median_ms * 1e6 / steps)
    if mode.on_gpu():
        assert 50 < latency.ns < 5000  # a load from device memory: hundreds of nanoseconds
    else:
        assert latency.timing.simulated


def test_blocks_and_bytes_by_hand():
    assert metrics.bytes_per_block(32, 1, 4) == 128 and metrics.bytes_per_block(256, 4, 16) == 16384
    # 424 GB/s with 32-thread blocks of one float32: 424e9 / 256 bytes (read + written) = 1.656 billion blocks per second.
    assert metrics.blocks_per_second(424.0, 128) == pytest.approx(1.65625e9)
    assert metrics.implied_latency_ns(8192, 132, 2391.0) == pytest.approx(2 * 132 * 8192 / 2391.0)
    with pytest.raises(ValueError):
        metrics.blocks_per_second(1.0, 0)


def test_in_flight_on_a_book_gpu():
    from gpucourse.occupancy import book_sm_limits

    k20 = book_sm_limits("Tesla K20")  # 64 warps, 16 blocks per SM
    small = metrics.in_flight(32, 1, 4, 12, k20, 13, 500.0)
    assert small.resident_threads_per_sm == 16 * 32 and small.limited_by == "blocks"
    assert small.bytes_in_flight_per_sm == 16 * 32 * 4
    assert small.cap_gbs == pytest.approx(2 * 13 * 2048 / 500.0)
    full = metrics.in_flight(256, 4, 16, 32, k20, 13, 500.0, ceiling_gbs=150.0)
    assert full.resident_threads_per_sm == 2048 and full.bytes_in_flight_per_sm == 2048 * 64 and full.cap_gbs == 150.0


def test_littles_law_by_hand():
    # 3000 GB/s with loads that take 600 ns: 1.8 MB must be on their way.
    assert metrics.bytes_in_flight_needed(3000.0, 600.0) == pytest.approx(1.8e6)
    assert metrics.latency_limited_gbs(1.8e6, 600.0) == pytest.approx(3000.0)
    # 132 SMs with 8 KiB of loads each, 800 ns: reads 1351.7 GB/s, so a copy 2703.4 GB/s.
    assert metrics.copy_bandwidth_cap_gbs(8192, 132, 800.0) == pytest.approx(2 * 132 * 8192 / 800.0)
    with pytest.raises(ValueError):
        metrics.latency_limited_gbs(1.0, 0.0)


def test_kernels_run_in_this_mode():
    # The same launchers run on a GPU and in the simulator; in the simulator NumPy arrays are accepted too.
    host = np.ones(8, np.float32)
    out = np.zeros(8, np.float32)
    if mode.is_simulator():
        metrics.copy(out, host)
        np.testing.assert_array_equal(out, host)
    else:
        with pytest.raises(ArrayArgumentError, match="host memory"):
            metrics.copy(out, host)
