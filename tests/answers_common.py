"""What the tests of the exercise checks share: a wrong answer's short message that names its cause, a right answer's success
line."""

from __future__ import annotations

import re

import pytest

from gpucourse.checks import CheckFailed


def caught(check, *answers, causes: tuple[str, ...] = ()) -> str:
    """Run `check(*answers)`: it must fail, in at most five lines, with every regex of `causes` in its message."""
    with pytest.raises(CheckFailed) as failed:
        check(*answers)
    message = str(failed.value)
    assert len(message.splitlines()) <= 5, message
    for cause in causes:
        assert re.search(cause, message, flags=re.S), f"{cause!r} not in:\n{message}"
    return message


def passes(check, *answers, capsys, exercise: str) -> None:
    """Run `check(*answers)`: it must pass, printing the success line of `exercise`."""
    check(*answers)
    assert f"\u2705 Exercise {exercise}" in capsys.readouterr().out
