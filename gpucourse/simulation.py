"""Helpers that keep simulator mode fast enough to teach with; on a GPU they change nothing.

The simulator runs every CUDA thread as a Python thread. Two things make kernels much slower there
than they need to be: Python's default thread-switch interval, which leaves threads waiting at each
barrier, and simulated device-function calls, which swap module globals on every call.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

from numba import cuda

from .mode import is_simulator

#: GIL switch interval (s) while a simulated kernel runs. The simulator runs each CUDA thread as a
#: Python thread and a manager thread polls them at every barrier; Python's default of 5 ms between
#: thread switches leaves most of that time waiting. 0.1 ms makes kernels with barriers 3-10x faster.
SIMULATOR_SWITCH_INTERVAL = 1e-4


def device_function(function: Callable) -> Callable:
    """An inlined CUDA device function on a GPU; in the simulator, the plain Python function.

    A simulated call of a `cuda.jit(device=True)` function swaps module globals on every call, which
    made chapter 6's stencil kernels several times slower in the simulator; plain Python does the same work.
    """
    if is_simulator():
        return function
    return cuda.jit(device=True, inline=True)(function)


def paced(launcher: Callable) -> Callable:
    """Decorate a launcher so that, in simulator mode, Python switches threads often while it runs."""

    @functools.wraps(launcher)
    def run(*args, **kwargs):
        if not is_simulator():
            return launcher(*args, **kwargs)
        previous = sys.getswitchinterval()
        sys.setswitchinterval(min(previous, SIMULATOR_SWITCH_INTERVAL))
        try:
            return launcher(*args, **kwargs)
        finally:
            sys.setswitchinterval(previous)

    return run
