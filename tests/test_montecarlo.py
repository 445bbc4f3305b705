"""Chapter 5 Monte Carlo: generators, pi, IEEE-754 rules, summation accuracy and option pricing, against references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from conftest import gpu_only

import gpucourse
from gpucourse import book, floating_point, mode, options, summation
from gpucourse.errors import ArrayArgumentError, GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import montecarlo, random_numbers

N = gpucourse.problem_size("ch5_test_points")

# --- random numbers ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_xoroshiro_fills_every_element_with_uniform_numbers(dtype):
    states = random_numbers.make_states(random_numbers.default_threads() * 2 + 3, seed=11)
    out = gpucourse.to_device(gpucourse.poisoned(N, dtype))
    random_numbers.xoroshiro_uniform(out, states)
    values = gpucourse.to_host(out)
    assert not np.isnan(values).any()
    assert values.min() >= 0 and values.max() <= 1
    assert abs(values.mean() - 0.5) < 4 * math.sqrt(1 / 12 / N)  # within 4 standard errors of 1/2


def test_streams_of_jumped_states_are_independent_and_identical_states_are_not():
    per_stream, streams = gpucourse.problem_size("ch5_streams")
    scale = random_numbers.independent_correlation_scale(per_stream, streams)
    good = random_numbers.largest_correlation(random_numbers.thread_streams(random_numbers.make_states(streams, 5), per_stream))
    assert good < 1.5 * scale
    same = random_numbers.thread_streams(random_numbers.identical_states(streams, 5), per_stream)
    assert np.all(same == same[:, :1])  # every thread draws the same numbers
    with pytest.raises(Exception, match="at least one state"):
        random_numbers.make_states(0, 1)


def test_state_creation_is_timed_on_the_host():
    """Measured in one run: 16 times the states take more than twice as long (each state is a jump of its own, on the host)."""
    few = 8 if mode.is_simulator() else 1 << 14
    small = random_numbers.state_creation_seconds(few, repeat=3)
    large = random_numbers.state_creation_seconds(16 * few, repeat=1)
    assert 0 < 2 * small < large, (small, large)


def test_curand_generators():
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="cuRAND"):
            random_numbers.CurandGenerator()
        with pytest.raises(GPUOnlyFeature):
            random_numbers.bit_generator("XORWOW", 1)
        gpu_only("cuRAND (refused in the simulator, checked)")
    import cupy

    for kind in ("xorwow", "philox", "mrg32k3a", "mtgp32"):
        out = cupy.full(1 << 16, cupy.nan, dtype=cupy.float32)
        random_numbers.CurandGenerator(kind, 7).uniform(out)
        values = out.get()
        assert not np.isnan(values).any() and values.min() > 0 and values.max() <= 1
        assert abs(values.mean() - 0.5) < 4 * math.sqrt(1 / 12 / values.size)
    normals = cupy.empty(1 << 16, dtype=cupy.float64)
    random_numbers.CurandGenerator("philox", 7).normal(normals, 1.0, 2.0)
    assert abs(float(normals.mean()) - 1.0) < 4 * 2 / math.sqrt(normals.size)
    with pytest.raises(ArrayArgumentError, match="even"):
        random_numbers.CurandGenerator().normal(cupy.empty(3, cupy.float32))
    with pytest.raises(ArrayArgumentError, match="CuPy array"):
        random_numbers.CurandGenerator().uniform(np.empty(4, np.float32))
    # the same seed gives the same numbers; consecutive calls continue the sequence
    a = random_numbers.first_uniforms(8, np.float32, seed=1234)
    b = random_numbers.first_uniforms(8, np.float32, seed=1234)
    np.testing.assert_array_equal(a, b)
    for name in random_numbers.BIT_GENERATORS:
        values = random_numbers.bit_generator(name, 3).random(1 << 14, dtype=np.float32).get()
        assert abs(values.mean() - 0.5) < 4 * math.sqrt(1 / 12 / values.size)


def test_every_generator_call_writes_its_array():
    calls = random_numbers.generator_calls(2048, np.float32, seed=2)
    assert any(name.startswith("xoroshiro") for name in calls)
    assert (len(calls) > 2) == mode.on_gpu()  # cuRAND and CuPy generators on a GPU only
    for call in calls.values():
        call()


# --- pi --------------------------------------------------------------------------------------------


def replayed_count(states: np.ndarray, n: int, dtype: str) -> int:
    """The points inside that fused_pi must count: thread t's draws t, t + T, ... replayed on the host from its state."""
    draw = random_numbers.uniform_float32 if dtype == "float32" else random_numbers.uniform_float64
    inside = 0
    for t in range(states.size):
        for _ in range(t, n, states.size):
            x, y = draw(states, t), draw(states, t)
            inside += bool(x * x + y * y <= 1)
    return inside


def test_fused_pi_within_four_standard_errors():
    """Within 4 standard errors in both modes (on a GPU, 0.1 % of pi); in the simulator, where 4 standard errors of its 1500
    points are 5 % of pi, also exactly the count of the same draws replayed on the host: a kernel that drops points fails."""
    for dtype in ("float32", "float64"):
        states = random_numbers.make_states(montecarlo.default_state_count(N), seed=21)
        before = states.copy_to_host()  # the kernel advances the states
        count = gpucourse.to_device(np.full(1, -1, np.int64))
        montecarlo.fused_pi(states, N, count, dtype)
        got = int(gpucourse.to_host(count)[0])
        estimate = montecarlo.pi_estimate(got, N)
        assert abs(estimate - math.pi) < 4 * montecarlo.pi_standard_error(N), (dtype, estimate)
        if mode.is_simulator():  # the simulator's draws are the Python functions replayed here
            assert got == replayed_count(before, N, dtype), dtype


def test_every_pi_variant_counts_the_same_points_alike():
    variants = montecarlo.pi_variants(N, seed=3)
    for call, _, _ in variants.values():
        call()
    counts = montecarlo.pi_counts(variants)
    for name, count in counts.items():
        assert abs(montecarlo.pi_estimate(count, N) - math.pi) < 4 * montecarlo.pi_standard_error(N), name
    stored = {name: c for name, c in counts.items() if variants[name][2]}
    assert len(set(stored.values())) == 1, stored  # all counters read the same stored points


@pytest.mark.parametrize("rule", ["separate", "fma_x", "fma_y"])
def test_each_spelled_out_rule_matches_the_exact_host_emulation(rule):
    host = gpucourse.random_array(2 * N, np.float32, seed=4, low=0.0, high=1.0)
    book_points = [(book.figure(f"ch5_tab5_1_p{k}_x").number, book.figure(f"ch5_tab5_1_p{k}_y").number) for k in (1, 2, 3)]
    for k, (x, y) in enumerate(book_points):  # the book's three points, which the rules classify differently
        host[k], host[N + k] = x, y
    xy = gpucourse.to_device(host)
    out = gpucourse.to_device(gpucourse.poisoned(N, np.float32))
    montecarlo.squared_distances(xy, out, rule)
    want = floating_point.squared_distance32(host[:N], host[N:], rule)
    np.testing.assert_array_equal(gpucourse.to_host(out), want)
    count = gpucourse.to_device(np.zeros(1, np.int64))
    montecarlo.count_inside(xy, count, rule)
    assert gpucourse.to_host(count)[0] == int(np.count_nonzero(want <= 1))


def test_default_rule_differs_from_the_host_by_a_few_points_at_most():
    host = gpucourse.random_array(2 * N, np.float32, seed=5, low=0.0, high=1.0)
    inside = montecarlo.inside_by_rule(gpucourse.to_device(host), ("default", "separate"))
    assert np.array_equal(inside["separate"], inside["host"])  # NumPy rounds exactly as the spelled-out kernel
    assert montecarlo.disagreements(inside, "default", "host").size <= max(3, N // 10**6)


def test_pi_arguments():
    count = gpucourse.to_device(np.zeros(1, np.int64))
    with pytest.raises(ArrayArgumentError, match="even number"):
        montecarlo.count_inside(gpucourse.to_device(np.zeros(5, np.float32)), count)
    with pytest.raises(ArrayArgumentError, match="int64"):
        montecarlo.count_inside(gpucourse.to_device(np.zeros(4, np.float32)), gpucourse.to_device(np.zeros(1, np.int32)))
    with pytest.raises(ValueError, match="rule"):
        montecarlo.count_inside(gpucourse.to_device(np.zeros(4, np.float32)), count, "fast")


def test_block_sums_take_whole_warps_only():
    """A block of 48 threads would shuffle with a half-empty warp under the full mask: every such launcher refuses it."""
    xy, count = gpucourse.to_device(np.zeros(4, np.float32)), gpucourse.to_device(np.zeros(1, np.int64))
    states, sums = random_numbers.make_states(64, 1), gpucourse.to_device(np.zeros(4, np.float64))
    z = gpucourse.to_device(np.zeros(64, np.float64))
    launches = {
        "count_inside": lambda: montecarlo.count_inside(xy, count, threads_per_block=48),
        "fused_pi": lambda: montecarlo.fused_pi(states, 64, count, threads_per_block=48),
        "european_fused": lambda: montecarlo.european_fused(states, 64, options.BOOK_OPTION, sums, "float64", threads_per_block=48),
        "european_from_normals": lambda: montecarlo.european_from_normals(z, options.BOOK_OPTION, sums, threads_per_block=48),
    }
    for name, launch in launches.items():
        try:
            launch()
        except LaunchConfigError as error:
            assert "multiple of the warp size (32): its block sum shuffles" in str(error) and "got 48" in str(error), f"{name}: {error}"
        else:
            pytest.fail(f"{name} accepted a block of 48 threads")



def test_book_pi_experiment_on_curand():
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            montecarlo.curand_pi(1000, 1234)
        gpu_only("cuRAND (refused in the simulator, checked)")
    n = 10**5
    count = montecarlo.curand_pi(n, 1234, "float32")
    assert abs(montecarlo.pi_estimate(count, n) - math.pi) < 4 * montecarlo.pi_standard_error(n)
    assert count == montecarlo.host_count_inside(montecarlo.curand_points(n, 1234).get()) or n > 10**6


def test_cupy_fmad_switch():
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            montecarlo.cupy_squared_distance_kernel(False)
        gpu_only("a CuPy kernel built with and without --fmad (refused in the simulator, checked)")
    import cupy

    host = gpucourse.random_array(2 * N, np.float32, seed=6, low=0.0, high=1.0)
    out = cupy.empty(N, dtype=cupy.float32)
    montecarlo.cupy_squared_distances(cupy.asarray(host), out, fmad=False)
    np.testing.assert_array_equal(out.get(), floating_point.squared_distance32(host[:N], host[N:], "separate"))
    montecarlo.cupy_squared_distances(cupy.asarray(host), out, fmad=True)
    fused = out.get()
    either = (fused == floating_point.squared_distance32(host[:N], host[N:], "fma_x")) | (
        fused == floating_point.squared_distance32(host[:N], host[N:], "fma_y"))
    assert either.all()


# --- IEEE-754 on the host ----------------------------------------------------------------------------


def test_the_books_table_5_1_analysis():
    for k in (1, 2, 3):
        x_fig, y_fig = book.figure(f"ch5_tab5_1_p{k}_x"), book.figure(f"ch5_tab5_1_p{k}_y")
        x = floating_point.float32_from_hex(x_fig.notes.split("hex ")[1][:8])
        y = floating_point.float32_from_hex(y_fig.notes.split("hex ")[1][:8])
        assert x == np.float32(x_fig.number) and y == np.float32(y_fig.number)  # the printed decimals and bits agree
        assert floating_point.float32_hex(floating_point.squared_distance32(x, y, "separate")) == "3F800000"
        assert floating_point.float32_hex(floating_point.squared_distance32(x, y, "fma_y")) == "3F800001"
    x, y = floating_point.float32_from_hex("3F1DC57A"), floating_point.float32_from_hex("3F499AA3")
    assert floating_point.float32_hex(floating_point.squared_distance32(x, y, "fma_x")) == book.figure("ch5_fma_order_fma_x").notes[4:12].upper()
    assert floating_point.float64_hex(np.float64(x) ** 2 + np.float64(y) ** 2) == book.figure("ch5_fma_dp_reference_hex").value
    assert floating_point.float32_hex(floating_point.squared_distance32(x, y, "double")) == "3F800001"


def test_fma32_is_correctly_rounded():
    from fractions import Fraction

    rng = np.random.default_rng(8)
    a, b = rng.random(3000).astype(np.float32), rng.random(3000).astype(np.float32)
    c = (rng.random(3000) * rng.choice([1e-9, 1.0, 1e6], 3000) * rng.choice([-1, 1], 3000)).astype(np.float32)
    got = floating_point.fma32(a, b, c)
    for i in range(0, 3000, 7):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        below = np.float32(float(exact))
        candidates = [below, np.nextafter(below, np.float32(np.inf)), np.nextafter(below, np.float32(-np.inf))]
        best = min(candidates, key=lambda v: (abs(Fraction(float(v)) - exact), int(np.float32(v).view(np.uint32)) & 1))
        assert got[i] == best, i
    # a product landing exactly halfway between two float32 numbers: the addend decides the direction
    half = np.float32(1 + 2**-12)
    assert floating_point.fma32(half, half, np.float32(2**-40)) == np.float32(1 + 2**-11 + 2**-23)
    assert floating_point.fma32(half, half, np.float32(-(2**-40))) == np.float32(1 + 2**-11)
    assert floating_point.ulps_apart(np.float32(1), floating_point.float32_from_hex("3F800001")) == 1


# --- summation accuracy (host) -------------------------------------------------------------------------


def test_summation_of_sevens_reproduces_the_book():
    for n, which in zip(gpucourse.problem_size("ch5_sum7"), ("N1e7", "N2e7")):
        x = summation.constant_terms(n)
        got = {name: float(f(x)) for name, f in summation.methods().items()}
        assert got["recursive, float32 accumulator"] == book.figure(f"ch5_sum7_{which}_O3_rec_sp").number
        for name in ("recursive, float64 accumulator", "pairwise, float32", "Kahan, float32", "Neumaier, float32"):
            assert got[name] == 7.0 * n, name


def test_series_sums_reproduce_table_5_2():
    for power, key in ((1, "inv_i"), (2, "inv_i2")):
        x = summation.series_terms(gpucourse.problem_size("ch5_series"), power)
        reference = float(summation.recursive_sum(x, np.float64))
        assert reference == pytest.approx(book.figure(f"ch5_tab5_2_{key}_ref").number, rel=1e-15)  # the same float32 terms
        assert float(summation.recursive_sum(x)) == pytest.approx(book.figure(f"ch5_tab5_2_{key}_fwd_sp").number, abs=5e-7)
        assert float(summation.backward_sum(x)) == pytest.approx(book.figure(f"ch5_tab5_2_{key}_bwd_sp").number, abs=5e-7)
        for direction, error in (("fwd", float(summation.recursive_sum(x)) - reference), ("bwd", float(summation.backward_sum(x)) - reference)):
            assert abs(error) == pytest.approx(book.figure(f"ch5_tab5_2_{key}_{direction}_err").number, rel=1e-9)  # printed unsigned
        assert float(summation.pairwise_sum(x)) - reference == pytest.approx(book.figure(f"ch5_sumseries_{key}_pairwise_sp_err").number, rel=1e-6)
        assert float(summation.kahan_sum(x)) - reference == pytest.approx(book.figure(f"ch5_sumseries_{key}_kahan_sp_err").number, rel=1e-6)
        assert abs(float(summation.neumaier_sum(x)) - summation.exact_sum(x)) <= abs(float(summation.recursive_sum(x)) - summation.exact_sum(x))


def test_first_inexact_count_of_sevens():
    last = summation.last_exact_count()
    assert last == book.figure("ch5_sum7_last_good_N").number
    partial = summation.recursive_partial_sums(summation.constant_terms(last + 4)).astype(np.float64)
    exact = 7.0 * np.arange(1, last + 5)
    first_wrong = int(np.flatnonzero(partial != exact)[0]) + 1
    assert first_wrong == last + 2  # 7 x 2396746 = 16777222 is even, so still a float32: the book's 2396746 is one too early
    assert book.figure("ch5_sum7_first_bad_N").number == last + 1


def test_the_report_names_the_first_wrong_count_of_sevens_not_the_books():
    from types import SimpleNamespace

    from gpucourse.thenandnow import ch5

    last = summation.last_exact_count()
    assert ch5.first_wrong_count(last) == last + 2 == 2396747  # as notebook 5.5 prints it
    (section,) = ch5.summation_rows(SimpleNamespace(step=lambda label: None))
    (row,) = [r for r in section.rows if r.quantity.startswith("last count of 7.0s")]
    assert row.here == last and row.note.startswith("the first wrong count is 2396747 ")


def test_the_reports_seeding_leaves_the_processs_start_up_out(monkeypatch):
    """The first generator of a process may pay one-time start-up: the seeding is the later generators' first fill."""
    from gpucourse.kernels import random_numbers
    from gpucourse.thenandnow import ch5

    fills = iter([(198.0, 0.07), (1.2, 0.08), (1.3, 0.07)])  # (first fill, next fill) of three fresh generators, ms
    monkeypatch.setattr(random_numbers, "seeding_cost_ms", lambda *args, **kwargs: next(fills))
    assert ch5.fresh_generator_ms(np.float32) == (1.2, 0.07, 198.0)


def test_pairwise_and_kahan_on_edge_cases():
    assert summation.pairwise_sum(np.zeros(0, np.float32)) == 0
    assert summation.pairwise_sum(np.array([3.0], np.float32)) == 3
    values = np.array([1e8, 1.0, -1e8, 1.0], np.float64)
    assert summation.neumaier_sum(values, np.float64) == 2.0
    assert summation.exact_sum(values) == 2.0


# --- options ---------------------------------------------------------------------------------------------


def scipy_black_scholes(option: options.EuropeanOption) -> tuple[float, float]:
    S, E, r, sigma, T = option.S, option.E, option.r, option.sigma, option.T
    d1 = (math.log(S / E) + (r + sigma**2 / 2) * T) / (sigma * math.sqrt(T))
    d2 = d1 - sigma * math.sqrt(T)
    call = S * scipy.stats.norm.cdf(d1) - E * math.exp(-r * T) * scipy.stats.norm.cdf(d2)
    put = E * math.exp(-r * T) * scipy.stats.norm.cdf(-d2) - S * scipy.stats.norm.cdf(-d1)
    return call, put


@pytest.mark.parametrize("option", [options.BOOK_OPTION, options.EuropeanOption(100, 110, 0.02, 0.4, 0.5),
                                    options.EuropeanOption(50, 20, 0.1, 0.2, 2.0)])
def test_black_scholes_against_scipy(option):
    np.testing.assert_allclose(options.black_scholes(option), scipy_black_scholes(option), rtol=1e-12, atol=1e-14)
    # the polynomial CND is within 7.5e-8 of the exact one, and the prices multiply it by S and E
    np.testing.assert_allclose(options.black_scholes(option, options.cnd_hastings), scipy_black_scholes(option), atol=1.5e-7 * (option.S + option.E))


def test_black_scholes_matches_the_books_printed_prices():
    call, put = options.black_scholes(options.BOOK_OPTION, options.cnd_hastings)  # the book's own CND
    assert call == pytest.approx(book.figure("ch5_option_dp_100M_call_bs").number, abs=1e-15)
    assert put == pytest.approx(book.figure("ch5_option_dp_100M_put_bs").number, abs=1e-15)
    assert options.black_scholes(options.EuropeanOption(5, 4, 0.05, 0.3, 0.0)) == (1.0, 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_option_pricing_within_four_standard_errors(dtype):
    states = random_numbers.make_states(montecarlo.default_state_count(N), seed=31)
    sums = gpucourse.to_device(gpucourse.poisoned(4, np.float64))
    montecarlo.european_fused(states, N, options.BOOK_OPTION, sums, dtype)
    estimate = options.estimate_from_sums(gpucourse.to_host(sums), N, options.BOOK_OPTION)
    call_off, put_off = estimate.standard_errors_off(options.BOOK_OPTION)
    assert call_off < 4 and put_off < 4, estimate
    low, high = estimate.interval("put")
    assert low < estimate.put < high


def test_pricing_from_stored_normals_matches_numpy():
    z = np.random.default_rng(9).standard_normal(N)
    for dtype in (np.float64, np.float32):
        sums = gpucourse.to_device(gpucourse.poisoned(4, np.float64))
        montecarlo.european_from_normals(gpucourse.to_device(z.astype(dtype)), options.BOOK_OPTION, sums)
        call, put = options.payoffs_reference(z.astype(dtype), options.BOOK_OPTION)
        call_shift, put_shift = options.median_payoffs(options.BOOK_OPTION)
        want = [(call - call_shift).sum(), ((call - call_shift) ** 2).sum(), (put - put_shift).sum(), ((put - put_shift) ** 2).sum()]
        np.testing.assert_allclose(gpucourse.to_host(sums), want, rtol=1e-10 if dtype == np.float64 else 2e-5)
        estimate = options.estimate_from_sums(gpucourse.to_host(sums), N, options.BOOK_OPTION)
        for mean, se, payoffs in ((estimate.call, estimate.call_se, call), (estimate.put, estimate.put_se, put)):
            assert mean == pytest.approx(payoffs.mean(), rel=1e-10 if dtype == np.float64 else 1e-5)
            assert se == pytest.approx(payoffs.std(ddof=1) / np.sqrt(N), rel=1e-9 if dtype == np.float64 else 1e-4)


def test_shifted_sums_keep_the_variance_when_the_mean_is_large():
    x = 1e9 + np.random.default_rng(4).standard_normal(100_000)  # mean 1e9, standard deviation 1
    want_mean, want_se = x.mean(), x.std(ddof=1) / np.sqrt(x.size)
    shift = float(x[0])
    mean, se = options.shifted_mean_and_se((x - shift).sum(), ((x - shift) ** 2).sum(), x.size, shift)
    assert mean == pytest.approx(want_mean, abs=1e-6)
    assert se == pytest.approx(want_se, rel=1e-6)
    _, unshifted_se = options.shifted_mean_and_se(x.sum(), (x * x).sum(), x.size, 0.0)  # the one-pass sum x^2 - mean sum x
    assert not unshifted_se == pytest.approx(want_se, rel=0.5)  # cancellation: not even the first digit is left
    with pytest.raises(ValueError, match="at least 2"):
        options.shifted_mean_and_se(1.0, 1.0, 1, 0.0)


def test_pricing_a_payoff_with_a_large_mean_matches_numpy():
    """A deep in-the-money call: payoffs near 1e6 with a spread of about 100, priced by the kernel and by NumPy in float64."""
    option = options.EuropeanOption(S=1e6, E=1.0, r=0.0, sigma=1e-4, T=1.0)
    z = np.random.default_rng(10).standard_normal(N)
    sums = gpucourse.to_device(gpucourse.poisoned(4, np.float64))
    montecarlo.european_from_normals(gpucourse.to_device(z), option, sums)
    estimate = options.estimate_from_sums(gpucourse.to_host(sums), N, option)
    call, put = options.payoffs_reference(z, option)
    assert estimate.call == pytest.approx(call.mean(), rel=1e-12)
    assert estimate.call_se == pytest.approx(call.std(ddof=1) / np.sqrt(N), rel=1e-8)
    assert estimate.put == 0 and estimate.put_se == 0 and not put.any()


def test_option_variants_and_errors():
    variants = montecarlo.option_variants(N, options.BOOK_OPTION, seed=2)
    assert (len(variants) == 4) == mode.on_gpu()
    for name, (call, sums) in variants.items():
        call()
        estimate = options.estimate_from_sums(gpucourse.to_host(sums), N, options.BOOK_OPTION)
        assert max(estimate.standard_errors_off(options.BOOK_OPTION)) < 4, name
    with pytest.raises(ValueError, match="4 numbers"):
        options.estimate_from_sums([1, 2, 3], 10, options.BOOK_OPTION)
    with pytest.raises(ArrayArgumentError, match="float64"):
        montecarlo.european_fused(random_numbers.make_states(8, 1), 10, options.BOOK_OPTION, gpucourse.to_device(np.zeros(4, np.float32)))
