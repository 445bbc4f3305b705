"""Chapter 2 checks against answers nobody tuned them on: wrong ones by kind (float32 and int32 arithmetic, a limit taken
for the device's, a stop at the first refusal, thresholds beside 60 %, the sum of the parts, a fast path at n, the work on
the host, inputs changed), each named by its cause in at most five lines, and right ones written another way, which pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from answers_common import caught, passes
from numba import cuda, float32

import gpucourse
from gpucourse.checks import ch2

# --- Exercise 2.1 ------------------------------------------------------------------------------------


def bandwidth_float32(n, itemsize, reads, writes, milliseconds):
    return np.float32(n * itemsize * (reads + writes)) / np.float32(milliseconds * 1e-3) / np.float32(1e9)


def bandwidth_int32(n, itemsize, reads, writes, milliseconds):
    with np.errstate(over="ignore"):
        moved = np.int32(n) * np.int32(itemsize) * np.int32(reads + writes)
    return float(moved) / (milliseconds * 1e-3) / 1e9


def bandwidth_read_and_write(n, itemsize, reads, writes, milliseconds):
    return n * itemsize * 2 / (milliseconds * 1e-3) / 1e9  # as if every kernel read once and wrote once


@pytest.mark.parametrize(("answer", "causes"), [
    (bandwidth_float32, ["float32", r"expected 139\.\d{6}"]),
    (bandwidth_int32, ["overflowed a 32-bit integer", "Python ints"]),
    (bandwidth_read_and_write, ["one read and one write", "reads \\+ writes"]),
])
def test_effective_bandwidth_wrong_answers_are_named(answer, causes):
    caught(ch2.check_effective_bandwidth, answer, causes=causes)


def bandwidth_in_gigabytes_first(n, itemsize, reads, writes, milliseconds):
    gigabytes = (reads + writes) * n * itemsize * 1e-9
    return gigabytes / (milliseconds / 1000)


def bandwidth_per_second(n, itemsize, reads, writes, milliseconds):
    per_second = n * itemsize * (reads + writes) * 1000 / milliseconds
    return per_second / 10**9


@pytest.mark.parametrize("answer", [bandwidth_in_gigabytes_first, bandwidth_per_second])
def test_effective_bandwidth_right_answers_pass(answer, capsys):
    passes(ch2.check_effective_bandwidth, answer, capsys=capsys, exercise="2.1")


# --- Exercise 2.2 ------------------------------------------------------------------------------------


def best_fixed_1024(time_ms, block_sizes, bytes_moved):
    speeds = {}
    for threads in block_sizes:
        if threads > 1024:  # the limit of most GPUs, not necessarily of this one
            continue
        speeds[threads] = bytes_moved / 1e9 / (time_ms(threads) * 1e-3)
    best = max(speeds, key=speeds.get)
    return best, speeds[best]


def best_breaks(time_ms, block_sizes, bytes_moved):
    speeds = {}
    for threads in block_sizes:
        try:
            speeds[threads] = bytes_moved / 1e9 / (time_ms(threads) * 1e-3)
        except gpucourse.LaunchConfigError:
            break  # as if every size after a refused one were refused too
    best = max(speeds, key=speeds.get)
    return best, speeds[best]


def best_shifted(time_ms, block_sizes, bytes_moved):
    times = []
    for threads in block_sizes:
        try:
            times.append(time_ms(threads))
        except gpucourse.LaunchConfigError:
            continue
    accepted = [threads for threads in block_sizes if threads <= 1024]
    pairs = list(zip(accepted[1:] + accepted[:1], times))  # the sizes one place off their times
    threads, ms = min(pairs, key=lambda pair: pair[1])
    return threads, bytes_moved / 1e9 / (ms * 1e-3)


def best_skips_first(time_ms, block_sizes, bytes_moved):
    speeds = {}
    for threads in block_sizes[1:]:
        try:
            speeds[threads] = bytes_moved / 1e9 / (time_ms(threads) * 1e-3)
        except gpucourse.LaunchConfigError:
            continue
    best = max(speeds, key=speeds.get)
    return best, speeds[best]


@pytest.mark.parametrize(("answer", "causes"), [
    (best_fixed_1024, ["the device refused", "limit of 512", "not a fixed number"]),
    (best_breaks, ["stopped timing after the device refused 2048", "continue, not break"]),
    (best_shifted, ["the fastest block size here is"]),
    (best_skips_first, ["time every block size the device accepts"]),
])
def test_best_block_size_wrong_answers_are_named(answer, causes):
    caught(ch2.check_best_block_size, answer, causes=causes)


def best_by_sorting(time_ms, block_sizes, bytes_moved):
    timings = []
    for threads in block_sizes:
        try:
            timings.append((time_ms(threads), threads))
        except gpucourse.LaunchConfigError:
            pass
    ms, threads = min(timings)
    return threads, bytes_moved / (ms / 1000) / 1e9


def _timed_or_none(time_ms, threads):
    try:
        return time_ms(threads)
    except gpucourse.LaunchConfigError:
        return None


def best_with_helper(time_ms, block_sizes, bytes_moved):
    times = {threads: _timed_or_none(time_ms, threads) for threads in block_sizes}
    gbs = {threads: bytes_moved * 1e-9 / (ms * 1e-3) for threads, ms in times.items() if ms is not None}
    fastest = sorted(gbs, key=lambda threads: -gbs[threads])[0]
    return fastest, gbs[fastest]


@pytest.mark.parametrize("answer", [best_by_sorting, best_with_helper])
def test_best_block_size_right_answers_pass(answer, capsys):
    passes(ch2.check_best_block_size, answer, capsys=capsys, exercise="2.2")


# --- Exercise 2.3 ------------------------------------------------------------------------------------


def classify_at(threshold):
    def classify(base_ms, memory_ms, math_ms):
        if memory_ms < threshold * base_ms and math_ms < threshold * base_ms:
            return "latency-bound"
        return "memory-bound" if memory_ms >= math_ms else "math-bound"

    return classify


def classify_at_most(base_ms, memory_ms, math_ms):
    if memory_ms <= 0.6 * base_ms and math_ms <= 0.6 * base_ms:
        return "latency-bound"
    return "memory-bound" if memory_ms >= math_ms else "math-bound"


def classify_by_sum(base_ms, memory_ms, math_ms):
    if memory_ms + math_ms < base_ms:  # "the parts do not explain the base time"
        return "latency-bound"
    return "memory-bound" if memory_ms >= math_ms else "math-bound"


def classify_tie_to_math(base_ms, memory_ms, math_ms):
    if max(memory_ms, math_ms) < 0.6 * base_ms:
        return "latency-bound"
    return "memory-bound" if memory_ms > math_ms else "math-bound"


@pytest.mark.parametrize(("answer", "causes"), [
    (classify_at(0.65), ["you said latency-bound, but it is (memory|math)-bound", "strictly under"]),
    (classify_at(0.57), ["you said (memory|math)-bound, but it is latency-bound", "both under 60%"]),
    (classify_at_most, ["exactly 60 %", "you said latency-bound", "strictly under"]),
    (classify_by_sum, ["you said latency-bound", "not their sum"]),
    (classify_tie_to_math, ["same time", "you said math-bound, but it is memory-bound"]),
])
def test_classify_wrong_answers_are_named(answer, causes):
    caught(ch2.check_classify, answer, causes=causes)


def classify_in_percent(base_ms, memory_ms, math_ms):
    memory_percent, math_percent = 100 * memory_ms / base_ms, 100 * math_ms / base_ms
    if memory_percent < 60 and math_percent < 60:
        return "latency-bound"
    return "math-bound" if math_percent > memory_percent else "memory-bound"


def classify_by_longest(base_ms, memory_ms, math_ms):
    longest = max(memory_ms, math_ms)
    if longest / base_ms < 0.6:
        return "latency-bound"
    return {True: "memory-bound", False: "math-bound"}[memory_ms == longest]


@pytest.mark.parametrize("answer", [classify_in_percent, classify_by_longest])
def test_classify_right_answers_pass(answer, capsys):
    passes(ch2.check_classify, answer, capsys=capsys, exercise="2.3")


# --- Exercise 2.4 ------------------------------------------------------------------------------------


@cuda.jit
def copy_four_fast_path_at_n(out, inp):
    step = cuda.blockDim.x
    start = cuda.blockIdx.x * step * 4 + cuda.threadIdx.x
    if start + 3 * step <= inp.size:  # one too far: the fourth element may be element n
        a, b, c, d = inp[start], inp[start + step], inp[start + 2 * step], inp[start + 3 * step]
        out[start], out[start + step], out[start + 2 * step], out[start + 3 * step] = a, b, c, d
    else:
        for k in range(4):
            if start + k * step < inp.size:
                out[start + k * step] = inp[start + k * step]


@cuda.jit
def copy_four_clearing(out, inp):
    step = cuda.blockDim.x
    start = cuda.blockIdx.x * step * 4 + cuda.threadIdx.x
    held = cuda.local.array(4, float32)
    for k in range(4):
        if start + k * step < inp.size:
            held[k] = inp[start + k * step]
            inp[start + k * step] = 0  # "consumed"
    for k in range(4):
        if start + k * step < inp.size:
            out[start + k * step] = held[k]


@cuda.jit
def copy_four_reference_kernel(out, inp):
    step = cuda.blockDim.x
    start = cuda.blockIdx.x * step * 4 + cuda.threadIdx.x
    held = cuda.local.array(4, float32)
    for k in range(4):
        if start + k * step < inp.size:
            held[k] = inp[start + k * step]
    for k in range(4):
        if start + k * step < inp.size:
            out[start + k * step] = held[k]


def launch_with(kernel, blocks_per_element=1024):
    def copy_four(out, inp):
        kernel[-(-out.size // blocks_per_element), 256](out, inp)

    return copy_four


def copy_four_on_host(out, inp):
    out.copy_to_device(inp.copy_to_host())


@pytest.mark.parametrize(("answer", "causes"), [
    (launch_with(copy_four_fast_path_at_n), ["outside", "n = 768"]),
    (launch_with(copy_four_clearing), ["changed inp in place"]),
    (launch_with(copy_four_reference_kernel, 256), [r"launches \d+ blocks", r"ceil\(n / 1024\) = \d+"]),
    (copy_four_on_host, ["no kernel was launched"]),
])
def test_copy_four_wrong_answers_are_named(answer, causes):
    caught(ch2.check_copy_four, answer, causes=causes)


@cuda.jit(device=True)
def _in_or_zero(inp, i):
    return inp[i] if i < inp.size else float32(0)


@cuda.jit
def copy_four_all_guarded(out, inp):
    step = cuda.blockDim.x
    i0 = 4 * step * cuda.blockIdx.x + cuda.threadIdx.x
    i1, i2, i3 = i0 + step, i0 + 2 * step, i0 + 3 * step
    a0, a1, a2, a3 = _in_or_zero(inp, i0), _in_or_zero(inp, i1), _in_or_zero(inp, i2), _in_or_zero(inp, i3)
    if i0 < out.size:
        out[i0] = a0
    if i1 < out.size:
        out[i1] = a1
    if i2 < out.size:
        out[i2] = a2
    if i3 < out.size:
        out[i3] = a3


def copy_four_guarded(out, inp):
    copy_four_all_guarded[math.ceil(out.size / 1024), 256](out, inp)


@cuda.jit
def copy_four_while_kernel(out, inp):
    step = cuda.blockDim.x
    first = cuda.blockIdx.x * step * 4 + cuda.threadIdx.x
    held = cuda.local.array(4, float32)
    k = 0
    while k < 4 and first + k * step < inp.size:
        held[k] = inp[first + k * step]
        k += 1
    j = 0
    while j < k:
        out[first + j * step] = held[j]
        j += 1


def copy_four_while_loops(out, inp, threads_per_block=256):
    per_block = 4 * threads_per_block
    copy_four_while_kernel[(len(out) + per_block - 1) // per_block, threads_per_block](out, inp)


@pytest.mark.parametrize("answer", [copy_four_guarded, copy_four_while_loops])
def test_copy_four_right_answers_pass(answer, capsys):
    passes(ch2.check_copy_four, answer, capsys=capsys, exercise="2.4")


# --- 2.2: what the check hands over cannot change its verdict ----------------------------------------


def best_rewrites_the_list(time_ms, block_sizes, bytes_moved):
    speeds = {}
    for threads in block_sizes:
        try:
            speeds[threads] = bytes_moved / 1e9 / (time_ms(threads) * 1e-3)
        except gpucourse.LaunchConfigError:
            continue
    slowest = min(speeds, key=speeds.get)
    block_sizes[:] = [slowest]  # as if the slowest were the only size there was
    return slowest, speeds[slowest]


def best_reads_the_stand_in(time_ms, block_sizes, bytes_moved):
    speeds = time_ms.gbs  # the stand-in GPU's own table: not handed over
    best = max(speeds, key=speeds.get)
    return best, speeds[best]


def test_best_block_size_judges_against_its_own_copies():
    """The list and the timing function are handed over; rewriting the list changes nothing, and the timing function has no table to read."""
    caught(ch2.check_best_block_size, best_rewrites_the_list, causes=("the fastest block size here is",))
    caught(ch2.check_best_block_size, best_reads_the_stand_in, causes=("raised AttributeError",))
