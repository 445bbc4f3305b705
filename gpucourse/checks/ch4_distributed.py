"""Checks for the distributed FFT's exercise (exercise 4.4 in `solutions/ch04_multi_gpu.ipynb`, after notebook 4.6).

The answer is compared with `gpucourse.multigpu.fft.fft3d_model_ms` on seeded random cases plus the
cases that expose each usual mistake (one GPU, two GPUs, a slow link, many GPUs); a wrong number is
recognised by what the mistake gives, and the message says which step to look at.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..multigpu.fft import fft3d_model_ms
from . import CheckFailed, fail, passed

_SEED = np.random.SeedSequence()  # fresh cases every session; the pinned ones below are always included

#: (n, P, HBM GB/s, one pair's GB/s): one GPU, a pair, a slow link, many GPUs, a fast link.
PINNED = [(512, 1, 3000.0, 400.0), (512, 2, 3000.0, 400.0), (1024, 4, 3350.0, 50.0), (256, 8, 4800.0, 374.0), (1024, 4, 4800.0, 900.0)]


def _mistakes(n: int, parts: int, hbm: float, pair: float, passes: float) -> dict[str, float]:
    """What the usual mistakes give for one case: each a share that is not the model's."""
    local = n**3 * 8 / parts
    fft = passes * 2 * local / (hbm * 1e9)

    def share(sent: float, rate: float = pair, fft_time: float = fft, over_total: bool = True) -> float:
        moving = sent / (rate * 1e9)
        return moving / (fft_time + moving) if over_total else moving / fft_time

    blocks = (parts - 1) * local / parts
    return {
        "every block of the part sent, its own included (P blocks, not P - 1)": share(local) if parts > 1 else math.nan,
        "the whole cube counted on each GPU, not 1/P of it": share((parts - 1) * n**3 * 8 / parts, fft_time=passes * 2 * n**3 * 8 / (hbm * 1e9)),
        "the all-to-all's time over the FFTs' time, not over the whole": share(blocks, over_total=False) if parts > 1 else math.nan,
        "each pass counted once (a pass reads and writes: 2 x the bytes)": share(blocks, fft_time=fft / 2),
    }


def check_alltoall_share(alltoall_share: Callable[..., float], passes: float = 5.0) -> None:
    """Exercise 4.4: `alltoall_share(n, parts, hbm_gbs, pair_gbs)` is the model's share of the all-to-all in a slab FFT's time."""
    rng = np.random.default_rng(_SEED.spawn(1)[0])
    drawn = [(int(rng.choice([128, 256, 512, 1024, 2048])), int(rng.integers(1, 9)), float(rng.uniform(1000, 5000)),
              float(rng.uniform(20, 900))) for _ in range(12)]
    problems: list[str] = []
    for n, parts, hbm, pair in PINNED + drawn:
        expected = fft3d_model_ms((n, n, n), parts, hbm, pair, passes=passes)["alltoall_share"]
        try:
            got = float(alltoall_share(n, parts, hbm, pair))
        except CheckFailed:
            raise
        except Exception as exc:  # any other exception is a wrong answer, reported in words
            problems.append(f"alltoall_share({n}, {parts}, {hbm:.0f}, {pair:.0f}) raised {type(exc).__name__}: {exc}")
            break
        if math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-12):
            continue
        case = f"n = {n}, {parts} GPU(s), HBM {hbm:.0f} GB/s, one pair {pair:.0f} GB/s"
        named = [what for what, value in _mistakes(n, parts, hbm, pair, passes).items() if math.isclose(got, value, rel_tol=1e-6)]
        if parts == 1 and got != 0:
            problems.append(f"{case}: {got:.4g}, but one GPU sends nothing: the share is 0.")
        elif named:
            problems.append(f"{case}: {got:.4g} instead of {expected:.4g}; that is what {named[0]} gives.")
        else:
            problems.append(f"{case}: {got:.4g} instead of {expected:.4g}. Work out the two times in seconds first, then the share.")
        break
    fail(problems, "Exercise 4.4")
    cases = len(PINNED) + len(drawn)
    passed(f"Exercise 4.4: the all-to-all's share agrees with the model on {cases} cases (one GPU, a slow link, 8 GPUs among them).")
