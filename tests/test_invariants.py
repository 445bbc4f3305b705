"""The invariants every kernel exercise's check enforces, on answers written as a student would: inputs left as they were
(device and host), the work done by a kernel the answer wrote and launched, no float64 in what is compiled (arguments,
ufunc signatures, CuPy C source), dynamic shared memory sized in bytes, an output rewritten on every call, and a kernel
that does about n² work named. The same tests run in the simulator and on a GPU (the checks' sizes follow the mode)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32
from test_checks_ch5 import tree

from gpucourse import mode
from gpucourse.arrays import to_device, to_host
from gpucourse.checks import CheckFailed, ch1, ch3_memory, ch5, ch7
from gpucourse.checks.launches import (
    c_float64_problems,
    cupy_kernel_float64_problems,
    kernel_launch_problems,
    maker_float64_problems,
    recorded_launches,
)
from gpucourse.checks.runs import call_keeping_inputs, host_round_trip_problems, run_checked
from gpucourse.checks.speed import skipped_work

# --- inputs left as they were -----------------------------------------------------------------------


@cuda.jit
def add_into_x(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        x[i] += y[i]  # accumulates into the input, then copies
        out[i] = x[i]


def add_arrays_accumulating(out, x, y, threads_per_block=256):
    add_into_x[math.ceil(out.size / threads_per_block), threads_per_block](out, x, y)


def test_an_answer_that_accumulates_into_an_input_is_named():
    with pytest.raises(CheckFailed, match=r"add_arrays_accumulating changed x in place at \d+ of \d+ element\(s\).*Write the "
                                          "result to out only"):
        ch1.check_add_arrays(add_arrays_accumulating)


@cuda.jit
def scale_in_place(out, matrix, factors):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        matrix[row, col] *= factors[row]
        out[row, col] = matrix[row, col]


def scale_rows_in_place(out, matrix, factors):
    rows, cols = out.shape
    scale_in_place[(math.ceil(cols / 16), math.ceil(rows / 8)), (16, 8)](out, matrix, factors)


def test_a_matrix_scaled_in_place_is_named():
    with pytest.raises(CheckFailed, match="scale_rows_in_place changed matrix in place"):
        ch1.check_scale_rows(scale_rows_in_place)


@cuda.jit
def divide_in_place(spectrum, out, kx_unit, ky_unit, scale):
    i, j = cuda.grid(2)
    ny, m = spectrum.shape
    if i < m and j < ny:
        row = j - ny if 2 * j > ny else j
        kx = kx_unit * np.float32(i)
        ky = ky_unit * np.float32(row)
        k2 = kx * kx + ky * ky
        if i == 0 and j == 0:
            spectrum[j, i] = np.complex64(0)
        else:
            spectrum[j, i] *= -scale / k2  # divides the caller's spectrum, then copies it
        out[j, i] = spectrum[j, i]


def poisson_divide_in_place(spectrum, out, nx, lengths):
    ny, m = spectrum.shape
    divide_in_place[(math.ceil(m / 32), math.ceil(ny / 8)), (32, 8)](
        spectrum, out, np.float32(2 * np.pi / lengths[0]), np.float32(2 * np.pi / lengths[1]), np.float32(1 / (nx * ny)))


def test_a_spectrum_divided_in_place_is_named():
    with pytest.raises(CheckFailed, match="poisson_divide_in_place changed spectrum in place"):
        ch7.check_poisson_divide(poisson_divide_in_place)


def assign_devices_emptying(hostnames, gpus_per_host):
    """4.1, written to consume its argument: right values, but the caller's list is empty afterwards."""
    devices, seen = [], {}
    while hostnames:
        host = hostnames.pop(0)
        devices.append(seen.get(host, 0) % gpus_per_host)
        seen[host] = seen.get(host, 0) + 1
    return devices


def test_a_function_that_empties_the_callers_list_is_named():
    hosts = ["node0", "node1", "node0"]
    result, problems = call_keeping_inputs(assign_devices_emptying, hosts, 2)
    assert result == [0, 0, 1]
    assert problems == ["assign_devices_emptying changed the list hostnames it was given at 3 item(s) (it had 3 items, now 0): an "
                        "input must be left as it was. Work on a copy (list(...)) if you need to change one."]
    _, problems = call_keeping_inputs(lambda hostnames, gpus: [0] * len(hostnames), ["a", "b"], 1)
    assert problems == []


def test_an_output_handed_over_poisoned_is_not_an_input():
    @cuda.jit
    def copy_and_own(out, inp, owner):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = inp[i]
            owner[i] = i

    owner = to_device(np.full(64, np.iinfo(np.int64).min, np.int64))
    run = run_checked(lambda out, inp, own: copy_and_own[1, 64](out, inp, own), (64,), np.float32, to_device(np.ones(64, np.float32)),
                      owner)
    assert run.problems == [] and np.array_equal(to_host(owner), np.arange(64))


# --- the work done by a kernel the answer wrote ---------------------------------------------------------


def add_arrays_on_the_host(out, x, y, threads_per_block=256):
    out.copy_to_device(x.copy_to_host() + y.copy_to_host())  # right values, no kernel


def scale_rows_on_the_host(out, matrix, factors):
    out[:, :] = matrix.copy_to_host() * factors.copy_to_host()[:, None]


def gpu_sum_on_the_host(x, result):
    result.copy_to_device(np.array([x.copy_to_host().astype(np.float64).sum()], np.float32))


@pytest.mark.parametrize("check, answer", [(ch1.check_add_arrays, add_arrays_on_the_host), (ch1.check_scale_rows, scale_rows_on_the_host),
                                           (ch5.check_gpu_sum, gpu_sum_on_the_host)], ids=["1.1", "1.2", "5.1"])
def test_an_answer_computed_on_the_host_is_named(check, answer):
    with pytest.raises(CheckFailed, match=r"no kernel was launched: \w+ must do its work on the GPU"):
        check(answer)


def test_only_the_courses_kernels_are_named():
    assert kernel_launch_problems([], "f")[0].startswith("no kernel was launched: f must")
    probe = to_device(np.zeros(4, np.float32))
    with recorded_launches() as launches:
        ch1._add_reference[1, 4](probe, probe, probe)
    assert "f launched only the course's own kernels (_add_reference)" in kernel_launch_problems(launches, "f")[0]
    with recorded_launches() as launches:
        add_into_x[1, 4](probe, probe, probe)
    assert kernel_launch_problems(launches, "f") == []


# --- float64 in what is compiled ---------------------------------------------------------------------------


@cuda.jit
def payoffs_sqrt_given(z, out, S, E, r, sigma, sqrt_t, T):
    i = cuda.grid(1)
    if i < z.size:
        root = float32(sqrt_t)  # cast at once: no float64 arithmetic, but a float64 parameter
        half, zero = float32(0.5), float32(0.0)
        final = S * math.exp((r - half * sigma * sigma) * T + sigma * root * z[i])
        discount = math.exp(-r * T)
        out[0, i] = discount * max(final - E, zero)
        out[1, i] = discount * max(E - final, zero)


def payoffs_python_float(z, out, S, E, r, sigma, T):
    payoffs_sqrt_given[math.ceil(z.size / 128), 128](z, out, S, E, r, sigma, math.sqrt(T), T)  # math.sqrt gives a Python float


def test_a_python_float_argument_is_a_float64_parameter():
    with pytest.raises(CheckFailed, match=r"payoffs_sqrt_given was launched with the float64 value 1\.414\d* .* as `sqrt_t`"):
        ch5.check_payoffs(payoffs_python_float)


def rel_diff_element(x, y):
    return abs(x - y) / (abs(x) + abs(y) + float32(1))


def make_ufunc_float64():
    from numba import vectorize

    return vectorize(["float64(float64, float64)"], target="cuda")(rel_diff_element)


def make_ufunc_float32():
    from numba import vectorize

    return vectorize(["float32(float32, float32)"], target="cuda")(rel_diff_element)


def make_elementwise_double_literal():
    import cupy

    return cupy.ElementwiseKernel("float32 x, float32 y", "float32 d", "d = fabsf(x - y) / (fabsf(x) + fabsf(y) + 1.0)", "rel_diff")


def make_elementwise_float():
    import cupy

    return cupy.ElementwiseKernel("float32 x, float32 y", "float32 d", "d = fabsf(x - y) / (fabsf(x) + fabsf(y) + 1.0f)", "rel_diff")


def make_reduction():
    import cupy

    return cupy.ReductionKernel("float32 d", "float32 m", "d", "max(a, b)", "m = a", "0", "largest")


def test_float64_in_a_ufunc_signature_and_in_cupy_c_source_is_named_in_both_modes():
    with pytest.raises(CheckFailed, match=r"your ufunc's signature is float64\(float64"):
        ch3_memory.check_ufunc_kernels(rel_diff_element, make_ufunc_float64, make_elementwise_float, make_reduction)
    with pytest.raises(CheckFailed, match=r"holds the literal 1\.0, a double in C.*Write 1\.0f"):
        ch3_memory.check_ufunc_kernels(rel_diff_element, make_ufunc_float32, make_elementwise_double_literal, make_reduction)
    assert maker_float64_problems(make_ufunc_float32, make_elementwise_float, make_reduction) == []


def test_c_source_and_cupy_kernel_objects_are_read_for_double():
    assert c_float64_problems("d = x * 2.5e-3f + 1", "it") == []
    assert "the literal .5" in c_float64_problems("d = x * .5", "it")[0]
    assert "uses `double`" in c_float64_problems("double t = x; d = t;", "it")[0]

    class Elementwise:  # what CuPy's ElementwiseKernel exposes
        name, in_params, out_params, operation, preamble = "k", "float32 x", "float32 d", "d = x * 0.5", ""

    assert "the operation of the CuPy kernel k holds the literal 0.5" in cupy_kernel_float64_problems(Elementwise())[0]


# --- dynamic shared memory sized in elements -------------------------------------------------------------


def block_sums_in_elements(x, partial, threads_per_block):
    tree[partial.size, threads_per_block, 0, threads_per_block](x, partial)  # elements, where bytes are meant


def test_dynamic_shared_memory_sized_in_elements_is_named():
    with pytest.raises(CheckFailed, match=r"tree is launched with \d+ bytes of dynamic shared memory .* a size in bytes, "
                                          "not in elements"):
        ch5.check_block_sums(block_sums_in_elements)


# --- an output written on every call ---------------------------------------------------------------------


def test_an_answer_that_skips_its_work_after_its_first_call_is_named():
    x = np.arange(100, dtype=np.float32)
    x_d = to_device(x)
    out = to_device(np.zeros(100, np.float32))
    calls = []

    def add_once(out, x, y):
        if not calls:
            calls.append(1)
            ch1._add_reference[1, 128](out, x, y)

    add_once(out, x_d, x_d)
    reference = lambda: ch1._add_reference[1, 128](out, x_d, x_d)  # noqa: E731
    words = skipped_work(lambda: add_once(out, x_d, x_d), reference, "add_once")
    assert words is not None and "add_once" in words
    assert skipped_work(reference, reference, "the reference") is None


# --- about n² work ------------------------------------------------------------------------------------------------


@cuda.jit
def fill_scanning_everything(out):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(out.size):  # every thread walks the whole array and keeps its own elements
        if i % stride == start:
            out[i] = 3 * i + 1


def test_a_kernel_whose_threads_scan_the_whole_array_is_named_as_n_squared():
    with pytest.raises(CheckFailed, match=r"fill_kernel does about n² work: from n = \d+ to n = \d+ the lines its threads ran grew [34]\.\d times"):
        ch1.check_fill_grid_stride(fill_scanning_everything)
    assert mode.is_simulator() or mode.on_gpu()


def test_a_copy_to_the_host_inside_a_timed_call_is_named():
    x_d = to_device(np.arange(100, dtype=np.float32))
    out = to_device(np.zeros(100, np.float32))

    def add_then_check_on_the_host(out, x, y):
        ch1._add_reference[1, 128](out, x, y)
        if not np.isfinite(out.copy_to_host()).all():  # a round trip on every call
            raise ValueError("not finite")

    problems = host_round_trip_problems(lambda: add_then_check_on_the_host(out, x_d, x_d), "add_arrays")
    assert problems and problems[0].startswith("add_arrays copies 1 device array(s) to the host on every call (of 100 elements)")
    assert host_round_trip_problems(lambda: ch1._add_reference[1, 128](out, x_d, x_d), "the reference") == []


def test_the_argument_rule_agrees_with_the_compiled_ptx():
    """On a GPU: the kernel compiled for the arguments the answer launched it with holds a float64 parameter exactly when the
    argument rule names one (the simulator has no compiler; the rule, read from the arguments, is the same in both modes)."""
    if mode.is_simulator():
        pytest.skip("PTX needs Numba's CUDA compiler (NVVM), which the simulator does not load; the argument rule runs above")
    from numba import typeof

    from gpucourse.checks.launches import float64_argument_problems

    z, out = to_device(np.ones(64, np.float32)), to_device(np.zeros((2, 64), np.float32))
    given = [np.float32(v) for v in (5.0, 4.5, 0.08, 0.3)]
    for sqrt_t, wide in ((math.sqrt(2.0), True), (np.float32(math.sqrt(2.0)), False)):
        with recorded_launches(dry=True) as launches:
            payoffs_sqrt_given[1, 64](z, out, *given, sqrt_t, np.float32(2.0))
        ptx, _ = cuda.compile_ptx_for_current_device(payoffs_sqrt_given.py_func, tuple(typeof(a) for a in launches[0].args))
        assert (".param .f64" in ptx) == wide == bool(float64_argument_problems(launches))


def test_the_work_counted_in_a_replay_is_the_work_counted_here():
    """On a GPU the lines are counted in a simulator subprocess (the launchers sent as the trace's replay sends them): the
    same counts as in this process, so that the verdict is the same in both modes."""
    from gpucourse.checks import work

    launchers = [work._one_thread_per_element(fill_scanning_everything, 64), work._one_thread_per_element(ch1._fill_reference, 64)]
    arguments = [[("traced", "out", np.zeros(n, np.int64))] for n in (64, 128)]
    replayed = work._counts_replayed(launchers, arguments)
    if mode.is_simulator():
        assert replayed == work._counts_here(launchers, arguments)
    assert replayed[0][1] > 3.5 * replayed[0][0] and replayed[1][1] == 2 * replayed[1][0]
