"""A pytest plugin: every check a test calls is also graded apart, and must give the same verdict (`pytest -p gpucourse.checks.replaying`).

Each call of a chapter check (`chN.check_xxx(answer, ...)`) runs as autograde's notebook run does,
writing a transcript (`gpucourse.checks.remote`); the check is then replayed from it, as autograde's
grader does, and the two verdicts must agree: both pass, or both fail with the same message. The
test then sees the first run's outcome. Run the answer tests with it to show, on a GPU or in the
simulator, that grading apart judges every right and wrong answer of the tests as the notebook does
(both runs share this process, so this shows the replay's fidelity, not its isolation: tests/test_grading.py
shows that).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from . import CheckFailed, chapter_checks, remote
from .guard import CHECK_MODULES

SEED = "replaying"


class VerdictsDiffer(AssertionError):
    """The check's verdict in the notebook's process and its verdict apart disagree."""


def twice(check: Callable, module: str, folder: Path, count: itertools.count) -> Callable:
    """`check` run recorded, then replayed from its transcript: the first outcome, after comparing the two verdicts."""

    @functools.wraps(check)
    def both(*answers, **options):
        if options or f"{module}.{check.__name__}" in remote.JUDGED_IN_NOTEBOOK:
            return check(*answers, **options)
        where = folder / f"call{next(count)}"
        where.mkdir(parents=True)
        kept = {name: os.environ.get(name) for name in (remote.TRANSCRIPT_ENV, remote.SEED_ENV)}
        os.environ[remote.TRANSCRIPT_ENV], os.environ[remote.SEED_ENV] = str(where), SEED
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                remote.recorded(check, module)(*answers)
        except CheckFailed as error:
            outcome: BaseException | None = error
        except BaseException as error:  # noqa: BLE001 - any other ending: the replay must end the same way
            outcome = error
        else:
            outcome = None
        finally:
            for name, value in kept.items():
                os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
        print(printed.getvalue(), end="")
        call = f"{module}.{check.__name__}({', '.join(f'a{i}' for i in range(len(answers)))})"
        verdict = remote.grade_cell(call, where, SEED, check=check)
        if outcome is None and not verdict.passed:
            raise VerdictsDiffer(f"{call} passed in the test's process but not apart:\n{verdict.text}")
        if isinstance(outcome, CheckFailed) and (verdict.passed or str(outcome) not in verdict.text):
            raise VerdictsDiffer(f"{call} failed in the test's process with\n{outcome}\nbut apart gave:\n{verdict.text}")
        if outcome is not None and not isinstance(outcome, CheckFailed) and verdict.passed:
            raise VerdictsDiffer(f"{call} raised {type(outcome).__name__} in the test's process but passed apart")
        if outcome is not None:
            raise outcome
        return None

    return both


@pytest.fixture(autouse=True)
def every_check_graded_apart(monkeypatch, tmp_path):
    """Make every chapter check of the test record its calls and compare its verdict with the replay's."""
    count = itertools.count()
    for short in sorted(CHECK_MODULES):
        module = importlib.import_module(f"gpucourse.checks.{short}")
        for name, value in chapter_checks(module):
            monkeypatch.setattr(module, name, twice(value, short, tmp_path / "transcripts", count))
