"""Checks for the chapter 5 exercises (solutions/ch05_monte_carlo.ipynb).

Sums are checked on data whose every partial sum is exact in float32 (small positive integers), so
the right answer is one number and each typical mistake leaves its own: a lost tail gives the sum of
a prefix of the array, a block counted twice or a missing block is off by whole block sums.

Two mistakes of this chapter are races, and a race need not show in one run: in the simulator the
blocks of a grid run one after another, so `total[0] += s` from every block never collides there,
and a missing barrier can go unnoticed on a GPU too. So besides running the student's kernel, the
checks read its source (`ast`): an update of one element of a global array by `+=` without an
atomic, or a tree loop over a shared array without `cuda.syncthreads()`, fails the check with the
cause named, in both modes alike.
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap
from collections.abc import Callable

import numpy as np

from .. import summation
from ..arrays import random_array, to_device, to_host
from ..options import EuropeanOption, black_scholes, payoffs_reference
from ..simulation import paced
from ..sizes import problem_size
from . import CheckFailed, array_problems, fail, passed, run_guarded

#: Block sizes a student's launch might have used, for recognising a lost tail.
BLOCK_SIZES = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)

# ---------------------------------------------------------------------------------------------
# Reading a kernel's source


def _python_function(kernel):
    return getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel


def kernel_tree(kernel) -> ast.FunctionDef:
    """The parsed source of a kernel (a Numba dispatcher, a simulated kernel or a plain function)."""
    function = _python_function(kernel)
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as exc:
        raise CheckFailed(f"cannot read the source of {function!r} ({exc}): define the kernel in a notebook cell or a file.") from None
    tree = ast.parse(source)
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    if node is None:
        raise CheckFailed(f"{function!r} is not a function defined with def.")
    return node


def _is_call_to(node: ast.AST, name: str) -> bool:
    """True for a call whose function is `name` or `something.name` (cuda.syncthreads(), syncthreads())."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == name) or (isinstance(func, ast.Name) and func.id == name)


def _shared_names(function: ast.FunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr == "array" and isinstance(func.value, ast.Attribute) and func.value.attr == "shared":
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _writes_to(node: ast.AST, names: set[str]) -> bool:
    for part in ast.walk(node):
        targets = part.targets if isinstance(part, ast.Assign) else [part.target] if isinstance(part, ast.AugAssign) else []
        if any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in names for t in targets):
            return True
    return False


def missing_barriers(kernel) -> list[str]:
    """Where a shared-memory tree lacks `cuda.syncthreads()`: in the loop over its levels, or between filling it and the loop."""
    function = kernel_tree(kernel)
    shared = _shared_names(function)
    if not shared:
        return []
    problems = []
    for loop in (n for n in ast.walk(function) if isinstance(n, (ast.While, ast.For))):
        if not _writes_to(loop, shared):
            continue
        reads_shared = any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in shared and isinstance(n.ctx, ast.Load)
                           for n in ast.walk(loop))
        if not reads_shared:  # a loop that only fills shared memory is not a tree level
            continue
        if not any(_is_call_to(n, "syncthreads") for n in ast.walk(loop)):
            problems.append(
                f"the loop at line {loop.lineno} of {function.name} combines values in shared memory but has no cuda.syncthreads(): "
                "at each level a thread reads a partial sum another thread wrote at the level before, so every level must end "
                "with a barrier, or a thread can read the value before it is written (a race).")
        before = [n for n in function.body if n.lineno < loop.lineno]
        filled = any(_writes_to(n, shared) for n in before)
        synced = any(_is_call_to(c, "syncthreads") for n in before for c in ast.walk(n))
        if filled and not synced:
            problems.append(
                f"{function.name} stores into shared memory and starts the tree at line {loop.lineno} without a cuda.syncthreads() "
                "in between: the first level can read a neighbour's slot before the neighbour has stored its value.")
        break
    return problems


def _constant_index(target: ast.Subscript) -> bool:
    index = target.slice
    return isinstance(index, ast.Constant) or (isinstance(index, ast.Tuple) and all(isinstance(e, ast.Constant) for e in index.elts))


def global_races(kernel) -> list[str]:
    """Plain read-modify-writes (`a[0] += v`, `a[0] = a[0] + v`) of one element of an argument array: a race between threads."""
    function = kernel_tree(kernel)
    parameters = {a.arg for a in function.args.args}
    problems = []
    for node in ast.walk(function):
        target = None
        if isinstance(node, ast.AugAssign):
            target = node.target
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            candidate = node.targets[0]
            same = [n for n in ast.walk(node.value) if isinstance(n, ast.Subscript) and ast.unparse(n) == ast.unparse(candidate)]
            if isinstance(candidate, ast.Subscript) and same:  # a[0] = a[0] + v
                target = candidate
        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in parameters
                and _constant_index(target)):
            name = target.value.id
            problems.append(
                f"line {node.lineno}: {ast.unparse(node).strip()} is a race: many threads of many blocks read {name}[...], add, and "
                f"write it back at the same time, and all but one of the additions that overlap are lost. Use "
                f"cuda.atomic.add({name}, 0, value) for the update of global memory.")
    return problems


# ---------------------------------------------------------------------------------------------
# Exercise 5.1: a sum that keeps the tail


def _exact_integer_data(n: int, seed: int) -> np.ndarray:
    """Random integers 1..3 as float32: for n below 2**24 / 3 every partial sum is an exact float32, in any order of addition."""
    return random_array(n, np.int32, seed=seed, low=1, high=4).astype(np.float32)


def _lost_tail_blocks(got: float, host: np.ndarray) -> set[int]:
    """The block sizes B for which `got` is the sum of all but the last n % B elements."""
    n = host.size
    prefix = np.cumsum(host, dtype=np.float64)
    return {block for block in BLOCK_SIZES if n // block * block < n and got == (prefix[n // block * block - 1] if n >= block else 0.0)}


def _sum_problems(got: float, host: np.ndarray, where: str) -> list[str]:
    """What is wrong with `got` as the sum of `host` (exact integer data), in words; [] if it is right."""
    exact = float(host.astype(np.float64).sum())
    if math.isnan(got):
        return [f"{where}: result[0] was never written (it still holds NaN). One thread (say thread 0 of block 0, or the last "
                "launch of your plan) must store the total."]
    if got == exact:
        return []
    n = host.size
    if got > exact:
        return [f"{where}: got {got:.0f}, expected {exact:.0f}: {got - exact:.0f} too much, so some elements were added more than "
                "once (a grid-stride step smaller than the number of threads, or partial sums added twice)."]
    prefix = np.concatenate([[0.0], np.cumsum(host, dtype=np.float64)])
    hits = np.flatnonzero(prefix == got)
    if hits.size:
        return [f"{where}: got {got:.0f}, the sum of the first {int(hits[0])} of {n} elements: the rest never reached the total "
                "(do the threads or blocks cover the whole array, and does the total include every block's partial sum?)."]
    return [f"{where}: got {got:.0f}, expected {exact:.0f}: some elements in the middle were left out (check the loop's start and step)."]


def check_gpu_sum(gpu_sum: Callable[..., object]) -> None:
    """Exercise 5.1: `gpu_sum(x, result)` writes the sum of the float32 device array x (any length) into result[0]."""
    big = problem_size("ch5_exercise")
    sizes = sorted({1, 31, 33, 255, 257, 1000, 4099, big})
    problems: list[str] = []
    tails: dict[int, set[int]] = {}  # n -> the block sizes whose tail it may have lost (empty: another mistake)
    for number, n in enumerate(sizes):
        host = _exact_integer_data(n, seed=510 + number)
        result = to_device(np.full(1, np.nan, np.float32))
        try:
            paced(gpu_sum)(to_device(host), result)
        except IndexError as exc:
            problems.append(f"n = {n}: the kernel indexed past the end of an array ({exc}): guard every load with `if i < x.size`.")
            continue
        got = float(to_host(result)[0])
        found = _sum_problems(got, host, f"n = {n}")
        if found:
            tails[n] = _lost_tail_blocks(got, host)
            problems += found
    blocks = set.intersection(*tails.values()) if tails else set()
    if blocks:  # every wrong size lost exactly its last n % B elements, for one B
        block = max(blocks)
        problems = [f"for n = {', '.join(str(n) for n in tails)} the sum leaves out the last n % {block} elements: the work is cut "
                    f"into whole blocks of {block}, and what does not fill a block is lost. Round the number of blocks up (and guard "
                    "each load with `if i < x.size`), or loop over the elements with a grid-stride loop."]
    fail(problems[:3], "Exercise 5.1")
    passed(f"Exercise 5.1: gpu_sum is exact for n = {', '.join(str(n) for n in sizes)} (including sizes that are not multiples of a block).")


# ---------------------------------------------------------------------------------------------
# Exercise 5.2: the tree inside a block, with its barriers


def check_block_sums(block_sums_kernel, threads_per_block: int) -> None:
    """Exercise 5.2: `block_sums_kernel[blocks, threads_per_block](x, partial)` writes each block's sum of its
    threads_per_block elements of x (zero past the end) into partial[blockIdx.x], with a shared-memory tree."""
    tpb = int(threads_per_block)
    if tpb & (tpb - 1) or not 2 <= tpb <= 1024:
        raise CheckFailed(f"threads_per_block must be a power of two from 2 to 1024 for this tree; got {tpb}.")
    problems = missing_barriers(block_sums_kernel)
    if not _shared_names(kernel_tree(block_sums_kernel)):
        problems.append("the kernel declares no shared array: stage the block's values in cuda.shared.array(threads_per_block, float32).")
    n = 5 * tpb + tpb // 2 + 3  # a partial last block
    blocks = -(-n // tpb)
    host = _exact_integer_data(n, seed=52)
    padded = np.concatenate([host, np.full(tpb, 1e6, np.float32)])  # what a read past the end of x would find on a GPU
    x = to_device(padded)[:n]
    want = np.array([host[b * tpb:(b + 1) * tpb].astype(np.float64).sum() for b in range(blocks)], np.float32)
    for trial in range(3):
        try:
            got, found = paced(run_guarded)(lambda out, xx: block_sums_kernel[blocks, tpb](xx, out), (blocks,), np.float32, x)
        except Exception as exc:  # any failure of the launch is reported in words
            problems.append(f"launching block_sums_kernel[{blocks}, {tpb}] raised {type(exc).__name__}: {exc}")
            break
        if any("indexed outside" in p for p in found):
            found = [f"the last block read x past its end ({n} elements): threads whose element is >= x.size must contribute 0."]
        else:
            found += array_problems(got, want, what="partial", rtol=0.0, atol=0.0,
                                    coverage_hint="Thread 0 of each block must write partial[cuda.blockIdx.x].")
            last = got[-1] if got.size else np.nan
            if found and not np.isnan(last) and last >= 1e6:
                found.append("the last block's sum includes values past the end of x: threads whose element is >= x.size must contribute 0.")
            elif found and np.array_equal(got[:-1], want[:-1]):
                found.append("only the last, partial block is wrong: it has fewer than threads_per_block elements; the missing ones count as 0.")
        if found:
            problems += [f"run {trial + 1}: {p}" for p in found]
            break
    fail(problems, "Exercise 5.2")
    passed(f"Exercise 5.2: every block's tree sums its {tpb} elements exactly (3 runs, a partial last block), with a barrier at each level.")


# ---------------------------------------------------------------------------------------------
# Exercise 5.3: one atomic per block


def check_atomic_sum(atomic_sum: Callable[..., object], kernel) -> None:
    """Exercise 5.3: `atomic_sum(x, total)` writes the sum of x into total[0]; each block adds its sum with one atomic (`kernel`)."""
    problems = global_races(kernel)
    source = ast.unparse(kernel_tree(kernel))
    if "atomic" not in source:
        problems.append("the kernel uses no atomic operation: each block should add its partial sum with cuda.atomic.add(total, 0, s).")
    for number, n in enumerate((1, 257, problem_size("ch5_exercise"))):
        host = _exact_integer_data(n, seed=530 + number)
        exact = float(host.astype(np.float64).sum())
        total = to_device(np.full(1, 123.0, np.float32))  # not zero: the solution must clear it itself
        paced(atomic_sum)(to_device(host), total)
        got = float(to_host(total)[0])
        if got == exact + 123.0:
            problems.append(f"n = {n}: total[0] ended as the sum plus what it held before (123): set it to zero first (a tiny kernel, "
                            "or total[:] = 0 with the array module) before the blocks add to it.")
            break
        if got != exact:
            ratio = got / exact if exact else float("nan")
            if not math.isnan(ratio) and ratio > 1.5 and abs(ratio - round(ratio)) < 1e-6:
                problems.append(f"n = {n}: total is {ratio:.0f} x the sum: more than one thread per block added the block's sum. "
                                "Let only thread 0 (after the block's tree, or its last warp shuffle) do the atomic add.")
            else:
                problems += _sum_problems(got, host, f"n = {n}")
            break
    fail(problems, "Exercise 5.3")
    passed("Exercise 5.3: atomic_sum is exact (1, 257 and many elements), starts from zero, and updates the total atomically.")


# ---------------------------------------------------------------------------------------------
# Exercise 5.4: option payoffs


#: The contract of exercise 5.4: T = 2 years, so that forgetting sqrt(T) or the drift shows.
EXERCISE_OPTION = EuropeanOption(S=5.0, E=4.5, r=0.08, sigma=0.3, T=2.0)


def _payoffs(z: np.ndarray, option: EuropeanOption, drift: float, volatility: float, discount: float) -> np.ndarray:
    final = option.S * np.exp(drift + volatility * z.astype(np.float64))
    return np.stack([discount * np.maximum(final - option.E, 0.0), discount * np.maximum(option.E - final, 0.0)]).astype(np.float32)


def check_payoffs(payoffs: Callable[..., object]) -> None:
    """Exercise 5.4: `payoffs(z, out, S, E, r, sigma, T)` writes the discounted call (out[0, i]) and put (out[1, i]) payoffs of path i."""
    option = EXERCISE_OPTION
    n = problem_size("ch5_exercise_paths")
    z = np.random.default_rng(54).standard_normal(n).astype(np.float32)
    call, put = payoffs_reference(z, option)
    want = np.stack([call, put]).astype(np.float32)
    args = (np.float32(option.S), np.float32(option.E), np.float32(option.r), np.float32(option.sigma), np.float32(option.T))
    got, problems = paced(run_guarded)(lambda out, zz: payoffs(zz, out, *args), (2, n), np.float32, to_device(z))
    found = array_problems(got, want, what="out", rtol=2e-5, atol=2e-6, coverage_hint="Give every path i a thread (or a grid-stride loop).")
    if found and not np.isnan(got).any():
        r, sigma, T = option.r, option.sigma, option.T
        mistakes = [
            (_payoffs(z, option, option.drift, option.volatility, 1.0), "the payoffs are not discounted: multiply by exp(-r T)."),
            (_payoffs(z, option, r * T, option.volatility, option.discount),
             "the drift is r T; the log-price drifts by (r - sigma**2 / 2) T (Ito's correction)."),
            (_payoffs(z, option, option.drift, sigma * T, option.discount), "the noise is sigma T z; it is sigma sqrt(T) z."),
            (_payoffs(z, option, option.drift, sigma, option.discount), "the noise is sigma z; over T years it is sigma sqrt(T) z."),
            (want[::-1], "call and put are swapped: out[0] holds the call, max(S_T - E, 0); out[1] the put, max(E - S_T, 0)."),
        ]
        for candidate, message in mistakes:
            if np.allclose(got, candidate, rtol=2e-5, atol=2e-6):
                found.append(message)
                break
    problems += found
    fail(problems, "Exercise 5.4")
    exact_call, exact_put = black_scholes(option)
    mean = got.astype(np.float64).mean(axis=1)
    se = got.astype(np.float64).std(axis=1, ddof=1) / math.sqrt(n)
    passed(f"Exercise 5.4: payoffs match NumPy for {n} paths; their means {mean[0]:.4f} (call) and {mean[1]:.4f} (put) are "
           f"{abs(mean[0] - exact_call) / se[0]:.1f} and {abs(mean[1] - exact_put) / se[1]:.1f} standard errors from Black-Scholes.")


# ---------------------------------------------------------------------------------------------
# Exercise 5.5: Kahan summation


def _kahan_cases() -> list[tuple[str, np.ndarray]]:
    tiny = np.concatenate([[1.0], np.full(50_000, 1e-8)]).astype(np.float32)
    series = summation.series_terms(8192, 2)  # largest first: the forward order the book shows is worst
    rng = np.random.default_rng(55)
    lopsided = np.concatenate([[1e4], rng.uniform(0.0, 1e-3, 20_000)]).astype(np.float32)
    return [("1 followed by 50000 terms of 1e-8", tiny), ("1/i**2 for i = 1..8192, largest first", series),
            ("1e4 followed by 20000 terms below 1e-3", lopsided)]


def check_kahan(kahan_sum: Callable[[np.ndarray], object]) -> None:
    """Exercise 5.5: `kahan_sum(x)` returns Kahan's compensated sum of the float32 array x, computed in float32."""
    problems = []
    for label, x in _kahan_cases():
        try:
            got = kahan_sum(x.copy())
        except Exception as exc:  # any exception is a wrong answer, reported in words
            problems.append(f"{label}: kahan_sum raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(got, (np.floating, float)) or np.asarray(got).dtype != np.float32:
            problems.append(f"{label}: return a float32 (np.float32(total)); got {type(got).__name__}.")
            continue
        exact = summation.exact_sum(x)
        naive = float(summation.recursive_sum(x, np.float32))
        error = abs(float(got) - exact)
        u = float(np.finfo(np.float32).eps) / 2
        limit = 1.5 * (2 * u + 2 * x.size * u * u) * float(np.abs(x).astype(np.float64).sum())  # Kahan's bound, with room
        if error <= limit:
            continue
        if float(got) == naive:
            problems.append(f"{label}: your result {float(got):.8g} equals the plain float32 sum: the compensation never reaches "
                            "the total (y = value - c, t = total + y, c = (t - total) - y, total = t).")
        elif error > abs(naive - exact):
            problems.append(f"{label}: error {error:.3g}, larger than the plain sum's {abs(naive - exact):.3g}: the compensation "
                            "has the wrong sign. It is c = (t - total) - y, and the next term is y = value - c.")
        else:
            problems.append(f"{label}: error {error:.3g} (exact {exact:.9g}, yours {float(got):.9g}); a compensated float32 sum "
                            f"should be within {limit:.2g}.")
    fail(problems, "Exercise 5.5")
    passed("Exercise 5.5: kahan_sum is within Kahan's error bound (about 2 float32 ulps of the sum) on all three sets, where the plain "
           "float32 sum is not.")

