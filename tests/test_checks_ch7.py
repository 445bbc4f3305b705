"""Chapter 7 exercise checks: right answers pass, each usual mistake fails with a message that names it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda

from gpucourse import fft
from gpucourse.checks import CheckFailed, ch7

# --- 7.1 -----------------------------------------------------------------------------------------


def smooth(n, primes=(2, 3, 5, 7)):
    while True:
        m = n
        for p in primes:
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


def test_next_fast_size():
    ch7.check_next_fast_size(fft.next_fast_size)
    ch7.check_next_fast_size(lambda n: smooth(n))
    with pytest.raises(CheckFailed, match="power of two"):
        ch7.check_next_fast_size(lambda n: 1 << (n - 1).bit_length())
    with pytest.raises(CheckFailed, match="other than 2, 3, 5, 7"):
        ch7.check_next_fast_size(lambda n: smooth(n, (2, 3, 5, 7, 11)))
    with pytest.raises(CheckFailed, match="return n itself"):
        ch7.check_next_fast_size(lambda n: smooth(n + 1))
    with pytest.raises(CheckFailed, match="smaller than n"):
        ch7.check_next_fast_size(lambda n: max(1, n // 2))
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        ch7.check_next_fast_size(lambda n: 1 // 0)


# --- 7.2 -----------------------------------------------------------------------------------------


@cuda.jit
def ik_kernel(spectrum, out, k_unit, norm, nyquist, sign, real_factor):
    i, r = cuda.grid(2)
    rows, m = spectrum.shape
    if i < m and r < rows:
        k = k_unit * i
        if i == nyquist:
            k = 0.0
        factor = sign * k * norm
        if real_factor:
            out[r, i] = spectrum[r, i] * factor
        else:
            out[r, i] = spectrum[r, i] * complex(0.0, factor)


def derivative_launcher(mistake=None):
    def derivative_spectrum(spectrum, out, n, length):
        rows, m = spectrum.shape
        nyquist = n // 2 if n % 2 == 0 else -1
        if mistake == "keep the Nyquist column":
            nyquist = -1
        if mistake == "zero the last column":
            nyquist = m - 1
        k_unit = 1.0 if mistake == "no 2 pi / L" else 2 * np.pi / length
        norm = 1.0 if mistake == "no 1 / n" else 1.0 / n
        sign = -1.0 if mistake == "sign" else 1.0
        blocks = (1, 1) if mistake == "one block" else (math.ceil(m / 16), math.ceil(rows / 4))
        ik_kernel[blocks, (16, 4)](spectrum, out, k_unit, norm, nyquist, sign, mistake == "real factor")
    return derivative_spectrum


@pytest.mark.parametrize("mistake, message", [
    ("no 1 / n", "divide by n"),
    ("sign", "sign is wrong"),
    ("keep the Nyquist column", "Nyquist"),
    ("zero the last column", "odd n"),
    ("no 2 pi / L", "2 pi / length"),
    ("real factor", "multiply by i k"),
    ("one block", "never written"),
])
def test_derivative_spectrum_mistakes(mistake, message):
    with pytest.raises(CheckFailed, match=message):
        ch7.check_derivative_spectrum(derivative_launcher(mistake))


def test_derivative_spectrum_right_answer():
    ch7.check_derivative_spectrum(derivative_launcher())


# --- 7.3 -----------------------------------------------------------------------------------------


@cuda.jit
def divide_kernel(spectrum, out, kx_unit, ky_unit, scale, wrap_rows, zero_mode):
    i, j = cuda.grid(2)
    ny, m = spectrum.shape
    if i < m and j < ny:
        row = j - ny if wrap_rows and 2 * j > ny else j
        kx = kx_unit * i
        ky = ky_unit * row
        k2 = kx * kx + ky * ky
        if zero_mode and i == 0 and j == 0:
            out[j, i] = 0
        else:
            out[j, i] = -spectrum[j, i] * scale / k2


def poisson_launcher(mistake=None):
    def poisson_divide(spectrum, out, nx, lengths):
        ny, m = spectrum.shape
        length_x, length_y = (lengths[1], lengths[0]) if mistake == "swapped lengths" else lengths
        scale = 1.0 if mistake == "no 1 / (nx ny)" else 1.0 / (nx * ny)
        if mistake == "sign":
            scale = -scale
        divide_kernel[(math.ceil(m / 8), math.ceil(ny / 8)), (8, 8)](
            spectrum, out, 2 * np.pi / length_x, 2 * np.pi / length_y, scale, mistake != "no negative rows", mistake != "no zero mode")
    return poisson_divide


@pytest.mark.parametrize("mistake, message", [
    ("no negative rows", "wave number j - ny"),
    ("no zero mode", "zero mode"),
    ("no 1 / (nx ny)", "nx ny times too large"),
    ("sign", "sign is wrong"),
    ("swapped lengths", "lengths are swapped"),
])
def test_poisson_divide_mistakes(mistake, message):
    with pytest.raises(CheckFailed, match=message):
        ch7.check_poisson_divide(poisson_launcher(mistake))


def test_poisson_divide_right_answer():
    ch7.check_poisson_divide(poisson_launcher())


# --- 7.4 -----------------------------------------------------------------------------------------


def test_expected_streamed_time():
    ch7.check_expected_streamed_time(lambda io, single: max(single - io, 2 * io / 3))
    with pytest.raises(CheckFailed, match="2/3 of the I/O time"):
        ch7.check_expected_streamed_time(lambda io, single: max(single - io, io))
    with pytest.raises(CheckFailed, match="slowest part"):
        ch7.check_expected_streamed_time(lambda io, single: min(single - io, 2 * io / 3))
    with pytest.raises(CheckFailed, match="not the sum"):
        ch7.check_expected_streamed_time(lambda io, single: (single - io) + 2 * io / 3)
    with pytest.raises(CheckFailed, match="not 1/3"):
        ch7.check_expected_streamed_time(lambda io, single: max(single - io, io / 3))
    with pytest.raises(CheckFailed, match="single-stream time itself"):
        ch7.check_expected_streamed_time(lambda io, single: single)
