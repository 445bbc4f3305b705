"""`python -m gpucourse bench`: chapter 2's measurements on this device, set beside the book's figures.

`measure()` runs them (the bandwidth ceilings, a block-size sweep of the simple copy kernel, the
copies that keep more bytes in flight, the limiting-factor experiment with and without fast math,
and the host's cost of one launch) and returns a `BenchReport`; `bench_table(report)` lays it out
as "then and now": each row a quantity, the book's figure and its GPU, what that figure is as a
fraction of the book's own copy ceiling (Table 2.1, ECC on), this device's figure and its fraction
of the copy ceiling measured here. In simulator mode the same code runs at simulator sizes and the
table says that its times are simulator times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import book, mode
from .arrays import device_empty, random_array, require_cupy, to_device
from .device import current_device
from .errors import GPUOnlyFeature
from .kernels import metrics
from .report import Table
from .sizes import problem_size
from .timing import Ceilings, Timing, bandwidth_ceilings, benchmark

BOOK_GPUS = ("C2050", "K20")


@dataclass
class BenchReport:
    """Everything `measure` found, in GB/s and ms, with the sizes it used."""

    device: str
    simulated: bool
    ceilings: Ceilings
    copy_n: int
    copy_sweep_gbs: dict[int, float]
    ilp_gbs: float
    ilp_config: tuple[int, int]
    wide_gbs: float
    wide_config: tuple[int, int]
    same_size_memcpy_gbs: float | None
    limit: dict[bool, metrics.LimitTimes]
    launch: Timing
    notes: list[str] = field(default_factory=list)

    @property
    def best_copy(self) -> tuple[int, float]:
        """(threads per block, GB/s) of the simple copy's best block size."""
        tpb = max(self.copy_sweep_gbs, key=self.copy_sweep_gbs.get)
        return tpb, self.copy_sweep_gbs[tpb]

    @property
    def best_copy_class(self) -> tuple[str, float]:
        """The fastest Numba copy measured (any variant): its description and GB/s."""
        tpb, gbs = self.best_copy
        candidates = {
            f"one float32 per thread, {tpb} threads per block": gbs,
            f"{self.ilp_config[1]} float32 per thread, {self.ilp_config[0]} threads per block": self.ilp_gbs,
            f"16-byte elements, {self.wide_config[1]} per thread, {self.wide_config[0]} threads per block": self.wide_gbs,
        }
        name = max(candidates, key=candidates.get)
        return name, candidates[name]


def _echo_nothing(_: str) -> None:
    return None


def measure(repeat: int | None = None, echo: Callable[[str], None] = _echo_nothing) -> BenchReport:
    """Run chapter 2's measurements on the current device (simulator sizes in simulator mode)."""
    simulated = mode.is_simulator()
    warmup = 1 if simulated else 2
    repeat = repeat or (1 if simulated else 20)
    device = current_device()

    echo("measuring the bandwidth ceilings ...")
    ceilings = bandwidth_ceilings()

    n = problem_size("ch2_copy")
    inp = to_device(random_array(n, np.float32, seed=1))
    out = device_empty(n, np.float32)
    nbytes = 2 * n * 4

    def gbs_of(call: Callable[[], object]) -> float:
        return benchmark(call, warmup=warmup, repeat=repeat).bandwidth_gbs(nbytes)

    echo("sweeping the simple copy over block sizes ...")
    sweep = {tpb: gbs_of(lambda t=tpb: metrics.copy(out, inp, t)) for tpb in problem_size("ch2_block_sizes")}
    best_tpb = max(sweep, key=sweep.get)

    echo("copies with more bytes in flight per thread ...")
    per_thread = max(problem_size("ch2_elements_per_thread"))
    ilp_config = (best_tpb, per_thread)
    ilp = gbs_of(lambda: metrics.copy_ilp(out, inp, per_thread, best_tpb))
    wide_configs = [(best_tpb, e) for e in problem_size("ch2_elements_per_thread")[:2]]
    wide_results = {c: gbs_of(lambda c=c: metrics.copy_wide(out, inp, c[0], c[1])) for c in wide_configs}
    wide_config = max(wide_results, key=wide_results.get)

    same_size = None
    if not simulated:
        cupy = require_cupy("a device-to-device copy of the same arrays")
        src, dst = inp.__cuda_array_interface__["data"][0], out.__cuda_array_interface__["data"][0]
        kind = cupy.cuda.runtime.memcpyDeviceToDevice
        same_size = gbs_of(lambda: cupy.cuda.runtime.memcpyAsync(dst, src, n * 4, kind, 0))

    echo("the limiting-factor experiment (base, memory, math; with and without fast math) ...")
    n_limit = problem_size("ch2_limit")
    tpb_limit = problem_size("ch2_threads_per_block")
    b = to_device(random_array(n_limit, np.float32, seed=2))
    a = device_empty(n_limit, np.float32)
    limit = {fm: metrics.time_limit_experiment(a, b, fm, tpb_limit, repeat=repeat, warmup=warmup) for fm in (False, True)}

    echo("the host's cost of one launch ...")
    short = to_device(np.zeros(problem_size("ch2_short_kernel"), np.float32))
    launch = benchmark(lambda: metrics.copy(short, short), warmup=warmup, repeat=repeat)

    notes = [f"sizes: copies of {n} float32 ({n * 4 / 2**20:.0f} MiB per array), limiting-factor kernels on {n_limit} "
             f"float32 (the book: {metrics.BOOK_LIMIT_N}), {tpb_limit} threads per block."]
    return BenchReport(device.name, simulated, ceilings, n, sweep, ilp, ilp_config, wide_results[wide_config], wide_config,
                       same_size, limit, launch, notes)


def _book_copy_ceiling(gpu: str) -> float:
    return book.figure(f"ch2_tab2_1_copy_eccon_{gpu}").number


def _book_base_gbs(gpu: str, fastmath: bool) -> float:
    us = metrics.book_limit_times(gpu, fastmath)["base"]
    return metrics.BOOK_LIMIT_N * 4 * 2 / (us * 1e-6) / 1e9


def _book_classification(gpu: str, fastmath: bool) -> metrics.BoundClassification:
    t = metrics.book_limit_times(gpu, fastmath)
    return metrics.classify_bound(t["base"], t["memory"], t["math"])


def bench_table(report: BenchReport) -> Table:
    """The "then and now" table of chapter 2: the book's figures beside this device's."""
    real = not report.simulated
    copy = report.ceilings.copy_gbs if real else None

    def frac(gbs: float | None) -> float | None:
        return None if (copy is None or gbs is None) else gbs / copy

    def gbs_text(gbs: float | None) -> str | None:
        return None if gbs is None else f"{gbs:.0f} GB/s" if real else f"{gbs:.3g} GB/s (simulator)"

    rows: list[list[object]] = []
    theory = report.ceilings.theoretical_gbs
    for gpu in BOOK_GPUS:
        fig = book.figure(f"ch2_peakbw_{gpu}")
        rows.append(["theoretical peak bandwidth", f"{fig.value} GB/s", fig.gpu, fig.number / _book_copy_ceiling(gpu),
                     gbs_text(theory), frac(theory)])
    rows.append(["device-to-device copy (cudaMemcpy): the ceiling", None, None, None, gbs_text(report.ceilings.copy_gbs if real else None),
                 frac(copy)])
    if report.same_size_memcpy_gbs is not None:
        rows.append([f"device-to-device copy of the {report.copy_n}-element arrays", None, None, None,
                     gbs_text(report.same_size_memcpy_gbs), frac(report.same_size_memcpy_gbs)])
    tpb, best = report.best_copy
    for gpu in BOOK_GPUS:
        fig = book.figure(f"ch2_tab2_1_copy_eccon_{gpu}")
        rows.append([f"simple copy kernel, best block size (Table 2.1, ECC on); here {tpb} threads", f"{fig.value} GB/s", fig.gpu,
                     1.0, gbs_text(best), frac(best)])
    smallest = min(report.copy_sweep_gbs)
    rows.append([f"simple copy kernel, {smallest} threads per block", None, None, None,
                 gbs_text(report.copy_sweep_gbs[smallest]), frac(report.copy_sweep_gbs[smallest])])
    rows.append([f"copy, {report.ilp_config[1]} float32 per thread (ILP), {report.ilp_config[0]} threads", None, None, None,
                 gbs_text(report.ilp_gbs), frac(report.ilp_gbs)])
    rows.append([f"copy, 16-byte elements (complex128 view), {report.wide_config[1]} per thread, {report.wide_config[0]} threads",
                 None, None, None, gbs_text(report.wide_gbs), frac(report.wide_gbs)])
    for fastmath in (False, True):
        here = report.limit[fastmath]
        label = "fast math" if fastmath else "no fast math"
        for gpu in BOOK_GPUS:
            if fastmath:
                fig = book.figure(f"ch2_effbw_base_fastmath_{gpu}")
                book_text, book_gpu, value = f"{fig.value} GB/s", fig.gpu, fig.number
            else:  # the book prints only the time; the bandwidth follows from its n
                value = _book_base_gbs(gpu, False)
                book_text, book_gpu = f"{value:.0f} GB/s (from its time)", book.figure(f"ch2_limit_base_nofastmath_{gpu}").gpu
            rows.append([f"base kernel sin(b), {label}: effective bandwidth", book_text, book_gpu,
                         value / _book_copy_ceiling(gpu), gbs_text(here.base_gbs), frac(here.base_gbs)])
        for gpu in BOOK_GPUS:
            c = _book_classification(gpu, fastmath)
            rows.append([f"limiting factor, {label} (memory / math time over base)",
                         f"{c.label} ({c.memory_share:.0%} / {c.math_share:.0%})", book.figure(f"ch2_limit_base_nofastmath_{gpu}").gpu,
                         None, f"{here.classification.label} ({here.classification.memory_share:.0%} / "
                               f"{here.classification.math_share:.0%})", None])
    cputime = book.figure("ch2_cmdprof_increment_cputime_K20")
    host_us = None if report.launch.host_ms_per_call is None else 1e3 * report.launch.host_ms_per_call
    rows.append(["host time to issue one kernel launch", f"{cputime.value} us (CUDA Fortran)", cputime.gpu, None,
                 None if host_us is None else f"{host_us:.0f} us (Numba, checking launcher)", None])

    title = f"Chapter 2, then and now: the book's GPUs beside {report.device}"
    if report.simulated:
        title = "SIMULATOR MODE: times measure Python threads, not a GPU. " + title
    table = Table(
        headers=["quantity", "book figure", "its GPU", "book / its copy ceiling", "this device", "this / measured copy"],
        rows=rows,
        title=title,
        notes=[
            "Book fractions: over the book's best copy kernel with ECC on (Table 2.1) for the same GPU.",
            "This device's fractions: over the device-to-device copy measured in this run (gpucourse.bandwidth_ceilings()).",
            *report.notes,
        ],
    )
    if report.simulated:
        table.notes.append("Simulator mode: every GB/s and time above is a simulator figure (Python threads), "
                           "not a GPU figure; run on a GPU for real numbers.")
    else:
        name, gbs = report.best_copy_class
        table.notes.append(f"Fastest Numba copy: {name}, {gbs:.0f} GB/s = {gbs / report.ceilings.copy_gbs:.1%} of the measured copy.")
    return table


def run(repeat: int | None = None, echo: Callable[[str], None] = print) -> Table:
    """Measure and return the table (what `python -m gpucourse bench` prints)."""
    try:
        report = measure(repeat=repeat, echo=echo)
    except GPUOnlyFeature as exc:  # pragma: no cover - measure() only asks for CuPy on a GPU
        raise RuntimeError(str(exc)) from exc
    return bench_table(report)
