"""The speed verdict without a GPU: the paired ratio from given timings, the evidence read from PTX, the words it gives,
and the recheck after the timing (an answer that skips its work after its first call)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import gpucourse
from gpucourse.checks import evidence, speed
from gpucourse.checks.speed import KernelEvidence, PtxFacts, SpeedComparison, ptx_facts, skipped_work, slow_cause, speed_problem
from gpucourse.timing import Ceilings, Timing

# The head of the PTX that numba-cuda 0.30 (NVVM of CUDA 13, sm_90) makes of `for i in range(cuda.grid(1), out.size,
# cuda.gridsize(1)): out[i] = x[i] + y[i]`: the trip count's 64-bit division, its 32-bit fast path, then the loop.
RANGE_LOOP_PTX = """
.visible .entry add(
\t.param .u64 add_param_0
)
{
\t.reg .pred \t%p<18>;
\tld.param.u64 \t%rd41, [add_param_2];
\tmov.u32 \t%r1, %tid.x;
\tmul.wide.s32 \t%rd46, %r2, %r3;
\tsub.s64 \t%rd6, %rd41, %rd152;
\tsetp.eq.s64 \t%p1, %rd5, 0;
\t@%p1 bra \t$L__BB0_12;
\tand.b64  \t%rd49, %rd48, -4294967296;
\t@%p5 bra \t$L__BB0_4;
\tdiv.s64 \t%rd144, %rd6, %rd5;
\tbra.uni \t$L__BB0_5;
$L__BB0_4:
\tdiv.u32 \t%r7, %r6, %r5;
$L__BB0_5:
\t// the loop
\tld.global.f32 \t%f1, [%rd72];
\tadd.f32 \t%f3, %f2, %f1;
\tst.global.f32 \t[%rd76], %f3;
\tdiv.rn.f32 \t%f4, %f3, %f1;
\tret;
}
"""

PLAIN = PtxFacts(instructions=29, setup=19, divisions=())
RANGE_LOOP = PtxFacts(instructions=179, setup=69, divisions=("div.s64", "div.u32"))
N = (1 << 25) + 37


def test_ptx_facts_count_instructions_before_the_first_global_access_and_integer_divisions_only():
    facts = ptx_facts(RANGE_LOOP_PTX)
    assert facts.divisions == ("div.s64", "div.u32")  # div.rn.f32 is a float division, not an index's
    assert facts.setup == 10  # parameter loads, directives, labels and comments are not instructions
    assert facts.instructions == 15


def test_a_range_loop_with_one_element_per_thread_is_told_its_trip_count_division():
    blocks = -(-N // 256)
    words = slow_cause([KernelEvidence("add", blocks, 256, RANGE_LOOP, stepped_range=True)],
                       [KernelEvidence("reference", blocks, 256, PLAIN)], N)
    assert "trip count of `range(start, stop, step)`" in words and "64-bit division" in words
    assert "69 instructions before its first global access (the reference 19)" in words
    assert "div.s64" in words and "about 1.0 per thread" in words
    assert "blocks of 128" not in words and "contiguous" not in words  # not the old guesses


def test_the_same_loop_over_many_elements_per_thread_is_not_blamed_on_its_setup():
    assert slow_cause([KernelEvidence("add", 4 * 132, 256, RANGE_LOOP, stepped_range=True)],
                      [KernelEvidence("reference", -(-N // 256), 256, PLAIN)], N) is None


def test_a_division_outside_a_range_loop_is_named_as_index_arithmetic():
    words = slow_cause([KernelEvidence("scale", -(-N // 256), 256, PtxFacts(60, 50, ("rem.s64",)))],
                       [KernelEvidence("reference", -(-N // 256), 256, PLAIN)], N)
    assert "`//`, `%`" in words and "rem.s64" in words and "range" not in words


def test_small_blocks_extra_launches_local_memory_and_registers_are_named_from_the_evidence():
    reference = [KernelEvidence("reference", -(-N // 256), 256, PLAIN)]
    small = slow_cause([KernelEvidence("add", -(-N // 32), 32, PLAIN)], reference, N)
    assert "blocks of 32 threads" in small and "reference blocks of 256" in small
    twice = slow_cause([KernelEvidence("half", -(-N // 512), 256, PLAIN)] * 2, reference, N)
    assert "launches 2 kernels" in twice and "reference 1" in twice
    assert slow_cause(reference, reference, N) is None  # nothing differs: no cause is invented
    spilled = slow_cause([KernelEvidence("add", -(-N // 256), 256, PLAIN, registers=40, local_bytes=64)], reference, N)
    assert "64 bytes per thread in local memory (the reference none)" in spilled
    reference = [KernelEvidence("reference", -(-N // 256), 256, PLAIN, registers=16)]
    hungry = slow_cause([KernelEvidence("add", 4 * 132, 256, PLAIN, registers=128)], reference, N)
    assert "128 registers per thread (the reference 16)" in hungry and "at most 512 of its threads" in hungry
    assert slow_cause([], reference, N) is None  # no Numba launch seen (a CuPy kernel): no evidence


def test_compare_speed_takes_the_median_of_ratios_measured_side_by_side(monkeypatch):
    """A student's call twice as slow as the reference's, with one sample of each disturbed, gives a ratio of 0.5."""
    times = {"mine": iter([2.0, 2.0, 9.0, 2.0, 2.0]), "reference": iter([1.0, 1.0, 1.0, 1.0, 5.0])}

    def fake_benchmark(fn, repeat):
        name = fn()
        return Timing((next(times[name]),), 1, "fake")

    monkeypatch.setattr(speed.mode, "is_simulator", lambda: False)
    monkeypatch.setattr(speed, "check_beyond_l2", lambda *args: None)
    monkeypatch.setattr(speed, "bandwidth_ceilings", lambda: Ceilings("fake", 4000.0, 3000.0, 1 << 30, False))
    monkeypatch.setattr(speed, "benchmark", fake_benchmark)
    comparison = speed.compare_speed(lambda: "mine", lambda: "reference", 12_000_000, 1 << 30, "add", rounds=5)
    assert comparison.paired_ratio == pytest.approx(0.5)  # the disturbed rounds (9 vs 1, 2 vs 5) fall outside the median
    assert comparison.mine_gbs == pytest.approx(12_000_000 / 2.0e-3 / 1e9)
    assert comparison.reference_gbs == pytest.approx(12_000_000 / 1.0e-3 / 1e9)
    assert comparison.ratio == comparison.paired_ratio
    assert speed_problem(comparison, "add_arrays", "look here") is not None


def test_speed_verdict_puts_the_evidence_in_place_of_the_guess(monkeypatch):
    monkeypatch.setattr(evidence.mode, "is_simulator", lambda: False)
    monkeypatch.setattr(evidence, "compare_speed", lambda *args, **kwargs: SpeedComparison(2400.0, 3900.0, 4100.0, 0.62))
    monkeypatch.setattr(evidence, "skipped_work", lambda *args: None)
    monkeypatch.setattr(evidence, "host_round_trip_problems", lambda *args: [])
    monkeypatch.setattr(evidence, "record", lambda *args: False)
    launched = {"mine": [KernelEvidence("add", -(-N // 256), 256, RANGE_LOOP, True)],
                "reference": [KernelEvidence("reference", -(-N // 256), 256, PLAIN)]}
    monkeypatch.setattr(evidence, "launch_evidence", lambda call: launched[call()])
    problems, _ = evidence.speed_verdict("Exercise 1.1", "add_arrays", lambda: "mine", lambda: "reference", 12 * N, 4 * N,
                                         "Blocks of 128 threads or more?")
    assert len(problems) == 1 and "62% of the reference's speed" in problems[0]
    assert "trip count" in problems[0] and "128 threads or more" not in problems[0]
    launched["mine"] = launched["reference"]  # evidence that shows nothing: the check's own question stays
    problems, _ = evidence.speed_verdict("Exercise 1.1", "add_arrays", lambda: "mine", lambda: "reference", 12 * N, 4 * N,
                                         "Blocks of 128 threads or more?")
    assert "128 threads or more" in problems[0]


def test_speed_verdict_names_a_round_trip_to_the_host_before_timing_it(monkeypatch):
    monkeypatch.setattr(evidence.mode, "is_simulator", lambda: False)
    monkeypatch.setattr(evidence, "host_round_trip_problems", lambda call, what: [f"{what} copies 1 device array(s) to the host"])
    monkeypatch.setattr(evidence, "record", lambda *args: False)
    timed = []
    monkeypatch.setattr(evidence, "compare_speed", lambda *args, **kwargs: timed.append(1))
    problems, phrase = evidence.speed_verdict("Exercise 1.1", "add_arrays", lambda: None, lambda: None, 12 * N, 4 * N, "look")
    assert problems == ["add_arrays copies 1 device array(s) to the host"] and phrase == "" and not timed


@cuda.jit
def _add(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def test_an_answer_that_skips_its_work_after_its_first_call_is_caught_after_the_timing():
    n = 64
    x, y = gpucourse.random_array(n, np.float32, seed=1), gpucourse.random_array(n, np.float32, seed=2)
    out, x_d, y_d = gpucourse.to_device(np.zeros(n, np.float32)), gpucourse.to_device(x), gpucourse.to_device(y)
    calls = []

    def lazy(out, x, y):
        calls.append(1)
        if len(calls) == 1:
            _add[1, 64](out, x, y)

    lazy(out, x_d, y_d)  # the timed calls: the first one did the work, the output looks right
    assert np.array_equal(gpucourse.to_host(out), x + y)
    reference = lambda: _add[1, 64](out, x_d, y_d)  # noqa: E731 - as a check writes it
    words = skipped_work(lambda: lazy(out, x_d, y_d), reference, "add_arrays")
    assert words is not None and f"left {n} of {n} elements unwritten" in words
    assert np.array_equal(gpucourse.to_host(x_d), x) and np.array_equal(gpucourse.to_host(y_d), y)  # inputs put back
    assert np.array_equal(gpucourse.to_host(out), x + y)
    assert skipped_work(lambda: _add[1, 64](out, x_d, y_d), reference, "add_arrays") is None
    assert skipped_work(lambda: _add_rounded_otherwise[1, 64](out, x_d, y_d), reference, "add_arrays") is None
    assert f"left 0 of {n} elements unwritten and 1 other" in skipped_work(lambda: _add_one_wrong[1, 64](out, x_d, y_d), reference, "add_arrays")


@cuda.jit
def _add_rounded_otherwise(out, x, y):
    """Right, with other rounding than the reference (a sum in another order differs as much)."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (x[i] * np.float32(1.0000001)) + y[i]


@cuda.jit
def _add_one_wrong(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i] + (np.float32(1) if i == 5 else np.float32(0))


@cuda.jit
def _smooth_interior(out, x):
    i = cuda.grid(1)
    if 0 < i < out.size - 1:
        out[i] = x[i - 1] + x[i + 1]


def test_only_the_elements_the_reference_writes_are_rechecked():
    """A stencil leaves its boundary alone: the boundary is not the answer's to write, the interior is."""
    n = 40
    x = gpucourse.to_device(gpucourse.random_array(n, np.float32, seed=3))
    out = gpucourse.to_device(np.zeros(n, np.float32))
    reference = lambda: _smooth_interior[1, 64](out, x)  # noqa: E731
    assert skipped_work(lambda: _smooth_interior[1, 64](out, x), reference, "sweep") is None
    assert f"left {n - 2} of {n - 2} elements unwritten" in skipped_work(lambda: out, reference, "sweep")  # does nothing


@cuda.jit
def _add_range_loop(out, x, y):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = x[i] + y[i]


def add_arrays_range_loop(out, x, y, threads_per_block=256):
    """A right answer to 1.1 written as a grid-stride loop over a grid of one thread per element (rejected on an H200 at 62 %)."""
    _add_range_loop[-(-out.size // threads_per_block), threads_per_block](out, x, y)


def test_a_grid_stride_answer_to_1_1_passes_or_is_told_its_loop_setup(capsys):
    """In the simulator it passes (its values are right; speed is judged on a GPU); on a GPU it passes or its message names what
    the evidence shows (the trip count's division), not a guess about its blocks."""
    from gpucourse.checks import CheckFailed, ch1

    try:
        ch1.check_add_arrays(add_arrays_range_loop)
    except CheckFailed as failed:
        words = str(failed)
        assert gpucourse.on_gpu(), words
        assert "trip count of `range(start, stop, step)`" in words and "128 threads or more" not in words, words
    else:
        assert "\u2705 Exercise 1.1" in capsys.readouterr().out


def test_nested_range_loops_are_told_their_inner_trip_count_even_on_a_grid_the_gpu_holds_once():
    """3.1's 2D grid-stride loops on a grid the GPU fills once (233 elements a thread) stayed at 0.59 of the reference on an
    H200 (measurements/gridstride/2026-11-29_h200.md): the inner range()'s 64-bit division is paid once per row."""
    nested = PtxFacts(instructions=257, setup=117, divisions=("div.s64", "div.u32", "div.u32", "div.s64"))
    words = slow_cause([KernelEvidence("scale_range", 132 * 8, 256, nested, stepped_range=True)],
                       [KernelEvidence("reference", 129 * 1920, 256, PtxFacts(40, 27, ()))], 62960640)
    assert words is not None and "2 64-bit integer divisions" in words and "inner loop's trip count" in words
    one_loop = PtxFacts(instructions=179, setup=69, divisions=("div.s64", "div.u32"))  # one range(): nothing to say at many per thread
    assert slow_cause([KernelEvidence("add", 1056, 256, one_loop, stepped_range=True)], [KernelEvidence("reference", 1, 256, PLAIN)],
                      N) is None
