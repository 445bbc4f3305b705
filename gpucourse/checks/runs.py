"""Running a student's launcher on a framed output: guard bands sized from the launch, compile errors in words.

`run_checked` first calls the launcher with every launch skipped, to learn its grid and block; sizes
the guard band around the output from them (at least a few blocks: an unchecked tail lands in it on
a GPU as in the simulator); reads the kernels' shared-array declarations (a computed shape compiles
in the simulator but not on a GPU: both modes say so before launching); then runs it for real with
poisoned shared memory (simulator), as many times as asked, and compares the runs bit for bit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import mode
from ..arrays import poison_value, to_device, to_host
from . import guard_value
from .launches import (
    RecordedLaunch,
    compile_problem,
    float64_problem,
    guard_for,
    kernels_of,
    recorded_launches,
    shared_declaration_problems,
)
from .trace import poisoned_shared_memory


def race_repeats() -> int:
    """How many times a shared-memory exercise runs: 3 on a GPU, 2 in the simulator (its threads interleave differently each run)."""
    return 3 if mode.on_gpu() else 2


@dataclass
class Run:
    """What `run_checked` saw: the output (interior), the problems in words, the launches and the guard used."""

    got: np.ndarray
    problems: list[str]
    launches: list[RecordedLaunch] = field(default_factory=list)
    guard: int = 0

    @property
    def kernels(self) -> list[object]:
        """The distinct kernels launched."""
        return kernels_of(self.launches)


BOUNDS_HINT = "Threads past the end must not write: add a bounds check such as `if i < out.size:`."


def _framed(out_shape, dtype, guard: int, initial):
    padded_shape = tuple(n + 2 * guard for n in out_shape)
    host = np.full(padded_shape, guard_value(dtype), dtype=dtype)
    interior = tuple(slice(guard, guard + n) for n in out_shape)
    host[interior] = poison_value(dtype) if initial is None else initial
    return to_device(host), interior, padded_shape


def run_checked(launch: Callable[..., object], out_shape: tuple[int, ...], dtype, *inputs, guard: int | None = None,
                initial: np.ndarray | None = None, repeats: int = 1, float32_kernel: bool | None = None) -> Run:
    """Run `launch(out, *inputs)` on a device output framed by guard cells sized from its launch; say what went wrong.

    The output handed to the student is a view into a larger buffer whose frame holds a guard value:
    a write past its end lands there (on a GPU) or raises IndexError (in the simulator); both are
    reported. The interior starts poisoned, or as `initial` for kernels that update in place. With
    `repeats` > 1 the launch runs again on a fresh output and the results must agree bit for bit. On a
    GPU, float64 arithmetic in a float32 kernel's compiled code is printed as advice, not counted as a
    problem (`float32_kernel`: default, dtype is float32): the verdict's float64 evidence is the trace's,
    the same in both modes.
    """
    dtype = np.dtype(dtype)
    out_shape = tuple(out_shape)
    float32_kernel = dtype == np.float32 if float32_kernel is None else float32_kernel
    launches: list[RecordedLaunch] = []
    if guard is None:
        probe = to_device(np.full(out_shape, poison_value(dtype), dtype=dtype))
        try:
            with recorded_launches(dry=True) as launches:
                launch(probe, *inputs)
        except NotImplementedError:
            raise  # an unfinished exercise: its hint is the message
        except Exception:  # noqa: BLE001 - the real run below reports it in words
            launches = []
        guard = guard_for(launches, out_shape)
        declared = shared_declaration_problems(kernels_of(launches))
        if declared:  # on a GPU the kernel would not even compile: say why before launching it
            return Run(np.full(out_shape, poison_value(dtype), dtype), declared, launches, guard)
    results = []
    problems: list[str] = []
    for _ in range(max(1, repeats)):
        buffer, interior, padded_shape = _framed(out_shape, dtype, guard, initial)
        out = buffer[interior]
        try:
            with recorded_launches() as launches, poisoned_shared_memory():
                launch(out, *inputs)
        except IndexError as exc:
            return Run(np.full(out_shape, poison_value(dtype), dtype), [
                f"the kernel indexed outside an array ({simulator_error_in_words(exc)}). On a GPU this corrupts memory silently; here the simulator "
                f"caught it. {BOUNDS_HINT}"], launches, guard)
        except Exception as exc:
            message = compile_problem(exc)
            if message is None:
                raise
            return Run(np.full(out_shape, poison_value(dtype), dtype), [message], launches, guard)
        host = to_host(buffer)
        frame = np.ones(padded_shape, dtype=bool)
        frame[interior] = False
        touched = frame & (host != guard_value(dtype))
        if touched.any() and not problems:
            problems.append(f"the kernel wrote {int(touched.sum())} element(s) outside the output array. {BOUNDS_HINT}")
        results.append(host[interior])
    got = results[0]
    for number, other in enumerate(results[1:], start=2):
        same = (got == other) | (np.isnan(got) & np.isnan(other)) if got.dtype.kind in "fc" else got == other
        differ = ~same
        if differ.any():
            first = tuple(int(i) for i in np.argwhere(differ)[0])
            problems.append(
                f"run {number} gave other values than run 1 at {int(differ.sum())} element(s) (first at {first[0] if len(first) == 1 else first}): "
                "the same kernel on the same data must give the same result. Threads that read shared memory another thread "
                "writes need a cuda.syncthreads() between the write and the read.")
            break
    if float32_kernel and mode.on_gpu() and not problems:
        message = float64_problem(launches)
        if message:  # advice, not a verdict: the simulator cannot read compiled code, and both modes must agree
            print(f"\u26a0 {message}")
    return Run(got, problems, launches, guard)


def simulator_error_in_words(exc: BaseException) -> str:
    """The simulator's error with its thread named in words: 'thread (39, 0, 0) of block (1, 0, 0): index 103 is out of bounds ...'."""
    text = str(exc)
    found = re.match(r"tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]: (.*)", text, re.S)
    if not found:
        return text
    thread, block = ", ".join(found.group(1, 2, 3)), ", ".join(found.group(4, 5, 6))
    return f"thread ({thread}) of block ({block}): {found.group(7)}"

