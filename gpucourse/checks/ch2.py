"""Checks for the chapter 2 exercises (solutions/ch02_metrics.ipynb).

Each check runs the student's function on fresh random cases (and on the book's own figures, read
from `gpucourse.book`), recognises the usual mistakes by the numbers they produce, and says which.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .. import mode
from ..arrays import random_array, to_device
from ..errors import LaunchConfigError
from ..kernels import metrics
from ..sizes import problem_size
from ..timing import benchmark
from ..validate import check_threads_per_block
from . import CheckFailed, array_problems, fail, passed
from .evidence import coalescing_problems, float64_problems, speed_note, speed_verdict, trace_of
from .runs import run_checked
from .trace import loads_before_first_store

# ---------------------------------------------------------------------------------------------
# Exercise 2.1: effective bandwidth from bytes and time.

_BANDWIDTH_MISTAKES = (
    (0.5, "it is half the right value: count the bytes written as well as the bytes read"),
    (2.0, "it is twice the right value: each element is read `reads` times and written `writes` times, no more"),
    (1e-3, "it is 1000 times too small: the time is in milliseconds, so divide by ms * 1e-3 seconds"),
    (1e3, "it is 1000 times too large: GB/s means 1e9 bytes per second (divide bytes by 1e9)"),
    (1e9 / 2**30, "it is in GiB/s: the book and the course use GB = 1e9 bytes, not 2**30"),
    (1e6, "it is in MB/s (1e6 bytes): divide by 1e9 for GB/s"),
)


def _name_the_mistake(got: float, expected: float, mistakes) -> str:
    ratio = got / expected if expected else math.inf
    for factor, message in mistakes:
        if math.isclose(ratio, factor, rel_tol=1e-3):
            return message
    return f"got {got:.6g}, expected {expected:.6g} (ratio {ratio:.4g})"


def check_effective_bandwidth(effective_bandwidth: Callable[..., float]) -> None:
    """Exercise 2.1: `effective_bandwidth(n, itemsize, reads, writes, ms)` returns GB/s (1e9 bytes per second)."""
    rng = np.random.default_rng()
    cases = [(metrics.BOOK_LIMIT_N, 4, 1, 1, metrics.book_limit_times("K20", True)["base"] * 1e-3)]  # the book's 139 GB/s
    for _ in range(5):
        cases.append((int(rng.integers(1_000, 10**9)), int(rng.choice([2, 4, 8, 16])), int(rng.integers(1, 4)),
                      int(rng.integers(1, 3)), float(rng.uniform(0.01, 50.0))))
    problems = []
    for n, itemsize, reads, writes, ms in cases:
        expected = n * itemsize * (reads + writes) / (ms * 1e-3) / 1e9
        try:
            got = effective_bandwidth(n, itemsize, reads, writes, ms)
        except NotImplementedError:
            raise  # the exercise is not done yet: the stub's hint is the message to show
        except Exception as exc:  # any exception is a wrong answer, reported in words
            problems.append(f"effective_bandwidth({n}, {itemsize}, {reads}, {writes}, {ms:.4g}) raised {type(exc).__name__}: {exc}")
            break
        if not isinstance(got, (int, float, np.floating)) or isinstance(got, bool):
            problems.append(f"return a number (GB/s); got {type(got).__name__}")
            break
        if not math.isclose(float(got), expected, rel_tol=1e-9):
            problems.append(f"effective_bandwidth({n}, {itemsize}, {reads}, {writes}, {ms:.4g} ms): "
                            + _name_the_mistake(float(got), expected, _BANDWIDTH_MISTAKES))
            break
    fail(problems, "Exercise 2.1")
    passed(f"Exercise 2.1: effective bandwidth is right, including the book's K20 base kernel ({cases[0][0]} floats in "
           f"{cases[0][4] * 1e3:.0f} us: {effective_bandwidth(*cases[0]):.0f} GB/s).")


# ---------------------------------------------------------------------------------------------
# Exercise 2.2: the best block size from timings, skipping what the device refuses.


class _ModelTimer:
    """A stand-in GPU: time in ms for each block size from a random bandwidth curve; refuses what a GPU would."""

    def __init__(self, block_sizes: Sequence[int], bytes_moved: float, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.bytes_moved = bytes_moved
        valid = [b for b in block_sizes if b <= 1024]
        gbs = rng.uniform(100.0, 1000.0, size=len(valid))
        gbs[rng.integers(len(valid))] = 1500.0  # one clear winner
        self.gbs = dict(zip(valid, gbs.tolist()))
        self.calls: list[int] = []

    def __call__(self, threads_per_block: int) -> float:
        self.calls.append(threads_per_block)
        check_threads_per_block(threads_per_block)  # raises LaunchConfigError over the device's limit
        return self.bytes_moved / (self.gbs[threads_per_block] * 1e9) * 1e3


def _bandwidth_problem(got: float, expected_gbs: float, bytes_moved: float) -> str:
    """Words for the GB/s that 2.2 returned with the fastest block size: a time returned instead, or the usual unit slips."""
    ms = bytes_moved / (expected_gbs * 1e9) * 1e3
    for value, unit in ((ms, "ms"), (ms * 1e-3, "s")):
        if math.isclose(got, value, rel_tol=1e-6):
            return (f"you returned the fastest time, {got:.4g} {unit}, where its bandwidth belongs: return GB/s = "
                    "bytes_moved / 1e9 / (ms * 1e-3), with the time in ms converted to seconds.")
    words = _name_the_mistake(got, expected_gbs, _BANDWIDTH_MISTAKES)
    if math.isclose(got / expected_gbs, 2.0, rel_tol=1e-3) or math.isclose(got / expected_gbs, 0.5, rel_tol=1e-3):
        words = f"it is {got / expected_gbs:g} times the right value: bytes_moved already counts the bytes read and written"
    return f"the bandwidth you returned for the fastest block size is wrong: {words}."


def check_best_block_size(best_block_size: Callable[[Callable[[int], float], Sequence[int], float], tuple[int, float]]) -> None:
    """Exercise 2.2: `best_block_size(time_ms, block_sizes, bytes_moved)` returns (fastest block size, its GB/s)."""
    rng = np.random.default_rng()
    block_sizes = [32, 64, 128, 256, 512, 1024, 2048]
    bytes_moved = float(rng.integers(10**6, 10**9))
    model = _ModelTimer(block_sizes, bytes_moved, int(rng.integers(2**31)))
    problems = []
    try:
        answer = best_block_size(model, block_sizes, bytes_moved)
    except NotImplementedError:
        raise  # the exercise is not done yet: the stub's hint is the message to show
    except LaunchConfigError as exc:
        fail([f"the device refused 2048 threads per block and your function stopped ({exc}). Catch "
              "gpucourse.LaunchConfigError around the timing and leave that block size out."], "Exercise 2.2")
        return
    except Exception as exc:  # any other exception is a wrong answer, reported in words
        fail([f"best_block_size raised {type(exc).__name__}: {exc}"], "Exercise 2.2")
        return
    if not isinstance(answer, tuple) or len(answer) != 2:
        fail([f"return a tuple (threads_per_block, GB/s); got {answer!r}"], "Exercise 2.2")
    tpb, gbs = answer
    best = max(model.gbs, key=model.gbs.get)
    timed = [b for b in model.calls if b <= 1024]
    if sorted(set(timed)) != sorted(model.gbs):
        problems.append(f"time every block size the device accepts; you timed {sorted(set(timed))} of {sorted(model.gbs)}")
    if len(timed) != len(set(timed)):
        problems.append("time each block size once and keep the result: you timed some more than once")
    if tpb != best:
        problems.append(f"the fastest block size here is {best} ({model.gbs[best]:.0f} GB/s); you returned {tpb}. "
                        "The fastest is the one with the shortest time, i.e. the highest GB/s.")
    elif not math.isclose(float(gbs), model.gbs[best], rel_tol=1e-9):
        problems.append(_bandwidth_problem(float(gbs), model.gbs[best], bytes_moved))
    fail(problems, "Exercise 2.2")

    # The same function on a real kernel: the course's copy, timed with gpucourse.benchmark.
    n = problem_size("ch2_exercise")
    inp = to_device(random_array(n, np.float32, seed=int(rng.integers(1000))))
    out = to_device(np.zeros(n, np.float32))
    real_sizes = [*problem_size("ch2_block_sizes"), 2048]

    def time_copy(threads_per_block: int) -> float:
        if mode.is_simulator():  # one call: the simulator's times mean nothing, only the function's handling of them is checked
            return benchmark(lambda: metrics.copy(out, inp, threads_per_block), warmup=0, repeat=1).median_ms
        return benchmark(lambda: metrics.copy(out, inp, threads_per_block), repeat=10).median_ms

    real_tpb, real_gbs = best_block_size(time_copy, real_sizes, 2 * n * 4)
    if real_tpb not in real_sizes[:-1] or not real_gbs > 0:
        fail([f"on the real copy kernel you returned ({real_tpb}, {real_gbs}); expected one of {real_sizes[:-1]} and a positive GB/s"],
             "Exercise 2.2")
    if mode.is_simulator():  # the simulator's times are Python threads': no bandwidth to quote
        found = f"it picks {real_tpb} threads per block from simulator times, which say nothing of a GPU"
    else:
        found = f"{real_tpb} threads per block, {real_gbs:.3g} GB/s on this GPU"
    passed(f"Exercise 2.2: best_block_size finds the fastest size and skips refused ones. On the copy kernel {found}.")


# ---------------------------------------------------------------------------------------------
# Exercise 2.3: memory-, math- or latency-bound from three timings.


def _classification_cases(rng: np.random.Generator, per_label: int = 4) -> list[tuple[str, float, float, float]]:
    """The book's four runs, then `per_label` random kernels of each kind, clear of the rule's edges."""
    cases = []
    for gpu in metrics.BOOK_LIMIT_GPUS:
        for fastmath in (False, True):
            t = metrics.book_limit_times(gpu, fastmath)
            cases.append((f"the book's {gpu} {'with' if fastmath else 'without'} fast math", t["base"], t["memory"], t["math"]))
    wanted = {"memory-bound": per_label, "math-bound": per_label, "latency-bound": per_label}
    while any(wanted.values()):
        base = float(rng.uniform(0.1, 10.0))
        memory_share, math_share = (float(v) for v in rng.uniform(0.1, 1.0, size=2))
        if abs(max(memory_share, math_share) - metrics.LATENCY_SHARE) < 0.05 or abs(memory_share - math_share) < 0.05:
            continue  # keep clear of the rule's edges: the answer must not hang on rounding
        label = metrics.classify_bound(base, base * memory_share, base * math_share).label
        if wanted[label]:
            wanted[label] -= 1
            cases.append(("a random kernel", base, base * memory_share, base * math_share))
    order = rng.permutation(len(cases) - 4) + 4  # the book's runs first, then the random ones in any order
    return cases[:4] + [cases[i] for i in order]


def check_classify(classify: Callable[[float, float, float], str]) -> None:
    """Exercise 2.3: `classify(base_ms, memory_ms, math_ms)` returns 'memory-bound', 'math-bound' or 'latency-bound'."""
    rng = np.random.default_rng()
    problems = []
    labels = {"memory-bound", "math-bound", "latency-bound"}
    for what, base_ms, memory_ms, math_ms in _classification_cases(rng):
        expected = metrics.classify_bound(base_ms, memory_ms, math_ms)
        try:
            got = classify(base_ms, memory_ms, math_ms)
        except NotImplementedError:
            raise  # the exercise is not done yet: the stub's hint is the message to show
        except Exception as exc:  # any exception is a wrong answer
            problems.append(f"classify({base_ms:.4g}, {memory_ms:.4g}, {math_ms:.4g}) raised {type(exc).__name__}: {exc}")
            break
        if got not in labels:
            problems.append(f"return one of {sorted(labels)}; got {got!r}")
            break
        if got != expected.label:
            hint = {
                "latency-bound": f"memory alone is {expected.memory_share:.0%} and math alone {expected.math_share:.0%} of the "
                                 f"base time: both under {metrics.LATENCY_SHARE:.0%}, so neither explains it",
                "memory-bound": f"memory alone takes {expected.memory_share:.0%} of the base time, more than math "
                                f"({expected.math_share:.0%})",
                "math-bound": f"math alone takes {expected.math_share:.0%} of the base time, more than memory "
                              f"({expected.memory_share:.0%})",
            }[expected.label]
            problems.append(f"{what} (base {base_ms:.4g}, memory {memory_ms:.4g}, math {math_ms:.4g}): you said {got}, "
                            f"but it is {expected.label}: {hint}.")
            break
    fail(problems, "Exercise 2.3")
    passed("Exercise 2.3: classify agrees with the book on the C2050 and the K20, and on random kernels.")


# ---------------------------------------------------------------------------------------------
# Exercise 2.4: a copy with four elements per thread.


def check_copy_four(copy_four: Callable[..., object]) -> None:
    """Exercise 2.4: `copy_four(out, inp)` copies any float32 array, each thread moving four elements blockDim apart, loads first."""
    problems: list[str] = []
    for n in (problem_size("ch2_exercise"), 5, 1):
        inp = random_array(n, np.float32, seed=int(np.random.default_rng().integers(10**6)))
        run = run_checked(copy_four, (n,), np.float32, to_device(inp))
        found = run.problems or array_problems(run.got, inp, what=f"out (n = {n})", rtol=0.0,
                                               coverage_hint="Each block covers 4 * threads_per_block elements: blocks = "
                                                             "ceil(n / (4 * threads_per_block)), and each thread j takes start + j, "
                                                             "start + j + blockDim, ...")
        problems += found
        if found:
            break
        sizes = sorted({launch.threads for launch in run.launches})
        if sizes and sizes != [(256, 1, 1)]:
            problems.append(f"copy_four launches blocks of {' x '.join(map(str, sizes[0][:2 if sizes[0][1] > 1 else 1]))} "
                            "threads; the exercise asks for 256 threads per block (a 1D launch).")
            break
    fail(problems, "Exercise 2.4")
    small = 2 * 4 * 256 + 37  # two full blocks of 256 threads and a tail
    host = random_array(small, np.float32, seed=41)
    trace, note = trace_of(copy_four, [("traced", "out", np.zeros(small, np.float32)), ("traced", "inp", host)])
    if trace is not None:
        problems += float64_problems(trace)
        problems += coalescing_problems(trace, "inp", (small,),
                                        "Thread t must take start + t, start + t + blockDim.x, ... (not four neighbours of its own): "
                                        "then at each step the warp reads 32 neighbouring floats.")
        loads = loads_before_first_store(trace, "inp", "out", 4)
        if not found and loads is not None and loads < 4:
            problems.append(f"each thread stores an element after only {loads} load(s): a store right after its load keeps one load in "
                            "flight at a time. Load all four values first (into four variables), then store the four.")
    fail(problems, "Exercise 2.4")
    n = problem_size("ch2_exercise")
    inp, out = to_device(random_array(n, np.float32, seed=4)), to_device(np.zeros(n, np.float32))
    slow, speed = speed_verdict("Exercise 2.4", "copy_four", lambda: copy_four(out, inp), lambda: metrics.copy_ilp(out, inp, 4, 256),
                                8 * n, 4 * n, "Are the four loads of a thread issued before its first store, and does each warp read "
                                              "neighbouring elements at each step?")
    fail(slow, "Exercise 2.4")
    passed(f"Exercise 2.4: copy_four copies arrays of any length, coalesced, four loads in flight per thread{speed}{note}.")
    speed_note("Exercise 2.4", "copy_four")


__all__ = ["CheckFailed", "check_best_block_size", "check_classify", "check_copy_four", "check_effective_bandwidth"]
