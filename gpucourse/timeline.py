"""A timeline of copies and kernels per stream, recorded with CUDA events, and its plot.

`TimelineRecorder.span(lane, kind, label, stream)` wraps one operation (a copy or a launch): on a
GPU it records an event in `stream` before and after it; `finish()` waits for the device and turns
the events into `Span`s, in ms from an origin event recorded first. In the simulator every
operation runs at once, one after the other, so the recorder reads the wall clock instead and the
timeline says so: it shows the order of the operations, never any overlap.

An event before an operation fires when its stream *reaches* the operation, which can be earlier
than when an engine *starts* it (a copy waits while the copy engine serves another stream). So,
unless told otherwise, `finish` starts each bar no earlier than the end of the previous operation
of the same kind: it assumes one engine per kind (one copy engine per direction, kernels that each
fill the GPU run one after another). The end of every bar is measured as is.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from . import mode

#: Colours of the kinds of operation in the plot (other kinds get matplotlib's next colour).
KIND_COLOURS = {"H2D": "tab:blue", "kernel": "tab:green", "D2H": "tab:orange"}


@dataclass(frozen=True)
class Span:
    """One operation on the timeline: its lane (stream), kind, label and start and end in ms."""

    lane: str
    kind: str
    label: str
    start_ms: float
    end_ms: float

    @property
    def duration_ms(self) -> float:
        """How long the operation ran, in ms."""
        return self.end_ms - self.start_ms


def _union_ms(intervals: Sequence[tuple[float, float]]) -> float:
    """Total length (ms) covered by a set of intervals, overlaps counted once."""
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def serialize_by_kind(spans: Sequence[Span]) -> list[Span]:
    """Start each span no earlier than the end of the previous span of its kind (one engine per kind)."""
    result: list[Span] = []
    previous_end: dict[str, float] = {}
    for span in sorted(spans, key=lambda s: (s.end_ms, s.start_ms)):
        start = max(span.start_ms, previous_end.get(span.kind, span.start_ms))
        start = min(start, span.end_ms)
        result.append(Span(span.lane, span.kind, span.label, start, span.end_ms))
        previous_end[span.kind] = span.end_ms
    return sorted(result, key=lambda s: (s.start_ms, s.lane))


@dataclass(frozen=True)
class Timeline:
    """Spans of copies and kernels (ms from a common origin) and the clock that measured them."""

    spans: tuple[Span, ...]
    clock: str

    @property
    def simulated(self) -> bool:
        """True when the spans come from the simulator's wall clock (they show order, not overlap)."""
        return self.clock.startswith("simulator")

    @property
    def lanes(self) -> list[str]:
        """The lanes (streams), in natural order: 'stream 2' before 'stream 10'."""

        def natural(lane: str) -> tuple:
            return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", lane))

        return sorted({span.lane for span in self.spans}, key=natural)

    @property
    def total_ms(self) -> float:
        """From the first start to the last end, in ms."""
        if not self.spans:
            return 0.0
        return max(s.end_ms for s in self.spans) - min(s.start_ms for s in self.spans)

    def busy_ms(self, kind: str | None = None) -> float:
        """Time (ms) during which at least one operation (of `kind`, if given) runs."""
        return _union_ms([(s.start_ms, s.end_ms) for s in self.spans if kind is None or s.kind == kind])

    def overlap_ms(self) -> float:
        """Time (ms) during which operations of two different kinds run at once (a copy beside a kernel, or H2D beside D2H)."""
        kinds = sorted({s.kind for s in self.spans})
        pieces = []
        for index, first in enumerate(kinds):
            for second in kinds[index + 1:]:
                for a in (s for s in self.spans if s.kind == first):
                    for b in (s for s in self.spans if s.kind == second):
                        start, end = max(a.start_ms, b.start_ms), min(a.end_ms, b.end_ms)
                        if end > start:
                            pieces.append((start, end))
        return _union_ms(pieces)

    def summary(self) -> str:
        """One line: total time, time busy per kind, and time with two kinds at once."""
        per_kind = ", ".join(f"{kind} {self.busy_ms(kind):.3g} ms" for kind in dict.fromkeys(s.kind for s in self.spans))
        text = f"total {self.total_ms:.3g} ms ({per_kind}); two kinds at once for {self.overlap_ms():.3g} ms"
        if self.simulated:
            text += " [simulator wall clock: operations run one after another, so nothing can overlap]"
        return text

    def plot(self, ax=None, title: str | None = None):
        """Draw one row per lane with a bar per operation, coloured by kind; return the axes."""
        import matplotlib.pyplot as plt

        from .plotting import mark_simulated

        lanes = self.lanes
        if ax is None:
            _, ax = plt.subplots(figsize=(9, 0.5 + 0.45 * max(1, len(lanes))))
        origin = min((s.start_ms for s in self.spans), default=0.0)
        drawn: set[str] = set()
        for span in self.spans:
            row = len(lanes) - 1 - lanes.index(span.lane)
            colour = KIND_COLOURS.get(span.kind)
            ax.broken_barh([(span.start_ms - origin, max(span.duration_ms, 1e-9))], (row - 0.35, 0.7),
                           facecolors=colour, edgecolor="black", linewidth=0.5,
                           label=span.kind if span.kind not in drawn else None)
            drawn.add(span.kind)
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels(list(reversed(lanes)))
        ax.set_xlabel("time (ms)" + (" — simulator wall clock" if self.simulated else ""))
        ax.set_xlim(0, 1.02 * max(self.total_ms, 1e-6))
        if title:
            ax.set_title(title, loc="left", fontsize=10)
        if drawn:  # above the plot, right of the title, so that no bar hides behind it
            ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8, ncol=len(drawn), frameon=False)
        ax.grid(axis="x", alpha=0.3)
        mark_simulated(ax, self.simulated, axis="x")  # the times run along x; the lanes stay
        return ax


class TimelineRecorder:
    """Records a span around each operation, with CUDA events on a GPU and the wall clock in the simulator."""

    def __init__(self, serialize_kinds: bool = True) -> None:
        self.serialize_kinds = serialize_kinds
        self._pending: list[tuple[str, str, str, object, object]] = []
        if mode.is_simulator():
            self._origin = time.perf_counter()
            self.clock = "simulator wall clock"
        else:
            from numba import cuda

            self._origin = cuda.event(timing=True)
            self._origin.record()  # the legacy default stream: after all work queued so far, before all queued later
            self.clock = "CUDA events per stream"

    @contextlib.contextmanager
    def span(self, lane: str, kind: str, label: str, stream=None) -> Iterator[None]:
        """Record the operations issued inside the block as one span in `lane` (they must go to `stream`)."""
        if mode.is_simulator():
            start = time.perf_counter()
            yield
            self._pending.append((lane, kind, label, start, time.perf_counter()))
            return
        from numba import cuda

        before, after = cuda.event(timing=True), cuda.event(timing=True)
        before.record(stream or 0)
        yield
        after.record(stream or 0)
        self._pending.append((lane, kind, label, before, after))

    def finish(self) -> Timeline:
        """Wait for the device and return the timeline of every span recorded."""
        spans = []
        if mode.is_simulator():
            for lane, kind, label, start, end in self._pending:
                spans.append(Span(lane, kind, label, 1e3 * (start - self._origin), 1e3 * (end - self._origin)))
        else:
            from numba import cuda

            cuda.synchronize()
            for lane, kind, label, before, after in self._pending:
                spans.append(Span(lane, kind, label, self._origin.elapsed_time(before), self._origin.elapsed_time(after)))
        if self.serialize_kinds and not mode.is_simulator():
            spans = serialize_by_kind(spans)
        return Timeline(tuple(spans), self.clock)


@contextlib.contextmanager
def maybe_span(recorder: TimelineRecorder | None, lane: str, kind: str, label: str, stream=None) -> Iterator[None]:
    """`recorder.span(...)` when a recorder is given; nothing otherwise (so untimed runs pay no event cost)."""
    if recorder is None:
        yield
    else:
        with recorder.span(lane, kind, label, stream):
            yield
