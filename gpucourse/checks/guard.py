"""Keeping a check's verdict honest: a screen of answer cells, and a time limit on every call of a student's code.

* `screen(source, names)` (in `gpucourse.checks.screen`, its tables in `gpucourse.checks.allowed`) reads a
  cell's Python source (it runs nothing) and refuses, each with its line and what to write instead,
  whatever is not on its allowlist: imports and attribute chains beyond the listed parts of numpy,
  numba.cuda, math, cupy and a few harmless standard modules; any gpucourse object other than the
  helpers the notebook's exercises use (per check module), and the course's own implementation of
  an exercise by name; Python's machinery (exec, eval, getattr and kin, dunders, frames, `__` in name-like
  strings, `type` other than as a question, class keywords, attribute assignment, rebinding the notebook's
  names). Importing `gpucourse.checks` in IPython registers it as an AST transformer (`install`), so
  a refused cell never runs; `gpucourse.grading.ScreenCells` applies it under `nbgrader autograde`.
* `deadline(seconds, ...)` ends a call that does not return in time (a SIGALRM timer of the main
  thread): every `check_*` function of the chapter modules runs under one (`limited_check`), sized
  from the time the check takes on its reference solution (`check_seconds`), and each simulated
  kernel launch inside it under its own, sized from its threads and within what is left of the
  check's (`limited_simulator`). On a GPU `wait_for_gpu` polls an
  event instead of blocking in a synchronize. A call past its limit raises `CheckTimedOut`, whose
  message names the call and the line it was running.

The screen is static: it reads the source as written, and does not follow an object the check hands
over or a value an allowed call returns (their attributes are checked by name only). It does not
sandbox the kernel process (README, "For instructors", says what that leaves open).
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import PACKAGE_DIR
from .screen import (  # noqa: F401  (the screen's names, kept here for the modules and tests that use them)
    CHECK_MODULES,
    SHOWN_REFUSALS,
    Refusal,
    RefusedEarlierCell,
    ScreenCells,
    course_names,
    earlier_refusal,
    guard_signature_strings,
    imports_check_module,
    install,
    refusal_message,
    safe_signature,
    screen,
    screen_tree,
    watch,
)

# ---------------------------------------------------------------------------------------------
# Deadlines


class CheckTimedOut(BaseException):
    """A student's function or kernel that did not end in time. A BaseException: a check's `except Exception` cannot swallow it."""


#: The most a check may take (seconds), its kernel launches included: simulator, GPU. Compute-sanitizer and trace
#: replays on a GPU are not counted (they have their own limits).
CHECK_SECONDS = {"simulator": 120.0, "gpu": 600.0}
#: A check's own limit follows its reference: CHECK_FACTOR times the time the check took on the reference solution
#: (REFERENCE_SECONDS, measured by tools/check_seconds.py), and at least MIN_CHECK_SECONDS (a slower machine, a first
#: compile). On a GPU with no record of its own, the simulator's record stands in (a GPU runs the same check faster,
#: bar compiling and timing, which the floor covers).
CHECK_FACTOR = 20.0
MIN_CHECK_SECONDS = {"simulator": 10.0, "gpu": 45.0}
#: A simulated launch may take this long, plus SIMULATED_THREAD_SECONDS per thread of its grid, and never longer than
#: what is left of its check's own limit.
SIMULATED_LAUNCH_SECONDS = 30.0
SIMULATED_THREAD_SECONDS = 0.02
#: A launch on a GPU may run this long before the check says the GPU is stuck in it (check sizes run for milliseconds).
GPU_LAUNCH_SECONDS = 20.0
REFERENCE_SECONDS_FILE = PACKAGE_DIR / "data" / "check_seconds.json"


@functools.cache
def reference_seconds() -> dict[str, dict[str, float]]:
    """The time each check took on its reference solution (seconds), by mode and check name (tools/check_seconds.py)."""
    import json

    try:
        return json.loads(REFERENCE_SECONDS_FILE.read_text())
    except (OSError, ValueError):
        return {}


@dataclass
class _Deadline:
    seconds: float
    describe: Callable[[object], str]  # the message, from the main thread's frame when time ran out
    end: float = 0.0
    remaining: float = 0.0  # while paused by an inner deadline


_active: list[_Deadline] = []
_saved: dict[str, object] = {}


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _on_alarm(signum, frame) -> None:
    if not _active:
        return
    current = _active[-1]
    if time.monotonic() < current.end - 0.01:  # a stale signal (the timer was re-armed since): wait for the real one
        return
    try:
        message = current.describe(frame)
    except Exception as exc:  # noqa: BLE001 - the words must never stop the stop
        message = f"a call did not end within {current.seconds:.0f} s ({type(exc).__name__} while naming it)"
    raise CheckTimedOut(message)


def _arm(seconds: float) -> None:
    # repeat every second after the first expiry: code that swallows the exception is interrupted again
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001), 1.0)


@contextlib.contextmanager
def deadline(seconds: float, describe: Callable[[object], str], within_outer: bool = False) -> Iterator[None]:
    """Raise CheckTimedOut(describe(frame)) if the block runs longer than `seconds` (main thread; elsewhere: no limit).

    Deadlines nest: an inner one stops the outer one's clock while it runs, unless `within_outer`: then
    its time counts against the outer one too, and it ends no later than the outer one would. The
    process's own SIGALRM handler and timer (pytest-timeout's, say) are put back when the outermost
    deadline ends.
    """
    if not _can_alarm() or seconds == float("inf"):
        with contextlib.nullcontext() if within_outer else _paused_outer():
            yield
        return
    now = time.monotonic()
    outer_end = _active[-1].end if _active else None
    if not _active:
        _saved["handler"] = signal.signal(signal.SIGALRM, _on_alarm)
        _saved["timer"] = signal.setitimer(signal.ITIMER_REAL, 0)
        _saved["since"] = now
    else:
        _active[-1].remaining = max(_active[-1].end - now, 0.0)
        if within_outer:
            seconds = min(seconds, _active[-1].remaining)
    current = _Deadline(seconds, describe, end=now + seconds)
    _active.append(current)
    _arm(seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _active.remove(current)
        if _active:
            outer = _active[-1]
            outer.end = outer_end if within_outer and outer_end is not None else time.monotonic() + outer.remaining
            _arm(max(outer.end - time.monotonic(), 0.0))
        else:
            signal.signal(signal.SIGALRM, _saved.pop("handler"))
            delay, interval = _saved.pop("timer")
            if delay:
                signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - _saved["since"]), 0.001), interval)
            _saved.pop("since")


@contextlib.contextmanager
def _paused_outer() -> Iterator[None]:
    if not _active or not _can_alarm():
        yield
        return
    outer = _active[-1]
    outer.remaining = max(outer.end - time.monotonic(), 0.0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        outer.end = time.monotonic() + outer.remaining
        _arm(outer.remaining)


def paused() -> contextlib.AbstractContextManager[None]:
    """Stop the current deadline's clock for a step with its own time limit (a subprocess with a timeout)."""
    return _paused_outer()


_MACHINERY = (PACKAGE_DIR, Path(contextlib.__file__).resolve().parent)


def _is_student_frame(frame) -> bool:
    filename = frame.f_code.co_filename
    if filename.startswith("<"):  # <frozen ...>, <string>: Python's machinery, unless IPython's own cell name
        return filename.startswith(("<ipython-input", "<stdin>"))
    path = Path(filename).resolve()
    text = str(path)
    if "site-packages" in text or "dist-packages" in text:
        return False
    return not any(path.is_relative_to(folder) for folder in _MACHINERY)


def _shown_value(value: object) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"<{type(value).__name__} of shape {tuple(value.shape)}, {value.dtype}>"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _call_of(frame) -> str:
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    arguments = ", ".join(f"{name}={_shown_value(frame.f_locals[name])}" for name in names if name in frame.f_locals)
    return f"{code.co_name}({arguments})"


def _line_number(frame) -> int:
    """The frame's line; from its last instruction when f_lineno is None (a frame interrupted by a signal may say None)."""
    if frame.f_lineno:
        return frame.f_lineno
    number = frame.f_code.co_firstlineno
    for start, _, line in frame.f_code.co_lines():  # the last line that starts at or before the instruction (a jump has none)
        if start > frame.f_lasti:
            break
        number = line or number
    return number


def _where(frame) -> str:
    number = _line_number(frame)
    line = linecache.getline(frame.f_code.co_filename, number).strip()
    return f"line {number}" + (f", `{line}`" if line else "")


def _outermost_student_frame(frame):
    """The student's function the check called (the outermost student frame below the check), and the innermost one."""
    outer = inner = None
    while frame is not None:
        if _is_student_frame(frame):
            inner = inner or frame
            outer = frame
        elif outer is not None:
            break  # back in the check's machinery: `outer` is the call the check made
        frame = frame.f_back
    return outer, inner


def _host_message(check: str, seconds: float) -> Callable[[object], str]:
    def describe(frame) -> str:
        outer, inner = _outermost_student_frame(frame)
        if outer is None:
            return f"{check} did not finish within {seconds:.0f} s; it stopped in the course's code. Run the cell again; if it " \
                   "happens again, restart the kernel."
        return (f"{_call_of(outer)} did not return within {seconds:.0f} s (it was at {_where(inner)}). "
                "Does every loop in it end? A `while` whose condition never becomes false runs forever.")
    return describe


def check_seconds(where: str, check: str | None = None) -> float:
    """A check's own time limit in this mode (seconds): the environment's GPUCOURSE_CHECK_SECONDS if set; else CHECK_FACTOR
    times its reference's recorded time, at least MIN_CHECK_SECONDS; never more than CHECK_SECONDS (unrecorded: that)."""
    configured = os.environ.get("GPUCOURSE_CHECK_SECONDS", "")
    try:
        if configured:
            return float(configured)
    except ValueError:
        pass
    recorded = reference_seconds()
    measured = recorded.get(where, {}).get(check or "")
    measured = recorded.get("simulator", {}).get(check or "") if measured is None else measured
    if measured is None:
        return CHECK_SECONDS[where]
    return min(CHECK_SECONDS[where], max(MIN_CHECK_SECONDS[where], CHECK_FACTOR * float(measured)))


def remaining_seconds() -> float:
    """What is left of the innermost running deadline (seconds; infinite outside any)."""
    return max(_active[-1].end - time.monotonic(), 0.0) if _active else float("inf")


def limited_check(check: Callable[..., object]) -> Callable[..., object]:
    """`check` under its deadline (`check_seconds`), with every simulated launch inside it limited by its threads and by it."""
    if getattr(check, "_gpucourse_limited", False):
        return check

    @functools.wraps(check)
    def limited(*args, **kwargs):
        from .. import mode
        from .runs import float64_arguments_seen

        float64_arguments_seen(clear=True)  # what an earlier check saw is not this check's evidence
        seconds = check_seconds("gpu" if mode.on_gpu() else "simulator", check.__name__)
        with deadline(seconds, _host_message(check.__name__, seconds)), limited_simulator(), _gpu_watchdog(seconds):
            return check(*args, **kwargs)

    limited._gpucourse_limited = True
    return limited


def limit_checks(module) -> None:
    """Put every public `check_*` function of a chapter module under `limited_check` (in place, once)."""
    for name, value in list(vars(module).items()):
        if name.startswith("check_") and callable(value) and getattr(value, "__module__", None) == module.__name__:
            setattr(module, name, limited_check(value))


# --- simulated kernels


def simulated_launch_seconds(threads: int) -> float:
    """The time limit of one simulated launch of `threads` threads (seconds): generous on a slow, shared machine."""
    return SIMULATED_LAUNCH_SECONDS + SIMULATED_THREAD_SECONDS * threads


def _stop_simulated_threads(grace_s: float = 2.0) -> None:
    """End the simulator's threads left running by a launch that was stopped: they would keep the GIL busy forever."""
    import ctypes

    from numba.cuda.simulator.kernel import BlockThread

    stray = [thread for thread in threading.enumerate() if isinstance(thread, BlockThread) and thread.is_alive()]
    for thread in stray:
        thread.abort = True
        thread.syncthreads_blocked = False
        thread.syncthreads_event.set()  # wakes a thread waiting at a barrier: it then raises (abort)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(SystemExit))
    end = time.monotonic() + grace_s
    for thread in stray:
        thread.join(max(end - time.monotonic(), 0.0))


def _kernel_message(name: str, grid, block, seconds: float) -> Callable[[object], str]:
    def describe(frame) -> str:
        where = ""
        from numba.cuda.simulator.kernel import BlockThread

        frames = sys._current_frames()
        for thread in threading.enumerate():
            if isinstance(thread, BlockThread) and thread.ident in frames:
                _, inner = _outermost_student_frame(frames[thread.ident])
                if inner is not None:
                    where = f" (thread {tuple(thread.threadIdx)} of block {tuple(thread.blockIdx)} was at {_where(inner)})"
                    break
        return (f"the kernel {name}[{grid}, {block}] did not finish within {seconds:.0f} s in the simulator{where}. Does every "
                "loop in it end? A `while` whose condition never becomes false runs forever.")
    return describe


@contextlib.contextmanager
def limited_simulator() -> Iterator[None]:
    """In the simulator, every kernel launch made in the block runs under a deadline sized from its threads."""
    from .. import mode

    if not mode.is_simulator() or not _can_alarm():
        yield
        return
    from numba.cuda.simulator import kernel as simulated

    original = simulated.FakeCUDAKernel.__call__

    def call(self, *args):
        if self._device or simulated._kernel_context or threading.current_thread() is not threading.main_thread():
            return original(self, *args)
        grid, block = simulated.normalize_kernel_dimensions(self.grid_dim, self.block_dim)
        threads = _count(grid) * _count(block)
        seconds = simulated_launch_seconds(threads)
        name = getattr(self.fn, "__name__", "kernel")
        seconds = min(seconds, remaining_seconds())  # a launch counts against its check's own limit
        try:
            with deadline(seconds, _kernel_message(name, _dims(grid), _dims(block), seconds), within_outer=True):
                return original(self, *args)
        except CheckTimedOut:
            _stop_simulated_threads()
            raise

    simulated.FakeCUDAKernel.__call__ = call
    try:
        yield
    finally:
        simulated.FakeCUDAKernel.__call__ = original


def _count(dims) -> int:
    total = 1
    for value in (dims if isinstance(dims, tuple) else tuple(dims)):
        total *= int(value)
    return total


def _dims(dims) -> str:
    values = tuple(int(v) for v in dims)
    while len(values) > 1 and values[-1] == 1:
        values = values[:-1]
    return str(values[0]) if len(values) == 1 else str(values)


# --- a real GPU


def wait_for_gpu(what: str, seconds: float | None = None, poll_s: float = 0.005) -> None:
    """Wait for the GPU's work so far by polling an event (a synchronize could block for ever); past `seconds`, say so."""
    from numba import cuda

    seconds = GPU_LAUNCH_SECONDS if seconds is None else seconds
    event = cuda.event(timing=False)
    event.record()
    start = time.monotonic()
    while not event.query():
        if time.monotonic() - start > seconds:
            raise CheckTimedOut(
                f"{what} did not finish within {seconds:.0f} s: the GPU is still running it and will not stop by itself. "
                "Does every loop in the kernel end? Restart the kernel (Kernel > Restart) before running anything else.")
        time.sleep(poll_s)


@contextlib.contextmanager
def _gpu_watchdog(seconds: float) -> Iterator[None]:
    """On a GPU, a message from a helper thread if the check is still running past its limit (stuck in a CUDA call)."""
    from .. import mode

    if not mode.on_gpu():
        yield
        return

    def warn() -> None:
        print(f"\u26a0 the check is still running after {seconds + 30:.0f} s, stuck waiting for the GPU: a kernel of yours "
              "probably never ends (a loop whose condition stays true). Restart the kernel (Kernel > Restart).", flush=True)

    timer = threading.Timer(seconds + 30, warn)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
