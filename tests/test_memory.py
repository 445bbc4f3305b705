"""Device memory given back: no launcher cache, plan, library launch or widget keeps an array past its use.

Each test makes arrays, uses them through the package as a notebook does, deletes its own names
and collects garbage: a weak reference to every array must then be dead. In the simulator the
device arrays are simulated ones (NumPy memory), held and released by the same code as on a GPU.
"""

from __future__ import annotations

import gc
import weakref

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from conftest import gpu_only  # noqa: E402

import gpucourse  # noqa: E402
from gpucourse import fft, launch, mode, widgets  # noqa: E402
from gpucourse.errors import GPUOnlyFeature  # noqa: E402
from gpucourse.kernels import coalescing, intro, laplace, metrics, stencil  # noqa: E402
from gpucourse.kernels import spectral as spectral_kernels  # noqa: E402

N = gpucourse.problem_size("ch3_test_elements")
SHAPE = gpucourse.problem_size("ch6_test_shape")


def device_zeros(shape, dtype=np.float32):
    return gpucourse.to_device(np.zeros(shape, dtype))


def collected(references) -> list[bool]:
    """After a garbage collection: for each weak reference, whether its object is gone."""
    gc.collect()
    return [reference() is None for reference in references]


def test_a_launcher_call_keeps_no_array_alive():
    a = device_zeros(N)
    intro.increment.clear()
    intro.increment(a, 1.0)
    intro.increment(a, 1.0)  # the plan is reused while the array lives
    assert intro.increment.plans_made == 1 and np.all(gpucourse.to_host(a) == 2)
    alive = weakref.ref(a)
    del a
    assert collected([alive]) == [True]
    assert intro.increment.plans_made == 0  # the plan left the cache with its array


def test_a_plan_for_a_view_lives_as_long_as_the_memory_it_views():
    """Each `a[N:]` is a new view object: the cached plan follows the allocation, not the short-lived view."""
    a = device_zeros(2 * N)
    intro.increment.clear()
    for _ in range(3):
        intro.increment(a[N:], 1.0)
    intro.increment(a[N:][: N // 2], 1.0)  # a view of a view: another address range, a plan of its own
    assert intro.increment.plans_made == 2
    expected = np.zeros(2 * N, np.float32)
    expected[N:] = 3
    expected[N : N + N // 2] = 4
    assert np.array_equal(gpucourse.to_host(a), expected)
    alive = weakref.ref(a)
    del a
    assert collected([alive]) == [True]
    assert intro.increment.plans_made == 0  # both plans left the cache with the allocation


def test_a_cached_plan_gives_its_scratch_back_with_its_arrays():
    host = gpucourse.random_array(SHAPE, np.float32, seed=3)
    f, df = gpucourse.to_device(host), gpucourse.to_device(gpucourse.poisoned(SHAPE, np.float32))
    c = stencil.coefficients_for(host, 0.1)
    tile = stencil.XTile(threads_x=4, pencils=4, rows=4)
    stencil.deriv_transposed.clear()
    stencil.deriv_transposed(f, df, "y", c, x_tile=tile, swap_tile=8, swap_rows=2)
    (plan,) = stencil.deriv_transposed._plans.values()
    scratch = [weakref.ref(array) for array in plan._owned]
    assert len(scratch) == 2
    del plan
    assert collected(scratch) == [False, False]  # in use: the plan launches on it while f and df live
    expected = gpucourse.to_device(gpucourse.poisoned(SHAPE, np.float32))
    stencil.deriv_yz(f, expected, "y", c)
    np.testing.assert_allclose(gpucourse.to_host(df), gpucourse.to_host(expected), atol=1e-3)
    arrays = [weakref.ref(f), weakref.ref(df)]
    del f, df
    assert collected(arrays + scratch) == [True] * 4
    assert stencil.deriv_transposed.plans_made == 0


def test_arrays_passed_in_a_tuple_are_not_kept():
    """Chapter 6's transposed derivative with its work pair passed in (the pair once stayed in the cache on a GPU)."""
    host = gpucourse.random_array(SHAPE, np.float32, seed=4)
    f, df = gpucourse.to_device(host), gpucourse.to_device(gpucourse.poisoned(SHAPE, np.float32))
    work = stencil.transpose_work(f, "z")
    tile = stencil.XTile(threads_x=4, pencils=4, rows=4)
    stencil.deriv_transposed(f, df, "z", stencil.coefficients_for(host, 0.1), work, x_tile=tile, swap_tile=8, swap_rows=2)
    references = [weakref.ref(a) for a in (f, df, *work)]
    del f, df, work
    assert collected(references) == [True] * 4


def test_a_composite_launcher_keeps_neither_arrays_nor_views():
    n = gpucourse.problem_size("ch2_test")
    out, inp = device_zeros(n), gpucourse.to_device(gpucourse.random_array(n, np.float32, seed=1))
    metrics.copy_variant(out, inp, 32, 1, 16)  # views of both arrays as complex128, bound in the plan
    assert np.array_equal(gpucourse.to_host(out), gpucourse.to_host(inp))
    arrays = [weakref.ref(out), weakref.ref(inp)]
    del out, inp
    assert collected(arrays) == [True, True]


class Holder:
    """An object that is not a value (hashed by identity) and holds an array, as a texture reader does."""

    def __init__(self, array) -> None:
        self.array = array


@launch.planned
def increment_held(holder: Holder, amount: float):
    """A plan builder that takes an object holding its array."""
    return launch.bind(intro.increment_kernel, gpucourse.validate.blocks_to_cover(N, 32), 32, holder.array, np.float32(amount))


def test_an_object_argument_is_known_by_identity_and_not_kept():
    holder = Holder(device_zeros(N))
    increment_held(holder, 1.0)
    increment_held(holder, 1.0)
    assert increment_held.plans_made == 1 and np.all(gpucourse.to_host(holder.array) == 2)
    references = [weakref.ref(holder), weakref.ref(holder.array)]
    del holder
    assert collected(references) == [True, True]
    assert increment_held.plans_made == 0
    other = Holder(device_zeros(N))  # a new object may reuse the old one's id: it gets a plan of its own
    increment_held(other, 3.0)
    assert np.all(gpucourse.to_host(other.array) == 3)


def test_a_plan_the_caller_holds_keeps_its_arrays_until_it_goes():
    a = device_zeros(N)
    plan = intro.increment.plan(a, 1.0)
    alive = weakref.ref(a)
    del a
    assert collected([alive]) == [False]
    plan()
    assert np.all(gpucourse.to_host(alive()) == 1)
    del plan
    assert collected([alive]) == [True]


def test_unowned_views_share_the_memory_and_hold_nothing():
    a = gpucourse.to_device(np.arange(N, dtype=np.float32))
    view = launch.unowned(a)
    assert tuple(view.shape) == (N,) and launch.array_spec(view)[1:] == launch.array_spec(a)[1:]
    assert np.array_equal(gpucourse.to_host(view), np.arange(N, dtype=np.float32))
    assert launch.unowned(3.0) == 3.0 and launch.unowned("C2C") == "C2C"
    intro.increment(view, 1.0)  # the view writes the same memory
    assert np.array_equal(gpucourse.to_host(a), np.arange(N, dtype=np.float32) + 1)
    alive = weakref.ref(a)
    if mode.is_simulator():
        assert view._ary.base is not a._ary and np.shares_memory(view._ary, a._ary)  # the same memory, not kept
    else:
        assert view.data.mem._owner is None  # a CuPy view with no owner: the caller keeps the memory alive
    del a
    assert collected([alive]) == [True]


def test_a_transform_keeps_neither_its_arrays_nor_its_cufft_plan():
    fft.clear_plans()
    x, out = fft.transform_arrays((32, 32), np.float32, "R2C", seed=1)
    fft.forward_real(x, out)
    np.testing.assert_allclose(gpucourse.to_host(out), np.fft.rfft2(gpucourse.to_host(x)), rtol=1e-4, atol=1e-3)
    assert fft.plan_statistics() == {"made": 1, "reused": 0, "kept": 1}
    arrays = [weakref.ref(x), weakref.ref(out)]
    del x, out
    assert collected(arrays) == [True, True]
    assert fft.plan_statistics()["kept"] == 0  # the cuFFT plan and its work area went with the last transform using it
    held = fft.transform.plan(*fft.transform_arrays((32, 32), np.float32, "R2C", seed=2), "R2C")
    assert fft.plan_statistics()["kept"] == 1  # a plan the caller holds keeps its cuFFT plan
    del held
    gc.collect()
    assert fft.plan_statistics()["kept"] == 0


def test_cupy_kernel_and_elementwise_launches_hold_arrays_by_address():
    a = gpucourse.to_device(gpucourse.random_array((64, 96), np.float32, seed=7))
    a_new = device_zeros((64, 96))
    spectrum = gpucourse.to_device(gpucourse.random_array((16, 9), np.complex64, seed=8))
    try:
        laplace.jacobi_readonly(a, a_new)
    except GPUOnlyFeature:
        assert mode.is_simulator()  # CuPy kernels need a GPU; the simulator's launches are tested above
        with pytest.raises(GPUOnlyFeature):
            spectral_kernels.poisson_elementwise(spectrum, 16)
        gpu_only("CuPy kernels to hold arrays (refused in the simulator, checked)")
    spectral_kernels.poisson_elementwise(spectrum, 16)
    references = [weakref.ref(a), weakref.ref(a_new), weakref.ref(spectrum)]
    del a, a_new, spectrum
    assert collected(references) == [True, True, True]
    assert laplace.jacobi_readonly.plans_made == 0 and spectral_kernels.poisson_elementwise.plans_made == 0


def test_a_widget_does_not_keep_its_tuner_or_the_arrays(capsys):
    n = gpucourse.problem_size("ch2_test")
    out, inp = device_zeros(n), gpucourse.to_device(gpucourse.random_array(n, np.float32, seed=1))
    tuner = widgets.block_size_tuner(metrics.copy_variant, out, inp, bytes_moved=8 * n, name="copy", largest=64)
    tuner.repeat, tuner.warmup = 1, 0
    box = tuner.widget()
    box.tuner_controls["threads_per_block"].value = 64  # the widget measures while its tuner lives
    assert tuner.calls_made == 2
    references = [weakref.ref(tuner), weakref.ref(out), weakref.ref(inp)]
    del tuner, out, inp
    assert collected(references) == [True, True, True]
    capsys.readouterr()
    box.tuner_controls["threads_per_block"].value = 32  # the widget, kept by ipywidgets, says what happened
    shown = "".join(item.get("text", "") for item in box.tuner_output.outputs) + capsys.readouterr().out  # no front end: stdout
    assert widgets.GONE in shown
    box.close()
    plt.close("all")


def test_the_coalescing_tuner_gives_its_arrays_back():
    tuner = coalescing.coalescing_tuner("stride", 64, [1, 2], 32, repeat=1)
    tuner.warmup = 0
    box = tuner.widget()
    kept = next(cell.cell_contents for cell in tuner.make_call.__closure__ if isinstance(cell.cell_contents, coalescing.CoalescingArrays))
    references = [weakref.ref(array) for array in kept.arrays.values()]
    del tuner, kept
    assert collected(references) == [True, True]
    box.close()
    plt.close("all")
