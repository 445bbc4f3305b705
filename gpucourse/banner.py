"""The first thing every notebook shows: which mode runs, on which device, and what is wrong if anything is."""

from __future__ import annotations

import functools
import html
import platform
import warnings

import numpy as np

from . import emulation, environment, mode
from .device import current_device
from .environment import Finding


@functools.lru_cache(maxsize=1)
def _first_kernel_finding() -> Finding:
    """Compile and run one tiny kernel, and explain in plain words if that fails."""
    from numba import cuda

    toolkit = None
    try:
        toolkit = tuple(cuda.runtime.get_version())

        @cuda.jit
        def add_one(values):
            i = cuda.grid(1)
            if i < values.size:
                values[i] += 1

        values = cuda.to_device(np.arange(64, dtype=np.int32))
        with warnings.catch_warnings():  # one block is all a probe needs: Numba's low-occupancy hint would open every notebook
            warnings.filterwarnings("ignore", message=r"Grid size \d+ will likely result in GPU under-utilization")
            add_one[1, 64](values)
        if not np.array_equal(values.copy_to_host(), np.arange(1, 65)):
            return Finding("error", "A first test kernel ran but gave wrong results: the GPU or driver is misbehaving.")
    except Exception as exc:  # every failure here is reported, in words, not raised
        return environment.explain_cuda_failure(f"{type(exc).__name__}: {exc}", mode.PROBE.driver_version, toolkit)
    extra = environment.check_toolkit_against_driver(mode.PROBE.driver_version, toolkit)
    if extra is not None:
        return extra
    return Finding("ok", f"A first kernel compiled and ran (CUDA {toolkit[0]}.{toolkit[1]} toolkit, driver CUDA "
                   f"{environment.format_cuda_version(mode.PROBE.driver_version)}).")


def versions() -> dict[str, str]:
    """Versions of Python and of the course's packages (without importing CuPy)."""
    found = {"python": platform.python_version()}
    for name in ("numpy", "numba", "numba-cuda", "cupy-cuda12x", "cupy-cuda13x", "cupy", "matplotlib", "ipywidgets"):
        version = environment.installed_version(name)
        if version:
            found[name] = version
    return found


def diagnose() -> list[Finding]:
    """Every finding about this environment: mode, packages, driver, toolkit and a first kernel."""
    findings = list(mode.FINDINGS)
    emulated = emulation.describe(mode.EMULATED_MEMORY, mode.is_simulator(), emulation.BALLAST)
    if emulated:
        findings.append(Finding("info", emulated))
    if mode.on_gpu():
        if not environment.cupy_installed():
            findings.append(Finding("error", "CuPy is not installed: timing, the copy ceiling and the CuPy cells will fail.",
                                    "pip install cupy-cuda12x (cupy-cuda13x for a CUDA 13 driver), then restart."))
        findings.append(_first_kernel_finding())
    return findings


class Banner:
    """Mode, device and diagnosis; shown as HTML in a notebook and as text in a terminal."""

    def __init__(self) -> None:
        from .plotting import describe_figures_in_ipython

        describe_figures_in_ipython()  # every notebook opens with the banner: from here on a figure's text output says what it shows
        self.mode = mode.MODE
        self.device = current_device()
        self.findings = diagnose()
        self.versions = versions()

    def headline(self) -> str:
        """The mode in one sentence."""
        card = f" It emulates a card of {emulation.gib(mode.EMULATED_MEMORY)} ({emulation.ENV_VAR})." if mode.EMULATED_MEMORY else ""
        if self.mode == "simulator":
            return ("SIMULATOR MODE: kernels run in Numba's CUDA simulator on the CPU, with tiny problem sizes. "
                    "Results are checked as on a GPU, but timings measure the simulator, not a GPU." + card)
        return f"GPU MODE: kernels run on {self.device.name}." + card

    def __str__(self) -> str:
        lines = ["=" * 78, self.headline(), f"Device: {self.device.summary()}"]
        lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in self.versions.items()))
        lines += [str(f) for f in self.findings]
        lines.append("=" * 78)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colour = "#fff4e5" if self.mode == "simulator" else "#e8f5e9"
        border = "#f0a030" if self.mode == "simulator" else "#43a047"
        icons = {"ok": "&#9989;", "info": "&#8505;&#65039;", "warning": "&#9888;&#65039;", "error": "&#10060;"}
        items = "".join(
            f"<li>{icons.get(f.level, '')} {html.escape(f.message)}"
            + (f"<br><b>Fix:</b> {html.escape(f.fix)}" if f.fix else "")
            + "</li>"
            for f in self.findings
        )
        versions_text = html.escape(", ".join(f"{k} {v}" for k, v in self.versions.items()))
        return (
            f'<div style="background:{colour};border-left:6px solid {border};padding:8px 12px;margin:4px 0">'
            f"<b>{html.escape(self.headline())}</b><br>"
            f"<b>Device:</b> {html.escape(self.device.summary())}<br>"
            f"<small>{versions_text}</small>"
            + (f"<ul style='margin:4px 0'>{items}</ul>" if items else "")
            + "</div>"
        )

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


def banner() -> Banner:
    """Diagnose the environment and return the banner (display it as a notebook cell's last line)."""
    return Banner()
