"""Chapter 5 on a GPU in one run: reductions at 1 GiB, generators, pi, the FMA experiment, options, summation.

    python3 tools/gpu_ch5.py [--explore] [--out DIR]

Every measurement calls the same package function the notebooks call. Prints each result as it is
taken and a short table at the end; writes every number to DIR/ch5_results.json. --explore adds the
sweep of the tuned sum's configuration (loads per thread x threads per block). The measurements of
record are in measurements/ch5.md.
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
from gpucourse import book, floating_point, graphs, options, summation, timing  # noqa: E402
from gpucourse.compilation import count_matches, ptx  # noqa: E402
from gpucourse.kernels import montecarlo, random_numbers, reductions  # noqa: E402
from gpucourse.throughput import measure  # noqa: E402

RESULTS: dict = {}
#: Configurations of the two-pass shuffle sum tried for the best hand-written sum: (threads per block, loads per thread, 8-byte loads).
CANDIDATES = [(1024, 4, False), (512, 2, False), (1024, 1, True), (1024, 2, True), (512, 2, True), (512, 4, True), (1024, 4, True),
              (256, 4, True)]
CEILINGS = None
SUMMARY: list[str] = []


def log(*parts) -> None:
    print(*parts, flush=True)


def part(name: str):
    """Run one part; a failure is logged with its traceback and the run goes on."""
    def wrap(function):
        def run(*args, **kwargs):
            start = time.perf_counter()
            log(f"\n== {name}")
            try:
                function(*args, **kwargs)
            except Exception as exc:  # one broken part must not cost the rest of the run
                log(f"!! {name}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                RESULTS.setdefault("errors", []).append({"part": name, "error": f"{type(exc).__name__}: {exc}"})
            log(f"   ({time.perf_counter() - start:.1f} s)")
        return run
    return wrap


def rows_record(rows) -> list[dict]:
    return [row.record(CEILINGS) for row in rows]


def show(rows, unit: str) -> None:
    for row in rows:
        fraction = row.fraction_of_ceiling(CEILINGS)
        extra = "" if fraction is None else f"  {row.gbs:7.0f} GB/s  {fraction:5.3f} of copy"
        log(f"   {row.name:58s} {row.timing.median_ms:9.3f} ms  {row.items_per_second:.3e} {unit}/s{extra}"
            f"  (back-to-back {row.timing.back_to_back_ms:.3f} ms)")


@part("reductions, 1 GiB of float32")
def run_reductions(explore: bool) -> None:
    import cupy

    n = gpucourse.problem_size("ch5_reduce")
    x = cupy.random.default_rng(5).random(n, dtype=cupy.float32)
    reference = reductions.reference_sum(x)
    rows, values = reductions.compare_sums(x, repeat=15)
    show(rows, "elements")
    record = rows_record(rows)
    for entry in record:
        entry["value"] = values[entry["name"]]
        entry["relative_error"] = abs(values[entry["name"]] - reference) / reference
    RESULTS["reductions"] = {"n": n, "reference": reference, "rows": record}
    result = cupy.empty(1, dtype=cupy.float32)
    candidates = {}
    for threads, loads, wide in CANDIDATES:
        name = f"{threads} threads, {loads} {'8-byte' if wide else '4-byte'} loads/thread"
        call = (lambda t, u, w: lambda: reductions.two_pass_sum(x, result, "shuffle", t, loads_per_thread=u, wide=w))(threads, loads, wide)
        try:
            (row,) = measure({name: call}, n, n * 4, repeat=15)
        except gpucourse.CourseError as exc:  # a configuration the device refuses (registers): noted, not fatal
            log(f"   candidate {name}: refused: {exc}")
            continue
        candidates[name] = (row, call, {"threads_per_block": threads, "loads_per_thread": loads, "wide": wide})
        log(f"   candidate {name:44s} {row.gbs:7.0f} GB/s  {row.fraction_of_ceiling(CEILINGS):.3f} of its ceiling")
    RESULTS["reduction_candidates"] = [{**options, **row.record(CEILINGS)} for row, _, options in candidates.values()]
    best_name = max(candidates, key=lambda k: candidates[k][0].gbs)
    _, best_call, best_config = candidates[best_name]
    cub_call = lambda: cupy.sum(x, out=result[0])  # noqa: E731
    rounds = {"hand-written": [], "cupy.sum": []}
    for _ in range(3):  # A/B/A/B...: the same two, alternately, so that drifts of the clock hit both
        for label, call in (("hand-written", best_call), ("cupy.sum", cub_call)):
            (row,) = measure({label: call}, n, n * 4, repeat=15)
            rounds[label].append(row.timing.median_ms)
    best_ms, cub_ms = float(np.median(rounds["hand-written"])), float(np.median(rounds["cupy.sum"]))
    read_gbs = n * 4 / (best_ms * 1e-3) / 1e9
    read_fraction = read_gbs / CEILINGS.copy_gbs
    passed = read_fraction >= 0.90 and best_ms <= cub_ms
    verdict = (f"best hand-written sum ({best_name}): {read_gbs:.0f} GB/s read = {read_fraction:.3f} of the {CEILINGS.copy_gbs:.0f} GB/s "
               f"copy; {best_ms * 1e3:.1f} us vs cupy.sum {cub_ms * 1e3:.1f} us (median of 3 alternating rounds; "
               f"cupy.sum / ours = {cub_ms / best_ms:.3f}); {'PASS' if passed else 'FAIL'}")
    RESULTS["reduction_acceptance"] = {"best": best_name, "config": best_config, "read_gbs": read_gbs, "read_fraction_of_copy": read_fraction,
                                       "best_ms_rounds": rounds["hand-written"], "cupy_sum_ms_rounds": rounds["cupy.sum"], "pass": passed,
                                       "package_best": reductions.BEST}
    SUMMARY.append(verdict)
    log("   " + verdict)
    for entry in record:
        log(f"   {entry['name']:58s} relative error {entry['relative_error']:.2e}")

    small = gpucourse.problem_size("ch5_reduce_small")
    xs = cupy.random.default_rng(6).random(small, dtype=cupy.float32)
    plan = reductions.two_pass_sum.plan(xs, result, **reductions.best_options())
    in_graph = gpucourse.problem_size("ch5_graph_sums")
    graph = graphs.capture(lambda: [plan() for _ in range(in_graph)], f"{in_graph} sums")
    launch_rows = measure({"plan, called in a loop": plan, f"{in_graph} sums in one CUDA graph (the whole graph)": graph.launch,
                           "cupy.sum": lambda: cupy.sum(xs, out=result[0])}, small, small * 4, repeat=15)
    graph_row = launch_rows[1]
    RESULTS["small_sums"] = {"n": small, "rows": rows_record(launch_rows), "graph_sums": in_graph,
                             "graph_per_sum_ms": graph_row.timing.median_ms / in_graph}
    show(launch_rows, "elements")
    log(f"   graph: {graph_row.timing.median_ms / in_graph * 1e3:.2f} us per sum")

    contention = gpucourse.problem_size("ch5_atomic_contention")
    xc = cupy.random.default_rng(7).random(contention, dtype=cupy.float32)
    rows = measure({"one atomic per element": lambda: reductions.element_atomic_sum(xc, result),
                    "one atomic per block": lambda: reductions.atomic_sum(xc, result)}, contention, contention * 4, repeat=5)
    RESULTS["atomic_contention"] = {"n": contention, "rows": rows_record(rows)}
    show(rows, "elements")

    if explore:
        sweep = []
        for threads in (128, 256, 512, 1024):
            for loads in (1, 2, 4, 8, 16):
                for per_sm in (1, 2):
                    blocks = reductions.resident_blocks(threads) * per_sm
                    call = (lambda t, u, b: lambda: reductions.two_pass_sum(x, result, "shuffle", t, b, u))(threads, loads, blocks)
                    try:
                        (row,) = measure({f"{threads} threads, {loads} loads, {blocks} blocks": call}, n, n * 4, repeat=10)
                    except gpucourse.CourseError as exc:  # too many registers for the block: the plan says so
                        log(f"   sweep {threads} threads, {loads} loads: refused: {exc}")
                        continue
                    sweep.append({"threads": threads, "loads": loads, "blocks": blocks, **row.record(CEILINGS)})
                    log(f"   sweep {row.name:40s} {row.gbs:7.0f} GB/s  {row.fraction_of_ceiling(CEILINGS):.3f}")
        RESULTS["reduction_sweep"] = sweep


@part("random numbers")
def run_random() -> None:
    import cupy

    n = gpucourse.problem_size("ch5_random_numbers")
    firsts = {}
    for dtype, tag in ((np.float32, "sp"), (np.float64, "dp")):
        ours = random_numbers.first_uniforms(4, dtype, seed=1234)
        theirs = [book.figure(f"ch5_curand_{tag}_seed1234_u{k}").number for k in range(1, 5)]
        firsts[tag] = {"ours": [float(v) for v in ours], "book": theirs}
        log(f"   first four {tag}: ours {ours} book {theirs}")
    RESULTS["curand_first_values"] = firsts
    rows = []
    for dtype in (np.float32, np.float64):
        calls = random_numbers.generator_calls(n if dtype == np.float32 else n // 2, dtype, seed=1234)
        rows += measure({f"{name}, {np.dtype(dtype).name}": call for name, call in calls.items()},
                        n if dtype == np.float32 else n // 2, (n if dtype == np.float32 else n // 2) * np.dtype(dtype).itemsize, repeat=10)
    show(rows, "numbers")
    RESULTS["generators"] = rows_record(rows)
    out = cupy.empty(n, dtype=cupy.float32)
    states = random_numbers.make_states(montecarlo.default_state_count(n), 3)
    random_numbers.xoroshiro_uniform(out, states)
    ones = random_numbers.ones_in_float32_uniforms(out)
    RESULTS["xoroshiro_float32_ones"] = {"n": n, "ones": ones, "expected": n * 2.0**-25}
    log(f"   xoroshiro128p_uniform_float32 returned exactly 1.0 {ones} times in {n} draws (about {n * 2.0**-25:.0f} expected)")
    creation = {int(c): random_numbers.state_creation_seconds(int(c), repeat=1) for c in gpucourse.problem_size("ch5_state_counts")}
    RESULTS["state_creation_s"] = creation
    log("   state creation (s): " + ", ".join(f"{c}: {s:.4f}" for c, s in creation.items()))
    seeding = {}
    for ordering in (None, "seeded"):
        first, second = random_numbers.seeding_cost_ms(1 << 20, np.float32, "default", ordering)
        seeding[str(ordering)] = {"first_ms": first, "next_ms": second}
        log(f"   cuRAND default generator, ordering {ordering}: first generate {first:.3f} ms, next {second:.3f} ms (2**20 numbers)")
    RESULTS["curand_seeding"] = seeding
    per_stream, streams = gpucourse.problem_size("ch5_streams")
    good = random_numbers.largest_correlation(random_numbers.thread_streams(random_numbers.make_states(streams, 5), per_stream))
    RESULTS["stream_correlation"] = {"largest": good, "scale": random_numbers.independent_correlation_scale(per_stream, streams)}
    log(f"   largest correlation between {streams} streams: {good:.4f} (independent: about {RESULTS['stream_correlation']['scale']:.4f})")


@part("pi")
def run_pi() -> None:
    n = gpucourse.problem_size("ch5_pi")
    variants = montecarlo.pi_variants(n, seed=1234)
    rows = []
    for name, (call, _, stored) in variants.items():
        rows += measure({name: call}, n, 2 * n * 4 if stored else None, repeat=10)
    show(rows, "points")
    counts = montecarlo.pi_counts(variants)
    RESULTS["pi_variants"] = {"n": n, "rows": rows_record(rows), "counts": counts}
    best = max(rows, key=lambda r: r.items_per_second)
    SUMMARY.append(f"pi: best {best.items_per_second:.3e} points/s ({best.name})")
    tables = {}
    for dtype, seed, tag in (("float32", 1234, "sp_seed1234"), ("float64", 1234, "dp_seed1234"), ("float64", 1234567, "dp_seed1234567")):
        table = []
        for count in gpucourse.problem_size("ch5_pi_book"):
            inside = montecarlo.curand_pi(count, seed, dtype)
            estimate = np.float32(4) * np.float32(inside) / np.float32(count) if dtype == "float32" else 4.0 * inside / count
            printed = book.figure(f"ch5_pi_{tag}_N1e{int(round(math.log10(count)))}").number
            table.append({"n": count, "inside": inside, "pi": float(estimate), "book_pi": printed})
            log(f"   {tag} N={count:>10d}: inside {inside:>10d}  pi {float(estimate):.8f}  book {printed:.8f}")
        tables[tag] = table
    RESULTS["pi_book_tables"] = tables
    convergence = montecarlo.pi_convergence(*gpucourse.problem_size("ch5_pi_convergence"))
    RESULTS["pi_convergence"] = {str(k): v for k, v in convergence.items()}
    for count, estimates in convergence.items():
        rms = math.sqrt(np.mean((np.array(estimates) - math.pi) ** 2))
        log(f"   N={count:>11d}: rms error {rms:.3e}  (standard error {montecarlo.pi_standard_error(count):.3e})")


@part("IEEE-754: the book's seed-1234567 experiment")
def run_fma() -> None:
    n = gpucourse.problem_size("ch5_fma")
    xy = montecarlo.curand_points(n, 1234567, "float32")
    inside = montecarlo.inside_by_rule(xy)
    counts = {rule: int(v.sum()) for rule, v in inside.items()}
    log(f"   counts: {counts}  (book: CPU {book.figure('ch5_pi_fma_inside_cpu_N1e8').value}, GPU {book.figure('ch5_pi_fma_inside_gpu_N1e8').value})")
    host = xy.get()
    points = []
    book_indices = [int(book.figure(f"ch5_tab5_1_p{k}_index").number) - 1 for k in (1, 2, 3)]
    for index in montecarlo.disagreements(inside, "default", "host")[:10].tolist() + book_indices:
        x, y = host[index], host[n + index]
        points.append({"index_1based": index + 1, "x": floating_point.float32_hex(x), "y": floating_point.float32_hex(y),
                       **{rule: floating_point.float32_hex(floating_point.squared_distance32(x, y, rule)) for rule in ("separate", "fma_x", "fma_y")},
                       "default_inside": bool(inside["default"][index]), "host_inside": bool(inside["host"][index])})
    for p in points:
        log(f"   {p}")
    fmas = {rule: count_matches(ptx(montecarlo.squared_distance_kernel(rule)), r"\bfma\.rn\.f32") for rule in montecarlo.RULES}
    import cupy

    out = cupy.empty(n, dtype=cupy.float32)
    nvrtc = {}
    for fmad in (True, False):
        montecarlo.cupy_squared_distances(xy, out, fmad)
        nvrtc[f"fmad={fmad}"] = int(cupy.count_nonzero(out <= 1))
    RESULTS["fma"] = {"n": n, "counts": counts, "points": points, "ptx_fma_lines": fmas, "nvrtc_counts": nvrtc}
    log(f"   PTX fma.rn.f32 lines per rule: {fmas}; NVRTC counts: {nvrtc}")
    SUMMARY.append(f"FMA, seed 1234567, 1e8 points: GPU default {counts['default']}, host {counts['host']} (book: GPU 78534859, CPU 78534862)")


@part("options")
def run_options() -> None:
    option = options.BOOK_OPTION
    call_bs, put_bs = options.black_scholes(option)
    paths = gpucourse.problem_size("ch5_options")
    variants = montecarlo.option_variants(paths, option, seed=1234)
    rows = []
    estimates = {}
    for name, (call, sums) in variants.items():
        rows += measure({name: call}, paths, None, repeat=10)
        estimates[name] = options.estimate_from_sums(sums.get(), paths, option)
    show(rows, "paths")
    for name, e in estimates.items():
        log(f"   {name}: call {e.call:.6f} (+- {e.call_se:.1e}), put {e.put:.6f} (+- {e.put_se:.1e}); "
            f"{e.standard_errors_off(option)[0]:.2f} / {e.standard_errors_off(option)[1]:.2f} standard errors from Black-Scholes")
    RESULTS["options"] = {"paths": paths, "black_scholes": [call_bs, put_bs], "rows": rows_record(rows),
                          "estimates": {k: vars(v) for k, v in estimates.items()}}
    best = max(rows, key=lambda r: r.items_per_second)
    SUMMARY.append(f"options: best {best.items_per_second:.3e} paths/s ({best.name})")
    book_runs = {}
    for count in (10**6, 10**8):
        for dtype in ("float32", "float64"):
            for ordering in (None, "seeded"):
                ms = timing.wall_time_ms(lambda c=count, d=dtype, o=ordering: montecarlo.book_option_run(c, option, d, ordering=o), repeat=3)
                estimate = montecarlo.book_option_run(count, option, dtype, ordering=ordering)
                book_runs[f"{count} {dtype} {ordering}"] = {"ms": ms, "call": estimate.call, "put": estimate.put}
                log(f"   book's whole run, {count} paths, {dtype}, ordering {ordering}: {ms:.2f} ms; call {estimate.call:.6f} put {estimate.put:.6f}")
    RESULTS["book_option_runs"] = book_runs
    convergence = montecarlo.option_convergence(gpucourse.problem_size("ch5_option_convergence"), 4, option)
    RESULTS["option_convergence"] = {str(k): [vars(e) for e in v] for k, v in convergence.items()}
    for count, runs in convergence.items():
        rms = math.sqrt(np.mean([(e.call - call_bs) ** 2 for e in runs]))
        log(f"   paths {count:>10d}: rms call error {rms:.2e}, standard error {np.mean([e.call_se for e in runs]):.2e}")


@part("summation accuracy on the GPU")
def run_summation() -> None:
    import cupy

    table = {}
    datasets = {f"7.0 x {n}": summation.constant_terms(n) for n in gpucourse.problem_size("ch5_sum7")}
    datasets.update({f"1/i^{p}, N = 8192": summation.series_terms(gpucourse.problem_size("ch5_series"), p) for p in (1, 2)})
    for label, host in datasets.items():
        x = cupy.asarray(host)
        result = cupy.empty(1, dtype=cupy.float32)
        reductions.best_sum(x, result)
        tuned = float(result.get()[0])
        cub = float(cupy.sum(x))
        exact = summation.exact_sum(host)
        table[label] = {"tuned": tuned, "cupy_sum": cub, "exact": exact}
        log(f"   {label:22s} tuned {tuned:.9g} (error {tuned - exact:.3g}), cupy.sum {cub:.9g} (error {cub - exact:.3g}), exact {exact:.12g}")
    RESULTS["gpu_summation"] = table


def main() -> int:
    global CEILINGS
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--explore", action="store_true", help="also sweep the tuned sum's configuration")
    parser.add_argument("--out", default=".", help="folder for ch5_results.json")
    parser.add_argument("--only", default="", help="comma list of parts: reductions,random,pi,fma,options,summation")
    args = parser.parse_args()
    if gpucourse.is_simulator():
        log("tools/gpu_ch5.py measures a GPU; this machine runs the simulator. Stop.")
        return 1
    start = time.perf_counter()
    CEILINGS = gpucourse.bandwidth_ceilings()
    device = gpucourse.current_device()
    log(f"{device.summary()}\n{CEILINGS}")
    RESULTS["meta"] = {"device": device.name, "copy_gbs": CEILINGS.copy_gbs, "theoretical_gbs": CEILINGS.theoretical_gbs,
                       "date": time.strftime("%Y-%m-%d %H:%M"), "argv": sys.argv}
    parts = {"reductions": lambda: run_reductions(args.explore), "random": run_random, "pi": run_pi, "fma": run_fma,
             "options": run_options, "summation": run_summation}
    chosen = [p for p in args.only.split(",") if p] or list(parts)
    for name in chosen:
        parts[name]()
    RESULTS["meta"]["seconds"] = time.perf_counter() - start
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ch5_results.json").write_text(json.dumps(RESULTS, indent=1, default=str))
    log("\n== summary")
    log(f"{device.name}: copy {CEILINGS.copy_gbs:.0f} GB/s, theoretical {CEILINGS.theoretical_gbs:.0f} GB/s")
    for line in SUMMARY:
        log("  " + line)
    log(f"errors: {len(RESULTS.get('errors', []))}; {RESULTS['meta']['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
