"""Chapter 7 exercise checks: right answers pass, each usual mistake fails with a message that names it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda

import gpucourse
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


def test_next_fast_size_messages_are_short_and_name_the_cause():
    with pytest.raises(CheckFailed) as failed:
        ch7.check_next_fast_size(lambda n: n)  # returns n: one message, not one per size
    text = str(failed.value)
    assert len(text.splitlines()) <= 3 and "slips through (return n only when it is fast" in text and "more size(s) like it" in text
    with pytest.raises(CheckFailed) as failed:  # powers of two: 7 is fast already, and that comes first
        ch7.check_next_fast_size(lambda n: 1 << (n - 1).bit_length())
    lines = str(failed.value).splitlines()
    assert "next_fast_size(7) = 8, but 7 = 7 is fast already" in lines[1] and len(lines) <= 4


# --- 7.2 -----------------------------------------------------------------------------------------


@cuda.jit
def ik_kernel(spectrum, out, k_unit, norm, nyquist, sign, real_factor):
    i, r = cuda.grid(2)
    rows, m = spectrum.shape
    if i < m and r < rows:
        k = k_unit * np.float32(i)
        if i == nyquist:
            k = np.float32(0)
        factor = sign * k * norm
        if real_factor:
            out[r, i] = spectrum[r, i] * factor
        else:
            out[r, i] = spectrum[r, i] * np.complex64(complex(np.float32(0), factor))


@cuda.jit
def ik_kernel_rows_fastest(spectrum, out, k_unit, norm, nyquist, sign, real_factor):
    r, i = cuda.grid(2)  # a mistake: x, the fastest thread index, walks the rows
    rows, m = spectrum.shape
    if i < m and r < rows:
        k = k_unit * np.float32(i) if i != nyquist else np.float32(0)
        out[r, i] = spectrum[r, i] * np.complex64(complex(np.float32(0), sign * k * norm))


@cuda.jit
def ik_kernel_float64(spectrum, out, k_unit, norm, nyquist, sign, real_factor):
    i, r = cuda.grid(2)
    rows, m = spectrum.shape
    if i < m and r < rows:
        k = k_unit * i if i != nyquist else 0.0  # a float64 literal, an int64 index: float64 arithmetic
        out[r, i] = spectrum[r, i] * complex(0.0, k * norm)


@cuda.jit
def ik_kernel_complex128_cast(spectrum, out, k_unit, norm, nyquist, sign, real_factor):
    i, r = cuda.grid(2)
    rows, m = spectrum.shape
    if i < m and r < rows:
        k = k_unit * np.float32(i) if i != nyquist else np.float32(0)
        out[r, i] = np.complex64(spectrum[r, i] * 1j * k * norm)  # the cast the exercise prescribes, around complex128 arithmetic


def derivative_launcher(mistake=None):
    def derivative_spectrum(spectrum, out, n, length):
        rows, m = spectrum.shape
        nyquist = n // 2 if n % 2 == 0 else -1
        if mistake == "keep the Nyquist column":
            nyquist = -1
        if mistake == "zero the last column":
            nyquist = m - 1
        k_unit = np.float32(1.0 if mistake == "no 2 pi / L" else 2 * np.pi / length)
        norm = np.float32(1.0 if mistake == "no 1 / n" else 1.0 / n)
        if mistake == "half of 1 / n":
            norm = np.float32(0.5 / n)
        sign = np.float32(-1.0 if mistake == "sign" else 1.0)
        kernel = {"rows fastest": ik_kernel_rows_fastest, "float64": ik_kernel_float64,
                  "complex128 in the cast": ik_kernel_complex128_cast}.get(mistake, ik_kernel)
        # blocks of 32 x 8, as the check's reference: 16-wide blocks read half rows of 128 bytes, at half its speed on an H200
        blocks = (1, 1) if mistake == "one block" else (math.ceil(m / 32), math.ceil(rows / 8))
        if mistake == "rows fastest":
            blocks = (math.ceil(rows / 32), math.ceil(m / 8))
        threads = (16, 4) if mistake == "one block" else (32, 8)  # one block too small for the spectrum
        kernel[blocks, threads](spectrum, out, k_unit, norm, nyquist, sign, mistake == "real factor")
    return derivative_spectrum


@pytest.mark.parametrize("mistake, message", [
    ("no 1 / n", "divide by n"),
    ("half of 1 / n", r"the values are 0.5 times the expected ones"),
    ("sign", "sign is wrong"),
    ("keep the Nyquist column", "Nyquist"),
    ("zero the last column", "odd n"),
    ("no 2 pi / L", "2 pi / length"),
    ("real factor", "multiply by i k"),
    ("one block", "never written"),
    ("rows fastest", r"reads of spectrum are not coalesced.*walk the columns"),
    ("float64", r"float64 arithmetic at line \d+ \(`k = k_unit \* i if i != nyquist else 0.0"),
    ("complex128 in the cast",
     r"float64 arithmetic at line \d+ \(`out\[r, i\] = np.complex64\(spectrum\[r, i\] \* 1j \* k \* norm\).*Python complex such as 1j"),
])
def test_derivative_spectrum_mistakes(mistake, message):
    with pytest.raises(CheckFailed, match=message):
        ch7.check_derivative_spectrum(derivative_launcher(mistake))


def test_derivative_spectrum_right_answer(capsys):
    ch7.check_derivative_spectrum(derivative_launcher())
    out = capsys.readouterr().out
    assert "\u2705 Exercise 7.2" in out
    if gpucourse.is_simulator():
        assert "\u23f1 Exercise 7.2" in out


# --- 7.3 -----------------------------------------------------------------------------------------


@cuda.jit
def divide_kernel(spectrum, out, kx_unit, ky_unit, scale, wrap_rows, zero_mode):
    i, j = cuda.grid(2)
    ny, m = spectrum.shape
    if i < m and j < ny:
        row = j - ny if wrap_rows and 2 * j > ny else j
        kx = kx_unit * np.float32(i)
        ky = ky_unit * np.float32(row)
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
        if mistake == "1 / nx only":
            scale = 1.0 / nx
        if mistake == "sign":
            scale = -scale
        single = float if mistake == "float64 scalars" else np.float32
        divide_kernel[(math.ceil(m / 8), math.ceil(ny / 8)), (8, 8)](
            spectrum, out, single(2 * np.pi / length_x), single(2 * np.pi / length_y), single(scale), mistake != "no negative rows",
            mistake != "no zero mode")
    return poisson_divide


@pytest.mark.parametrize("mistake, message", [
    ("no negative rows", "wave number j - ny"),
    ("no zero mode", "zero mode"),
    ("no 1 / (nx ny)", "nx ny times too large"),
    ("1 / nx only", r"times the expected ones: divide by \(kx\^2 \+ ky\^2\) and by nx \* ny"),
    ("sign", "sign is wrong"),
    ("swapped lengths", "lengths are swapped"),
    ("float64 scalars", r"the (Python float|float64 value) [\d.]+[^`]* as `kx_unit`: Numba compiles that parameter as float64"
                        r".*numpy.float32\(value\)"),
])
def test_poisson_divide_mistakes(mistake, message):
    with pytest.raises(CheckFailed, match=message):
        ch7.check_poisson_divide(poisson_launcher(mistake))


def test_poisson_divide_right_answer():
    ch7.check_poisson_divide(poisson_launcher())


@cuda.jit
def divide_rows_kernel(spectrum, out, kx_unit, ky_unit, scale, half):
    """A right 7.3 answer: 16 x 16 blocks, the row's wave number from a comparison with ny // 2, a multiplication by 1 / k2."""
    i, j = cuda.grid(2)
    ny, m = spectrum.shape
    if j < ny and i < m:
        row = j if j <= half else j - ny
        kx, ky = kx_unit * np.float32(i), ky_unit * np.float32(row)
        k2 = kx * kx + ky * ky
        out[j, i] = spectrum[j, i] * (-scale / k2) if k2 > np.float32(0) else np.complex64(0)


@cuda.jit
def divide_rows_wrong_half(spectrum, out, kx_unit, ky_unit, scale, half):
    """A mistake only an odd number of rows shows: row ny // 2 taken as negative."""
    i, j = cuda.grid(2)
    ny, m = spectrum.shape
    if j < ny and i < m:
        row = j if j < half else j - ny
        kx, ky = kx_unit * np.float32(i), ky_unit * np.float32(row)
        k2 = kx * kx + ky * ky
        out[j, i] = spectrum[j, i] * (-scale / k2) if k2 > np.float32(0) else np.complex64(0)


@cuda.jit
def divide_rows_across(spectrum, out, kx_unit, ky_unit, scale, half):
    """A mistake: x, the fastest thread index, walks the rows, so a warp reads down a column."""
    j, i = cuda.grid(2)
    ny, m = spectrum.shape
    if j < ny and i < m:
        row = j if j <= half else j - ny
        kx, ky = kx_unit * np.float32(i), ky_unit * np.float32(row)
        k2 = kx * kx + ky * ky
        out[j, i] = spectrum[j, i] * (-scale / k2) if k2 > np.float32(0) else np.complex64(0)


def rows_launcher(kernel, across=False):
    def poisson_divide(spectrum, out, nx, lengths):
        ny, m = spectrum.shape
        blocks = (math.ceil(ny / 16), math.ceil(m / 16)) if across else (math.ceil(m / 16), math.ceil(ny / 16))
        kernel[blocks, (16, 16)](spectrum, out, np.float32(2 * np.pi / lengths[0]), np.float32(2 * np.pi / lengths[1]),
                                 np.float32(1 / (nx * ny)), ny // 2)
    return poisson_divide


def test_poisson_divide_other_right_answer_odd_rows_and_coalescing(capsys):
    ch7.check_poisson_divide(rows_launcher(divide_rows_kernel))
    assert "✅ Exercise 7.3" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=r"\d*[13579] x \d+ mesh: only row \d+ is wrong: with an odd ny"):
        ch7.check_poisson_divide(rows_launcher(divide_rows_wrong_half))
    with pytest.raises(CheckFailed, match="reads of spectrum are not coalesced.*walk the columns"):
        ch7.check_poisson_divide(rows_launcher(divide_rows_across, across=True))


# --- 7.4 -----------------------------------------------------------------------------------------


def test_expected_streamed_time():
    ch7.check_expected_streamed_time(lambda io, single: max(single - io, 2 * io / 3))
    ch7.check_expected_streamed_time(lambda io, single: single - io if single - io > io / 1.5 else io / 1.5)  # another right form
    with pytest.raises(CheckFailed, match="floor division") as failed:
        ch7.check_expected_streamed_time(lambda io, single: max(single - io, 2 * io // 3))
    assert "larger" not in str(failed.value)
    with pytest.raises(CheckFailed, match="compute alone"):
        ch7.check_expected_streamed_time(lambda io, single: single - io)
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


# --- Right answers unlike the reference (issue 28) ------------------------------------------------------------


def fast_size_from_a_table(n):
    """A right 7.1 answer: every 2^a 3^b 5^c 7^d up to a power of two at or above n, then the smallest at or above n."""
    limit = 1 << max(0, (n - 1).bit_length())
    sizes = {1}
    for prime in (2, 3, 5, 7):
        grown = set(sizes)
        for size in sizes:
            while size * prime <= limit:
                size *= prime
                grown.add(size)
        sizes = grown
    return min(size for size in sizes if size >= n)


def test_next_fast_size_other_right_answer(capsys):
    ch7.check_next_fast_size(fast_size_from_a_table)
    assert "\u2705 Exercise 7.1" in capsys.readouterr().out


@cuda.jit(device=True)
def times_ik(value, k):
    return np.complex64(complex(-value.imag * k, value.real * k))


@cuda.jit
def ik_rows_loop(spectrum, out, k_unit, norm, nyquist):
    """A right 7.2 answer: a loop over the rows in steps of the grid, the multiplication in a device function."""
    i, r0 = cuda.grid(2)
    rows, m = spectrum.shape
    if i < m:
        k = np.float32(0) if i == nyquist else k_unit * np.float32(i) * norm
        for r in range(r0, rows, cuda.gridsize(2)[1]):
            out[r, i] = times_ik(spectrum[r, i], k)


def test_derivative_spectrum_other_right_answer(capsys):
    def derivative_spectrum(spectrum, out, n, length):
        rows, m = spectrum.shape
        blocks = (math.ceil(m / 32), min(64, math.ceil(rows / 8)))  # fewer rows of blocks than rows: the loop does the rest
        ik_rows_loop[blocks, (32, 4)](spectrum, out, np.float32(2 * np.pi / length), np.float32(1 / n), n // 2 if n % 2 == 0 else -1)

    ch7.check_derivative_spectrum(derivative_spectrum)
    assert "\u2705 Exercise 7.2" in capsys.readouterr().out
