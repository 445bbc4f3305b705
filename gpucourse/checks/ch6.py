"""Checks for the chapter 6 exercises (solutions/ch06_finite_difference.ipynb).

Kernels are checked on poisoned outputs framed by guard cells sized from their launch, against the
NumPy references of `gpucourse.finite_difference`; a trace of a small run shows float64 arithmetic
in a float32 kernel, uncoalesced reads and shared-memory races; on a GPU racecheck and a timing
beside the package's kernel add what only a GPU shows.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable, Iterator
from fractions import Fraction

import numpy as np

from .. import finite_difference as fd
from ..arrays import random_array, to_device, to_host
from ..device import DeviceInfo, current_device
from ..kernels import stencil
from ..simulation import paced
from ..sizes import problem_size
from . import CheckFailed, array_problems, fail, passed
from .evidence import coalescing_problems, float64_problems, hazard, racecheck_problems, speed_note, speed_verdict, trace_naming_races, trace_of
from .launches import float64_argument_problems, recorded_launches
from .remote import evidence
from .runs import race_repeats, run_checked
from .trace import is_shared


def _as_floats(values, what: str, length: int) -> np.ndarray:
    try:
        array = np.array([float(Fraction(v)) if isinstance(v, (str, Fraction)) else float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise CheckFailed(f"{what} should be {length} numbers (floats or fractions); got {values!r} ({exc})") from None
    if array.shape != (length,):
        raise CheckFailed(f"{what} should hold {length} numbers, c_1 to c_{length}; got {len(array)}.")
    return array


@evidence  # under autograde: read where the answer runs, replayed by the grader (remote.py)
@evidence
def _written_weights(function: Callable) -> bool:
    """Whether a function's code holds the sixth-order weights themselves (3/4, 3/20, 1/60, as numbers or strings) instead of solving."""
    def constants(code: types.CodeType) -> Iterator[object]:
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                yield from constants(constant)
            else:
                yield from constant if isinstance(constant, (tuple, frozenset)) else (constant,)

    code = getattr(function, "__code__", None)
    if code is None:
        return False
    values = list(constants(code))
    numbers = [abs(v) for v in values if isinstance(v, float)]
    if any(math.isclose(v, w, rel_tol=1e-6) for v in numbers for w in (0.75, 0.15, 1 / 60)):
        return True
    if any(isinstance(v, str) and any(w in v.replace(" ", "") for w in ("3/4", "3/20", "1/60")) for v in values):
        return True
    return {20, 60} <= {abs(v) for v in values if isinstance(v, int) and not isinstance(v, bool)}


# Properties of a right answer to 6.1: c_1, c_2, c_3 satisfy 2 sum(m c_m) = 1, sum(m^3 c_m) = sum(m^5 c_m) = 0 to float64
# precision, solved (not typed in).
def check_sixth_order(sixth_order_coefficients: Callable[[], object]) -> None:
    """Exercise 6.1: `sixth_order_coefficients()` solves the Taylor conditions with NumPy for c_1, c_2, c_3 (sixth order)."""
    got = _as_floats(sixth_order_coefficients(), "sixth_order_coefficients()", 3)
    want = np.array([float(c) for c in fd.exact_central_coefficients(3)])
    problems = []
    if not np.allclose(got, want, rtol=1e-10, atol=1e-12):
        if np.allclose(got, want, rtol=1e-5):
            problems.append(f"your weights {got.tolist()} are right to about 7 digits only, float32's precision: solve in float64 "
                            "(np.linalg.solve on float64 arrays) so that they are right to 15.")
        elif np.allclose(got, 2 * want, rtol=1e-10):
            problems.append("your coefficients are twice the right ones: each term is c_m (f(x+mh) - f(x-mh)), and that difference "
                            "holds 2 m h f'(x), so the first equation is 2 * sum(m * c_m) = 1.")
        elif np.allclose(got, -want, rtol=1e-10):
            problems.append("your coefficients have the wrong sign: c_1 multiplies f(x+h) - f(x-h), which grows with f.")
        else:
            moments = [2 * sum(c * m ** p for m, c in enumerate(got, start=1)) for p in (1, 3, 5)]
            problems.append(f"got {got.tolist()}. Check the Taylor conditions: 2*sum(m c_m) should be 1 (yours: {moments[0]:.6g}), "
                            f"sum(m^3 c_m) and sum(m^5 c_m) should be 0 (yours: {moments[1] / 2:.3g}, {moments[2] / 2:.3g}).")
    if not problems and _written_weights(sixth_order_coefficients):
        problems.append("sixth_order_coefficients returns weights written into its code (3/4, -3/20, 1/60): the exercise asks "
                        "you to solve the Taylor conditions with NumPy (np.linalg.solve), so that the same lines give any order.")
    fail(problems, "Exercise 6.1")
    passed(f"Exercise 6.1: the sixth-order weights are {', '.join(str(c) for c in fd.exact_central_coefficients(3))} (over h).")


def _direction_guess(got: np.ndarray, host: np.ndarray, spacing: float) -> str | None:
    """The other axis along which `got` is the derivative (with the coefficients the student was given), if any."""
    for direction in ("x", "y"):
        reference = fd.derivative_reference(host, direction, spacing)
        if np.allclose(got, reference, atol=1e-3 * np.abs(reference).max()):
            return direction
    return None


def _z_derivative_problems(deriv_z: Callable[..., object], shape: tuple[int, int, int], seed: int) -> list[str]:
    """What is wrong with deriv_z's values on random data of one shape, in words ([] if they are right)."""
    host = random_array(shape, np.float32, seed=seed)
    spacing = 1.0 / shape[0]
    coefficients = stencil.coefficients_for(host, spacing)
    f = to_device(host)
    with recorded_launches() as launches:
        run = paced(run_checked)(lambda out, ff, c: deriv_z(ff, out, c), shape, np.float32, f, coefficients, input_names=("f", "coefficients"))
    got = run.got
    problems = run.changed + float64_argument_problems(launches, given=(coefficients,)) + [p for p in run.problems if p not in run.changed]
    reference = fd.derivative_reference(host, "z", spacing)
    tolerance = 8 * np.finfo(np.float32).eps * fd.stencil_amplification(spacing)
    found = array_problems(got, reference.astype(np.float32), what=f"df (shape {shape})", rtol=0.0, atol=tolerance,
                           coverage_hint="Every (z, y, x) point needs a thread: size the grid's x from nx and its y from ny "
                                         "(the shape is (nz, ny, nx)).")
    if found and not np.isnan(got).any():
        wrong = ~np.isclose(got, reference, rtol=0.0, atol=tolerance)
        planes = np.flatnonzero(wrong.any(axis=(1, 2)))
        axis = _direction_guess(got, host, spacing)
        if axis:
            found = [f"df matches the derivative along {axis}, not z. In f[z, y, x] z is the FIRST index."]
        elif planes.size and set(planes) <= set(range(fd.HALO)) | set(range(shape[0] - fd.HALO, shape[0])):
            found = [f"only the planes z = {sorted(int(p) for p in planes)} are wrong: near the two ends the neighbours wrap "
                     "around (the grid is periodic: plane -1 is plane nz - 1)."]
        elif np.allclose(got, -reference, atol=tolerance):
            found = ["df has the wrong sign: coefficient c_m multiplies f[z + m] - f[z - m] (the plane ahead minus the plane behind)."]
        elif np.allclose(got * spacing, reference, atol=tolerance * spacing * 4):
            found = ["df is too large by 1/h: the coefficients from stencil.coefficients_for(f, h) already include 1/h."]
    return problems + found


# Properties of a right answer to 6.2: df is the periodic z derivative at every point of shapes long along x, along y and
# neither; f unchanged; float32 scalars handed to the kernel; warps read neighbouring x.
def check_z_derivative(deriv_z: Callable[..., object]) -> None:
    """Exercise 6.2: `deriv_z(f, df, coefficients)` writes the periodic z derivative of f (float32, f[z, y, x]) into df."""
    # the chapter's shape, then one long along x and one long along y: a grid sized from the wrong axis leaves points out
    for number, shape in enumerate((problem_size("ch6_exercise_shape"), (9, 9, 40), (9, 40, 9))):
        problems = _z_derivative_problems(deriv_z, shape, seed=61 + 10 * number)
        if problems:
            break
    fail(problems, "Exercise 6.2")
    small = (9, 12, 40)
    small_host = random_array(small, np.float32, seed=62)
    arguments = [("traced", "f", small_host), ("traced", "df", np.zeros(small, np.float32)),
                 ("value", "coefficients", stencil.coefficients_for(small_host, 1.0 / small[0]))]
    trace, note = trace_of(deriv_z, arguments)
    if trace is not None:
        problems += float64_problems(trace)
        problems += coalescing_problems(trace, "f", small, "Let x, the fastest thread index, walk the last (contiguous) axis of f[z, y, x].")
    fail(problems[:1], "Exercise 6.2")
    passed(f"Exercise 6.2: deriv_z matches the numpy.roll reference on random data of three shapes, one long along x and one "
           f"along y, and its warps read neighbouring x{note}.")


def _tile_problems(tile, shape: tuple[int, int, int], itemsize: int, device: DeviceInfo) -> list[str]:
    try:
        length, pencils, rows = (tile.length, tile.pencils, tile.rows) if isinstance(tile, stencil.AxisTile) else (int(v) for v in tile)
    except (TypeError, ValueError, AttributeError):
        return [f"return an AxisTile or a tuple (length, pencils, rows); got {tile!r}."]
    nz, ny, nx = shape
    where = f"for shape {shape}, {itemsize}-byte values on {device.name}"
    problems = []
    if min(length, pencils, rows) < 1:
        return [f"{where}: every tile parameter must be positive; got ({length}, {pencils}, {rows})."]
    warp = device.warp_size
    if nx >= warp and pencils % warp:
        problems.append(f"{where}: pencils = {pencils} is not a multiple of {warp}: a warp row would not read whole 128-byte rows.")
    if nx < warp and pencils != nx:
        problems.append(f"{where}: with only {nx} points along x, use pencils = nx = {nx}.")
    if ny % length:
        problems.append(f"{where}: the tile length {length} must divide the {ny} points along y.")
    threads = pencils * rows
    if threads > device.max_threads_per_block:
        problems.append(f"{where}: {pencils} x {rows} = {threads} threads per block, over the device's {device.max_threads_per_block}.")
    shared = (length + 2 * fd.HALO) * pencils * itemsize
    if shared > device.max_shared_per_block:
        problems.append(f"{where}: (length + 8) x pencils x {itemsize} bytes = {shared} bytes of shared memory, over the "
                        f"{device.max_shared_per_block} a block may use.")
    if -(-length // rows) < 2:
        problems.append(f"{where}: each thread computes {-(-length // rows)} point(s); use fewer rows so that each has several "
                        "(more loads in flight).")
    return problems


# Properties of a right answer to 6.3: for every shape, itemsize and device limit, pencils is a multiple of the warp (or nx
# when nx < warp), the length divides ny, threads and shared bytes (itemsize included) fit the device, each thread computes
# two points or more; and the tile runs.
def check_choose_y_tile(choose_y_tile: Callable[[tuple[int, int, int], int, DeviceInfo], object]) -> None:
    """Exercise 6.3: `choose_y_tile(shape, itemsize, device)` returns a legal, coalesced y tile with several points per thread."""
    device = current_device()
    small_device = dataclasses.replace(device, name=f"{device.name} limited to 16 KiB of shared memory", max_shared_per_block=16 * 1024)
    cases = [((64, 64, 64), 4, device), ((256, 256, 256), 4, device), ((96, 384, 160), 8, device), ((40, 48, 20), 4, device),
             ((128, 256, 128), 4, small_device), ((32, 96, 64), 8, small_device)]
    problems: list[str] = []
    for shape, itemsize, dev in cases:
        try:
            tile = choose_y_tile(shape, itemsize, dev)
        except Exception as exc:  # any exception here is a wrong answer, reported in words
            problems.append(f"choose_y_tile({shape}, {itemsize}, {dev.name}) raised {type(exc).__name__}: {exc}")
            continue
        problems += _tile_problems(tile, shape, itemsize, dev)
    if not problems:  # one tile must also run: the kernel of notebook 6.2 with the student's choice
        shape = problem_size("ch6_exercise_shape")
        tile = choose_y_tile(shape, 4, device)
        tile = tile if isinstance(tile, stencil.AxisTile) else stencil.AxisTile(*(int(v) for v in tile))
        problems += _tile_problems(tile, shape, 4, device)
        if not problems:
            host = random_array(shape, np.float32, seed=63)
            df = to_device(np.full(shape, np.nan, np.float32))
            stencil.deriv_yz(to_device(host), df, "y", stencil.coefficients_for(host, 1.0 / shape[1]), tile)
            problems += array_problems(to_host(df), fd.derivative_reference(host, "y", 1.0 / shape[1]).astype(np.float32),
                                       what=f"df with your tile {tile}", rtol=0.0,
                                       atol=8 * np.finfo(np.float32).eps * fd.stencil_amplification(1.0 / shape[1]))
    fail(problems, "Exercise 6.3")
    passed(f"Exercise 6.3: every tile is legal, coalesced and gives each thread several points ({len(cases)} cases and one run).")


# Properties of a right answer to 6.4: two explicit steps in one launch, boundary fixed at both, on a mesh a multiple of no
# block; u unchanged; float32 scalars; no hazard on shared memory.
def check_two_heat_steps(heat_two_steps: Callable[..., object], d: float = 0.2) -> None:
    """Exercise 6.4: `heat_two_steps(u, u_new, d)` advances u by two explicit steps in one launch (boundary fixed)."""
    shape = problem_size("ch6_exercise_heat")
    host = random_array(shape, np.float32, seed=64, low=0.0, high=1.0)
    want = fd.heat_step_reference(fd.heat_step_reference(host, d), d)
    u = to_device(host)
    with recorded_launches() as launches:
        run = paced(run_checked)(lambda out, uu: heat_two_steps(uu, out, d), shape, np.float32, u, input_names=("u",))
    fail(run.changed, "Exercise 6.4")
    fail(float64_argument_problems(launches), "Exercise 6.4")
    got, problems = run.got, run.problems
    if len(launches) > 1:
        fail([f"heat_two_steps launches {len(launches)} kernels ({', '.join(launch.name for launch in launches)}): the exercise asks "
              "for both steps in a single launch, so that u is read once. Let each thread compute the first step at its point's "
              "neighbours too (or stage a tile with a two-point halo)."], "Exercise 6.4")
    small = (10, 12)
    trace, note = trace_of(lambda u, u_new: heat_two_steps(u, u_new, d),
                           [("traced", "u", random_array(small, np.float32, seed=65)), ("traced", "u_new", np.zeros(small, np.float32))],
                           shared=True)
    found_hazard = hazard(trace, "Every slot of the tile the second step reads must be loaded or computed first.")
    if found_hazard:
        fail([found_hazard], "Exercise 6.4")
    found = array_problems(got, want, what="u_new", rtol=0.0, atol=4e-6,
                           coverage_hint="Every point, boundary included, must be written (the boundary keeps its value).")
    if found and not np.isnan(got).any():
        one_step = fd.heat_step_reference(host, d)
        if np.allclose(got, one_step, atol=4e-6):
            found.append("u_new is one step ahead, not two.")
        elif np.allclose(got, fd.heat_step_reference(host, 2 * d), atol=4e-6):
            found.append("u_new is ONE step with twice d: two steps apply the update twice, the second to the first's values "
                         "at the point and its four neighbours (their first-step values, not u's).")
        else:
            wrong = ~np.isclose(got, want, atol=4e-6)
            edge = np.zeros(shape, bool)
            edge[[0, -1], :] = edge[:, [0, -1]] = True
            ring = np.zeros(shape, bool)
            ring[1:-1, 1:-1] = True
            ring[2:-2, 2:-2] = False
            if (wrong & edge).any():
                found.append("boundary points changed: they keep their values at every step.")
            elif (wrong & ~ring).sum() == 0:
                found.append("only the points next to the boundary are wrong: in the first step the boundary stays fixed, and the "
                             "second step must use those fixed values too.")
    problems += found
    fail(problems, "Exercise 6.4")
    fail(float64_problems(trace), "Exercise 6.4")
    passed(f"Exercise 6.4: two steps per launch match two single steps on a {shape[0]} x {shape[1]} mesh, boundary included{note}.")


def _stretched_with(n: int, alpha: float, s: np.ndarray) -> np.ndarray:
    """The stretched grid's (4, n) weights at the points s (float32): the uniform weights over 1/n times ds/dx(s)."""
    weights = np.array([float(c) for c in fd.exact_central_coefficients(4)])
    ds_dx = (1 - alpha / 2) / (1 - alpha * np.sin(2 * np.pi * s) ** 2)
    return (weights[:, None] * n * ds_dx[None, :]).astype(np.float32)


# Properties of a right answer to 6.5: the (4, n) float32 weights c_m n ds/dx(i / n) for stretched and uniform grids.
def check_stretched_coefficients(stretched_coefficients: Callable[[int, float], object]) -> None:
    """Exercise 6.5: `stretched_coefficients(n, alpha)` returns the (4, n) float32 per-point weights of the stretched grid."""
    problems = []
    for n, alpha in ((64, 0.5), (40, 0.3), (9, 0.0)):
        want = fd.nonuniform_coefficients(n, alpha)
        try:
            got = stretched_coefficients(n, alpha)
        except Exception as exc:  # any exception is a wrong answer, reported in words
            problems.append(f"stretched_coefficients({n}, {alpha}) raised {type(exc).__name__}: {exc}")
            break
        if got is None or not hasattr(got, "shape"):
            problems.append(f"stretched_coefficients({n}, {alpha}) should return an array; got {type(got).__name__}.")
            continue
        got = np.asarray(got)
        if got.shape == (n, 4):
            problems.append(f"shape {got.shape}: use (4, n), one row per coefficient a, b, c, d (the kernels read coef[m, i]).")
            continue
        found = array_problems(got, want, what=f"stretched_coefficients({n}, {alpha})", rtol=1e-5)
        if found and got.shape == want.shape:
            uniform = fd.nonuniform_coefficients(n, 0.0)
            _, _, ds_dx = fd.stretched_grid(n, alpha)
            where = f"stretched_coefficients({n}, {alpha}): "
            if np.allclose(got, uniform, rtol=1e-5) and alpha:
                found = [where + "these are the uniform weights: multiply by ds/dx at each point (the chain rule)."]
            elif np.allclose(got, uniform / ds_dx[None, :], rtol=1e-5) and alpha:
                found = [where + "you multiplied by dx/ds; the chain rule needs ds/dx = (1 - alpha/2) / (1 - alpha sin^2(2 pi s))."]
            elif any(np.allclose(got * n, w, rtol=1e-3) or np.allclose(got, w * n, rtol=1e-3) for w in (want, uniform)):
                found = [where + "off by a factor n: the uniform weights are c_m / ds with ds = 1/n."]
            elif np.allclose(got[::-1], want, rtol=1e-5):
                found = [where + "the rows are in reverse order: row 0 holds a (the 4/5 weight), row 3 holds d (-1/280)."]
            elif alpha and np.allclose(got, _stretched_with(n, alpha, np.arange(n) / max(n - 1, 1)), rtol=1e-4):
                found = [where + "the points are s_i = i / (n - 1); the grid is periodic (point n is point 0), so s_i = i / n."]
        problems += found
        if problems:
            break
    fail(problems, "Exercise 6.5")
    passed("Exercise 6.5: the per-point weights match the chain rule for three grids (alpha = 0.5, 0.3 and the uniform 0).")


# ---------------------------------------------------------------------------------------------
# Exercise 6.6: a Jacobi sweep of the Laplace equation through a shared tile

#: The block the exercise asks for: BX x BY threads.
BLOCK = (32, 8)


def _block_shape_words(shapes: list[tuple[int, ...]]) -> str:
    return (f"jacobi_sweep launches blocks of {' and '.join(' x '.join(map(str, shape[:2])) for shape in shapes)} threads; the "
            f"exercise asks for BX x BY = {BLOCK[0]} x {BLOCK[1]} (32 threads along x: a warp reads one row of the tile).")


def jacobi_shapes() -> list[tuple[int, int]]:
    """Meshes of exercise 6.6's check: the mode's mesh, then one whose interior is a whole number of BLOCK tiles, and that one
    plus a row and a column (a grid rounded down, or a tile edge at the mesh's edge, shows there)."""
    base = problem_size("ch6_exercise_laplace")
    whole = (BLOCK[1] * -(-(base[0] - 2) // BLOCK[1]) + 2, BLOCK[0] * -(-(base[1] - 2) // BLOCK[0]) + 2)
    return list(dict.fromkeys([base, whole, (whole[0] + 1, whole[1] + 1)]))


# Properties of a right answer to 6.6: the interior's sweep on meshes on and off whole 32 x 8 tiles, boundary and input
# untouched, the same bits in every run (a barrier between loading and reading the tile, the halo loaded), 32 x 8 blocks,
# float32 weights and arithmetic, coalesced loads.
def check_jacobi_sweep(jacobi_sweep: Callable[..., object]) -> None:
    """Exercise 6.6: `jacobi_sweep(a, a_new)` writes one Jacobi sweep of the interior of a into a_new, through a shared tile."""
    from ..kernels import laplace

    probe = to_device(np.zeros(jacobi_shapes()[0], np.float32))
    with recorded_launches(dry=True) as planned:  # the blocks first: a tile sized for 32 x 8 overflows with others, and on a
        try:                                      # GPU a write past a block's shared memory ends the process's CUDA context
            jacobi_sweep(probe, probe)
        except NotImplementedError:
            raise
        except Exception:  # noqa: BLE001 - the real run reports it in words
            pass
    launched = sorted({launch.threads for launch in planned})
    if launched and (*BLOCK, 1) not in launched:
        fail([_block_shape_words(launched)], "Exercise 6.6")
    for number, shape in enumerate(jacobi_shapes()):
        host = random_array(shape, np.float32, seed=66 + number, low=0.0, high=1.0)
        initial = host.copy()
        initial[1:-1, 1:-1] = np.nan  # the boundary of a_new holds the boundary condition; the interior is poisoned
        want = fd.jacobi_step_reference(host)
        a = to_device(host)
        if number == 0:
            timed_host, timed_a = host, a
        with recorded_launches() as launches:
            run = run_checked(lambda out, inp: jacobi_sweep(inp, out), shape, np.float32, a, initial=initial,
                              repeats=race_repeats() if number == 0 else 1, input_names=("a",))
        fail(run.changed + float64_argument_problems(launches), "Exercise 6.6")
        found = array_problems(run.got, want, what=f"a_new ({shape[0]} x {shape[1]})", rtol=0.0, atol=2e-6,  # a GPU fuses multiply-adds
                               coverage_hint="Every interior point needs a thread: cover x with the columns and y with the rows, "
                                             "rounding the blocks up.")
        tile_edges = False
        if found and not np.isnan(run.got).any():  # elements never written are named as such, not as a tile's edges
            wrong = ~np.isclose(run.got, want, rtol=0.0, atol=2e-6)
            if wrong[[0, -1], :].any() or wrong[:, [0, -1]].any():  # the cause, before what a trace of it shows
                fail(["boundary points changed: a sweep writes the interior only (1 <= y < ny - 1, 1 <= x < nx - 1); the boundary "
                      "keeps its values."], "Exercise 6.6")
            rows, columns = np.nonzero(wrong)
            tile_edges = rows.size > 0 and bool(np.all(np.isin(rows % BLOCK[1], (0, 1, BLOCK[1] - 1))
                                                       | np.isin(columns % BLOCK[0], (0, 1, BLOCK[0] - 1))))
        problems = run.problems + found
        if problems:
            break
    small = (10, 34)
    small_host = random_array(small, np.float32, seed=67)
    arguments = [("traced", "a", small_host), ("traced", "a_new", small_host.copy())]
    trace, note = trace_naming_races(jacobi_sweep, arguments, "Exercise 6.6",
                                     "Load the tile's halo too: one point on each side, corners included, (BY + 2) x (BX + 2) points "
                                     "per block, more than one per thread.")
    if problems and trace is not None and not any(is_shared(name) for name in trace.shapes):
        problems.append("the kernel uses no shared memory: stage the block's points and a one-point halo in a cuda.shared.array tile.")
    elif problems and tile_edges:
        problems = ["only points at the edges of the blocks' tiles are wrong: the tile's halo (one point on each side, corners "
                    "included) was not loaded: load (BY + 2) x (BX + 2) points per block, more than one per thread."]
    fail(problems[:1], "Exercise 6.6")
    shapes = sorted({launch.threads for launch in trace.launches}) if trace is not None else []
    if shapes and (*BLOCK, 1) not in shapes:  # the sweep's kernel; a helper kernel may have blocks of its own
        fail([_block_shape_words(shapes)], "Exercise 6.6")
    checked, racecheck_note = racecheck_problems(jacobi_sweep, arguments)
    problems += checked
    if trace is not None:
        problems += float64_problems(trace)
        problems += coalescing_problems(trace, "a", small, "Let threadIdx.x walk x, the contiguous last axis of a[y, x].")
        if not any(is_shared(name) for name in trace.shapes):
            problems.append("the kernel uses no shared memory: stage the block's points and a one-point halo in a cuda.shared.array tile.")
    fail(problems, "Exercise 6.6")
    out = to_device(timed_host)
    # A tile can be loaded in several right ways whose speeds differ: on the H100 the hinted row-and-column loops ran at 0.63
    # of the reference's flat walk (measurements/README.md, final validation). The mistakes this guards against, a tile
    # loaded once per point or loads that do not coalesce, are several times slower, so the bar is lower than elsewhere.
    slow, speed = speed_verdict("Exercise 6.6", "jacobi_sweep", lambda: jacobi_sweep(timed_a, out),
                                lambda: laplace.jacobi_shared_book(timed_a, out, (32, 8)), 2 * timed_host.nbytes, timed_host.nbytes,
                                "Are a warp's loads of the tile coalesced, and does each block load its tile once?", slowest=0.4)
    fail(slow, "Exercise 6.6")
    meshes = " and ".join(f"{ny} x {nx}" for ny, nx in jacobi_shapes())
    passed(f"Exercise 6.6: the sweep matches the NumPy reference on {meshes} meshes, boundary and input untouched, with no "
           f"race{racecheck_note}{speed}{note}.")
    speed_note("Exercise 6.6", "jacobi_sweep")
