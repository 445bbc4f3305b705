"""How fast a student's kernel is, beside the reference and the copy ceiling, measured in one run (GPU only).

Absolute times say little (they depend on the GPU); ratios measured together say a lot. `compare_speed`
times the student's call and the reference's in interleaved samples with `gpucourse.benchmark` (both
launched the same way, on the same arrays), takes the median of the paired ratios and the
device-to-device copy ceiling of the same session, and turns a slow answer into a sentence that says
what is slow and where to look. The reference is the kernel the exercise describes, written plainly,
so that a right answer lands near a ratio of 1 on any GPU, well above the bar. The arrays must not
fit in the L2 cache (`check_beyond_l2`; `elements_beyond_l2` sizes them), so that no figure can
exceed the measured ceiling. `history()` lists every comparison made in this process; with
GPUCOURSE_SPEED_LOG naming a file, each is also appended to it as a line of JSON (the GPU CI runs each
solution's checks several times and records the lowest ratio: it reads that file, since the screen of
answer cells refuses any cell that reaches into `gpucourse.checks`, its own probes too). In the simulator a timing
says nothing about a GPU: `gpu_only_note` prints one line saying that this part is judged only on a GPU.
"""

from __future__ import annotations

import json
import os
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from .. import mode
from ..device import current_device
from ..timing import bandwidth_ceilings, benchmark, effective_bandwidth_gbs

#: A right answer need not match the reference, but it must reach this fraction of its bandwidth.
SLOWER_THAN_REFERENCE = 0.7
#: Interleaved samples of each kernel per comparison, and timed batches per sample.
ROUNDS, REPEAT = 5, 5
#: Arrays timed by a check are at least this many times the L2 cache.
L2_FACTOR = 4

_HISTORY: list[dict] = []


def history() -> list[dict]:
    """Every speed comparison made in this process, in order: {'exercise', 'ratio' (yours / the reference's), 'bar', 'passed'}."""
    return [dict(entry) for entry in _HISTORY]


def elements_beyond_l2(itemsize: int, at_least: int = 1 << 20) -> int:
    """Elements of `itemsize` bytes for one timed array of a check: L2_FACTOR times the L2 cache, and at least `at_least`."""
    l2 = current_device().l2_cache_bytes or 0
    return max(at_least, -(-L2_FACTOR * l2 // itemsize))


def gpu_only_note(exercise: str, what: str, verb: str = "is", reason: str = "simulator times are Python's, not a GPU's") -> None:
    """In the simulator, say in one line (not a check mark) that `what` is judged only on a GPU, and why."""
    print(f"\u23f1 {exercise}: {what} {verb} judged only on a GPU ({reason}).")


def check_beyond_l2(bytes_per_array: int, what: str) -> None:
    """Refuse a timing whose arrays could live in the L2 cache (a course bug: fix the size in gpucourse.sizes)."""
    l2 = current_device().l2_cache_bytes or 0
    if bytes_per_array < 2 * l2:
        raise ValueError(f"{what}: {bytes_per_array / 1e6:.1f} MB per array fits in twice the {l2 / 1e6:.0f} MB L2 cache; "
                         "timings would exceed the memory ceiling. Use a larger size in gpucourse.sizes.")


@dataclass(frozen=True)
class SpeedComparison:
    """Bandwidths (GB/s) of the student's call, the reference's, and the copy ceiling, measured together."""

    mine_gbs: float
    reference_gbs: float
    copy_gbs: float
    paired_ratio: float | None = None  # the median of the ratios of samples taken side by side
    waits_at: str | None = None  # where the student's call waits for the GPU (gpucourse.timing.benchmark), if it does

    @property
    def mine_fraction(self) -> float:
        """The student's bandwidth as a fraction of the copy ceiling (at most 1)."""
        return min(self.mine_gbs / self.copy_gbs, 1.0)

    @property
    def reference_fraction(self) -> float:
        """The reference's bandwidth as a fraction of the copy ceiling (at most 1)."""
        return min(self.reference_gbs / self.copy_gbs, 1.0)

    @property
    def ratio(self) -> float:
        """Student over reference (from samples taken side by side, where there are some)."""
        return self.paired_ratio if self.paired_ratio is not None else self.mine_gbs / self.reference_gbs

    def summary(self) -> str:
        """One phrase: both bandwidths and their share of the copy ceiling."""
        return (f"{self.mine_gbs:.0f} GB/s = {self.mine_fraction:.0%} of the measured device-to-device copy "
                f"(the reference: {self.reference_gbs:.0f} GB/s = {self.reference_fraction:.0%})")


def compare_speed(mine: Callable[[], object], reference: Callable[[], object], bytes_moved: int, bytes_per_array: int,
                  what: str, rounds: int = ROUNDS) -> SpeedComparison:
    """Time `mine()` and `reference()` in interleaved samples (GPU only); bandwidths from `bytes_moved` per call.

    Each round times one sample of each, the two in a random order, so that a drift of the clocks or
    of a neighbour's load touches both alike; the ratio is the median of the rounds' ratios.
    """
    if mode.is_simulator():
        raise RuntimeError("speed is compared on a GPU only")
    check_beyond_l2(bytes_per_array, what)
    ceiling = bandwidth_ceilings()
    order = random.Random(len(_HISTORY))
    mine_ms, reference_ms = [], []
    waits_at = None
    for _ in range(rounds):
        pair = {}
        for name in order.sample(["mine", "reference"], 2):
            timing = benchmark(mine if name == "mine" else reference, repeat=REPEAT)
            pair[name] = timing.median_ms
            if name == "mine" and timing.waits_at:
                waits_at = timing.waits_at
        mine_ms.append(pair["mine"])
        reference_ms.append(pair["reference"])
    mine_gbs = effective_bandwidth_gbs(bytes_moved, statistics.median(mine_ms))
    reference_gbs = effective_bandwidth_gbs(bytes_moved, statistics.median(reference_ms))
    paired = statistics.median(r / m for m, r in zip(mine_ms, reference_ms))
    return SpeedComparison(mine_gbs, reference_gbs, ceiling.copy_gbs, paired, waits_at)


def record(exercise: str, ratio: float, bar: float) -> bool:
    """Add one speed comparison to `history()` (`ratio`: the student's speed over the reference's); True if it reaches `bar`."""
    passed = ratio >= bar
    entry = {"exercise": exercise, "ratio": round(float(ratio), 4), "bar": bar, "passed": passed}
    _HISTORY.append(entry)
    log = os.environ.get("GPUCOURSE_SPEED_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as file:
            file.write(json.dumps(entry) + "\n")
    return passed


def speed_problem(comparison: SpeedComparison, what: str, where_to_look: str, slowest: float = SLOWER_THAN_REFERENCE) -> str | None:
    """Words for a student's kernel below `slowest` times the reference's bandwidth (None if it keeps up)."""
    if comparison.ratio >= slowest:
        return None
    if comparison.waits_at:  # the cause is the host, not the kernel: say that first
        return (f"your {what} is right, but each call makes the host wait for the GPU ({comparison.waits_at}): the GPU "
                f"idles while Python issues the next launch, {comparison.ratio:.0%} of the reference's speed (at least {slowest:.0%} "
                "expected). Queue the work instead: set or clear device arrays with a kernel, not a copy from the host.")
    return (f"your {what} is right but slow: {comparison.ratio:.0%} of the reference's speed (at least {slowest:.0%} "
            f"expected); it reaches {comparison.mine_fraction:.0%} of the copy ceiling ({comparison.mine_gbs:.0f} GB/s), the "
            f"reference {comparison.reference_fraction:.0%} ({comparison.reference_gbs:.0f} GB/s), measured together on this GPU. "
            f"{where_to_look}")
