"""Generated cases for the exercise checks: the edge classes of a lesson's indexing and rules, and the smallest failing case.

A check states the properties a right answer has (in its docstring) and tests each on cases drawn
here: sizes at every multiple a kernel's indexing depends on (a warp, a block, a tile, four elements
per thread) and one either side of it, block sizes that are not multiples of 32, values on both sides
of a rule's boundary. `smallest_failure` runs the book's cases first, then Hypothesis (seeded by the
property's code, so every run tries the same cases; no example database; no deadline; none of the constants
Hypothesis otherwise reads from the local modules loaded, which differ between a notebook's kernel and the grader's
process, so that both draw the same cases), and reports
the smallest case that fails, which Hypothesis's shrinking finds: "n = 768" says more than "n = 8197".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, configuration, given, settings
from hypothesis import strategies as st

T = TypeVar("T")

# Hypothesis keeps a cache (the constants it reads from local source files) in .hypothesis/ under the working directory:
# in a student's exercise folder it would be one more folder to hand in. Keep it in the user's cache instead, unless
# HYPOTHESIS_STORAGE_DIRECTORY says where.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    configuration.set_hypothesis_home_dir(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpucourse" / "hypothesis")

#: Calls of a slow property (a simulated kernel) allowed while shrinking: enough to reach a small case, never minutes.
SHRINK_CALLS = 24


def edge_sizes(periods: Iterable[int], high: int, *, low: int = 1, offsets: Sequence[int] = (-1, 0, 1),
               extra: Iterable[int] = ()) -> list[int]:
    """Sizes (elements) from `low` to `high`: every multiple k * p of each period p, shifted by each offset, and `extra`; sorted."""
    sizes = {int(value) for value in extra if low <= value <= high}
    for period in periods:
        for multiple in range(period, high + max(offsets, default=0) + 1, period):
            sizes.update(multiple + offset for offset in offsets if low <= multiple + offset <= high)
    sizes.update(value for value in (low, low + 1) if value <= high)
    return sorted(sizes)


def sizes_from(values: Sequence[T]) -> st.SearchStrategy[T]:
    """A strategy drawing from `values`, which shrinks towards their start (put the smallest first)."""
    return st.sampled_from(list(values))


def shares_near(boundary: float, low: float = 0.05, high: float = 1.5) -> st.SearchStrategy[float]:
    """Fractions at `boundary`, just either side of it (1e-9 to 5 %), and anywhere from `low` to `high`."""
    near = [boundary + sign * step for step in (1e-9, 1e-6, 1e-3, 0.005, 0.01, 0.02, 0.05) for sign in (-1, 1)]
    return st.one_of(st.sampled_from([boundary, *near]), st.floats(low, high, allow_nan=False, allow_infinity=False))


class _Failed(Exception):
    """A generated case on which the property found a problem (Hypothesis shrinks it)."""


def smallest_failure(problem: Callable[[T], str | None], cases: st.SearchStrategy[T], examples: Sequence[T] = (),
                     max_examples: int = 10, shrink_calls: int = SHRINK_CALLS) -> tuple[T, str] | None:
    """The first of `examples` on which `problem` says something, else the smallest generated case that does; None if none.

    `problem(case)` returns the problem in words, or None; it reports the answer's own exceptions in words
    too. Any exception it lets through (an unfinished exercise's NotImplementedError, a time limit) ends
    the search and is raised again. Each case is judged once (a cache), and shrinking stops after
    `shrink_calls` new cases: Hypothesis then reports the smallest failure found so far.
    """
    for case in examples:
        found = problem(case)
        if found:
            return case, found
    judged: dict[str, str | None] = {}
    stopped: list[BaseException] = []
    failures: list[tuple[T, str]] = []

    def judge(case: T) -> str | None:
        if stopped:
            raise stopped[0]
        key = repr(case)
        if key not in judged:
            if failures and len(judged) >= max_examples + shrink_calls:
                return None  # enough shrinking: a new case counts as passing, the cached ones keep their verdict
            try:
                judged[key] = problem(case)
            except BaseException as exc:  # an unfinished exercise or a time limit: stop searching, raise it below
                stopped.append(exc)
                raise
        return judged[key]

    @settings(derandomize=True, database=None, deadline=None, max_examples=max_examples, verbosity=Verbosity.quiet,
              phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck), print_blob=False)
    @given(cases)
    def holds(case: T) -> None:
        found = judge(case)
        if found:
            failures.append((case, found))
            raise _Failed(found)

    try:
        with _own_constants_only():
            holds()
    except _Failed:
        pass
    except BaseException:
        if stopped:
            raise stopped[0] from None
        raise
    if stopped:
        raise stopped[0]
    # Hypothesis ends by replaying the smallest failing case it found (its order: fewer and smaller choices first)
    return failures[-1] if failures else None


@contextlib.contextmanager
def _own_constants_only() -> Iterator[None]:
    """Inside, Hypothesis draws only its own constants, none of the numbers it finds in the local modules loaded (`sys.modules`).

    Those modules differ between the notebook's kernel (the answer's run) and the grader's process, and so would the cases
    drawn: grading apart needs the same cases in both. (Hypothesis has no setting for it: its provider's module is patched.)
    """
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:  # a Hypothesis without local constants
        yield
        return
    original = getattr(providers, "_get_local_constants", None)
    if original is None:
        yield
        return
    providers._get_local_constants = Constants  # an empty set of constants, fresh for each provider
    providers.CONSTANTS_CACHE.cache.clear()  # the permitted constants cached with the local ones
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()


# ---------------------------------------------------------------------------------------------
# Invariants of every kernel exercise, in words (a check adds them when `run_checked` said nothing)


def no_kernel_problem(launches: Sequence[object], what: str) -> str | None:
    """Words for an answer that launched no kernel of its own (`launches.kernel_launch_problems`); None if it launched one."""
    from .launches import kernel_launch_problems

    found = kernel_launch_problems(list(launches), what)
    return found[0] if found else None


def changed_input_problems(inputs: dict[str, tuple[object, np.ndarray]], what: str) -> list[str]:
    """Words for each input (name: (device array, its host copy from before the call)) that the answer changed (`runs.input_changes`)."""
    from .runs import KeptInput, input_changes

    kept = [KeptInput(name, device, before, position) for position, (name, (device, before)) in enumerate(inputs.items())]
    return input_changes(kept, what)
