"""Chapter 6 checks on answers written fresh, of kinds the first tests did not have: each wrong one is named, each right one passes."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from answers_common import caught
from numba import cuda, float32
from test_checks_ch6 import BX, BY, TILE, jacobi_flat_tile, z_point_kernel

from gpucourse import finite_difference as fd
from gpucourse.checks import ch6
from gpucourse.kernels import stencil

# --- 6.1 -----------------------------------------------------------------------------------------


def taylor_matrix(order_terms):
    return np.array([[2.0 * m ** p for m in range(1, order_terms + 1)] for p in range(1, 2 * order_terms, 2)])


def fourth_order():
    """Wrong: two weights, the fourth-order stencil."""
    return np.linalg.solve(taylor_matrix(2), [1.0, 0.0])


def transposed_system():
    """Wrong: the Taylor matrix transposed (rows are the points, not the powers)."""
    return np.linalg.solve(taylor_matrix(3).T, [1.0, 0.0, 0.0])


def last_condition_set():
    """Wrong: the 1 put in the last condition instead of the first."""
    return np.linalg.solve(taylor_matrix(3), [0.0, 0.0, 1.0])


@pytest.mark.parametrize(("answer", "words"), [
    (fourth_order, ["should hold 3 numbers"]),
    (transposed_system, ["Taylor conditions", "2*sum(m c_m) should be 1"]),
    (last_condition_set, ["Taylor conditions", "2*sum(m c_m) should be 1"]),
])
def test_fresh_wrong_sixth_orders_are_named(answer, words):
    message = caught(ch6.check_sixth_order, answer)
    assert all(word in message for word in words), message


def by_vandermonde():
    """Right, another way: the odd powers from NumPy's Vandermonde matrix of 1, 2, 3."""
    powers = np.vander(np.arange(1.0, 4.0), 6, increasing=True)[:, 1::2].T  # rows m^1, m^3, m^5
    return np.linalg.solve(2 * powers, np.array([1.0, 0.0, 0.0]))


def by_cramer():
    """Right, another way: Cramer's rule with determinants."""
    matrix = taylor_matrix(3)
    rhs = np.array([1.0, 0.0, 0.0])
    whole = np.linalg.det(matrix)
    weights = []
    for column in range(3):
        replaced = matrix.copy()
        replaced[:, column] = rhs
        weights.append(np.linalg.det(replaced) / whole)
    return weights


@pytest.mark.parametrize("answer", [by_vandermonde, by_cramer])
def test_fresh_right_sixth_orders_pass(answer, capsys):
    ch6.check_sixth_order(answer)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 6.1")


# --- 6.2 -----------------------------------------------------------------------------------------


@cuda.jit
def z_march(f, df, a, b, c, d, sign, overwrite):
    i, j = cuda.grid(2)
    nz, ny, nx = f.shape
    if i < nx and j < ny:
        for k in range(nz):
            values = cuda.local.array(9, float32)
            for m in range(-4, 5):
                values[m + 4] = f[(k + sign * m) % nz, j, i]
            df[k, j, i] = a * (values[5] - values[3]) + b * (values[6] - values[2]) + c * (values[7] - values[1]) + d * (values[8] - values[0])
        if overwrite:
            f[0, j, i] = df[0, j, i]


def z_derivative(python_floats=False, behind_minus_ahead=False, overwrite=False):
    def deriv_z(f, df, coefficients):
        nz, ny, nx = f.shape
        weights = [float(w) for w in coefficients] if python_floats else list(coefficients)
        z_march[(math.ceil(nx / 16), math.ceil(ny / 4)), (16, 4)](f, df, *weights, -1 if behind_minus_ahead else 1, overwrite)
    return deriv_z


@pytest.mark.parametrize(("answer", "words"), [
    (z_derivative(overwrite=True), ["changed f in place"]),
    (z_derivative(python_floats=True), ["as `a`: Numba compiles that parameter as float64"]),
    (z_derivative(behind_minus_ahead=True), ["wrong sign", "f[z + m] - f[z - m]"]),
])
def test_fresh_wrong_z_derivatives_are_named(answer, words):
    message = caught(ch6.check_z_derivative, answer)
    assert all(word in message for word in words), message


def z_by_points(f, df, coefficients):
    nz, ny, nx = f.shape
    z_point_kernel[(math.ceil(nx / 16), math.ceil(ny / 4), math.ceil(nz / 2)), (16, 4, 2)](f, df, *coefficients)


@cuda.jit
def z_planes_by_stride(f, df, a, b, c, d):
    """Right, another way: a fixed 2D grid, grid-stride loops over (y, x), and a plane index wrapped with ifs."""
    nz, ny, nx = f.shape
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for j in range(y0, ny, sy):
        for i in range(x0, nx, sx):
            for k in range(nz):
                total = float32(0)
                for m in range(1, 5):
                    up, down = k + m, k - m
                    if up >= nz:
                        up -= nz
                    if down < 0:
                        down += nz
                    weight = a if m == 1 else b if m == 2 else c if m == 3 else d
                    total += weight * (f[up, j, i] - f[down, j, i])
                df[k, j, i] = total


def z_by_stride(f, df, coefficients):
    z_planes_by_stride[(1, 2), (32, 2)](f, df, *coefficients)


@pytest.mark.parametrize("answer", [z_by_points, z_by_stride])
def test_fresh_right_z_derivatives_pass(answer, capsys):
    ch6.check_z_derivative(answer)
    assert "\u2705 Exercise 6.2" in capsys.readouterr().out


# --- 6.3 -----------------------------------------------------------------------------------------


def tile_choice(assume_four_bytes=False, pencils_fixed=None, one_point_each=False):
    def choose_y_tile(shape, itemsize, device):
        nz, ny, nx = shape
        size = 4 if assume_four_bytes else itemsize
        pencils = pencils_fixed or (device.warp_size if nx >= device.warp_size else nx)
        length = next(n for n in range(ny, 0, -1) if ny % n == 0 and (n + 8) * pencils * size <= device.max_shared_per_block)
        rows = length if one_point_each else max(1, min(device.max_threads_per_block // pencils, length // 4))
        return stencil.AxisTile(length, pencils, min(rows, device.max_threads_per_block // pencils))
    return choose_y_tile


@pytest.mark.parametrize(("answer", "words"), [
    (tile_choice(assume_four_bytes=True), ["8-byte values", "bytes of shared memory, over the"]),
    (tile_choice(pencils_fixed=16), ["pencils = 16 is not a multiple of 32"]),
    (tile_choice(one_point_each=True), ["each thread computes 1 point(s)"]),
])
def test_fresh_wrong_tiles_are_named(answer, words):
    message = caught(ch6.check_choose_y_tile, answer)
    assert all(word in message for word in words), message


def two_points_each(shape, itemsize, device):
    """Right, another way: the smallest divisor of ny from 16 on that fits (else the largest that does), 2 points a thread."""
    nz, ny, nx = shape
    pencils = min(nx, device.warp_size)
    fits = [n for n in range(2, ny + 1) if ny % n == 0 and (n + 8) * pencils * itemsize <= device.max_shared_per_block]
    length = next((n for n in fits if n >= 16), fits[-1])
    rows = max(1, min(length // 2, device.max_threads_per_block // pencils))
    return (length, pencils, rows)


def from_a_budget(shape, itemsize, device):
    """Right, another way: the shared-memory budget gives the longest length, then the largest divisor of ny below it."""
    nz, ny, nx = shape
    pencils = device.warp_size if nx >= device.warp_size else nx
    longest = device.max_shared_per_block // (pencils * itemsize) - 8
    length = max(n for n in range(1, min(ny, longest) + 1) if ny % n == 0)
    rows = max(1, min(8, length // 3))
    return dataclasses.astuple(stencil.AxisTile(length, pencils, rows))


@pytest.mark.parametrize("answer", [two_points_each, from_a_budget])
def test_fresh_right_tiles_pass(answer, capsys):
    ch6.check_choose_y_tile(answer)
    assert "\u2705 Exercise 6.3" in capsys.readouterr().out


# --- 6.4 -----------------------------------------------------------------------------------------


@cuda.jit(device=True)
def two_steps_from_local_values(u, j, i, d, four):
    """Two explicit steps at the interior point (j, i): the first step at it and at its north, west, east and south
    neighbours in a local array (a boundary neighbour keeps its value), then the second step from them."""
    ny, nx = u.shape
    first = cuda.local.array(5, float32)
    for n in range(5):
        jj = j + (0, -1, 0, 0, 1)[n]
        ii = i + (0, 0, -1, 1, 0)[n]
        v = u[jj, ii]
        if 0 < ii < nx - 1 and 0 < jj < ny - 1:
            v = v + d * ((((u[jj - 1, ii] + u[jj, ii - 1]) + u[jj, ii + 1]) + u[jj + 1, ii]) - four * v)
        first[n] = v
    return first[0] + d * ((((first[1] + first[2]) + first[3]) + first[4]) - four * first[0])


@cuda.jit
def heat_inline(u, u_new, d, four, twice_d_once, write_back):
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if i < nx and j < ny:
        x = u[j, i]
        if 0 < i < nx - 1 and 0 < j < ny - 1:
            if twice_d_once:
                x = x + (d + d) * ((((u[j - 1, i] + u[j, i - 1]) + u[j, i + 1]) + u[j + 1, i]) - four * x)
            else:
                x = two_steps_from_local_values(u, j, i, d, four)
        u_new[j, i] = x
        if write_back:
            u[j, i] = x


def heat(python_d=False, twice_d_once=False, write_back=False):
    def heat_two_steps(u, u_new, d):
        ny, nx = u.shape
        heat_inline[(math.ceil(nx / 16), math.ceil(ny / 8)), (16, 8)](u, u_new, d if python_d else np.float32(d), np.float32(4),
                                                                        twice_d_once, write_back)
    return heat_two_steps


@pytest.mark.parametrize(("answer", "words"), [
    (heat(write_back=True), ["changed u in place"]),
    (heat(python_d=True), ["0.2", "as `d`: Numba compiles that parameter as float64"]),
    (heat(twice_d_once=True), ["ONE step with twice d"]),
])
def test_fresh_wrong_heat_steps_are_named(answer, words):
    message = caught(ch6.check_two_heat_steps, answer)
    assert all(word in message for word in words), message


def heat_inline_right(u, u_new, d):
    """Right, another way: the five first-step values in a local array, in a device function."""
    heat(python_d=False)(u, u_new, d)


@cuda.jit
def heat_strided(u, u_new, d, four):
    """Right, another way: a fixed grid and 2D grid-stride loops; the first step at a point as a nested helper expression."""
    ny, nx = u.shape
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for j in range(y0, ny, sy):
        for i in range(x0, nx, sx):
            if 0 < i < nx - 1 and 0 < j < ny - 1:
                c = u[j, i]
                if 1 < i < nx - 2 and 1 < j < ny - 2:
                    cn = u[j - 1, i] + d * ((((u[j - 2, i] + u[j - 1, i - 1]) + u[j - 1, i + 1]) + u[j, i]) - four * u[j - 1, i])
                    cw = u[j, i - 1] + d * ((((u[j - 1, i - 1] + u[j, i - 2]) + u[j, i]) + u[j + 1, i - 1]) - four * u[j, i - 1])
                    ce = u[j, i + 1] + d * ((((u[j - 1, i + 1] + u[j, i]) + u[j, i + 2]) + u[j + 1, i + 1]) - four * u[j, i + 1])
                    cs = u[j + 1, i] + d * ((((u[j, i] + u[j + 1, i - 1]) + u[j + 1, i + 1]) + u[j + 2, i]) - four * u[j + 1, i])
                    cc = c + d * ((((u[j - 1, i] + u[j, i - 1]) + u[j, i + 1]) + u[j + 1, i]) - four * c)
                    u_new[j, i] = cc + d * ((((cn + cw) + ce) + cs) - four * cc)
                else:  # next to the boundary: the boundary's values stay, so only the inner neighbours move
                    u_new[j, i] = two_steps_from_local_values(u, j, i, d, four)
            else:
                u_new[j, i] = u[j, i]


def heat_by_stride(u, u_new, d):
    heat_strided[(1, 1), (8, 8)](u, u_new, np.float32(d), np.float32(4))


@pytest.mark.parametrize("answer", [heat_inline_right, heat_by_stride])
def test_fresh_right_heat_steps_pass(answer, capsys):
    ch6.check_two_heat_steps(answer)
    assert "\u2705 Exercise 6.4" in capsys.readouterr().out


# --- 6.5 -----------------------------------------------------------------------------------------


def weights8():
    return np.array([float(c) for c in fd.exact_central_coefficients(4)])


def stretched(dtype=np.float32, last_point_one=False, reversed_rows=False):
    def stretched_coefficients(n, alpha):
        s = np.arange(n) / (n - 1 if last_point_one else n)
        ds_dx = (1 - alpha / 2) / (1 - alpha * np.sin(2 * np.pi * s) ** 2)
        out = (weights8()[:, None] * n * ds_dx[None, :]).astype(dtype)
        return out[::-1] if reversed_rows else out
    return stretched_coefficients


@pytest.mark.parametrize(("answer", "words"), [
    (stretched(dtype=np.float64), ["dtype float64", "float32"]),
    (stretched(last_point_one=True), ["s_i = i / (n - 1)", "periodic"]),
    (stretched(reversed_rows=True), ["reverse order"]),
])
def test_fresh_wrong_stretched_weights_are_named(answer, words):
    message = caught(ch6.check_stretched_coefficients, answer)
    assert all(word in message for word in words), message


def stretched_by_outer(n, alpha):
    """Right, another way: np.outer of the weights over ds = 1/n and the chain rule's factor."""
    s = np.linspace(0.0, 1.0, n, endpoint=False)
    return np.outer(weights8() / (1 / n), (1 - alpha / 2) / (1 - alpha * np.sin(2 * np.pi * s) ** 2)).astype(np.float32)


def stretched_by_loops(n, alpha):
    """Right, another way: exact fractions for the weights, a loop over the points."""
    out = np.empty((4, n), np.float32)
    for i in range(n):
        factor = (1 - alpha / 2) / (1 - alpha * math.sin(2 * math.pi * i / n) ** 2)
        for m, weight in enumerate((Fraction(4, 5), Fraction(-1, 5), Fraction(4, 105), Fraction(-1, 280))):
            out[m, i] = float(weight) * n * factor
    return out


@pytest.mark.parametrize("answer", [stretched_by_outer, stretched_by_loops])
def test_fresh_right_stretched_weights_pass(answer, capsys):
    ch6.check_stretched_coefficients(answer)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 6.5")


# --- 6.6 -----------------------------------------------------------------------------------------

EDGE, CORNER = np.float32(0.2), np.float32(0.05)


@cuda.jit
def copy_back(a, a_new):
    """A mistake after a right sweep: the result copied back into the input."""
    i, j = cuda.grid(2)
    if j < a.shape[0] and i < a.shape[1]:
        a[j, i] = a_new[j, i]


def jacobi(blocks_rounded_down=False, block=(BX, BY), write_back=False):
    def jacobi_sweep(a, a_new):
        ny, nx = a.shape
        grid = ((nx - 2) // BX, (ny - 2) // BY) if blocks_rounded_down else (math.ceil(nx / block[0]), math.ceil(ny / block[1]))
        jacobi_flat_tile[grid, block](a, a_new, EDGE, CORNER)
        if write_back:
            copy_back[grid, block](a, a_new)
    return jacobi_sweep


@pytest.mark.parametrize(("answer", "words"), [
    (jacobi(write_back=True), ["changed a in place"]),
    (jacobi(blocks_rounded_down=True), ["never written", "rounding the blocks up"]),
    (jacobi(block=(16, 16)), ["16 x 16", "32 x 8"]),
])
def test_fresh_wrong_jacobi_sweeps_are_named(answer, words):
    message = caught(ch6.check_jacobi_sweep, answer)
    assert all(word in message for word in words), message


@cuda.jit
def jacobi_edges_apart(a, a_new, edge, corner):
    """Right, another way: each thread loads its own point, then the threads at the block's edges load the halo rows,
    columns and corners."""
    t = cuda.shared.array(TILE, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    ny, nx = a.shape
    i, j = cuda.blockIdx.x * BX + tx, cuda.blockIdx.y * BY + ty  # the mesh point of the tile's interior slot
    for dr, dc, on in ((0, 0, True), (-1, 0, ty == 0), (1, 0, ty == BY - 1), (0, -1, tx == 0), (0, 1, tx == BX - 1),
                       (-1, -1, tx == 0 and ty == 0), (-1, 1, tx == BX - 1 and ty == 0), (1, -1, tx == 0 and ty == BY - 1),
                       (1, 1, tx == BX - 1 and ty == BY - 1)):
        y, x = j - 1 + dr, i - 1 + dc
        if on and 0 <= y < ny and 0 <= x < nx:
            t[ty + 1 + dr, tx + 1 + dc] = a[y, x]
    cuda.syncthreads()
    x, y = i - 1, j - 1
    if 0 < x < nx - 1 and 0 < y < ny - 1:
        r, c = ty + 1, tx + 1
        a_new[y, x] = (edge * (((t[r + 1, c] + t[r, c - 1]) + t[r, c + 1]) + t[r - 1, c])
                       + corner * (((t[r - 1, c - 1] + t[r - 1, c + 1]) + t[r + 1, c - 1]) + t[r + 1, c + 1]))


def jacobi_by_edges(a, a_new):
    ny, nx = a.shape
    jacobi_edges_apart[(math.ceil(nx / BX), math.ceil(ny / BY)), (BX, BY)](a, a_new, EDGE, CORNER)


@pytest.mark.parametrize("answer", [jacobi(), jacobi_by_edges])
def test_fresh_right_jacobi_sweeps_pass(answer, capsys):
    ch6.check_jacobi_sweep(answer)
    assert "\u2705 Exercise 6.6" in capsys.readouterr().out


def test_a_failed_replay_leaves_no_traceback_in_the_success_line(monkeypatch, capsys):
    """On a GPU a replay that fails in its simulator process brings back that process's traceback: the ✅ line keeps its error only."""
    from gpucourse.checks import evidence
    from gpucourse.checks.trace import ReplayError

    def failed_replay(*args, **kwargs):
        raise ReplayError('the replay in the simulator failed: Traceback (most recent call last):\n  File "<replay>", line 3, in '
                          "<module>\n    rebuild()\nValueError: cannot rebuild 'jacobi_sweep'\n")

    monkeypatch.setattr(evidence, "traced_run", failed_replay)
    ch6.check_jacobi_sweep(jacobi())
    line = capsys.readouterr().out
    assert line.startswith("\u2705 Exercise 6.6") and "Traceback" not in line, line
    assert "could not be traced: the replay in the simulator failed: ValueError: cannot rebuild 'jacobi_sweep')" in line, line
