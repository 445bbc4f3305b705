"""The chapter 2 exercise checks: right answers pass, each usual mistake fails and is named."""

from __future__ import annotations

import pytest
from numba import cuda, float32

import gpucourse
from gpucourse.checks import CheckFailed, ch2
from gpucourse.kernels import metrics

# --- Exercise 2.1 --------------------------------------------------------------------------------


def bandwidth_right(n, itemsize, reads, writes, ms):
    return n * itemsize * (reads + writes) / (ms * 1e-3) / 1e9


def test_effective_bandwidth_right(capsys):
    ch2.check_effective_bandwidth(bandwidth_right)
    out = capsys.readouterr().out
    assert out.startswith("\u2705 Exercise 2.1") and "139 GB/s" in out  # the book's K20 figure, recomputed


@pytest.mark.parametrize("wrong, message", [
    (lambda n, s, r, w, ms: n * s * r / (ms * 1e-3) / 1e9, "count the bytes written"),
    (lambda n, s, r, w, ms: n * s * (r + w) / ms / 1e9, "time is in milliseconds"),
    (lambda n, s, r, w, ms: n * s * (r + w) / (ms * 1e-3) / 2**30, "GiB"),
    (lambda n, s, r, w, ms: n * s * (r + w) / (ms * 1e-3) / 1e6, "1000 times too large"),
    (lambda n, s, r, w, ms: str(bandwidth_right(n, s, r, w, ms)), "return a number"),
    (lambda n, s, r, w, ms: 1 / 0, "ZeroDivisionError"),
])
def test_effective_bandwidth_mistakes_are_named(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        ch2.check_effective_bandwidth(wrong)


# --- Exercise 2.2 --------------------------------------------------------------------------------


def best_right(time_ms, block_sizes, bytes_moved):
    results = {}
    for tpb in block_sizes:
        try:
            results[tpb] = bytes_moved / (time_ms(tpb) * 1e-3) / 1e9
        except gpucourse.LaunchConfigError:
            continue
    best = max(results, key=results.get)
    return best, results[best]


def test_best_block_size_right(capsys):
    ch2.check_best_block_size(best_right)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 2.2")


def best_no_skip(time_ms, block_sizes, bytes_moved):
    results = {tpb: bytes_moved / (time_ms(tpb) * 1e-3) / 1e9 for tpb in block_sizes}
    best = max(results, key=results.get)
    return best, results[best]


def best_slowest(time_ms, block_sizes, bytes_moved):
    tpb, _ = best_right(time_ms, block_sizes, bytes_moved)
    results = {}
    for t in block_sizes[:-1]:
        results[t] = bytes_moved / (time_ms(t) * 1e-3) / 1e9
    worst = min(results, key=results.get)
    return worst, results[worst]


def best_returns_ms(time_ms, block_sizes, bytes_moved):
    times = {}
    for tpb in block_sizes:
        try:
            times[tpb] = time_ms(tpb)
        except gpucourse.LaunchConfigError:
            pass
    best = min(times, key=times.get)
    return best, bytes_moved / times[best] / 1e9  # forgot that the time is in ms


def best_times_twice(time_ms, block_sizes, bytes_moved):
    best_right(time_ms, block_sizes, bytes_moved)  # a first pass, thrown away
    return best_right(time_ms, block_sizes, bytes_moved)


@pytest.mark.parametrize("wrong, message", [
    (best_no_skip, "Catch gpucourse.LaunchConfigError"),
    (best_slowest, "the fastest block size here is"),
    (best_returns_ms, "1000 times too small"),
    (best_times_twice, "time each block size once"),
    (lambda t, b, n: 256, "return a tuple"),
])
def test_best_block_size_mistakes_are_named(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        ch2.check_best_block_size(wrong)


# --- Exercise 2.3 --------------------------------------------------------------------------------


def classify_right(base_ms, memory_ms, math_ms):
    if max(memory_ms, math_ms) < 0.6 * base_ms:
        return "latency-bound"
    return "memory-bound" if memory_ms >= math_ms else "math-bound"


def test_classify_right(capsys):
    ch2.check_classify(classify_right)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 2.3")


@pytest.mark.parametrize("wrong, message", [
    (lambda b, mem, mat: "memory-bound" if mem >= mat else "math-bound", "both under 60%"),
    (lambda b, mem, mat: "math-bound" if mem >= mat else "memory-bound", r"you said (memory|math)-bound, but it is (math|memory)-bound"),
    (lambda b, mem, mat: "memory bound", "return one of"),
])
def test_classify_mistakes_are_named(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        ch2.check_classify(wrong)


@pytest.mark.parametrize("seed", range(20))
def test_classification_cases_cover_every_label_and_avoid_the_edges(seed):
    import numpy as np

    cases = ch2._classification_cases(np.random.default_rng(seed))
    labels = [metrics.classify_bound(b, mem, mat).label for _, b, mem, mat in cases[4:]]
    assert sorted(labels) == sorted(["memory-bound", "math-bound", "latency-bound"] * 4)
    for _, base_ms, memory_ms, math_ms in cases[4:]:
        shares = memory_ms / base_ms, math_ms / base_ms
        assert abs(max(shares) - metrics.LATENCY_SHARE) >= 0.05 and abs(shares[0] - shares[1]) >= 0.05


# --- Exercise 2.4 --------------------------------------------------------------------------------


@cuda.jit
def copy_four_kernel(out, inp):
    start = cuda.blockIdx.x * cuda.blockDim.x * 4 + cuda.threadIdx.x
    step = cuda.blockDim.x
    if start + 3 * step < out.size:  # four loads in flight, then four stores
        a, b, c, d = inp[start], inp[start + step], inp[start + 2 * step], inp[start + 3 * step]
        out[start], out[start + step], out[start + 2 * step], out[start + 3 * step] = a, b, c, d
    else:
        for k in range(4):
            j = start + k * step
            if j < out.size:
                out[j] = inp[j]


@cuda.jit
def copy_four_interleaved(out, inp):
    start = cuda.blockIdx.x * cuda.blockDim.x * 4 + cuda.threadIdx.x
    for k in range(4):
        j = start + k * cuda.blockDim.x
        if j < out.size:
            out[j] = inp[j]  # each store right after its load: one load in flight


@cuda.jit
def copy_four_neighbours(out, inp):
    start = cuda.grid(1) * 4  # four neighbours per thread: a warp's loads are 16 bytes apart
    if start + 3 < out.size:
        a, b, c, d = inp[start], inp[start + 1], inp[start + 2], inp[start + 3]
        out[start], out[start + 1], out[start + 2], out[start + 3] = a, b, c, d
    else:
        for j in range(start, min(start + 4, out.size)):
            out[j] = inp[j]


@cuda.jit
def copy_four_float64(out, inp):
    start = cuda.blockIdx.x * cuda.blockDim.x * 4 + cuda.threadIdx.x
    step = cuda.blockDim.x
    held = cuda.local.array(4, float32)
    for k in range(4):
        if start + k * step < out.size:
            held[k] = inp[start + k * step]
    for k in range(4):
        if start + k * step < out.size:
            out[start + k * step] = held[k] * 1.0000000001  # through float64 and back (to the same float32)


@cuda.jit
def copy_four_unguarded(out, inp):
    start = cuda.blockIdx.x * cuda.blockDim.x * 4 + cuda.threadIdx.x
    for k in range(4):
        j = start + k * cuda.blockDim.x
        if j < out.size + 64:  # the bounds check is off by a block
            out[j] = inp[j % inp.size]


def launch_four(kernel, round_up=True):
    def run(out, inp):
        n, tpb = out.shape[0], 256
        blocks = -(-n // (4 * tpb)) if round_up else max(1, n // (4 * tpb))
        kernel[blocks, tpb](out, inp)

    return run


def test_copy_four_right(capsys):
    ch2.check_copy_four(launch_four(copy_four_kernel))
    assert capsys.readouterr().out.startswith("\u2705 Exercise 2.4")
    with pytest.raises(CheckFailed, match="launched only the course's own kernels"):  # the package's own version is not an answer
        ch2.check_copy_four(lambda out, inp: metrics.copy_ilp(out, inp, 4, 256))


def test_copy_four_mistakes_are_named():
    with pytest.raises(CheckFailed, match="never written.*ceil"):
        ch2.check_copy_four(launch_four(copy_four_kernel, round_up=False))
    with pytest.raises(CheckFailed, match="outside"):
        ch2.check_copy_four(launch_four(copy_four_unguarded))
    with pytest.raises(CheckFailed, match="course's own kernels"):  # a wrong answer built from the course's kernel: named as such
        ch2.check_copy_four(lambda out, inp: metrics.intensity(out, inp, 1, 32))


def test_copy_four_performance_mistakes_are_named():
    with pytest.raises(CheckFailed, match="after only 1 load.*Load all four values first"):
        ch2.check_copy_four(launch_four(copy_four_interleaved))
    with pytest.raises(CheckFailed, match="reads of inp are not coalesced.*start \\+ t \\+ blockDim"):
        ch2.check_copy_four(launch_four(copy_four_neighbours))
    with pytest.raises(CheckFailed, match="float64"):
        ch2.check_copy_four(launch_four(copy_four_float64))


def test_an_unfinished_exercise_shows_its_hint():
    def stub(*args):
        raise NotImplementedError("the hint")

    for check in (ch2.check_effective_bandwidth, ch2.check_best_block_size, ch2.check_classify, ch2.check_copy_four):
        with pytest.raises(CheckFailed, match="NotImplementedError.*the hint"):
            check(stub)
