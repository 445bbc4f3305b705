"""Sentences that compare measurements, worded from the measured values (issue 29: prose never states them).

A notebook prints these instead of typing "the padded transpose reaches the copy" or "the curves
follow the model": the wording follows the numbers of this run, on any GPU. Each function takes
plain numbers and returns a phrase; wrap it in `gpucourse.finding` so that the simulator, whose
times are those of Python threads, says that nothing was measured.
"""

from __future__ import annotations

from collections.abc import Sequence

#: A kernel at this fraction of the measured device-to-device copy or above "reaches" the copy.
NEAR_COPY = 0.9
#: Measured/model ratios within this relative distance of 1 "follow" the model.
MODEL_TOLERANCE = 0.15
#: Speed ratios within this relative distance of 1 are "no measurable change" for a median of a few samples.
SAME_SPEED = 0.05


def share_of_copy(fraction: float, near: float = NEAR_COPY) -> str:
    """'reaches 0.95 of the copy' at `near` or above, else 'stays at 0.39 of the copy' (fraction of the measured copy, GB/s over GB/s)."""
    if fraction < 0:
        raise ValueError(f"a fraction of the copy is >= 0; got {fraction}")
    return f"reaches {fraction:.2f} of the copy" if fraction >= near else f"stays at {fraction:.2f} of the copy"


def against_model(ratios: Sequence[float], tolerance: float = MODEL_TOLERANCE) -> str:
    """How measured/model ratios (dimensionless) sit against 1: 'follows the model', 'runs above/below the model' or both, with their range."""
    if not ratios:
        raise ValueError("no measured/model ratio to judge")
    low, high = min(ratios), max(ratios)
    spread = f"(measured/model {low:.2f})" if f"{low:.2f}" == f"{high:.2f}" else f"(measured/model {low:.2f} to {high:.2f})"
    if low >= 1 - tolerance and high <= 1 + tolerance:
        return f"follows the model within {tolerance:.0%} {spread}"
    if low > 1 + tolerance:
        return f"runs above the model {spread}"
    if high < 1 - tolerance:
        return f"runs below the model {spread}"
    return f"does not follow the model {spread}"


def speed_against(ratio: float, other: str, tolerance: float = SAME_SPEED) -> str:
    """A speed ratio (this one's speed over `other`'s, dimensionless) in words: 'as fast as', '1.52 times as fast as' or 'slower than'."""
    if ratio <= 0:
        raise ValueError(f"a speed ratio is > 0; got {ratio}")
    if abs(ratio - 1) <= tolerance:
        return f"as fast as {other}, within {tolerance:.0%} ({ratio:.2f} x)"
    if ratio > 1:
        return f"{ratio:.2f} times as fast as {other}"
    return f"slower than {other} ({ratio:.2f} x its speed)"


def more_or_fewer(here: float, there: float, tolerance: float = SAME_SPEED) -> str:
    """'more', 'fewer' or 'about as many': `here` against `there` (same unit), equal within `tolerance` of `there`."""
    if there <= 0:
        raise ValueError(f"the value compared with must be > 0; got {there}")
    if abs(here - there) <= tolerance * there:
        return "about as many"
    return "more" if here > there else "fewer"
