"""Plans, bound kernels, the launchers' plan caches, stream ordering and CUDA graphs, in both modes."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import gpu_only

import gpucourse
from gpucourse import graphs, launch, mode
from gpucourse.errors import ArrayArgumentError, CaptureError, PlanMismatch
from gpucourse.kernels import heat, intro, stencil, transpose

N = gpucourse.problem_size("ch3_test_elements")


def device_zeros(shape, dtype=np.float32):
    return gpucourse.to_device(np.zeros(shape, dtype))


def test_a_plan_launches_on_its_arrays_and_on_others_of_the_same_spec():
    a, b = device_zeros(N), device_zeros(N)
    plan = intro.increment.plan(a, 1.0)
    plan()
    plan()
    plan(b)
    assert np.all(gpucourse.to_host(a) == 2) and np.all(gpucourse.to_host(b) == 1)
    assert plan.kernel_names == ("increment_kernel",)


@pytest.mark.parametrize(
    "other, words",
    [((N + 1,), "shape (" + str(N + 1)), ((N,), "float64")],
    ids=["another shape", "another dtype"],
)
def test_a_plan_refuses_arrays_of_another_spec(other, words):
    plan = intro.increment.plan(device_zeros(N), 1.0)
    dtype = np.float64 if "float64" in words else np.float32
    with pytest.raises(PlanMismatch, match="make another plan") as caught:
        plan(device_zeros(other, dtype))
    assert words in str(caught.value) and f"shape ({N},)" in str(caught.value)
    with pytest.raises(PlanMismatch, match="1 array argument"):
        plan(device_zeros(N), device_zeros(N))


def test_a_derivative_plan_refuses_another_grid():
    shape = gpucourse.problem_size("ch6_test_shape")
    f, df = device_zeros(shape), device_zeros(shape)
    c = stencil.coefficients_for(np.zeros(1, np.float32), 0.1)
    plan = stencil.derivative.plan(f, df, "z", c)
    smaller = tuple(n - 1 for n in shape)
    with pytest.raises(PlanMismatch, match="was made for a float32 array of shape"):
        plan(device_zeros(smaller), device_zeros(smaller))


def test_the_launcher_checks_once_and_keeps_one_plan_per_argument_set():
    a, b = device_zeros(N), device_zeros(N)
    intro.increment.clear()
    for _ in range(3):
        intro.increment(a, 1.0)
    assert intro.increment.plans_made == 1
    intro.increment(b, 1.0)
    intro.increment(a, 2.0)  # another scalar: another plan
    assert intro.increment.plans_made == 3
    assert np.all(gpucourse.to_host(a) == 5) and np.all(gpucourse.to_host(b) == 1)
    with pytest.raises(ArrayArgumentError):  # a bad call makes no plan
        intro.increment(device_zeros((4, 4)), 1.0)
    assert intro.increment.plans_made == 3


def test_host_arrays_are_refused_with_a_fix():
    host = np.zeros(32, np.float32)
    if mode.is_simulator():  # the simulator's device arrays are NumPy arrays: binding one is right there
        launch.bind(intro.increment_kernel, 1, 32, host, np.float32(1)).launch()
        assert np.all(host == 1)
        gpu_only("the refusal of host arrays (the simulator's device arrays are NumPy arrays: binding one is right there, checked)")
    with pytest.raises(ArrayArgumentError, match="to_device"):
        launch.bind(intro.increment_kernel, 1, 32, host, np.float32(1))


def test_plans_own_the_scratch_they_allocate():
    shape = gpucourse.problem_size("ch6_test_shape")
    host = gpucourse.random_array(shape, np.float32, seed=3)
    f, df = gpucourse.to_device(host), gpucourse.to_device(gpucourse.poisoned(shape, np.float32))
    c = stencil.coefficients_for(host, 0.1)
    tile = stencil.XTile(threads_x=4, pencils=4, rows=4)
    plan = stencil.deriv_transposed.plan(f, df, "y", c, x_tile=tile, swap_tile=8, swap_rows=2)
    import gc

    gc.collect()  # the scratch arrays made by the builder must survive: the plan holds them
    plan()
    expected = gpucourse.to_device(gpucourse.poisoned(shape, np.float32))
    stencil.deriv_yz(f, expected, "y", c)
    np.testing.assert_allclose(gpucourse.to_host(df), gpucourse.to_host(expected), atol=1e-3)


def test_a_graph_replays_its_launches():
    a = device_zeros(N)
    plan = intro.increment.plan(a, 1.0)
    graph = graphs.capture(lambda: [plan() for _ in range(3)], "three increments")
    graph.replay(4)
    assert np.all(gpucourse.to_host(a) == 12)
    assert graph.simulated == mode.is_simulator()


def test_alternating_steps_through_a_graph_equal_plain_steps():
    shape = gpucourse.problem_size("ch6_heat_test")
    host = gpucourse.random_array(shape, np.float32, seed=4, low=0.0, high=1.0)
    steps = graphs.FEWEST_STEPS_FOR_A_GRAPH + 3  # a graph of the even part, then a few plain steps
    with_graph = heat.heat_run(host, steps, 0.2, graph=True)
    without = heat.heat_run(host, steps, 0.2, graph=False)
    assert np.array_equal(with_graph, without)


def test_a_capture_that_synchronizes_says_what_to_change():
    a = device_zeros(N)
    plan = intro.increment.plan(a, 1.0)

    def waits():
        plan()
        gpucourse.to_host(a)  # a copy back to the host: the host waits

    if mode.is_simulator():  # no capture in the simulator: the function is simply kept
        assert graphs.capture(waits).simulated
        gpu_only("CUDA graph capture (the simulator keeps the function, checked)")
    with pytest.raises(CaptureError, match="make the plans .* before capturing") as caught:
        graphs.capture(waits, "waiting")
    assert "to_host" in str(caught.value)


def test_streams_are_handles_and_the_simulator_has_one():
    assert launch.stream_handle(0) == 0
    if mode.is_simulator():
        a = device_zeros(N)
        intro.increment(a, 1.0, stream=7)  # any stream: the simulator runs every launch in order
        assert launch.stream_handle() == 0 and np.all(gpucourse.to_host(a) == 1)
        return
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    assert launch.stream_handle(stream) == stream.ptr
    with stream:
        assert launch.stream_handle() == stream.ptr
    with pytest.raises(TypeError, match="stream"):
        launch.stream_handle("stream 1")


def test_no_host_wait_on_the_stream_that_made_the_arrays():
    """A plan on CuPy arrays returns at once while the stream is still busy (no synchronization per call)."""
    if mode.is_simulator():
        gpu_only("CuPy streams to hold busy (the simulator has one stream, tested by test_streams_are_handles_and_the_simulator_has_one)")
    import cupy

    from gpucourse.timing import _gate_for_device

    a = cupy.zeros(N, np.float32)
    plan = intro.increment.plan(a, 1.0)
    gate = _gate_for_device(cupy.cuda.Device().id)
    stream = cupy.cuda.get_current_stream()
    gate.close(stream, 10_000.0)  # the stream is held until the gate opens
    start = time.perf_counter()
    for _ in range(10):
        plan()
        intro.increment(a, 1.0)
    seconds = time.perf_counter() - start
    gate.open()
    stream.synchronize()
    assert not gate.timed_out(), "a call waited for the stream: the gate had to time out"
    assert seconds < 1.0 and float(a[0]) == 20


def test_a_plan_called_on_another_stream_waits_for_the_last_one_on_the_device():
    if mode.is_simulator():
        gpu_only("two CuPy streams (the simulator has one, tested by test_streams_are_handles_and_the_simulator_has_one)")
    import cupy

    from gpucourse.timing import _gate_for_device

    gate = _gate_for_device(cupy.cuda.Device().id)
    producer, consumer = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    a = cupy.zeros(N, np.float32)
    a += 0  # compile CuPy's addition now: a compilation behind the closed gate could outlast it
    with producer:
        plan = intro.increment.plan(a, 1.0)  # made on the producer stream: a is ready there
        gate.close(producer, 10_000.0)
        a += 5  # queued behind the gate
    start = time.perf_counter()
    plan(stream=consumer)  # must run after `a += 5`, without the host waiting for it
    returned_after = time.perf_counter() - start
    gate.open()
    consumer.synchronize()
    assert not gate.timed_out() and returned_after < 1.0
    assert np.all(a.get() == 6), "the plan ran before the producer stream's work"


def test_transpose_through_its_plan_matches_numpy():
    rows, cols = gpucourse.problem_size("ch3_transpose_test")[0]
    host = gpucourse.random_array((rows, cols), np.float32, seed=6)
    out = gpucourse.to_device(gpucourse.poisoned((cols, rows), np.float32))
    plan = transpose.transpose.plan(out, gpucourse.to_device(host), "no_bank_conflicts", *gpucourse.problem_size("ch3_transpose_test_tile"))
    plan()
    assert np.array_equal(gpucourse.to_host(out), host.T)
