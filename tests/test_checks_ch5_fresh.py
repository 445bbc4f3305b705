"""Chapter 5 checks on answers written fresh, of kinds the first tests did not have: each wrong one is named, each right one passes.

Kernels are launched with the chapter's block size (32 threads in the simulator) and few blocks, so that the simulator stays quick.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from answers_common import caught
from numba import cuda, float32
from test_checks_ch5 import make_atomic, partial_sums

import gpucourse
from gpucourse.checks import ch5

TPB = gpucourse.problem_size("ch5_threads_per_block")
#: At most this many blocks: few in the simulator (each thread is a Python thread), enough to fill a GPU there (5.3 is timed).
MOST_BLOCKS = 1024 if gpucourse.mode.on_gpu() else 8


# --- kernels shared by several answers --------------------------------------------------------------


@cuda.jit
def store_value(result, value):
    result[0] = value


@cuda.jit
def one_per_thread(partial, result):
    """A second pass without a loop: thread t adds partial[t] only."""
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    cache[t] = partial[t] if t < partial.size else float32(0)
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        result[0] = cache[0]


@cuda.jit(device=True)
def warp_total(value):
    offset = 16
    while offset > 0:
        value += cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
        offset //= 2
    return value


@cuda.jit
def warp_atomic(x, total, per_warp):
    """A grid-stride sum per thread, a warp's shuffles, then an atomic from each warp's lane 0 (or only from warp 0)."""
    value = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        value += x[i]
    value = warp_total(value)
    lane, warp = cuda.threadIdx.x % 32, cuda.threadIdx.x // 32
    sums = cuda.shared.array(32, float32)
    if lane == 0:
        sums[warp] = value
    cuda.syncthreads()
    if per_warp:
        if lane == 0:
            cuda.atomic.add(total, 0, value)
    elif warp == 0:
        value = warp_total(sums[lane] if lane < cuda.blockDim.x // 32 else float32(0))
        if lane == 0:
            cuda.atomic.add(total, 0, value)


def blocks_for(n, most=MOST_BLOCKS):
    return max(1, min(most, math.ceil(n / TPB)))


# --- 5.1 -----------------------------------------------------------------------------------------


def summed_on_the_host(x, result):
    """Wrong: the host sums, a one-thread kernel stores the number."""
    store_value[1, 1](result, np.float32(x.copy_to_host().astype(np.float64).sum()))


def second_pass_without_loop(x, result):
    """Wrong: as many blocks as the data asks for, but the second pass adds only the first TPB partial sums."""
    blocks = math.ceil(x.size / TPB)
    partial = cuda.device_array(blocks, np.float32)
    partial_sums[blocks, TPB](x, partial)
    one_per_thread[1, TPB](partial, result)


def atomics_into_the_result(x, result):
    """Wrong: every block adds into result[0] with an atomic, but result was never set to 0."""
    warp_atomic[blocks_for(x.size), TPB](x, result, False)


@pytest.mark.parametrize(("answer", "words"), [
    (summed_on_the_host, ["kernel threads read 0 of", "computed on the GPU"]),
    (second_pass_without_loop, ["the sum of the first", "does the total include every block's partial sum"]),
    (atomics_into_the_result, ["NaN", "without setting it to 0 first"]),
])
def test_fresh_wrong_sums_are_named(answer, words):
    message = caught(ch5.check_gpu_sum, answer)
    assert all(word in message for word in words), message


def one_launch_of_atomics(x, result):
    """Right, another way: result set to 0 from the host, then one launch whose warps shuffle and whose blocks add atomically."""
    result.copy_to_device(np.zeros(1, np.float32))
    warp_atomic[blocks_for(x.size), TPB](x, result, False)


def one_block_then_copy(x, result):
    """Right, another way: a single block strides over everything into its partial sum, copied to result on the device."""
    partial = cuda.device_array(1, np.float32)
    partial_sums[1, TPB](x, partial)
    result[:1] = partial[:1]


@pytest.mark.parametrize("answer", [one_launch_of_atomics, one_block_then_copy])
def test_fresh_right_sums_pass(answer, capsys):
    ch5.check_gpu_sum(answer)
    assert "\u2705 Exercise 5.1" in capsys.readouterr().out


# --- 5.2 -----------------------------------------------------------------------------------------


@cuda.jit
def dynamic_tree(x, partial, first_step_is_block):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        total += x[i]
    tile[t] = total
    cuda.syncthreads()
    step = cuda.blockDim.x if first_step_is_block else cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


@cuda.jit
def block_strided(x, partial):
    """Wrong: the grid-stride loop steps by one block, so every block adds the whole array from its own start."""
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.blockDim.x):
        total += x[i]
    tile[t] = total
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


def shared_in_elements(x, partial, threads_per_block):
    dynamic_tree[partial.size, threads_per_block, 0, threads_per_block](x, partial, False)


def tree_from_the_block_size(x, partial, threads_per_block):
    dynamic_tree[partial.size, threads_per_block, 0, 4 * threads_per_block](x, partial, True)


def stride_of_one_block(x, partial, threads_per_block):
    block_strided[partial.size, threads_per_block, 0, 4 * threads_per_block](x, partial)


READS_PAST_SHARED = pytest.mark.skipif(gpucourse.mode.on_gpu(), reason="reads past a block's shared memory: on a GPU that is a "
                                       "launch error which ends the test process's CUDA context (the simulator names it)")


@pytest.mark.parametrize(("answer", "words"), [
    (shared_in_elements, ["a size in bytes, not in elements", "kernel[blocks, threads, 0, 4 * threads]"]),
    pytest.param(tree_from_the_block_size, ["past its end (x has", "cuda.blockDim.x // 2"], marks=READS_PAST_SHARED),
    (stride_of_one_block, ["steps by one block", "cuda.gridsize(1)"]),
])
def test_fresh_wrong_block_sums_are_named(answer, words):
    message = caught(ch5.check_block_sums, answer)
    assert all(word.lower() in message.lower() for word in words), message


@cuda.jit
def shifted_tree(x, partial):
    """Right, another way: a while loop over i from the block's first thread, the tree's step halved with a shift."""
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    total = float32(0)
    while i < x.size:
        total += x[i]
        i += cuda.blockDim.x * cuda.gridDim.x
    tile[t] = total
    cuda.syncthreads()
    step = cuda.blockDim.x >> 1
    while step:
        if t < step:
            tile[t] = tile[t] + tile[t + step]
        cuda.syncthreads()
        step >>= 1
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


def shifted_block_sums(x, partial, threads_per_block):
    shifted_tree[partial.size, threads_per_block, 0, threads_per_block * np.dtype(np.float32).itemsize](x, partial)


@cuda.jit(device=True)
def fold_level(tile, t, step):
    if t < step:
        tile[t] += tile[t + step]


@cuda.jit
def levels_tree(x, partial, levels):
    """Right, another way: the number of levels computed on the host, a for loop over them calling a device function."""
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        total += x[i]
    tile[t] = total
    cuda.syncthreads()
    for level in range(levels):
        fold_level(tile, t, cuda.blockDim.x >> (level + 1))
        cuda.syncthreads()
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


def levels_block_sums(x, partial, threads_per_block):
    levels_tree[partial.size, threads_per_block, 0, 4 * threads_per_block](x, partial, int(math.log2(threads_per_block)))


@pytest.mark.parametrize("answer", [shifted_block_sums, levels_block_sums])
def test_fresh_right_block_sums_pass(answer, capsys):
    ch5.check_block_sums(answer)
    assert "\u2705 Exercise 5.2" in capsys.readouterr().out


# --- 5.3 -----------------------------------------------------------------------------------------


@cuda.jit
def zeroing_in_the_kernel(x, total):
    """Wrong: block 0's thread 0 sets total to 0 while other blocks may already have added to it."""
    if cuda.grid(1) == 0:
        total[0] = 0
    value = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        value += x[i]
    value = warp_total(value)
    sums = cuda.shared.array(32, float32)
    lane, warp = cuda.threadIdx.x % 32, cuda.threadIdx.x // 32
    if lane == 0:
        sums[warp] = value
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        block = float32(0)
        for w in range(cuda.blockDim.x // 32):
            block += sums[w]
        cuda.atomic.add(total, 0, block)


def host_total_one_atomic(x, total):
    """Wrong: the host sums; a kernel adds that one number atomically."""
    total.copy_to_device(np.zeros(1, np.float32))
    adder[1, 1](total, np.float32(x.copy_to_host().astype(np.float64).sum()))


@cuda.jit
def adder(total, value):
    cuda.atomic.add(total, 0, value)


def atomic_per_warp(x, total):
    """Wrong (for this exercise): each warp adds its own sum, more than one atomic per block."""
    total.copy_to_device(np.zeros(1, np.float32))
    warp_atomic[blocks_for(x.size), 2 * 32](x, total, True)


def zero_inside(x, total):
    zeroing_in_the_kernel[blocks_for(x.size), TPB](x, total)


@pytest.mark.parametrize(("answer", "words"), [
    (zero_inside, ["`total[0] = 0`", "Set it before the kernel"]),
    (host_total_one_atomic, ["kernel threads read 0 of", "computed on the GPU"]),
    (atomic_per_warp, ["atomic additions with", "per block", "thread 0"]),
])
def test_fresh_wrong_atomic_sums_are_named(answer, words):
    message = caught(ch5.check_atomic_sum, answer)
    assert all(word in message for word in words), message


tree_then_atomic = make_atomic("atomic")  # a grid-stride loop, a shared tree per block, one atomic from thread 0


def tree_atomic_sum(x, total):
    """Right, another way: total zeroed by a one-thread kernel, a shared tree per block, one atomic from thread 0."""
    store_value[1, 1](total, np.float32(0))
    tree_then_atomic[blocks_for(x.size, MOST_BLOCKS - 2), TPB](x, total)


def shuffled_atomic_sum(x, total):
    """Right, another way: total zeroed from the host, warps shuffled, warp 0 folds the warp sums and adds once."""
    total.copy_to_device(np.zeros(1, np.float32))
    warp_atomic[blocks_for(x.size, MOST_BLOCKS // 2), 2 * 32](x, total, False)


@pytest.mark.parametrize("answer", [tree_atomic_sum, shuffled_atomic_sum])
def test_fresh_right_atomic_sums_pass(answer, capsys):
    ch5.check_atomic_sum(answer)
    assert "\u2705 Exercise 5.3" in capsys.readouterr().out


# --- 5.4 -----------------------------------------------------------------------------------------


@cuda.jit
def payoff_parts(z, out, S, E, drift, vol, discount, guard, overwrite):
    i = cuda.grid(1)
    if i < z.size or not guard:
        final = S * math.exp(drift + vol * z[i])
        out[0, i] = discount * max(final - E, float32(0))
        out[1, i] = discount * max(E - final, float32(0))
        if overwrite:
            z[i] = final


def payoffs_with(python_discount=False, guard=True, overwrite=False):
    def payoffs(z, out, S, E, r, sigma, T):
        drift = (r - sigma * sigma / np.float32(2)) * T
        vol = sigma * np.float32(math.sqrt(T))
        discount = math.exp(-r * T) if python_discount else np.float32(math.exp(-r * T))
        payoff_parts[math.ceil(z.size / TPB), TPB](z, out, S, E, np.float32(drift), np.float32(vol), discount, guard, overwrite)
    return payoffs


@pytest.mark.parametrize(("answer", "words"), [
    (payoffs_with(python_discount=True), ["as `discount`: Numba compiles that parameter as float64", "numpy.float32(value)"]),
    (payoffs_with(guard=False), ["Threads past the end must not write", "bounds check"]),
    (payoffs_with(overwrite=True), ["changed z in place"]),
])
def test_fresh_wrong_payoffs_are_named(answer, words):
    message = caught(ch5.check_payoffs, answer)
    assert all(word in message for word in words), message


@cuda.jit
def log_space_payoffs(z, out, S, E, r, sigma, T):
    """Right, another way: the log-price in float32, a grid-stride loop over few blocks."""
    half = float32(0.5)
    log_s = math.log(S)
    drift = (r - half * sigma * sigma) * T
    vol = sigma * math.sqrt(T)
    discount = math.exp(-r * T)
    for i in range(cuda.grid(1), z.size, cuda.gridsize(1)):
        final = math.exp(log_s + drift + vol * z[i])
        gain = final - E
        out[0, i] = discount * gain if gain > float32(0) else float32(0)
        out[1, i] = float32(0) if gain > float32(0) else -discount * gain


def log_space(z, out, S, E, r, sigma, T):
    log_space_payoffs[3, TPB](z, out, S, E, r, sigma, T)


@cuda.jit
def rows_by_thread_y(z, out, S, E, r, sigma, T):
    """Right, another way: a 2D block, threadIdx.y picks call or put, the common S_T computed by both."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < z.size:
        final = S * math.exp((r - sigma * sigma / float32(2)) * T + sigma * math.sqrt(T) * z[i])
        sign = float32(1) if cuda.threadIdx.y == 0 else float32(-1)
        out[cuda.threadIdx.y, i] = math.exp(-r * T) * max(sign * (final - E), float32(0))


def two_rows(z, out, S, E, r, sigma, T):
    rows_by_thread_y[math.ceil(z.size / 16), (16, 2)](z, out, S, E, r, sigma, T)


@pytest.mark.parametrize("answer", [log_space, two_rows])
def test_fresh_right_payoffs_pass(answer, capsys):
    ch5.check_payoffs(answer)
    assert "\u2705 Exercise 5.4" in capsys.readouterr().out


# --- 5.5 -----------------------------------------------------------------------------------------


def kahan_through_python_floats(x):
    """Wrong: Kahan's steps, but on float(value): Python floats are float64."""
    total, c = 0.0, 0.0
    for value in x:
        y = float(value) - c
        t = total + y
        c = (t - total) - y
        total = t
    return np.float32(total)


def running_sum(x):
    """Wrong: NumPy's running sum, a plain float32 loop."""
    return np.cumsum(x)[-1]


def kahan_sorted_in_place(x):
    """Wrong: sorts the caller's array (smallest first helps), then Kahan."""
    x.sort()
    total, c = np.float32(0), np.float32(0)
    for value in x:
        y = value - c
        t = total + y
        c = (t - total) - y
        total = t
    return total


@pytest.mark.parametrize(("answer", "words"), [
    (kahan_through_python_floats, ["float64", "float32"]),
    (running_sum, ["plain float32 sum"]),
    (kahan_sorted_in_place, ["kahan_sorted_in_place changed x in place"]),
])
def test_fresh_wrong_kahan_sums_are_named(answer, words):
    message = caught(ch5.check_kahan, answer)
    assert all(word in message for word in words), message


def kahan_by_reduce(x):
    """Right, another way: Kahan's step as a function of (total, c) folded over x."""
    def step(state, value):
        total, c = state
        y = value - c
        t = total + y
        return t, (t - total) - y
    return functools.reduce(step, x, (np.float32(0), np.float32(0)))[0]


def kahan_with_an_index(x):
    """Right, another way: a while loop over indices, the compensation kept as the error of each addition."""
    total, error, i = np.float32(0), np.float32(0), 0
    while i < x.size:
        corrected = x[i] - error
        new_total = total + corrected
        error = (new_total - total) - corrected
        total = new_total
        i += 1
    return total


@pytest.mark.parametrize("answer", [kahan_by_reduce, kahan_with_an_index])
def test_fresh_right_kahan_sums_pass(answer, capsys):
    ch5.check_kahan(answer)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 5.5")
