"""Chapter 2's measurements on this device: the ones the then-and-now report sets beside the book's figures.

`measure()` runs them (the bandwidth ceilings, a block-size sweep of the simple copy kernel, the
copies that keep more bytes in flight, the limiting-factor experiment with and without fast math,
and the host's cost of one launch) and returns a `BenchReport`. `gpucourse.thenandnow.ch2` lays it
out beside the book's figures; `python -m gpucourse bench` prints that part of the report. In
simulator mode the same code runs at simulator sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import mode
from .arrays import device_empty, random_array, require_cupy, to_device
from .device import current_device
from .kernels import metrics
from .report import data_size
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

    notes = [f"sizes: copies of {n} float32 ({data_size(n * 4)} per array), limiting-factor kernels on {n_limit} "
             f"float32 (the book: {metrics.BOOK_LIMIT_N}), {tpb_limit} threads per block."]
    return BenchReport(device.name, simulated, ceilings, n, sweep, ilp, ilp_config, wide_results[wide_config], wide_config,
                       same_size, limit, launch, notes)


def _book_classification(gpu: str, fastmath: bool) -> metrics.BoundClassification:
    """What limits the book's base kernel on `gpu`, from its three printed times."""
    t = metrics.book_limit_times(gpu, fastmath)
    return metrics.classify_bound(t["base"], t["memory"], t["math"])
