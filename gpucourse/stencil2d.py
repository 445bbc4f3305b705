"""Chapter 6's 2D stencils and chapter 7's k-space division against the copy ceiling: one measurement, used by the
notebooks, the then-and-now report and the record (`measurements/stencil2d.json`).

Every kernel is timed twice, as a user meets it: the GPU time of its public launcher
(`gpucourse.benchmark`: launches queued behind a gate) and the time per call that a plain loop of
the same public calls gets (`Timing.back_to_back_ms`, the host's cost per call included). Each is
given as a fraction of the device-to-device copy measured in the same process
(`gpucourse.bandwidth_ceilings`), for the bytes the kernel must move at least: its input read once
and its output written once. The multi-step heat kernel is given as its speed-up per step over the
tuned one-step kernel.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import mode
from .arrays import array_module, device_empty, random_array, to_device
from .errors import GPUOnlyFeature
from .sizes import problem_size
from .timing import Ceilings, Timing, bandwidth_ceilings, benchmark

#: The record's keys for the kernels' fractions of the copy, by row label.
RECORD_KEYS = {"heat, tuned one step": "heat_global_of_copy", "Jacobi global, tuned": "jacobi_global_of_copy",
               "Jacobi read-only, tuned": "jacobi_readonly_of_copy", "Jacobi shared, tuned": "jacobi_shared_of_copy",
               "k-space Poisson division, tuned": "kspace_poisson_of_copy"}


@dataclass(frozen=True)
class Measured:
    """One kernel timed through its public launcher: GPU time and back-to-back time per call, against the copy."""

    label: str
    timing: Timing
    nbytes: int
    copy_gbs: float
    steps: int = 1

    @property
    def us(self) -> float:
        """GPU time of one call (gated), in us."""
        return 1e3 * self.timing.median_ms

    @property
    def us_per_step(self) -> float:
        """GPU time per time step (a call of a multi-step kernel takes `steps`), in us."""
        return self.us / self.steps

    @property
    def of_copy(self) -> float:
        """Bytes it must move over its GPU time, as a fraction of the measured copy."""
        return self.timing.bandwidth_gbs(self.nbytes) / self.copy_gbs

    @property
    def back_to_back_of_copy(self) -> float | None:
        """The same for a loop of public calls, back to back (None in the simulator)."""
        rate = self.timing.back_to_back_gbs(self.nbytes)
        return None if rate is None else rate / self.copy_gbs


@dataclass
class Stencil2D:
    """The measurements of one run: the rows, the copy they are set against, the heat kernel's steps per launch."""

    shape: tuple[int, int]
    ceilings: Ceilings
    rows: dict[str, Measured] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    blocked: dict[int, Measured] = field(default_factory=dict)

    @property
    def best_steps(self) -> int | None:
        """Steps per launch of the fastest multi-step heat kernel (per step)."""
        return min(self.blocked, key=lambda s: self.blocked[s].us_per_step) if self.blocked else None

    @property
    def heat_blocked_speedup_per_step(self) -> float | None:
        """Time per step of the tuned one-step heat kernel over that of the best multi-step launch."""
        best = self.best_steps
        if best is None or "heat, tuned one step" not in self.rows:
            return None
        return self.rows["heat, tuned one step"].us_per_step / self.blocked[best].us_per_step

    def record(self, commit: str | None = None) -> dict:
        """The figures of `measurements/stencil2d.json`: fractions of the copy, the speed-up per step, the GPU and the commit."""
        out: dict = {"gpu": self.ceilings.device, "commit": commit or git_commit(), "shape": list(self.shape), "dtype": "float32",
                     "copy_gbs": round(self.ceilings.copy_gbs, 1), "simulated": self.ceilings.simulated}
        simulated = self.ceilings.simulated  # simulator times are not GPU figures: no fraction of a ceiling is recorded

        def fraction(value: float | None) -> float | None:
            return None if simulated or value is None else round(value, 4)

        for label, key in RECORD_KEYS.items():
            if label in self.rows:
                out[key] = fraction(self.rows[label].of_copy)
                out[key.replace("_of_copy", "_back_to_back_of_copy")] = fraction(self.rows[label].back_to_back_of_copy)
        speedup = self.heat_blocked_speedup_per_step
        out["heat_blocked_speedup_per_step"] = None if speedup is None or simulated else round(speedup, 3)
        out["heat_blocked_best_steps"] = self.best_steps
        out["rows"] = {label: {"us": round(m.us, 2), "of_copy": fraction(m.of_copy), "steps": m.steps,
                               "back_to_back_of_copy": fraction(m.back_to_back_of_copy)} for label, m in self.rows.items()}
        out["heat_blocked"] = {str(s): {"us_per_step": round(m.us_per_step, 2)} for s, m in self.blocked.items()}
        out["skipped"] = dict(self.skipped)
        out["configuration"] = configuration()
        return out

    def table(self):
        """The rows as a table: GPU time, fraction of the copy, and what a loop of calls gets."""
        from .report import Table

        table = Table(["kernel", "GPU time per call (us)", "per step (us)", "of copy (GPU time)", "of copy (a loop of calls)"],
                      title=f"{self.shape[0]} x {self.shape[1]} float32 against a copy of {self.ceilings.copy_gbs:.0f} GB/s")
        simulated = self.ceilings.simulated
        for label, m in self.rows.items():
            back = m.back_to_back_of_copy
            table.rows.append([label, round(m.us, 1), round(m.us_per_step, 1), None if simulated else round(m.of_copy, 3),
                               None if simulated or back is None else round(back, 3)])
        for label, reason in self.skipped.items():
            table.rows.append([label, None, None, None, None])
            table.notes.append(f"{label}: {reason}")
        if simulated:
            table.notes.append("Simulator mode: the times measure Python threads; no fraction of a GPU ceiling is given.")
        return table


def configuration() -> dict:
    """The tuned kernels' default tiles at the time of measuring (what the record's figures were measured with)."""
    from .kernels import heat, laplace
    from .kernels import spectral as kspace

    return {"jacobi": {method: {"block": list(block), "rows": rows} for method, (block, rows) in laplace.TUNED.items()},
            "jacobi_shuffles": dict(laplace.SHUFFLES),
            "heat_step": {"block": list(heat.TUNED_STEP[0]), "rows": heat.TUNED_STEP[1], "shuffles": heat.TUNED_STEP[2]},
            "heat_steps": {"steps": heat.BLOCKED_STEPS, "columns, height, warps": list(heat.BLOCKED_TILE["gpu"])},
            "kspace_poisson": {"block": list(kspace.TUNED_BLOCK), "rows": kspace.ROWS}}


def git_commit() -> str | None:
    """The commit of the course's repository (None outside a git checkout)."""
    try:
        root = Path(__file__).resolve().parent.parent
        return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _time(result: Stencil2D, label: str, call: Callable[[], object], nbytes: int, repeat: int, steps: int = 1) -> Measured | None:
    try:
        timing = benchmark(call, repeat=repeat, warmup=1 if mode.is_simulator() else 2)
    except GPUOnlyFeature as refused:
        result.skipped[label] = f"{refused.feature} needs a CUDA GPU"
        return None
    measured = Measured(label, timing, nbytes, result.ceilings.copy_gbs, steps)
    result.rows[label] = measured
    return measured


def measure_jacobi(result: Stencil2D, repeat: int, book: bool = True) -> None:
    """One Jacobi sweep of each kind, the book's and the tuned, on result.shape float32."""
    from .kernels import laplace

    shape = result.shape
    host = random_array(shape, np.float32, seed=21)
    a, a_new = to_device(host), to_device(host)
    nbytes = laplace.bytes_per_sweep(shape, 4)
    names = {"global": "global", "shared": "shared", "readonly": "read-only", "texture": "texture"}
    for method, name in names.items():
        for kind, suffix in (("the book's", "_book"), ("tuned", "")):
            if suffix == "_book" and not book:
                continue
            label = f"Jacobi {name}, {kind}"
            try:
                launcher, arguments = laplace.sweep_call(a, a_new, method + suffix)
            except GPUOnlyFeature as refused:
                result.skipped[label] = f"{refused.feature} needs a CUDA GPU"
                continue
            _time(result, label, lambda launcher=launcher, arguments=arguments: launcher(*arguments), nbytes, repeat)


def measure_heat(result: Stencil2D, repeat: int, steps: Sequence[int] | None = None, book: bool = True,
                 article_steps: Sequence[int] | None = None) -> None:
    """One heat step, the article's and the tuned; the tuned multi-step kernel at each s of `steps` (per step); the article's
    shared tile at each s of `article_steps` (default: the largest s up to 4 of the notebook's list)."""
    from .kernels import heat

    shape = result.shape
    d = 0.2
    u = to_device(random_array(shape, np.float32, seed=22, low=0.0, high=1.0))
    v = device_empty(shape, np.float32)
    nbytes = heat.bytes_per_step(shape, 4)
    if book:
        _time(result, "heat, the article's one step", lambda: heat.heat_step_global_article(u, v, d), nbytes, repeat)
        tile = problem_size("ch6_heat_tile")
        for article_s in article_steps or [max(s for s in problem_size("ch6_heat_steps") if s <= 4)]:
            _time(result, f"heat, the article's shared tile, s = {article_s}",
                  lambda s=article_s: heat.heat_steps_shared(u, v, d, tile, s), nbytes, repeat, steps=article_s)
    _time(result, "heat, tuned one step", lambda: heat.heat_step_global(u, v, d), nbytes, repeat)
    for s in steps or problem_size("ch6_heat_steps"):
        label = f"heat, tuned multi-step, s = {s}"
        measured = _time(result, label, lambda s=s: heat.heat_steps(u, v, d, s), nbytes, repeat, steps=s)
        if measured is not None:
            result.blocked[s] = measured


def measure_kspace(result: Stencil2D, repeat: int, book: bool = True) -> None:
    """The periodic Poisson division over the half spectrum of result.shape (complex64), the first version and the tuned."""
    from . import fft
    from .kernels import spectral as kernels

    xp = array_module()
    ny, nx = result.shape
    spectrum = xp.asarray(random_array(fft.half_spectrum_shape(result.shape), np.complex64, seed=23))
    nbytes = 2 * math.prod(spectrum.shape) * spectrum.itemsize
    if book:
        _time(result, "k-space Poisson division, first version", lambda: kernels.poisson_spectrum_simple(spectrum, spectrum, nx),
              nbytes, repeat)
    _time(result, "k-space Poisson division, tuned", lambda: kernels.poisson_spectrum(spectrum, spectrum, nx), nbytes, repeat)


def measure(shape: tuple[int, int] | None = None, repeat: int | None = None, parts: Sequence[str] = ("jacobi", "heat", "kspace"),
            steps: Sequence[int] | None = None, book: bool = True, article_steps: Sequence[int] | None = None) -> Stencil2D:
    """Measure the 2D kernels (`parts` of 'jacobi', 'heat', 'kspace') at `shape` float32 (default: the record's mesh,
    the heat notebook's, 8192^2 on a GPU): the tuned kernels, and with `book` the book's and the article's beside them.

    `steps`: the tuned multi-step kernel's steps per launch to try; `article_steps`: the article's shared tile's.
    """
    shape = tuple(shape or problem_size("ch6_heat"))
    repeat = repeat or problem_size("ch6_repeat")
    result = Stencil2D(shape, bandwidth_ceilings())
    for part in parts:
        if part == "heat":
            measure_heat(result, repeat, steps, book, article_steps)
        elif part in ("jacobi", "kspace"):
            (measure_jacobi if part == "jacobi" else measure_kspace)(result, repeat, book)
        else:
            raise ValueError(f"unknown part {part!r}: use 'jacobi', 'heat' or 'kspace'")
    return result


def write_record(result: Stencil2D, path: str | Path, commit: str | None = None) -> dict:
    """Write `result.record(commit)` as JSON to `path`; return it."""
    record = result.record(commit)
    Path(path).write_text(json.dumps(record, indent=1) + "\n")
    return record
