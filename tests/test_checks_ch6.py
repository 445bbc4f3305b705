"""Chapter 6 exercise checks: right answers pass, each usual mistake fails with a message that names it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import finite_difference as fd
from gpucourse.checks import CheckFailed, ch6
from gpucourse.kernels import stencil

# --- 6.1 -----------------------------------------------------------------------------------------


def test_sixth_order():
    ch6.check_sixth_order(lambda: fd.central_coefficients(3))
    with pytest.raises(CheckFailed, match="twice"):
        ch6.check_sixth_order(lambda: 2 * fd.central_coefficients(3))
    with pytest.raises(CheckFailed, match="wrong sign"):
        ch6.check_sixth_order(lambda: -fd.central_coefficients(3))
    with pytest.raises(CheckFailed, match="Taylor conditions"):
        ch6.check_sixth_order(lambda: (0.75, -0.15, 0.02))
    with pytest.raises(CheckFailed, match="3 numbers"):
        ch6.check_sixth_order(lambda: fd.central_coefficients(4))


# --- 6.2 -----------------------------------------------------------------------------------------


@cuda.jit
def z_column_kernel(f, df, a, b, c, d, axis, wrap_ends):
    i, j = cuda.grid(2)
    nz, ny, nx = f.shape
    if i < nx and j < ny:
        for k in range(nz):
            total = float32(0)
            for m, w in ((1, a), (2, b), (3, c), (4, d)):
                up, down = k + m, k - m
                if wrap_ends:
                    up = up - nz if up >= nz else up
                    down = down + nz if down < 0 else down
                else:  # a typical mistake: clamp at the ends instead of wrapping
                    up = min(up, nz - 1)
                    down = max(down, 0)
                total += w * (f[up, j, i] - f[down, j, i])
            df[k, j, i] = total


@cuda.jit
def y_kernel(f, df, a, b, c, d):
    i, k = cuda.grid(2)
    nz, ny, nx = f.shape
    if i < nx and k < nz:
        for j in range(ny):
            total = float32(0)
            for m, w in ((1, a), (2, b), (3, c), (4, d)):
                total += w * (f[k, (j + m) % ny, i] - f[k, (j - m) % ny, i])
            df[k, j, i] = total


def z_launcher(wrap_ends=True, columns=None):
    def deriv_z(f, df, coefficients):
        nz, ny, nx = f.shape
        blocks = columns or (math.ceil(nx / 8), math.ceil(ny / 4))
        z_column_kernel[blocks, (8, 4)](f, df, *coefficients, 0, wrap_ends)
    return deriv_z


def test_z_derivative():
    ch6.check_z_derivative(z_launcher())
    with pytest.raises(Exception, match="C-contiguous"):  # the check hands out a strided view: the package's z kernels refuse it
        ch6.check_z_derivative(lambda f, df, c: stencil.deriv_yz_registers(f, df, "z", c, chunk=f.shape[0], pencils=8, rows=1))
    with pytest.raises(CheckFailed, match="wrap around"):
        ch6.check_z_derivative(z_launcher(wrap_ends=False))
    with pytest.raises(CheckFailed, match="never written"):
        ch6.check_z_derivative(z_launcher(columns=(1, 1)))
    with pytest.raises(CheckFailed, match="along y"):
        ch6.check_z_derivative(lambda f, df, c: y_kernel[(math.ceil(f.shape[2] / 8), math.ceil(f.shape[0] / 4)), (8, 4)](f, df, *c))
    with pytest.raises(CheckFailed, match="1/h"):
        ch6.check_z_derivative(lambda f, df, c: z_launcher()(f, df, tuple(np.float32(v * f.shape[0]) for v in c)))


@cuda.jit
def z_kernel_y_fastest(f, df, a, b, c, d):
    j, i = cuda.grid(2)  # x, the fastest thread index, walks y: a warp's reads are a whole row apart
    nz, ny, nx = f.shape
    if i < nx and j < ny:
        for k in range(nz):
            total = float32(0)
            for m, w in ((1, a), (2, b), (3, c), (4, d)):
                total += w * (f[(k + m) % nz, j, i] - f[(k - m) % nz, j, i])
            df[k, j, i] = total


@cuda.jit
def z_kernel_float64(f, df, a, b, c, d):
    i, j = cuda.grid(2)
    nz, ny, nx = f.shape
    if i < nx and j < ny:
        for k in range(nz):
            total = 0.0  # a float64 accumulator: every addition is float64
            for m, w in ((1, a), (2, b), (3, c), (4, d)):
                total += w * (f[(k + m) % nz, j, i] - f[(k - m) % nz, j, i])
            df[k, j, i] = total


def test_z_derivative_pattern_and_float64():
    with pytest.raises(CheckFailed, match="reads of f are not coalesced"):
        ch6.check_z_derivative(lambda f, df, c: z_kernel_y_fastest[(math.ceil(f.shape[1] / 8), math.ceil(f.shape[2] / 4)), (8, 4)](f, df, *c))
    with pytest.raises(CheckFailed, match="float64"):
        ch6.check_z_derivative(lambda f, df, c: z_kernel_float64[(math.ceil(f.shape[2] / 8), math.ceil(f.shape[1] / 4)), (8, 4)](f, df, *c))


# --- 6.3 -----------------------------------------------------------------------------------------


def good_tile(shape, itemsize, device):
    nz, ny, nx = shape
    pencils = device.warp_size if nx >= device.warp_size else nx
    length = next(n for n in range(ny, 1, -1) if ny % n == 0 and (n + 8) * pencils * itemsize <= device.max_shared_per_block)
    return stencil.AxisTile(length, pencils, max(1, min(device.max_threads_per_block // pencils, length // 4)))


def test_choose_y_tile():
    ch6.check_choose_y_tile(good_tile)
    ch6.check_choose_y_tile(lambda s, i, d: tuple(dataclass_fields(good_tile(s, i, d))))
    with pytest.raises(CheckFailed, match="multiple of 32"):
        ch6.check_choose_y_tile(lambda s, i, d: stencil.AxisTile(good_tile(s, i, d).length, 4, 4) if s[2] >= 32 else good_tile(s, i, d))
    with pytest.raises(CheckFailed, match="shared memory"):
        ch6.check_choose_y_tile(lambda s, i, d: stencil.AxisTile(s[1], good_tile(s, i, d).pencils, 8))
    with pytest.raises(CheckFailed, match="threads per block"):
        ch6.check_choose_y_tile(lambda s, i, d: stencil.AxisTile(good_tile(s, i, d).length, good_tile(s, i, d).pencils, 64))
    with pytest.raises(CheckFailed, match="several"):
        ch6.check_choose_y_tile(lambda s, i, d: stencil.AxisTile(good_tile(s, i, d).length, good_tile(s, i, d).pencils,
                                                                 good_tile(s, i, d).length))
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        ch6.check_choose_y_tile(lambda s, i, d: 1 // 0)
    with pytest.raises(CheckFailed, match="must divide"):
        ch6.check_choose_y_tile(lambda s, i, d: stencil.AxisTile(good_tile(s, i, d).length - 1, good_tile(s, i, d).pencils, 1))


def dataclass_fields(tile):
    return (tile.length, tile.pencils, tile.rows)


# --- 6.4 -----------------------------------------------------------------------------------------


@cuda.jit(device=True)
def one_step_at(u, j, i, d, four, fix_boundary):
    ny, nx = u.shape
    x = u[j, i]
    if (0 < i < nx - 1 and 0 < j < ny - 1) or not fix_boundary:  # the mistake: boundary points move in the first step
        x = x + d * ((((u[(j - 1) % ny, i] + u[j, (i - 1) % nx]) + u[j, (i + 1) % nx]) + u[(j + 1) % ny, i]) - four * x)
    return x


@cuda.jit
def two_steps_kernel(u, u_new, d, four, steps, fix_boundary, move_boundary):
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if i < nx and j < ny:
        x = u[j, i]
        if 0 < i < nx - 1 and 0 < j < ny - 1:
            centre = one_step_at(u, j, i, d, four, fix_boundary)
            if steps == 2:
                x = centre + d * ((((one_step_at(u, j - 1, i, d, four, fix_boundary) + one_step_at(u, j, i - 1, d, four, fix_boundary))
                                    + one_step_at(u, j, i + 1, d, four, fix_boundary)) + one_step_at(u, j + 1, i, d, four, fix_boundary))
                                  - four * centre)
            else:
                x = centre
        elif move_boundary:
            x = x + d
        u_new[j, i] = x


def two_steps(steps=2, fix_boundary=True, move_boundary=False):
    def heat_two_steps(u, u_new, d):
        ny, nx = u.shape
        two_steps_kernel[(math.ceil(nx / 8), math.ceil(ny / 8)), (8, 8)](u, u_new, np.float32(d), np.float32(4), steps, fix_boundary,
                                                                          move_boundary)
    return heat_two_steps


def test_two_heat_steps():
    ch6.check_two_heat_steps(two_steps())
    with pytest.raises(CheckFailed, match="one step ahead"):
        ch6.check_two_heat_steps(two_steps(steps=1))
    with pytest.raises(CheckFailed, match="boundary points changed"):
        ch6.check_two_heat_steps(two_steps(move_boundary=True))
    with pytest.raises(CheckFailed, match="next to the boundary"):
        ch6.check_two_heat_steps(two_steps(fix_boundary=False))


@cuda.jit
def two_steps_int_four(u, u_new, d):
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if i < nx and j < ny:
        x = u[j, i]
        if 1 < i < nx - 2 and 1 < j < ny - 2:
            x = x + d * ((((u[j - 1, i] + u[j, i - 1]) + u[j, i + 1]) + u[j + 1, i]) - 4 * x)  # 4 is an int64: float64 arithmetic
        u_new[j, i] = x


def test_two_heat_steps_float64_is_named():
    def heat(u, u_new, d):
        ny, nx = u.shape
        two_steps_int_four[(math.ceil(nx / 8), math.ceil(ny / 8)), (8, 8)](u, u_new, np.float32(d))

    with pytest.raises(CheckFailed, match="float64.*int64"):
        ch6.check_two_heat_steps(heat, d=0.0)  # d = 0: the values stay right, only the arithmetic is wrong


# --- 6.5 -----------------------------------------------------------------------------------------


def test_stretched_coefficients():
    ch6.check_stretched_coefficients(fd.nonuniform_coefficients)
    with pytest.raises(CheckFailed, match="uniform weights"):
        ch6.check_stretched_coefficients(lambda n, a: fd.nonuniform_coefficients(n, 0.0))
    with pytest.raises(CheckFailed, match="dx/ds"):
        ch6.check_stretched_coefficients(lambda n, a: fd.nonuniform_coefficients(n, 0.0) / fd.stretched_grid(n, a)[2][None, :])
    with pytest.raises(CheckFailed, match=r"\(4, n\)"):
        ch6.check_stretched_coefficients(lambda n, a: fd.nonuniform_coefficients(n, a).T)
    with pytest.raises(CheckFailed, match="factor n"):
        ch6.check_stretched_coefficients(lambda n, a: fd.nonuniform_coefficients(n, a) / n)
    with pytest.raises(CheckFailed, match="should return an array"):
        ch6.check_stretched_coefficients(lambda n, a: None)


# --- 6.6 -----------------------------------------------------------------------------------------

BX, BY = 32, 8
TILE = (BY + 2, BX + 2)


@cuda.jit
def jacobi_tile(a, a_new, edge, corner, barrier, halo):
    t = cuda.shared.array(TILE, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    ny, nx = a.shape
    x0 = cuda.blockIdx.x * BX - 1
    y0 = cuda.blockIdx.y * BY - 1
    if halo:
        for r in range(ty, BY + 2, BY):
            for c in range(tx, BX + 2, BX):
                if 0 <= y0 + r < ny and 0 <= x0 + c < nx:
                    t[r, c] = a[y0 + r, x0 + c]
    elif y0 + 1 + ty < ny and x0 + 1 + tx < nx:  # the mistake: only the block's own points, no halo
        t[ty + 1, tx + 1] = a[y0 + 1 + ty, x0 + 1 + tx]
    if barrier:
        cuda.syncthreads()
    i, j = x0 + 1 + tx, y0 + 1 + ty
    if 0 < i < nx - 1 and 0 < j < ny - 1:
        r, c = ty + 1, tx + 1
        a_new[j, i] = (edge * (((t[r + 1, c] + t[r, c - 1]) + t[r, c + 1]) + t[r - 1, c])
                       + corner * (((t[r - 1, c - 1] + t[r - 1, c + 1]) + t[r + 1, c - 1]) + t[r + 1, c + 1]))


@cuda.jit
def jacobi_global_swapped(a, a_new, edge, corner):
    j, i = cuda.grid(2)  # x walks the rows
    ny, nx = a.shape
    if 0 < i < nx - 1 and 0 < j < ny - 1:
        a_new[j, i] = (edge * (((a[j + 1, i] + a[j, i - 1]) + a[j, i + 1]) + a[j - 1, i])
                       + corner * (((a[j - 1, i - 1] + a[j - 1, i + 1]) + a[j + 1, i - 1]) + a[j + 1, i + 1]))


WEIGHTS32 = (np.float32(0.2), np.float32(0.05))


def sweep(barrier=True, halo=True, weights=WEIGHTS32):
    def jacobi_sweep(a, a_new):
        ny, nx = a.shape
        jacobi_tile[(math.ceil(nx / BX), math.ceil(ny / BY)), (BX, BY)](a, a_new, weights[0], weights[1], barrier, halo)
    return jacobi_sweep


def swapped_sweep(a, a_new):
    ny, nx = a.shape
    jacobi_global_swapped[(math.ceil(ny / 32), math.ceil(nx / 8)), (32, 8)](a, a_new, np.float32(0.2), np.float32(0.05))


def test_jacobi_sweep(capsys):
    ch6.check_jacobi_sweep(sweep())
    assert "\u2705 Exercise 6.6" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="race on shared memory.*A barrier is missing"):
        ch6.check_jacobi_sweep(sweep(barrier=False))
    with pytest.raises(CheckFailed, match="before any thread of the block wrote it.*halo"):
        ch6.check_jacobi_sweep(sweep(halo=False))
    with pytest.raises(CheckFailed, match=r"jacobi_tile was launched with the (Python float|float64 value) 0.2[^`]* as `edge`: Numba compiles that "
                                          r"parameter as float64.*numpy.float32\(value\)") as failed:
        ch6.check_jacobi_sweep(sweep(weights=(0.2, 0.05)))  # Python floats: float64 arguments
    assert "simulator" not in str(failed.value) and "__setitem__" not in str(failed.value)  # the student's line, not the simulator's
    with pytest.raises(CheckFailed, match="reads of a are not coalesced"):
        ch6.check_jacobi_sweep(swapped_sweep)


# --- Right answers unlike the reference, and mistakes the values do not show (issue 28) ---------------------


def sixth_order_by_inverse():
    """A right 6.1 answer: the same Taylor system, solved by the inverse matrix."""
    powers = np.array([[m ** p for m in (1, 2, 3)] for p in (1, 3, 5)], dtype=np.float64)
    return np.linalg.inv(powers) @ np.array([0.5, 0.0, 0.0])


def sixth_order_written_in():
    return [3 / 4, -3 / 20, 1 / 60]


def sixth_order_in_float32():
    powers = np.array([[m ** p for m in (1, 2, 3)] for p in (1, 3, 5)], dtype=np.float32)
    return np.linalg.solve(powers, np.array([0.5, 0.0, 0.0], np.float32))


def test_sixth_order_solved_copied_and_float32(capsys):
    ch6.check_sixth_order(sixth_order_by_inverse)
    assert "\u2705 Exercise 6.1" in capsys.readouterr().out
    for copied in (sixth_order_written_in, lambda: ("3/4", "-3/20", "1/60")):
        with pytest.raises(CheckFailed, match="weights written into its code"):
            ch6.check_sixth_order(copied)
    with pytest.raises(CheckFailed, match="right to about 7 digits only.*solve in float64") as failed:
        ch6.check_sixth_order(sixth_order_in_float32)
    assert "yours: 1)" not in str(failed.value)


@cuda.jit
def z_point_kernel(f, df, a, b, c, d):
    """A right 6.2 answer: one thread per point of a 3D grid, neighbours by a remainder."""
    i, j, k = cuda.grid(3)
    nz, ny, nx = f.shape
    if i < nx and j < ny and k < nz:
        df[k, j, i] = (a * (f[(k + 1) % nz, j, i] - f[(k - 1) % nz, j, i]) + b * (f[(k + 2) % nz, j, i] - f[(k - 2) % nz, j, i])
                       + c * (f[(k + 3) % nz, j, i] - f[(k - 3) % nz, j, i]) + d * (f[(k + 4) % nz, j, i] - f[(k - 4) % nz, j, i]))


def z_points(f, df, coefficients):
    nz, ny, nx = f.shape
    z_point_kernel[(math.ceil(nx / 16), math.ceil(ny / 4), math.ceil(nz / 2)), (16, 4, 2)](f, df, *coefficients)


def z_grid_from_ny(f, df, coefficients):
    """A mistake: the grid's x counted from ny, its y from nx (right whenever the shape is near a cube)."""
    nz, ny, nx = f.shape
    z_column_kernel[(math.ceil(ny / 8), math.ceil(nx / 4)), (8, 4)](f, df, *coefficients, 0, True)


def test_z_derivative_other_right_answer_and_grid_from_the_wrong_axis():
    ch6.check_z_derivative(z_points)
    with pytest.raises(CheckFailed, match=r"never written.*size the grid's x from nx"):
        ch6.check_z_derivative(z_grid_from_ny)


def roomy_tile(shape, itemsize, device):
    """A right 6.3 answer: the shortest divisor of ny of at least 8 points that fits, two points per thread."""
    nz, ny, nx = shape
    pencils = device.warp_size if nx >= device.warp_size else nx
    fits = [n for n in range(2, ny + 1) if ny % n == 0 and (n + 8) * pencils * itemsize <= device.max_shared_per_block]
    length = next((n for n in fits if n >= 8), fits[-1])
    return (length, pencils, max(1, length // 2))


def test_choose_y_tile_other_right_answer(capsys):
    ch6.check_choose_y_tile(roomy_tile)
    assert "\u2705 Exercise 6.3" in capsys.readouterr().out


H = 2  # the halo of two steps
TBX, TBY = 16, 8
HEAT_TILE = (TBY + 2 * H, TBX + 2 * H)


@cuda.jit
def heat_tile_kernel(u, u_new, d, four):
    """A right 6.4 answer: a tile with a two-point halo and a second static shared array for the first step."""
    tile = cuda.shared.array(HEAT_TILE, float32)
    first = cuda.shared.array(HEAT_TILE, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    ny, nx = u.shape
    x0, y0 = cuda.blockIdx.x * TBX - H, cuda.blockIdx.y * TBY - H
    for r in range(ty, TBY + 2 * H, TBY):
        for c in range(tx, TBX + 2 * H, TBX):
            y, x = min(max(y0 + r, 0), ny - 1), min(max(x0 + c, 0), nx - 1)
            tile[r, c] = u[y, x]
    cuda.syncthreads()
    for r in range(ty, TBY + 2 * H, TBY):
        for c in range(tx, TBX + 2 * H, TBX):
            y, x = y0 + r, x0 + c
            value = tile[r, c]
            if 0 < r < TBY + 2 * H - 1 and 0 < c < TBX + 2 * H - 1 and 0 < y < ny - 1 and 0 < x < nx - 1:
                value = value + d * ((((tile[r - 1, c] + tile[r, c - 1]) + tile[r, c + 1]) + tile[r + 1, c]) - four * value)
            first[r, c] = value
    cuda.syncthreads()
    r, c = ty + H, tx + H
    j, i = y0 + r, x0 + c
    if j < ny and i < nx:
        value = first[r, c]
        if 0 < i < nx - 1 and 0 < j < ny - 1:
            value = value + d * ((((first[r - 1, c] + first[r, c - 1]) + first[r, c + 1]) + first[r + 1, c]) - four * value)
        u_new[j, i] = value


def heat_by_tile(u, u_new, d):
    ny, nx = u.shape
    heat_tile_kernel[(math.ceil(nx / TBX), math.ceil(ny / TBY)), (TBX, TBY)](u, u_new, np.float32(d), np.float32(4))


@cuda.jit
def heat_step_kernel(u, u_new, d, four):
    i, j = cuda.grid(2)
    ny, nx = u.shape
    if i < nx and j < ny:
        x = u[j, i]
        if 0 < i < nx - 1 and 0 < j < ny - 1:
            x = x + d * ((((u[j - 1, i] + u[j, i - 1]) + u[j, i + 1]) + u[j + 1, i]) - four * x)
        u_new[j, i] = x


def heat_two_launches(u, u_new, d):
    ny, nx = u.shape
    middle = cuda.device_array_like(u_new)
    blocks = (math.ceil(nx / 8), math.ceil(ny / 8))
    heat_step_kernel[blocks, (8, 8)](u, middle, np.float32(d), np.float32(4))
    heat_step_kernel[blocks, (8, 8)](middle, u_new, np.float32(d), np.float32(4))


@cuda.jit
def heat_through_u_new(u, u_new, d, four):
    """A mistake: the first step goes to u_new, and the second reads its neighbours there, which other blocks write."""
    i, j = cuda.grid(2)
    ny, nx = u.shape
    inside = 0 < i < nx - 1 and 0 < j < ny - 1
    if i < nx and j < ny:
        x = u[j, i]
        if inside:
            x = x + d * ((((u[j - 1, i] + u[j, i - 1]) + u[j, i + 1]) + u[j + 1, i]) - four * x)
        u_new[j, i] = x
    cuda.syncthreads()
    if i < nx and j < ny and inside:
        y = u_new[j, i] + d * ((((u_new[j - 1, i] + u_new[j, i - 1]) + u_new[j, i + 1]) + u_new[j + 1, i]) - four * u_new[j, i])
    cuda.syncthreads()
    if i < nx and j < ny and inside:
        u_new[j, i] = y


def test_two_heat_steps_tile_route_one_launch_and_blocks(capsys):
    ch6.check_two_heat_steps(heat_by_tile)  # two static shared arrays, each its own
    assert "\u2705 Exercise 6.4" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="launches 2 kernels.*single launch"):
        ch6.check_two_heat_steps(heat_two_launches)
    with pytest.raises(CheckFailed, match=r"block .* writes u_new\[.*\] at line \d+ .* and block .* reads it .* same launch") as failed:
        ch6.check_two_heat_steps(lambda u, u_new, d: heat_through_u_new[(math.ceil(u.shape[1] / 8), math.ceil(u.shape[0] / 8)), (8, 8)](
            u, u_new, np.float32(d), np.float32(4)))
    assert "never written" not in str(failed.value) and "tid" not in str(failed.value)


def stretched_by_loops(n, alpha):
    """A right 6.5 answer: point by point, the weights as fractions."""
    weights = [float(c) for c in fd.exact_central_coefficients(4)]
    out = np.empty((4, n), np.float32)
    for i in range(n):
        stretch = (1 - alpha / 2) / (1 - alpha * math.sin(2 * math.pi * i / n) ** 2)
        for m in range(4):
            out[m, i] = weights[m] * n * stretch
    return out


def test_stretched_coefficients_other_right_answer(capsys):
    ch6.check_stretched_coefficients(stretched_by_loops)
    assert "\u2705 Exercise 6.5" in capsys.readouterr().out


@cuda.jit
def jacobi_flat_tile(a, a_new, edge, corner):
    """A right 6.6 answer: the tile loaded by a flat loop over its points in steps of the block's thread count."""
    t = cuda.shared.array(TILE, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    ny, nx = a.shape
    x0 = cuda.blockIdx.x * BX - 1
    y0 = cuda.blockIdx.y * BY - 1
    for k in range(ty * BX + tx, (BY + 2) * (BX + 2), BX * BY):
        r, c = k // (BX + 2), k % (BX + 2)
        if 0 <= y0 + r < ny and 0 <= x0 + c < nx:
            t[r, c] = a[y0 + r, x0 + c]
    cuda.syncthreads()
    i, j = x0 + 1 + tx, y0 + 1 + ty
    if 0 < i < nx - 1 and 0 < j < ny - 1:
        r, c = ty + 1, tx + 1
        a_new[j, i] = (edge * (((t[r + 1, c] + t[r, c - 1]) + t[r, c + 1]) + t[r - 1, c])
                       + corner * (((t[r - 1, c - 1] + t[r - 1, c + 1]) + t[r + 1, c - 1]) + t[r + 1, c + 1]))


@cuda.jit
def jacobi_tile_16(a, a_new, edge, corner):
    """A mistake: blocks of 16 x 16 where the exercise asks for 32 x 8."""
    t = cuda.shared.array((18, 18), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    ny, nx = a.shape
    x0 = cuda.blockIdx.x * 16 - 1
    y0 = cuda.blockIdx.y * 16 - 1
    for r in range(ty, 18, 16):
        for c in range(tx, 18, 16):
            if 0 <= y0 + r < ny and 0 <= x0 + c < nx:
                t[r, c] = a[y0 + r, x0 + c]
    cuda.syncthreads()
    i, j = x0 + 1 + tx, y0 + 1 + ty
    if 0 < i < nx - 1 and 0 < j < ny - 1:
        r, c = ty + 1, tx + 1
        a_new[j, i] = (edge * (((t[r + 1, c] + t[r, c - 1]) + t[r, c + 1]) + t[r - 1, c])
                       + corner * (((t[r - 1, c - 1] + t[r - 1, c + 1]) + t[r + 1, c - 1]) + t[r + 1, c + 1]))


@cuda.jit
def jacobi_writes_boundary(a, a_new, edge, corner):
    """A mistake: every point of the mesh is swept, the boundary rows and columns too (their missing neighbours as 0)."""
    t = cuda.shared.array(TILE, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    ny, nx = a.shape
    x0 = cuda.blockIdx.x * BX - 1
    y0 = cuda.blockIdx.y * BY - 1
    for r in range(ty, BY + 2, BY):
        for c in range(tx, BX + 2, BX):
            inside = 0 <= y0 + r < ny and 0 <= x0 + c < nx
            t[r, c] = a[y0 + r, x0 + c] if inside else float32(0)
    cuda.syncthreads()
    i, j = x0 + 1 + tx, y0 + 1 + ty
    if i < nx and j < ny:
        r, c = ty + 1, tx + 1
        a_new[j, i] = (edge * (((t[r + 1, c] + t[r, c - 1]) + t[r, c + 1]) + t[r - 1, c])
                       + corner * (((t[r - 1, c - 1] + t[r - 1, c + 1]) + t[r + 1, c - 1]) + t[r + 1, c + 1]))


def launch_sweep(kernel, block):
    def jacobi_sweep(a, a_new):
        ny, nx = a.shape
        kernel[(math.ceil(nx / block[0]), math.ceil(ny / block[1])), block](a, a_new, *WEIGHTS32)
    return jacobi_sweep


def test_jacobi_sweep_other_right_answer_block_shape_and_boundary(capsys):
    ch6.check_jacobi_sweep(launch_sweep(jacobi_flat_tile, (BX, BY)))
    assert "\u2705 Exercise 6.6" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="blocks of 16 x 16 threads; the exercise asks for BX x BY = 32 x 8"):
        ch6.check_jacobi_sweep(launch_sweep(jacobi_tile_16, (16, 16)))
    with pytest.raises(CheckFailed, match="boundary points changed") as failed:
        ch6.check_jacobi_sweep(launch_sweep(jacobi_writes_boundary, (BX, BY)))
    assert "halo" not in str(failed.value)


@cuda.jit
def heat_without_barrier(u, u_new, d, four):
    """A mistake: the second step reads the neighbours' first step from u_new with no barrier after writing it."""
    i, j = cuda.grid(2)
    ny, nx = u.shape
    inside = 0 < i < nx - 1 and 0 < j < ny - 1
    y = float32(0)
    if i < nx and j < ny:
        x = u[j, i]
        if inside:
            x = x + d * ((((u[j - 1, i] + u[j, i - 1]) + u[j, i + 1]) + u[j + 1, i]) - four * x)
        u_new[j, i] = x
        if inside:
            y = x + d * ((((u_new[j - 1, i] + u_new[j, i - 1]) + u_new[j, i + 1]) + u_new[j + 1, i]) - four * x)
    cuda.syncthreads()
    if i < nx and j < ny and inside:
        u_new[j, i] = y


def test_two_heat_steps_race_inside_a_block_is_named():
    def heat(u, u_new, d):
        ny, nx = u.shape
        heat_without_barrier[(math.ceil(nx / 16), math.ceil(ny / 16)), (16, 16)](u, u_new, np.float32(d), np.float32(4))

    with pytest.raises(CheckFailed, match=r"reads u_new\[.*\] at line \d+ .*, which thread .* of the same block writes .* no "
                                          r"cuda.syncthreads\(\) between them") as failed:
        ch6.check_two_heat_steps(heat)
    assert len(str(failed.value).splitlines()) <= 5
