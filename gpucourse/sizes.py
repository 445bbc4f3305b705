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
    "fp_rate_check": Size(gpu=(1 << 16, 256), simulator=(256, 8), unit="(elements, steps) checked against NumPy"),
    "exercise_1d": Size(gpu=(1 << 22) + 37, simulator=1000, unit="elements"),
    "exercise_2d": Size(gpu=(2000, 3001), simulator=(21, 37), unit="(rows, columns)"),
    # --- Chapter 2: performance measurement and metrics ----------------------------------------
    # The book's limitingFactor uses 8 * 1024**2 floats; on a GPU we take 8x more, so that the two
    # arrays (512 MiB) are ten times an H100's 50 MiB L2 and repeated runs cannot live in it.
    "ch2_limit": Size(gpu=1 << 26, simulator=600, unit="float32 elements"),
    "ch2_threads_per_block": Size(gpu=256, simulator=64, unit="threads per block (the book's blockSize)"),
    "ch2_copy": Size(gpu=1 << 26, simulator=1024, unit="float32 elements per array (a multiple of 4)"),
    "ch2_block_sizes": Size(gpu=(32, 64, 128, 256, 512, 1024), simulator=(32, 64, 128), unit="threads per block in a sweep"),
    "ch2_elements_per_thread": Size(gpu=(1, 2, 4, 8), simulator=(1, 4), unit="elements each thread copies"),
    "ch2_tuner_largest_block": Size(gpu=1024, simulator=128, unit="largest threads per block a tuner offers"),
    "ch2_timing": Size(gpu=(1 << 24, 256), simulator=(256, 2), unit="(elements, loop steps of 4 fused multiply-adds)"),
    "ch2_short_kernel": Size(gpu=1 << 15, simulator=64, unit="float32 elements of a kernel shorter than its launch"),
    "ch2_roofline": Size(gpu=(1 << 25, (1, 2, 4, 8, 16, 32, 64, 128)), simulator=(256, (1, 4, 16)),
                         unit="(elements, loop steps: intensity = steps flop/byte in float32)"),
    "ch2_peak_flops": Size(gpu=(1 << 20, 2048), simulator=(128, 2), unit="(threads, loop steps of 16 fused multiply-adds)"),
    "ch2_latency": Size(gpu=(1 << 20, 64, 20000), simulator=(64, 4, 200), unit="(slots, int32 per slot, dependent loads)"),
    "ch2_exercise": Size(gpu=(1 << 22) + 37, simulator=1000 + 37, unit="elements (not a multiple of 4 or of a block)"),
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
