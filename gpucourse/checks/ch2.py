"""Checks for the chapter 2 exercises (solutions/ch02_metrics.ipynb).

Each check runs the student's function on fresh random cases (and on the book's own figures, read
from `gpucourse.book`), recognises the usual mistakes by the numbers they produce, and says which.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from hypothesis import strategies as st

from .. import mode
from ..arrays import random_array, to_device
from ..errors import LaunchConfigError
from ..kernels import metrics
from ..sizes import problem_size
from ..timing import benchmark
from . import CheckFailed, array_problems, fail, passed
from .evidence import coalescing_problems, float64_problems, speed_note, speed_verdict, trace_of
from .properties import edge_sizes, shares_near, sizes_from, smallest_failure
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
    if isinstance(got, np.float32) or math.isclose(ratio, 1.0, rel_tol=1e-5):
        kind = "a numpy.float32" if isinstance(got, np.float32) else type(got).__name__
        return (f"got {float(got)!r} ({kind}), expected {expected!r}: they agree only to about 7 digits, float32's precision. "
                "Compute in Python floats (float64): no numpy.float32 in the arithmetic, nor in what you return")
    return f"got {got!r}, expected {expected!r} (ratio {ratio:.6g})"


#: 2.1's generated cases: element counts up to 10^10 (beyond int32), every itemsize, reads or writes of 0 (a kernel that
#: only writes, as a fill, or only reads, as a sum), times from 0.1 us to 10 s.
BANDWIDTH_CASES = st.tuples(
    st.one_of(sizes_from(edge_sizes((1024,), 4096)), st.integers(1, 10**10)), sizes_from((1, 2, 4, 8, 16)),
    st.integers(0, 4), st.integers(0, 3), st.floats(1e-4, 1e4, allow_nan=False, allow_infinity=False),
).filter(lambda case: case[2] + case[3] > 0)


def _bandwidth_case_problem(effective_bandwidth: Callable[..., float], n: int, itemsize: int, reads: int, writes: int,
                            ms: float) -> str | None:
    """2.1 on one case: a number (not float32) within 1e-9 of n * itemsize * (reads + writes) / (ms * 1e-3) / 1e9."""
    expected = n * itemsize * (reads + writes) / (ms * 1e-3) / 1e9
    call = f"effective_bandwidth({n}, {itemsize}, {reads}, {writes}, {ms!r})"
    try:
        got = effective_bandwidth(n, itemsize, reads, writes, ms)
    except NotImplementedError:
        raise  # the exercise is not done yet: the stub's hint is the message to show
    except Exception as exc:  # any exception is a wrong answer, reported in words
        return f"{call} raised {type(exc).__name__}: {exc}"
    if not isinstance(got, (int, float, np.floating)) or isinstance(got, bool):
        return f"return a number (GB/s); got {type(got).__name__} from {call}"
    if isinstance(got, np.float32) or not math.isclose(float(got), expected, rel_tol=1e-9):
        total = n * itemsize * (reads + writes)
        wrapped = (total + 2**31) % 2**32 - 2**31
        if wrapped != total and math.isclose(float(got), wrapped / (ms * 1e-3) / 1e9, rel_tol=1e-6):
            return (f"{call}: the byte count overflowed a 32-bit integer (n * itemsize * (reads + writes) = {total} does not fit in "
                    "an int32, numpy.int32 arithmetic wraps around): compute it with Python ints.")
        if reads + writes != 2 and math.isclose(float(got), n * itemsize * 2 / (ms * 1e-3) / 1e9, rel_tol=1e-6):
            return (f"{call}: you counted one read and one write per element; this kernel makes {reads} read(s) and {writes} "
                    "write(s) of each: multiply by reads + writes.")
        return f"{call}: " + _name_the_mistake(got if isinstance(got, np.float32) else float(got), expected, _BANDWIDTH_MISTAKES)
    return None


def check_effective_bandwidth(effective_bandwidth: Callable[..., float]) -> None:
    """Exercise 2.1: `effective_bandwidth(n, itemsize, reads, writes, ms)` returns GB/s (1e9 bytes per second).

    Properties, tested on generated cases (`BANDWIDTH_CASES`) after the book's K20 base kernel (139 GB/s): the value is
    n * itemsize * (reads + writes) / (ms * 1e-3) / 1e9 to 1e-9, a Python float or float64 (float32 keeps 7 digits), for
    reads or writes of 0, element counts past 2^31, and times far below and above a millisecond.
    """
    book = (metrics.BOOK_LIMIT_N, 4, 1, 1, metrics.book_limit_times("K20", True)["base"] * 1e-3)  # the book's 139 GB/s
    found = smallest_failure(lambda case: _bandwidth_case_problem(effective_bandwidth, *case), BANDWIDTH_CASES,
                             examples=(book, (1000, 4, 2, 1, 0.5), (10**9 + 7, 8, 1, 0, 2.0)), max_examples=60)
    if found:
        fail([found[1]], "Exercise 2.1")
    passed(f"Exercise 2.1: effective bandwidth is right, including the book's K20 base kernel ({book[0]} floats in "
           f"{book[4] * 1e3:.0f} us: {effective_bandwidth(*book):.0f} GB/s), and on generated cases.")


# ---------------------------------------------------------------------------------------------
# Exercise 2.2: the best block size from timings, skipping what the device refuses.


def _stand_in_gpu(gbs: dict[int, float], limit: int, bytes_moved: float, calls: list[int]) -> Callable[[int], float]:
    """A stand-in GPU's `time_ms`: the time in ms of each block size from its own copy of `gbs`; refuses sizes over `limit`.

    A plain function, not an object: an answer has no attribute to write into, and the check judges against its own copy.
    """
    bandwidth = dict(gbs)

    def time_ms(threads_per_block: int) -> float:
        calls.append(threads_per_block)
        if not 0 < threads_per_block <= limit:
            raise LaunchConfigError(f"{threads_per_block} threads per block: this device runs at most {limit}")
        return bytes_moved / (bandwidth[threads_per_block] * 1e9) * 1e3

    return time_ms


#: 2.2's generated cases: the stand-in's limit (1024 or less: an answer that skips sizes over a fixed 1024 instead of
#: catching the refusal is caught), its block sizes in any order (refused ones anywhere), and a seed for its speeds.
BLOCK_LIMITS = (1024, 512, 768, 256, 640)
BLOCK_SIZES = (32, 64, 96, 128, 192, 256, 384, 512, 640, 768, 1024, 2048)
BLOCK_CASES = st.tuples(sizes_from(BLOCK_LIMITS), st.lists(sizes_from(BLOCK_SIZES), min_size=2, max_size=8, unique=True),
                        st.integers(0, 2**31 - 1))
BLOCK_EXAMPLES = ((1024, [32, 64, 128, 256, 512, 1024, 2048], 7), (512, [32, 64, 128, 256, 512, 1024, 2048], 8),
                  (1024, [2048, 1024, 96, 640], 9))


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


def _best_case_problem(best_block_size, limit: int, block_sizes: list[int], seed: int) -> str | None:
    """2.2 on one stand-in GPU: the fastest accepted size and its GB/s, each accepted size timed once, refusals skipped."""
    rng = np.random.default_rng(seed)
    accepted = [b for b in block_sizes if b <= limit]
    if not accepted:
        return None
    bytes_moved = float(rng.integers(10**6, 10**9))
    gbs = dict(zip(accepted, rng.uniform(100.0, 1000.0, size=len(accepted)).tolist()))
    best = accepted[int(rng.integers(len(accepted)))]
    gbs[best] = 1500.0  # one clear winner, anywhere in the list
    calls: list[int] = []
    where = f" (block sizes {block_sizes}, a device limit of {limit})"
    try:
        answer = best_block_size(_stand_in_gpu(gbs, limit, bytes_moved, calls), list(block_sizes), bytes_moved)
    except NotImplementedError:
        raise  # the exercise is not done yet: the stub's hint is the message to show
    except LaunchConfigError as exc:
        return (f"the device refused {calls[-1] if calls else 'a'} threads per block and your function stopped ({exc}){where}. Catch "
                "gpucourse.LaunchConfigError around the timing and leave that block size out: the limit is the device's, not a "
                "fixed number.")
    except Exception as exc:  # any other exception is a wrong answer, reported in words
        return f"best_block_size raised {type(exc).__name__}: {exc}{where}{_stopped_at_refusal(calls, limit, block_sizes)}"
    if not isinstance(answer, tuple) or len(answer) != 2:
        return f"return a tuple (threads_per_block, GB/s); got {answer!r}"
    tpb, got = answer
    timed = [b for b in calls if b <= limit]
    problems = []
    if sorted(set(timed)) != sorted(gbs):
        problems.append(f"time every block size the device accepts; you timed {sorted(set(timed))} of {sorted(gbs)}{where}"
                        f"{_stopped_at_refusal(calls, limit, block_sizes)}")
    if len(timed) != len(set(timed)):
        problems.append("time each block size once and keep the result: you timed some more than once")
    if tpb != best:
        problems.append(f"the fastest block size here is {best} ({gbs[best]:.0f} GB/s); you returned {tpb}{where}. "
                        "The fastest is the one with the shortest time, i.e. the highest GB/s.")
    elif not isinstance(got, (int, float, np.floating)) or not math.isclose(float(got), gbs[best], rel_tol=1e-9):
        problems.append(_bandwidth_problem(float(got) if isinstance(got, (int, float, np.floating)) else math.nan, gbs[best],
                                           bytes_moved))
    return "\n  - ".join(problems[:2]) or None


def _stopped_at_refusal(calls: list[int], limit: int, block_sizes: list[int]) -> str:
    """Words for an answer that stopped timing at the first size the device refused (a `break` where `continue` belongs)."""
    if calls and calls[-1] > limit and len(calls) < len(block_sizes):
        return (f"; you stopped timing after the device refused {calls[-1]}: leave that size out and go on with the next "
                "(continue, not break)")
    return ""


def check_best_block_size(best_block_size: Callable[[Callable[[int], float], Sequence[int], float], tuple[int, float]]) -> None:
    """Exercise 2.2: `best_block_size(time_ms, block_sizes, bytes_moved)` returns (fastest block size, its GB/s).

    Properties, tested on generated stand-in GPUs (`BLOCK_CASES`): the answer is the accepted size of highest GB/s,
    wherever it stands in the list, with GB/s = bytes_moved / 1e9 / (ms * 1e-3); every accepted size is timed once; the
    sizes the device refuses (LaunchConfigError) are left out, whatever the device's limit (1024, 768, 640, 512, 256) and
    wherever they stand. The stand-in is a plain function holding its own copy of its speeds: writing into anything the
    check hands over cannot change the verdict. Then the same function on the course's copy kernel.
    """
    found = smallest_failure(lambda case: _best_case_problem(best_block_size, *case), BLOCK_CASES, examples=BLOCK_EXAMPLES,
                             max_examples=40)
    if found:
        fail([found[1]], "Exercise 2.2")
    rng = np.random.default_rng()

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


#: 2.3's generated cases: a base time, the memory part's share of it at the 60 % boundary, just either side of it or
#: anywhere, and the math part's (or None: the same time as the memory part, the tie the rule gives to memory).
CLASSIFY_CASES = st.tuples(
    st.one_of(sizes_from((10.0, 1.0, 2.0, 2.5, 4.0, 5.0, 8.0, 20.0, 100.0)), st.floats(0.01, 1000.0)),
    shares_near(metrics.LATENCY_SHARE), st.one_of(st.none(), shares_near(metrics.LATENCY_SHARE)),
).map(lambda case: ("a generated kernel", case[0], case[0] * case[1], case[0] * (case[1] if case[2] is None else case[2])))
#: Boundary cases first: exactly 60 % (not latency-bound), just under it, a tie, parts adding up to less than the base
#: with one of them over 60 %, parts each under 60 % adding up to more than the base.
CLASSIFY_EDGES = (("a kernel whose memory part is exactly 60 % of the base", 10.0, 6.0, 2.0),
                  ("a kernel whose parts are just under 60 % of the base", 10.0, 5.99999, 5.9),
                  ("a kernel whose parts take the same time, 60 % of the base", 10.0, 6.0, 6.0),
                  ("a kernel whose parts add up to less than the base", 10.0, 6.4, 3.0),
                  ("a kernel whose math part is 62 % of the base", 10.0, 2.0, 6.2),
                  ("a kernel whose parts are 56 % and 55 % of the base", 10.0, 5.6, 5.5),
                  ("a kernel whose parts take the same time, 70 % of the base", 4.0, 2.8, 2.8))


def _ambiguous(part: float, base: float) -> bool:
    """Whether the usual ways of writing `part < 60 % of base` disagree on these floats (a case no answer can be blamed for)."""
    share = metrics.LATENCY_SHARE
    verdicts = {part < share * base, part / base < share, 100 * part / base < 100 * share, part / base * 100 < 100 * share,
                part * 10 < 10 * share * base}
    return len(verdicts) > 1


def _classify_case_problem(classify: Callable[[float, float, float], str], what: str, base_ms: float, memory_ms: float,
                           math_ms: float) -> str | None:
    """2.3 on one kernel: the label of the rule (latency-bound when both parts are under 60 % of the base, else the longer part)."""
    if _ambiguous(memory_ms, base_ms) or _ambiguous(math_ms, base_ms):
        return None
    labels = {"memory-bound", "math-bound", "latency-bound"}
    expected = metrics.classify_bound(base_ms, memory_ms, math_ms)
    try:
        got = classify(base_ms, memory_ms, math_ms)
    except NotImplementedError:
        raise  # the exercise is not done yet: the stub's hint is the message to show
    except Exception as exc:  # any exception is a wrong answer
        return f"classify({base_ms!r}, {memory_ms!r}, {math_ms!r}) raised {type(exc).__name__}: {exc}"
    if got not in labels:
        return f"return one of {sorted(labels)}; got {got!r}"
    if got == expected.label:
        return None
    memory, math_ = f"{100 * expected.memory_share:.6g} %", f"{100 * expected.math_share:.6g} %"
    hint = {
        "latency-bound": f"memory alone is {memory} and math alone {math_} of the base time: both under "
                         f"{metrics.LATENCY_SHARE:.0%}, so neither explains it",
        "memory-bound": f"memory alone takes {memory} of the base time, not under {metrics.LATENCY_SHARE:.0%}, and at least as "
                        f"long as math ({math_})",
        "math-bound": f"math alone takes {math_} of the base time, not under {metrics.LATENCY_SHARE:.0%}, and longer than memory "
                      f"({memory})",
    }[expected.label]
    return (f"{what} (base {base_ms!r}, memory {memory_ms!r}, math {math_ms!r}): you said {got}, but it is {expected.label}: "
            f"{hint}. The rule compares each part with 60 % of the base (strictly under), not their sum with the base.")


def check_classify(classify: Callable[[float, float, float], str]) -> None:
    """Exercise 2.3: `classify(base_ms, memory_ms, math_ms)` returns 'memory-bound', 'math-bound' or 'latency-bound'.

    Properties, tested on the book's four runs, boundary cases and generated ones (`CLASSIFY_CASES`): latency-bound
    exactly when both parts take strictly less than 60 % of the base time (60 % itself is not; so a threshold anywhere
    else in (0.55, 0.65], or `<=`, is caught); otherwise memory-bound when the memory part takes at least as long as the
    math part (a tie is memory-bound), else math-bound; the sum of the parts plays no role; any unit of time.
    """
    examples = [*CLASSIFY_EDGES, *_classification_cases(np.random.default_rng())]
    found = smallest_failure(lambda case: _classify_case_problem(classify, *case), CLASSIFY_CASES, examples=examples, max_examples=60)
    if found:
        fail([found[1]], "Exercise 2.3")
    passed("Exercise 2.3: classify agrees with the book on the C2050 and the K20, on both sides of the 60 % boundary and of a "
           "tie, and on random kernels.")


# ---------------------------------------------------------------------------------------------
# Exercise 2.4: a copy with four elements per thread.


#: 2.4's generated lengths: around every multiple of 256 (a block's step) and 1024 (a block's span), and lengths whose
#: last block has a thread whose fourth element is exactly n (n % 1024 from 768 to 1023: a fast path `<= n` reads past the end).
COPY_SIZES = edge_sizes((256, 1024), 2 * 1024 + 1, extra=(768 + 37, 1024 + 768 + 200))


def _copy_case_problem(copy_four: Callable[..., object], n: int) -> str | None:
    """2.4 on one length: out == inp bit for bit, blocks of 256 threads, ceil(n / 1024) of them, inp unchanged, a kernel."""
    inp = random_array(n, np.float32, seed=n)
    inp_d = to_device(inp)
    run = run_checked(copy_four, (n,), np.float32, inp_d)
    found = (run.problems
             or array_problems(run.got, inp, what=f"out (n = {n})", rtol=0.0,
                               coverage_hint="Each block covers 4 * threads_per_block elements: blocks = ceil(n / (4 * threads_per_block)), "
                                             "and each thread j takes start + j, start + j + blockDim, ..."))
    if not found:
        sizes = sorted({launch.threads for launch in run.launches})
        if sizes and sizes != [(256, 1, 1)]:
            found = [f"copy_four launches blocks of {' x '.join(map(str, sizes[0][:2 if sizes[0][1] > 1 else 1]))} threads; the "
                     "exercise asks for 256 threads per block (a 1D launch)."]
        elif sum(launch.blocks[0] for launch in run.launches) > -(-n // 1024):
            blocks = sum(launch.blocks[0] for launch in run.launches)
            found = [f"copy_four launches {blocks} blocks of 256 threads for n = {n}: with four elements per thread, ceil(n / 1024) = "
                     f"{-(-n // 1024)} blocks cover the array, and the threads of the other blocks copy nothing."]
    return f"{found[0]} (the smallest failing length found: n = {n})" if found else None



def check_copy_four(copy_four: Callable[..., object]) -> None:
    """Exercise 2.4: `copy_four(out, inp)` copies any float32 array, each thread moving four elements blockDim apart, loads first.

    Properties, tested on generated lengths (`COPY_SIZES`, `_copy_case_problem`): out == inp bit for bit for n around
    every multiple of 256 and 1024, n = 1, and n whose last thread's fourth element lands exactly on n; blocks of 256
    threads, ceil(n / 1024) of them; inp unchanged; a kernel does the work; on a traced run, a warp's loads coalesced and
    each thread's four loads issued before its first store; float32 only.
    """
    n = problem_size("ch2_exercise")
    found = smallest_failure(lambda length: _copy_case_problem(copy_four, length), sizes_from(COPY_SIZES),
                             examples=(n, 5, 1, 768), max_examples=4, shrink_calls=8)
    if found:
        fail([found[1]], "Exercise 2.4")
    problems: list[str] = []
    small = 2 * 4 * 256 + 37  # two full blocks of 256 threads and a tail
    host = random_array(small, np.float32, seed=41)
    trace, note = trace_of(copy_four, [("traced", "out", np.zeros(small, np.float32)), ("traced", "inp", host)])
    if trace is not None:
        problems += float64_problems(trace)
        problems += coalescing_problems(trace, "inp", (small,),
                                        "Thread t must take start + t, start + t + blockDim.x, ... (not four neighbours of its own): "
                                        "then at each step the warp reads 32 neighbouring floats.")
        loads = loads_before_first_store(trace, "inp", "out", 4)
        if loads is not None and loads < 4:
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
