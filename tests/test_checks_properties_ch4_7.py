"""The chapter 4-7 checks' cases cover the edge classes their exercises depend on: shown on generated answers and sizes.

Each property test generates a family of wrong answers (a slip that shows only in one edge class: one GPU count, one
rank beyond a wrap, one prime factor, a threshold moved, a grid sized from a rounded-down count) and asserts that the
check rejects every member, naming its cause; Hypothesis runs derandomized and, if a member got through, reports the
smallest one. The lessons' and the book's cases are explicit examples. The kernel exercises' cases are shown to cover
their edge classes by reckoning, launch by launch, which elements a grid sized the wrong way would leave out: running
each such kernel in the simulator would cost minutes and show no more.
"""

from __future__ import annotations

import math

import pytest
from answers_common import caught
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_checks_ch4_fresh import first_principles_ms
from test_checks_ch7 import smooth

from gpucourse import fft, mode
from gpucourse.checks import ch4, ch5, ch6, ch7
from gpucourse.multigpu import model as M

FEW = settings(max_examples=25, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- 4.1: one device per rank ---------------------------------------------------------------------


def node_local(hostnames):
    counts: dict[str, int] = {}
    local = []
    for host in hostnames:
        local.append(counts.get(host, 0))
        counts[host] = local[-1] + 1
    return local


@FEW
@given(st.integers(2, 8))
@example(3).via("the issue's odd GPU count")
def test_4_1_a_slip_at_any_one_gpu_count_is_caught(slipped):
    """Right for every GPU count but one (there: the world rank, wrapped): the cases hold every count from 1 to 8."""
    def answer(hostnames, gpus):
        if gpus == slipped:
            return [rank % gpus for rank in range(len(hostnames))]
        return [local % gpus for local in node_local(hostnames)]
    assert f", {slipped})" in caught(ch4.check_assign_devices, answer)


@FEW
@given(st.integers(1, 3))
def test_4_1_a_wrap_that_stops_after_k_rounds_is_caught(rounds):
    """Right while a host's ranks fill its GPUs `rounds` times, then device 0: the cases have hosts with 3 rounds and more."""
    def answer(hostnames, gpus):
        return [local % gpus if local < rounds * gpus else 0 for local in node_local(hostnames)]
    caught(ch4.check_assign_devices, answer)


@FEW
@given(st.sampled_from(["pop", "append", "sort", "reverse", "clear", "setitem", "delete", "extend"]))
def test_4_1_any_change_to_the_callers_list_is_caught(change):
    def answer(hostnames, gpus):
        devices = [local % gpus for local in node_local(hostnames)]
        {"pop": lambda: hostnames.pop(), "append": lambda: hostnames.append("extra"), "sort": hostnames.sort,
         "reverse": hostnames.reverse, "clear": hostnames.clear, "setitem": lambda: hostnames.__setitem__(0, "x"),
         "delete": lambda: hostnames.__delitem__(-1), "extend": lambda: hostnames.extend(hostnames)}[change]()
        return devices
    assert "changed the list it was given" in caught(ch4.check_assign_devices, answer)


# --- 4.2: does splitting pay? ---------------------------------------------------------------------


problems = st.builds(
    lambda exchange, size, flops, halo, launches: M.Problem("generated", size, flops=flops, exchange=exchange,
                                                           halo_bytes=halo if exchange == "halo" else 0.0, launches=launches),
    st.sampled_from(M.EXCHANGES), st.floats(1e3, 1e11), st.floats(0, 1e13), st.floats(1, 1e8), st.integers(1, 5))
machines = st.builds(lambda hbm, link, launch, latency, tflops: M.Machine(hbm, link, launch_us=launch, latency_us=latency, tflops=tflops),
                     st.floats(100, 10_000), st.floats(5, 2000), st.floats(0, 50), st.floats(0, 20), st.floats(1, 100))


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(problems, st.integers(1, 8), machines)
@example(ch4._TRANSPOSE, 4, M.H100_NVSWITCH).via("notebook 4.3's transpose on 4 H100s")
def test_4_2_the_model_the_check_compares_with_is_the_exercise_text(problem, gpus, machine):
    assert M.split_estimate_ms(problem, gpus, machine) == pytest.approx(first_principles_ms(problem, gpus, machine), rel=1e-9)


def verdict(problem, gpus, machine):
    return first_principles_ms(problem, gpus, machine) < first_principles_ms(problem, 1, machine)


@FEW
@given(st.integers(1, 8), st.sampled_from([1.003, 0.997, 1.02, 1.5]))
def test_4_2_a_slip_at_any_one_gpu_count_is_caught(slipped, factor):
    def answer(problem, gpus, machine):
        return first_principles_ms(problem, gpus, machine) * (factor if gpus == slipped else 1)
    assert f"on {slipped} GPU" in caught(ch4.check_split_estimate, answer, verdict)


@FEW
@given(st.sampled_from(["memory", "link", "both"]), st.sampled_from([("GiB", 2**30 / 1e9), ("bits", 1 / 8)]))
def test_4_2_a_unit_slip_in_any_part_is_named(part, unit):
    name, bytes_per_unit = unit

    def answer(problem, gpus, machine):
        estimate = M.split_estimate(problem, gpus, machine)
        memory = estimate.memory_ms / (bytes_per_unit if part in ("memory", "both") else 1)
        link = estimate.link_ms / (bytes_per_unit if part in ("link", "both") else 1)
        return max(memory, estimate.compute_ms) + link + estimate.step_ms
    assert name in caught(ch4.check_split_estimate, answer, verdict)


@FEW
@given(st.sampled_from(["down", "up", "nearest"]))
def test_4_2_a_verdict_that_looks_at_a_power_of_two_is_caught(rounding):
    def answer_pays(problem, gpus, machine):
        exponent = {"down": math.floor, "up": math.ceil, "nearest": round}[rounding](math.log2(gpus))
        return verdict(problem, 2**exponent, machine)
    assert "splitting pays when the split run is faster" in caught(ch4.check_split_estimate, first_principles_ms, answer_pays)


def test_4_2_the_cases_cover_every_gpu_count_exchange_and_both_verdicts():
    counts = {gpus for _, gpus, _ in ch4.SPLIT_CASES}
    assert counts == set(range(1, 9))
    kinds = {(problem.exchange, M.splitting_pays(problem, gpus, machine)) for problem, gpus, machine in ch4.SPLIT_CASES if gpus > 1}
    assert {("all_to_all", True), ("all_to_all", False), ("halo", True), ("halo", False), ("none", True)} <= kinds
    # a halo's link time is a tenth of the run or more somewhere: a halo too many is not lost in the tolerance
    assert max(M.split_estimate(*case).link_ms / M.split_estimate_ms(*case) for case in ch4.SPLIT_CASES
               if case[0].exchange == "halo" and case[1] > 1) > 0.1


# --- 7.1: the next fast size ----------------------------------------------------------------------


def smooth_over(primes):
    return lambda n: smooth(n, primes)


@FEW
@given(st.sampled_from([p for p in range(11, 98) if all(p % d for d in range(2, p))]))
@example(11).via("the smallest prime that must not slip through")
def test_7_1_any_extra_prime_factor_is_caught(extra):
    assert "slips through" in caught(ch7.check_next_fast_size, smooth_over((2, 3, 5, 7, extra)))


@FEW
@given(st.sampled_from([(2, 3, 5), (2, 3, 7), (2, 5, 7), (3, 5, 7), (2,)]))
def test_7_1_any_missing_prime_factor_is_caught(primes):
    caught(ch7.check_next_fast_size, smooth_over(primes))


def test_7_1_the_cases_hold_fast_sizes_and_their_neighbours():
    fast = [n for n in ch7.FAST_SIZE_CASES if fft.is_fast_size(n)]
    assert len(fast) >= 5 and any(n + 1 in ch7.FAST_SIZE_CASES for n in fast) and any(n - 1 in ch7.FAST_SIZE_CASES for n in fast)
    assert any(fft.next_fast_size(n) < 1 << (n - 1).bit_length() for n in ch7.FAST_SIZE_CASES)  # a power of two overshoots


# --- 7.4: the overlapped time ---------------------------------------------------------------------


@FEW
@given(st.floats(0, 2).filter(lambda t: abs(t - 2 / 3) > 0.05))
@example(0.5).via("the copy out counted with the copies in, then halved")
def test_7_4_a_moved_threshold_is_caught(threshold):
    """The larger part chosen by comparing the compute with `threshold` times the I/O instead of 2/3 of it."""
    def answer(io_only, single_stream):
        compute = single_stream - io_only
        return compute if compute > threshold * io_only else 2 * io_only / 3
    caught(ch7.check_expected_streamed_time, answer)


@FEW
@given(st.floats(0.5, 1.5), st.floats(0.2, 1.2))
def test_7_4_any_other_weight_of_either_part_is_caught(compute_weight, io_weight):
    if abs(compute_weight - 1) < 1e-6 and abs(io_weight - 2 / 3) < 1e-6:
        return
    caught(ch7.check_expected_streamed_time, lambda io, single: max(compute_weight * (single - io), io_weight * io))


# --- the kernel exercises: which sizes leave which elements out ------------------------------------


def covered(blocks: int, width: int) -> int:
    return blocks * width


@FEW
@given(st.sampled_from(ch7.COLUMN_BLOCKS[:1] if not mode.on_gpu() else ch7.COLUMN_BLOCKS),
       st.sampled_from(["n // 2", "n / 2 rounded down", "(n - 1) // 2 + 1"]))
def test_7_2_and_7_3_a_grid_sized_from_half_of_n_misses_a_column_in_some_case(width, sizing):
    def columns_launched(n):
        count = {"n // 2": n // 2, "n / 2 rounded down": math.floor(n / 2), "(n - 1) // 2 + 1": (n - 1) // 2 + 1}[sizing]
        return covered(-(-count // width), width)
    assert any(columns_launched(n) < n // 2 + 1 for n, _ in ch7.derivative_cases())
    assert any(columns_launched(nx) < nx // 2 + 1 for _, nx in ch7.poisson_meshes())


@FEW
@given(st.sampled_from(ch5.BLOCK_SIZES))
def test_5_1_for_every_block_size_some_case_loses_a_tail_when_blocks_round_down(block):
    sizes = ch5.gpu_sum_sizes()
    assert any(n % block and n // block * block < n for n in sizes)
    assert any(n < block for n in sizes)  # and one size smaller than a block: n // block is 0 blocks


def test_6_6_the_meshes_straddle_the_block():
    """An interior that is a whole number of 32 x 8 blocks and one that is not: a grid rounded down shows in the second."""
    shapes = ch6.jacobi_shapes()
    assert any((ny - 2) % ch6.BLOCK[1] == 0 and (nx - 2) % ch6.BLOCK[0] == 0 for ny, nx in shapes)
    assert any((ny - 2) % ch6.BLOCK[1] and (nx - 2) % ch6.BLOCK[0] for ny, nx in shapes)
