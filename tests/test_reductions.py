"""Chapter 5 reductions: every hand-written sum against math.fsum, on awkward sizes, with poisoned results."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from numba import cuda

import gpucourse
from gpucourse import mode
from gpucourse.errors import ArrayArgumentError, LaunchConfigError, PlanMismatch
from gpucourse.kernels import reductions

TPB = reductions.default_threads()
SIZES = gpucourse.problem_size("ch5_reduce_test_sizes")
VARIANTS = ["two-pass, tree (book)", "two-pass, divergent tree", "two-pass, warp shuffles", "two-pass, shuffles, 4 loads/thread",
            "atomic per block, shuffles", "atomic per block, 4 loads/thread", "atomic lock (book)", "two-pass, 8-byte loads, 2/thread",
            "atomic per block, 8-byte loads, 2/thread"]


def poisoned_result(dtype=np.float32):
    return gpucourse.to_device(gpucourse.poisoned(1, dtype))


def run(variant: str, x, dtype=np.float32) -> float:
    result = poisoned_result(dtype)
    reductions.sum_variants(x, result, TPB)[variant]()
    value = gpucourse.to_host(result)[0]
    assert not np.isnan(value), "the result was never written"
    return value


@functools.cache
def uniform_data(n: int) -> tuple[np.ndarray, float]:
    """Random float32 values in [0, 1) and their exact sum (math.fsum), made once per size."""
    host = gpucourse.random_array(n, np.float32, seed=n + 5, low=0.0, high=1.0)
    return host, math.fsum(host.astype(np.float64).tolist())


def test_sizes_are_the_awkward_ones():
    """The sizes include 1, a block - 1, a block + 1, non-powers of two and (on a GPU) 10**7."""
    assert {1, TPB - 1, TPB + 1} <= set(SIZES)
    assert any(n & (n - 1) for n in SIZES if n > 1)
    if mode.on_gpu():
        assert 10**7 in SIZES


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("n", SIZES)
def test_sum_is_exact_on_plus_minus_one(variant, n):
    """Values +-1: every partial sum is an integer below 2**24, so any order of addition is exact and the sum must be too.

    A lost tail, an element counted twice or a block left out changes the result by at least 1.
    """
    rng = np.random.default_rng(n)
    host = rng.choice(np.array([-1.0, 1.0], np.float32), size=n)
    assert run(variant, gpucourse.to_device(host)) == float(host.sum(dtype=np.float64))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("n", SIZES)
def test_sum_matches_fsum_within_the_bound(variant, n):
    """Random float32 data: |sum - fsum| <= gamma_d * sum|x|, d the most additions any element goes through (Higham)."""
    host, exact = uniform_data(n)
    got = run(variant, gpucourse.to_device(host))
    wide = "8-byte" in variant
    blocks = reductions.default_blocks(n, TPB, 2 if wide else 4 if "4 loads" in variant else 1, wide)
    depth = reductions.summation_depth(n, TPB, blocks, atomic=variant.startswith("atomic")) + (2 if wide else 0)  # a word: its pair first
    bound = reductions.error_bound(depth, exact, np.float32)  # data >= 0: sum|x| = the sum
    assert abs(got - exact) <= bound, f"{variant}, n={n}: error {got - exact:.3g} over the bound {bound:.3g}"


@pytest.mark.parametrize("accumulator", [None, "float64"])
def test_best_sum_and_accumulators(accumulator):
    n = SIZES[-1]
    host = gpucourse.random_array(n, np.float32, seed=3, low=-1.0, high=1.0)
    exact = math.fsum(host.astype(np.float64).tolist())
    dtype = np.dtype(accumulator or np.float32)
    result = poisoned_result(dtype)
    reductions.best_sum(gpucourse.to_device(host), result, accumulator=accumulator)
    got = float(gpucourse.to_host(result)[0])
    best = reductions.best_options()
    blocks = reductions.default_blocks(n, best["threads_per_block"], best["loads_per_thread"], best["wide"])
    depth = reductions.summation_depth(n, best["threads_per_block"], blocks) + 1  # + 1: the two values of a word are added first
    assert abs(got - exact) <= reductions.error_bound(depth, float(np.abs(host).astype(np.float64).sum()), dtype)


def test_float64_and_integer_data():
    n = SIZES[-2]
    values = gpucourse.random_array(n, np.float64, seed=4)
    result = poisoned_result(np.float64)
    reductions.two_pass_sum(gpucourse.to_device(values), result, "tree", TPB)
    assert abs(gpucourse.to_host(result)[0] - math.fsum(values.tolist())) < 1e-12 * n
    counts = gpucourse.random_array(n, np.int32, seed=5, low=-1000, high=1000)
    total = gpucourse.to_device(gpucourse.poisoned(1, np.int64))
    reductions.two_pass_sum(gpucourse.to_device(counts), total, "shuffle", TPB, loads_per_thread=4)
    assert gpucourse.to_host(total)[0] == int(counts.astype(np.int64).sum())
    reductions.atomic_sum(gpucourse.to_device(counts), total, TPB)
    assert gpucourse.to_host(total)[0] == int(counts.astype(np.int64).sum())


def test_element_atomics_and_an_empty_array():
    n = SIZES[2]
    host = gpucourse.random_array(n, np.float32, seed=6, low=-1, high=1).round()
    result = poisoned_result()
    reductions.element_atomic_sum(gpucourse.to_device(host), result, TPB)
    assert gpucourse.to_host(result)[0] == host.astype(np.float64).sum()
    empty = gpucourse.to_device(np.zeros(0, np.float32))
    for launch in (lambda r: reductions.two_pass_sum(empty, r), lambda r: reductions.atomic_sum(empty, r)):
        result = poisoned_result()
        launch(result)
        assert gpucourse.to_host(result)[0] == 0.0


def test_a_plan_is_made_once_and_relaunched():
    n = SIZES[3]
    first, second = (gpucourse.random_array(n, np.float32, seed=s, low=-1, high=1).round() for s in (7, 8))
    x, y = gpucourse.to_device(first), gpucourse.to_device(second)
    result = poisoned_result()
    plan = reductions.two_pass_sum.plan(x, result, "shuffle", TPB, loads_per_thread=4)
    assert len(plan.kernel_names) == 2  # the partial sums and the one-block second pass, bound once
    plan()
    assert gpucourse.to_host(result)[0] == first.astype(np.float64).sum()
    plan(y, result)
    assert gpucourse.to_host(result)[0] == second.astype(np.float64).sum()
    with pytest.raises(PlanMismatch, match="shape"):
        plan(gpucourse.to_device(np.zeros(n + 1, np.float32)), result)


def test_clear_errors():
    x = gpucourse.to_device(np.ones(100, np.float32))
    with pytest.raises(ArrayArgumentError, match="float32 array"):
        reductions.two_pass_sum(x, gpucourse.to_device(np.zeros(1, np.float64)))
    with pytest.raises(ArrayArgumentError, match="accumulator"):
        reductions.two_pass_sum(x, poisoned_result(), accumulator="int64")
    with pytest.raises(LaunchConfigError, match="power of two"):
        reductions.two_pass_sum(x, poisoned_result(), "tree", 96)
    with pytest.raises(LaunchConfigError, match=r"multiple of the warp size \(32\): the shuffle reduction"):
        reductions.two_pass_sum(x, poisoned_result(), "shuffle", 48)
    with pytest.raises(LaunchConfigError, match="loads_per_thread"):
        reductions.two_pass_sum(x, poisoned_result(), "shuffle", loads_per_thread=0)
    with pytest.raises(ArrayArgumentError, match="int8"):
        reductions.two_pass_sum(gpucourse.to_device(np.ones(4, np.int8)), poisoned_result())
    with pytest.raises(ArrayArgumentError, match="8-byte boundary"):
        reductions.two_pass_sum(gpucourse.to_device(np.ones(101, np.float32))[1:], poisoned_result(), wide=True)
    with pytest.raises(ArrayArgumentError, match="float32"):
        reductions.two_pass_sum(gpucourse.to_device(np.ones(100)), poisoned_result(np.float64), wide=True)
    if mode.on_gpu():
        with pytest.raises(ArrayArgumentError, match="host memory"):
            reductions.two_pass_sum(np.ones(100, np.float32), poisoned_result())
        # 16 loads per thread need more registers than a block of 1024 threads can have (run 1 of measurements/ch5.md)
        with pytest.raises(LaunchConfigError, match="registers"):
            reductions.two_pass_sum(x, poisoned_result(), "shuffle", 1024, loads_per_thread=16)


def test_error_bound_arithmetic():
    assert reductions.summation_depth(1000, 256, 4) == 1 + 8 + 1 + 5
    assert reductions.summation_depth(1000, 256, 4, atomic=True) == 1 + 8 + 4
    assert reductions.error_bound(10, 100.0, np.float32) == pytest.approx(10 * 2**-24 * 100, rel=1e-6)
    assert reductions.final_pass_threads(1) == 32
    assert reductions.final_pass_threads(1000) == 1024 or reductions.final_pass_threads(1000) == gpucourse.current_device().max_threads_per_block


@cuda.jit
def shuffle_kernel(x, down, up, xor, broadcast):
    i = cuda.grid(1)
    v = x[i]
    down[i] = cuda.shfl_down_sync(0xFFFFFFFF, v, 3)
    up[i] = cuda.shfl_up_sync(0xFFFFFFFF, v, 5)
    xor[i] = cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
    broadcast[i] = cuda.shfl_sync(0xFFFFFFFF, v, 7)


def test_warp_shuffles_in_both_modes():
    """The simulator's shuffles (gpucourse.simulation) follow CUDA's rules: out-of-range sources return the caller's value."""
    host = np.arange(64, dtype=np.float32) * 1.5
    outs = [gpucourse.to_device(np.zeros(64, np.float32)) for _ in range(4)]
    shuffle_kernel[1, 64](gpucourse.to_device(host), *outs)
    down, up, xor, broadcast = (gpucourse.to_host(o) for o in outs)
    lane = np.arange(64) % 32
    base = np.arange(64) - lane
    np.testing.assert_array_equal(down, np.where(lane + 3 < 32, host[np.minimum(np.arange(64) + 3, 63)], host))
    np.testing.assert_array_equal(up, np.where(lane >= 5, host[np.maximum(np.arange(64) - 5, 0)], host))
    np.testing.assert_array_equal(xor, host[base + (lane ^ 1)])
    np.testing.assert_array_equal(broadcast, host[base + 7])
