"""Chapter 6's 2D stencils and chapter 7's k-space division on a GPU, in one run: check, explore, record, profile.

    python3 tools/gpu_stencil2d.py OUT_DIR [--commit HASH] [--skip-explore] [--skip-ncu]

1. checks every tuned kernel against NumPy (the Jacobi sweeps) and against the book's or the
   article's kernel, bit for bit (heat: s steps per launch against s single steps; the k-space
   division against its first version), on a mesh that is no multiple of any tile; the Jacobi
   residuals of the book's problem against the book's six digits;
2. times variants of every tuned kernel (rows per thread, blocks, steps per launch, columns per
   lane) at 8192^2 float32 against the device-to-device copy measured in the same run
   (OUT_DIR/explore.json);
3. measures the record with the package's defaults through `gpucourse.stencil2d.measure`, the
   function the notebooks and the report call (OUT_DIR/stencil2d.json);
4. profiles the book's and the tuned kernels with Nsight Compute through `gpucourse.profiler`
   (OUT_DIR/ncu_raw.csv: ncu's raw CSV, kept as the profiler's test data);
5. prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import gpucourse  # noqa: E402  (first: it picks the mode)
from gpucourse import book, profiler, stencil2d  # noqa: E402
from gpucourse import finite_difference as fd  # noqa: E402
from gpucourse.kernels import heat, laplace  # noqa: E402
from gpucourse.kernels import spectral as kspace  # noqa: E402

RESULTS: dict = {"checks": {}, "variants": {}, "residuals": {}, "errors": []}
CHOICES: dict[str, list] = {}
SUMMARY: list[str] = []


def log(*parts) -> None:
    print(*parts, flush=True)


def guarded(name: str):
    """Run a section; on an error, log it and go on (one broken section must not cost the run)."""
    def wrap(fn):
        def run(*args, **kwargs):
            start = time.perf_counter()
            log(f"== {name}")
            try:
                return fn(*args, **kwargs)
            except Exception:  # a tool run: report everything, stop nothing
                text = traceback.format_exc()
                log(text)
                RESULTS["errors"].append(f"{name}: {text.splitlines()[-1]}")
            finally:
                log(f"== {name}: {time.perf_counter() - start:.1f} s")
        return run
    return wrap


def environment() -> dict:
    info = {"python": platform.python_version(), "device": gpucourse.current_device().summary()}
    for package in ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x"):
        try:
            from importlib.metadata import version

            info[package] = version(package)
        except Exception:  # not installed
            pass
    for command in (["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem", "--format=csv,noheader"],
                    [profiler.find_ncu() or "ncu", "--version"]):
        try:
            info[command[0].rsplit("/", 1)[-1]] = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip()
        except Exception as exc:  # a missing tool is a finding, not a failure
            info[command[0]] = f"unavailable: {exc}"
    return info


@guarded("checks against NumPy and bit for bit")
def checks(shape: tuple[int, int]) -> None:
    jacobi_shape = (shape[0], shape[1] + (-shape[1]) % 8)  # texture rows: a multiple of 32 bytes
    rng_host = gpucourse.random_array(jacobi_shape, np.float32, seed=31)
    want = fd.jacobi_step_reference(rng_host)
    book_out = None
    for method in laplace.BOOK_METHODS + laplace.METHODS:
        variants = [(None, None, None)]
        if not method.endswith("_book"):
            variants = [(None, None, None), ((32, 8), 8, None), ((32, 2), 5, None)]
        if method in laplace.SHUFFLES:  # the loads variant beside the shuffles (the default)
            variants += [((32, 4), 16, False), ((16, 4), 7, False)]
        for block, rows, shuffles in variants:
            a = gpucourse.to_device(rng_host)
            out = rng_host.copy()
            out[1:-1, 1:-1] = np.nan
            target = gpucourse.to_device(out)
            launcher, arguments = laplace.sweep_call(a, target, method, block, rows)
            if shuffles is not None:
                arguments = (*arguments, shuffles)
            launcher(*arguments)
            got = gpucourse.to_host(target)
            key = f"jacobi {method} {block} {rows} {'' if shuffles is None else shuffles}"
            error = float(np.nanmax(np.abs(got - want)))
            if method == "global_book":
                book_out = got
            same = bool(np.array_equal(got, book_out)) if book_out is not None else None
            RESULTS["checks"][key] = {"unwritten": int(np.isnan(got).sum()), "max_error": error, "same_bits_as_global_book": same}
            log(f"{key:42s} unwritten {int(np.isnan(got).sum())}  max |error| {error:.2e}  same bits as the book's global: {same}")
    d = 0.2
    host = gpucourse.random_array(shape, np.float32, seed=32, low=0.0, high=1.0)
    states = [host]
    for _ in range(8):
        u, v = gpucourse.to_device(states[-1]), gpucourse.to_device(gpucourse.poisoned(shape, np.float32))
        heat.heat_step_global_article(u, v, d)
        states.append(gpucourse.to_host(v))
    for options in ((), ((32, 8), 16), ((32, 2), 3), ((32, 4), 8, False), ((16, 4), 5, False)):
        u, v = gpucourse.to_device(host), gpucourse.to_device(gpucourse.poisoned(shape, np.float32))
        heat.heat_step_global(u, v, d, *options)
        same = bool(np.array_equal(gpucourse.to_host(v), states[1]))
        RESULTS["checks"][f"heat global {options}"] = same
        log(f"heat tuned one step {options}: same bits as the article's: {same}")
    for steps in (1, 2, 3, 4, 5, 6, 8):
        for columns, height, warps in ((1, 56, 4), (2, 56, 4), (4, 56, 4), (4, 120, 2)):
            if 32 * columns - 2 * steps < 8:
                continue
            u, v = gpucourse.to_device(host), gpucourse.to_device(gpucourse.poisoned(shape, np.float32))
            heat.heat_steps(u, v, d, steps, columns, height, warps)
            same = bool(np.array_equal(gpucourse.to_host(v), states[steps]))
            RESULTS["checks"][f"heat blocked s{steps} C{columns} H{height} W{warps}"] = same
            if not same:
                log(f"MISMATCH heat blocked s={steps} columns={columns} height={height} warps={warps}")
    log("heat multi-step kernels checked:", sum(1 for k, v in RESULTS["checks"].items() if k.startswith("heat blocked") and v), "same bits of",
        sum(1 for k in RESULTS["checks"] if k.startswith("heat blocked")))
    cupy = gpucourse.require_cupy("checks")
    spectrum_host = gpucourse.random_array((shape[0], shape[1] // 2 + 1), np.complex64, seed=33)
    first, tuned = cupy.asarray(spectrum_host), cupy.asarray(spectrum_host)
    kspace.poisson_spectrum_simple(first, first, shape[1])
    kspace.poisson_spectrum(tuned, tuned, shape[1])
    same = bool(cupy.array_equal(first, tuned))
    derivative_first, derivative_tuned = cupy.asarray(spectrum_host), cupy.asarray(spectrum_host)
    kspace.derivative_spectrum_simple(derivative_first, derivative_first, shape[1], 3.0, 1)
    kspace.derivative_spectrum(derivative_tuned, derivative_tuned, shape[1], 3.0, 1)
    same_derivative = bool(cupy.array_equal(derivative_first, derivative_tuned))
    RESULTS["checks"]["kspace poisson same bits"] = same
    RESULTS["checks"]["kspace derivative same bits"] = same_derivative
    log(f"k-space tuned against first version, same bits: Poisson {same}, derivative {same_derivative}")
    SUMMARY.append(f"checks: {sum(1 for v in RESULTS['checks'].values() if v is True)} bit-identical results; "
                   f"Jacobi max error {max(v['max_error'] for k, v in RESULTS['checks'].items() if k.startswith('jacobi')):.1e}")


@guarded("Jacobi residuals of the book's problem")
def residuals() -> None:
    shape = tuple(int(v) for v in book.figure("ch6_laplace_mesh").value.split(" x "))
    initial = fd.laplace_initial(shape)
    for method in laplace.METHODS:
        _, history = laplace.jacobi_iterations(initial, 100, method, 10)
        digits = [f"{r:.6f}" for _, r in history]
        printed = [book.figure(f"ch6_laplace_residual_it{n}").value for n, _ in history]
        RESULTS["residuals"][method] = {"digits": digits, "book": printed, "same": digits == printed}
        log(f"residuals {method}: {'the book' + chr(39) + 's six digits' if digits == printed else digits}")
    SUMMARY.append("residuals to the book's digits: " + ", ".join(f"{m} {v['same']}" for m, v in RESULTS["residuals"].items()))


def timed(label: str, call, nbytes: int, copy_gbs: float, steps: int = 1, repeat: int = 10) -> dict | None:
    try:
        timing = gpucourse.benchmark(call, repeat=repeat)
    except gpucourse.GPUOnlyFeature:
        log(f"{label}: skipped (GPU only)")
        return None
    row = {"us": 1e3 * timing.median_ms, "us_per_step": 1e3 * timing.median_ms / steps, "of_copy": timing.bandwidth_gbs(nbytes) / copy_gbs,
           "spread": (timing.max_ms - timing.min_ms) / timing.median_ms}
    back = timing.back_to_back_gbs(nbytes)
    row["back_to_back_of_copy"] = None if back is None else back / copy_gbs
    RESULTS["variants"][label] = row
    log(f"{label:58s} {row['us']:8.1f} us  {row['us_per_step']:8.1f} us/step  {row['of_copy']:.3f} of copy  spread {row['spread']:.1%}")
    return row


@guarded("variants at the record's size")
def explore(shape: tuple[int, int], copy_gbs: float) -> None:
    a = gpucourse.to_device(gpucourse.random_array(shape, np.float32, seed=41))
    b = gpucourse.to_device(gpucourse.random_array(shape, np.float32, seed=42))
    nbytes = laplace.bytes_per_sweep(shape, 4)
    for method in laplace.BOOK_METHODS:
        try:
            launcher, arguments = laplace.sweep_call(a, b, method)
        except gpucourse.GPUOnlyFeature:
            continue
        timed(f"jacobi {method}", lambda launcher=launcher, arguments=arguments: launcher(*arguments), nbytes, copy_gbs)
    tiles = {"global": [((128, 1), 16, True), ((256, 1), 16, True), ((256, 1), 8, True), ((128, 2), 8, True),
                        ((32, 2), 16, False), ((128, 1), 16, False)],
             "shared": [((128, 1), 16, None), ((256, 1), 16, None), ((64, 2), 16, None)],
             "readonly": [((128, 1), 16, False), ((128, 1), 16, True), ((128, 2), 8, True), ((256, 1), 8, True),
                          ((256, 1), 16, True)],
             "texture": [((32, 2), 32, None), ((32, 4), 32, None)]}  # the tuned texture sweep needs blocks 32 threads wide
    for method, choices in tiles.items():
        for block, rows, shuffles in choices:
            try:
                launcher, arguments = laplace.sweep_call(a, b, method, block, rows)
            except gpucourse.GPUOnlyFeature:
                continue
            if shuffles is not None:
                arguments = (*arguments, shuffles)
            row = timed(f"jacobi {method} block {block} rows {rows}" + ("" if shuffles is None else f" shuffles {shuffles}"),
                        lambda launcher=launcher, arguments=arguments: launcher(*arguments), nbytes, copy_gbs)
            if row:
                CHOICES.setdefault(f"jacobi {method}", []).append((row["us_per_step"], (block, rows, shuffles)))
    d = 0.2
    nbytes = heat.bytes_per_step(shape, 4)
    timed("heat article global (32, 8)", lambda: heat.heat_step_global_article(a, b, d), nbytes, copy_gbs)
    for s in range(1, 9):
        timed(f"heat article shared tile 32 s {s}", lambda s=s: heat.heat_steps_shared(a, b, d, 32, s), nbytes, copy_gbs, steps=s)
    for block, rows, shuffles in (((128, 1), 8, True), ((128, 1), 16, True), ((256, 1), 8, True), ((256, 1), 16, True),
                                  ((64, 2), 8, False), ((128, 1), 8, False)):
        row = timed(f"heat tuned global block {block} rows {rows} shuffles {shuffles}",
                    lambda block=block, rows=rows, shuffles=shuffles: heat.heat_step_global(a, b, d, block, rows, shuffles), nbytes, copy_gbs)
        CHOICES.setdefault("heat global", []).append((row["us_per_step"], (block, rows, shuffles)))
    for s, columns, height, warps in ((4, 2, 56, 4), (6, 2, 56, 4), (8, 2, 56, 4), (8, 2, 56, 2), (8, 4, 56, 4), (10, 2, 56, 4)):
        row = timed(f"heat tuned blocked s {s} columns {columns} height {height} warps {warps}",
                    lambda s=s, c=columns, h=height, w=warps: heat.heat_steps(a, b, d, s, c, h, w), nbytes, copy_gbs, steps=s)
        CHOICES.setdefault("heat blocked", []).append((row["us_per_step"], (s, (columns, height, warps))))
    cupy = gpucourse.array_module()
    ny, nx = shape
    spectrum = cupy.asarray(gpucourse.random_array((ny, nx // 2 + 1), np.complex64, seed=43))
    nbytes = 2 * spectrum.nbytes
    timed("kspace poisson first version", lambda: kspace.poisson_spectrum_simple(spectrum, spectrum, nx), nbytes, copy_gbs)
    for block, rows in (((256, 1), 16), ((128, 2), 16), ((128, 2), 8), ((256, 1), 8), ((512, 1), 8), ((256, 2), 8)):
        row = timed(f"kspace poisson tuned block {block} rows {rows}",
                    lambda block=block, rows=rows: kspace.poisson_spectrum(spectrum, spectrum, nx, (1.0, 1.0), block, rows), nbytes, copy_gbs)
        if row:
            CHOICES.setdefault("kspace poisson", []).append((row["us_per_step"], (block, rows)))
    cube = gpucourse.problem_size("ch7_spectral_grid")  # notebook 7.2's cube
    half = cupy.asarray(gpucourse.random_array((cube, cube, cube // 2 + 1), np.complex64, seed=44))
    nbytes = 2 * half.nbytes
    timed(f"kspace derivative {cube}^3 first version", lambda: kspace.derivative_spectrum_simple(half, half, cube), nbytes, copy_gbs)
    for threads, per_thread in ((256, 8), (256, 4), (256, 16), (512, 8), (128, 8)):
        row = timed(f"kspace derivative {cube}^3 tuned threads {threads} per thread {per_thread}",
                    lambda threads=threads, per_thread=per_thread: kspace.derivative_spectrum(half, half, cube, 2 * np.pi, 1, threads,
                                                                                                per_thread), nbytes, copy_gbs)
        if row:
            CHOICES.setdefault("kspace derivative", []).append((row["us_per_step"], (threads, per_thread)))


@guarded("defaults from the fastest variants")
def choose_defaults() -> None:
    """Set the tuned kernels' defaults to the fastest variant of each family (the record is then measured with them)."""
    from gpucourse.kernels import spectral

    best = {family: min(rows)[1] for family, rows in CHOICES.items() if rows}
    for method in laplace.METHODS:
        if f"jacobi {method}" in best:
            block, rows, shuffles = best[f"jacobi {method}"]
            laplace.TUNED[method] = (tuple(block), rows)
            if method in laplace.SHUFFLES:
                laplace.SHUFFLES[method] = bool(shuffles)
    if "heat global" in best:
        block, rows, shuffles = best["heat global"]
        heat.TUNED_STEP = (tuple(block), rows, bool(shuffles))
    if "heat blocked" in best:
        steps, tile = best["heat blocked"]
        heat.BLOCKED_STEPS = steps
        heat.BLOCKED_TILE["gpu"] = tuple(tile)
    if "kspace poisson" in best:
        spectral.TUNED_BLOCK, spectral.ROWS = tuple(best["kspace poisson"][0]), best["kspace poisson"][1]
    if "kspace derivative" in best:
        spectral.DERIVATIVE_TUNED = tuple(best["kspace derivative"])
    RESULTS["chosen"] = stencil2d.configuration() | {"kspace_derivative": list(spectral.DERIVATIVE_TUNED)}
    log("defaults now:", json.dumps(RESULTS["chosen"]))
    SUMMARY.append("defaults: " + json.dumps(RESULTS["chosen"]))


@guarded("the record (gpucourse.stencil2d.measure, the package's defaults)")
def record(out: Path, commit: str | None) -> dict:
    result = stencil2d.measure(repeat=20)
    written = stencil2d.write_record(result, out / "stencil2d.json", commit)
    log(result.table())
    keys = [k for k in written if k.endswith("_of_copy") and "back_to_back" not in k] + ["heat_blocked_speedup_per_step", "heat_blocked_best_steps"]
    SUMMARY.append("record: " + ", ".join(f"{k} {written[k]}" for k in keys))
    return written


NCU_CODE = """
import numpy as np
import gpucourse
from gpucourse.kernels import heat, laplace
from gpucourse.kernels import spectral as kspace
laplace.TUNED.update({{m: (tuple(b), r) for m, (b, r) in {tuned}.items()}})
laplace.SHUFFLES.update({shuffles})
heat.TUNED_STEP = {step}
heat.BLOCKED_TILE["gpu"] = {tile}
kspace.TUNED_BLOCK, kspace.ROWS = {kblock}, {krows}
shape = {shape}
a = gpucourse.to_device(gpucourse.random_array(shape, np.float32, seed=1))
b = gpucourse.to_device(gpucourse.random_array(shape, np.float32, seed=2))
laplace.jacobi_global_book(a, b)
laplace.jacobi_global(a, b)
laplace.jacobi_shared_book(a, b)
laplace.jacobi_shared(a, b)
heat.heat_step_global_article(a, b, 0.2)
heat.heat_step_global(a, b, 0.2)
heat.heat_steps_shared(a, b, 0.2, 32, 4)
heat.heat_steps(a, b, 0.2, {steps})
cupy = gpucourse.require_cupy("k-space")
spectrum = cupy.asarray(gpucourse.random_array((shape[0], shape[1] // 2 + 1), np.complex64, seed=3))
kspace.poisson_spectrum_simple(spectrum, spectrum, shape[1])
kspace.poisson_spectrum(spectrum, spectrum, shape[1])
gpucourse.synchronize()
"""

NCU_KERNELS = {"Jacobi global, the book's": "jacobi_global_book", "Jacobi global, tuned": "jacobi_global_rows",
               "Jacobi shared, the book's": "jacobi_shared_book", "Jacobi shared, tuned": "jacobi_shared_rows",
               "heat one step, the article's": "heat_step_global_article", "heat one step, tuned": "heat_step_rows",
               "heat shared tile s = 4, the article's": "heat_steps_shared", "heat multi-step, tuned": "heat_steps_registers",
               "k-space Poisson, first version": "poisson_spectrum_simple", "k-space Poisson, tuned": "poisson_spectrum_rows"}


@guarded("Nsight Compute")
def nsight(out: Path, shape: tuple[int, int], steps: int) -> None:
    from gpucourse.kernels import spectral

    code = NCU_CODE.format(shape=tuple(shape), steps=steps, tuned={m: (list(b), r) for m, (b, r) in laplace.TUNED.items()},
                           shuffles=dict(laplace.SHUFFLES), step=tuple(heat.TUNED_STEP), tile=tuple(heat.BLOCKED_TILE["gpu"]),
                           kblock=tuple(spectral.TUNED_BLOCK), krows=spectral.ROWS)
    run = profiler.profile(code, NCU_KERNELS, keep_log=out / "ncu_raw.csv", timeout_s=400)
    log(run)
    RESULTS["ncu"] = {"refusal": run.refusal, "command": list(run.command),
                      "profiles": [{"label": p.label, "kernel": p.kernel, "duration_us": p.duration_us, "dram_pct": p.dram_pct,
                                    "sm_pct": p.sm_pct, "occupancy_pct": p.occupancy_pct, "registers": p.registers,
                                    "top_stall": p.top_stall, "stalls": p.stalls} for p in run.profiles]}
    SUMMARY.append("ncu: " + (run.refusal or "; ".join(f"{p.label} DRAM {p.dram_pct:.0f} SM {p.sm_pct:.0f} occ {p.occupancy_pct:.0f} "
                                                         f"{p.top_stall[0] if p.top_stall else '-'}" for p in run.profiles)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--commit", default=None)
    parser.add_argument("--skip-explore", action="store_true")
    parser.add_argument("--skip-ncu", action="store_true")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    RESULTS["environment"] = environment()
    log(json.dumps(RESULTS["environment"], indent=1))
    ceilings = gpucourse.bandwidth_ceilings()
    log(ceilings)
    RESULTS["copy_gbs"] = ceilings.copy_gbs
    shape = tuple(gpucourse.problem_size("ch6_heat"))
    checks((1003, 1201) if gpucourse.on_gpu() else (21, 45))
    if gpucourse.on_gpu():
        residuals()
    if not options.skip_explore:
        explore(shape, ceilings.copy_gbs)
        choose_defaults()
    written = record(options.out, options.commit) or {}
    if not options.skip_ncu:
        nsight(options.out, shape, written.get("heat_blocked_best_steps") or heat.BLOCKED_STEPS)
    RESULTS["seconds"] = time.perf_counter() - started
    (options.out / "explore.json").write_text(json.dumps(RESULTS, indent=1, default=str) + "\n")
    log("\n".join(["", "SUMMARY", *SUMMARY, *RESULTS["errors"], f"{RESULTS['seconds']:.0f} s in all"]))
    best = {}
    for label, row in RESULTS["variants"].items():
        family = " ".join(label.split()[:3])
        if family not in best or row["us_per_step"] < best[family][1]["us_per_step"]:
            best[family] = (label, row)
    for family, (label, row) in best.items():
        log(f"best {family:28s} {label:60s} {row['us_per_step']:8.1f} us/step {row['of_copy']:.3f}")


if __name__ == "__main__":
    main()
