"""Widgets that rerun a kernel for a launch configuration and plot the bandwidth it reaches.

The logic is plain Python: `Tuner.measure(**config)` times one configuration (and caches it),
`Tuner.sweep(parameter, **fixed)` times every value of one parameter, `Tuner.series(...)` and
`Tuner.plot_data(...)` return the numbers a plot shows, and `Tuner.table()` lists what was
measured. `Tuner.widget()` only wires ipywidgets controls to these, so tests run the logic without
a browser, and the widget works the same in simulator mode (marked so).

A widget holds its tuner weakly: ipywidgets keeps every widget it has shown until the kernel ends,
so a widget that held its tuner would hold the tuner's arrays as long. Keep the tuner in a name while
its widget is in use; deleting the name gives the device memory back (the widget then says so).

`block_size_tuner` builds a Tuner for the usual question, "which launch configuration is fastest?":
threads per block as warp multiples up to the device's limit, and, where the launcher takes them,
blocks per grid, elements per thread or any other parameter.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import mode
from .device import DeviceInfo, current_device
from .errors import CourseError
from .timing import Ceilings, Timing, benchmark

#: What a widget shows once its tuner is gone.
GONE = ("This widget's tuner no longer exists (its name was deleted or given to something else), and with it the arrays it "
        "measured: run the cell that made the tuner again.")


def warp_multiples(device: DeviceInfo | None = None, largest: int | None = None) -> list[int]:
    """Every block size that is a multiple of the warp size, up to the device's limit (or `largest`)."""
    device = device or current_device()
    top = min(largest or device.max_threads_per_block, device.max_threads_per_block)
    return list(range(device.warp_size, top + 1, device.warp_size))


def power_of_two_block_sizes(device: DeviceInfo | None = None, smallest: int = 32) -> list[int]:
    """Block sizes 32, 64, ... up to the device's limit: the usual sweep."""
    device = device or current_device()
    sizes, size = [], smallest
    while size <= device.max_threads_per_block:
        sizes.append(size)
        size *= 2
    return sizes


@dataclass(frozen=True)
class Measurement:
    """One timed configuration: its parameters, its timing and the bandwidth it reached."""

    config: tuple[tuple[str, Any], ...]
    timing: Timing
    bytes_moved: float

    @property
    def gbs(self) -> float:
        """Effective bandwidth in GB/s at the median time."""
        return self.timing.bandwidth_gbs(self.bytes_moved)

    @property
    def params(self) -> dict[str, Any]:
        """The configuration as a dict."""
        return dict(self.config)


@dataclass
class BandwidthPlotData:
    """Everything a bandwidth plot shows, as numbers: one line per label, the ceilings and a highlighted point."""

    xlabel: str
    title: str
    lines: dict[str, tuple[list[Any], list[float]]]
    theoretical_gbs: float | None
    copy_gbs: float | None
    simulated: bool
    highlight: tuple[Any, float] | None = None
    notes: list[str] = field(default_factory=list)
    logx: bool = False

    def fractions_of_copy(self, label: str) -> list[float] | None:
        """The line's GB/s as fractions of the measured copy ceiling (None without a GPU ceiling)."""
        if self.copy_gbs is None:
            return None
        return [value / self.copy_gbs for value in self.lines[label][1]]


def _label(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def describe_config(params: dict[str, Any]) -> str:
    """A configuration in words: 'threads per block 256, elements per thread 4' (no dict, no underscores)."""
    return ", ".join(f"{key.replace('_', ' ')} {_label(value)}" for key, value in params.items())


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 value', '3 values': a count with its noun in the right number."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


class Tuner:
    """Times a kernel over launch configurations, caching every measurement.

    `make_call(**config)` returns a function of no arguments that launches the kernel once with
    that configuration (it should validate the configuration and raise a clear error if the device
    cannot run it). `bytes_moved` is the bytes one launch reads plus writes, or a function of the
    configuration giving them. `parameters` maps each parameter name to the values offered.
    """

    def __init__(
        self,
        make_call: Callable[..., Callable[[], object]],
        bytes_moved: float | Callable[..., float],
        parameters: dict[str, Sequence[Any]],
        *,
        name: str = "kernel",
        ceilings: Ceilings | None = None,
        repeat: int | None = None,
        warmup: int = 2,
    ) -> None:
        if not parameters:
            raise ValueError("give at least one parameter to tune, e.g. {'threads_per_block': [...]}")
        empty = [key for key, values in parameters.items() if len(list(values)) == 0]
        if empty:
            raise ValueError(f"{'parameter' if len(empty) == 1 else 'parameters'} {', '.join(empty)} offer no values")
        self.make_call = make_call
        self.bytes_moved = bytes_moved
        self.parameters = {key: list(values) for key, values in parameters.items()}
        self.name = name
        self.ceilings = ceilings
        self.repeat = repeat
        self.warmup = warmup
        self.cache: dict[tuple[tuple[str, Any], ...], Measurement] = {}
        self.refused: dict[tuple[tuple[str, Any], ...], str] = {}
        self.calls_made = 0  # how many configurations were actually timed (the cache saves the rest)

    def _key(self, config: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        unknown = set(config) - set(self.parameters)
        if unknown:
            raise KeyError(f"unknown parameter(s) {sorted(unknown)}; this tuner has {sorted(self.parameters)}")
        full = {key: config.get(key, values[0]) for key, values in self.parameters.items()}
        return tuple(sorted(full.items()))

    def measure(self, **config: Any) -> Measurement:
        """Time one configuration (parameters left out take their first value); cached."""
        key = self._key(config)
        if key not in self.cache:
            params = dict(key)
            call = self.make_call(**params)
            nbytes = self.bytes_moved(**params) if callable(self.bytes_moved) else self.bytes_moved
            self.calls_made += 1
            self.cache[key] = Measurement(key, benchmark(call, warmup=self.warmup, repeat=self.repeat), float(nbytes))
        return self.cache[key]

    def sweep(self, parameter: str, values: Sequence[Any] | None = None, *, skip_refused: bool = False,
              **fixed: Any) -> list[Measurement]:
        """Time every value of `parameter` (or the `values` given), others fixed; return the measurements.

        With `skip_refused`, a configuration whose launcher raises a course error (a block over the
        device's limit, say) is left out and its message kept in `self.refused`.
        """
        if parameter not in self.parameters:
            raise KeyError(f"no parameter {parameter!r}; this tuner has {sorted(self.parameters)}")
        chosen = self.parameters[parameter] if values is None else list(values)
        measured = []
        for value in chosen:
            config = {**fixed, parameter: value}
            try:
                measured.append(self.measure(**config))
            except CourseError as exc:
                if not skip_refused:
                    raise
                self.refused[self._key(config)] = f"{type(exc).__name__}: {exc}"
        return measured

    def _order(self, parameter: str, value: Any) -> int:
        values = self.parameters[parameter]
        return values.index(value) if value in values else len(values)

    def series(self, parameter: str, **fixed: Any) -> tuple[list[Any], list[float]]:
        """The cached measurements along `parameter` (others fixed): x values and GB/s, for a plot."""
        points = []
        wanted = [(k, v) for k, v in self._key(fixed) if k != parameter]
        for key, measurement in self.cache.items():
            params = dict(key)
            if all(params.get(k) == v for k, v in wanted):
                points.append((params[parameter], measurement.gbs))
        points.sort(key=lambda point: self._order(parameter, point[0]))
        return [p[0] for p in points], [p[1] for p in points]

    def series_by(self, parameter: str, by: str, **fixed: Any) -> dict[str, tuple[list[Any], list[float]]]:
        """One series along `parameter` for each value of `by` that has measurements (others fixed)."""
        if by == parameter or by not in self.parameters:
            raise KeyError(f"`by` must be another parameter of this tuner: one of {sorted(set(self.parameters) - {parameter})}")
        lines = {}
        for value in self.parameters[by]:
            x, gbs = self.series(parameter, **{**fixed, by: value})
            if x:
                lines[f"{by.replace('_', ' ')} = {_label(value)}"] = (x, gbs)
        return lines

    def best(self, **fixed: Any) -> Measurement:
        """The fastest configuration measured so far (by bandwidth), among those matching `fixed`."""
        candidates = [m for m in self.cache.values() if all(m.params.get(k) == v for k, v in fixed.items())]
        if not candidates:
            raise ValueError("nothing measured yet: call measure() or sweep() first")
        return max(candidates, key=lambda m: m.gbs)

    def plot_data(self, parameter: str, highlight: dict[str, Any] | None = None, by: str | None = None,
                  **fixed: Any) -> BandwidthPlotData:
        """The numbers `plot` draws: GB/s along `parameter` (one line, or one per value of `by`), the ceilings."""
        if by is None:
            lines = {self.name: self.series(parameter, **fixed)}
        else:
            lines = {f"{self.name}, {label}": line for label, line in self.series_by(parameter, by, **fixed).items()}
        point = None
        if highlight is not None:
            current = self.measure(**highlight)
            point = (current.params[parameter], current.gbs)
        ceilings = self.ceilings
        real = ceilings is not None and not ceilings.simulated
        notes = []
        if mode.is_simulator():
            notes.append("simulator mode: times measure Python threads, not a GPU")
        # Block sizes 32 ... 1024 crowd the left of a linear axis: spread a wide range of sizes on a log scale.
        numbers = [v for x, _ in lines.values() for v in x if isinstance(v, (int, float)) and not isinstance(v, bool)]
        logx = bool(numbers) and min(numbers) > 0 and max(numbers) >= 16 * min(numbers)
        return BandwidthPlotData(
            xlabel=parameter.replace("_", " "),
            title=f"{self.name}: bandwidth against {parameter.replace('_', ' ')}",
            lines=lines,
            theoretical_gbs=ceilings.theoretical_gbs if real else None,
            copy_gbs=ceilings.copy_gbs if real else None,
            simulated=mode.is_simulator(),
            highlight=point,
            notes=notes,
            logx=logx,
        )

    def plot(self, parameter: str, highlight: dict[str, Any] | None = None, ax=None, by: str | None = None, **fixed: Any):
        """Plot the cached GB/s along `parameter` with the ceilings; return the axes."""
        from .plotting import draw_bandwidth_plot

        return draw_bandwidth_plot(self.plot_data(parameter, highlight=highlight, by=by, **fixed), ceilings=self.ceilings, ax=ax)

    def table(self, **fixed: Any):
        """A table of every cached measurement matching `fixed`: configuration, time, GB/s, fraction of the copy ceiling."""
        from .report import Table

        names = list(self.parameters)
        rows = [m for m in self.cache.values() if all(m.params.get(k) == v for k, v in fixed.items())]
        simulated = any(m.timing.simulated for m in rows) if rows else mode.is_simulator()
        real = self.ceilings is not None and not self.ceilings.simulated and not simulated
        headers = [*(n.replace("_", " ") for n in names), "simulator time (ms)" if simulated else "median (ms)"]
        if not simulated:
            headers.append("GB/s")
        if real:
            headers.append("fraction of copy")
        table = Table(headers=headers, title=f"{self.name}: measured configurations")
        rows.sort(key=lambda m: tuple(self._order(n, m.params[n]) for n in names))
        for m in rows:
            row = [*(m.params[n] for n in names), m.timing.median_ms]
            if not simulated:
                row.append(m.gbs)
            if real:
                row.append(self.ceilings.fraction_of_copy(m.gbs))
            table.rows.append(row)
        if simulated:
            table.notes.append("Simulator times measure Python threads, not a GPU: GB/s not measured in the simulator.")
        return table

    def _in_order(self, params: dict[str, Any]) -> dict[str, Any]:
        return {key: params[key] for key in self.parameters if key in params}

    def describe(self, measurement: Measurement) -> str:
        """One line on a measurement: configuration, GB/s and, on a GPU, its fraction of the copy ceiling."""
        from .report import rate

        configuration = describe_config(self._in_order(measurement.params))
        if measurement.timing.simulated:  # a rate of Python threads says nothing of a GPU: the time, labelled, and no GB/s
            return (f"{self.name}, {configuration}: {measurement.timing.median_ms:.4g} ms of simulator wall clock; "
                    f"{rate(None, simulated=True)}")
        text = f"{self.name}, {configuration}: {rate(measurement.gbs, simulated=False)}"
        if self.ceilings is not None and not self.ceilings.simulated:
            text += f" = {self.ceilings.fraction_of_copy(measurement.gbs):.0%} of the measured copy"
        return f"{text}; {measurement.timing}"

    def sweep_summary(self, parameter: str, newly_measured: int, **fixed: Any) -> str:
        """One line after a sweep of `parameter`: how many values it measured now, how many were measured before, how many were refused."""
        values = self.parameters[parameter]
        refused = sum(1 for key in self.refused if dict(key)[parameter] in values
                      and all(dict(key).get(k) == v for k, v in fixed.items()))
        cached = len(values) - newly_measured - refused
        name = parameter.replace("_", " ")
        if newly_measured == 0:
            text = (f"sweep of {name}: " + ("the value was" if cached == 1 else f"all {cached} values were")
                    + " measured before (cached), so the plot shows " + ("it" if cached == 1 else "them") + " already")
        else:
            text = f"sweep of {name}: {counted(newly_measured, 'value')} measured now" + (f", {cached} taken from the cache" if cached else "")
        return text + (f"; {refused} refused by the launcher (see tuner.refused)" if refused else "")

    def opening_config(self) -> dict[str, Any]:
        """Where a widget opens: the best configuration measured so far (a sweep's winner), else every parameter's first value.

        In the simulator no configuration is faster in any sense a GPU shares: it opens at the first one measured (the sweep's start).
        """
        first = {key: values[0] for key, values in self.parameters.items()}
        measured = [m for m in self.cache.values() if all(m.params.get(k) in values for k, values in self.parameters.items())]
        if not measured:
            return first
        chosen = measured[0] if any(m.timing.simulated for m in measured) else max(measured, key=lambda m: m.gbs)
        return {**first, **chosen.params}

    def widget(self, x_parameter: str | None = None):
        """Controls for every parameter and a plot that reruns the kernel when a control changes (holds the tuner weakly)."""
        import ipywidgets as widgets
        import matplotlib.pyplot as plt

        tuner = weakref.ref(self)  # not self: ipywidgets keeps the controls, and their callbacks, until the kernel ends
        x_parameter = x_parameter or next(iter(self.parameters))
        opening = self.opening_config()
        controls = {}
        for key, values in self.parameters.items():
            if key == x_parameter and all(isinstance(v, int) for v in values):
                controls[key] = widgets.SelectionSlider(options=values, value=opening[key], description=key, continuous_update=False,
                                                        style={"description_width": "initial"})
            else:
                controls[key] = widgets.Dropdown(options=values, value=opening[key], description=key,
                                                 style={"description_width": "initial"})
        # width auto: the whole label shows, however long the parameter's name
        sweep_button = widgets.Button(description=f"sweep {x_parameter}", layout=widgets.Layout(width="auto"))
        output = widgets.Output()
        status = widgets.HTML("")  # the busy sign: a measurement in the simulator can take seconds
        note = widgets.HTML("<b style='color:#c05000'>Simulator mode: times measure the simulator, not a GPU.</b>"
                            if mode.is_simulator() else "")

        def busy(text: str) -> None:
            status.value = f"<span class='gpucourse-busy'>&#9203; {text}</span>" if text else ""

        def gone() -> None:
            with output:
                output.clear_output(wait=True)
                print(GONE)

        def redraw(*_):
            current = tuner()
            if current is None:
                gone()
                return
            config = {key: control.value for key, control in controls.items()}
            with output:
                try:
                    if current._key(config) not in current.cache:
                        busy(f"measuring {', '.join(f'{k} = {v}' for k, v in config.items())} ...")
                    measurement = current.measure(**config)
                except Exception as exc:  # show a launch the device refuses as text, keep the widget alive
                    output.clear_output(wait=True)
                    print(f"{type(exc).__name__}: {exc}")
                    return
                finally:
                    busy("")
                output.clear_output(wait=True)
                fixed = {k: v for k, v in config.items() if k != x_parameter}
                current.plot(x_parameter, highlight=config, **fixed)
                plt.show()
                print(current.describe(measurement))
                print(f"{counted(len(current.cache), 'configuration')} measured so far (cached: moving back costs nothing)")

        def sweep_all(_):
            current = tuner()
            if current is None:
                gone()
                return
            fixed = {key: control.value for key, control in controls.items() if key != x_parameter}
            before = current.calls_made
            busy(f"measuring every {x_parameter} ...")
            try:
                current.sweep(x_parameter, skip_refused=True, **fixed)
            finally:
                busy("")
            redraw()
            with output:  # say what the sweep did, also when the cache already held every value (nothing changes on screen then)
                print(current.sweep_summary(x_parameter, current.calls_made - before, **fixed))

        for control in controls.values():
            control.observe(redraw, names="value")
        sweep_button.on_click(sweep_all)
        box = widgets.VBox([note, *controls.values(), sweep_button, status, output])
        box.tuner_controls = controls  # for tests and for notebooks that set a control from code
        box.tuner_output = output
        box.tuner_status = status
        box.tuner_sweep = sweep_button
        redraw()
        return box


def block_size_tuner(
    launch: Callable[..., object],
    *arguments: Any,
    bytes_moved: float | Callable[..., float],
    name: str = "kernel",
    ceilings: Ceilings | None = None,
    threads_per_block: Sequence[int] | None = None,
    largest: int | None = None,
    blocks_per_grid: Sequence[int] | None = None,
    elements_per_thread: Sequence[int] | None = None,
    repeat: int | None = None,
    device: DeviceInfo | None = None,
    **other_parameters: Sequence[Any],
) -> Tuner:
    """A Tuner that calls `launch(*arguments, threads_per_block=..., ...)` for each configuration.

    Threads per block default to every warp multiple up to the device's limit (or `largest`).
    `blocks_per_grid`, `elements_per_thread` and any `other_parameters` (each a list of values)
    become further parameters, passed to `launch` by name.
    """
    parameters: dict[str, list[Any]] = {
        "threads_per_block": list(threads_per_block) if threads_per_block is not None else warp_multiples(device, largest)
    }
    if blocks_per_grid is not None:
        parameters["blocks_per_grid"] = list(blocks_per_grid)
    if elements_per_thread is not None:
        parameters["elements_per_thread"] = list(elements_per_thread)
    parameters.update({key: list(values) for key, values in other_parameters.items()})

    def make_call(**config: Any) -> Callable[[], object]:
        return lambda: launch(*arguments, **config)

    return Tuner(make_call, bytes_moved, parameters, name=name, ceilings=ceilings, repeat=repeat)
