"""cuFFT through the course's plans (NumPy's FFT in the simulator): results against numpy.fft in complex128, round trips, plan reuse."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpucourse
from gpucourse import book, fft, mode
from gpucourse.errors import ArrayArgumentError
from gpucourse.graphs import capture

xp = gpucourse.array_module()
NZ, NY, NX = gpucourse.problem_size("ch7_test_shape")
MESH = gpucourse.problem_size("ch7_test_mesh")

#: float32 FFTs are accurate to a few ulps times log2 N of the largest values (complex64 eps = 1.2e-7).
TOLERANCE = {np.complex64: 2e-5, np.complex128: 1e-12, np.float32: 2e-5, np.float64: 1e-12}


def device(host):
    return xp.array(host, order="C", copy=True)  # a copy in both modes (numpy.asarray would hand back the host array itself)


def poisoned_like(shape, dtype):
    return device(gpucourse.poisoned(shape, dtype))


def assert_close(got, want, dtype, scale=None):
    got = gpucourse.to_host(got)
    assert not np.isnan(got).any(), "some outputs were never written"
    scale = scale if scale is not None else max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got.astype(np.complex128), want, rtol=0, atol=TOLERANCE[dtype] * scale)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("shape, axes", [((NY, NX), (-1,)), ((NY, NX), (0, 1)), ((NZ, NY, NX), (0, 1, 2)), ((NZ, NY, NX), (1, 2))])
def test_c2c_forward_and_round_trip(shape, axes, dtype):
    host = gpucourse.random_array(shape, dtype, seed=1)
    x = device(host)
    spectrum = poisoned_like(shape, dtype)
    fft.transform(x, spectrum, "C2C", fft.FORWARD, axes)
    assert_close(spectrum, np.fft.fftn(host.astype(np.complex128), axes=axes), dtype)
    back = poisoned_like(shape, dtype)
    fft.transform(spectrum, back, "C2C", fft.INVERSE, axes)
    points = math.prod(shape[a] for a in axes)
    assert_close(back, points * host, dtype)  # unnormalized both ways: inverse(forward(a)) = N a (book §7.1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axes", [((NY, NX), (-1,)), ((NY, NX - 1), (-1,)), ((NY, NX), (0, 1)), ((NY + 1, NX - 1), (0, 1)),
                                         ((NZ, NY, NX), (1, 2))])
def test_r2c_and_c2r_round_trip(shape, axes, dtype):
    host = gpucourse.random_array(shape, dtype, seed=2)
    x = device(host)
    spectrum = poisoned_like(fft.half_spectrum_shape(shape), fft.complex_dtype(dtype))
    fft.forward_real(x, spectrum, axes)
    assert_close(spectrum, np.fft.rfftn(host.astype(np.float64), axes=axes), dtype)
    back = poisoned_like(shape, dtype)
    fft.inverse_real(spectrum, back, axes)
    points = math.prod(shape[a] for a in axes)
    got = gpucourse.to_host(back)
    assert got.dtype == dtype
    assert_close(got, points * host, dtype)
    if mode.is_simulator():  # cuFFT may overwrite a C2R input; the simulator makes that visible
        assert np.isnan(gpucourse.to_host(spectrum)).all()


@pytest.mark.parametrize("shape, axes", [((NY, NX), (0,)), ((NZ, NY, NX), (0, 1))])
def test_strided_transforms_along_leading_axes(shape, axes):
    host = gpucourse.random_array(shape, np.complex64, seed=3)
    out = poisoned_like(shape, np.complex64)
    fft.transform(device(host), out, "C2C", fft.FORWARD, axes)
    assert_close(out, np.fft.fftn(host.astype(np.complex128), axes=axes), np.complex64)
    spec = fft.spec_for(device(host), out, "C2C", axes)
    assert spec.layout == "leading" and spec.batch == math.prod(shape[len(axes):])


def test_in_place_c2c():
    host = gpucourse.random_array(MESH, np.complex128, seed=4)
    x = device(host)
    fft.transform(x, x, "C2C", fft.FORWARD)
    assert_close(x, np.fft.fft2(host), np.complex128)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axes", [((NX,), (0,)), ((NY, NX), (-1,)), ((NY, NX - 1), (-1,)), ((NY + 1, NX - 1), (0, 1)),
                                         ((NZ, NY, NX), (1, 2))])
def test_in_place_real_transforms_in_padded_rows(shape, axes, dtype):
    """Book §7.1: R2C in place, the real rows padded to 2 (n // 2 + 1) values; then C2R back into the same buffer."""
    host = gpucourse.random_array(shape, dtype, seed=5)
    real, spectrum = fft.padded_real(shape, dtype)
    assert fft.simulated_array(real).base is not None and real.shape == tuple(shape)
    spectrum[...] = np.nan  # the padding too: the transform must not read it, and must overwrite it
    real[...] = device(host)
    fft.forward_real(real, spectrum, axes)
    assert fft.spec_for(real, spectrum, "R2C", axes).padded
    assert_close(spectrum, np.fft.rfftn(host.astype(np.float64), axes=axes), dtype)
    fft.inverse_real(spectrum, real, axes)
    points = math.prod(shape[a] for a in axes)
    assert_close(gpucourse.to_host(real), points * host, dtype)


def test_an_in_place_real_transform_needs_padded_rows():
    spectrum = xp.zeros(fft.half_spectrum_shape(MESH), np.complex64)
    unpadded = spectrum.reshape(-1).view(np.float32)[: MESH[0] * MESH[1]].reshape(MESH)  # the same memory, rows of n
    with pytest.raises(ArrayArgumentError, match=r"padded to 2 \(n // 2 \+ 1\)"):
        fft.transform(unpadded, spectrum, "R2C")
    with pytest.raises(ArrayArgumentError, match="padded"):
        fft.transform(spectrum, unpadded, "C2R", fft.INVERSE)


def test_the_book_coefficients():
    n = gpucourse.problem_size("ch7_book_points")
    x = 2 * np.pi * np.arange(n) / n
    signal = np.cos(2 * x) + np.sin(3 * x)
    for dtype in (np.complex64, np.complex128):
        out = poisoned_like((n,), dtype)
        fft.transform(device(signal.astype(dtype)), out, "C2C", fft.FORWARD)
        coefficients = gpucourse.to_host(out) / n  # the book's normalized coefficients
        expected = np.zeros(n, np.complex128)
        expected[2] = expected[-2] = book.figure("ch7_fft_c2c_coef_kp2_re").number
        expected[3] = 1j * book.figure("ch7_fft_c2c_coef_kp3_im").number
        expected[-3] = 1j * book.figure("ch7_fft_c2c_coef_km3_im").number
        np.testing.assert_allclose(coefficients, expected, atol=1e-6)
    half = poisoned_like((n // 2 + 1,), np.complex64)
    fft.forward_real(device(signal.astype(np.float32)), half)
    np.testing.assert_allclose(gpucourse.to_host(half) / n, expected[: n // 2 + 1], atol=1e-6)


def test_plan_reuse_and_slots():
    fft.clear_plans()
    shape = MESH
    first_in, first_out = fft.transform_arrays(shape, np.float32, "R2C", seed=5)
    other_in, other_out = fft.transform_arrays(shape, np.float32, "R2C", seed=6)
    plan_a = fft.transform.plan(first_in, first_out, "R2C")
    plan_b = fft.transform.plan(other_in, other_out, "R2C")
    assert plan_a.launches[0]._plan is plan_b.launches[0]._plan  # one cuFFT plan for one shape and dtype
    stats = fft.plan_statistics()
    assert (stats["made"], stats["reused"]) == (1, 1)
    plan_c = fft.transform.plan(other_in, other_out, "R2C", slot=1)  # another stream slot: its own plan (own work area)
    assert plan_c.launches[0]._plan is not plan_a.launches[0]._plan and fft.plan_statistics()["made"] == 2
    for _ in range(3):  # the launcher makes its plan once per argument set, then only launches
        fft.transform(first_in, first_out, "R2C")
    assert fft.transform.plans_made == 1
    plan_a(other_in, other_out)  # the same plan on other arrays of the same spec
    assert_close(other_out, np.fft.rfft2(gpucourse.to_host(other_in).astype(np.float64)), np.float32)
    fft.clear_plans()
    assert fft.plan_statistics() == {"made": 0, "reused": 0, "kept": 0}


def test_a_transform_in_a_graph():
    host = gpucourse.random_array(MESH, np.float64, seed=8)
    x = device(host)
    out = poisoned_like(fft.half_spectrum_shape(MESH), np.complex128)
    plan = fft.transform.plan(x, out, "R2C")
    plan()
    graph = capture(plan, "one R2C")
    out[...] = np.nan
    graph.launch()
    assert_close(out, np.fft.rfft2(host), np.float64)


def test_flops_bytes_and_layouts():
    x, out = fft.transform_arrays((64, 64), np.complex64, "C2C")
    spec = fft.spec_for(x, out, "C2C")
    assert spec.points == 4096 and spec.batch == 1 and spec.flops == 5 * 4096 * 12
    assert spec.bytes_moved == 2 * 4096 * 8
    x, out = fft.transform_arrays((8, 64), np.float64, "R2C")
    spec = fft.spec_for(x, out, "R2C", -1)
    assert spec.batch == 8 and spec.flops == 8 * 2.5 * 64 * 6 and spec.bytes_moved == 8 * 64 * 8 + 8 * 33 * 16
    x, out = fft.transform_arrays((8, 64), np.float32, "C2R")
    spec = fft.spec_for(x, out, "C2R", (0, 1))
    assert spec.real_shape == (8, 64) and spec.in_shape == (8, 33) and "C2R 8 x 64 complex64 -> float32" in spec.describe()


def test_wavenumbers_and_fast_sizes():
    np.testing.assert_allclose(fft.wavenumbers(8, 2.0), np.pi * np.array([0, 1, 2, 3, -4, -3, -2, -1]))
    np.testing.assert_allclose(fft.wavenumbers(7, 2 * np.pi), [0, 1, 2, 3, -3, -2, -1])
    np.testing.assert_allclose(fft.wavenumbers(8, 2 * np.pi, half=True), [0, 1, 2, 3, 4])
    assert [n for n in range(1, 30) if fft.is_fast_size(n)] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 16, 18, 20, 21, 24, 25, 27, 28]
    assert fft.next_fast_size(4097) == 4116 and fft.next_fast_size(4096) == 4096 and fft.next_fast_size(11) == 12
    with pytest.raises(ValueError):
        fft.next_fast_size(0)


def test_bad_arguments_say_what_to_change():
    x, out = fft.transform_arrays(MESH, np.float32, "R2C")
    with pytest.raises(ArrayArgumentError, match="has shape"):
        fft.transform(x, xp.empty(MESH, np.complex64), "R2C")
    with pytest.raises(ArrayArgumentError, match="complex64"):
        fft.transform(x, xp.empty(out.shape, np.complex128), "R2C")
    with pytest.raises(ArrayArgumentError, match="R2C transform reads float32"):
        fft.transform(out, out, "R2C")
    with pytest.raises(ArrayArgumentError, match="kind='R2C' for real data"):
        fft.transform(x, out, "C2C")
    with pytest.raises(ArrayArgumentError, match="C-contiguous"):
        fft.transform(x[:, ::2], out, "R2C")
    with pytest.raises(ArrayArgumentError, match="n // 2 \\+ 1"):
        fft.transform(out, xp.empty((MESH[0], MESH[1] + 4), np.float32), "C2R", fft.INVERSE)
    with pytest.raises(ValueError, match="must include the last axis"):
        fft.transform(x, xp.empty(MESH, np.complex64), "R2C", fft.FORWARD, (0,))
    with pytest.raises(ValueError, match="adjacent"):
        y, y_out = fft.transform_arrays((4, 4, 4), np.complex64, "C2C")
        fft.transform(y, y_out, "C2C", fft.FORWARD, (0, 2))
    with pytest.raises(ValueError, match="fixed direction"):
        fft.transform(x, out, "R2C", fft.INVERSE)
    with pytest.raises(ValueError, match="kind must be"):
        fft.transform(x, out, "R2R")
    if mode.on_gpu():
        with pytest.raises(ArrayArgumentError, match="host memory"):
            fft.transform(np.zeros(MESH, np.float32), out, "R2C")
