"""Widgets that rerun a kernel for a launch configuration and plot the bandwidth it reaches.

The logic is plain Python: `Tuner.measure(**config)` times one configuration (and caches it),
`Tuner.sweep(parameter, **fixed)` times every value of one parameter, and `Tuner.series(...)`
returns the numbers a plot shows. `Tuner.widget()` only wires ipywidgets controls to these, so
tests run the logic without a browser, and the widget works the same in simulator mode (marked so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import mode
from .device import DeviceInfo, current_device
from .timing import Ceilings, Timing, benchmark


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
    ) -> None:
        if not parameters:
            raise ValueError("give at least one parameter to tune, e.g. {'threads_per_block': [...]}")
        self.make_call = make_call
        self.bytes_moved = bytes_moved
        self.parameters = {key: list(values) for key, values in parameters.items()}
        self.name = name
        self.ceilings = ceilings
        self.repeat = repeat
        self.cache: dict[tuple[tuple[str, Any], ...], Measurement] = {}

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
            self.cache[key] = Measurement(key, benchmark(call, repeat=self.repeat), float(nbytes))
        return self.cache[key]

    def sweep(self, parameter: str, values: Sequence[Any] | None = None, **fixed: Any) -> list[Measurement]:
        """Time every value of `parameter` (or the `values` given), others fixed; return the measurements."""
        if parameter not in self.parameters:
            raise KeyError(f"no parameter {parameter!r}; this tuner has {sorted(self.parameters)}")
        chosen = self.parameters[parameter] if values is None else list(values)
        return [self.measure(**{**fixed, parameter: value}) for value in chosen]

    def series(self, parameter: str, **fixed: Any) -> tuple[list[Any], list[float]]:
        """The cached measurements along `parameter` (others fixed): x values and GB/s, for a plot."""
        points = []
        for key, measurement in self.cache.items():
            params = dict(key)
            if all(params.get(k) == v for k, v in self._key(fixed) if k != parameter):
                points.append((params[parameter], measurement.gbs))
        points.sort(key=lambda point: self.parameters[parameter].index(point[0]) if point[0] in self.parameters[parameter] else 0)
        return [p[0] for p in points], [p[1] for p in points]

    def best(self) -> Measurement:
        """The fastest configuration measured so far (by bandwidth)."""
        if not self.cache:
            raise ValueError("nothing measured yet: call measure() or sweep() first")
        return max(self.cache.values(), key=lambda m: m.gbs)

    def plot(self, parameter: str, highlight: dict[str, Any] | None = None, ax=None, **fixed: Any):
        """Plot the cached GB/s along `parameter` with the ceilings; return the axes."""
        from .plotting import plot_bandwidth

        x, gbs = self.series(parameter, **fixed)
        ax = plot_bandwidth(
            [str(v) for v in x] if any(isinstance(v, str) for v in x) else x,
            gbs,
            xlabel=parameter.replace("_", " "),
            ceilings=self.ceilings,
            label=self.name,
            title=f"{self.name}: bandwidth against {parameter.replace('_', ' ')}",
            simulated=mode.is_simulator(),
            ax=ax,
        )
        if highlight is not None:
            current = self.measure(**highlight)
            ax.plot([current.params[parameter]], [current.gbs], "r*", markersize=14, label="current")
        return ax

    def widget(self, x_parameter: str | None = None):
        """Controls for every parameter and a plot that reruns the kernel when a control changes."""
        import ipywidgets as widgets
        import matplotlib.pyplot as plt

        x_parameter = x_parameter or next(iter(self.parameters))
        controls = {}
        for key, values in self.parameters.items():
            if key == x_parameter and all(isinstance(v, int) for v in values):
                controls[key] = widgets.SelectionSlider(options=values, value=values[0], description=key, continuous_update=False,
                                                        style={"description_width": "initial"})
            else:
                controls[key] = widgets.Dropdown(options=values, value=values[0], description=key,
                                                 style={"description_width": "initial"})
        sweep_button = widgets.Button(description=f"sweep {x_parameter}")
        output = widgets.Output()
        note = widgets.HTML("<b style='color:#c05000'>Simulator mode: times measure the simulator, not a GPU.</b>"
                            if mode.is_simulator() else "")

        def redraw(*_):
            config = {key: control.value for key, control in controls.items()}
            with output:
                output.clear_output(wait=True)
                try:
                    measurement = self.measure(**config)
                except Exception as exc:  # show a launch the device refuses as text, keep the widget alive
                    print(f"{type(exc).__name__}: {exc}")
                    return
                fixed = {k: v for k, v in config.items() if k != x_parameter}
                self.plot(x_parameter, highlight=config, **fixed)
                plt.show()
                print(f"{self.name} {config}: {measurement.gbs:.1f} GB/s; {measurement.timing}")

        def sweep_all(_):
            fixed = {key: control.value for key, control in controls.items() if key != x_parameter}
            with output:
                output.clear_output(wait=True)
                print("measuring ...")
            for value in self.parameters[x_parameter]:
                try:
                    self.measure(**{**fixed, x_parameter: value})
                except Exception:  # a configuration the device cannot launch is left out of the plot
                    continue
            redraw()

        for control in controls.values():
            control.observe(redraw, names="value")
        sweep_button.on_click(sweep_all)
        box = widgets.VBox([note, *controls.values(), sweep_button, output])
        redraw()
        return box
