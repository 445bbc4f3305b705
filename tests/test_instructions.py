"""Instruction optimization: fast math accuracy against float64 NumPy, intrinsics, rounding, divergence."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from conftest import gpu_only

import gpucourse
from gpucourse import mode
from gpucourse.errors import ArrayArgumentError, EnvironmentProblem, GPUOnlyFeature, LaunchConfigError
from gpucourse.kernels import instructions as I

N = gpucourse.problem_size("ch3_accuracy") + 5
# Argument ranges over which CUDA's documentation bounds each fast intrinsic's error.
RANGES = {"sin": (-math.pi, math.pi), "cos": (-math.pi, math.pi), "exp": (-10.0, 10.0), "log": (0.5, 2.0)}
FAST_ABS_ERROR = 2.0**-21  # __sinf, __cosf on [-pi, pi] and __logf on [0.5, 2]: at most 2**-21.41


def evaluate(name: str, fastmath: bool, low: float, high: float, seed: int = 1):
    x = gpucourse.random_array(N, np.float32, seed=seed, low=low, high=high)
    out = gpucourse.to_device(gpucourse.poisoned(N, np.float32))
    I.apply(out, gpucourse.to_device(x), name, fastmath=fastmath)
    got = gpucourse.to_host(out)
    assert not np.isnan(got).any()
    return x, got, I.FUNCTIONS[name][1](x.astype(np.float64))


@pytest.mark.parametrize("name", I.FUNCTIONS)
def test_precise_functions_within_two_ulp(name):
    x, got, reference = evaluate(name, False, *RANGES[name])
    assert I.ulp_error(got, reference).max() <= 2.0


@pytest.mark.parametrize("name", I.FUNCTIONS)
def test_fast_functions_within_documented_bounds(name):
    x, got, reference = evaluate(name, True, *RANGES[name])
    if name == "exp":  # __expf: 2 + floor(|1.16 x|) ulp
        assert (I.ulp_error(got, reference) <= 2 + np.floor(np.abs(1.16 * x.astype(np.float64))) + 1).all()
    else:
        assert np.abs(got - reference).max() <= FAST_ABS_ERROR


def test_fast_sine_loses_accuracy_far_from_zero():
    x, precise, reference = evaluate("sin", False, -1000.0, 1000.0, seed=7)
    _, fast, _ = evaluate("sin", True, -1000.0, 1000.0, seed=7)
    precise_error, fast_error = np.abs(precise - reference).max(), np.abs(fast - reference).max()
    assert I.ulp_error(precise, reference).max() <= 2.0
    if mode.is_simulator():  # both kernels run Python's math.sin: the flag changes nothing here
        gpu_only("__sinf's argument reduction (the simulator runs math.sin for both; the precise one's 2 ulp were checked)")
    assert fast_error > 10 * precise_error


def test_fast_math_changes_the_instructions():
    evaluate("sin", False, -1.0, 1.0)
    evaluate("sin", True, -1.0, 1.0)
    from gpucourse import compilation

    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            compilation.ptx(I.unary_kernel("sin", True))
        gpu_only("the PTX of a launched kernel; tests/test_stack.py asserts the same instructions without one")
    assert compilation.count_matches(compilation.ptx(I.unary_kernel("sin", True)), r"sin\.approx") >= 1
    assert compilation.count_matches(compilation.ptx(I.unary_kernel("sin", False)), r"sin\.approx") == 0


@pytest.mark.parametrize("fastmath", [False, True])
def test_divide(fastmath):
    x = gpucourse.random_array(N, np.float32, seed=2, low=-100, high=100)
    y = gpucourse.random_array(N, np.float32, seed=3, low=0.5, high=50)
    out = gpucourse.to_device(gpucourse.poisoned(N, np.float32))
    I.divide(out, gpucourse.to_device(x), gpucourse.to_device(y), fastmath=fastmath)
    got, reference = gpucourse.to_host(out), x.astype(np.float64) / y.astype(np.float64)
    if fastmath:
        assert I.ulp_error(got, reference).max() <= 2.0  # __fdividef: 2 ulp for |y| in [2**-126, 2**126]
    else:
        np.testing.assert_array_equal(got, x / y)  # IEEE division, correctly rounded, as NumPy's


@pytest.mark.parametrize("fastmath", [False, True])
def test_sine_chain(fastmath):
    n, steps = gpucourse.problem_size("ch3_math")
    host = gpucourse.random_array(n + 3, np.float32, seed=4, low=-2, high=2)
    values = gpucourse.to_device(host)
    I.sine_chain(values, steps, fastmath=fastmath)
    np.testing.assert_allclose(gpucourse.to_host(values), I.sine_chain_reference(host, steps), rtol=1e-5, atol=1e-5)
    assert I.sine_chain_operations(n, steps) == n * steps
    with pytest.raises(ValueError, match="steps"):
        I.sine_chain(values, -1)


def test_sin_cos_separate_and_together():
    x = gpucourse.random_array(N, np.float32, seed=5, low=-4, high=4)
    sines, cosines = (gpucourse.to_device(gpucourse.poisoned(N, np.float32)) for _ in range(2))
    I.sin_cos(sines, cosines, gpucourse.to_device(x), together=False)
    for got, reference in ((sines, np.sin(x.astype(np.float64))), (cosines, np.cos(x.astype(np.float64)))):
        assert I.ulp_error(gpucourse.to_host(got), reference).max() <= 2.0
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="sincosf"):
            I.sin_cos(sines, cosines, gpucourse.to_device(x), together=True)
        gpu_only("sincosf in one call (refused in the simulator, checked)")
    sines, cosines = (gpucourse.to_device(gpucourse.poisoned(N, np.float32)) for _ in range(2))
    I.sin_cos(sines, cosines, gpucourse.to_device(x), together=True)
    for got, reference in ((sines, np.sin(x.astype(np.float64))), (cosines, np.cos(x.astype(np.float64)))):
        assert I.ulp_error(gpucourse.to_host(got), reference).max() <= 2.0  # one call, no loss of precision


def operands(seed: int):
    rng = np.random.default_rng(seed)
    n = gpucourse.problem_size("ch3_rounding")[0]
    # magnitudes in [0.5, 2): float64 holds every sum and product of two such float32 exactly
    a = (rng.uniform(0.5, 2.0, n) * rng.choice([-1, 1], n)).astype(np.float32)
    b = (rng.uniform(0.5, 2.0, n) * rng.choice([-1, 1], n)).astype(np.float32)
    return a, b


@pytest.mark.parametrize("operation", ["add", "multiply"])
def test_rounded_reference_brackets_the_exact_result(operation):
    a, b = operands(6)
    reference = I.rounded_reference(a, b, operation)
    exact = a.astype(np.float64) + b if operation == "add" else a.astype(np.float64) * b
    nearest, toward_zero, up, down = reference.astype(np.float64)
    np.testing.assert_array_equal(reference[0], a + b if operation == "add" else a * b)  # NumPy rounds to nearest
    assert (down <= exact).all() and (exact <= up).all()
    assert (np.abs(toward_zero) <= np.abs(exact)).all()
    inexact = up != down
    assert inexact.any() and (up[inexact] == np.nextafter(reference[3][inexact], np.float32(np.inf))).all()


@pytest.mark.parametrize("operation", ["add", "multiply"])
def test_rounded_on_the_device(operation):
    a, b = operands(7)
    out = gpucourse.to_device(gpucourse.poisoned((4, a.size), np.float32))
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="rounding"):
            I.rounded(out, gpucourse.to_device(a), gpucourse.to_device(b), operation)
        gpu_only("the directed-rounding intrinsics (refused in the simulator, checked)")
    I.rounded(out, gpucourse.to_device(a), gpucourse.to_device(b), operation)
    np.testing.assert_array_equal(gpucourse.to_host(out), I.rounded_reference(a, b, operation))


def test_interval_sum_holds_the_exact_sum():
    values = gpucourse.random_array(gpucourse.problem_size("ch3_rounding")[1], np.float32, seed=8, low=0, high=1)
    bounds = gpucourse.to_device(gpucourse.poisoned(2, np.float32))
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature, match="fadd_rd"):
            I.interval_sum(bounds, gpucourse.to_device(values))
        gpu_only("the directed-rounding intrinsics (refused in the simulator, checked)")
    I.interval_sum(bounds, gpucourse.to_device(values))
    low, high = gpucourse.to_host(bounds).astype(np.float64)
    exact = math.fsum(values.astype(np.float64))
    assert low <= exact <= high and low < high


@pytest.mark.parametrize("split", I.BRANCHES)
def test_branches_against_numpy(split):
    n, steps = gpucourse.problem_size("ch3_divergence")
    host = gpucourse.random_array(n + 7, np.float32, seed=9, low=-1, high=1)
    values = gpucourse.to_device(host)
    I.branch(values, steps, split)
    np.testing.assert_allclose(gpucourse.to_host(values), I.branch_reference(host, steps, split), rtol=1e-5, atol=1e-6)
    x = gpucourse.to_device(gpucourse.poisoned(n + 7, np.int32))
    I.parity(x, split)
    index = np.arange(n + 7)
    expected = index % 2 if split == "by_thread" else (index // 32) % 2
    np.testing.assert_array_equal(gpucourse.to_host(x), expected)


def test_bad_arguments():
    x = gpucourse.to_device(np.zeros(64, np.float32))
    with pytest.raises(ArrayArgumentError, match="float32"):
        I.apply(gpucourse.to_device(np.zeros(64, np.float64)), x, "sin")
    with pytest.raises(KeyError, match="choose one of"):
        I.apply(x, x, "tan")
    with pytest.raises(ValueError, match="split"):
        I.branch(x, 1, "by_block")
    with pytest.raises(LaunchConfigError, match="multiple of the warp size"):
        I.branch(x, 1, "by_warp", threads_per_block=48)
    with pytest.raises(ValueError, match="operation"):
        I.rounded(gpucourse.to_device(np.zeros((4, 64), np.float32)), x, x, "divide")
    with pytest.raises(ArrayArgumentError, match=r"shape \(4, 64\)"):
        I.rounded(gpucourse.to_device(np.zeros((3, 64), np.float32)), x, x)
    with pytest.raises(ValueError, match="at least one"):
        I.interval_sum(gpucourse.to_device(np.zeros(2, np.float32)), gpucourse.to_device(np.zeros(0, np.float32)))
    with pytest.raises(ArrayArgumentError, match="int32"):
        I.parity(x)


def test_multiply_add_chain_with_compiler_switches():
    """The §3.6.2 chain: its float64 reference, and on a GPU the three NVRTC builds (contracted, not, flushing)."""
    assert I.multiply_add_chain_c_reference(np.array([0.0, 2.0], np.float32), 0.5, 1.0, 1).tolist() == [2 - 2.0**-7, 2.0]
    with pytest.raises(ValueError, match="switch"):
        I.multiply_add_chain_c_kernel("--use_fast_math")
    x = gpucourse.random_array(4096, np.float32, seed=6, low=-1, high=1)
    if mode.is_simulator():
        with pytest.raises(GPUOnlyFeature):
            I.multiply_add_chain_c(x, 0.999, 0.001, 4)
        gpu_only("NVRTC builds run with CuPy (refused in the simulator, checked)")
    import cupy

    reference = I.multiply_add_chain_c_reference(x, 0.999, 0.001, 4)
    for switch in ("defaults", "--fmad=false"):
        values = cupy.asarray(x)
        I.multiply_add_chain_c(values, 0.999, 0.001, 4, switch)
        np.testing.assert_allclose(cupy.asnumpy(values), reference, atol=1e-5)
    tiny = np.full(256, 1e-39, np.float32)  # subnormal: flushed to zero by --ftz=true, kept by the defaults
    kept, flushed = cupy.asarray(tiny), cupy.asarray(tiny)
    I.multiply_add_chain_c(kept, 0.75, 1e-39, 2)
    I.multiply_add_chain_c(flushed, 0.75, 1e-39, 2, "--ftz=true")
    assert (cupy.asnumpy(kept) > 0).all() and (cupy.asnumpy(flushed) == 0).all()
    # why the defaults are not a cupy.RawKernel: CuPy adds -ftz=true to every build, so there even no option flushes
    through_cupy, by_cupy = cupy.RawKernel(I.MULTIPLY_ADD_CHAIN_CUDA_C, "multiply_add_chain_c"), cupy.asarray(tiny)
    through_cupy((1,), (256,), (by_cupy, np.float32(0.75), np.float32(1e-39), np.int32(2), np.int64(tiny.size)))
    assert (cupy.asnumpy(by_cupy) == 0).all()


def test_flushing_is_what_the_ftz_build_does_and_only_it():
    """§3.6.2 on a GPU: on subnormal inputs the --ftz=true builds give 0 for every result (the multiply-add chain and the
    division, square root and logarithm chains), the defaults keep every result subnormal and nonzero."""
    with pytest.raises(ValueError, match="operation"):
        I.special_chain_c(None, "tangent", 1)
    if mode.is_simulator():
        pytest.skip("NVRTC builds run on a GPU only (CuPy)")
    import cupy

    elements = 1 << 20 if mode.on_gpu() else 256
    subnormal = (gpucourse.random_array(elements, np.float32, seed=8, low=1, high=2) * np.float32(1e-39)).astype(np.float32)
    chain = {switch: cupy.asarray(subnormal) for switch in ("defaults", "--ftz=true")}
    for switch, values in chain.items():
        I.multiply_add_chain_c(values, 0.75, 1e-39, 64, switch)
    kept, flushed = (cupy.asnumpy(chain[s]) for s in ("defaults", "--ftz=true"))
    assert (kept > 0).all() and (kept < np.finfo(np.float32).tiny).all(), "the defaults flushed the multiply-add chain"
    assert (flushed == 0).all(), f"--ftz=true left {int((flushed != 0).sum())} of {elements} results of the chain unflushed"
    for operation in I.SPECIAL_OPERATIONS:
        results = {}
        for switch in ("defaults", "--ftz=true"):
            values = cupy.asarray(subnormal)
            I.special_chain_c(values, operation, 64, switch)
            results[switch] = cupy.asnumpy(values)
        assert (results["defaults"] > 0).all() and (results["defaults"] < np.finfo(np.float32).tiny).all(), operation
        assert (results["--ftz=true"] == 0).all(), f"{operation}: --ftz=true left {int((results['--ftz=true'] != 0).sum())} unflushed"


def test_nvrtc_compile_says_what_to_change(monkeypatch):
    from gpucourse import compilation

    with pytest.raises(ValueError, match="sm_90"):
        compilation.nvrtc_compile(I.MULTIPLY_ADD_CHAIN_CUDA_C, "chain", (), "90")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "cupy_backends" else real(name, *rest))
    with pytest.raises(EnvironmentProblem, match="pip install cupy-cuda12x"):
        compilation.nvrtc_compile(I.MULTIPLY_ADD_CHAIN_CUDA_C, "chain", (), "compute_75")
