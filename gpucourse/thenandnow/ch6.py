"""Chapter 6 of the report: derivative stencils (accuracy, bandwidth, occupancy), the Laplace and heat equations."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import book, stencil2d
from .. import finite_difference as fd
from ..arrays import device_empty, poisoned, random_array, to_device, to_host
from ..errors import CourseError, GPUOnlyFeature
from ..sizes import problem_size
from .core import BookCell, ChapterPlan, Context, Row, Section, cells

STEPS = ("ch6: coefficients and accuracy", "ch6: derivative bandwidth at the book's grid", "ch6: derivative bandwidth on large grids",
         "ch6: occupancy arithmetic", "ch6: Laplace equation", "ch6: heat equation")

NOT_MEASURED = {
    r"ch6_deriv_x_(memonly|mathonly)_.*": "the book's memory-only / math-only split of the 64x4 x kernel; chapter 2 applies that method "
                                          "(rows there), chapter 6 finds the limits with bytes in flight and instruction counts instead",
    r"ch6_nonuniform_const_.*": "coefficients in constant memory: Numba cannot put a run-time array in constant memory, so the course keeps "
                                "per-point coefficients in device memory (the book's 'device' rows)",
    r"ch6_nonuniform_x_degradation": "the book's loss from its constant-memory variant (not measured, see the row above)",
    r"art001_halo_overlap": "a remark on a 16x16 tile the article rejects; the course's tiles have no such overlap",
    r"ch6_deriv_x_regs_limit_full_occ_K20": "arithmetic on the K20's limits (65536 registers / 2048 threads); the occupancy rows apply the same "
                                             "calculator to this GPU",
    r"(art000|art002)_(max_tpb|max_thr_sm)_.*|art000_smem_sm|art000_threads_needed|art002_threads_needed|art000_pencils_for_coalescing_C2050":
        "device limits and tile arithmetic quoted in the articles; the occupancy rows compute them for this GPU",
    r"art002_x_bw_ref_K20": "a figure the article quotes from its part 1 (the art001 row measures it)",
}


def _wave_errors(n: int) -> list[tuple[str, str, tuple[float, float]]]:
    """RMS and max error of the book's kernels (and the tuned x tile) on the book's test function at n^3, float32."""
    from ..kernels import stencil

    shape = (n, n, n)
    found = []
    rows = problem_size("ch6_lpencils_rows")
    kernels: list[tuple[str, str, Callable]] = [
        ("x", "x, book sPencils tile (64x4 at 64^3)", lambda f, df, c: stencil.deriv_x_book(f, df, c, pencils=4)),
        ("x", "x, tuned tile (one barrier, several pencils per block)", lambda f, df, c: stencil.deriv_x(f, df, c)),
        ("y", "y, book sPencils tile", lambda f, df, c: stencil.deriv_yz(f, df, "y", c, stencil.book_spencils_tile(n))),
        ("y", "y, book lPencils tile", lambda f, df, c: stencil.deriv_yz(f, df, "y", c, stencil.book_lpencils_tile(n, rows=rows))),
        ("z", "z, book lPencils tile", lambda f, df, c: stencil.deriv_yz(f, df, "z", c, stencil.book_lpencils_tile(n, rows=rows))),
    ]
    for direction, label, launch in kernels:
        f_host, exact, h = fd.wave(shape, direction)
        df = to_device(poisoned(shape))
        launch(to_device(f_host), df, stencil.coefficients_for(f_host, h))
        found.append((direction, label, fd.error_norms(to_host(df), exact)))
    return found


def accuracy(ctx: Context) -> list[Section]:
    """The stencil's coefficients and the kernels' errors at the book's grid size."""
    ctx.step(STEPS[0])
    coefficients = Section("The eighth-order stencil (§6.1)")
    exact = fd.exact_central_coefficients()
    for name, value in zip("abcd", exact):
        coefficients.rows.append(Row(f"coefficient {name} (times the spacing)", cells(f"ch6_stencil_coef_{name}", f"art001_coef_{name}"),
                                     str(value), "", note="solved exactly from the Taylor series (finite_difference.exact_central_coefficients)"))
    n = problem_size("ch6_book_grid")
    coefficients.rows.append(Row("grid of the accuracy and bandwidth tests", cells("ch6_grid_size", "art001_grid"), f"{n}^3",
                                 note="large grids are in the bandwidth section"))
    errors = Section(f"Accuracy of the derivative kernels, {n}^3 float32, f = cos(2 pi x) as in the book")
    book_ids = {"x, book sPencils tile (64x4 at 64^3)": ("ch6_deriv_x_64x4_{}_K20", "art001_x_64x4_{}_K20c"),
                "x, tuned tile (one barrier, several pencils per block)": ("ch6_deriv_x_64x4_1sync_{}_K20", "ch6_deriv_x_64x32_{}_K20",
                                                                          "art000_x_64x32_{}_C2050"),
                "y, book sPencils tile": ("ch6_deriv_y_4x64_{}_K20", "art000_y_4x64_{}_C2050"),
                "y, book lPencils tile": ("ch6_deriv_y_32x64_{}_K20", "art000_y_32x64_{}_C2050"),
                "z, book lPencils tile": ()}
    for _, label, (rms, largest) in _wave_errors(n):
        ids = book_ids[label]
        errors.rows.append(Row(f"{label}: RMS error", [BookCell.of(i.format("rms")) for i in ids], rms, "abs"))
        errors.rows.append(Row(f"{label}: max error", [BookCell.of(i.format("max")) for i in ids], largest, "abs"))
    if n != int(book.figure("ch6_grid_size").number):
        errors.notes.append(f"Simulator sizes: a {n}^3 grid, so the errors are not the book's 64^3 errors.")
    return [coefficients, errors]


def _bandwidth_rows(ctx: Context, n: int, title: str, with_book: bool) -> Section:
    """The derivative kernels' effective bandwidth on an n^3 float32 grid (book figures beside them at the book's size)."""
    from ..kernels import stencil

    shape = (n, n, n)
    host = random_array(shape, np.float32, seed=n)
    f, df = to_device(host), device_empty(shape, np.float32)
    c = stencil.coefficients_for(host, 1.0 / n)
    per_point = {d: to_device(fd.nonuniform_coefficients(n, problem_size("ch6_nonuniform_alpha"))) for d in "xyz"}
    lrows = problem_size("ch6_lpencils_rows")
    nbytes = stencil.bytes_moved(shape, 4)
    # up to twice the L2 moved per launch, much of a launch's data can still be in L2 when the next one reads it
    fits_l2 = bool(ctx.device.l2_cache_bytes) and nbytes <= 2 * ctx.device.l2_cache_bytes
    kernels: list[tuple[str, tuple[str, ...], Callable[[], object]]] = [
        ("x, no tile, periodic index by %", (), lambda: stencil.deriv_x_global(f, df, c, modulo=True)),
        ("x, book sPencils tile (nx x 4 threads)", ("ch6_deriv_x_64x4_bw_K20", "art001_x_64x4_bw_K20c", "ch6_uniform_x_64x4_bw_K20",
                                                    "ch6_deriv_x_64x4_time_K20", "art001_x_64x4_time_K20c"),
         lambda: stencil.deriv_x_book(f, df, c, pencils=4)),
        ("x, tuned tile (one barrier, several points per thread)", ("ch6_deriv_x_64x4_1sync_bw_K20", "ch6_deriv_x_64x32_bw_K20",
                                                                    "art000_x_64x32_bw_C2050", "ch6_uniform_x_64x32_bw_K20",
                                                                    "ch6_deriv_x_64x4_1sync_time_K20", "ch6_deriv_x_64x32_time_K20",
                                                                    "art000_x_64x32_time_C2050"),
         lambda: stencil.deriv_x(f, df, c)),
        ("x, tuned tile, per-point coefficients (nonuniform grid)", ("ch6_nonuniform_device_x_64x4_bw_K20", "ch6_nonuniform_device_x_64x32_bw_K20"),
         lambda: stencil.deriv_x(f, df, per_point["x"])),
    ]
    for d in "yz":
        s_ids = (f"ch6_deriv_{d}_4x64_bw_K20", f"ch6_deriv_{d}_4x64_time_K20", f"art000_{d}_4x64_bw_C2050", f"art000_{d}_4x64_time_C2050",
                 f"ch6_uniform_{d}_4x64_bw_K20")
        l_ids = (f"ch6_deriv_{d}_32x64_bw_K20", f"ch6_deriv_{d}_32x64_time_K20", f"art000_{d}_32x64_bw_C2050", f"art000_{d}_32x64_time_C2050",
                 f"ch6_uniform_{d}_32x64_bw_K20")
        existing = {fig.id for fig in book.figures("ch6_")} | {fig.id for fig in book.figures("art000_")}
        kernels += [
            (f"{d}, book sPencils tile (4 columns)", tuple(i for i in s_ids if i in existing),
             lambda d=d: stencil.deriv_yz(f, df, d, c, stencil.book_spencils_tile(n))),
            (f"{d}, book lPencils tile (32 columns, whole line)", tuple(i for i in l_ids if i in existing),
             lambda d=d: stencil.deriv_yz(f, df, d, c, stencil.book_lpencils_tile(n, rows=lrows))),
            (f"{d}, tuned tile", (), lambda d=d: stencil.deriv_yz(f, df, d, c)),
            (f"{d}, tuned tile, per-point coefficients (nonuniform grid)",
             tuple(i for i in (f"ch6_nonuniform_device_{d}_4x64_bw_K20", f"ch6_nonuniform_device_{d}_32x64_bw_K20") if i in existing),
             lambda d=d: stencil.deriv_yz(f, df, d, per_point[d])),
            (f"{d}, register tile", (), lambda d=d: stencil.deriv_yz_registers(f, df, d, c)),
        ]
    section = Section(title)
    for label, ids, launch in kernels:
        shown = [BookCell.of(i) for i in ids] if with_book else []
        try:
            timing = ctx.time(launch)
        except CourseError as refused:  # a tile this grid cannot have (a whole 512-point line in shared memory, say)
            section.rows.append(Row(label, shown, None, "GB/s", note=f"refused: {refused}"))
            continue
        gbs = timing.bandwidth_gbs(nbytes)
        note = f"{1e3 * timing.median_ms:.1f} us per derivative"
        if timing.host_limited:
            note += f"; back to back {timing.back_to_back_gbs(nbytes):.0f} GB/s"
        section.rows.append(Row(label, shown, gbs, "GB/s" if not ctx.simulated else "GB/s (simulator)",
                                None if fits_l2 else ctx.fraction(gbs), note=note))
    if fits_l2 and not ctx.simulated:
        section.notes.append(f"{n}^3 fits in this GPU's L2 cache: no fraction of the copy is given (it could exceed 100 %).")
    return section


def bandwidth(ctx: Context) -> list[Section]:
    """The derivative kernels at the book's grid, beside its figures, and on grids that fill the GPU."""
    ctx.step(STEPS[1])
    n = problem_size("ch6_book_grid") if not ctx.simulated else min(problem_size("ch6_table_grids"))
    sections = [_bandwidth_rows(ctx, n, f"Derivative bandwidth at the book's grid, {n}^3 float32 (§6.1.2–6.1.4, articles)", True)]
    ctx.step(STEPS[2])
    for side in problem_size("ch6_table_grids"):
        if side > n:
            sections.append(_bandwidth_rows(ctx, side, f"Derivative bandwidth on a {side}^3 float32 grid", False))
    return sections


def occupancy_rows(ctx: Context) -> list[Section]:
    """Registers, shared memory and occupancy of the book's tiles: the book's arithmetic, and this GPU's compiler and limits."""
    from ..kernels import stencil
    from ..occupancy import book_sm_limits, kernel_occupancy, occupancy

    ctx.step(STEPS[3])
    section = Section("Occupancy of the book's tiles (§6.1.2–6.1.3, articles)")
    n = 64
    x_tile, y_tile = stencil.book_x_tile(n), stencil.book_lpencils_tile(n)
    section.rows.append(Row("x sPencils tile 64x4: shared memory per block", cells("ch6_deriv_x_smem_K20"), x_tile.shared_bytes(n, 4), "bytes"))
    section.rows.append(Row("x sPencils tile: thread blocks of a 64^3 grid", cells("ch6_deriv_x_blocks"), (n // 4) * n, "blocks"))
    section.rows.append(Row("y lPencils tile 32x(64+8): shared memory per block", cells("ch6_deriv_y_lpencils_smem", "art000_lpencils_smem",
                                                                                          "art002_lpencils_smem"), y_tile.shared_bytes(4), "bytes"))
    for gpu, regs_id, prefix in (("Tesla K20", "ch6_deriv_y_lpencils_regs_K20", "ch6_deriv_y_lpencils"),
                                 ("Tesla C2050", "art000_lpencils_regs", "art000_lpencils"),
                                 ("Tesla K20", "art002_lpencils_regs", "art002_lpencils")):
        regs = int(book.figure(regs_id).number)
        occ = occupancy(y_tile.threads_per_block, regs, y_tile.shared_bytes(4), book_sm_limits(gpu))
        blocks_id = f"{prefix}_blocks_sm_K20" if prefix.startswith("ch6") else f"{prefix}_blocks_sm"
        threads_id = f"{prefix}_threads_sm_K20" if prefix.startswith("ch6") else f"{prefix}_threads_sm"
        occ_id = f"{prefix}_occ_K20" if prefix.startswith("ch6") else f"{prefix}_occupancy"
        section.rows.append(Row(f"lPencils on the {gpu} with {regs} registers: blocks per SM (the course's calculator)",
                                cells(regs_id, blocks_id), occ.blocks_per_sm, "blocks"))
        section.rows.append(Row(f"lPencils on the {gpu}: resident threads per SM, occupancy", cells(threads_id, occ_id),
                                f"{occ.blocks_per_sm * y_tile.threads_per_block} threads, {occ.fraction:.3f}"))
    try:
        for label, kernel, threads, ids in (
                ("x sPencils tile 64x4", stencil.deriv_x_book_kernel(n, 4, "float32"), n * 4, ("ch6_deriv_x_regs_K20",)),
                ("y lPencils tile 32x64", stencil.deriv_axis1_kernel(64, 32, 8, "float32", False), 256, ())):
            occ = kernel_occupancy(kernel, threads)
            section.rows.append(Row(f"{label} on this GPU: registers per thread, occupancy", cells(*ids),
                                    f"{occ.registers_per_thread} registers, {occ.fraction:.3f} ({occ.limited_by})"))
    except (GPUOnlyFeature, ValueError, IndexError) as exc:  # the simulator compiles nothing; an uncompiled kernel has no report
        section.rows.append(Row("x sPencils tile 64x4 on this GPU: registers per thread, occupancy", cells("ch6_deriv_x_regs_K20"), None,
                                note=f"not available here: {exc}"))
    return [section]


def laplace_rows(ctx: Context) -> list[Section]:
    """The Laplace solve: residuals digit for digit, time per sweep, and the whole loop as the book timed it."""
    from ..kernels import laplace

    ctx.step(STEPS[4])
    section = Section("The Laplace equation, Jacobi sweeps (§6.2)")
    book_shape = tuple(int(v) for v in book.figure("ch6_laplace_mesh").value.split(" x "))
    shape = book_shape if not ctx.simulated else problem_size("ch6_laplace")
    initial = fd.laplace_initial(shape)
    iterations = 100 if not ctx.simulated else problem_size("ch6_laplace_iterations")[0]
    every = 10 if not ctx.simulated else problem_size("ch6_laplace_iterations")[1]
    section.rows.append(Row("mesh", cells("ch6_laplace_mesh"), f"{shape[0]} x {shape[1]}"))
    if ctx.simulated:  # the book's mesh on the host (two strips: the rest stays zero for 100 sweeps), the same arithmetic
        history = fd.laplace_residual_history(book_shape, 100, 10)
        where = "NumPy on the host, the book's mesh (the simulator cannot sweep 4096 x 4096)"
    else:
        _, history = laplace.jacobi_iterations(initial, iterations, "global", every)
        where = "this GPU, the book's mesh, the tuned global sweep"
    for iteration, residual in history:
        section.rows.append(Row(f"max residual after {iteration} sweeps", cells(f"ch6_laplace_residual_it{iteration}"), f"{residual:.6f}",
                                note=f"{where}: the iteration is arithmetic, so the digits must agree"))
    measured = stencil2d.measure(shape, repeat=ctx.repeat, parts=("jacobi",))  # the book's kernels and the tuned ones
    names = {"global": "global", "shared": "shared", "readonly": "read-only", "texture": "texture"}
    for method in laplace.METHODS:
        for kind in ("the book's", "tuned"):
            label = f"Jacobi {names[method]}, {kind}"
            ids = [f"ch6_laplace_{method}_kernel_K20"] if kind == "the book's" and method != "readonly" else []
            quantity = f"one sweep, {method}, {kind} kernel: GPU time"
            m = measured.rows.get(label)
            if m is None:
                section.rows.append(Row(quantity, cells(*ids), None, "us", note=measured.skipped.get(label, "not measured")))
                continue
            note = "simulator time" if ctx.simulated else (f"{m.of_copy:.2f} of copy; a loop of public calls "
                                                           f"{m.back_to_back_of_copy:.2f} of copy")
            section.rows.append(Row(quantity, cells(*ids), m.us, "us", None if ctx.simulated else m.of_copy, note=note))
    for method in ("global", "shared"):
        label = f"{iterations} sweeps with residuals, {method}: whole run from host arrays (transfers included)"
        if ctx.simulated and method != "global":  # one simulated run is enough to show the code path
            section.rows.append(Row(label, cells(f"ch6_laplace_{method}_total_K20"), None, "s", note="measured on a GPU only"))
            continue
        run = laplace.iteration_times(initial, iterations, method, every, repeat=max(1, ctx.repeat // 3))
        section.rows.append(Row(label, cells(f"ch6_laplace_{method}_total_K20"), run.graph_wall_ms / 1e3, "s",
                                note=f"on device data {run.device_wall_ms:.1f} ms; GPU time of the sweeps and checks {run.gpu_ms:.1f} ms"))
    section.rows.append(Row(f"{iterations} sweeps, texture: whole run", cells("ch6_laplace_texture_total_K20"), None, "s",
                            note="the texture version runs in notebook 6.4; the whole-run row is kept to global and shared"))
    return [section]


def heat_rows(ctx: Context) -> list[Section]:
    """The heat equation of seed 003: the article's counts and model, the article's kernels beside the tuned ones, and the
    2D stencils against the copy on the record's mesh (one `gpucourse.stencil2d` measurement)."""
    ctx.step(STEPS[5])
    section = Section("The heat equation, several time steps per launch (seed 003)")
    a, p, dims = fd.model_parameters()
    section.rows.append(Row("global accesses per point, global-memory step (5 reads, 1 write)", cells("art003_gm_accesses"), 6))
    section.rows.append(Row("global accesses per point, shared-memory step", cells("art003_shm_accesses"), 2))
    section.rows.append(Row("flops per point per step", cells("art003_gm_flops", "art003_shm_flops", "art003_model_a"), a))
    section.rows.append(Row("model: threads per block side p, dimensions D", cells("art003_model_p", "art003_model_D"), f"p = {p}, D = {dims}"))
    best_model = fd.best_steps_per_launch(a, p, dims)
    section.rows.append(Row("article's block width and steps per launch", cells("art003_ntx", "art003_nsteps"),
                            f"tile {problem_size('ch6_heat_tile')}, best s by the model: {best_model}"))
    measured = stencil2d.measure(repeat=ctx.repeat, parts=("heat", "jacobi"))  # the record's mesh: beyond the L2 cache
    shape = measured.shape
    best = measured.best_steps
    rows = measured.rows
    one_step = rows["heat, tuned one step"]
    for label, m in rows.items():
        if not label.startswith("heat") or label.startswith("heat, tuned multi-step") and m.steps != best:
            continue
        quantity = f"{label}, {shape[0]} x {shape[1]} float32: GPU time per step"
        note = f"{m.us:.1f} us per launch of {m.steps} step(s)" if m.steps > 1 else ""
        if not ctx.simulated:
            note += ("; " if note else "") + f"{one_step.us_per_step / m.us_per_step:.2f}x the tuned one step's speed"
        section.rows.append(Row(quantity, [], m.us_per_step, "us", None if ctx.simulated or m.steps > 1 else m.of_copy, note=note))
    section.rows.append(Row(f"measured best steps per launch of the tuned multi-step kernel, {shape[0]} x {shape[1]} float32", [], best,
                            note="" if ctx.simulated else f"speed-up per step over the tuned one-step kernel "
                                                          f"{measured.heat_blocked_speedup_per_step:.2f}x"))
    jacobi = Section(f"The 2D stencils against the copy at {shape[0]} x {shape[1]} float32" + ("" if ctx.simulated else " (beyond the L2 cache)"))
    for label, m in rows.items():
        if label.startswith("Jacobi"):
            jacobi.rows.append(Row(f"{label}: one sweep", [], m.us, "us", None if ctx.simulated else m.of_copy,
                                   note="" if ctx.simulated else f"a loop of public calls {m.back_to_back_of_copy:.2f} of copy"))
    for label, reason in measured.skipped.items():
        jacobi.rows.append(Row(f"{label}: one sweep", [], None, "us", note=reason))
    if ctx.simulated:
        jacobi.notes.append("Simulator mode: times of Python threads; no fraction of a GPU ceiling.")
    return [section, jacobi]


def measure(ctx: Context) -> list[Section]:
    """Every chapter-6 section of the report."""
    return accuracy(ctx) + bandwidth(ctx) + occupancy_rows(ctx) + laplace_rows(ctx) + heat_rows(ctx)


PLAN = ChapterPlan(6, "Finite differences", STEPS, measure, NOT_MEASURED)
