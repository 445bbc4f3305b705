"""Finite differences on the host: stencil coefficients, grids, test functions, error norms and models.

Everything here is NumPy and runs the same in both modes. The chapter 6 kernels
(`gpucourse.kernels.stencil`, `.laplace`, `.heat`) are checked against these references:
a `numpy.roll` stencil in float64, the analytic derivative of a smooth periodic function, the
Jacobi iteration of the book's Laplace problem, and the model of seed 003 for several heat-equation
time steps per launch.

Layout: arrays are C order, ``f[z, y, x]``, so x (the last axis) is the contiguous one, as the
first index is in the book's Fortran ``f(x, y, z)``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from . import book

#: Points on each side of the centre of the nine-point stencil.
HALO = 4

#: Array axis of each direction in the course's ``f[z, y, x]`` layout.
AXIS = {"x": 2, "y": 1, "z": 0}


# ---------------------------------------------------------------------------------------------
# Stencil coefficients from the Taylor series


def taylor_system(half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """The linear system A c = b whose solution c_1..c_N is the central first-derivative stencil.

    f(x + m h) - f(x - m h) = 2 sum over odd p of (m h)^p f^(p)(x) / p!. Asking
    sum_m c_m (f(x + m h) - f(x - m h)) = h f'(x) + O(h^(2N+1)) gives one equation per odd p:
    2 sum_m c_m m = 1 for p = 1 and sum_m c_m m^p = 0 for p = 3, 5, ..., 2N - 1.
    """
    if half_width < 1:
        raise ValueError(f"half_width must be at least 1; got {half_width}")
    m = np.arange(1, half_width + 1, dtype=np.float64)
    powers = 2 * np.arange(half_width) + 1
    matrix = m[None, :] ** powers[:, None]
    rhs = np.zeros(half_width)
    rhs[0] = 0.5
    return matrix, rhs


def central_coefficients(half_width: int = HALO) -> np.ndarray:
    """Weights c_1..c_N (float64) of the (2N+1)-point, order-2N central first derivative, times the spacing."""
    matrix, rhs = taylor_system(half_width)
    return np.linalg.solve(matrix, rhs)


def exact_central_coefficients(half_width: int = HALO) -> tuple[Fraction, ...]:
    """The same weights as exact fractions (Gaussian elimination in rational arithmetic)."""
    if half_width < 1:
        raise ValueError(f"half_width must be at least 1; got {half_width}")
    rows = [[Fraction(m) ** (2 * q + 1) for m in range(1, half_width + 1)] + [Fraction(1, 2) if q == 0 else Fraction(0)]
            for q in range(half_width)]
    n = half_width
    for col in range(n):
        pivot = next(r for r in range(col, n) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
    return tuple(rows[i][n] / rows[i][i] for i in range(n))


def book_coefficients() -> tuple[Fraction, ...]:
    """The eighth-order weights as the book prints them (ids ch6_stencil_coef_a..d), as fractions."""
    return tuple(Fraction(book.figure(f"ch6_stencil_coef_{name}").value) for name in "abcd")


def stencil_coefficients(spacing: float, dtype=np.float32) -> tuple:
    """The four eighth-order weights divided by the grid spacing, as scalars of `dtype` (units 1/length)."""
    kind = np.dtype(dtype).type
    return tuple(kind(float(c) / spacing) for c in exact_central_coefficients(HALO))


def order_of_accuracy(half_width: int = HALO) -> int:
    """Order of the central stencil with `half_width` points each side: 2 * half_width."""
    return 2 * half_width


# ---------------------------------------------------------------------------------------------
# Grids and a smooth periodic test function


def periodic_grid(n: int, length: float = 1.0) -> np.ndarray:
    """n points x_i = i * length / n (float64): each point stored once, x_n would repeat x_0."""
    if n < 2 * HALO + 1:
        raise ValueError(f"a periodic grid for the nine-point stencil needs at least {2 * HALO + 1} points; got {n}")
    return np.arange(n, dtype=np.float64) * (length / n)


def book_grid(n: int) -> np.ndarray:
    """The book's grid: n points from 0 to 1 inclusive, x_i = i / (n - 1), whose two ends are one periodic point."""
    return np.arange(n, dtype=np.float64) / (n - 1)


def wave(shape: tuple[int, int, int], direction: str, waves: int = 1, dtype=np.float32,
         like_book: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
    """f = cos(2 pi waves s) along `direction` on the unit periodic grid: (f in dtype, exact df/ds in float64, spacing).

    With `like_book` (the default) f is evaluated as the book's program does, argument and cosine in
    `dtype`; otherwise it is evaluated in float64 and rounded once. The difference matters: the
    stencil amplifies the rounding noise of f by about sum|c_m| * 2 / spacing.
    """
    axis = AXIS[direction]
    n = shape[axis]
    k = 2 * np.pi * waves
    if like_book:
        kind = np.dtype(dtype).type
        profile = np.cos(kind(k) * np.arange(n, dtype=dtype) / kind(n)).astype(dtype)
    else:
        profile = np.cos(k * periodic_grid(n)).astype(dtype)
    slope = -k * np.sin(k * periodic_grid(n))
    view = [1, 1, 1]
    view[axis] = n
    f = np.ascontiguousarray(np.broadcast_to(profile.reshape(view), shape))
    exact = np.broadcast_to(slope.reshape(view), shape)
    return f, exact, 1.0 / n


def stencil_amplification(spacing: float) -> float:
    """How much the stencil can amplify an error in f: sum over m of 2 |c_m| / spacing."""
    return float(sum(2 * abs(c) for c in exact_central_coefficients(HALO))) / spacing


def derivative_reference(f: np.ndarray, direction: str, spacing: float, half_width: int = HALO) -> np.ndarray:
    """The periodic central-difference derivative along `direction`, by numpy.roll, in float64."""
    axis = AXIS[direction] if isinstance(direction, str) else int(direction)
    values = np.asarray(f, dtype=np.float64)
    result = np.zeros_like(values)
    for m, c in enumerate(central_coefficients(half_width), start=1):
        result += c * (np.roll(values, -m, axis=axis) - np.roll(values, m, axis=axis))
    return result / spacing


def stencil_float32(f: np.ndarray, direction: str, spacing: float) -> np.ndarray:
    """The same stencil evaluated in float32 on the host, term by term as the kernels do (for error studies)."""
    axis = AXIS[direction]
    values = np.asarray(f, dtype=np.float32)
    a, b, c, d = stencil_coefficients(spacing, np.float32)
    terms = [(a, 1), (b, 2), (c, 3), (d, 4)]
    total = None
    for weight, m in terms:
        term = weight * (np.roll(values, -m, axis=axis) - np.roll(values, m, axis=axis))
        total = term if total is None else total + term
    return total


def error_norms(approximation, exact: np.ndarray) -> tuple[float, float]:
    """(RMS error, maximum error) of `approximation` against `exact`, computed in float64."""
    difference = np.asarray(approximation, dtype=np.float64) - np.asarray(exact, dtype=np.float64)
    return float(np.sqrt(np.mean(difference**2))), float(np.max(np.abs(difference)))


def truncation_and_rounding(sizes, waves: int = 1) -> dict[str, list[float]]:
    """Max error of the 1D stencil on cos(2 pi waves s) for each n in `sizes`, three ways.

    'float64': f and the stencil in float64 (truncation error only); 'float32 rounded f': f rounded
    once to float32, stencil in float32; 'float32 like the book': f evaluated in float32 as well.
    """
    out: dict[str, list[float]] = {"n": [], "float64": [], "float32 rounded f": [], "float32 like the book": []}
    for n in sizes:
        shape = (1, 1, n)
        f64, exact, h = wave(shape, "x", waves, np.float64, like_book=False)
        rounded, _, _ = wave(shape, "x", waves, np.float32, like_book=False)
        book_like, _, _ = wave(shape, "x", waves, np.float32, like_book=True)
        out["n"].append(n)
        out["float64"].append(error_norms(derivative_reference(f64, "x", h), exact)[1])
        out["float32 rounded f"].append(error_norms(stencil_float32(rounded, "x", h), exact)[1])
        out["float32 like the book"].append(error_norms(stencil_float32(book_like, "x", h), exact)[1])
    return out


# ---------------------------------------------------------------------------------------------
# Nonuniform grids (section 6.1.4): x(s) clusters points, ds/dx enters as a per-point factor


def stretched_grid(n: int, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The book's stretched periodic grid: (s uniform, x(s), ds/dx at each point), float64, for 0 <= alpha < 1.

    dx = C (1 - alpha sin^2(2 pi s)) ds, with C = 2 / (2 - alpha) so that x(0) = 0 and x(1) = 1.
    Points cluster where sin^2(2 pi s) = 1, at s = 1/4 and 3/4. alpha = 0 is the uniform grid.
    """
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha must be in [0, 1) so that the spacing stays positive; got {alpha}")
    s = periodic_grid(n)
    x = 2.0 / (2.0 - alpha) * (s - alpha * (s / 2.0 - np.sin(4 * np.pi * s) / (8 * np.pi)))
    ds_dx = (1.0 - alpha / 2.0) / (1.0 - alpha * np.sin(2 * np.pi * s) ** 2)
    return s, x, ds_dx


def nonuniform_coefficients(n: int, alpha: float, dtype=np.float32) -> np.ndarray:
    """Per-point weights, shape (4, n): the uniform weights over ds times ds/dx at each point (the chain rule)."""
    _, _, ds_dx = stretched_grid(n, alpha)
    weights = np.array([float(c) for c in exact_central_coefficients(HALO)])
    return (weights[:, None] * n * ds_dx[None, :]).astype(dtype)


def stretched_wave(shape: tuple[int, int, int], direction: str, alpha: float, waves: int = 1,
                   dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """f = cos(2 pi waves x) sampled at the stretched points along `direction`: (f in dtype, exact df/dx in float64)."""
    axis = AXIS[direction]
    _, x, _ = stretched_grid(shape[axis], alpha)
    k = 2 * np.pi * waves
    view = [1, 1, 1]
    view[axis] = shape[axis]
    f = np.broadcast_to(np.cos(k * x).reshape(view), shape).astype(dtype)
    exact = np.broadcast_to((-k * np.sin(k * x)).reshape(view), shape).astype(np.float64)
    return f, exact


def nonuniform_reference(f: np.ndarray, direction: str, coefficients: np.ndarray) -> np.ndarray:
    """The per-point stencil sum_m c_m[i] (f[i+m] - f[i-m]) along `direction`, by numpy.roll, in float64."""
    axis = AXIS[direction]
    values = np.asarray(f, dtype=np.float64)
    view = [1, 1, 1]
    view[axis] = values.shape[axis]
    result = np.zeros_like(values)
    for m in range(1, HALO + 1):
        weight = np.asarray(coefficients[m - 1], dtype=np.float64).reshape(view)
        result += weight * (np.roll(values, -m, axis=axis) - np.roll(values, m, axis=axis))
    return result


# ---------------------------------------------------------------------------------------------
# 2D Laplace equation (section 6.2): the book's problem and its Jacobi iteration on the host


def laplace_initial(shape: tuple[int, int], dtype=np.float32) -> np.ndarray:
    """The book's start: zero inside, sin(pi x) on the first row, sin(pi x) exp(-pi) on the last; a[y, x]."""
    ny, nx = shape
    kind = np.dtype(dtype).type
    a = np.zeros(shape, dtype=dtype)
    edge = np.sin(np.pi * np.arange(nx) / (nx - 1)).astype(dtype)
    a[0, :] = edge
    a[-1, :] = edge * kind(np.exp(-np.pi))
    return a


def laplace_exact(shape: tuple[int, int]) -> np.ndarray:
    """The solution the iteration converges to: phi = sin(pi x) exp(-pi y) on the unit square (float64)."""
    ny, nx = shape
    x = np.arange(nx) / (nx - 1)
    y = np.arange(ny) / (ny - 1)
    return np.sin(np.pi * x)[None, :] * np.exp(-np.pi * y)[:, None]


def jacobi_step_reference(a: np.ndarray) -> np.ndarray:
    """One Jacobi sweep of the compact nine-point stencil on the interior; the boundary is kept (in a's dtype)."""
    kind = a.dtype.type
    new = a.copy()
    edge_weight, corner_weight = kind(0.2), kind(0.05)
    north, south = a[:-2, 1:-1], a[2:, 1:-1]
    west, east = a[1:-1, :-2], a[1:-1, 2:]
    nw, ne, sw, se = a[:-2, :-2], a[:-2, 2:], a[2:, :-2], a[2:, 2:]
    new[1:-1, 1:-1] = edge_weight * (((south + west) + east) + north) + corner_weight * (((nw + ne) + sw) + se)
    return new


def laplace_residual_history(shape: tuple[int, int], iterations: int, every: int = 10, dtype=np.float32) -> list[tuple[int, float]]:
    """Max residual max|a_new - a| every `every` iterations of the book's problem, on the host, exactly.

    After n sweeps only the rows within n of the two edge rows have left zero, so the sweeps run
    on two strips of n + 2 rows: the same numbers as on the whole mesh, for a fraction of the work.
    """
    ny, nx = shape
    height = iterations + 2
    full = laplace_initial(shape, dtype)
    if 2 * height >= ny:
        strips = [full]
    else:
        strips = [full[:height].copy(), full[ny - height:].copy()]
    history = []
    for n in range(1, iterations + 1):
        residual = 0.0
        for index, strip in enumerate(strips):
            new = jacobi_step_reference(strip)
            if len(strips) == 2:  # the strip's inner edge row stands for rows that are still exactly zero
                new[-1 if index == 0 else 0, :] = strip[-1 if index == 0 else 0, :]
            residual = max(residual, float(np.max(np.abs(new - strip))))
            strips[index] = new
        if n % every == 0:
            history.append((n, residual))
    return history


# ---------------------------------------------------------------------------------------------
# 2D heat equation (seed 003): the model of several time steps per launch


def heat_step_reference(u: np.ndarray, d: float) -> np.ndarray:
    """One explicit step u + d (north + west + east + south - 4 u) inside; the boundary is kept (in u's dtype)."""
    kind = u.dtype.type
    new = u.copy()
    centre = u[1:-1, 1:-1]
    total = ((u[:-2, 1:-1] + u[1:-1, :-2]) + u[1:-1, 2:]) + u[2:, 1:-1]
    new[1:-1, 1:-1] = centre + kind(d) * (total - kind(4) * centre)
    return new


def model_parameters() -> tuple[int, int, int]:
    """The article's (a, p, D): flops per point per step, threads per block side, dimensions (seed 003)."""
    return (int(book.figure("art003_model_a").number), int(book.figure("art003_model_p").number),
            int(book.figure("art003_model_D").number))


def global_accesses_per_point_step(s, p: int, dims: int) -> np.ndarray:
    """Global reads and writes per useful point-update with s steps per launch on p^D-thread blocks: (p^D + (p-2s)^D) / (s (p-2s)^D)."""
    s = np.asarray(s, dtype=np.float64)
    inner = (p - 2 * s) ** dims
    if np.any(inner <= 0):
        raise ValueError(f"s must be below p/2 = {p / 2}: a block of {p} threads a side keeps p - 2s points")
    return (p**dims + inner) / (s * inner)


def useful_flops_per_access(s, a: int = 7, p: int = 32, dims: int = 2) -> np.ndarray:
    """The article's f(s) = a s (p - 2s)^D / (p^D + (p - 2s)^D): useful flops per global memory access."""
    return a / global_accesses_per_point_step(s, p, dims)


def best_steps_per_launch(a: int, p: int, dims: int) -> int:
    """The s in 1 .. (p - 1) // 2 that maximises f(s)."""
    candidates = np.arange(1, (p - 1) // 2 + 1)
    return int(candidates[np.argmax(useful_flops_per_access(candidates, a, p, dims))])


def model_time_per_step_ms(s, p: int, dims: int, points: int, bytes_per_value: int, bandwidth_gbs: float) -> np.ndarray:
    """Time of one time step (ms) if the kernel were bound by its global traffic at `bandwidth_gbs` (GB/s)."""
    traffic = global_accesses_per_point_step(s, p, dims) * points * bytes_per_value
    return traffic / (bandwidth_gbs * 1e9) * 1e3
