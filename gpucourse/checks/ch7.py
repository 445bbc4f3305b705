"""Checks for the chapter 7 exercises (solutions/ch07_fft.ipynb)."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable

import numpy as np
from numba import cuda

from .. import book, fft, mode
from .. import convolution as conv
from ..arrays import random_array, to_device
from ..simulation import paced
from ..sizes import problem_size
from . import CheckFailed, array_problems, fail, passed
from .evidence import coalescing_problems, float64_problems, speed_note, speed_verdict, trace_of
from .guard import CheckTimedOut, _host_message, deadline
from .launches import float64_argument_problems, recorded_launches
from .runs import run_checked
from .speed import elements_beyond_l2

# --- 7.1 --------------------------------------------------------------------------------------------

#: Properties of a right next_fast_size(n): an int m >= n; m's only prime factors are 2, 3, 5 and 7; no such number lies in
#: [n, m) (so m = n exactly when n is fast). The cases: 1 and 2; every prime from 11 to 97 (each is its own next size if that
#: prime slips through); fast sizes (2**k, 3 * 5**3 * 2**4, 7**4) and their neighbours; squares of primes; sizes just past a power
#: of two, where rounding up to a power of two overshoots; and large ones, up to 2**16 + 1.
FAST_SIZE_CASES = (1, 2, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 121, 169, 1000,
                   1023, 1024, 1025, 2049, 2401, 2402, 4097, 4099, 6000, 6001, 10007, 16385, 65537)
#: One call of next_fast_size may take this long (s): the reference answers any case in about a millisecond, so a call that
#: takes longer loops for ever (or nearly): it is stopped and named, with the line it was at, long before the check's own limit.
CALL_SECONDS = 5.0


def check_next_fast_size(next_fast_size: Callable[[int], int]) -> None:
    """Exercise 7.1: `next_fast_size(n)` returns the smallest m >= n whose only prime factors are 2, 3, 5 and 7."""
    kinds: dict[str, list[str]] = {}  # one message per kind of mistake, with its first examples
    answers: dict[int, int] = {}
    stopped = ""
    for n in FAST_SIZE_CASES:
        want = fft.next_fast_size(n)
        try:
            with deadline(CALL_SECONDS, _host_message("next_fast_size", CALL_SECONDS)):
                got = next_fast_size(n)
        except NotImplementedError:  # the student's stub: let its hint through
            raise
        except CheckTimedOut as exc:  # failed outside this handler: the alarm's frames stay out of the failure's context
            stopped = f"{exc} (n = {n}; the smallest fast m >= n is {want}: a loop that tries m = n, n + 1, ... must stop there.)"
            break
        except Exception as exc:  # any exception is a wrong answer, reported in words
            kinds.setdefault(f"raised {type(exc).__name__}", []).append(f"next_fast_size({n}) raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(got, (int, np.integer)):
            kinds.setdefault("type", []).append(f"next_fast_size({n}) should return an int; got {got!r}")
            continue
        got = answers[n] = int(got)
        if got == want:
            continue
        if got < n:
            kinds.setdefault("small", []).append(f"next_fast_size({n}) = {got} is smaller than n: the transform must hold all n "
                                                 "points (pad, never cut).")
        elif fft.is_fast_size(n):
            kinds.setdefault("fast", []).append(f"next_fast_size({n}) = {got}, but {n} = {_factors(n)} is fast already: return n "
                                                "itself.")
        elif got == n:
            kinds.setdefault("slips", []).append(f"next_fast_size({n}) = {n} = {_factors(n)}: a factor other than 2, 3, 5, 7 slips "
                                                 f"through (return n only when it is fast; here the next fast size is {want}).")
        elif got == 1 << (n - 1).bit_length() and got > want:
            kinds.setdefault("power", []).append(f"next_fast_size({n}) = {got}, a power of two; {want} = {_factors(want)} is smaller "
                                                 "and as fast: cuFFT's fast kernels cover factors 3, 5 and 7 too.")
        elif got < want:
            kinds.setdefault("slips", []).append(f"next_fast_size({n}) = {got} = {_factors(got)}: a factor other than 2, 3, 5, 7 "
                                                 "slips through.")
        else:
            kinds.setdefault("other", []).append(f"next_fast_size({n}) = {got}; expected {want} = {_factors(want)}.")
    if stopped:
        fail([stopped], "Exercise 7.1")
    problems = []
    for examples in kinds.values():
        more = f" (and {len(examples) - 1} more size(s) like it)" if len(examples) > 1 else ""
        problems.append(examples[0] + more)
    if problems and len(answers) == len(FAST_SIZE_CASES):
        fail(_fewer_factors(answers)[:1] or problems, "Exercise 7.1")
    fail(problems, "Exercise 7.1")
    passed(f"Exercise 7.1: next_fast_size is right for {len(FAST_SIZE_CASES)} sizes, from 1 to {FAST_SIZE_CASES[-1]}.")


def _fewer_factors(answers: dict[int, int]) -> list[str]:
    """Words for answers that are the next size over fewer primes than 2, 3, 5 and 7 (empty if none fits every case)."""
    for count in (3, 2):  # a single prime, 2, is the power of two that the per-size words name better
        for primes in itertools.combinations((2, 3, 5, 7), count):
            if all(fft.next_fast_size(n, primes) == m for n, m in answers.items()):
                missing = sorted(set((2, 3, 5, 7)) - set(primes))
                return [f"your sizes have only the prime factors {', '.join(map(str, primes))}: {', '.join(map(str, missing))} "
                        f"{'are' if len(missing) > 1 else 'is'} missing. cuFFT is fast for every 2^a 3^b 5^c 7^d (next_fast_size(97) "
                        "is 98 = 2 x 7 x 7)."]
    return []


def _factors(n: int) -> str:
    parts, p = [], 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            parts.append(p)
            n //= p
        p += 1
    if n > 1:
        parts.append(n)
    return " x ".join(str(v) for v in parts) or "1"


# --- 7.2 --------------------------------------------------------------------------------------------


def _derivative_reference(spectrum: np.ndarray, n: int, length: float) -> np.ndarray:
    k = fft.wavenumbers(n, length, half=True)
    factor = 1j * k / n
    if n % 2 == 0:
        factor[-1] = 0
    return (spectrum.astype(np.complex128) * factor).astype(spectrum.dtype)


@cuda.jit
def _derivative_kernel(spectrum, out, k_unit, norm, nyquist):
    """The speed reference of 7.2: one thread per (row, column), x along the columns, float32 throughout.

    The kernel the exercise asks for, not the package's first version (`derivative_spectrum_simple_kernel`, a
    grid-stride loop down the rows): tried as the reference on an H200, the reference solution ran 1.56 times as fast
    as that one (5 of 5 runs; 1.00 against this kernel), so a kernel well under the memory's speed would have passed.
    """
    i, r = cuda.grid(2)
    rows, m = spectrum.shape
    if i < m and r < rows:
        k = k_unit * np.float32(i) if i != nyquist else np.float32(0)
        v = spectrum[r, i]
        out[r, i] = np.complex64(complex(-v.imag * k * norm, v.real * k * norm))


#: Threads along x a launch might use: the warp, and the blocks of 64 and 128 threads some answers take along the columns.
COLUMN_BLOCKS = (32, 64, 128)


# Properties of a right answer to 7.2: out = i k spectrum / n on every column of the half spectrum (n // 2 + 1 of them, the
# Nyquist column zeroed for even n only) for even and odd n, n // 2 a multiple of a warp among them; the spectrum unchanged;
# float32 scalars and complex64 arithmetic; warps walk the columns.
def derivative_cases() -> list[tuple[int, float]]:
    """(n, length) of exercise 7.2's check: the chapter's even and odd n, then n with n // 2 a multiple of each COLUMN_BLOCKS
    width (its n // 2 + 1 columns are one past a whole number of blocks: a grid sized from n // 2 misses a column), even and odd."""
    _, n_even = problem_size("ch7_exercise_spectrum")
    cases = [(n_even, 3.0), (n_even + 1, 2 * np.pi)]
    for width in COLUMN_BLOCKS[:1] if not mode.on_gpu() else COLUMN_BLOCKS:
        cases += [(2 * width, 1.5), (2 * width + 1, 4.0)]
    return cases


def check_derivative_spectrum(derivative_spectrum: Callable[..., object]) -> None:
    """Exercise 7.2: `derivative_spectrum(spectrum, out, n, length)` writes i k spectrum / n (Nyquist column zeroed) into out."""
    rows, _ = problem_size("ch7_exercise_spectrum")
    problems: list[str] = []
    for n, length in derivative_cases():
        columns = n // 2 + 1
        host = random_array((rows, columns), np.complex64, seed=n)
        want = _derivative_reference(host, n, length)
        spectrum = to_device(host)
        with recorded_launches() as launches:
            run = paced(run_checked)(lambda out, s, n=n, length=length: derivative_spectrum(s, out, n, length), (rows, columns),
                                     np.complex64, spectrum, input_names=("spectrum",))
        got = run.got
        found = run.problems + float64_argument_problems(launches)
        where = f"n = {n} ({'even' if n % 2 == 0 else 'odd'}, {columns} columns), length = {length:.4g}"
        wrong = array_problems(got, want, what=f"out ({where})", rtol=1e-5, atol=1e-6 * float(np.abs(want).max()),
                               coverage_hint="Every (row, column) of the half spectrum, n // 2 + 1 columns, needs a thread.")
        if wrong and not np.isnan(got).any():
            diagnosis = _diagnose_derivative(got, host, want, n, length)
            wrong = wrong + [diagnosis] if diagnosis.startswith("compare with") else [diagnosis]
        problems += found + wrong
        if problems:
            break
    fail(problems, "Exercise 7.2")
    small = (8, 34)  # 8 rows of the half spectrum of n = 66: a warp that walks the rows shows it
    arguments = [("traced", "spectrum", random_array(small, np.complex64, seed=72)), ("traced", "out", np.zeros(small, np.complex64)),
                 ("value", "n", 66), ("value", "length", 3.0)]
    trace, note = trace_of(lambda spectrum, out, n, length: derivative_spectrum(spectrum, out, n, length), arguments)
    if trace is not None:
        advice = "Let x, the fastest thread index, walk the columns: i, r = cuda.grid(2), with the grid's x covering the columns."
        problems += (float64_problems(trace) + coalescing_problems(trace, "spectrum", small, advice, itemsize=8)
                     + coalescing_problems(trace, "out", small, advice, write=True, itemsize=8))
    fail(problems[:1], "Exercise 7.2")
    slow, speed = _derivative_speed(derivative_spectrum)
    fail(slow, "Exercise 7.2")
    passed(f"Exercise 7.2: i k f / n with the Nyquist column zeroed, for even and odd n ({', '.join(str(n) for n, _ in derivative_cases())}: "
           "n // 2 a multiple of a warp among them), spectrum unchanged, in complex64, "
           f"its warps reading and writing neighbouring columns{speed}{note}.")
    speed_note("Exercise 7.2", "derivative_spectrum")


def _derivative_speed(derivative_spectrum: Callable[..., object]) -> tuple[list[str], str]:
    """On a GPU, the student's k-space step beside a plain kernel, on a half spectrum several times the L2 cache."""
    if not mode.on_gpu():
        return [], ""
    n = 2046  # 1024 columns of complex64 per row
    columns = n // 2 + 1
    rows = -(-elements_beyond_l2(8) // columns)
    spectrum = to_device(random_array((rows, columns), np.complex64, seed=721))
    out = to_device(np.zeros((rows, columns), np.complex64))
    length = 3.0
    blocks = (-(-columns // 32), -(-rows // 8))
    k_unit, norm = np.float32(2 * np.pi / length), np.float32(1 / n)
    return speed_verdict("Exercise 7.2", "derivative_spectrum", lambda: derivative_spectrum(spectrum, out, n, length),
                         lambda: _derivative_kernel[blocks, (32, 8)](spectrum, out, k_unit, norm, n // 2), 2 * 8 * rows * columns,
                         8 * rows * columns, "Does x walk the columns, and is the arithmetic float32 (complex64)?")


def _diagnose_derivative(got: np.ndarray, host: np.ndarray, want: np.ndarray, n: int, length: float) -> str:
    def near(candidate) -> bool:
        return bool(np.allclose(got, candidate, rtol=1e-4, atol=1e-6 * float(np.abs(candidate).max() + 1e-30)))

    k = fft.wavenumbers(n, length, half=True)
    if near(want * n):
        return "the values are n times too large: divide by n (the inverse transform does not)."
    if near(-want):
        return "the sign is wrong: the derivative of exp(i k x) is +i k exp(i k x)."
    if near(want / 1j):
        return "the factor is real: multiply by i k (swap the parts and change one sign: (a + ib) i k = -b k + i a k)."
    if near(want * length / (2 * np.pi)):
        return f"the wave numbers lack the factor 2 pi / length = {2 * np.pi / length:.4g}: column i holds k = 2 pi i / length."
    if n % 2 == 0 and near(host * (1j * k / n)):
        return "only the last (Nyquist) column is wrong: for even n its derivative term must be zero."
    if n % 2 == 1:
        zeroed = host * (1j * k / n)
        zeroed[:, -1] = 0
        if near(zeroed):
            return "for odd n the last column is an ordinary wave number, (n - 1) / 2: only even n has a Nyquist column to zero."
    wrapped = fft.wavenumbers(n, length, half=True)
    wrapped = np.where(2 * np.arange(wrapped.size) > n, wrapped - 2 * np.pi * n / length, wrapped)
    wrapped_factor = 1j * wrapped / n
    if n % 2 == 0:
        wrapped_factor[-1] = 0
    if near(host * wrapped_factor) and not near(want):
        return ("the columns above n / 2 use negative wave numbers: a half spectrum (R2C) holds only k = 2 pi i / length for "
                "i = 0 .. n // 2, no column wraps to i - n (only the rows of a full spectrum do).")
    factor = _common_factor(got, want)
    if factor is not None:
        return (f"the values are {factor:.4g} times the expected ones: out[r, i] = spectrum[r, i] * i * (2 pi / length) * i / n, "
                f"with n = {n}.")
    return "compare with out[r, i] = spectrum[r, i] * i * (2 pi / length) * i / n, and 0 in column n // 2 when n is even."


# --- 7.3 --------------------------------------------------------------------------------------------


def _poisson_reference(spectrum: np.ndarray, nx: int, lengths: tuple[float, float], negative_rows: bool = True,
                       zero_mode: bool = True, swap: bool = False) -> np.ndarray:
    ny = spectrum.shape[0]
    length_x, length_y = (lengths[1], lengths[0]) if swap else lengths
    kx = fft.wavenumbers(nx, length_x, half=True)
    ky = fft.wavenumbers(ny, length_y) if negative_rows else 2 * np.pi / length_y * np.arange(ny)
    k2 = kx[None, :] ** 2 + ky[:, None] ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -spectrum.astype(np.complex128) / k2 / (nx * ny)
    if zero_mode:
        out[0, 0] = 0
    return out


# Properties of a right answer to 7.3: out = -spectrum / (kx^2 + ky^2) / (nx ny), 0 at the zero mode, with rows above ny / 2
# negative, for even and odd ny and nx // 2 a multiple of a warp; the spectrum unchanged; float32 scalars; warps walk the columns.
def poisson_meshes() -> list[tuple[int, int]]:
    """(ny, nx) of exercise 7.3's check: an even and an odd number of rows (the negative wave numbers start at row
    (ny + 1) // 2), then nx with nx // 2 a multiple of each COLUMN_BLOCKS width this mode checks (a grid sized from nx // 2
    misses the last of the nx // 2 + 1 columns)."""
    ny, nx = problem_size("ch7_exercise_mesh")
    return [(ny, nx), (ny + 1, nx)] + [(ny, 2 * width) for width in (COLUMN_BLOCKS if mode.on_gpu() else COLUMN_BLOCKS[:1])]


def check_poisson_divide(poisson_divide: Callable[..., object]) -> None:
    """Exercise 7.3: `poisson_divide(spectrum, out, nx, lengths)` writes -spectrum / (kx^2 + ky^2) / (nx ny), zero mode 0, into out."""
    ny, nx = problem_size("ch7_exercise_mesh")
    lengths = (1.0, 2.5)
    for rows, columns in poisson_meshes():
        problems = _poisson_problems(poisson_divide, rows, columns, lengths)
        if problems:
            break
    fail(problems, "Exercise 7.3")
    small, small_nx = (8, 34), 66  # 8 rows of 34 columns: a warp that walks the rows shows it
    arguments = [("traced", "spectrum", random_array(small, np.complex64, seed=731)), ("traced", "out", np.zeros(small, np.complex64)),
                 ("value", "nx", small_nx), ("value", "lengths", lengths)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        trace, note = trace_of(lambda spectrum, out, nx, lengths: poisson_divide(spectrum, out, nx, lengths), arguments)
    if trace is not None:
        advice = "Let x, the fastest thread index, walk the columns: i, j = cuda.grid(2), with the grid's x covering the columns."
        problems += (float64_problems(trace) + coalescing_problems(trace, "spectrum", small, advice, itemsize=8)
                     + coalescing_problems(trace, "out", small, advice, write=True, itemsize=8))
    fail(problems[:1], "Exercise 7.3")
    meshes = ", ".join(f"{rows} x {columns}" for rows, columns in poisson_meshes())
    passed(f"Exercise 7.3: the Poisson division is right on {meshes} meshes of size {lengths[0]} x "
           f"{lengths[1]}, zero mode included, spectrum unchanged, in complex64, its warps reading and writing neighbouring columns{note}.")


def _poisson_problems(poisson_divide: Callable[..., object], ny: int, nx: int, lengths: tuple[float, float]) -> list[str]:
    """What is wrong with poisson_divide's values on one (ny, nx) mesh, in words ([] if they are right)."""
    columns = nx // 2 + 1
    host = random_array((ny, columns), np.complex64, seed=73 + ny)
    want = _poisson_reference(host, nx, lengths).astype(np.complex64)
    spectrum = to_device(host)
    with warnings.catch_warnings():  # a division by zero (the simulator warns, from its threads) is reported below, in words
        warnings.simplefilter("ignore", RuntimeWarning)
        with recorded_launches() as launches:
            run = paced(run_checked)(lambda out, s: poisson_divide(s, out, nx, lengths), (ny, columns), np.complex64, spectrum,
                                     input_names=("spectrum",))
    got, problems = run.got, run.problems
    changed = run.changed + float64_argument_problems(launches)
    if changed:  # the cause: values read after the input was overwritten are wrong as a consequence
        return [f"{ny} x {nx} mesh: {changed[0]}"]
    tolerance = 1e-7 * float(np.abs(want).max())
    others = np.ones(want.shape, bool)
    others[0, 0] = False
    if not np.isfinite(got[0, 0]) and np.allclose(got[others], want[others], rtol=1e-5, atol=tolerance):
        problems.append(f"out[0, 0] is {got[0, 0]}: the zero mode (kx = ky = 0) was never written, or written as a division by "
                        "zero. Set it to 0 (the solution's mean; any constant solves the equation).")
    else:
        wrong = array_problems(got, want, what=f"out ({ny} x {nx} mesh)", rtol=1e-5, atol=tolerance,
                               coverage_hint="Every (row, column) of the (ny, nx // 2 + 1) half spectrum needs a thread.")
        if wrong and not np.isnan(got).any():
            wrong = [f"{ny} x {nx} mesh: {_diagnose_poisson(got, host, want, nx, lengths)}"]
        problems += wrong
    return problems


def _common_factor(got: np.ndarray, want: np.ndarray) -> float | None:
    """The real factor c with got = c * want everywhere (want's zeros and non-finite values left out), if there is one and c != 1."""
    mask = np.isfinite(want) & np.isfinite(got) & (np.abs(want) > 1e-6 * float(np.abs(want[np.isfinite(want)]).max()))
    if not mask.any():
        return None
    ratios = (got[mask] / want[mask]).astype(np.complex128)
    factor = complex(np.median(ratios.real), np.median(ratios.imag))
    if abs(factor.imag) > 1e-3 * abs(factor) or not np.allclose(ratios, factor, rtol=1e-3) or math.isclose(factor.real, 1, rel_tol=1e-3):
        return None
    return factor.real


def _diagnose_poisson(got: np.ndarray, host: np.ndarray, want: np.ndarray, nx: int, lengths: tuple[float, float]) -> str:
    ny = host.shape[0]
    if np.isfinite(got[0, 0]) and got[0, 0] != 0 and np.allclose(got[1:], want[1:], rtol=1e-4):
        return "out[0, 0], the zero mode, must be 0 (the solution's mean): it is the only wrong value."

    def near(candidate) -> bool:
        mask = np.isfinite(candidate)
        return bool(np.allclose(got[mask], candidate[mask], rtol=1e-4, atol=1e-7 * float(np.abs(candidate[mask]).max())))

    if near(-want):
        return "the sign is wrong: u_xx + u_yy = rho becomes -(kx^2 + ky^2) u = rho in Fourier space."
    factor = _common_factor(got, want)
    if factor is not None:
        named = {nx * ny: "nx ny", nx: "nx", ny: "ny", 1 / (nx * ny): "1 / (nx ny)", 1 / nx: "1 / nx", 1 / ny: "1 / ny",
                 (nx * ny) ** 0.5: "sqrt(nx ny)", 2 * np.pi: "2 pi", (2 * np.pi) ** 2: "(2 pi)^2"}
        name = next((words for value, words in named.items() if math.isclose(factor, value, rel_tol=1e-3)), None)
        if name == "nx ny":
            return "the values are nx ny times too large: divide by nx * ny (the inverse transform does not)."
        said = f" ({name})" if name else ""
        return (f"the values are {factor:.4g}{said} times the expected ones: divide by (kx^2 + ky^2) and by nx * ny = {nx * ny}, "
                "once each, with kx = 2 pi i / Lx and ky = 2 pi j / Ly.")
    if near(_poisson_reference(host, nx, lengths, negative_rows=False)):
        return (f"rows above ny / 2 = {ny // 2} are wrong: row j holds wave number j - ny there (the FFT's order), "
                "not j; its square is smaller.")
    if near(_poisson_reference(host, nx, lengths, swap=True)):
        return "the two lengths are swapped: kx = 2 pi i / Lx along the columns, ky = 2 pi j / Ly along the rows."
    rows_wrong = np.flatnonzero((~np.isclose(got, want, rtol=1e-4, atol=1e-7 * float(np.abs(want).max()))).any(axis=1))
    if ny % 2 and rows_wrong.tolist() == [ny // 2]:
        return (f"only row {ny // 2} is wrong: with an odd ny = {ny} it holds wave number +{ny // 2}; the negative ones start at "
                f"row {ny // 2 + 1} (j - ny for j > ny / 2, not j >= ny // 2).")
    return (f"rows {rows_wrong[:6].tolist()} differ: compute kx from the column index i (kx = 2 pi i / Lx) and ky from the row "
            "index j (2 pi j / Ly, with j - ny above ny / 2).")


# --- 7.4 --------------------------------------------------------------------------------------------


#: Formulas that are not the book's estimate, each with the words for it: a function of (compute, io_only, single_stream).
_NOT_THE_ESTIMATE = (
    (lambda compute, io, single: max(compute, 2 * io // 3),
     "2 * io_only // 3 is a floor division: it rounds 2/3 of the I/O time down to whole seconds. Use / for the 2/3"),
    (lambda compute, io, single: max(compute, io),
     "the copies do not take the whole I/O time when overlapped: with one copy engine each way, the two copies in (2/3 of the "
     "bytes) set the pace and the copy out runs beside them: use 2/3 of the I/O time"),
    (lambda compute, io, single: min(compute, 2 * io / 3), "the run is as long as its slowest part, not its fastest: take the larger "
     "of the two"),
    (lambda compute, io, single: single, "that is the single-stream time itself, nothing overlapped: the compute is single stream - "
     "I/O only, and with streams it runs while the copies run"),
    (lambda compute, io, single: compute + 2 * io / 3, "with perfect overlap the compute and the copies run at the same time: take "
     "the larger, not the sum"),
    (lambda compute, io, single: max(compute, io / 3), "the copies in are two of every three copies: 2/3 of the I/O time, not 1/3"),
    (lambda compute, io, single: compute, "that is the compute alone: the copies in, 2/3 of the I/O time, can take longer"),
)


def _estimate_hint(results: list[tuple], want: float, compute: float, copies: float) -> str:
    """Words for an estimate that no formula of _NOT_THE_ESTIMATE explains: a unit, or the wrong one of the two parts."""
    ratios = {round(got / right, 6) for _, _, _, got, right in results if right}
    for factor, words in ((1000.0, "1000 times"), (1e-3, "1/1000 of"), (60.0, "60 times"), (1 / 60, "1/60 of")):
        if ratios == {round(factor, 6)}:
            return f"every result is {words} the estimate: return it in the unit of the arguments (seconds in, seconds out)"
    parts = all(math.isclose(got, single - io, rel_tol=1e-9, abs_tol=1e-12) or math.isclose(got, 2 * io / 3, rel_tol=1e-9, abs_tol=1e-12)
                for _, io, single, got, _ in results)
    if parts:
        return (f"you return one of the two parts, but not always the larger: here the compute (single - io) is {compute:.4g} s and "
                f"2/3 of the I/O {copies:.4g} s; the run lasts as long as the larger, max(...), whichever side of the other it is")
    return f"expected {want:.4g} s, the larger of the compute (single - io = {compute:.4g} s) and 2/3 of the I/O ({copies:.4g} s)"


#: Properties of a right expected_streamed_time(io_only, single_stream): it is max(single - io, 2 io / 3), in the arguments'
#: unit; it never exceeds single_stream and never falls below either part; it is linear in the pair (seconds or ms alike).
#: The cases: the book's two GPUs, a compute-heavy and a compute-free run, seconds, and both sides of (and on) the boundary
#: single - io = 2 io / 3 where the larger part changes.


def check_expected_streamed_time(expected_streamed_time: Callable[[float, float], float]) -> None:
    """Exercise 7.4: `expected_streamed_time(io_only, single_stream)` returns the book's estimate of the overlapped run (§7.3)."""
    figure = lambda name: book.figure(name).number  # noqa: E731
    cases = [("Tesla K20X (book)", figure("ch7_conv_io_only_K20X"), figure("ch7_conv_single_stream_K20X")),
             ("Tesla K10 (book)", figure("ch7_conv_io_only_K10"), figure("ch7_conv_single_stream_K10")),
             ("a link twice as fast", 0.05, 0.30), ("compute-free", 0.09, 0.09), ("a slow link, in seconds", 2.5, 3.0),
             # both sides of the boundary where the compute (single - io) equals 2/3 of the I/O time, and on it
             ("compute just below 2/3 of the I/O", 0.3, 0.3 + 0.19), ("compute just above 2/3 of the I/O", 0.3, 0.3 + 0.21),
             ("compute exactly 2/3 of the I/O", 0.3, 0.5)]
    results = []
    for name, io, single in cases:
        try:
            got = float(expected_streamed_time(io, single))
        except NotImplementedError:  # the student's stub: let its hint through
            raise
        except Exception as exc:  # any exception is a wrong answer, reported in words
            fail([f"{name}: expected_streamed_time({io}, {single}) raised {type(exc).__name__}: {exc}"], "Exercise 7.4")
        results.append((name, io, single, got, conv.book_estimate(io, single)))
    wrong = [r for r in results if not math.isclose(r[3], r[4], rel_tol=1e-9, abs_tol=1e-12)]
    if wrong:
        name, io, single, got, want = wrong[0]
        hint = next((words for formula, words in _NOT_THE_ESTIMATE
                     if all(math.isclose(g, formula(s - i, i, s), rel_tol=1e-9, abs_tol=1e-12) for _, i, s, g, _ in results)),
                    None) or _estimate_hint(results, want, single - io, 2 * io / 3)
        fail([f"{name}: I/O only {io:.4g} s, single stream {single:.4g} s -> got {got:.4g} s; {hint}."], "Exercise 7.4")
    passed(f"Exercise 7.4: the estimate reproduces the book's 0.15 s (K20X) and 0.092 s (K10) and {len(cases) - 2} more cases, "
           "on both sides of the point where the copies start to set the pace.")


__all__ = ["CheckFailed", "check_derivative_spectrum", "check_expected_streamed_time", "check_next_fast_size", "check_poisson_divide"]
