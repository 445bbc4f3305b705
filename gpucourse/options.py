"""European options (book §5.5): the Black-Scholes formula, the book's polynomial normal CDF, Monte Carlo estimates.

A European call pays max(S_T - E, 0) at expiry T, a put max(E - S_T, 0). Under the Black-Scholes
model S_T = S exp((r - sigma^2/2) T + sigma sqrt(T) Z) with Z standard normal, and the price today
is the expectation of the payoff discounted by exp(-r T): a Monte Carlo method averages it over
many draws of Z; the Black-Scholes formula gives it exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EuropeanOption:
    """The contract and the market: spot S, strike E, risk-free rate r (per year), volatility sigma, years to expiry T."""

    S: float
    E: float
    r: float
    sigma: float
    T: float

    @property
    def drift(self) -> float:
        """(r - sigma^2 / 2) T: the mean of log(S_T / S)."""
        return (self.r - 0.5 * self.sigma**2) * self.T

    @property
    def volatility(self) -> float:
        """sigma sqrt(T): the standard deviation of log(S_T / S)."""
        return self.sigma * math.sqrt(self.T)

    @property
    def discount(self) -> float:
        """exp(-r T): what a unit paid at expiry is worth today."""
        return math.exp(-self.r * self.T)


#: The book's example (§5.5): S = 5, E = 4, sigma = 0.3, r = 0.05, T = 1.
BOOK_OPTION = EuropeanOption(S=5.0, E=4.0, r=0.05, sigma=0.3, T=1.0)


def cnd(d: float) -> float:
    """The standard normal cumulative distribution function, through erfc (accurate to rounding)."""
    return 0.5 * math.erfc(-d / math.sqrt(2.0))


#: The five coefficients of the book's CND polynomial (Hastings' approximation, Abramowitz & Stegun 26.2.17).
HASTINGS = (0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429)


def cnd_hastings(d: float) -> float:
    """The book's CND: a fifth-degree polynomial in k = 1 / (1 + 0.2316419 |d|) times the normal density (error < 7.5e-8)."""
    k = 1.0 / (1.0 + 0.2316419 * abs(d))
    a1, a2, a3, a4, a5 = HASTINGS
    tail = math.exp(-0.5 * d * d) / math.sqrt(2.0 * math.pi) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))))
    return 1.0 - tail if d > 0 else tail


def black_scholes(option: EuropeanOption, normal_cdf: Callable[[float], float] = cnd) -> tuple[float, float]:
    """The exact (call, put) prices of a European option, in the currency of S and E."""
    S, E, r, sigma, T = option.S, option.E, option.r, option.sigma, option.T
    if T <= 0:
        return max(S - E, 0.0), max(E - S, 0.0)
    d1 = (math.log(S / E) + (r + 0.5 * sigma * sigma) * T) / (sigma * math.sqrt(T))
    d2 = d1 - sigma * math.sqrt(T)
    call = S * normal_cdf(d1) - E * math.exp(-r * T) * normal_cdf(d2)
    put = call + E * math.exp(-r * T) - S  # put-call parity
    return call, put


@dataclass(frozen=True)
class OptionEstimate:
    """A Monte Carlo estimate of both prices with their standard errors, from `paths` draws."""

    paths: int
    call: float
    put: float
    call_se: float
    put_se: float

    def interval(self, which: str = "call", z: float = 1.96) -> tuple[float, float]:
        """The confidence interval mean +- z standard errors (z = 1.96: the book's 95 % interval)."""
        mean, se = (self.call, self.call_se) if which == "call" else (self.put, self.put_se)
        return mean - z * se, mean + z * se

    def standard_errors_off(self, option: EuropeanOption) -> tuple[float, float]:
        """How many standard errors the call and put estimates lie from the Black-Scholes prices."""
        call, put = black_scholes(option)
        return abs(self.call - call) / self.call_se, abs(self.put - put) / self.put_se


def median_payoffs(option: EuropeanOption) -> tuple[float, float]:
    """The discounted (call, put) payoffs of the median path (Z = 0): the shifts the pricing kernels subtract before they sum.

    Any shift gives the same estimate; one near the mean keeps the sums small. These are rounded to
    float32, so that a float32 kernel subtracts exactly the value the estimate adds back.
    """
    final = option.S * math.exp(option.drift)
    call, put = option.discount * max(final - option.E, 0.0), option.discount * max(option.E - final, 0.0)
    return float(np.float32(call)), float(np.float32(put))


def shifted_mean_and_se(total: float, squares: float, count: int, shift: float) -> tuple[float, float]:
    """Mean and standard error of the mean of `count` values x from the sums of x - shift and of (x - shift)^2.

    Summing deviations from a shift K near the mean keeps both sums of the size of the spread, so
    the subtraction that gives the variance, sum (x-K)^2 - (sum (x-K))^2 / count, loses no digits to
    the mean: the one-pass formula sum x^2 - mean * sum x (K = 0) cancels catastrophically when the
    mean is large beside the standard deviation. Any K gives the same result in exact arithmetic.
    """
    if count < 2:
        raise ValueError(f"a standard error needs at least 2 values; got {count}")
    deviation = total / count
    variance = max(squares - total * deviation, 0.0) / (count - 1)
    return shift + deviation, math.sqrt(variance / count)


def estimate_from_sums(sums, paths: int, option: EuropeanOption) -> OptionEstimate:
    """The estimate from the kernels' float64 sums of (c - Kc), (c - Kc)^2, (p - Kp), (p - Kp)^2; K = `median_payoffs(option)`."""
    s = np.asarray(sums, dtype=np.float64)
    if s.shape != (4,):
        raise ValueError(f"sums must hold 4 numbers (call, call^2, put, put^2, each shifted); got shape {s.shape}")
    if paths < 2:
        raise ValueError(f"a standard error needs at least 2 paths; got {paths}")
    call_shift, put_shift = median_payoffs(option)
    call, call_se = shifted_mean_and_se(s[0], s[1], paths, call_shift)
    put, put_se = shifted_mean_and_se(s[2], s[3], paths, put_shift)
    return OptionEstimate(int(paths), call, put, call_se, put_se)


def payoffs_reference(z: np.ndarray, option: EuropeanOption) -> tuple[np.ndarray, np.ndarray]:
    """Discounted call and put payoffs for normal draws z, in float64 (NumPy): the reference for the kernels."""
    z = np.asarray(z, dtype=np.float64)
    final = option.S * np.exp(option.drift + option.volatility * z)
    return option.discount * np.maximum(final - option.E, 0.0), option.discount * np.maximum(option.E - final, 0.0)
