"""IEEE-754 on the host (book §5.2.1): bit patterns, a fused multiply-add computed exactly, and what rounding does.

A fused multiply-add fma(a, b, c) rounds a * b + c once; `a * b + c` written out rounds twice (the
product, then the sum). GPUs compile `x * x + y * y` into an fma unless told not to, so a point
whose x^2 + y^2 lies within a rounding of 1 can land inside the circle on the CPU and outside on the
GPU. NumPy never fuses (each ufunc rounds its result), so it gives the CPU's answer; `fma32`
computes the fused result exactly, for any float32 inputs, to compare with the GPU's.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def float32_hex(value) -> str:
    """The bit pattern of a float32 as 8 hex digits ('3F800000' for 1.0)."""
    return f"{int(np.float32(value).view(np.uint32)):08X}"


def float64_hex(value) -> str:
    """The bit pattern of a float64 as 16 hex digits."""
    return f"{int(np.float64(value).view(np.uint64)):016X}"


def float32_from_hex(text: str) -> np.float32:
    """The float32 whose bit pattern is the 8 hex digits `text`."""
    return np.array([int(text, 16)], dtype=np.uint32).view(np.float32)[0]


def _two_sum(p: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = fl(p + c) and the exact error e = (p + c) - s (Knuth's TwoSum), in float64."""
    s = p + c
    pv = s - c
    cv = s - pv
    return s, (p - pv) + (c - cv)


def fma32(a, b, c) -> np.ndarray:
    """fma(a, b, c) for float32 inputs, rounded once to float32 exactly as the GPU's FFMA does (round to nearest even).

    a * b is exact in float64 (48 of 53 bits); a * b + c is formed in float64 with its exact error;
    rounding that to float32 is right except when the float64 sum sits exactly halfway between two
    float32 numbers, where the error's sign says which way the exact value lies.
    """
    a, b, c = (np.asarray(v, dtype=np.float32).astype(np.float64) for v in (a, b, c))
    s, e = _two_sum(a * b, c)
    r = s.astype(np.float32)
    towards = np.where(s > r.astype(np.float64), np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
    other = np.nextafter(r, towards)
    halfway = (r.astype(np.float64) != s) & (r.astype(np.float64) + other.astype(np.float64) == 2 * s)
    # at a halfway point the float64 sum was rounded to even; the exact sum is on the side of e
    move = halfway & (e != 0) & (np.sign(e) == np.sign(other.astype(np.float64) - s))
    result = np.where(move, other, r)
    return result if result.ndim else np.float32(result)


def squared_distance32(x, y, rule: str = "separate") -> np.ndarray:
    """x^2 + y^2 in float32 by `rule`: 'separate' (two products, one sum: NumPy, a CPU), 'fma_x' = fma(x, x, y*y),
    'fma_y' = fma(y, y, x*x), or 'double' (in float64, then rounded once to float32)."""
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32)
    if rule == "separate":
        return x * x + y * y
    if rule == "fma_x":
        return fma32(x, x, y * y)
    if rule == "fma_y":
        return fma32(y, y, x * x)
    if rule == "double":
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        return (x64 * x64 + y64 * y64).astype(np.float32)
    raise ValueError(f"rule must be 'separate', 'fma_x', 'fma_y' or 'double'; got {rule!r}")


def ulps_apart(a, b) -> np.ndarray:
    """How many float32 values lie between a and b (0: equal), for finite float32 numbers of one sign."""
    ia = np.asarray(a, dtype=np.float32).view(np.int32).astype(np.int64)
    ib = np.asarray(b, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.abs(ia - ib)


def exact_squared_distance(x, y) -> Fraction:
    """x^2 + y^2 for float32 x and y, exactly (a fraction)."""
    return Fraction(float(np.float32(x))) ** 2 + Fraction(float(np.float32(y))) ** 2


def exactly_inside(x, y) -> bool:
    """Whether the float32 point (x, y) is inside the unit circle (x^2 + y^2 <= 1), decided with exact arithmetic."""
    return exact_squared_distance(x, y) <= 1
