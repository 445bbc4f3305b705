"""The pieces of the then-and-now report: rows, the book GPUs' ceilings, the run context and progress."""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .. import book, mode
from ..device import DeviceInfo, current_device
from ..timing import Ceilings, bandwidth_ceilings

# ---------------------------------------------------------------------------------------------
# The book's GPUs and their ceilings


def book_copy_ceiling(gpu: str) -> tuple[float, str] | None:
    """(GB/s, what it is) of the best copy the book measured on `gpu` (Table 2.1), else its theoretical peak; None if neither is printed."""
    for name, figure_id in (("C870", "ch2_tab2_1_copy_eccoff_C870"), ("C1060", "ch2_tab2_1_copy_eccoff_C1060"),
                            ("C2050", "ch2_tab2_1_copy_eccon_C2050"), ("K20X", None), ("K20", "ch2_tab2_1_copy_eccon_K20")):
        if name in gpu:
            if figure_id is None:
                return None
            return book.figure(figure_id).number, "its best copy kernel (Table 2.1)"
    if "K10" in gpu:
        return book.figure("ch2_peakbw_K10").number, "its theoretical peak (no copy figure printed)"
    return None


def per_gpu_number(fig: book.BookFigure) -> float:
    """A book figure's number per GPU: 160.0 for the '2 × 160*' of a dual-GPU board (the K10), else its number."""
    return dataclasses.replace(fig, value=fig.value.split("×")[-1]).number


@dataclass(frozen=True)
class BookCell:
    """One book figure as a row shows it: value as printed, its GPU, and its fraction of that GPU's ceiling (GB/s figures)."""

    id: str
    text: str
    gpu: str
    fraction: float | None

    @classmethod
    def of(cls, figure_id: str, as_bandwidth: bool | None = None) -> BookCell:
        """The cell for a figure; a GB/s figure gets its fraction of the book GPU's copy ceiling."""
        fig = book.figure(figure_id)
        fraction = None
        bandwidth = fig.unit.startswith("GB/s") if as_bandwidth is None else as_bandwidth
        ceiling = book_copy_ceiling(fig.gpu) if bandwidth else None
        # A figure the ceiling itself is (the K10's theoretical peak stands in for its copy) is not set against itself.
        if ceiling is not None and not (ceiling[1].startswith("its theoretical peak") and "peak" in fig.quantity):
            try:
                fraction = per_gpu_number(fig) / ceiling[0]
            except ValueError:
                fraction = None
        unit = fig.unit.replace(" (printed ms)", "")
        return cls(figure_id, f"{fig.value} {unit}".strip(), fig.gpu, fraction)


@dataclass
class Row:
    """One line of the report: a quantity, the book's figures for it, this device's value and the library anchor."""

    quantity: str
    book: list[BookCell] = field(default_factory=list)
    here: float | str | None = None
    unit: str = ""
    here_fraction: float | None = None
    anchor: str | None = None
    note: str = ""

    @property
    def figure_ids(self) -> list[str]:
        """The ids of the book figures this row sets beside its measurement."""
        return [cell.id for cell in self.book]


def cells(*figure_ids: str) -> list[BookCell]:
    """Book cells for these ids (patterns ending in '*' take every id with that prefix)."""
    out = []
    for figure_id in figure_ids:
        if figure_id.endswith("*"):
            out.extend(BookCell.of(fig.id) for fig in book.figures(figure_id[:-1]))
        else:
            out.append(BookCell.of(figure_id))
    return out


@dataclass
class Section:
    """A titled group of rows (one experiment of the book), with an optional plot and notes."""

    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figure: object = None  # a matplotlib Figure, embedded in the HTML


@dataclass
class ChapterResult:
    """What one chapter's part of the report measured."""

    number: int
    title: str
    sections: list[Section] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    recorded: dict | None = None  # the run it comes from ({"device": ..., "date": ...}) when a report merges several runs

    @property
    def rows(self) -> list[Row]:
        """Every row of every section."""
        return [row for section in self.sections for row in section.rows]


# ---------------------------------------------------------------------------------------------
# Progress in a terminal or a notebook


class Progress:
    """A progress bar over the report's steps: a text bar in a terminal, an ipywidgets bar in a notebook."""

    def __init__(self, total: int, stream=None, widget: bool | None = None) -> None:
        self.total, self.done, self.started = max(1, total), 0, time.perf_counter()
        self.stream = stream or sys.stderr
        self._bar = self._label = None
        if widget is None:
            widget = _in_notebook()
        if widget:
            try:
                import ipywidgets
                from IPython.display import display

                self._bar = ipywidgets.IntProgress(min=0, max=self.total, description="report")
                self._label = ipywidgets.Label("starting ...")
                display(ipywidgets.HBox([self._bar, self._label]))
            except ImportError:  # pragma: no cover - ipywidgets is a dependency
                self._bar = None

    def step(self, label: str) -> None:
        """Mark the start of the next step, named `label`."""
        elapsed = time.perf_counter() - self.started
        if self._bar is not None:
            self._bar.value = self.done
            self._label.value = f"{self.done}/{self.total} {label} ({elapsed:.0f} s)"
        else:
            width = 30
            filled = int(width * self.done / self.total)
            self.stream.write(f"\r[{'#' * filled}{'-' * (width - filled)}] {self.done}/{self.total} {elapsed:5.0f} s  {label[:60]:60s}")
            self.stream.flush()
        self.done += 1

    def finish(self) -> None:
        """Fill the bar and end the line."""
        self.done = self.total
        elapsed = time.perf_counter() - self.started
        if self._bar is not None:
            self._bar.value = self.total
            self._label.value = f"done in {elapsed:.0f} s"
        else:
            self.stream.write(f"\r[{'#' * 30}] {self.total}/{self.total} {elapsed:5.0f} s  done{' ' * 56}\n")
            self.stream.flush()


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


# ---------------------------------------------------------------------------------------------
# The run context


@dataclass
class Context:
    """What every chapter's measurements share: the device, its ceilings, the mode, the repeat count and the progress."""

    device: DeviceInfo
    ceilings: Ceilings
    simulated: bool
    repeat: int
    progress: Progress | None = None

    def step(self, label: str) -> None:
        """Tell the progress bar that the next measurement starts."""
        if self.progress is not None:
            self.progress.step(label)

    def time(self, fn: Callable[[], object]):
        """`gpucourse.benchmark` of `fn` with the report's repeat count (no warm-up in the simulator, where nothing compiles)."""
        from ..timing import benchmark

        return benchmark(fn, repeat=self.repeat, warmup=0 if self.simulated else 2)

    def fraction(self, gbs: float | None) -> float | None:
        """`gbs` over the measured copy, or None in the simulator (its figures are not GPU figures)."""
        if gbs is None or self.simulated:
            return None
        return gbs / self.ceilings.copy_gbs

    @classmethod
    def make(cls, repeat: int | None = None, progress: Progress | None = None) -> Context:
        """The context for this process's device."""
        simulated = mode.is_simulator()
        return cls(current_device(), bandwidth_ceilings(), simulated, repeat or (1 if simulated else 10), progress)


@dataclass(frozen=True)
class ChapterPlan:
    """A chapter's part of the report: its steps (for the progress bar), its measurement, and the figures it does not measure."""

    number: int
    title: str
    steps: tuple[str, ...]
    measure: Callable[[Context], list[Section]]
    not_measured: dict[str, str]  # id pattern (regex) -> why the course does not measure it

    def explained(self, figure_id: str) -> str | None:
        """Why `figure_id` has no row, if this chapter says so."""
        for pattern, reason in self.not_measured.items():
            if re.fullmatch(pattern, figure_id):
                return reason
        return None


def ids_of(sections: Iterable[Section]) -> set[str]:
    """Every book figure id that the sections' rows set beside a measurement."""
    return {figure_id for section in sections for row in section.rows for figure_id in row.figure_ids}
