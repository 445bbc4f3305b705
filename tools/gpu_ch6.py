"""Chapter 6 on a GPU in one run: copy ceiling, every derivative kernel, Laplace and heat-equation variants.

    python3 tools/gpu_ch6.py [--explore] [--out DIR]

Prints each measurement as it is taken and a short table at the end; writes every number to
DIR/ch6_results.json. Each kernel's output is checked (against a float64 numpy.roll reference at
the first sizes, against the checked kernels on larger grids) before it is timed. --explore adds
the sweeps of tile shapes that chose the tuned defaults. The measurements of record are in
measurements/ch6.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import gpucourse  # noqa: E402  (first: it picks the mode)
from gpucourse import finite_difference as fd  # noqa: E402
from gpucourse.compilation import count_matches, ptx, resource_usage  # noqa: E402
from gpucourse.kernels import heat, laplace, stencil  # noqa: E402
from gpucourse.occupancy import api_blocks_per_sm, kernel_occupancy  # noqa: E402

RESULTS: list[dict] = []
CEILINGS = None
DEADLINE = float("inf")  # time.time() after which remaining measurements are skipped (--budget)


def out_of_time(what: str) -> bool:
    if time.time() > DEADLINE:
        log(f"  .. skipped (time budget spent): {what}")
        return True
    return False


def log(*parts) -> None:
    print(*parts, flush=True)


def kernel_report(kernel, threads: int, index: int = 0) -> dict:
    """Registers, shared and local memory, and occupancy (ours and the CUDA API's) of a compiled kernel."""
    try:
        usage = resource_usage(kernel)[index]
        occ = kernel_occupancy(kernel, threads, index=index)
        return {"registers": usage.registers, "shared_bytes": usage.shared_bytes, "local_bytes": usage.local_bytes,
                "blocks_per_sm": occ.blocks_per_sm, "occupancy": round(occ.fraction, 3), "limited_by": occ.limited_by,
                "api_blocks_per_sm": api_blocks_per_sm(kernel, threads, index=index)}
    except Exception as exc:  # a report that cannot be made is noted, not fatal
        return {"report_error": f"{type(exc).__name__}: {exc}"}


def timed(group: str, name: str, size: str, call, nbytes: float, extra: dict | None = None, repeat: int = 15) -> dict | None:
    try:
        timing = gpucourse.benchmark(call, repeat=repeat)
    except Exception as exc:
        log(f"  !! {group} {name} {size}: {type(exc).__name__}: {exc}")
        RESULTS.append({"group": group, "name": name, "size": size, "error": str(exc)})
        return None
    gbs = timing.bandwidth_gbs(nbytes)
    row = {"group": group, "name": name, "size": size, "ms": timing.median_ms, "min_ms": timing.min_ms, "max_ms": timing.max_ms,
           "gbs": gbs, "fraction_of_copy": gbs / CEILINGS.copy_gbs, "launch_bound": timing.launch_bound,
           "host_ms_per_call": timing.host_ms_per_call, "clock": timing.clock, **(extra or {})}
    RESULTS.append(row)
    log(f"  {group:10s} {name:44s} {size:10s} {timing.median_ms * 1e3:9.1f} us  {gbs:7.0f} GB/s  {row['fraction_of_copy']:5.2f} of copy"
        + ("  LAUNCH-BOUND" if timing.launch_bound else ""))
    return row


# ---------------------------------------------------------------------------------------------
# Derivatives


def derivative_variants(n: int, direction: str, explore: bool) -> list[tuple[str, object, dict]]:
    """(name, launch(f, df, coef), kernel info) for every variant of one direction."""
    variants = []
    if direction == "x":
        variants.append(("global, % wrap", lambda f, df, c: stencil.deriv_x_global(f, df, c, modulo=True),
                         {"kernel": stencil.deriv_x_global_modulo_kernel, "threads": 256}))
        variants.append(("global, branch wrap", lambda f, df, c: stencil.deriv_x_global(f, df, c),
                         {"kernel": stencil.deriv_x_global_kernel, "threads": 256}))
        if 4 * n <= 1024:
            variants.append((f"book sPencils {n}x4 (1 pt/thread, 2 barriers)", lambda f, df, c: stencil.deriv_x_book(f, df, c, 4),
                             {"kernel": stencil.deriv_x_book_kernel(n, 4, "float32"), "threads": n * 4}))
        default = stencil.default_x_tile((n, n, n))
        tiles = [(default.threads_x, default.pencils, default.rows, False)]
        tiles += [(t, p, r, True) for t, p, r in [(default.threads_x, default.pencils, default.rows), (n, 4, 4), (64, 4, 4), (32, 8, 8)]]
        if explore:
            tiles += [(t, p, r, True) for t, p, r in [(64, 8, 4), (32, 16, 8), (128, 8, 2), (64, 16, 8), (128, 16, 4), (32, 4, 4)]]
        for t in dict.fromkeys(tiles):
            tile = stencil.XTile(*t[:3])
            if tile.threads_x > n or tile.threads_per_block > 1024 or tile.shared_bytes(n, 4) > 48 * 1024 or tile.pencils % tile.rows:
                continue
            label = f"tiled {tile.describe(n)}, {'nonneg' if t[3] else 'signed'}"
            variants.append((label, lambda f, df, c, tile=tile, u=t[3]: stencil.deriv_x(f, df, c, tile, u),
                             {"kernel": stencil.deriv_x_kernel(n, *t[:3], "float32", False, t[3]), "threads": tile.threads_per_block}))
        return variants
    tiles = [(n, 4, n if n <= 1024 else 256, False), (n, 32, 8, False), (n, 32, 8, True), (64, 32, 4, True), (64, 32, 8, True)]
    if explore:
        tiles += [(32, 32, 8, True), (128, 32, 8, True), (n, 32, 16, True), (64, 32, 16, True), (32, 32, 4, True), (n, 4, n, True)]
    for t in dict.fromkeys(tiles):
        tile = stencil.AxisTile(*t[:3])
        if tile.length > n or n % tile.length or tile.threads_per_block > 1024 or tile.shared_bytes(4) > 48 * 1024:
            continue
        kind = "sPencils" if tile.pencils == 4 else "lPencils"
        label = f"{kind} {tile.describe(direction)}, {'nonneg' if t[3] else 'signed'}"
        variants.append((label, lambda f, df, c, tile=tile, u=t[3]: stencil.deriv_yz(f, df, direction, c, tile, u),
                         {"kernel": stencil.deriv_axis1_kernel(*t[:3], "float32", False, t[3]), "threads": tile.threads_per_block}))
    chunks = [(32, 32, 4), (16, 32, 8)] + ([(32, 32, 8), (16, 32, 4)] if explore else [])
    for chunk, pencils, rows in chunks:
        if n % chunk:
            continue
        variants.append((f"registers, {chunk} pts/thread, {pencils}x{rows} threads",
                         lambda f, df, c, ch=chunk, p=pencils, r=rows: stencil.deriv_yz_registers(f, df, direction, c, ch, p, r),
                         {"kernel": stencil.deriv_axis1_registers_kernel(chunk, pencils, rows, "float32"), "threads": pencils * rows}))
    variants.append(("transposed (swap, x kernel, swap back)", None, {}))
    return variants


def run_nonuniform(n: int) -> None:
    """Per-point coefficients against uniform ones, with the default tiles (notebook 6.3)."""
    shape = (n, n, n)
    host = gpucourse.random_array(shape, np.float32, seed=5)
    f, df = gpucourse.to_device(host), gpucourse.device_empty(shape, np.float32)
    alpha = gpucourse.problem_size("ch6_nonuniform_alpha")
    coefficients = fd.nonuniform_coefficients(n, alpha)
    per_point = gpucourse.to_device(coefficients)
    log(f"-- per-point coefficients (alpha = {alpha}), {n}^3")
    for direction in "xyz":
        if out_of_time(f"nonuniform {direction}"):
            return
        check = gpucourse.to_device(gpucourse.poisoned(shape))
        stencil.derivative(f, check, direction, per_point)
        reference = fd.nonuniform_reference(host, direction, coefficients)
        error = float(np.max(np.abs(gpucourse.to_host(check) - reference)) / np.max(np.abs(reference)))
        for label, coef in (("uniform", stencil.coefficients_for(host, 1.0 / n)), ("per-point", per_point)):
            timed("nonuniform", f"{direction} default tile, {label}", f"{n}^3", lambda d=direction, c=coef: stencil.derivative(f, df, d, c),
                  stencil.bytes_moved(shape, 4), {"direction": direction, "max_rel_error": error})


def run_derivatives(n: int, explore: bool, check_against_reference: bool) -> dict:
    shape = (n, n, n)
    nbytes = stencil.bytes_moved(shape, 4)
    host = gpucourse.random_array(shape, np.float32, seed=n)
    f = gpucourse.to_device(host)
    df = gpucourse.device_empty(shape, np.float32)
    best = {}
    for direction in "xyz":
        h = 1.0 / n
        coef = stencil.coefficients_for(host, h)
        reference = fd.derivative_reference(host, direction, h) if check_against_reference else None
        scale = float(np.max(np.abs(reference))) if reference is not None else None
        checked = None
        work = stencil.transpose_work(f, direction) if direction != "x" else None
        log(f"-- {direction} derivative, {n}^3 float32 ({nbytes / 1e6:.0f} MB moved per call)")
        for name, launch, info in derivative_variants(n, direction, explore):
            if out_of_time(f"{direction} {name} {n}^3"):
                break
            if launch is None:  # the transposed route needs its scratch arrays
                launch = lambda f_, df_, c_, d_=direction, w_=work: stencil.deriv_transposed(f_, df_, d_, c_, w_)  # noqa: E731
            try:
                df_host_poison = gpucourse.to_device(gpucourse.poisoned(shape))
                launch(f, df_host_poison, coef)
                got = gpucourse.to_host(df_host_poison)
                if reference is not None:
                    error = float(np.max(np.abs(got - reference))) / scale
                elif checked is not None:
                    error = float(np.max(np.abs(got - checked))) / float(np.max(np.abs(checked)))
                else:
                    error = float("nan")
                if checked is None:
                    checked = got
                del df_host_poison
            except Exception as exc:
                log(f"  !! {direction} {name}: {type(exc).__name__}: {exc}")
                traceback.print_exc()
                continue
            extra = {"direction": direction, "n": n, "max_rel_error": error}
            if info.get("kernel") is not None:
                extra.update(kernel_report(info["kernel"], info["threads"]))
            if not (error < 1e-5):
                log(f"  !! {direction} {name}: relative error {error:.2e}: NOT timed")
                RESULTS.append({"group": f"deriv_{direction}", "name": name, "size": f"{n}^3", "error": f"wrong result {error:.2e}"})
                continue
            row = timed(f"deriv_{direction}", name, f"{n}^3", lambda launch=launch, coef=coef: launch(f, df, coef), nbytes, extra)
            if row and (direction not in best or row["gbs"] > best[direction]["gbs"]):
                best[direction] = row
        del reference
    return best


def float64_constants_demo(n: int) -> None:
    """The tuned x kernel handed Python floats: Numba compiles a float64 version of the arithmetic."""
    shape = (n, n, n)
    host = gpucourse.random_array(shape, np.float32, seed=1)
    f, df = gpucourse.to_device(host), gpucourse.device_empty(shape, np.float32)
    tile = stencil.default_x_tile(shape)
    kernel = stencil.deriv_x_kernel(n, tile.threads_x, tile.pencils, tile.rows, "float32", False)
    grid = (n // tile.pencils, n)
    good = stencil.coefficients_for(host, 1.0 / n)
    bad = tuple(float(c) for c in good)
    for label, coefficients in (("float32 coefficients", good), ("Python float coefficients", bad)):
        kernel[grid, (tile.threads_x, tile.rows)](f, df, coefficients)
        gpucourse.synchronize()
        index = len(kernel.overloads) - 1
        f64 = count_matches(ptx(kernel, index), r"\.f64")
        timed("constants", f"x tiled, {label}", f"{n}^3", lambda c=coefficients: kernel[grid, (tile.threads_x, tile.rows)](f, df, c),
              stencil.bytes_moved(shape, 4), {"f64_ptx_lines": f64, **kernel_report(kernel, tile.threads_per_block, index)})


# ---------------------------------------------------------------------------------------------
# Laplace and heat


def run_laplace() -> None:
    shape = gpucourse.problem_size("ch6_laplace")
    iterations, every = gpucourse.problem_size("ch6_laplace_iterations")
    block = gpucourse.problem_size("ch6_laplace_block")
    initial = fd.laplace_initial(shape)
    book_history = [(n, gpucourse.book.figure(f"ch6_laplace_residual_it{n}").number) for n in range(10, 101, 10)]
    log(f"-- Laplace {shape[0]}x{shape[1]} float32, {iterations} sweeps")
    for method in laplace.METHODS:
        if out_of_time(f"laplace {method}"):
            break
        try:
            _, history = laplace.jacobi_iterations(initial, iterations, method, every, block)
            agree = all(f"{r:.6f}" == f"{b:.6f}" for (_, r), (_, b) in zip(history, book_history))
            a, a_new = gpucourse.to_device(initial), gpucourse.to_device(initial)
            sweep = laplace.sweeper(a, a_new, method, block)
            timed("laplace", method, f"{shape[0]}x{shape[1]}", lambda sweep=sweep: sweep(0), laplace.bytes_per_sweep(shape, 4),
                  {"residuals": history, "residuals_match_book": agree})
        except Exception as exc:
            log(f"  !! laplace {method}: {type(exc).__name__}: {exc}")
            traceback.print_exc()


def run_heat(explore: bool) -> None:
    shape = gpucourse.problem_size("ch6_heat")
    tile = gpucourse.problem_size("ch6_heat_tile")
    d = 0.2
    host = gpucourse.random_array(shape, np.float32, seed=3, low=0.0, high=1.0)
    u, v = gpucourse.to_device(host), gpucourse.to_device(host)
    nbytes = heat.bytes_per_step(shape, 4)
    log(f"-- heat {shape[0]}x{shape[1]} float32, tile {tile}")
    # agreement first, on a smaller mesh: s steps per launch against s single steps, bit for bit
    small = gpucourse.random_array(gpucourse.problem_size("ch6_heat_test"), np.float32, seed=4)
    singles = [small]
    for _ in range(16):
        singles.append(heat.heat_run(singles[-1], 1, d, "global"))
    agreement = {s: bool(np.array_equal(heat.heat_run(small, 2 * s, d, "shared", tile, s), singles[2 * s]))
                 for s in gpucourse.problem_size("ch6_heat_steps")}
    log(f"  s steps per launch == repeated single steps (2 launches each): {agreement}")
    timed("heat", "global, 1 step", f"{shape[0]}x{shape[1]}", lambda: heat.heat_step_global(u, v, d), nbytes,
          {"steps": 1, "per_step_ms": None, "agrees": True})
    tiles = [tile] + ([16] if explore else [])
    for p in tiles:
        for s in gpucourse.problem_size("ch6_heat_steps"):
            if p - 2 * s < 1 or out_of_time(f"heat tile {p} s={s}"):
                continue
            row = timed("heat", f"shared, tile {p}, {s} step(s)/launch", f"{shape[0]}x{shape[1]}",
                        lambda s=s, p=p: heat.heat_steps_shared(u, v, d, p, s), nbytes * s,
                        {"steps": s, "tile": p, "agrees": agreement.get(s) if p == tile else None,
                         **kernel_report(heat.heat_steps_shared_kernel(p, s, "float32"), p * p)})
            if row:
                row["per_step_ms"] = row["ms"] / s


def profile_targets() -> int:
    """One launch of each kernel whose counters we want from Nsight Compute, at the chapter's grid."""
    n = gpucourse.problem_size("ch6_grid")
    shape = (n, n, n)
    host = gpucourse.random_array(shape, np.float32, seed=2)
    f, df = gpucourse.to_device(host), gpucourse.device_empty(shape, np.float32)
    coef = stencil.coefficients_for(host, 1.0 / n)
    stencil.deriv_x_book(f, df, coef)
    stencil.deriv_x(f, df, coef, unsigned_indices=False)
    stencil.deriv_x(f, df, coef)
    stencil.deriv_yz(f, df, "y", coef, stencil.AxisTile(n, 32, 8), unsigned_indices=False)
    stencil.deriv_yz(f, df, "y", coef, stencil.AxisTile(n, 32, 8))
    stencil.deriv_yz(f, df, "z", coef)
    stencil.deriv_yz_registers(f, df, "z", coef)
    gpucourse.synchronize()
    return 0


# ---------------------------------------------------------------------------------------------


def main() -> int:
    global CEILINGS, DEADLINE
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--explore", action="store_true", help="also sweep tile shapes")
    parser.add_argument("--out", default=".", help="folder for ch6_results.json")
    parser.add_argument("--budget", type=float, default=float("inf"), help="seconds after which remaining measurements are skipped")
    parser.add_argument("--profile", action="store_true", help="launch seven derivative kernels once each (run under ncu) and stop")
    parser.add_argument("--only", default="", help="comma list of parts: derivatives,nonuniform,constants,laplace,heat,large")
    args = parser.parse_args()
    parts = set(args.only.split(",")) if args.only else {"derivatives", "nonuniform", "constants", "laplace", "heat"}
    if args.profile:
        return profile_targets()
    start = time.time()
    DEADLINE = start + args.budget
    print(gpucourse.banner())
    device = gpucourse.current_device()
    CEILINGS = gpucourse.bandwidth_ceilings()
    log(CEILINGS)
    l2_mib = (device.l2_cache_bytes or 0) / 2**20
    log(f"L2 cache {l2_mib:.0f} MiB; 64^3 float32 is {64**3 * 4 / 2**20:.0f} MiB, 256^3 is {256**3 * 4 / 2**20:.0f} MiB")
    best = {}
    if "derivatives" in parts:
        for n in gpucourse.problem_size("ch6_table_grids"):
            best[n] = run_derivatives(n, args.explore and n == 256, check_against_reference=True)
    if "nonuniform" in parts:
        run_nonuniform(gpucourse.problem_size("ch6_grid"))
    if "constants" in parts:
        try:
            float64_constants_demo(gpucourse.problem_size("ch6_grid"))
        except Exception as exc:  # PTX exists only on a GPU
            log(f"  !! float64 constants demo: {type(exc).__name__}: {exc}")
    if "laplace" in parts:
        run_laplace()
    if "heat" in parts:
        run_heat(args.explore)
    if "large" in parts and args.explore and not out_of_time("512^3"):
        log("-- the base tiles again at 512^3")
        best[512] = run_derivatives(512, False, check_against_reference=False)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device": device.name, "driver_cuda": device.driver_cuda_version, "copy_gbs": CEILINGS.copy_gbs,
            "theoretical_gbs": CEILINGS.theoretical_gbs, "l2_bytes": device.l2_cache_bytes, "seconds": time.time() - start}
    (out / "ch6_results.json").write_text(json.dumps({"meta": meta, "results": RESULTS}, indent=1, default=str))
    log("\n== summary: best of each direction (GB/s, fraction of the measured copy) ==")
    log(f"copy {CEILINGS.copy_gbs:.0f} GB/s, theoretical {CEILINGS.theoretical_gbs or float('nan'):.0f} GB/s")
    for n, rows in best.items():
        for direction, row in rows.items():
            log(f"{n:4d}^3 {direction}: {row['gbs']:6.0f} GB/s {row['fraction_of_copy']:5.2f}  {row['name']}")
    heat_rows = [r for r in RESULTS if r.get("group") == "heat" and "ms" in r]
    if heat_rows:
        single = next(r for r in heat_rows if r["name"].startswith("global"))
        log(f"heat: global step {single['ms'] * 1e3:.0f} us/step; " + ", ".join(
            f"s={r['steps']}: {r['ms'] / r['steps'] * 1e3:.0f}" for r in heat_rows if r.get("tile") == gpucourse.problem_size("ch6_heat_tile")))
    for r in RESULTS:
        if r.get("group") == "laplace" and "ms" in r:
            log(f"laplace {r['name']:9s} {r['ms'] * 1e3:7.0f} us/sweep {r['gbs']:6.0f} GB/s residuals match book: {r['residuals_match_book']}")
    n = gpucourse.problem_size("ch6_grid")
    rows = [r for r in RESULTS if r.get("size") == f"{n}^3" and r.get("group", "").startswith("deriv_") and "gbs" in r]
    log(f"\n== acceptance at {n}^3 (each at least 0.80 of the copy measured in this run) ==")
    for direction, must in (("x", "tiled"), ("y", "lPencils"), ("z", "")):
        candidates = [r for r in rows if r["group"] == f"deriv_{direction}" and must in r["name"]]
        if candidates:
            top = max(candidates, key=lambda r: r["gbs"])
            verdict = "PASS" if top["fraction_of_copy"] >= 0.80 else "FAIL"
            log(f"{verdict} {direction}: {top['gbs']:.0f} GB/s = {top['fraction_of_copy']:.2f} of copy ({top['name']})")
    if heat_rows:
        blocked = [r for r in heat_rows if r.get("steps", 1) > 1 and r.get("tile") == gpucourse.problem_size("ch6_heat_tile")]
        if blocked:
            top = min(blocked, key=lambda r: r["ms"] / r["steps"])
            faster = top["ms"] / top["steps"] < single["ms"]
            log(f"{'PASS' if faster else 'FAIL'} heat: s = {top['steps']} takes {top['ms'] / top['steps'] * 1e3:.0f} us/step against "
                f"{single['ms'] * 1e3:.0f} us for a global step")
    log(f"total {time.time() - start:.0f} s")
    return 0 if math.isfinite(CEILINGS.copy_gbs) else 1


if __name__ == "__main__":
    sys.exit(main())
