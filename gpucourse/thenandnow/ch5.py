"""Chapter 5 of the report: cuRAND, π, the fused multiply-add, reductions, the accuracy of summation, option pricing."""

from __future__ import annotations

import math

import numpy as np

from .. import book, floating_point, options, summation
from ..errors import GPUOnlyFeature
from ..sizes import problem_size
from .core import ChapterPlan, Context, Row, Section, cells

STEPS = ("ch5: random numbers", "ch5: pi", "ch5: the fused multiply-add", "ch5: reductions", "ch5: accuracy of summation",
         "ch5: option pricing")

NOT_MEASURED = {
    r"ch5_option_cuf_threads": "the CUF compiler's choice of 128 threads per block for the book's pricing kernel",
    r"ch5_option_nvprof_(sp|dp)_(mc_\d+_gpu(_red)?|gen_sequenced|memcpy_DtoH|memcpy_HtoD)": "nvprof's lines for the book's generated "
        "kernels; the rows time this GPU's whole run and its generator's seeding, which the book found dominant",
    r"ch5_sum7_N1e7_fast_.*": "the same sums compiled with PGI's -fast (vectorized, reassociated); NumPy's sum stands in for the "
                              "intrinsic at -O3, and notebook 5.5 explains why -fast changes the order",
    r"ch5_pi_sp_seed1234_N1e5_single(_err)?": "a single run printed apart from the book's table (its N = 1e5 row has a row)",
}

BOOK_COUNTS = (10**4, 10**5, 10**6, 10**7, 10**8)


def _gpu_only(row: Row, exc: Exception) -> Row:
    row.note = f"GPU only: {exc}" if not isinstance(exc, GPUOnlyFeature) else f"GPU only ({exc.feature})"
    return row


def random_rows(ctx: Context) -> list[Section]:
    """cuRAND's first values for the book's seed, and the generators' throughput against the copy ceiling."""
    from ..kernels import random_numbers

    ctx.step(STEPS[0])
    section = Section("Random numbers: cuRAND through CuPy, and Numba's xoroshiro128+ (§5.1)")
    for dtype, tag in ((np.float32, "sp"), (np.float64, "dp")):
        row = Row(f"cuRAND's default generator, seed 1234: the first four {np.dtype(dtype).name} uniforms",
                  cells(*[f"ch5_curand_{tag}_seed1234_u{k}" for k in range(1, 5)]))
        try:
            row.here = ", ".join(f"{v:.7g}" for v in random_numbers.first_uniforms(4, dtype, seed=1234))
        except GPUOnlyFeature as exc:
            _gpu_only(row, exc)
        section.rows.append(row)
    if not ctx.simulated:
        from ..throughput import measure

        n = problem_size("ch5_random_numbers")
        calls = random_numbers.generator_calls(n, np.float32, seed=1234)
        for result in measure(calls, n, n * 4, repeat=ctx.repeat, one_way=True):
            section.rows.append(Row(f"{result.name}: float32 uniforms", [], result.items_per_second / 1e9, "billion/s", None,
                                    note=f"{result.gbs:.0f} GB/s written = {result.fraction_of_ceiling(ctx.ceilings):.2f} of the "
                                         "theoretical peak (write-only traffic can outrun the copy)"))
    return [section]


def pi_rows(ctx: Context) -> list[Section]:
    """The book's π tables: counts of points in the quarter circle from cuRAND points, for its seeds, precisions and sizes."""
    from ..kernels import montecarlo

    ctx.step(STEPS[1])
    section = Section("π by Monte Carlo: the book's tables (§5.2)")
    measured = set(problem_size("ch5_pi_book"))
    for tag, seed, dtype, rule in (("sp_seed1234", 1234, "float32", "default"), ("dp_seed1234", 1234, "float64", "default"),
                                   ("dp_seed1234567", 1234567, "float64", "default"),
                                   ("sp_seed1234567_fma", 1234567, "float32", "default")):
        for count in BOOK_COUNTS:
            exponent = int(round(math.log10(count)))
            row = Row(f"π, {dtype}, seed {seed}, N = 1e{exponent} (and its error)", cells(f"ch5_pi_{tag}_N1e{exponent}",
                                                                                             f"ch5_pi_{tag}_N1e{exponent}_err"))
            if ctx.simulated:
                _gpu_only(row, GPUOnlyFeature("cuRAND's points"))
            elif count in measured:
                inside = montecarlo.curand_pi(count, seed, dtype, rule)
                estimate = float(np.float32(4) * np.float32(inside) / np.float32(count)) if dtype == "float32" else 4.0 * inside / count
                row.here = f"{estimate:.8f} (error {estimate - math.pi:+.2e})"
            section.rows.append(row)
    row = Row("π, float32, seed 1234567, N = 1e8, without fused multiply-adds", cells("ch5_pi_sp_seed1234567_nofma_N1e8",
                                                                                       "ch5_pi_sp_seed1234567_nofma_N1e8_err"))
    if ctx.simulated:
        _gpu_only(row, GPUOnlyFeature("cuRAND's points"))
    else:
        inside = montecarlo.curand_pi(10**8, 1234567, "float32", "separate")
        row.here = f"{float(np.float32(4) * np.float32(inside) / np.float32(10**8)):.8f}"
    section.rows.append(row)
    fused = montecarlo.fused_pi  # the generate-and-count kernel: its throughput beside the book's program's
    section.notes.append(f"Throughput of the fused generate-and-count kernel ({fused.__name__}) is in notebook 5.2 and "
                         "measurements/ch5.md.")
    return [section]


def fma_rows(ctx: Context) -> list[Section]:
    """Why the GPU and the CPU count differently: the book's Table 5.1 points and the two ways to fuse x*x + y*y."""
    from ..kernels import montecarlo

    ctx.step(STEPS[2])
    section = Section("IEEE-754 and the fused multiply-add: the book's seed-1234567 experiment (§5.3)")
    book_points = [(int(book.figure(f"ch5_tab5_1_p{k}_index").number), np.float32(book.figure(f"ch5_tab5_1_p{k}_x").number),
                    np.float32(book.figure(f"ch5_tab5_1_p{k}_y").number)) for k in (1, 2, 3)]
    x, y = book_points[0][1], book_points[0][2]
    for rule, figure_id in (("separate", "ch5_fma_order_xx_plus_yy"), ("fma_x", "ch5_fma_order_fma_x"), ("fma_y", "ch5_fma_order_fma_y")):
        value = floating_point.squared_distance32(x, y, rule)
        section.rows.append(Row(f"x² + y² of the book's first point, {rule}", cells(figure_id), f"{float(value):.9e}",
                                note="float32 arithmetic done exactly on the host (gpucourse.floating_point)"))
    section.rows.append(Row("the same in float64 (hex)", cells("ch5_fma_dp_reference_hex"),
                            floating_point.float64_hex(np.float64(x) * np.float64(x) + np.float64(y) * np.float64(y))))
    n = problem_size("ch5_fma")
    count_row = Row(f"points inside, {n} cuRAND points of seed 1234567: host rule, GPU default", cells("ch5_pi_fma_inside_cpu_N1e8",
                                                                                                     "ch5_pi_fma_inside_gpu_N1e8"))
    mismatch_row = Row("points where the two rules disagree", cells("ch5_pi_fma_mismatch_points"))
    point_rows = [Row(f"Table 5.1, point {k}: index, x, y, and x² + y² on the host and on the GPU",
                      cells(*[f"ch5_tab5_1_p{k}_{part}" for part in ("index", "x", "y", "cpu", "gpu")])) for k in (1, 2, 3)]
    if ctx.simulated:
        for row in (count_row, mismatch_row, *point_rows):
            _gpu_only(row, GPUOnlyFeature("cuRAND's points"))
    else:
        xy = montecarlo.curand_points(n, 1234567, "float32")
        inside = montecarlo.inside_by_rule(xy)
        count_row.here = f"{int(inside['host'].sum())}, {int(inside['default'].sum())}"
        mismatch_row.here = len(montecarlo.disagreements(inside, "default", "host"))
        host = xy.get()
        from ..arrays import require_cupy

        cupy = require_cupy("the GPU's x² + y²")
        for row, (index, _, _) in zip(point_rows, book_points):
            px, py = host[index - 1], host[n + index - 1]
            pair, out = cupy.asarray(np.array([px, py], np.float32)), cupy.empty(1, np.float32)
            montecarlo.squared_distances(pair, out, "default")
            row.here = (f"{index}: x {px:.9e}, y {py:.9e}; x² + y²: host {float(floating_point.squared_distance32(px, py, 'separate')):.9f}, "
                        f"GPU {float(out.get()[0]):.9f}")
    section.rows += [count_row, mismatch_row, *point_rows]
    return [section]


def reduction_rows(ctx: Context) -> list[Section]:
    """The best hand-written sum of 1 GiB against cupy.sum and the copy ceiling's read bandwidth, and the 1D launch limit."""
    from ..kernels import reductions

    ctx.step(STEPS[3])
    section = Section("Reductions (§5.4)")
    d = ctx.device
    largest = None if d.simulated else d.max_grid_dim[0] * d.max_threads_per_block
    section.rows.append(Row("largest 1D launch: blocks x threads per block", cells("ch5_reduce_1d_limit_cc1x", "ch5_reduce_1d_limit_cc2x"),
                            largest, "threads"))
    if ctx.simulated:
        section.rows.append(Row("best hand-written sum of 1 GiB of float32, read bandwidth", [], None, "GB/s", note="measured on a GPU only"))
        return [section]
    from ..arrays import require_cupy

    cupy = require_cupy("the sum of 1 GiB")
    n = problem_size("ch5_reduce")
    x = cupy.random.default_rng(5).random(n, dtype=cupy.float32)
    result = cupy.empty(1, dtype=cupy.float32)
    ours = ctx.time(lambda: reductions.best_sum(x, result))
    library = ctx.time(lambda: cupy.sum(x, out=result[0]))
    read = ours.bandwidth_gbs(n * 4)
    peak = None if ctx.simulated else ctx.ceilings.fraction(read, one_way=True)
    section.rows.append(Row("best hand-written sum of 1 GiB of float32, read bandwidth", [], read, "GB/s", None,
                            anchor=f"cupy.sum (CUB): {library.bandwidth_gbs(n * 4):.0f} GB/s",
                            note=(f"{peak:.2f} of the theoretical peak (read-only traffic can outrun the copy); " if peak else "")
                            + f"{reductions.BEST}"))
    return [section]


def first_wrong_count(last_exact: int, value: float = 7.0) -> int:
    """The first n whose float32 running sum of n copies of `value` differs from n * value, read from the partial sums past `last_exact`."""
    partial = summation.recursive_partial_sums(summation.constant_terms(last_exact + 8, value)).astype(np.float64)
    wrong = np.flatnonzero(partial != value * np.arange(1, last_exact + 9))
    return int(wrong[0]) + 1


def summation_rows(ctx: Context) -> list[Section]:
    """The book's summation tables: sums of 7.0 and of the 1/i and 1/i² series, in every order and precision (host arithmetic)."""
    ctx.step(STEPS[4])
    section = Section("Accuracy of summation: the book's tables, recomputed (§5.4)")
    ways = {"intrinsic": lambda x: np.sum(x, dtype=np.float32), "rec_sp": lambda x: summation.recursive_sum(x, np.float32),
            "rec_dp": lambda x: summation.recursive_sum(x, np.float64), "pairwise_sp": summation.pairwise_sum,
            "kahan_sp": lambda x: summation.kahan_sum(x, np.float32)}
    for count in problem_size("ch5_sum7"):
        terms = summation.constant_terms(count)
        exact = summation.exact_sum(terms)
        tag = f"N{count // 10**7}e7"
        for way, method in ways.items():
            value = float(method(terms))
            section.rows.append(Row(f"{count} x 7.0, {way.replace('_', ' ')} (and its error)", cells(f"ch5_sum7_{tag}_O3_{way}",
                                                                                                   f"ch5_sum7_{tag}_O3_{way}_err"),
                                    f"{value:.1f} ({value - exact:+.1f})"))
    last = summation.last_exact_count()
    first_wrong = first_wrong_count(last)
    section.rows.append(Row("last count of 7.0s summed exactly in float32, one after another", cells("ch5_sum7_last_good_N",
                                                                                                      "ch5_sum7_first_bad_N"), last,
                            note=f"the first wrong count is {first_wrong}"
                            + (f" (the book's {last + 1} is one too early: 7 x {last + 1} is even, still a float32)"
                               if first_wrong != last + 1 else "")))
    n = problem_size("ch5_series")
    for power, tag in ((1, "inv_i"), (2, "inv_i2")):
        terms = summation.series_terms(n, power)
        exact = summation.exact_sum(terms)
        for way, method in ways.items():
            value = float(method(terms))
            section.rows.append(Row(f"sum of 1/i^{power}, i = 1..{n}, {way.replace('_', ' ')} (and its error)",
                                    cells(f"ch5_sumseries_{tag}_{way}", f"ch5_sumseries_{tag}_{way}_err"), f"{value:.7e} ({value - exact:+.3e})"))
        forward, backward = float(summation.recursive_sum(terms, np.float32)), float(summation.backward_sum(terms, np.float32))
        reference = float(summation.recursive_sum(terms.astype(np.float64), np.float64))
        section.rows.append(Row(f"Table 5.2, 1/i^{power}: forward, backward (float32) and the float64 reference",
                                cells(f"ch5_tab5_2_{tag}_fwd_sp", f"ch5_tab5_2_{tag}_bwd_sp", f"ch5_tab5_2_{tag}_ref",
                                      f"ch5_tab5_2_{tag}_fwd_err", f"ch5_tab5_2_{tag}_bwd_err"),
                                f"{forward:.7g}, {backward:.7g}, {reference:.15g}"))
    section.notes.append("Host arithmetic in float32 and float64: the book's tables do not depend on the GPU, and are reproduced here.")
    return [section]


def option_rows(ctx: Context) -> list[Section]:
    """The book's European option: Black-Scholes, Monte Carlo prices and intervals, and the whole run's time."""
    from ..kernels import montecarlo

    ctx.step(STEPS[5])
    section = Section("Option pricing: a European call and put by Monte Carlo (§5.5)")
    option = options.BOOK_OPTION
    call_bs, put_bs = options.black_scholes(option)
    for precision, dtype in (("sp", "float32"), ("dp", "float64")):
        for paths, tag in ((10**6, "1M"), (10**8, "100M")):
            ids = [f"ch5_option_{precision}_{tag}_{part}" for part in ("call_mc", "call_bs", "call_ci_lo", "call_ci_hi", "put_mc", "put_bs",
                                                                       "put_ci_lo", "put_ci_hi", "time")]
            ids = [i for i in ids if book.has_figure(i)]
            row = Row(f"{paths:.0e} paths, {dtype}: call and put (Black-Scholes {call_bs:.6f}, {put_bs:.6f}); whole run", cells(*ids))
            if ctx.simulated:
                _gpu_only(row, GPUOnlyFeature("cuRAND's normals"))
            else:
                from ..timing import wall_time_ms

                estimate = montecarlo.book_option_run(paths, option, dtype)
                ms = wall_time_ms(lambda p=paths, d=dtype: montecarlo.book_option_run(p, option, d), repeat=3)
                row.here = (f"call {estimate.call:.6f} ± {1.96 * estimate.call_se:.1e}, put {estimate.put:.6f} ± {1.96 * estimate.put_se:.1e}; "
                            f"{ms:.2f} ms")
            section.rows.append(row)
    for precision, dtype in (("sp", np.float32), ("dp", np.float64)):
        row = Row(f"seeding cuRAND's default generator, {np.dtype(dtype).name}: its first fill against the next",
                  cells(f"ch5_option_nvprof_{precision}_generate_seed_pseudo", f"ch5_option_nvprof_seed_pct_{precision}"))
        try:
            seeding, second, very_first = fresh_generator_ms(dtype)
            row.here, row.unit = f"{seeding:.3f} ms, then {second:.3f} ms", ""
            row.note = (f"a fresh generator's first fill (three generators; the first of them took {very_first:.3f} ms, "
                        "the process's one-time start-up included)")
        except GPUOnlyFeature as exc:
            _gpu_only(row, exc)
        section.rows.append(row)
    return [section]


def fresh_generator_ms(dtype, generators: int = 3) -> tuple[float, float, float]:
    """GPU ms of a fresh cuRAND default generator's first fill (its seeding; the least over all generators but the first),
    of a following fill (the least), and of the very first generator's first fill (which may include one-time start-up)."""
    from ..kernels import random_numbers

    calls = [random_numbers.seeding_cost_ms(1 << 20, dtype, "default", None) for _ in range(generators)]
    return min(first for first, _ in calls[1:]), min(second for _, second in calls), calls[0][0]


def measure(ctx: Context) -> list[Section]:
    """Every chapter-5 section of the report."""
    return random_rows(ctx) + pi_rows(ctx) + fma_rows(ctx) + reduction_rows(ctx) + summation_rows(ctx) + option_rows(ctx)


PLAN = ChapterPlan(5, "Monte Carlo", STEPS, measure, NOT_MEASURED)
