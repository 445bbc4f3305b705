"""Plots shared by the chapters: achieved bandwidth against the device's ceilings."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .timing import Ceilings

if TYPE_CHECKING:
    from .widgets import BandwidthPlotData

SIMULATOR_NOTE = "simulator: these times measure Python threads, not a GPU"


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def draw_ceilings(ax, ceilings: Ceilings | None) -> None:
    """Draw the theoretical peak and measured copy bandwidth as horizontal lines (GB/s)."""
    if ceilings is None or ceilings.simulated:
        return
    if ceilings.theoretical_gbs:
        ax.axhline(ceilings.theoretical_gbs, color="black", linestyle="--", linewidth=1,
                   label=f"theoretical peak {ceilings.theoretical_gbs:.0f} GB/s")
    ax.axhline(ceilings.copy_gbs, color="tab:green", linestyle=":", linewidth=1.5,
               label=f"measured copy {ceilings.copy_gbs:.0f} GB/s")


def mark_simulated(ax, simulated: bool, axis: str = "y", measured: bool = True) -> None:
    """In the simulator, leave no measured value to read: remove the plotted data and the value axis, and say why.

    `axis` is the axis that carries the measured times or rates ("y", or "x" for a timeline). With
    `measured=False` (a plot of accuracy, which the simulator computes as a GPU would) only the note is written.
    """
    if not simulated:
        return
    if not measured:
        ax.text(0.5, 0.5, SIMULATOR_NOTE, transform=ax.transAxes, ha="center", va="center",
                fontsize=11, color="tab:red", alpha=0.6, rotation=15)
        return
    from matplotlib.ticker import NullLocator

    value_axis = ax.yaxis if axis == "y" else ax.xaxis
    quantity = value_axis.get_label_text() or "these times"
    for artist in [*ax.lines, *ax.collections, *ax.patches, *ax.texts, *ax.images]:
        artist.remove()  # a time or rate of Python threads is no figure to read, nor a curve to compare
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    value_axis.set_label_text("")
    value_axis.set_major_locator(NullLocator())
    value_axis.set_minor_locator(NullLocator())
    ax.text(0.5, 0.5, not_measured_note(quantity), transform=ax.transAxes, ha="center", va="center", fontsize=10,
            color="tab:red")


def not_measured_note(quantity: str) -> str:
    """The words a simulator plot shows in place of its measured `quantity` (an axis label such as 'effective bandwidth (GB/s)')."""
    name = re.sub(r"\s*\([^)]*\)\s*$", "", quantity).strip() or "these times"  # the quantity without its unit
    return f"{name}: not measured in the simulator\n(its times are those of Python threads, not a GPU)"


def is_simulator_plot(ax) -> bool:
    """True if `mark_simulated` left its note on `ax` (for tests)."""
    return any("not measured in the simulator" in text.get_text() or text.get_text() == SIMULATOR_NOTE for text in ax.texts)


def plot_bandwidth(
    x: Sequence,
    gbs: Sequence[float],
    *,
    xlabel: str,
    ceilings: Ceilings | None = None,
    label: str | None = None,
    title: str | None = None,
    simulated: bool = False,
    ax=None,
    logx: bool = False,
):
    """Plot achieved GB/s over a sweep (one line), with the ceilings; return the axes."""
    return plot_bandwidth_lines({label: (x, gbs)}, xlabel=xlabel, ceilings=ceilings, title=title, simulated=simulated,
                                ax=ax, logx=logx)


def bar_bandwidth(
    labels: Sequence[str],
    gbs: Sequence[float],
    *,
    ceilings: Ceilings | None = None,
    title: str | None = None,
    simulated: bool = False,
    ax=None,
):
    """Bar chart of achieved GB/s for several kernels, with the ceilings; return the axes."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(max(5, 1.2 * len(labels)), 4))
    bars = ax.bar(list(labels), list(gbs), color="tab:blue")
    if not simulated:  # a simulator's GB/s is no figure to read off a bar
        for bar, value in zip(bars, gbs):
            ax.annotate(f"{value:.0f}" if value >= 10 else f"{value:.3g}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
    draw_ceilings(ax, ceilings)
    ax.set_ylabel("effective bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.tick_params(axis="x", labelrotation=20)
    if title:
        ax.set_title(title)
    mark_simulated(ax, simulated)
    if not simulated and ceilings is not None and not ceilings.simulated:
        ax.legend(loc="lower right", fontsize=8)
    return ax


def add_fraction_axis(ax, ceilings: Ceilings | None) -> None:
    """Add a right-hand axis that reads the left one's GB/s as fractions of the measured copy ceiling."""
    if ceilings is None or ceilings.simulated or not ceilings.copy_gbs:
        return
    copy_gbs = ceilings.copy_gbs
    right = ax.secondary_yaxis("right", functions=(lambda g: g / copy_gbs, lambda f: f * copy_gbs))
    right.set_ylabel("fraction of measured copy")


def plot_bandwidth_lines(
    lines: Mapping[str | None, tuple[Sequence, Sequence[float]]],
    *,
    xlabel: str,
    ceilings: Ceilings | None = None,
    title: str | None = None,
    simulated: bool = False,
    ax=None,
    logx: bool = False,
):
    """Plot several GB/s sweeps (label -> (x, GB/s)) on one axes, with the ceilings; return the axes."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    for label, (x, gbs) in lines.items():
        ax.plot(list(x), list(gbs), marker="o", label=label)
    draw_ceilings(ax, ceilings)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("effective bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    if title:
        ax.set_title(title)
    add_fraction_axis(ax, ceilings)
    ax.grid(alpha=0.3)
    mark_simulated(ax, simulated)
    if not simulated and (any(lines) or (ceilings is not None and not ceilings.simulated)):
        ax.legend(loc="lower right", fontsize=8)
    return ax


def draw_bandwidth_plot(data: BandwidthPlotData, ceilings: Ceilings | None = None, ax=None):
    """Draw what `Tuner.plot_data` computed: the lines, the ceilings and the highlighted point; return the axes."""
    lines = {label: ([str(v) for v in x] if any(isinstance(v, str) for v in x) else x, gbs)
             for label, (x, gbs) in data.lines.items()}
    ax = plot_bandwidth_lines(lines, xlabel=data.xlabel, ceilings=ceilings, title=data.title,
                              simulated=data.simulated, ax=ax, logx=data.logx)
    values = {v for x, _ in data.lines.values() for v in x}
    if data.logx:  # label the measured values themselves, not powers of two
        ticks = sorted(values)
        ax.set_xticks(ticks, [str(v) for v in ticks])
        ax.minorticks_off()
    elif values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        if len(values) <= 12:  # few values: tick exactly those (32, 64, 96 threads; 1, 2, 4 streams)
            ax.set_xticks(sorted(values))
        else:  # many: integers only, never 1.5 streams
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if data.simulated:  # no GB/s to draw: one row of dots per line, at the configurations that ran (and were checked)
        draw_configurations_ran(ax, lines, data.highlight)
    elif data.highlight is not None:
        x, gbs = data.highlight
        ax.plot([str(x) if isinstance(x, str) else x], [gbs], "r*", markersize=14, label="current")
        ax.legend(loc="lower right", fontsize=8)
    return ax


def draw_configurations_ran(ax, lines: Mapping[str | None, tuple[Sequence, Sequence[float]]], highlight: tuple | None) -> None:
    """A simulator's tuner plot: a row of dots per line at the values that ran, the current one starred; no value axis."""
    labels = [label or "measured" for label in lines]
    for row, (x, _) in enumerate(lines.values()):
        ax.plot(list(x), [row] * len(x), "o", color="tab:blue")
    if highlight is not None:
        ax.plot([highlight[0]], [0], "r*", markersize=14)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(-0.8, len(labels) - 0.2)
    for text in ax.texts:  # the note above the rows, not across them
        text.set_position((0.5, 0.85))
        text.set_fontsize(9)
        text.set_text(text.get_text() + "\ndots: the configurations that ran; star: the current one")


def describe_figure(fig) -> str:
    """A figure in words, for its text output and a web page's alt text: each plot's title and axes, and any note on it."""
    parts = []
    for ax in fig.axes:
        if not ax.get_visible() or not (ax.has_data() or ax.texts or ax.get_title()):
            continue
        notes = [" ".join(text.get_text().split()) for text in ax.texts if "not measured" in text.get_text() or text.get_text() == SIMULATOR_NOTE]
        value_axis = ax.get_ylabel() or "none"
        words = f"{ax.get_title() or 'plot'} (x: {ax.get_xlabel() or 'none'}; y: {value_axis}" + (f"; {'; '.join(notes)}" if notes else "")
        parts.append(words + ")")
    return "<Figure: " + (" | ".join(parts) or "empty") + ">"


def describe_figures_in_ipython() -> None:
    """In IPython, show each figure's text output as `describe_figure` words (a page's alt text), not '<Figure size 700x400>'."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter") or getattr(shell, "_gpucourse_figure_words", False):
        return
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    plt.close(plt.figure())  # load the backend as a first figure does: it sets its figure formats now, not in a later cell

    def register(*_) -> None:
        shell.display_formatter.formatters["text/plain"].for_type(Figure, lambda fig, printer, cycle: printer.text(describe_figure(fig)))

    # matplotlib's inline backend, once loaded, drops every formatter of Figure and sets its own images: so the words come
    # after it, and again after each cell (before the backend's own hook shows that cell's figures) should it be loaded anew
    register()
    shell.events.register("post_execute", register)
    shell._gpucourse_figure_words = True
