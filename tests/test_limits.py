"""Limits a student can wait for, under the real limits (no lowered one): each check's own limit follows its reference's
recorded time; an endless answer to 7.1 ends with the line of its loop, and a quadratic answer to 1.3 is named, within
30 s in the simulator and 60 s on a GPU; a simulated launch counts against its check's limit."""

from __future__ import annotations

import importlib
import re
import time

import pytest
from test_invariants import fill_scanning_everything

from gpucourse import mode
from gpucourse.checks import CheckFailed, ch1, ch7, guard

#: What the course promises a student waits at most for a check's word, in this mode (seconds).
ACCEPTED_SECONDS = 60.0 if mode.on_gpu() else 30.0
WHERE = "gpu" if mode.on_gpu() else "simulator"


def test_each_checks_limit_follows_its_references_recorded_time(monkeypatch):
    monkeypatch.delenv("GPUCOURSE_CHECK_SECONDS", raising=False)
    recorded = guard.reference_seconds()
    modules = [importlib.import_module(f"gpucourse.checks.{module}") for module in sorted(guard.CHECK_MODULES)]
    checks = {name for module in modules for name, value in vars(module).items()
              if name.startswith("check_") and getattr(value, "__module__", None) == module.__name__}
    assert checks <= set(recorded["simulator"]), f"not recorded: {sorted(checks - set(recorded['simulator']))} (tools/check_seconds.py)"
    own = recorded.get(WHERE) or recorded["simulator"]
    for name in checks:
        reference = own[name] if name in own else recorded["simulator"][name]
        want = min(guard.CHECK_SECONDS[WHERE], max(guard.MIN_CHECK_SECONDS[WHERE], guard.CHECK_FACTOR * reference))
        assert guard.check_seconds(WHERE, name) == want
    assert guard.check_seconds(WHERE, "check_never_recorded") == guard.CHECK_SECONDS[WHERE]
    assert guard.check_seconds(WHERE, "check_next_fast_size") <= ACCEPTED_SECONDS - 5  # the endless answer's limit below
    monkeypatch.setenv("GPUCOURSE_CHECK_SECONDS", "7")
    assert guard.check_seconds(WHERE, "check_next_fast_size") == 7.0


def next_fast_size(n):
    """7.1, written with a loop that never ends when n is not fast already (`m` is never increased)."""
    m = n
    while True:
        rest = m
        for prime in (2, 3, 5, 7):
            while rest % prime == 0:
                rest //= prime
        if rest == 1:
            return m


def test_an_endless_answer_to_7_1_ends_with_the_line_of_its_loop_under_the_real_limit(monkeypatch):
    """7.1 gives each call its own limit (ch7.CALL_SECONDS) inside the check's: a student waits seconds, not the check's whole limit."""
    monkeypatch.delenv("GPUCOURSE_CHECK_SECONDS", raising=False)
    start = time.monotonic()
    with pytest.raises(CheckFailed) as stopped:
        ch7.check_next_fast_size(next_fast_size)
    elapsed = time.monotonic() - start
    limit = guard.check_seconds(WHERE, "check_next_fast_size")
    assert elapsed < ACCEPTED_SECONDS and elapsed < min(limit, ch7.CALL_SECONDS) + 5, elapsed
    message = str(stopped.value)
    assert re.search(rf"next_fast_size\(n=\d+\) did not return within {ch7.CALL_SECONDS:.0f} s \(it was at line \d+, `(while|rest|if|for)",
                     message), message
    assert len(message.splitlines()) <= 5


def test_a_quadratic_answer_to_1_3_is_named_under_the_real_limit(monkeypatch):
    monkeypatch.delenv("GPUCOURSE_CHECK_SECONDS", raising=False)
    start = time.monotonic()
    with pytest.raises(CheckFailed, match=r"fill_kernel does about n² work") as failed:
        ch1.check_fill_grid_stride(fill_scanning_everything)
    assert time.monotonic() - start < ACCEPTED_SECONDS
    assert len(str(failed.value).splitlines()) <= 5


def test_an_inner_deadline_within_the_outer_ends_with_the_outer_and_keeps_its_own_words():
    start = time.monotonic()
    with guard.deadline(1.5, lambda frame: "the check"):
        with pytest.raises(guard.CheckTimedOut, match="the launch"):
            with guard.deadline(0.3, lambda frame: "the check's first part"):
                time.sleep(0.1)  # a part with its own clock: the check's is stopped meanwhile
            outer_left = guard.remaining_seconds()
            with guard.deadline(30.0, lambda frame: "the launch", within_outer=True):
                assert guard.remaining_seconds() <= outer_left + 0.01  # capped by what is left of the check's
                time.sleep(outer_left + 1)
    assert 1.4 < time.monotonic() - start < 2.5  # the check's 1.5 s, the launch's time counted in them
