"""Small generic helpers of the chapter 4-7 checks: edge-class sizes, inputs that must come back unchanged.

A check states the properties of a right answer and runs it on cases that cover every edge class the
lesson's indexing depends on: sizes just below, at and above each multiple (a warp, a block, a tile,
`n // 2`), sizes at a limit, counts that are odd as well as powers of two. `sizes_around` makes those
cases; `changed_inputs` says, in words, when an answer wrote into an input it was handed.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from .. import mode
from ..arrays import to_host


def sizes_around(multiples: Iterable[int], least: int = 1) -> list[int]:
    """Each multiple m and its neighbours m - 1 and m + 1 (at least `least`), sorted, without repeats."""
    return sorted({size for m in multiples for size in (m - 1, m, m + 1) if size >= least})


def changed_inputs(inputs: Mapping[str, object], originals: Mapping[str, np.ndarray]) -> list[str]:
    """Words for every input (host or device array) whose values differ from its original copy ([] when all are unchanged)."""
    problems = []
    for name, value in inputs.items():
        now = to_host(value)
        before = originals[name]
        same = now.shape == before.shape and bool(np.all((now == before) | (np.isnan(now) & np.isnan(before))
                                                         if now.dtype.kind in "fc" else now == before))
        if not same:
            differ = int(np.count_nonzero(now != before)) if now.shape == before.shape else now.size
            problems.append(f"your code changed its input `{name}` ({differ} of {before.size} elements): an input is read, never "
                            "written. Write the result into the output array only (a kernel that updates its input in place also "
                            "breaks the caller's next use of it).")
    return problems


@dataclass(frozen=True)
class KernelCall:
    """One Numba kernel launch with what it was handed: its parameters' names, its arguments and its dynamic shared bytes."""

    name: str
    parameters: tuple[str, ...]
    arguments: tuple
    shared_bytes: int
    threads: int


def _parameters(function) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return ()


@contextlib.contextmanager
def recorded_calls() -> Iterator[list[KernelCall]]:
    """Record every Numba kernel launch made inside the block with its arguments and dynamic shared memory (bytes)."""
    calls: list[KernelCall] = []
    if mode.is_simulator():
        from numba.cuda.simulator import kernel as simulated

        owner, original = simulated.FakeCUDAKernel, simulated.FakeCUDAKernel.__call__

        def call(self, *args):
            if not (self._device or simulated._kernel_context):
                _, block = simulated.normalize_kernel_dimensions(self.grid_dim, self.block_dim)
                calls.append(KernelCall(getattr(self.fn, "__name__", "kernel"), _parameters(self.fn), args,
                                        int(self.dynshared_size or 0), math.prod(tuple(block))))
            return original(self, *args)
    else:
        from numba.cuda import dispatcher

        owner, original = dispatcher._LaunchConfiguration, dispatcher._LaunchConfiguration.__call__

        def call(self, *args):
            function = self.dispatcher.py_func
            block = (self.blockdim,) if isinstance(self.blockdim, int) else tuple(self.blockdim)
            calls.append(KernelCall(function.__name__, _parameters(function), args, int(self.sharedmem or 0), math.prod(block)))
            return original(self, *args)

    owner.__call__ = call
    try:
        yield calls
    finally:
        owner.__call__ = original


def float64_argument_problems(calls: list[KernelCall]) -> list[str]:
    """Words for a Python float or float64 scalar handed to a float32 kernel: Numba types it float64, and so is its arithmetic."""
    for call in calls:
        for number, value in enumerate(call.arguments):
            if type(value) is float or isinstance(value, np.float64):
                name = call.parameters[number] if number < len(call.parameters) else f"argument {number + 1}"
                return [f"{call.name} gets `{name}` = {float(value):.6g} as a float64 (a Python float): Numba types the "
                        "parameter float64, and every operation that uses it is float64 arithmetic. Results of math.sqrt, "
                        "math.exp or of arithmetic with a Python float are Python floats: pass np.float32(value)."]
    return []


_TRACEBACK = "Traceback (most recent call last):"


def plain_note(note: str) -> str:
    """A check's note with any Python traceback in it (a failed replay's) cut to its last line, the error itself."""
    if _TRACEBACK not in note:
        return note
    head, _, tail = note.partition(_TRACEBACK)
    lines = [line.strip() for line in tail.strip().removesuffix(")").splitlines() if line.strip()]
    return f"{head}{lines[-1] if lines else 'an error in the replay'})"
