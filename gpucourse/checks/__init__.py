"""Checks for exercise notebooks: run the student's code on fresh random data and say what is wrong.

Every check raises `CheckFailed` (an AssertionError) with a message in plain words, or prints one
line starting with a check mark. The generic pieces here catch the usual mistakes: a wrong shape or
dtype, elements never written (a launch that does not cover the array), writes past the end of an
array (caught by guard cells around it, or by the simulator's bounds checks), and wrong values.
Chapter modules (`gpucourse.checks.ch1`, ...) build each exercise's check from them.

In a notebook, a failed check shows its message and the student's own line that called it, not
a traceback through this package: importing the module registers that display with IPython.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..arrays import to_host, unwritten_mask


class CheckFailed(AssertionError):
    """An exercise answer that is not right yet; the message says what to change."""


PACKAGE_DIR = Path(__file__).resolve().parent.parent


def short_traceback(value: BaseException, tb, label: Callable[[str], str | None] = lambda filename: None,
                    skip: tuple[Path, ...] = ()) -> list[str]:
    """A failed check as the student should see it: the message, then the calling lines outside gpucourse (and `skip`)."""
    lines = [f"\u274c {value}"]
    for frame in traceback.extract_tb(tb):
        path = Path(frame.filename).resolve()
        if any(path.is_relative_to(folder) for folder in (PACKAGE_DIR, *skip)):
            continue  # the check's own machinery (or IPython's): nothing the student can change
        where = label(frame.filename) or f"{frame.filename}"
        lines.append(f"   from {where}, line {frame.lineno}: {(frame.line or '').strip()}")
    return lines


#: How a cell that uses an exercise's stub (before it is answered) begins its short message.
UNANSWERED = "Not answered yet (the exercise's stub raised NotImplementedError):"


def _show_check_failure(shell, etype, value, tb, tb_offset=None) -> list[str]:
    """IPython's handler for CheckFailed (and a stub's NotImplementedError): show the short traceback as the cell's error output."""

    def label(filename: str) -> str | None:
        named = getattr(shell.compile, "format_code_name", lambda name: None)(filename)
        return " ".join(named) if named else None

    import IPython

    stb = ["\n".join(short_traceback(value, tb, label, skip=(Path(IPython.__file__).resolve().parent,)))]
    if isinstance(value, NotImplementedError):  # a stub of an exercise not answered yet, used by a cell after its check
        stb = [stb[0].replace("\u274c ", f"\u274c {UNANSWERED} ", 1)]
    shell._showtraceback(etype, value, stb)  # an error output: the cell counts as failed (nbclient, nbgrader)
    return stb


def _report_fatal_errors() -> None:
    """If the kernel process dies in a check (a crash in native code), write its Python stack to the process's stderr.

    A notebook then shows only that the kernel died; the kernel's log (the Jupyter server's terminal, or
    the stderr of nbclient's kernel) names the line that was running.
    """
    import faulthandler
    import sys

    if not faulthandler.is_enabled() and sys.__stderr__ is not None:
        try:
            faulthandler.enable(file=sys.__stderr__, all_threads=True)
        except (ValueError, OSError, AttributeError):  # a stderr without a file descriptor: nothing to write to
            pass


def _register_with_ipython() -> None:
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "set_custom_exc"):
        from .guard import CheckTimedOut, watch

        shell.set_custom_exc((CheckFailed, CheckTimedOut, NotImplementedError), _show_check_failure)
        _report_fatal_errors()
        watch(shell)  # from an exercise notebook's set-up cell on, a cell that could change the checks is refused


def passed(message: str) -> None:
    """Tell the student the check passed."""
    print(f"\u2705 {message}")


#: A failed check names at most this many problems: the first are the causes, the rest usually their consequences.
SHOWN_PROBLEMS = 3


def fail(problems: list[str], exercise: str) -> None:
    """Raise CheckFailed listing `problems` (the first SHOWN_PROBLEMS, distinct), if there are any."""
    if problems:
        distinct = list(dict.fromkeys(problems))
        shown = distinct[:SHOWN_PROBLEMS]
        more = len(distinct) - len(shown)
        bullet = "\n  - "
        tail = f"\n  (and {more} more like these; fix these first)" if more else ""
        raise CheckFailed(f"{exercise}: not yet right.{bullet}{bullet.join(shown)}{tail}")


def array_problems(got, expected: np.ndarray, *, what: str = "the result", rtol: float = 1e-6, atol: float = 0.0,
                   coverage_hint: str = "") -> list[str]:
    """Compare a student's array with the reference; return the problems found, in words."""
    if got is None:
        return [f"{what} is None: return the output array (or fill the output argument) instead of nothing."]
    if not hasattr(got, "shape"):
        return [f"{what} should be an array; got {type(got).__name__}."]
    got = to_host(got)
    problems = []
    if got.shape != expected.shape:
        return [f"{what} has shape {got.shape}; expected {expected.shape}."]
    if got.dtype != expected.dtype:
        problems.append(f"{what} has dtype {got.dtype}; expected {expected.dtype}. Allocate it with dtype=numpy.{expected.dtype}.")
    if got.dtype.kind in "fciu" and expected.dtype.kind in "fciu":
        never = unwritten_mask(got) & ~unwritten_mask(expected)
        if never.any():
            first = tuple(int(i) for i in np.argwhere(never)[0])
            problems.append(
                f"{int(never.sum())} of {never.size} elements of {what} were never written (first at index "
                f"{first[0] if len(first) == 1 else first}). {coverage_hint or 'Does the launch give every element a thread?'}"
            )
        written = ~never
        close = np.isclose(got.astype(np.complex128 if got.dtype.kind == 'c' else np.float64),
                           expected.astype(np.complex128 if expected.dtype.kind == 'c' else np.float64),
                           rtol=rtol, atol=atol, equal_nan=True)
        wrong = written & ~close
        if wrong.any():
            index = tuple(int(i) for i in np.argwhere(wrong)[0])
            shown = index[0] if len(index) == 1 else index
            problems.append(
                f"{int(wrong.sum())} of {wrong.size} elements of {what} have wrong values; at index {shown} "
                f"got {got[index]!r}, expected {expected[index]!r} (tolerance rtol={rtol:g}, atol={atol:g})."
            )
    return problems


def guard_value(dtype) -> object:
    """The finite value the guard cells around an output hold: any write, even `+= b` or `*= 2`, changes it.

    (NaN would not do: NaN + 1 is NaN, so an in-place update of a guard cell would go unnoticed.)
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return dtype.type(-777.25)
    if dtype.kind in "iu":
        return dtype.type(np.iinfo(dtype).min + 7)
    raise TypeError(f"no guard value for dtype {dtype}")


def run_guarded(launch: Callable[..., object], out_shape: tuple[int, ...], dtype, *inputs, guard: int | None = None,
                initial: np.ndarray | None = None, **invariants) -> tuple[np.ndarray, list[str]]:
    """Run `launch(out, *inputs)` on a framed output, its guard band sized from the launch; return (out, problems).

    See `gpucourse.checks.runs.run_checked`, which also reports compile errors, races and float64 in words; `invariants`
    (kernel_required, input_names) are passed on to it.
    """
    from .runs import run_checked

    run = run_checked(launch, out_shape, dtype, *inputs, guard=guard, initial=initial, **invariants)
    return run.got, run.problems


def stub_hint(answer: object) -> str | None:
    """The hint of an answer that is still its exercise's stub (a function or kernel whose body only raises
    NotImplementedError, as `python -m gpucourse exercises` writes it), else None."""
    if getattr(answer, "_gpucourse_replayed", False):
        return None  # the grader's stand-in for an answer (remote.Replayed): a stub showed in the notebook run's transcript
    function = getattr(answer, "py_func", answer)  # a @cuda.jit kernel: the Python function it compiles
    code = getattr(function, "__code__", None)
    if code is None or set(code.co_names) != {"NotImplementedError"}:
        return None
    arguments = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    if code.co_nlocals != arguments:
        return None
    texts = [const for const in code.co_consts if isinstance(const, str) and const != getattr(function, "__doc__", None)]
    return texts[-1] if texts else "write it"


def exercise_of(check: Callable[..., object]) -> str:
    """'Exercise 1.1', from a check's docstring (every check's starts with the exercise it checks)."""
    import re

    found = re.match(r"\s*(Exercise [\w.]+)", check.__doc__ or "")
    return found.group(1) if found else "This exercise"


def reports_unanswered(check: Callable[..., object]) -> Callable[..., object]:
    """`check`, saying "not yet right" in its own words when an answer is still the stub or raises NotImplementedError.

    A stub is caught before anything runs (a kernel stub compiles, and on a GPU its raise would go unseen), so an
    unanswered notebook shows each check's own line, never a traceback.
    """
    import functools

    if getattr(check, "_gpucourse_unanswered", False):
        return check

    @functools.wraps(check)
    def answered(*args, **kwargs):
        exercise = exercise_of(check)
        stubs = [(getattr(getattr(a, "py_func", a), "__name__", "the answer"), hint) for a in [*args, *kwargs.values()]
                 if (hint := stub_hint(a)) is not None]
        if stubs:
            fail([f"{name} is still the exercise's stub (it raises NotImplementedError): write it. Hint: {hint}" for name, hint in stubs],
                 exercise)
        try:
            return check(*args, **kwargs)
        except NotImplementedError as error:
            raise CheckFailed(f"{exercise}: not yet right.\n  - your code raised NotImplementedError: finish it. {error}") from None

    answered._gpucourse_unanswered = True
    return answered


def chapter_checks(module) -> list[tuple[str, Callable[..., object]]]:
    """The public `check_*` functions a chapter module defines, with their names: what the course wraps (limit, stub, transcript)."""
    return [(name, value) for name, value in vars(module).items()
            if name.startswith("check_") and callable(value) and getattr(value, "__module__", None) == module.__name__]


def _limit_chapter_checks() -> None:
    """Load the chapter modules and put each check under a time limit (`guard.limited_check`): every check ends; an unanswered
    exercise gets the check's own "not yet right" (`reports_unanswered`); under autograde, each check writes the grader's
    transcript (`remote.recorded`)."""
    import importlib
    import os

    from .guard import CHECK_MODULES, limit_checks
    from .remote import TRANSCRIPT_ENV, recorded

    for name in sorted(CHECK_MODULES):
        module = importlib.import_module(f"{__name__}.{name}")
        limit_checks(module)
        for attribute, check in chapter_checks(module):
            check = reports_unanswered(check)
            if os.environ.get(TRANSCRIPT_ENV) and not getattr(check, "_gpucourse_recorded", False):
                check = recorded(check, name)
            setattr(module, attribute, check)


_limit_chapter_checks()
_register_with_ipython()
