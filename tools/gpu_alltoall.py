"""The all-to-all, the distributed transpose against its honest model, and the slab 3D FFT, on every GPU of the machine.

    NCCL_NVLS_ENABLE=0 python3 tools/gpu_alltoall.py --out DIR [--commit SHA] [--n 16384] [--fft 512,1024] [--repeat 20]

Writes DIR/multigpu_alltoall.json (the record is measurements/multigpu_alltoall.json) with the GPUs, the
driver and the commit, and the keys of issue 37's acceptance: alltoall_over_pair_P and
transpose_of_pair_model_P for each GPU count P >= 2, fft3d_efficiency_4 and fft3d_over_cufftmp_4;
a key that could not be measured is absent and `not_measured` says why. On one GPU every part still
runs, as several parts on that GPU (labelled so), and no multi-GPU key is written. The rate every model
uses is ONE pair's peer copy (`peer.peer_bandwidth`), never a rate of the code under test; the rated
link (nvidia-smi) is shown beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off on shared machines

import numpy as np  # noqa: E402
from gpu_parts import log, run_part  # noqa: E402 - tools/, this script's folder

import gpucourse  # noqa: E402  (first: it picks the mode)
from gpucourse import multigpu  # noqa: E402
from gpucourse.multigpu import alltoall as A  # noqa: E402
from gpucourse.multigpu import fft as F  # noqa: E402
from gpucourse.multigpu import links  # noqa: E402
from gpucourse.multigpu import transpose as D  # noqa: E402

RESULTS: dict = {"not_measured": {}}


def guarded(name: str, function, *args, **kwargs):
    """Run one part; log and record an exception (under "errors") instead of stopping."""
    value, error = run_part(name, function, *args, **kwargs)
    if error:
        RESULTS.setdefault("errors", {})[name] = error
    return value


def spread(times: list[float]) -> dict:
    """min, median and max of a list of ms."""
    return {"min_ms": min(times), "median_ms": statistics.median(times), "max_ms": max(times)} if times else {}


def layouts(count: int) -> list[tuple[int, list[int], bool]]:
    """(P, devices, one GPU per part): P = 2, 4, 8 .. distinct GPUs up to the count; on one GPU, 2 and 4 parts on it."""
    if count < 2:
        return [(parts, [0] * parts, False) for parts in (2, 4)]
    sizes = [p for p in (2, 4, 8) if p <= count]
    return [(p, list(range(p)), True) for p in sizes]


def alltoall_part(count: int, block: int, repeat: int) -> None:
    rows = []
    # one pair's copy of a block and the rated link, the same for every layout of distinct GPUs
    pair_gbs = multigpu.peer_bandwidth(0, 1, block, peer=True, repeat=repeat).gbs if count > 1 else None
    rated_gbs = links.read_topology().link_figure(0, 1).gbs if count > 1 else None
    for parts, devices, distinct in layouts(count):
        pair, rated = (pair_gbs, rated_gbs) if distinct else (None, None)
        for schedule in A.SCHEDULES:
            for issuer in A.ISSUERS:
                for graphs in (False, True):
                    run = guarded(f"all-to-all {parts} parts {schedule} {issuer} graphs={graphs}", A.alltoall_bandwidth, devices, block,
                                  schedule=schedule, issuer=issuer, graphs=graphs, repeat=repeat)
                    if run is None:
                        continue
                    row = {**run.as_dict(), "parts": parts, "one_gpu_per_part": distinct, "pair_gbs": pair, "rated_link_gbs": rated,
                           "lockstep_model_gbs": A.lockstep_gbs(parts, pair, schedule) if pair else None,
                           "over_pair": run.gbs() / pair if pair else None}
                    rows.append(row)
                    log(f"   {parts} parts ({'one GPU each' if distinct else 'on one GPU'}), {run.how}: {run.gbs():.1f} GB/s into each"
                        + (f", {row['over_pair']:.3f} of one pair's {pair:.1f} (rated {rated})" if pair else "") + f", wrong {run.mismatches}")
        nccl = guarded(f"NCCL all-to-all {parts}", A.nccl_alltoall_bandwidth, devices, block, repeat)
        if isinstance(nccl, A.AllToAllRun):
            rows.append({**nccl.as_dict(), "parts": parts, "one_gpu_per_part": distinct, "pair_gbs": pair,
                         "over_pair": nccl.gbs() / pair if pair else None})
            log(f"   NCCL {parts}: {nccl.gbs():.1f} GB/s into each")
        else:
            RESULTS["not_measured"][f"nccl_alltoall_{parts}"] = nccl
            log(f"   NCCL {parts}: not measured: {nccl}")
        if distinct:
            ours = [r for r in rows if r["parts"] == parts and r["schedule"] != "nccl" and r["over_pair"]]
            if ours:
                best = max(ours, key=lambda r: r["over_pair"])
                RESULTS[f"alltoall_over_pair_{parts}"] = best["over_pair"]
                RESULTS[f"alltoall_best_{parts}"] = {k: best[k] for k in ("schedule", "issuer", "graphs")}
    RESULTS["alltoall"] = rows
    if count < 2:
        RESULTS["not_measured"]["alltoall_over_pair_P"] = "one GPU: no pair of GPUs, so no link; the parts above shared one GPU"


def transpose_part(count: int, n: int, repeat: int) -> None:
    one = guarded("one-GPU transpose", D.one_gpu_transpose, (n, n), repeat=repeat)
    if one is None:
        return
    RESULTS["transpose_one_gpu"] = one.as_dict()
    rated = links.read_topology().link_figure(0, 1).gbs if count > 1 else None
    rows = []
    for parts, devices, distinct in layouts(count):
        inp = D.DistributedMatrix.filled((n, n), devices, seed=1)
        with D.DistributedTranspose(inp) as transpose:
            transpose.poison()
            transpose.issue("graphs")
            wrong = transpose.mismatches()
            times = multigpu.wall_times_ms(lambda: transpose.issue("graphs"), devices, repeat=repeat)
        block = n * n * 4 // parts**2
        row = {"parts": parts, "devices": devices, "one_gpu_per_part": distinct, "mismatches": wrong, **spread(times), "times_ms": times}
        if distinct:
            pair = multigpu.peer_bandwidth(0, 1, block, peer=True, repeat=repeat).gbs
            model = D.StageModel.from_rates(n * n * 4, parts, one.gbs, pair)
            row.update(pair_gbs=pair, rated_link_gbs=rated, pair_model_ms=model.overlapped_ms,
                       of_pair_model=model.overlapped_ms / row["median_ms"], of_pair_model_at_min=model.overlapped_ms / row["min_ms"])
            RESULTS[f"transpose_of_pair_model_{parts}"] = row["of_pair_model"]
        rows.append(row)
        log(f"   transpose {parts} parts: min/median/max {row['min_ms']:.3f}/{row['median_ms']:.3f}/{row['max_ms']:.3f} ms, wrong {wrong}"
            + (f", model {row['pair_model_ms']:.3f} ms on one pair's {row['pair_gbs']:.1f} GB/s: {row['of_pair_model']:.3f}" if distinct else ""))
    RESULTS["transpose"] = rows
    if count < 2:
        RESULTS["not_measured"]["transpose_of_pair_model_P"] = "one GPU: no pair rate to build the model on"


def fft_ms(plan: F.SlabFFT, slabs, repeat: int) -> list[float]:
    """Wall times (ms) of `repeat` forward transforms, each from idle GPUs to the last part's result."""
    return multigpu.wall_times_ms(lambda: plan.forward(slabs), plan.devices, repeat=repeat)


def fft_part(count: int, sizes: list[int], repeat: int) -> None:
    import cupy

    rows = []
    hbm = gpucourse.bandwidth_ceilings().copy_gbs
    pair = multigpu.peer_bandwidth(0, 1, 1 << 26, peer=True, repeat=5).gbs if count > 1 else None  # one pair's rate, for every model
    for n in sizes:
        shape = (n, n, n)
        x = np.random.default_rng(n).random(shape, dtype=np.float32).astype(np.complex64) if n <= 256 else None
        one_times = None
        for parts, devices, distinct in [(1, [0], True), *layouts(count)]:
            plan = F.SlabFFT(shape, devices)
            if x is not None:  # accuracy against one GPU's cupy.fft.fftn at the small size
                reference = cupy.fft.fftn(cupy.asarray(x)).get()
                error = F.relative_error(plan.gather(plan.forward(plan.scatter(x))), reference)
            else:
                error = None
            slabs = []
            for p, device in enumerate(devices):
                with multigpu.on_device(device):
                    slabs.append(cupy.random.default_rng(p).random((plan.rows0[p], n, n), dtype=np.float32).astype(np.complex64))
            times = fft_ms(plan, slabs, repeat)
            model = F.fft3d_model_ms(shape, parts, hbm, pair) if parts == 1 or (distinct and pair) else None
            row = {"n": n, "parts": parts, "devices": devices, "one_gpu_per_part": distinct, "rel_error": error, **spread(times),
                   "model": model}
            if parts == 1:
                one_times = row["median_ms"]
            elif distinct and one_times:
                row["efficiency"] = one_times / (parts * row["median_ms"])
                if parts == 4:
                    RESULTS[f"fft3d_efficiency_4_{n}"] = row["efficiency"]
            rows.append(row)
            log(f"   FFT {n}^3 on {parts} part(s) {'(one GPU each)' if distinct else '(on one GPU)'}: median {row['median_ms']:.3f} ms, "
                f"error {error}, model {model and round(model['total_ms'], 3)} ms")
            del plan, slabs
            cupy.get_default_memory_pool().free_all_blocks()
    RESULTS["fft3d"] = rows
    largest = max(sizes)
    if f"fft3d_efficiency_4_{largest}" in RESULTS:
        RESULTS["fft3d_efficiency_4"] = RESULTS[f"fft3d_efficiency_4_{largest}"]
    else:
        RESULTS["not_measured"]["fft3d_efficiency_4"] = f"needs 4 GPUs; this machine has {count}"
    weak, base = [], min(sizes)  # weak scaling: base planes per part, the cube P times as deep
    for parts, devices, distinct in [(1, [0], True), *layouts(count)]:
        plan = F.SlabFFT((base * parts, base, base), devices)
        slabs = []
        for p, device in enumerate(devices):
            with multigpu.on_device(device):
                slabs.append(cupy.ones((plan.rows0[p], base, base), np.complex64))
        times = fft_ms(plan, slabs, repeat)
        weak.append({"parts": parts, "devices": devices, "one_gpu_per_part": distinct, "shape": [base * parts, base, base], **spread(times)})
        weak[-1]["efficiency"] = weak[0]["median_ms"] / weak[-1]["median_ms"]
        log(f"   weak: {base * parts} x {base}² on {parts} part(s): {weak[-1]['median_ms']:.3f} ms, efficiency {weak[-1]['efficiency']:.3f}")
        del plan, slabs
        cupy.get_default_memory_pool().free_all_blocks()
    RESULTS["fft3d_weak"] = weak
    real = F.SlabFFT((largest,) * 3, layouts(count)[-1][1], real=True)  # float32 R2C at the largest size
    slabs = []
    for p, device in enumerate(real.devices):
        with multigpu.on_device(device):
            slabs.append(cupy.ones((real.rows0[p], largest, largest), np.float32))
    RESULTS["fft3d_r2c"] = {"n": largest, "devices": real.devices, **spread(fft_ms(real, slabs, repeat))}
    log(f"   R2C {largest}^3 on {real.devices}: {RESULTS['fft3d_r2c']['median_ms']:.3f} ms")
    del real, slabs
    cupy.get_default_memory_pool().free_all_blocks()


def ranks_part(count: int, n: int, repeat: int) -> None:
    """The slab FFT with one rank per GPU (NCCL, both orders) and cuFFTMp on the same ranks, through mpiexec."""
    from gpucourse.multigpu import mpi

    if count < 2:
        RESULTS["not_measured"]["fft3d_ranks"] = "one GPU: NCCL takes one GPU per rank"
        RESULTS["not_measured"]["fft3d_over_cufftmp_4"] = f"needs 4 GPUs; this machine has {count}"
        return
    if mpi.launcher_or_none() is None:
        RESULTS["not_measured"]["fft3d_ranks"] = "no MPI launcher (mpiexec) here"
        return
    common = ["--shape", n, n, n, "--repeat", repeat, "--expect-ranks", count]
    RESULTS["fft3d_ranks"] = {}
    for order in ("rotated", "grouped"):
        run = mpi.run_program("gpucourse.multigpu.mpi.fft3d", count, [*common, "--order", order], timeout_s=300, check=False)
        RESULTS["fft3d_ranks"][order] = run.result or {"error": (run.stdout + run.stderr)[-1500:]}
        log(f"   {count} ranks, {order}: {RESULTS['fft3d_ranks'][order].get('ms')} ms")
    run = mpi.run_program("gpucourse.multigpu.mpi.fft3d", count, [*common, "--cufftmp"], timeout_s=300, check=False)
    cufftmp = (run.result or {}).get("cufftmp") or {"error": (run.stdout + run.stderr)[-1500:]}
    RESULTS["fft3d_cufftmp"] = cufftmp
    log(f"   cuFFTMp on {count} ranks: {cufftmp}")
    ours = min((r.get("ms") or float("inf")) for r in RESULTS["fft3d_ranks"].values())
    if count == 4 and cufftmp.get("ms") and ours < float("inf"):
        RESULTS["fft3d_over_cufftmp_4"] = cufftmp["ms"] / ours
    else:
        RESULTS["not_measured"]["fft3d_over_cufftmp_4"] = (f"cuFFTMp did not run: {cufftmp.get('skipped') or cufftmp.get('error')}"
                                                           if not cufftmp.get("ms") else f"needs 4 GPUs; this machine has {count}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default=None)
    parser.add_argument("--n", type=int, default=None, help="transpose size (default 16384; 64 in the simulator)")
    parser.add_argument("--block-mib", type=int, default=64, help="all-to-all block in MiB")
    parser.add_argument("--fft", default=None, help="FFT sizes, comma-separated (default 256,512,1024)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--parts", default="alltoall,transpose,fft,ranks")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sim = gpucourse.is_simulator()
    count = multigpu.device_count()
    commit = args.commit or subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                           cwd=Path(__file__).resolve().parent.parent).stdout.strip()
    RESULTS["machine"] = {"devices": [str(d) for d in multigpu.devices()], "count": count, "simulated": sim, "commit": commit}
    if not sim:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version", "--format=csv,noheader"], capture_output=True, text=True)
        RESULTS["machine"]["gpus"] = smi.stdout.strip().splitlines()
        RESULTS["machine"]["driver"] = smi.stdout.split(",")[-1].strip() if smi.stdout else None
    log(RESULTS["machine"])
    if sim:
        RESULTS["not_measured"]["all"] = "simulator mode: the copies and FFTs run and are checked, nothing is timed"
    parts = args.parts.split(",")
    block = (args.block_mib << 20) if not sim else 1024
    if "alltoall" in parts and not sim:
        guarded("all-to-all", alltoall_part, count, block, args.repeat)
    if "transpose" in parts and not sim:
        guarded("transpose", transpose_part, count, args.n or 16384, args.repeat)
    fft_sizes = [int(s) for s in (args.fft or "256,512,1024").split(",")]
    if "fft" in parts and not sim:
        guarded("FFT", fft_part, count, fft_sizes, min(args.repeat, 10))
    if "ranks" in parts and not sim:
        guarded("FFT, one rank per GPU", ranks_part, count, max(fft_sizes), min(args.repeat, 10))
    if sim:  # the logic still runs on small sizes
        run = A.alltoall_bandwidth([0, 0, 0], 1024, repeat=1)
        RESULTS["simulator_check"] = {"alltoall_mismatches": run.mismatches}
    json.dump(RESULTS, open(out / "multigpu_alltoall.json", "w"), indent=1, default=str)
    log(json.dumps({k: v for k, v in RESULTS.items() if k not in ("alltoall", "transpose", "fft3d")}, indent=1, default=str))
    log("wrote", out / "multigpu_alltoall.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
