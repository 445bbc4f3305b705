"""Chapter 3, part B, measured on a GPU in one run: transpose, execution configuration, instructions.

Run from the repository root on a machine with a CUDA GPU and CuPy:

    python3 tools/gpu_ch3_execution.py [output.json]

It checks every kernel's result on the device, times it with `gpucourse.benchmark`, prints the
numbers as it goes and a short table last, and writes everything to the JSON file (default
`ch3_execution.json`). The notes in measurements/ch3_execution.md quote this output.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import numpy as np

import gpucourse
from gpucourse import compilation
from gpucourse.kernels import execution as E
from gpucourse.kernels import instructions as I
from gpucourse.kernels import transpose as T
from gpucourse.kernels.transpose import cuda  # numba.cuda, imported once gpucourse has chosen the mode
from gpucourse.occupancy import api_blocks_per_sm, kernel_occupancy

RESULTS: dict = {}


def signed_index_no_bank_conflicts():
    """The first version of T.kernels().no_bank_conflicts (32 x 8, float32), with signed indices: for comparison only."""
    TILE, PADDED, ROWS = 32, 33, (0, 8, 16, 24)

    @cuda.jit
    def kernel(out, inp):
        tile_ = cuda.shared.array((TILE, PADDED), np.float32)
        rows, cols = inp.shape
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        x = cuda.blockIdx.x * TILE + tx
        y = cuda.blockIdx.y * TILE + ty
        x_in = min(x, cols - 1)
        for j in ROWS:
            tile_[ty + j, tx] = inp[min(y + j, rows - 1), x_in]
        cuda.syncthreads()
        x = cuda.blockIdx.y * TILE + tx
        y = cuda.blockIdx.x * TILE + ty
        if x < rows:
            for j in ROWS:
                if y + j < cols:
                    out[y + j, x] = tile_[tx, ty + j]

    return kernel
STARTED = time.perf_counter()


def log(text: str) -> None:
    print(f"[{time.perf_counter() - STARTED:6.1f} s] {text}", flush=True)


def timed(fn, nbytes: float | None = None, repeat: int = 20) -> dict:
    timing = gpucourse.benchmark(fn, repeat=repeat)
    entry = {"median_ms": timing.median_ms, "min_ms": timing.min_ms, "max_ms": timing.max_ms,
             "calls_per_sample": timing.calls_per_sample, "clock": timing.clock, "launch_bound": timing.launch_bound}
    if nbytes is not None:
        entry["gbs"] = timing.bandwidth_gbs(nbytes)
    return entry


def environment(cp) -> None:
    device = gpucourse.current_device()
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,ecc.mode.current,clocks.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError as exc:  # no nvidia-smi: record why, measure anyway
        smi = f"nvidia-smi not available ({exc})"
    RESULTS["environment"] = {"device": device.summary(), "nvidia_smi": smi, "cupy": cp.__version__,
                              "numpy": np.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    ceilings = gpucourse.bandwidth_ceilings()
    RESULTS["ceilings"] = {"theoretical_gbs": ceilings.theoretical_gbs, "copy_gbs": ceilings.copy_gbs, "copy_bytes": ceilings.copy_bytes}
    log(f"{device.summary()} | {smi}")
    log(str(ceilings))


def transpose_section(cp) -> None:
    rows, cols = gpucourse.problem_size("ch3_transpose")
    a = cp.random.random((rows, cols), dtype=cp.float32)
    inp = gpucourse.as_numba(a)
    nbytes = T.bytes_moved(a)
    expected_t = cp.ascontiguousarray(a.T)
    section = RESULTS.setdefault("transpose", {"shape": [rows, cols], "bytes": nbytes, "variants": {}, "tiles": {}})
    for variant in T.VARIANTS:
        out = cuda.device_array(T.output_shape(variant, a.shape), np.float32)
        T.transpose(out, inp, variant)
        expected = a if variant in T.COPIES else expected_t
        correct = bool(cp.array_equal(cp.asarray(out), expected))
        entry = timed(lambda out=out, variant=variant: T.transpose(out, inp, variant), nbytes)
        entry["correct"] = correct
        entry["fraction_of_copy"] = entry["gbs"] / RESULTS["ceilings"]["copy_gbs"]
        section["variants"][variant] = entry
        log(f"transpose {variant:18s} {entry['gbs']:7.0f} GB/s = {entry['fraction_of_copy']:.1%} of copy, correct={correct}")
    got = T.cupy_transpose(a)
    entry = timed(lambda: T.cupy_transpose(a), nbytes)
    entry["correct"] = bool(cp.array_equal(got, expected_t))
    entry["fraction_of_copy"] = entry["gbs"] / RESULTS["ceilings"]["copy_gbs"]
    section["variants"]["cupy_ascontiguousarray_T"] = entry
    log(f"transpose cupy.ascontiguousarray(a.T) {entry['gbs']:7.0f} GB/s = {entry['fraction_of_copy']:.1%} of copy")
    out = cuda.device_array((cols, rows), np.float32)
    for tile, block_rows in ((32, 4), (32, 8), (32, 16), (32, 32), (16, 4), (16, 8), (64, 8), (64, 16)):
        T.transpose(out, inp, "no_bank_conflicts", tile, block_rows)
        correct = bool(cp.array_equal(cp.asarray(out), expected_t))
        entry = timed(lambda t=tile, b=block_rows: T.transpose(out, inp, "no_bank_conflicts", t, b), nbytes)
        entry["correct"] = correct
        section["tiles"][f"{tile}x{block_rows}"] = entry
        log(f"no_bank_conflicts tile {tile} block_rows {block_rows}: {entry['gbs']:7.0f} GB/s, correct={correct}")
    again = timed(lambda: T.transpose(out, inp, "no_bank_conflicts"), nbytes)
    again["fraction_of_copy"] = again["gbs"] / RESULTS["ceilings"]["copy_gbs"]
    section["no_bank_conflicts_again"] = again
    log(f"no_bank_conflicts 32x8 timed again: {again['gbs']:.0f} GB/s = {again['fraction_of_copy']:.1%} of copy")
    copied = cp.empty_like(a)
    entry = timed(lambda: copied.__setitem__(Ellipsis, a), nbytes)
    entry["fraction_of_copy"] = entry["gbs"] / RESULTS["ceilings"]["copy_gbs"]
    section["variants"]["cupy_copy"] = entry
    log(f"cupy copy b[...] = a: {entry['gbs']:.0f} GB/s = {entry['fraction_of_copy']:.1%} of copy")
    signed = signed_index_no_bank_conflicts()
    blocks, threads = T.launch_config((rows, cols), 32, 8)
    signed[blocks, threads](out, inp)
    entry = timed(lambda: signed[blocks, threads](out, inp), nbytes)
    entry["correct"] = bool(cp.array_equal(cp.asarray(out), expected_t))
    entry["fraction_of_copy"] = entry["gbs"] / RESULTS["ceilings"]["copy_gbs"]
    section["signed_index_no_bank_conflicts"] = entry
    log(f"no_bank_conflicts with signed indices: {entry['gbs']:.0f} GB/s = {entry['fraction_of_copy']:.1%} of copy, "
        f"correct={entry.get('correct', '-')}")
    for name, kernel in (("unsigned", T.kernels().no_bank_conflicts), ("signed", signed)):
        try:
            listing = compilation.sass(kernel)
            section[f"sass_instructions_{name}"] = compilation.count_matches(listing, r"^\s*/\*[0-9a-f]{4}\*/")
        except Exception as exc:  # nvdisasm missing: note it and go on
            section[f"sass_instructions_{name}"] = f"{type(exc).__name__}: {exc}"
        log(f"SASS instructions, {name} indices: {section[f'sass_instructions_{name}']}")
    usage = compilation.resource_usage(T.kernels().no_bank_conflicts)[0]
    section["no_bank_conflicts_resources"] = {"registers": usage.registers, "shared_bytes": usage.shared_bytes,
                                              "local_bytes": usage.local_bytes}
    log(f"no_bank_conflicts 32x8: {usage.registers} registers, {usage.shared_bytes} B shared, {usage.local_bytes} B local")


def execution_section(cp) -> None:
    n = gpucourse.problem_size("ch3_copy")
    x = cp.random.random(n)
    y = cp.empty_like(x)
    xin, yout = gpucourse.as_numba(x), gpucourse.as_numba(y)
    nbytes = E.copy_bytes(x)
    shared = E.shared_bytes_for_one_block()
    section = RESULTS.setdefault("execution", {"n": n, "bytes": nbytes, "shared_bytes_one_block": shared, "rows": {}})
    for threads in gpucourse.problem_size("ch3_block_sizes"):
        row = {}
        for label, call in (
            ("copy", lambda t=threads: E.copy(yout, xin, t)),
            ("copy_smem", lambda t=threads: E.copy(yout, xin, t, shared_bytes=shared)),
            ("ilp4", lambda t=threads: E.copy_ilp(yout, xin, t, 4)),
            ("ilp4_smem", lambda t=threads: E.copy_ilp(yout, xin, t, 4, shared_bytes=shared)),
        ):
            y.fill(cp.nan)
            call()
            entry = timed(call, nbytes)
            entry["correct"] = bool(cp.array_equal(x, y))
            row[label] = entry
        for label, kernel, dynamic in (("copy", E.copy_kernel, 0), ("copy_smem", E.copy_kernel, shared),
                                       ("ilp4", E.copy_ilp_kernel(4), 0), ("ilp4_smem", E.copy_ilp_kernel(4), shared)):
            calc = kernel_occupancy(kernel, threads, dynamic)
            row[label]["occupancy"] = calc.fraction
            row[label]["blocks_per_sm_calculator"] = calc.blocks_per_sm
            row[label]["blocks_per_sm_api"] = api_blocks_per_sm(kernel, threads, dynamic)
            row[label]["limited_by"] = calc.limited_by
        section["rows"][threads] = row
        log(f"copy tpb {threads:5d}: " + "  ".join(
            f"{k} {v['gbs']:6.0f} GB/s occ {v['occupancy']:.3f} ({v['blocks_per_sm_calculator']}/{v['blocks_per_sm_api']} blk/SM)"
            for k, v in row.items()))
    section["registers"] = {"copy": compilation.resource_usage(E.copy_kernel)[0].registers,
                            "ilp4": compilation.resource_usage(E.copy_ilp_kernel(4))[0].registers}


def instructions_section(cp) -> None:
    section = RESULTS.setdefault("instructions", {})
    n = gpucourse.problem_size("ch3_accuracy")
    rng = np.random.default_rng(1)
    ranges = {
        "sin": {"[-pi, pi]": rng.uniform(-math.pi, math.pi, n), "[-1000, 1000]": rng.uniform(-1000, 1000, n)},
        "cos": {"[-pi, pi]": rng.uniform(-math.pi, math.pi, n), "[-1000, 1000]": rng.uniform(-1000, 1000, n)},
        "exp": {"[-10, 10]": rng.uniform(-10, 10, n), "[-80, 80]": rng.uniform(-80, 80, n)},
        "log": {"[0.5, 2]": rng.uniform(0.5, 2, n), "[1e-30, 1e30]": 10.0 ** rng.uniform(-30, 30, n)},
    }
    accuracy = section.setdefault("accuracy", {})
    for name, by_range in ranges.items():
        for label, values in by_range.items():
            x = values.astype(np.float32)
            reference = I.FUNCTIONS[name][1](x.astype(np.float64))
            entry = {}
            for fast in (False, True):
                out = cp.empty(n, dtype=cp.float32)
                I.apply(out, cp.asarray(x), name, fastmath=fast)
                got = out.get()
                key = "fast" if fast else "precise"
                entry[f"{key}_max_ulp"] = float(I.ulp_error(got, reference).max())
                entry[f"{key}_max_abs"] = float(np.abs(got - reference).max())
            accuracy[f"{name} {label}"] = entry
            log(f"accuracy {name:3s} {label:14s} precise {entry['precise_max_ulp']:.3g} ulp / {entry['precise_max_abs']:.3g} abs; "
                f"fast {entry['fast_max_ulp']:.3g} ulp / {entry['fast_max_abs']:.3g} abs")
    for label, high in (("y in [0.5, 50]", None), ("y near 1e37..1e38", 38)):
        xs = rng.uniform(-100, 100, n).astype(np.float32)
        ys = (rng.uniform(0.5, 50, n) if high is None else 10.0 ** rng.uniform(37, 38, n)).astype(np.float32)
        reference = xs.astype(np.float64) / ys.astype(np.float64)
        entry = {}
        for fast in (False, True):
            out = cp.empty(n, dtype=cp.float32)
            I.divide(out, cp.asarray(xs), cp.asarray(ys), fastmath=fast)
            got = out.get()
            key = "fast" if fast else "precise"
            entry[f"{key}_max_ulp"] = float(I.ulp_error(got, reference).max())
            entry[f"{key}_zeros"] = int((got == 0).sum())
        accuracy[f"divide {label}"] = entry
        log(f"accuracy divide {label}: {entry}")
    m, steps = gpucourse.problem_size("ch3_math")
    start = cp.asarray(rng.uniform(-2, 2, m).astype(np.float32))
    values_cp = cp.empty_like(start)
    values = gpucourse.as_numba(values_cp)  # once: a CuPy array handed to a launch costs a synchronization
    speed = section.setdefault("speed", {})
    for fast in (False, True):
        values_cp[...] = start
        entry = timed(lambda f=fast: I.sine_chain(values, steps, fastmath=f))
        entry["gsin_per_s"] = I.sine_chain_operations(m, steps) / (entry["median_ms"] * 1e-3) / 1e9
        speed["sine_chain_fast" if fast else "sine_chain_precise"] = entry
        log(f"sine chain fastmath={fast}: {entry['median_ms']:.3f} ms, {entry['gsin_per_s']:.0f} G sin/s")
    x_cp = cp.asarray(rng.uniform(-4, 4, m).astype(np.float32))
    x, sines, cosines = (gpucourse.as_numba(a) for a in (x_cp, cp.empty_like(x_cp), cp.empty_like(x_cp)))
    for together in (False, True):
        entry = timed(lambda t=together: I.sin_cos(sines, cosines, x, together=t), 3 * x_cp.nbytes)
        speed["sincos_together" if together else "sincos_separate"] = entry
        log(f"sin+cos together={together}: {entry['median_ms']:.4f} ms, {entry['gbs']:.0f} GB/s")
    ptx_fast = compilation.ptx(I.unary_kernel("sin", True))
    ptx_precise = compilation.ptx(I.unary_kernel("sin", False))
    section["ptx"] = {"sin_fast_approx": compilation.count_matches(ptx_fast, r"sin\.approx"),
                      "sin_precise_approx": compilation.count_matches(ptx_precise, r"sin\.approx"),
                      "sin_fast_lines": len(ptx_fast.splitlines()), "sin_precise_lines": len(ptx_precise.splitlines())}
    log(f"PTX: {section['ptx']}")

    d, dsteps = gpucourse.problem_size("ch3_divergence")
    base = cp.asarray(rng.uniform(-1, 1, d).astype(np.float32))
    work_cp = cp.empty_like(base)
    work = gpucourse.as_numba(work_cp)
    divergence = section.setdefault("divergence", {})
    for split in I.BRANCHES:
        work_cp[...] = base
        entry = timed(lambda s=split: I.branch(work, dsteps, s))
        divergence[f"heavy_{split}"] = entry
        log(f"branch {split}: {entry['median_ms']:.3f} ms")
    ints = gpucourse.as_numba(cp.empty(d, dtype=cp.int32))
    for split in I.BRANCHES:
        entry = timed(lambda s=split: I.parity(ints, s), 4 * d)
        divergence[f"parity_{split}"] = entry
        log(f"parity {split}: {entry['median_ms']:.4f} ms, {entry['gbs']:.0f} GB/s")

    count = gpucourse.problem_size("ch3_rounding")[1]
    summands = rng.uniform(0, 1, count).astype(np.float32)
    bounds = cp.empty(2, dtype=cp.float32)
    I.interval_sum(bounds, cp.asarray(summands))
    low, high = (float(v) for v in bounds.get())
    exact = math.fsum(summands.astype(np.float64))
    section["interval_sum"] = {"count": count, "low": low, "high": high, "exact": exact, "nearest_float32": float(np.float32(exact)),
                               "width_ulps": float((np.float64(high) - low) / np.spacing(np.float32(exact)))}
    log(f"interval sum of {count}: [{low!r}, {high!r}] holds {exact!r}: {low <= exact <= high}")


def summary() -> None:
    ceilings = RESULTS["ceilings"]
    print("\n=== chapter 3 part B: summary ===")
    print(f"device-to-device copy {ceilings['copy_gbs']:.0f} GB/s, theoretical peak {ceilings['theoretical_gbs']:.0f} GB/s")
    for name, entry in RESULTS["transpose"]["variants"].items():
        print(f"  {name:26s} {entry['gbs']:7.0f} GB/s  {entry['fraction_of_copy']:6.1%} of copy  correct={entry.get('correct', '-')}")
    again, signed = RESULTS["transpose"]["no_bank_conflicts_again"], RESULTS["transpose"]["signed_index_no_bank_conflicts"]
    print(f"  no_bank_conflicts timed again        {again['gbs']:7.0f} GB/s  {again['fraction_of_copy']:6.1%} of copy")
    print(f"  no_bank_conflicts, signed indices    {signed['gbs']:7.0f} GB/s  {signed['fraction_of_copy']:6.1%} of copy")
    print("  tile x block_rows (no_bank_conflicts): " + ", ".join(
        f"{k} {v['gbs']:.0f}" for k, v in RESULTS["transpose"]["tiles"].items()))
    print("  threads  copy  copy+smem  ilp4+smem  ilp4  (GB/s; occupancy copy / copy+smem)")
    for threads, row in RESULTS["execution"]["rows"].items():
        print(f"  {threads:7d} {row['copy']['gbs']:6.0f} {row['copy_smem']['gbs']:9.0f} {row['ilp4_smem']['gbs']:10.0f} "
              f"{row['ilp4']['gbs']:5.0f}   {row['copy']['occupancy']:.3f} / {row['copy_smem']['occupancy']:.3f}")
    speed, divergence = RESULTS["instructions"]["speed"], RESULTS["instructions"]["divergence"]
    print(f"  sine chain precise {speed['sine_chain_precise']['median_ms']:.3f} ms, fast {speed['sine_chain_fast']['median_ms']:.3f} ms")
    print(f"  sin+cos separate {speed['sincos_separate']['median_ms']:.4f} ms, together {speed['sincos_together']['median_ms']:.4f} ms")
    print(f"  divergent by thread {divergence['heavy_by_thread']['median_ms']:.3f} ms, by warp {divergence['heavy_by_warp']['median_ms']:.3f} ms")


def main(path: str = "ch3_execution.json") -> None:
    cp = gpucourse.require_cupy("tools/gpu_ch3_execution.py")
    print(gpucourse.banner())
    environment(cp)
    for section in (transpose_section, execution_section, instructions_section):
        try:
            section(cp)
        except Exception as exc:  # keep measuring the other sections; the error is recorded and printed
            RESULTS.setdefault("errors", []).append(f"{section.__name__}: {type(exc).__name__}: {exc}")
            log(f"ERROR in {section.__name__}: {type(exc).__name__}: {exc}")
        with open(path, "w") as handle:
            json.dump(RESULTS, handle, indent=1, default=str)
    summary()
    log(f"written {path}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
