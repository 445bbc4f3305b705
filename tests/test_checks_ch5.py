"""Chapter 5 exercise checks: right answers pass, each usual mistake fails with a message that names its cause (both modes)."""

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
def partial_sums_no_level_barrier(x, partial):
    """A mistake: the tree's levels are not separated by barriers."""
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
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = cache[0]


@cuda.jit
def summed_into_result(x, result):
    """A mistake: every block adds its sum to result[0] with a plain +=."""
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
        result[0] += cache[0]


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
        kernel[1, TPB](partial, result)
    else:  # a mistake: the first block's partial sum taken for the total
        result[:1] = partial[:1]


def truncated_blocks(x, result):
    """A mistake: n // TPB blocks of one element per thread, so the last n % TPB elements are never read."""
    zero_kernel[1, 1](result)
    if x.size // TPB:
        one_per_thread_atomic[x.size // TPB, TPB](x, result)


def rounded_down(x, result):
    """A mistake: n // TPB blocks, with no care for n < TPB: then no block is launched at all."""
    zero_kernel[1, 1](result)
    one_per_thread_atomic[x.size // TPB, TPB](x, result)


def one_pass_plain_total(x, result):
    zero_kernel[1, 1](result)
    summed_into_result[min(8, math.ceil(x.size / TPB)), TPB](x, result)


def test_gpu_sum(capsys):
    ch5.check_gpu_sum(two_pass)
    assert "\u2705 Exercise 5.1" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=rf"leaves out the last n % {TPB} elements"):
        ch5.check_gpu_sum(truncated_blocks)
    with pytest.raises(CheckFailed, match="still holds NaN, the value the check put there: either nothing stored the total"):
        ch5.check_gpu_sum(lambda x, result: None)
    with pytest.raises(CheckFailed, match="first .* of .* elements"):
        ch5.check_gpu_sum(lambda x, result: two_pass(x, result, second_pass=False))
    with pytest.raises(CheckFailed, match="more than once"):
        ch5.check_gpu_sum(lambda x, result: two_pass(x, result, kernel=block_stride_sums))


def test_gpu_sum_names_the_cause():
    with pytest.raises(CheckFailed, match=r"launched with 0 blocks, so nothing ran: n // \d+ rounds down to 0") as failed:
        ch5.check_gpu_sum(rounded_down)
    assert "tid=" not in str(failed.value) and "guard every load" not in str(failed.value)
    with pytest.raises(CheckFailed, match=r"a race on shared memory.*cache\[t\] \+= cache\[t \+ step\]") as failed:
        ch5.check_gpu_sum(lambda x, result: two_pass(x, result, kernel=partial_sums_no_level_barrier))
    assert "start and step" not in str(failed.value)
    with pytest.raises(CheckFailed, match=r"blocks update `result\[0\]` without an atomic.*cuda.atomic.add"):
        ch5.check_gpu_sum(one_pass_plain_total)


# --- 5.2 -------------------------------------------------------------------------------------------------


def make_block_sums(kernel):
    def block_sums(x, partial, threads_per_block):
        kernel[partial.size, threads_per_block, 0, 4 * threads_per_block](x, partial)

    return block_sums


@cuda.jit
def tree(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
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


@cuda.jit
def tree_barrier_in_branch(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        total += x[i]
    tile[t] = total
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
            cuda.syncthreads()  # only the threads that add reach it
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


@cuda.jit
def tree_no_barrier_in_loop(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        total += x[i]
    tile[t] = total
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


@cuda.jit
def tree_no_barrier_after_store(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        total += x[i]
    tile[t] = total
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


@cuda.jit
def tree_unguarded(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    i = cuda.grid(1)
    while i < x.size + cuda.gridsize(1):  # one step too many: reads past the end of x
        total += x[i]
        i += cuda.gridsize(1)
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


@cuda.jit
def tree_tail_not_zeroed(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:  # only threads with an element store one: the others leave their slot as it was
        total = float32(0)
        for k in range(i, x.size, cuda.gridsize(1)):
            total += x[k]
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


@cuda.jit
def tree_fixed_256(x, partial):
    tile = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
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


@cuda.jit
def tree_interleaved(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        total += x[i]
    tile[t] = total
    cuda.syncthreads()
    step = 1
    while step < cuda.blockDim.x:
        if t % (2 * step) == 0:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step *= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


@cuda.jit
def tree_strided_index(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        total += x[i]
    tile[t] = total
    cuda.syncthreads()
    step = 1
    while step < cuda.blockDim.x:
        index = 2 * step * t
        if index < cuda.blockDim.x:
            tile[index] += tile[index + step]
        cuda.syncthreads()
        step *= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


@cuda.jit
def thread_zero_alone(x, partial):
    if cuda.threadIdx.x == 0:  # thread 0 adds the block's share alone
        total = float32(0)
        for start in range(cuda.blockIdx.x * cuda.blockDim.x, x.size, cuda.gridsize(1)):
            for k in range(start, min(start + cuda.blockDim.x, x.size)):
                total += x[k]
        partial[cuda.blockIdx.x] = total


@cuda.jit
def own_stretch(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    per_thread = (x.size + cuda.gridsize(1) - 1) // cuda.gridsize(1)
    total = float32(0)
    for k in range(cuda.grid(1) * per_thread, min((cuda.grid(1) + 1) * per_thread, x.size)):  # a stretch of its own: uncoalesced
        total += x[k]
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


@cuda.jit
def first_element_only(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i] if i < x.size else float32(0)  # no grid-stride loop: one element per thread
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


@cuda.jit
def tree_float64(x, partial):
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    total = 0.0  # a float64 accumulator
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
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


def test_block_sums(capsys):
    ch5.check_block_sums(make_block_sums(tree))
    out = capsys.readouterr().out
    assert "\u2705 Exercise 5.2" in out
    if gpucourse.is_simulator():
        assert "\u23f1 Exercise 5.2" in out  # the speed is judged on a GPU only, and the check says so


@pytest.mark.parametrize(("kernel", "cause"), [
    (tree_barrier_in_branch, r"syncthreads\(\) at line \d+ .* is reached by \d+ of the \d+ threads.*out of the branch"),
    (tree_no_barrier_in_loop, r"a race on shared memory.*tile\[t\] \+= tile\[t \+ step\]"),
    (tree_no_barrier_after_store, r"a race on shared memory.*A barrier is missing after line"),
    (tree_unguarded, "past (its|the) end"),
    (tree_tail_not_zeroed, r"reads tile\[\d+\] \(shared\) at line \d+ .* before any thread of the block wrote it.*stores its total"),
    (first_element_only, "each thread added only its first element.*grid-stride loop"),
    (own_stretch, r"add up to the sum of x, but each block summed other elements.*uncoalesced"),
    (tree_fixed_256, r"declares a shared array of 256 elements, fixed in the kernel.*cuda.shared.array\(0, float32\)"),
    (tree_interleaved, r"the tree diverges.*threads t < step"),
    (tree_strided_index, r"passes on average.*bank conflicts"),
    (thread_zero_alone, "uses no shared memory"),
    (tree_float64, r"float64 arithmetic at line \d+ \(`total \+= x\[i\]`\)"),
])
def test_block_sums_mistakes_are_named(kernel, cause):
    with pytest.raises(CheckFailed, match=cause) as failed:
        ch5.check_block_sums(make_block_sums(kernel))
    assert "never written" not in str(failed.value)


# --- 5.3 -------------------------------------------------------------------------------------------------


def make_atomic(update, zero_in_kernel=False):
    """A one-pass sum kernel: a grid-stride loop and a tree, then `update` ('atomic', 'plain', 'every thread', 'element')."""
    ATOMIC, PLAIN, EVERY = update == "atomic", update == "plain", update == "every thread"
    ZERO = bool(zero_in_kernel)

    @cuda.jit
    def kernel(x, total):
        cache = cuda.shared.array(TPB, float32)
        t = cuda.threadIdx.x
        if ZERO and cuda.grid(1) == 0:
            total[0] = 0  # a mistake: block 0 clears the total while other blocks add to it
        value = float32(0)
        for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
            if ATOMIC or PLAIN or EVERY:
                value += x[i]
            else:
                cuda.atomic.add(total, 0, x[i])
        cache[t] = value
        cuda.syncthreads()
        step = TPB // 2
        while step > 0:
            if t < step:
                cache[t] += cache[t + step]
            cuda.syncthreads()
            step //= 2
        if EVERY:
            cuda.atomic.add(total, 0, cache[0])
        elif t == 0 and ATOMIC:
            cuda.atomic.add(total, 0, cache[0])
        elif t == 0 and PLAIN:
            total[0] += cache[0]

    return kernel


def launcher(kernel, zero=True):
    def atomic_sum(x, total):
        if zero:
            zero_kernel[1, 1](total)
        kernel[min(1024, math.ceil(x.size / TPB)), TPB](x, total)  # enough blocks to fill a GPU: the check times it
    return atomic_sum


def test_atomic_sum(capsys):
    right = make_atomic("atomic")
    ch5.check_atomic_sum(launcher(right), right)
    out = capsys.readouterr().out
    assert "\u2705 Exercise 5.3" in out and "atomic(s) for as many blocks" in out


@pytest.mark.parametrize(("update", "zero", "zero_in_kernel", "cause"), [
    ("plain", True, False, r"blocks update `total\[0\]` without an atomic.*cuda.atomic.add\(total, 0, value\)"),
    ("atomic", False, True, r"block 0 writes total\[0\] at line \d+ \(`total\[0\] = 0.*while other blocks .* add to it with atomics"),
    ("atomic", False, False, "set it to zero first"),
    ("every thread", True, False, "more than one thread per block adds"),
    ("element", True, False, r"atomic additions for \d+ elements, one per element"),
])
def test_atomic_sum_mistakes_are_named(update, zero, zero_in_kernel, cause):
    kernel = make_atomic(update, zero_in_kernel)
    with pytest.raises(CheckFailed, match=cause):
        ch5.check_atomic_sum(launcher(kernel, zero=zero), kernel)


def test_a_replayed_trace_comes_back_from_its_simulator_process():
    """On a GPU the checks trace a replay in a simulator process; its trace (NumPy integers in it) must come back whole."""
    from gpucourse.checks import trace

    n = 3 * TPB + 5
    arguments = [("traced", "x", np.arange(n, dtype=np.float32)), ("traced", "total", np.zeros(1, np.float32))]
    replayed = trace.replayed_trace(launcher(make_atomic("plain")), arguments)
    assert [launch.blocks for launch in replayed.launches] == [(1, 1, 1), (4, 1, 1)]
    assert sum(1 for a in replayed.accesses if a.array == "x") == n
    assert any(a.array == "total" and a.write and not a.atomic for a in replayed.accesses)


def test_atomic_sum_without_atomics_is_named():
    with pytest.raises(CheckFailed, match="no block adds to total"):
        ch5.check_atomic_sum(lambda x, total: two_pass(x, total), partial_sums)


# --- 5.4 -------------------------------------------------------------------------------------------------


def make_payoffs(discount=True, ito=True, sqrt_t=True, swap=False, float64=False):
    HALF, ZERO, ONE = (0.5, 0, 1.0) if float64 else (np.float32(0.5), np.float32(0), np.float32(1))

    @cuda.jit
    def kernel(z, out, S, E, r, sigma, T):
        i = cuda.grid(1)
        if i < z.size:
            drift = (r - sigma * sigma * HALF) * T if ito else r * T
            noise = sigma * math.sqrt(T) if sqrt_t else sigma * T
            final = S * math.exp(drift + noise * z[i])
            d = math.exp(-r * T) if discount else ONE
            call, put = d * max(final - E, ZERO), d * max(E - final, ZERO)
            out[0, i] = put if swap else call
            out[1, i] = call if swap else put

    def payoffs(z, out, S, E, r, sigma, T):
        kernel[math.ceil(z.size / TPB), TPB](z, out, S, E, r, sigma, T)

    return payoffs


def test_payoffs(capsys):
    ch5.check_payoffs(make_payoffs())
    assert "computed in float32" in capsys.readouterr().out
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


def test_payoffs_in_float64_name_the_line():
    with pytest.raises(CheckFailed, match=r"float64 arithmetic at line \d+ \(`drift = "):
        ch5.check_payoffs(make_payoffs(float64=True))


# --- 5.5 -------------------------------------------------------------------------------------------------


def kahan(x, sign=1, compensate=True, as_float64=False, late_c=False, add_c=False):
    total = np.float32(0)
    c = np.float32(0)
    for value in x:
        y = (value + c if add_c else value - c) if compensate else value
        t = total + y
        if late_c:
            total = t
            c = sign * ((t - total) - y)
        else:
            c = sign * ((t - total) - y)
            total = t
    return float(total) if as_float64 else total


def float64_kahan(x):
    total = c = 0.0
    for value in x:
        y = float(value) - c
        t = total + y
        c = (t - total) - y
        total = t
    return np.float32(total)


def test_kahan(capsys):
    ch5.check_kahan(kahan)
    assert "bit for bit" in capsys.readouterr().out


@pytest.mark.parametrize(("answer", "cause"), [
    (lambda x: kahan(x, compensate=False), "plain float32 sum"),
    (lambda x: kahan(x, sign=-1), "wrong sign"),
    (lambda x: kahan(x, late_c=True), r"c is computed after total = t"),
    (lambda x: kahan(x, add_c=True), "wrong sign.*subtracts it"),
    (lambda x: gpucourse.summation.neumaier_sum(x, np.float32), "Neumaier's variant"),
    (lambda x: np.sum(x), "numpy.sum's, bit for bit"),
    (lambda x: np.float32(x.astype(np.float64).sum()), r"float64 \(or exact, math.fsum\) sum rounded to float32"),
    (float64_kahan, r"(float64 \(or exact, math.fsum\)|exact) sum rounded to float32"),
    (lambda x: np.float32(math.fsum(x)), r"(float64 \(or exact, math.fsum\)|exact) sum rounded to float32"),
    (lambda x: kahan(x, as_float64=True), "return a float32"),
    (lambda x: 1 // 0, "raised ZeroDivisionError"),
])
def test_kahan_mistakes_are_named(answer, cause):
    with pytest.raises(CheckFailed, match=cause):
        ch5.check_kahan(answer)


# --- Right answers unlike the reference, and mistakes the values do not show (issue 28) ---------------------


@cuda.jit
def guarded_block_sums(x, partial):
    """One element per thread (blocks rounded up, every load guarded), a tree from blockDim.x // 2 with a shift."""
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    cache[t] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    step = cuda.blockDim.x >> 1
    while step:
        if t < step:
            cache[t] = cache[t] + cache[t + step]
        cuda.syncthreads()
        step >>= 1
    if t == 0:
        partial[cuda.blockIdx.x] = cache[0]


def sum_by_rounds(x, result):
    """A right 5.1 answer: launch after launch over the partial sums until one is left, written into result."""
    while True:
        blocks = (x.size + TPB - 1) // TPB
        if blocks == 1:
            guarded_block_sums[1, TPB](x, result)
            return
        partial = cuda.device_array(blocks, np.float32)
        guarded_block_sums[blocks, TPB](x, partial)
        x = partial


@cuda.jit
def float64_accumulator_sums(x, partial):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    total = 0.0  # a float64 accumulator: every addition in double precision
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        total += x[i]
    cache[t] = float32(total)  # the cast hides it from the stores
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = cache[0]


def test_gpu_sum_other_right_answer_and_float64_accumulator(capsys):
    ch5.check_gpu_sum(sum_by_rounds)
    assert "\u2705 Exercise 5.1" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=r"float64 arithmetic at line \d+ \(`total \+= x\[i\]`\)") as failed:
        ch5.check_gpu_sum(lambda x, result: two_pass(x, result, kernel=float64_accumulator_sums))
    assert len(str(failed.value).splitlines()) <= 5


@cuda.jit
def atomic_tree_kernel(x, total):
    """One atomic per block after a tree in a shared array (the reference uses warp shuffles), loads by a while loop."""
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    value = float32(0)
    i = cuda.grid(1)
    while i < x.size:
        value += x[i]
        i += cuda.gridsize(1)
    tile[t] = value
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(total, 0, tile[0])


def atomic_sum_zeroed_from_host(x, total):
    total.copy_to_device(np.zeros(1, np.float32))  # zeroing with a copy from the host is right too
    atomic_tree_kernel[min(1024, (x.size + TPB - 1) // TPB), TPB](x, total)


@cuda.jit
def atomic_float64_kernel(x, total):
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    value = 0.0  # float64
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        value += x[i]
    tile[t] = float32(value)
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(total, 0, tile[0])


def test_atomic_sum_zeroed_by_a_copy_is_traced_and_float64_is_named(capsys):
    if gpucourse.on_gpu():  # right, but the copy makes every call wait for the GPU (half the reference's speed on an H100)
        with pytest.raises(CheckFailed, match=r"(?s)makes the host wait for the GPU \(.*total\.copy_to_device"):
            ch5.check_atomic_sum(atomic_sum_zeroed_from_host, atomic_tree_kernel)
    else:  # the simulator times nothing: the same answer passes, traced
        ch5.check_atomic_sum(atomic_sum_zeroed_from_host, atomic_tree_kernel)
        out = capsys.readouterr().out
        assert "\u2705 Exercise 5.3" in out and "atomic(s) for as many blocks" in out and "could not be traced" not in out
    with pytest.raises(CheckFailed, match=r"float64 arithmetic at line \d+ \(`value \+= x\[i\]`\)"):
        ch5.check_atomic_sum(launcher(atomic_float64_kernel), atomic_float64_kernel)


@cuda.jit
def payoffs_power_kernel(z, out, S, E, r, sigma, T):
    """A right 5.4 answer: sigma ** 2 (float32 ** int is float32 in a kernel), a grid-stride loop, a helper."""
    for i in range(cuda.grid(1), z.size, cuda.gridsize(1)):
        final = S * math.exp((r - float32(0.5) * sigma ** 2) * T + sigma * math.sqrt(T) * z[i])
        discount = math.exp(-r * T)
        out[0, i] = discount * max(final - E, float32(0))
        out[1, i] = discount * max(E - final, float32(0))


@cuda.jit
def payoffs_cast_kernel(z, out, S, E, r, sigma, T):
    i = cuda.grid(1)
    if i < z.size:
        final = S * math.exp((r - float32(0.5) * sigma * sigma) * T + sigma * math.sqrt(T) * z[i])
        out[0, i] = float32(math.exp(-r * T) * max(final - E, 0.0))  # float64 arithmetic, then a cast
        out[1, i] = float32(math.exp(-r * T) * max(E - final, 0.0))


@cuda.jit
def payoffs_half_kernel(z, out, S, E, r, sigma, T):
    i = cuda.grid(1)
    if i < z.size:
        drift = (r - sigma * sigma / 2) * T
        final = S * math.exp(drift + sigma * math.sqrt(T) * z[i])
        out[0, i] = math.exp(-r * T) * max(final - E, float32(0))
        out[1, i] = math.exp(-r * T) * max(E - final, float32(0))


def test_payoffs_other_right_answer_and_hidden_float64(capsys):
    ch5.check_payoffs(lambda z, out, *p: payoffs_power_kernel[7, 64](z, out, *p))
    assert "computed in float32" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=r"float64 arithmetic at line \d+ \(`out\[0, i\] = float32\(math.exp"):
        ch5.check_payoffs(lambda z, out, *p: payoffs_cast_kernel[math.ceil(z.size / TPB), TPB](z, out, *p))
    with pytest.raises(CheckFailed, match=r"float64 arithmetic at line \d+ \(`drift = \(r - sigma \* sigma / 2\) \* T`\)") as failed:
        ch5.check_payoffs(lambda z, out, *p: payoffs_half_kernel[math.ceil(z.size / TPB), TPB](z, out, *p))
    assert "out[0, i] =" not in str(failed.value)
    with pytest.raises(CheckFailed, match="never written"):  # blocks rounded down: the last paths have no thread
        ch5.check_payoffs(lambda z, out, *p: payoffs_half_kernel[z.size // TPB, TPB](z, out, *p))


def kahan_by_index(x):
    """A right 5.5 answer: an index loop, float32 casts at each step."""
    total, c, i = np.float32(0.0), np.float32(0.0), 0
    while i < len(x):
        y = np.float32(x[i]) - c
        t = np.float32(total + y)
        c = np.float32(np.float32(t - total) - y)
        total = t
        i += 1
    return total


def test_kahan_other_right_answer(capsys):
    ch5.check_kahan(kahan_by_index)
    assert "\u2705 Exercise 5.5" in capsys.readouterr().out


@cuda.jit
def block_sums_by_helper_kernel(x, partial):
    """A right 5.2 answer: the grid-stride loop in a device function, the tree as a for loop over levels."""
    tile = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    tile[t] = strided_total(x)
    cuda.syncthreads()
    levels = 0
    while (1 << levels) < cuda.blockDim.x:
        levels += 1
    for level in range(levels - 1, -1, -1):
        step = 1 << level
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
    if t == 0:
        partial[cuda.blockIdx.x] = tile[0]


@cuda.jit(device=True)
def strided_total(x):
    total = float32(0)
    i = cuda.grid(1)
    while i < x.size:
        total += x[i]
        i += cuda.gridsize(1)
    return total


def test_block_sums_other_right_answer(capsys):
    ch5.check_block_sums(lambda x, partial, threads: block_sums_by_helper_kernel[partial.size, threads, 0, 4 * threads](x, partial))
    assert "\u2705 Exercise 5.2" in capsys.readouterr().out


@cuda.jit
def numba_typed_float32(x, out):
    """Arithmetic that a compiled kernel keeps in float32: powers by an int, casts of constant expressions, float32 helpers."""
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i] = v ** 2 + pow(v, 3) * np.float32(np.sqrt(2.0)) + float32(2 * math.pi) * max(v, float32(0)) + float32(0.5) ** 2


@cuda.jit
def numba_typed_float64(x, out, which):
    """Arithmetic that a compiled kernel does in float64, each hidden from the stores by a cast."""
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        if which == 0:
            out[i] = float32(max(v, 0.0))  # max(float32, float64) is float64
        elif which == 1:
            out[i] = float32(v * 0.5)
        elif which == 2:
            out[i] = float32(v / 2)  # float32 / int64 is float64
        else:
            out[i] = float32(v * i)  # float32 * int64 (an index) is float64


def test_the_trace_types_arithmetic_as_numba_does():
    from gpucourse.checks import trace

    arguments = [("traced", "x", np.arange(40, dtype=np.float32) - 20), ("traced", "out", np.zeros(40, np.float32))]
    kept = trace.traced_run(lambda x, out: numba_typed_float32[2, 32](x, out), arguments)
    assert not kept.float64_origins and not kept.float64_stores
    first = numba_typed_float64.py_func.__code__.co_firstlineno  # the decorator's line
    for which in range(4):
        widened = trace.traced_run(lambda x, out, w=which: numba_typed_float64[2, 32](x, out, w), arguments)
        assert [line for _, line in widened.float64_origins] == [first + 7 + 2 * which]


@cuda.jit
def loop_index_float64(x, out):
    """float32 * a loop index: the index is an int64, so the product is float64."""
    i = cuda.grid(1)
    if i < x.size:
        total = float32(0)
        for k in range(3):
            total += x[i] * k
        out[i] = float32(total)


def test_a_loop_index_is_an_int64_in_the_trace():
    from gpucourse.checks import trace

    arguments = [("traced", "x", np.ones(40, np.float32)), ("traced", "out", np.zeros(40, np.float32))]
    widened = trace.traced_run(lambda x, out: loop_index_float64[2, 32](x, out), arguments)
    assert widened.float64_origins[0][1] == loop_index_float64.py_func.__code__.co_firstlineno + 7  # total += x[i] * k


def test_a_call_that_waits_for_the_gpu_is_named_as_the_cause():
    """A slow answer whose call waits for the GPU is told so first, with the line; a slow kernel gets the kernel's hint."""
    from gpucourse.checks.speed import SpeedComparison, speed_problem

    waits = SpeedComparison(1351.0, 2727.0, 3020.0, 0.49, "at devicearray.py:200 in copy_to_device(), reached from "
                                                       "total.copy_to_device(np.zeros(1, np.float32))")
    words = speed_problem(waits, "atomic sum", "Do enough blocks run to fill the GPU?")
    assert words.startswith("your atomic sum is right, but each call makes the host wait for the GPU")
    assert "total.copy_to_device" in words and "49%" in words and "fill the GPU" not in words
    slow = SpeedComparison(1351.0, 2727.0, 3020.0, 0.49)
    assert "fill the GPU" in speed_problem(slow, "atomic sum", "Do enough blocks run to fill the GPU?")
    assert speed_problem(SpeedComparison(2700.0, 2727.0, 3020.0, 0.99), "atomic sum", "") is None
