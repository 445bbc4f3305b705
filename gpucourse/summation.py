"""Accuracy of summation (book §5.4): the same numbers added in different orders and precisions.

* **recursive**: s = s + x[i], one after another (the book's "recursive sum"); in float32 its error
  grows with the running sum, and once the sum is 2**24 times larger than a term, the term is lost.
* a **float64 accumulator** for float32 data: 29 more bits before that happens.
* **pairwise**: add neighbours, then neighbours of the results, ...: every value passes through only
  log2(n) additions. A GPU tree reduction sums in this shape.
* **Kahan** (compensated): carry the rounding error of each addition in a second variable and feed it
  back; **Neumaier**'s variant also handles terms larger than the running sum.
* NumPy's `sum` (8 running sums inside blocks of 128, pairwise above) stands in for the book's Fortran
  `sum()` intrinsic.

Every function here takes a NumPy array and returns a scalar of the accumulation's dtype; the exact
sum of the float32 values (`exact_sum`, Python's `math.fsum`) is the reference.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np


def recursive_sum(x: np.ndarray, dtype=None):
    """s = s + x[i] for i = 0, 1, ... in `dtype` (default: x's dtype); NumPy's cumulative sum adds strictly in order."""
    x = np.asarray(x)
    dtype = np.dtype(dtype or x.dtype)
    if x.size == 0:
        return dtype.type(0)
    return np.cumsum(x, dtype=dtype)[-1]


def recursive_partial_sums(x: np.ndarray, dtype=None) -> np.ndarray:
    """Every running sum of the recursive sum: element k is x[0] + ... + x[k] as `dtype` accumulates it."""
    x = np.asarray(x)
    return np.cumsum(x, dtype=np.dtype(dtype or x.dtype))


def backward_sum(x: np.ndarray, dtype=None):
    """The recursive sum from the last element to the first (smallest first for a decreasing series)."""
    return recursive_sum(np.asarray(x)[::-1], dtype)


def pairwise_sum(x: np.ndarray):
    """The book's pairwise sum: x[i] += x[i + h] over the first half, then again on what is left, until one value remains."""
    y = np.array(x, copy=True)
    m = y.size
    if m == 0:
        return y.dtype.type(0)
    while m > 1:
        half = (m + 1) // 2  # the book's ceiling(m / 2): an odd element out stays for the next round
        y[: m - half] += y[half:m]
        m = half
    return y[0]


@numba.njit(cache=False)
def kahan_loop(x, acc):
    """Kahan's loop over x, in the accumulator type `acc` (numba.float32 or numba.float64); `kahan_sum` calls it."""
    total = acc(0)
    compensation = acc(0)
    for value in x:
        y = acc(value) - compensation
        t = total + y
        compensation = (t - total) - y  # what the addition lost, with its sign flipped
        total = t
    return total


@numba.njit(cache=False)
def _neumaier(x, acc):
    total = acc(0)
    compensation = acc(0)
    for value in x:
        v = acc(value)
        t = total + v
        if abs(total) >= abs(v):
            compensation += (total - t) + v
        else:
            compensation += (v - t) + total
        total = t
    return total + compensation


def _accumulator(x: np.ndarray, dtype) -> tuple[np.ndarray, object]:
    x = np.ascontiguousarray(x)
    dtype = np.dtype(dtype or x.dtype)
    return x, (numba.float32 if dtype == np.float32 else numba.float64)


def kahan_sum(x: np.ndarray, dtype=None):
    """Kahan's compensated sum, in `dtype` (default: x's dtype)."""
    x, acc = _accumulator(x, dtype)
    return np.dtype(dtype or x.dtype).type(kahan_loop(x, acc))


def neumaier_sum(x: np.ndarray, dtype=None):
    """Neumaier's improved compensated sum (right also when a term is larger than the running sum), in `dtype`."""
    x, acc = _accumulator(x, dtype)
    return np.dtype(dtype or x.dtype).type(_neumaier(x, acc))


def exact_sum(x: np.ndarray) -> float:
    """The exact sum of the values of x, correctly rounded to float64 (math.fsum)."""
    return math.fsum(np.asarray(x, dtype=np.float64).tolist())


def constant_terms(n: int, value: float = 7.0, dtype=np.float32) -> np.ndarray:
    """n copies of `value` (the book's test after Barone et al.: ten million 7.0s)."""
    return np.full(int(n), value, dtype=dtype)


def series_terms(n: int, power: int, dtype=np.float32) -> np.ndarray:
    """The terms 1/i**power for i = 1..n as the book makes them: i**power as an integer, converted to `dtype`, then 1 / it in `dtype`."""
    dtype = np.dtype(dtype)
    i = np.arange(1, int(n) + 1, dtype=np.int64)
    return dtype.type(1) / (i**power).astype(dtype)


def last_exact_count(value: float = 7.0, dtype=np.float32) -> int:
    """The largest n for which adding `value` n times in `dtype`, one after another, is exact: 2**p / value, p the significand bits."""
    bits = np.finfo(np.dtype(dtype)).nmant + 1
    return int(2**bits // value)


@functools.cache
def methods() -> dict[str, object]:
    """The book's five ways to sum float32 data (plus Neumaier), by the names the tables use."""
    return {
        "NumPy sum (the intrinsic)": lambda x: np.sum(x, dtype=np.float32),
        "recursive, float32 accumulator": lambda x: recursive_sum(x, np.float32),
        "recursive, float64 accumulator": lambda x: recursive_sum(x, np.float64),
        "pairwise, float32": pairwise_sum,
        "Kahan, float32": lambda x: kahan_sum(x, np.float32),
        "Neumaier, float32": lambda x: neumaier_sum(x, np.float32),
    }
