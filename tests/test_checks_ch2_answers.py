"""Chapter 2 checks against answers written another way than the reference: right ones pass, typical wrong ones fail with their cause."""

from __future__ import annotations

import pytest
from numba import cuda, float32

from gpucourse.checks import CheckFailed, ch2

# --- Exercise 2.1 ------------------------------------------------------------------------------------


def bandwidth_in_steps(n, itemsize, reads, writes, milliseconds):
    seconds = milliseconds / 1000
    gigabytes = (reads + writes) * itemsize * n / 10**9
    return gigabytes / seconds


def test_effective_bandwidth_right_another_way(capsys):
    ch2.check_effective_bandwidth(bandwidth_in_steps)
    assert "\u2705 Exercise 2.1" in capsys.readouterr().out


# --- Exercise 2.2 ------------------------------------------------------------------------------------


def best_by_time(time_ms, block_sizes, bytes_moved):
    """Keeps the shortest time (not the highest GB/s), catches ValueError (LaunchConfigError is one)."""
    fastest = None
    for threads in block_sizes:
        try:
            ms = time_ms(threads)
        except ValueError:
            continue
        if fastest is None or ms < fastest[1]:
            fastest = (threads, ms)
    threads, ms = fastest
    return threads, bytes_moved / (ms / 1e3) / 1e9


def best_returns_time(time_ms, block_sizes, bytes_moved):
    timed = {}
    for threads in block_sizes:
        try:
            timed[threads] = time_ms(threads)
        except ValueError:
            pass
    best = min(timed, key=timed.get)
    return best, timed[best]  # the time in ms, not GB/s


def best_counts_bytes_twice(time_ms, block_sizes, bytes_moved):
    threads, gbs = best_by_time(time_ms, block_sizes, bytes_moved)
    return threads, 2 * gbs  # bytes_moved already holds reads and writes


def best_forgets_ms(time_ms, block_sizes, bytes_moved):
    threads, gbs = best_by_time(time_ms, block_sizes, bytes_moved)
    return threads, gbs / 1000  # as if the time were in seconds


def test_best_block_size_right_another_way(capsys):
    ch2.check_best_block_size(best_by_time)
    assert "\u2705 Exercise 2.2" in capsys.readouterr().out


@pytest.mark.parametrize(("answer", "cause", "not_said"), [
    (best_returns_time, r"you returned the fastest time, [\d.e+-]+ ms, where its bandwidth belongs", "bytes_moved already"),
    (best_counts_bytes_twice, r"2 times the right value: bytes_moved already counts the bytes read and written", "milliseconds"),
    (best_forgets_ms, r"1000 times too small: the time is in milliseconds", "bytes_moved already"),
])
def test_best_block_size_bandwidth_mistakes_name_their_unit(answer, cause, not_said):
    with pytest.raises(CheckFailed, match=cause) as failed:
        ch2.check_best_block_size(answer)
    assert not_said not in str(failed.value) and str(failed.value).count("\n  - ") == 1


# --- Exercise 2.3 ------------------------------------------------------------------------------------


def classify_by_shares(base_ms, memory_ms, math_ms):
    memory_share, math_share = memory_ms / base_ms, math_ms / base_ms
    if memory_share >= 0.6 or math_share >= 0.6:
        return "math-bound" if math_share > memory_share else "memory-bound"
    return "latency-bound"


def test_classify_right_another_way(capsys):
    ch2.check_classify(classify_by_shares)
    assert "\u2705 Exercise 2.3" in capsys.readouterr().out


# --- Exercise 2.4 ------------------------------------------------------------------------------------

FOUR = 4


@cuda.jit
def copy_four_local(out, inp):
    held = cuda.local.array(FOUR, float32)
    step = cuda.blockDim.x
    start = FOUR * cuda.blockIdx.x * step + cuda.threadIdx.x
    k = 0
    while k < FOUR:  # all loads first
        if start + k * step < inp.shape[0]:
            held[k] = inp[start + k * step]
        k += 1
    for k in range(FOUR):  # then all stores
        if start + k * step < out.shape[0]:
            out[start + k * step] = held[k]


def copy_four_while(out, inp, threads_per_block=256):
    per_block = FOUR * threads_per_block
    copy_four_local[(out.size + per_block - 1) // per_block, threads_per_block](out, inp)


def copy_four_128(out, inp):
    copy_four_while(out, inp, threads_per_block=128)


def test_copy_four_right_another_way(capsys):
    ch2.check_copy_four(copy_four_while)
    assert "\u2705 Exercise 2.4" in capsys.readouterr().out


def test_copy_four_block_size_is_the_one_asked():
    with pytest.raises(CheckFailed, match="blocks of 128 threads; the exercise asks for 256 threads per block"):
        ch2.check_copy_four(copy_four_128)
