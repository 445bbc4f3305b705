"""Problem sizes for every experiment of the course, by mode, in one table.

On a GPU an experiment runs at the book's size or larger (large enough to fill a current GPU and
to spill out of its L2 cache). In the simulator every CUDA thread is a Python thread (a 64 x 96
shared-memory transpose takes seconds), so sizes there are tiny: they show that the code is right,
not how fast it is. Notebooks and tests ask `problem_size(name)` and never branch on the mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import mode


@dataclass(frozen=True)
class Size:
    """The size of one experiment on a GPU and in the simulator, and what the numbers count."""

    gpu: Any
    simulator: Any
    unit: str


SIZES: dict[str, Size] = {
    # --- Chapter 1: introduction -------------------------------------------------------------
    "increment": Size(gpu=1 << 24, simulator=1000, unit="float32 elements"),
    "increment_2d": Size(gpu=(4096, 4096), simulator=(24, 40), unit="(rows, columns)"),
    "saxpy": Size(gpu=1 << 24, simulator=1000, unit="elements"),
    "sgemm": Size(gpu=4096, simulator=32, unit="matrix order n (n x n)"),
    "threads_per_block": Size(gpu=256, simulator=64, unit="threads per block"),
    "fp_rate": Size(gpu=(1 << 22, 4096), simulator=(256, 8), unit="(elements, multiply-add steps per element)"),
    "exercise_1d": Size(gpu=(1 << 22) + 37, simulator=1000, unit="elements"),
    "exercise_2d": Size(gpu=(2000, 3001), simulator=(21, 37), unit="(rows, columns)"),
    # --- Chapter 2: performance measurement and metrics ----------------------------------------
    # --- Chapter 3: optimization ---------------------------------------------------------------
    # --- Chapter 6: finite differences ---------------------------------------------------------
}


def problem_size(name: str, for_mode: str | None = None) -> Any:
    """The size of experiment `name` in the current mode (or in `for_mode`, 'gpu' or 'simulator')."""
    try:
        entry = SIZES[name]
    except KeyError:
        known = ", ".join(sorted(SIZES))
        raise KeyError(f"no problem size named {name!r}; known sizes: {known}") from None
    chosen = for_mode or mode.MODE
    if chosen not in ("gpu", "simulator"):
        raise ValueError(f"for_mode must be 'gpu' or 'simulator'; got {for_mode!r}")
    return entry.gpu if chosen == "gpu" else entry.simulator
