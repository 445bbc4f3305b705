"""The roofline: how fast a kernel can be, given how many flops it does per byte it moves.

A kernel that does `flops` floating-point operations and moves `bytes` bytes through device memory
has an arithmetic intensity I = flops / bytes (flop/byte). Memory can feed it at most
I x bandwidth flops per second; the arithmetic units can do at most the compute peak. So

    attainable GFLOP/s = min(compute peak GFLOP/s, I x bandwidth GB/s)

and the two meet at the ridge point I* = compute / bandwidth. Left of the ridge a kernel is
memory-bound, right of it compute-bound. The functions here compute these numbers; `plot_roofline`
draws them; `roofline_widget` reruns a kernel as a slider changes its intensity.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import mode
from .timing import effective_bandwidth_gbs


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """Flops per byte moved through device memory."""
    if bytes_moved <= 0:
        raise ValueError(f"bytes moved must be positive; got {bytes_moved}")
    if flops < 0:
        raise ValueError(f"flops must be >= 0; got {flops}")
    return flops / bytes_moved


def attainable_gflops(intensity: float, bandwidth_gbs: float, compute_gflops: float) -> float:
    """The roof at `intensity` flop/byte: min(compute peak, intensity x bandwidth), in GFLOP/s."""
    if intensity < 0 or bandwidth_gbs <= 0 or compute_gflops <= 0:
        raise ValueError("intensity must be >= 0, bandwidth and compute peak positive")
    return min(compute_gflops, intensity * bandwidth_gbs)


def ridge_point(bandwidth_gbs: float, compute_gflops: float) -> float:
    """The intensity (flop/byte) where the memory roof meets the compute roof."""
    if bandwidth_gbs <= 0 or compute_gflops <= 0:
        raise ValueError("bandwidth and compute peak must be positive")
    return compute_gflops / bandwidth_gbs


def gflops(flops: float, milliseconds: float) -> float:
    """GFLOP/s (1e9 flop/s) for `flops` operations in `milliseconds` ms."""
    if milliseconds <= 0:
        raise ValueError(f"time must be positive; got {milliseconds} ms")
    return flops / (milliseconds * 1e-3) / 1e9


@dataclass(frozen=True)
class Roof:
    """The two ceilings of a roofline: memory bandwidth in GB/s and compute rate in GFLOP/s."""

    bandwidth_gbs: float
    compute_gflops: float
    bandwidth_label: str = "measured copy"
    compute_label: str = "measured FMA rate"
    simulated: bool = False

    @property
    def ridge(self) -> float:
        """The ridge point in flop/byte."""
        return ridge_point(self.bandwidth_gbs, self.compute_gflops)

    def attainable(self, intensity: float) -> float:
        """The roof's GFLOP/s at `intensity` flop/byte."""
        return attainable_gflops(intensity, self.bandwidth_gbs, self.compute_gflops)


@dataclass(frozen=True)
class RooflinePoint:
    """One measured kernel: its flops, its bytes and its time (ms)."""

    name: str
    flops: float
    bytes_moved: float
    ms: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in flop/byte."""
        return arithmetic_intensity(self.flops, self.bytes_moved)

    @property
    def gflops(self) -> float:
        """Achieved GFLOP/s."""
        return gflops(self.flops, self.ms)

    @property
    def gbs(self) -> float:
        """Achieved effective bandwidth in GB/s."""
        return effective_bandwidth_gbs(self.bytes_moved, self.ms)

    def bound(self, roof: Roof) -> str:
        """'memory' left of the ridge point, 'compute' from it on."""
        return "memory" if self.intensity < roof.ridge else "compute"

    def fraction_of_roof(self, roof: Roof) -> float:
        """Achieved GFLOP/s over the roof at this intensity (1.0: on the roof)."""
        return self.gflops / roof.attainable(self.intensity)


@dataclass
class RooflineData:
    """Everything a roofline plot shows, as numbers."""

    roof: Roof
    curve_x: list[float]
    curve_y: list[float]
    points: list[dict[str, Any]]
    extra_roofs: list[Roof] = field(default_factory=list)
    extra_curves: list[tuple[list[float], list[float]]] = field(default_factory=list)
    simulated: bool = False

    @property
    def ridge(self) -> float:
        """The ridge point of the main roof, in flop/byte."""
        return self.roof.ridge


def roof_curve(roof: Roof, low: float, high: float, samples: int = 64) -> tuple[list[float], list[float]]:
    """Intensities from `low` to `high` (log-spaced, the ridge included) and the roof's GFLOP/s at each."""
    if not 0 < low < high:
        raise ValueError(f"need 0 < low < high; got {low}, {high}")
    step = (math.log10(high) - math.log10(low)) / (samples - 1)
    xs = sorted({low * 10 ** (k * step) for k in range(samples)} | ({roof.ridge} if low < roof.ridge < high else set()))
    return xs, [roof.attainable(x) for x in xs]


def roofline_data(roof: Roof, points: Sequence[RooflinePoint] = (), extra_roofs: Sequence[Roof] = (),
                  low: float | None = None, high: float | None = None) -> RooflineData:
    """The roof (and any extra roofs, e.g. theoretical peaks) over a range that holds every point and ridge."""
    usable = [p for p in points if p.flops > 0]
    intensities = [p.intensity for p in usable] + [r.ridge for r in (roof, *extra_roofs)]
    low = low or min(intensities) / 4
    high = high or max(intensities) * 4
    x, y = roof_curve(roof, low, high)
    rows = [
        {
            "name": p.name,
            "intensity": p.intensity,
            "gflops": p.gflops,
            "gbs": p.gbs,
            "attainable": roof.attainable(p.intensity),
            "fraction_of_roof": p.fraction_of_roof(roof),
            "bound": p.bound(roof),
        }
        for p in usable
    ]
    if not roof.simulated:
        check_under_roof(usable, roof)
    extra = [roof_curve(r, low, high) for r in extra_roofs]
    return RooflineData(roof, x, y, rows, list(extra_roofs), extra, simulated=roof.simulated)


#: How far above the measured roof a point may sit before its counts are called wrong: the roof is itself measured (a copy and an
#: FMA loop, each the median of its runs), so a kernel may pass it by the noise of two measurements, never by more.
ROOF_TOLERANCE = 1.10


def check_under_roof(points: Sequence[RooflinePoint], roof: Roof) -> None:
    """Raise ValueError, explained, for a measured point above the roof: on a GPU that means a wrong flop or byte count."""
    for point in points:
        attainable = roof.attainable(point.intensity)
        if point.gflops > ROOF_TOLERANCE * attainable:
            raise ValueError(
                f"{point.name} reaches {point.gflops:.4g} GFLOP/s at {point.intensity:.3g} flop/byte, {point.gflops / attainable:.2f} times "
                f"the roof there ({attainable:.4g} GFLOP/s). No kernel runs above the roof: memory feeds at most intensity x "
                f"{roof.bandwidth_gbs:.4g} GB/s, the arithmetic units at most {roof.compute_gflops:.4g} GFLOP/s. So a count is wrong: "
                "bytes counted that never reach device memory (data served from the L2 cache: make the arrays larger than the L2), "
                "too many flops counted (an operation the compiler removed or merged), or a time that does not cover the work.")


def roofline_table(data: RooflineData):
    """The points of a roofline as a table: intensity, achieved and attainable GFLOP/s, and the bound."""
    from .report import NOT_MEASURED, Table

    if data.simulated:  # a host memory copy set against simulated flops is no roof: only the kernels' intensities are real
        table = Table(headers=["kernel", "flop/byte"], title="Roofline (simulator): each kernel's arithmetic intensity",
                      notes=[f"GFLOP/s, GB/s, the roof and its ridge: {NOT_MEASURED} (its times measure Python threads, not a GPU)."])
        table.rows += [[p["name"], p["intensity"]] for p in data.points]
        return table
    table = Table(
        headers=["kernel", "flop/byte", "GFLOP/s", "GB/s", "roof (GFLOP/s)", "fraction of roof", "side of the ridge"],
        title=f"Roofline: ridge at {data.ridge:.3g} flop/byte ({data.roof.compute_gflops:.4g} GFLOP/s / "
              f"{data.roof.bandwidth_gbs:.4g} GB/s)",
    )
    for p in data.points:
        table.rows.append([p["name"], p["intensity"], p["gflops"], p["gbs"], p["attainable"], p["fraction_of_roof"], p["bound"]])
    return table


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def plot_roofline(data: RooflineData, ax=None, highlight: str | None = None):
    """Draw a roofline (log-log) with its ridge point and the measured kernels; return the axes.

    In the simulator there is no roof (a host copy and simulated flops) and no rate to place: only each kernel's
    arithmetic intensity is real, so the plot marks the intensities on their axis and says what was not measured.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    if data.simulated:
        return _plot_intensities(data, ax, highlight)
    roof = data.roof
    label = f"roof: {roof.bandwidth_label} {_number(roof.bandwidth_gbs)} GB/s,\n{roof.compute_label} {_number(roof.compute_gflops)} GFLOP/s"
    ax.loglog(data.curve_x, data.curve_y, color="black", linewidth=2, label=label)
    for extra, (x, y) in zip(data.extra_roofs, data.extra_curves):
        label = f"{extra.bandwidth_label} {_number(extra.bandwidth_gbs)} GB/s,\n{extra.compute_label} {_number(extra.compute_gflops)} GFLOP/s"
        ax.loglog(x, y, color="grey", linestyle="--", linewidth=1, label=label)
    ax.axvline(data.ridge, color="tab:green", linestyle=":", linewidth=1)
    ax.annotate(f"ridge {data.ridge:.3g} flop/B", (data.ridge, roof.compute_gflops), textcoords="offset points",
                xytext=(4, -14), fontsize=8, color="tab:green")
    for p in data.points:
        style = "r*" if p["name"] == highlight else "o"
        ax.loglog([p["intensity"]], [p["gflops"]], style, markersize=12 if style == "r*" else 7, label=p["name"])
    ax.set_xlabel("arithmetic intensity (flop / byte of device memory)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Roofline")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the plot: no point hides behind it
    return ax


def _plot_intensities(data: RooflineData, ax, highlight: str | None):
    """The simulator's roofline: each kernel's arithmetic intensity on a log axis, no roof, no GFLOP/s axis."""
    from matplotlib.ticker import NullLocator

    from .plotting import not_measured_note

    for p in data.points:
        star = p["name"] == highlight
        ax.axvline(p["intensity"], color="tab:red" if star else "tab:blue", linewidth=2.5 if star else 1.5, alpha=0.8)
        ax.annotate(p["name"], (p["intensity"], 0.05), xycoords=("data", "axes fraction"), rotation=90, fontsize=8,
                    xytext=(3, 0), textcoords="offset points", va="bottom")
    ax.set_xscale("log")
    if data.points:
        low, high = min(p["intensity"] for p in data.points), max(p["intensity"] for p in data.points)
        ax.set_xlim(low / 2, high * 2)
    ax.set_xlabel("arithmetic intensity (flop / byte of device memory)")
    ax.yaxis.set_major_locator(NullLocator())
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_title("Roofline (simulator): the kernels' arithmetic intensities")
    ax.text(0.5, 0.6, not_measured_note("GFLOP/s, the roof and its ridge"), transform=ax.transAxes, ha="center", va="center",
            fontsize=10, color="tab:red")
    return ax


def describe_point(point: RooflinePoint, roof: Roof) -> str:
    """One line on a measured point: intensity, GFLOP/s and (on a GPU) its fraction of the roof there."""
    from .report import number, rate

    if roof.simulated or mode.is_simulator():
        # a simulated rate against a host copy: neither the GFLOP/s, nor the roof, nor the side of its ridge mean anything
        return f"{point.name}: {point.intensity:.3g} flop/byte; {rate(None, 'GFLOP/s', simulated=True)}, and no roof to set it against"
    text = f"{point.name}: {point.intensity:.3g} flop/byte, {number(point.gflops)} GFLOP/s"
    return f"{text} = {point.fraction_of_roof(roof):.0%} of the roof there ({point.bound(roof)}-bound side)"


def roofline_widget(measure: Callable[[Any], RooflinePoint], values: Sequence[Any], roof: Roof, *,
                    description: str = "steps", extra_roofs: Sequence[Roof] = ()):
    """A slider over `values`; each value is measured once by `measure(value)` and placed on the roofline."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    cache: dict[Any, RooflinePoint] = {}
    slider = widgets.SelectionSlider(options=list(values), value=list(values)[0], description=description,
                                     continuous_update=False, style={"description_width": "initial"})
    output = widgets.Output()
    status = widgets.HTML("")  # the busy sign while a new value is measured
    note = widgets.HTML("<b style='color:#c05000'>Simulator mode: times measure the simulator, not a GPU.</b>"
                        if mode.is_simulator() else "")

    def redraw(*_):
        with output:
            try:
                if slider.value not in cache:
                    status.value = f"<span class='gpucourse-busy'>&#9203; measuring {description} = {slider.value} ...</span>"
                    cache[slider.value] = measure(slider.value)
            except Exception as exc:  # a refused configuration is shown, the widget stays alive
                output.clear_output(wait=True)
                print(f"{type(exc).__name__}: {exc}")
                return
            finally:
                status.value = ""
            output.clear_output(wait=True)
            current = cache[slider.value]
            plot_roofline(roofline_data(roof, list(cache.values()), extra_roofs), highlight=current.name)
            plt.show()
            print(describe_point(current, roof))

    slider.observe(redraw, names="value")
    box = widgets.VBox([note, slider, status, output])
    box.roofline_status = status
    box.roofline_cache = cache
    box.roofline_slider = slider
    redraw()
    return box


def device_roofs(ceilings, measured_compute_gflops: float, device=None) -> tuple[Roof, list[Roof]]:
    """The measured roof (copy ceiling, measured FMA rate) and, on a GPU, the theoretical one beside it."""
    from .device import current_device
    from .kernels.metrics import theoretical_fp32_gflops

    device = device or current_device()
    roof = Roof(ceilings.copy_gbs, measured_compute_gflops, "measured copy", "measured FMA rate", simulated=ceilings.simulated)
    extras = []
    if not device.simulated and ceilings.theoretical_gbs and device.multiprocessors and device.clock_rate_khz:
        peak = theoretical_fp32_gflops(device.multiprocessors, device.clock_rate_khz, device.compute_capability)
        if peak is not None:
            extras.append(Roof(ceilings.theoretical_gbs, peak, "theoretical peak", "theoretical FP32 peak"))
    return roof, extras
