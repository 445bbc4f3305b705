"""Chapter 7 checks on answers written fresh, of kinds the first tests did not have: each wrong one is named, each right one passes."""

from __future__ import annotations

import bisect
import functools
import heapq
import math
import time

import numpy as np
import pytest
from answers_common import caught
from numba import cuda

import gpucourse
from gpucourse.checks import ch7

# --- 7.1 -----------------------------------------------------------------------------------------


def is_smooth(m):
    for prime in (2, 3, 5, 7):
        while m % prime == 0:
            m //= prime
    return m == 1


def never_steps(n):
    """Wrong: forgets to step m, so it loops for ever on the first size that is not fast."""
    m = n
    while not is_smooth(m):
        pass
    return m


def as_float(n):
    """Wrong: the right size, returned as a float (from a division)."""
    m = n
    while not is_smooth(m):
        m += 1
    return m / 1


def strictly_greater(n):
    """Wrong: looks for the next size strictly above n."""
    m = n + 1
    while not is_smooth(m):
        m += 1
    return m


def powers_of_two_and_three(n):
    """Wrong: 5 and 7 left out of the factors."""
    m = n
    while True:
        rest = m
        for prime in (2, 3):
            while rest % prime == 0:
                rest //= prime
        if rest == 1:
            return m
        m += 1


def from_a_heap(n):
    """Right, another way: generate 7-smooth numbers in increasing order with a heap until one reaches n."""
    heap, seen = [1], {1}
    while True:
        m = heapq.heappop(heap)
        if m >= n:
            return m
        for prime in (2, 3, 5, 7):
            if m * prime not in seen:
                seen.add(m * prime)
                heapq.heappush(heap, m * prime)


def from_sorted_products(n):
    """Right, another way: every product 2^a 3^b 5^c 7^d up to 2n, sorted, then bisect."""
    limit = 2 * n
    sizes = []
    a = 1
    while a <= limit:
        b = a
        while b <= limit:
            c = b
            while c <= limit:
                d = c
                while d <= limit:
                    sizes.append(d)
                    d *= 7
                c *= 5
            b *= 3
        a *= 2
    sizes.sort()
    return sizes[bisect.bisect_left(sizes, n)]


def test_an_endless_answer_ends_with_the_line_of_its_loop():
    start = time.monotonic()
    message = caught(ch7.check_next_fast_size, never_steps)
    assert time.monotonic() - start < 30, "the real limit, not a lowered one, must end it within 30 s"
    assert "never_steps(n=11) did not return within 5 s (it was at line" in message and "Does every loop in it end?" in message, message


@pytest.mark.parametrize(("answer", "words"), [
    (as_float, ["should return an int"]),
    (strictly_greater, ["fast already: return n itself"]),
    (powers_of_two_and_three, ["only the prime factors 2, 3: 5, 7 are missing"]),
])
def test_fresh_wrong_fast_sizes_are_named(answer, words):
    message = caught(ch7.check_next_fast_size, answer)
    assert all(word in message for word in words), message


@pytest.mark.parametrize("answer", [from_a_heap, from_sorted_products])
def test_fresh_right_fast_sizes_pass(answer, capsys):
    ch7.check_next_fast_size(answer)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 7.1")


# --- 7.2 -----------------------------------------------------------------------------------------


@cuda.jit
def derivative_kernel(spectrum, out, k_unit, norm, nyquist, in_place, wrap_columns):
    i, r = cuda.grid(2)
    rows, m = spectrum.shape
    if i < m and r < rows:
        index = i
        if wrap_columns and 2 * i > 2 * (m - 1) - 1 - nyquist % 2:
            index = i - 2 * (m - 1) - (1 if nyquist < 0 else 0)
        k = k_unit * np.float32(index) if i != nyquist else np.float32(0)
        v = spectrum[r, i]
        value = np.complex64(complex(-v.imag * k * norm, v.real * k * norm))
        out[r, i] = value
        if in_place:
            spectrum[r, i] = value


def derivative(grid_from_half=False, in_place=False, python_floats=False, wrap_columns=False):
    def derivative_spectrum(spectrum, out, n, length):
        rows, m = spectrum.shape
        columns = n // 2 if grid_from_half else m
        scalar = float if python_floats else np.float32
        derivative_kernel[(math.ceil(columns / 32), math.ceil(rows / 8)), (32, 8)](
            spectrum, out, scalar(2 * np.pi / length), scalar(1 / n), n // 2 if n % 2 == 0 else -1, in_place, wrap_columns)
    return derivative_spectrum


@pytest.mark.parametrize(("answer", "words"), [
    (derivative(grid_from_half=True), ["n = 64", "never written", "n // 2 + 1 columns"]),
    (derivative(in_place=True), ["changed spectrum in place"]),
    (derivative(python_floats=True), ["as `k_unit`: Numba compiles that parameter as float64", "numpy.float32(value)"]),
])
def test_fresh_wrong_derivative_spectra_are_named(answer, words):
    message = caught(ch7.check_derivative_spectrum, answer)
    assert all(word in message for word in words), message


@cuda.jit
def derivative_flat(spectrum, out, k_unit, norm, nyquist):
    """Right, another way: a 1D grid-stride loop over the flattened spectrum; consecutive threads take consecutive columns."""
    rows, m = spectrum.shape
    for index in range(cuda.grid(1), rows * m, cuda.gridsize(1)):
        r, i = index // m, index % m
        k = np.float32(0) if i == nyquist else k_unit * np.float32(i)
        scale = k * norm
        v = spectrum[r, i]
        out[r, i] = np.complex64(complex(-v.imag * scale, v.real * scale))


#: The most blocks derivative_by_flat_index launches: few in the simulator, where its loop does the rest.
FLAT_BLOCKS = 65535 if gpucourse.mode.on_gpu() else 2


def derivative_by_flat_index(spectrum, out, n, length):
    rows, m = spectrum.shape
    blocks = min(math.ceil(rows * m / 64), FLAT_BLOCKS)
    derivative_flat[blocks, 64](spectrum, out, np.float32(2 * np.pi / length), np.float32(1 / n), n // 2 if n % 2 == 0 else -1)


@cuda.jit
def derivative_from_table(spectrum, out, factors):
    """Right, another way: the factor i k / n of every column precomputed on the host (float32), read from a table."""
    i, r = cuda.grid(2)
    rows, m = spectrum.shape
    if i < m and r < rows:
        v = spectrum[r, i]
        f = factors[i]
        out[r, i] = np.complex64(complex(-v.imag * f, v.real * f))


@functools.cache
def factor_table(m, n, length):
    """The factors of the m columns on the device, made once per (m, n, length): a copy per call would be timed too."""
    factors = (2 * np.pi / length * np.arange(m) / n).astype(np.float32)
    if n % 2 == 0:
        factors[-1] = 0
    return cuda.to_device(factors)


def derivative_by_table(spectrum, out, n, length):
    rows, m = spectrum.shape
    derivative_from_table[(math.ceil(m / 32), math.ceil(rows / 4)), (32, 4)](spectrum, out, factor_table(m, n, length))


@pytest.mark.parametrize("answer", [derivative_by_flat_index, derivative_by_table])
def test_fresh_right_derivative_spectra_pass(answer, capsys):
    ch7.check_derivative_spectrum(answer)
    assert "\u2705 Exercise 7.2" in capsys.readouterr().out


# --- 7.3 -----------------------------------------------------------------------------------------


@cuda.jit
def poisson_kernel(spectrum, out, kx_unit, ky_unit, scale, in_place, summed_square):
    i, j = cuda.grid(2)
    ny, m = spectrum.shape
    if i < m and j < ny:
        row = j - ny if 2 * j > ny else j
        kx = kx_unit * np.float32(i)
        ky = ky_unit * np.float32(row)
        k2 = (kx + ky) * (kx + ky) if summed_square else kx * kx + ky * ky
        value = np.complex64(0) if i == 0 and j == 0 else spectrum[j, i] * (-scale / k2)
        if in_place:
            spectrum[j, i] = value
            out[j, i] = spectrum[j, i]
        else:
            out[j, i] = value


def poisson(grid_from_half=False, in_place=False, summed_square=False):
    def poisson_divide(spectrum, out, nx, lengths):
        ny, m = spectrum.shape
        columns = nx // 2 if grid_from_half else m
        poisson_kernel[(math.ceil(columns / 32), math.ceil(ny / 8)), (32, 8)](
            spectrum, out, np.float32(2 * np.pi / lengths[0]), np.float32(2 * np.pi / lengths[1]), np.float32(1 / (nx * ny)),
            in_place, summed_square)
    return poisson_divide


@pytest.mark.parametrize(("answer", "words"), [
    (poisson(in_place=True), ["changed spectrum in place"]),
    (poisson(grid_from_half=True), ["x 64 mesh", "never written", "nx // 2 + 1"]),
    (poisson(summed_square=True), ["mesh", "differ", "kx = 2 pi i / Lx"]),
])
def test_fresh_wrong_poisson_divisions_are_named(answer, words):
    message = caught(ch7.check_poisson_divide, answer)
    assert all(word in message for word in words), message


@cuda.jit
def poisson_from_tables(spectrum, out, kx2, ky2, scale):
    """Right, another way: kx^2 and ky^2 of every column and row precomputed on the host, the zero mode by k2 == 0."""
    j, i = cuda.blockIdx.y, cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    ny, m = spectrum.shape
    if i < m and j < ny:
        k2 = kx2[i] + ky2[j]
        out[j, i] = np.complex64(0) if k2 == np.float32(0) else spectrum[j, i] * (-scale / k2)


def poisson_by_tables(spectrum, out, nx, lengths):
    ny, m = spectrum.shape
    kx = 2 * np.pi / lengths[0] * np.arange(m)
    ky = 2 * np.pi / lengths[1] * np.fft.fftfreq(ny, 1 / ny)
    poisson_from_tables[(math.ceil(m / 32), ny), 32](spectrum, out, cuda.to_device((kx**2).astype(np.float32)),
                                                      cuda.to_device((ky**2).astype(np.float32)), np.float32(1 / (nx * ny)))


@cuda.jit
def poisson_stride(spectrum, out, kx_unit, ky_unit, scale):
    """Right, another way: a 2D grid-stride loop over a fixed grid, the row's wave number from j >= (ny + 1) // 2."""
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    ny, m = spectrum.shape
    for j in range(y0, ny, sy):
        row = j - ny if j >= (ny + 1) // 2 else j
        ky = ky_unit * np.float32(row)
        for i in range(x0, m, sx):
            kx = kx_unit * np.float32(i)
            k2 = kx * kx + ky * ky
            out[j, i] = np.complex64(0) if i == 0 and j == 0 else spectrum[j, i] * (-scale / k2)


def poisson_by_stride(spectrum, out, nx, lengths):
    ny = spectrum.shape[0]
    poisson_stride[(2, 2), (32, 4)](spectrum, out, np.float32(2 * np.pi / lengths[0]), np.float32(2 * np.pi / lengths[1]),
                                    np.float32(1 / (nx * ny)))


@pytest.mark.parametrize("answer", [poisson_by_tables, poisson_by_stride])
def test_fresh_right_poisson_divisions_pass(answer, capsys):
    ch7.check_poisson_divide(answer)
    assert "\u2705 Exercise 7.3" in capsys.readouterr().out


# --- 7.4 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "words"), [
    (lambda io, single: 1000 * max(single - io, 2 * io / 3), ["1000 times the estimate", "unit of the arguments"]),
    (lambda io, single: (single - io) if single - io > io / 2 else 2 * io / 3, ["not always the larger", "max"]),
    (lambda io, single: max(single, io) * 2 / 3, ["the larger of the compute", "2/3 of the I/O"]),
])
def test_fresh_wrong_streamed_times_are_named(answer, words):
    message = caught(ch7.check_expected_streamed_time, answer)
    assert all(word in message for word in words), message


def streamed_by_sorting(io_only, single_stream):
    """Right, another way: the slowest of the parts that run side by side."""
    return sorted([single_stream - io_only, io_only * 2 / 3])[-1]


def streamed_with_numpy(io_only, single_stream):
    """Right, another way: NumPy's maximum of the compute and the two copies in, of three equal copies."""
    copy = io_only / 3
    return float(np.maximum(single_stream - 3 * copy, 2 * copy))


@pytest.mark.parametrize("answer", [streamed_by_sorting, streamed_with_numpy])
def test_fresh_right_streamed_times_pass(answer, capsys):
    ch7.check_expected_streamed_time(answer)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 7.4")
