"""Tables that set the book's figures beside this machine's: "then and now"."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import book, mode
from .device import DeviceInfo


def number(value: float) -> str:
    """A measured value (GB/s, GFLOP/s, ms) for a line of text: 3 significant digits, never 0.0 for a tiny nonzero value."""
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    size = abs(value)
    if size >= 100:
        return f"{value:.0f}"
    if size >= 0.01 or size == 0:
        return f"{value:.3g}"
    return f"{value:.2e}"  # simulator rates such as 1.23e-05 GB/s


#: What a line says in the simulator where a GPU would give a rate or a conclusion.
NOT_MEASURED = "not measured in the simulator"


def _simulated(simulated: bool | None) -> bool:
    return mode.is_simulator() if simulated is None else simulated


def rate(value: float | None, unit: str = "GB/s", simulated: bool | None = None) -> str:
    """A measured rate with its unit ('912 GB/s'); in the simulator, '<unit> not measured in the simulator' instead of a number.

    A simulated kernel runs as Python threads, so its bytes or flops per second say nothing of a GPU:
    printed as numbers they read as '0.0 GB/s' or '3.5e-05 GB/s'. `simulated` defaults to the mode.
    """
    if _simulated(simulated):
        return f"{unit} {NOT_MEASURED}"
    return "—" if value is None else f"{number(value)} {unit}"


def finding(text: str, what: str, simulated: bool | None = None) -> str:
    """A conclusion drawn from measured times: `text` on a GPU; in the simulator '<what>: not measured in the simulator'."""
    return f"{what}: {NOT_MEASURED}" if _simulated(simulated) else text


def gpu_value(value, simulated: bool | None = None):
    """A measured rate or comparison for a table cell: `value` on a GPU; None (shown '—') in the simulator."""
    return None if _simulated(simulated) else value


def data_size(nbytes: float) -> str:
    """A size in bytes for text, in binary units: '512 B', '2.5 KiB', '64 MiB', '6.40 GiB' (never '0 MiB')."""
    value, unit = float(nbytes), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, bigger
    if unit == "B":
        return f"{int(value)} B"
    return f"{value:.3g} {unit}" if abs(value) < 1000 else f"{value:.0f} {unit}"


@dataclass
class Table:
    """A small table that renders as HTML in a notebook and as aligned text in a terminal."""

    headers: Sequence[str]
    rows: list[Sequence[object]] = field(default_factory=list)
    title: str = ""
    notes: list[str] = field(default_factory=list)

    @staticmethod
    def _cell(value: object) -> str:
        if value is None or (isinstance(value, float) and value != value):  # None or NaN: not measured
            return "—"
        if isinstance(value, float):  # 4 significant digits, and whole numbers from 1000 on: 0.5971, 1948, 15580, never 1.558e+04
            if 1e3 <= abs(value) < 1e9:
                return f"{value:.0f}"
            return f"{value:.4g}" if abs(value) < 1e9 else f"{value:.3e}"
        return str(value)

    def __str__(self) -> str:
        cells = [[self._cell(v) for v in row] for row in self.rows]
        widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h)) for i, h in enumerate(self.headers)]
        line = "  ".join(str(h).ljust(w) for h, w in zip(self.headers, widths))
        out = ([self.title] if self.title else []) + [line, "-" * len(line)]
        out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
        return "\n".join(out + self.notes)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in self.headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(self._cell(v))}</td>" for v in row) + "</tr>" for row in self.rows
        )
        caption = f"<caption style='caption-side:top;text-align:left'><b>{html.escape(self.title)}</b></caption>" if self.title else ""
        notes = "".join(f"<br><small>{html.escape(n)}</small>" for n in self.notes)
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


BOOK_GPUS = ("Tesla C870", "Tesla C1060", "Tesla C2050", "Tesla C2070", "Tesla M2090", "Tesla K10", "Tesla K20", "Tesla K20X")


def _dims(values: tuple[int, int, int]) -> str:
    return " × ".join(str(v) for v in values)


def _kilo(value: int | None) -> str | None:
    return None if value is None else f"{value // 1024} K"


def _threads_and_warps(device: DeviceInfo) -> str | None:
    threads = device.max_threads_per_multiprocessor
    return None if threads is None else f"{threads} ({threads // device.warp_size})"


# Appendix A quantity -> how to read the same quantity off this device (None: the driver does not say).
_DEVICE_READERS: dict[str, Callable[[DeviceInfo], object] | None] = {
    "compute capability": lambda d: d.cc,
    "number of multiprocessors": lambda d: d.multiprocessors,
    "core clock": lambda d: None if d.clock_rate_khz is None else round(d.clock_rate_khz / 1e6, 3),
    "single-precision cores per multiprocessor": None,
    "total single-precision cores": None,
    "single-precision peak (multiply+add)": None,
    "double-precision cores per multiprocessor": None,
    "total double-precision cores": None,
    "double-precision peak (multiply+add)": None,
    "total global memory": lambda d: None if d.total_memory_bytes is None else round(d.total_memory_bytes / 1e9, 1),
    "constant memory": lambda d: None if d.total_constant_memory is None else d.total_constant_memory // 1024,
    "memory clock": lambda d: None if d.memory_clock_khz is None else round(d.memory_clock_khz / 1e3),
    "memory bus width": lambda d: d.memory_bus_bits,
    "theoretical peak bandwidth": lambda d: None if d.theoretical_bandwidth_gbs is None else round(d.theoretical_bandwidth_gbs, 1),
    "32-bit registers per multiprocessor": lambda d: _kilo(d.max_registers_per_multiprocessor),
    "maximum registers per thread": None,
    "shared memory per multiprocessor": lambda d: _kilo(d.max_shared_per_multiprocessor),
    "L1 cache per multiprocessor": None,
    "constant memory cache per multiprocessor": None,
    "maximum thread blocks per multiprocessor": lambda d: d.max_blocks_per_multiprocessor,
    "maximum threads per thread block": lambda d: d.max_threads_per_block,
    "maximum threads (warps) per multiprocessor": lambda d: _threads_and_warps(d),
    "maximum grid dimensions": lambda d: _dims(d.max_grid_dim),
    "maximum block dimensions": lambda d: _dims(d.max_block_dim),
}


def tesla_table(device: DeviceInfo) -> Table:
    """The book's Appendix A table of Tesla GPUs, with a last column for `device` as its driver reports it."""
    by_quantity: dict[str, dict[str, book.BookFigure]] = {}
    units: dict[str, str] = {}
    for fig in book.figures("appA_"):
        by_quantity.setdefault(fig.quantity, {})[fig.gpu] = fig
        units.setdefault(fig.quantity, fig.unit)
    column = "simulator (no GPU)" if device.simulated else device.name
    table = Table(
        headers=["quantity", "unit", *(g.replace("Tesla ", "") for g in BOOK_GPUS), column],
        title="Tesla GPUs of the book (Appendix A) beside this device",
        notes=[
            "Book values as printed: '*' = lower with ECC on, '2 ×' = per GPU of the dual-GPU K10.",
            "'—' in the last column: the driver does not report it (core counts follow from the architecture).",
        ],
    )
    for quantity, per_gpu in by_quantity.items():
        reader = _DEVICE_READERS.get(quantity)
        now = reader(device) if reader is not None else None
        table.rows.append([quantity, units[quantity], *(per_gpu[g].value if g in per_gpu else None for g in BOOK_GPUS), now])
    return table
