"""Chapter 2 of the report: timing, what limits a kernel, bandwidth (the measurements of `gpucourse.bench`)."""

from __future__ import annotations

from .. import bench as chapter2
from .. import book
from ..kernels import metrics
from .core import BookCell, ChapterPlan, Context, Row, Section, cells

STEPS = ("ch2: ceilings, copy sweep, in-flight copies, limiting factor, launch cost",)

NOT_MEASURED = {
    r"ch2_cmdprof_.*": "Command Line Profiler lines of the book's profiled increment program (its sizes are not printed); chapter 2.1 "
                       "measures the same things (kernel time, copies, host launch cost) with events and Nsight tools",
    r"ch2_nvprof_.*": "nvprof lines of the same program (GPU not stated); nvprof does not support current GPUs (chapter 2.1 says so)",
    r"ch2_event_resolution": "a documented property of CUDA events, quoted in notebook 2.1, not a measurement",
    r"ch2_peakbw_(memclock|buswidth)_.*": "inputs of the peak-bandwidth formula; their result, the peak, has a row",
    r"ch2_limit_(math|mem)_pct_of_base_C2050": "the book's percentages of its own C2050 times; the row 'limiting factor' shows this device's",
    r"ch2_tab2_1_copy_eccoff_(C2050|K20)": "Table 2.1 with ECC off; rows use the ECC-on figures of the same GPUs (the course's GPUs run with ECC on)",
}


def _scaled_us(timing, n: int) -> float:
    """A time measured on n elements, scaled to the book's limitingFactor size (us)."""
    return 1e3 * timing.median_ms * metrics.BOOK_LIMIT_N / n


def measure(ctx: Context) -> list[Section]:
    """Run chapter 2's measurements and lay them out as then-and-now rows."""
    ctx.step(STEPS[0])
    return sections(chapter2.measure(repeat=ctx.repeat), ctx)


def sections(report: chapter2.BenchReport, ctx: Context) -> list[Section]:
    """Chapter 2's measurements beside the book's figures."""
    unit = "GB/s" if not ctx.simulated else "GB/s (simulator)"

    ceilings = Section("Bandwidth ceilings (§2.3.1–2.3.2)")
    ceilings.rows.append(Row("theoretical peak bandwidth (2 × memory clock × bus width)",
                             [BookCell.of(f"ch2_peakbw_{gpu}", as_bandwidth=False) for gpu in ("C870", "C1060", "C2050", "K10", "K20")],
                             report.ceilings.theoretical_gbs, "GB/s",
                             note="a ceiling itself: the measured copy reaches "
                                  f"{report.ceilings.copy_gbs / report.ceilings.theoretical_gbs:.0%} of it" if not ctx.simulated else ""))
    ceilings.rows.append(Row("device-to-device copy (the practical ceiling)", [], None if ctx.simulated else report.ceilings.copy_gbs, unit,
                             ctx.fraction(report.ceilings.copy_gbs), anchor="cudaMemcpyAsync device to device"))
    tpb, best = report.best_copy
    ceilings.rows.append(Row("simple copy kernel at its best block size (Table 2.1)" + ("" if ctx.simulated else f"; here {tpb} threads per block"),
                             cells("ch2_tab2_1_copy_eccoff_C870", "ch2_tab2_1_copy_eccoff_C1060", "ch2_tab2_1_copy_eccon_C2050",
                                   "ch2_tab2_1_copy_eccon_K20"), best, unit, ctx.fraction(best),
                             anchor=None if report.same_size_memcpy_gbs is None else
                             f"cudaMemcpy of the same arrays: {report.same_size_memcpy_gbs:.0f} GB/s"))
    smallest = min(report.copy_sweep_gbs)
    ceilings.rows.append(Row(f"simple copy kernel, {smallest} threads per block", [], report.copy_sweep_gbs[smallest], unit,
                             ctx.fraction(report.copy_sweep_gbs[smallest])))
    ceilings.rows.append(Row(f"copy, {report.ilp_config[1]} float32 in flight per thread", [], report.ilp_gbs, unit, ctx.fraction(report.ilp_gbs)))
    ceilings.rows.append(Row("copy, 16-byte elements", [], report.wide_gbs, unit, ctx.fraction(report.wide_gbs)))
    ceilings.notes.extend(report.notes)

    limit = Section("What limits a kernel: base, memory-only and math-only kernels (§2.2)")
    for fastmath in (False, True):
        here = report.limit[fastmath]
        variant = "fastmath" if fastmath else "nofastmath"
        label = "fast math" if fastmath else "no fast math"
        for kind in ("base", "memory", "math"):
            timing = getattr(here, kind)
            limit.rows.append(Row(f"{kind} kernel time, {label} (here scaled to the book's n = 8 Mi)",
                                  [BookCell.of(f"ch2_limit_{kind}_{variant}_{gpu}") for gpu in chapter2.BOOK_GPUS],
                                  _scaled_us(timing, here.n), "us"))
        c = here.classification
        verdict = None if ctx.simulated else f"{c.label} (memory {c.memory_share:.0%}, math {c.math_share:.0%} of base)"
        limit.rows.append(Row(f"limiting factor, {label}", [], verdict,
                              note="; ".join(f"book {gpu}: {chapter2._book_classification(gpu, fastmath).label}" for gpu in chapter2.BOOK_GPUS)
                              + ("; this device: not measured in the simulator" if ctx.simulated else "")))
    for gpu in chapter2.BOOK_GPUS:
        fig = book.figure(f"ch2_effbw_base_fastmath_{gpu}")
        limit.rows.append(Row(f"base kernel effective bandwidth, fast math ({fig.gpu})", [BookCell.of(fig.id)],
                              report.limit[True].base_gbs, unit, ctx.fraction(report.limit[True].base_gbs)))

    launch = Section("Host cost of one launch (§2.1)")
    host_us = None if report.launch.host_ms_per_call is None else 1e3 * report.launch.host_ms_per_call
    launch.rows.append(Row("host time to issue one launch (the course's planned launcher)", [BookCell.of("ch2_cmdprof_increment_cputime_K20")],
                           host_us, "us", note="notebook 2.1, section 5 compares seven ways of launching"))
    return [ceilings, limit, launch]


PLAN = ChapterPlan(2, "Performance measurement and metrics", STEPS, measure, NOT_MEASURED)
