"""Chapter 5 exercise checks: right answers pass, each usual mistake fails with a message that names it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32

import gpucourse
from gpucourse.checks import CheckFailed, ch5

TPB = gpucourse.problem_size("ch5_threads_per_block")

# --- 5.1 -------------------------------------------------------------------------------------------------


@cuda.jit
def partial_sums(x, partial):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        total += x[i]
    cache[t] = total
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = cache[0]


@cuda.jit
def one_per_thread_atomic(x, total):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(total, 0, x[i])


@cuda.jit
def block_stride_sums(x, partial):
    """A mistake: each thread strides by the block size, so every block adds the whole array."""
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(t, x.size, cuda.blockDim.x):
        total += x[i]
    cache[t] = total
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = cache[0]


@cuda.jit
def zero_kernel(total):
    total[0] = 0


def two_pass(x, result, kernel=partial_sums, second_pass=True):
    blocks = min(8, math.ceil(x.size / TPB))
    partial = cuda.device_array(blocks, np.float32)
    kernel[blocks, TPB](x, partial)
    if second_pass:
        partial_sums[1, TPB](partial, result)
    else:  # a mistake: the first block's partial sum taken for the total
        result[:1] = partial[:1]


def truncated_blocks(x, result):
    """A mistake: n // TPB blocks of one element per thread, so the last n % TPB elements are never read."""
    zero_kernel[1, 1](result)
    if x.size // TPB:
        one_per_thread_atomic[x.size // TPB, TPB](x, result)


def test_gpu_sum():
    ch5.check_gpu_sum(two_pass)
    with pytest.raises(CheckFailed, match=rf"leaves out the last n % {TPB} elements"):
        ch5.check_gpu_sum(truncated_blocks)
    with pytest.raises(CheckFailed, match="never written"):
        ch5.check_gpu_sum(lambda x, result: None)
    with pytest.raises(CheckFailed, match="first .* of .* elements"):
        ch5.check_gpu_sum(lambda x, result: two_pass(x, result, second_pass=False))
    with pytest.raises(CheckFailed, match="more than once"):
        ch5.check_gpu_sum(lambda x, result: two_pass(x, result, kernel=block_stride_sums))


# --- 5.2 -------------------------------------------------------------------------------------------------


@cuda.jit
def tree_right(x, partial):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    cache[t] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = cache[0]


@cuda.jit
def tree_no_barrier_in_loop(x, partial):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    cache[t] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = cache[0]


@cuda.jit
def tree_no_barrier_after_store(x, partial):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    cache[t] = x[i] if i < x.size else float32(0)
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = cache[0]


@cuda.jit
def tree_unguarded(x, partial):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    cache[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = cache[0]


@cuda.jit
def no_shared_memory(x, partial):
    i = cuda.grid(1)
    if cuda.threadIdx.x == 0:
        total = float32(0)
        for k in range(i, min(i + cuda.blockDim.x, x.size)):
            total += x[k]
        partial[cuda.blockIdx.x] = total


def test_block_sums():
    ch5.check_block_sums(tree_right, TPB)
    with pytest.raises(CheckFailed, match="no cuda.syncthreads"):
        ch5.check_block_sums(tree_no_barrier_in_loop, TPB)
    with pytest.raises(CheckFailed, match="without a cuda.syncthreads"):
        ch5.check_block_sums(tree_no_barrier_after_store, TPB)
    with pytest.raises(CheckFailed, match="past (its|the) end"):
        ch5.check_block_sums(tree_unguarded, TPB)
    with pytest.raises(CheckFailed, match="no shared array"):
        ch5.check_block_sums(no_shared_memory, TPB)
    with pytest.raises(CheckFailed, match="power of two"):
        ch5.check_block_sums(tree_right, 48)


# --- 5.3 -------------------------------------------------------------------------------------------------


@cuda.jit
def atomic_right(x, total):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    value = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        value += x[i]
    cache[t] = value
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(total, 0, cache[0])


@cuda.jit
def atomic_racy(x, total):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    value = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        value += x[i]
    cache[t] = value
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        total[0] += cache[0]


@cuda.jit
def atomic_every_thread(x, total):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    value = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        value += x[i]
    cache[t] = value
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    cuda.atomic.add(total, 0, cache[0])


def launcher(kernel, zero=True):
    def atomic_sum(x, total):
        if zero:
            zero_kernel[1, 1](total)
        kernel[min(8, math.ceil(x.size / TPB)), TPB](x, total)
    return atomic_sum


def test_atomic_sum():
    ch5.check_atomic_sum(launcher(atomic_right), atomic_right)
    with pytest.raises(CheckFailed, match="is a race"):
        ch5.check_atomic_sum(launcher(atomic_racy), atomic_racy)
    with pytest.raises(CheckFailed, match="set it to zero first"):
        ch5.check_atomic_sum(launcher(atomic_right, zero=False), atomic_right)
    with pytest.raises(CheckFailed, match="more than one thread per block"):
        ch5.check_atomic_sum(launcher(atomic_every_thread), atomic_every_thread)


def test_race_and_barrier_readers():
    assert ch5.global_races(atomic_right) == []
    assert ch5.missing_barriers(tree_right) == []
    (race,) = ch5.global_races(atomic_racy)
    assert "total[0] += cache[0]" in race

    def assigned(x, total):
        total[0] = total[0] + x[0]

    assert ch5.global_races(assigned)


# --- 5.4 -------------------------------------------------------------------------------------------------


def make_payoffs(discount=True, ito=True, sqrt_t=True, swap=False):
    @cuda.jit
    def kernel(z, out, S, E, r, sigma, T):
        i = cuda.grid(1)
        if i < z.size:
            drift = (r - sigma * sigma / 2) * T if ito else r * T
            noise = sigma * math.sqrt(T) if sqrt_t else sigma * T
            final = S * math.exp(drift + noise * z[i])
            d = math.exp(-r * T) if discount else 1.0
            call, put = d * max(final - E, 0), d * max(E - final, 0)
            out[0, i] = put if swap else call
            out[1, i] = call if swap else put

    def payoffs(z, out, S, E, r, sigma, T):
        kernel[math.ceil(z.size / TPB), TPB](z, out, S, E, r, sigma, T)

    return payoffs


def test_payoffs():
    ch5.check_payoffs(make_payoffs())
    with pytest.raises(CheckFailed, match="not discounted"):
        ch5.check_payoffs(make_payoffs(discount=False))
    with pytest.raises(CheckFailed, match="Ito"):
        ch5.check_payoffs(make_payoffs(ito=False))
    with pytest.raises(CheckFailed, match="sigma sqrt"):
        ch5.check_payoffs(make_payoffs(sqrt_t=False))
    with pytest.raises(CheckFailed, match="swapped"):
        ch5.check_payoffs(make_payoffs(swap=True))
    with pytest.raises(CheckFailed, match="never written"):
        ch5.check_payoffs(lambda z, out, *args: None)


# --- 5.5 -------------------------------------------------------------------------------------------------


def kahan(x, sign=1, compensate=True, as_float64=False):
    total = np.float32(0)
    c = np.float32(0)
    for value in x:
        y = value - c if compensate else value
        t = total + y
        c = sign * ((t - total) - y)
        total = t
    return float(total) if as_float64 else total


def test_kahan():
    ch5.check_kahan(kahan)
    with pytest.raises(CheckFailed, match="plain float32 sum"):
        ch5.check_kahan(lambda x: kahan(x, compensate=False))
    with pytest.raises(CheckFailed, match="wrong sign"):
        ch5.check_kahan(lambda x: kahan(x, sign=-1))
    with pytest.raises(CheckFailed, match="return a float32"):
        ch5.check_kahan(lambda x: kahan(x, as_float64=True))
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        ch5.check_kahan(lambda x: 1 // 0)
