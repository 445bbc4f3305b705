"""Time several ways of doing one job and report each as work per second and as bandwidth against the ceilings.

A Monte Carlo step is judged by samples (or numbers, or paths) per second; a kernel that streams
memory also by its effective bandwidth as a fraction of its ceiling: the measured copy for a job that reads
and writes, the theoretical peak for one-way traffic (a generator only writes, a sum only reads), which
can outrun a copy. `measure` times each
function with `gpucourse.benchmark` (GPU time, and the back-to-back time a loop of plain calls
gets) and `table` lays the results out with the device's ceilings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .report import Table
from .timing import Ceilings, Timing, benchmark


@dataclass(frozen=True)
class Throughput:
    """One timed way of doing the job: `items` units of work and `bytes_moved` bytes per call."""

    name: str
    timing: Timing
    items: int
    bytes_moved: int | None = None
    one_way: bool = False

    @property
    def items_per_second(self) -> float:
        """Units of work per second at the median GPU time."""
        return self.items / (self.timing.median_ms * 1e-3)

    @property
    def gbs(self) -> float | None:
        """Effective bandwidth in GB/s (None when the job's bytes are not counted)."""
        return None if self.bytes_moved is None else self.timing.bandwidth_gbs(self.bytes_moved)

    def fraction_of_ceiling(self, ceilings: Ceilings | None) -> float | None:
        """The bandwidth over its ceiling (`Ceilings.fraction`; None in the simulator or without bytes)."""
        if self.gbs is None or ceilings is None or ceilings.simulated:
            return None
        return ceilings.fraction(self.gbs, self.one_way)

    def record(self, ceilings: Ceilings | None = None) -> dict:
        """The numbers as a dict, for JSON records."""
        return {"name": self.name, "ms": self.timing.median_ms, "min_ms": self.timing.min_ms, "max_ms": self.timing.max_ms,
                "back_to_back_ms": self.timing.back_to_back_ms, "items": self.items, "items_per_s": self.items_per_second,
                "bytes": self.bytes_moved, "gbs": self.gbs, "one_way": self.one_way,
                "fraction_of_ceiling": self.fraction_of_ceiling(ceilings),
                "clock": self.timing.clock, "verdict": self.timing.verdict()}


def measure(calls: Mapping[str, Callable[[], object]], items: int, bytes_moved: Mapping[str, int | None] | int | None = None,
            repeat: int | None = None, warmup: int = 2, one_way: bool = False) -> list[Throughput]:
    """Time every function in `calls` (each does `items` units of work, moving `bytes_moved` bytes: one number, or per name).

    `one_way`: the bytes are only read or only written, so the theoretical peak is their ceiling.
    """
    rows = []
    for name, call in calls.items():
        nbytes = bytes_moved.get(name) if isinstance(bytes_moved, Mapping) else bytes_moved
        rows.append(Throughput(name, benchmark(call, repeat=repeat, warmup=warmup), int(items), nbytes, one_way))
    return rows


def table(rows: list[Throughput], ceilings: Ceilings | None, *, title: str, unit: str = "items") -> Table:
    """The rows as a table: time, work per second, GB/s and fraction of its ceiling, and the back-to-back time."""
    simulated = any(row.timing.simulated for row in rows)
    real = ceilings is not None and not ceilings.simulated and not simulated
    if simulated:  # Python threads: their time, labelled; no rate of work or bytes (it would describe the simulator, not a GPU)
        out = Table(["variant", "simulator time (ms)"], title=title)
        out.rows += [[row.name, row.timing.median_ms] for row in rows]
        out.notes.append(f"Simulator: the times measure Python threads, not a GPU; {unit}/s and GB/s not measured in the simulator.")
        return out
    headers = ["variant", "GPU time (ms)", f"{unit}/s", "GB/s"] + (["of ceiling", "back-to-back (ms)"] if real else [])
    out = Table(headers, title=title)
    for row in rows:
        cells = [row.name, row.timing.median_ms, f"{row.items_per_second:.3e}", row.gbs]
        if real:
            cells += [row.fraction_of_ceiling(ceilings), row.timing.back_to_back_ms]
        out.rows.append(cells)
    if real:
        out.notes.append(f"Ceilings: {ceilings}. GB/s counts the bytes each variant must move; '—' where it has no fixed count.")
        one_way = [row.name for row in rows if row.one_way and row.gbs is not None]
        if one_way:
            out.notes.append("'of ceiling' is over the theoretical peak for the rows whose bytes are only read or only written (they can "
                             "outrun a copy, which mixes reads and writes): " + "; ".join(one_way) + "; over the measured copy for the others.")
        slow = [row.name for row in rows if row.timing.host_limited or row.timing.waits_at]
        if slow:
            out.notes.append("Called back to back, these run slower than their GPU time (the host sets the pace): " + "; ".join(slow) + ".")
    return out
