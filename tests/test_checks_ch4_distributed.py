"""Exercise 4.4's check: the right answer passes, each usual mistake is named, and one GPU's share is 0."""

from __future__ import annotations

import pytest

from gpucourse.checks import CheckFailed
from gpucourse.checks import ch4_distributed as C


def right(n, parts, hbm_gbs, pair_gbs):
    local = n**3 * 8 / parts
    fft_s = 5 * 2 * local / (hbm_gbs * 1e9)
    exchange_s = (parts - 1) * (local / parts) / (pair_gbs * 1e9)
    return exchange_s / (fft_s + exchange_s)


def own_block_sent(n, parts, hbm_gbs, pair_gbs):
    if parts == 1:
        return 0.0
    local = n**3 * 8 / parts
    fft_s = 5 * 2 * local / (hbm_gbs * 1e9)
    exchange_s = local / (pair_gbs * 1e9)
    return exchange_s / (fft_s + exchange_s)


def over_fft_only(n, parts, hbm_gbs, pair_gbs):
    local = n**3 * 8 / parts
    return (parts - 1) * (local / parts) / (pair_gbs * 1e9) / (5 * 2 * local / (hbm_gbs * 1e9))


def test_the_right_answer_passes(capsys):
    C.check_alltoall_share(right)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 4.4")


@pytest.mark.parametrize(("answer", "named"), [
    (own_block_sent, "its own included"), (over_fft_only, "not over the whole"), (lambda *a: 1.0, "one GPU sends nothing")])
def test_each_mistake_is_named(answer, named):
    with pytest.raises(CheckFailed, match=named):
        C.check_alltoall_share(answer)


def test_a_crash_is_reported():
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        C.check_alltoall_share(lambda n, parts, hbm, pair: 1 / 0)
