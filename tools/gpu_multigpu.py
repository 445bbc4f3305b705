"""The split Jacobi solver and the distributed transpose on 1, 2, 4 ... GPUs, beside NVIDIA's multi-GPU reference, in one run.

    NCCL_NVLS_ENABLE=0 python3 tools/gpu_multigpu.py --out DIR [--ref .ref] [--parts jacobi,weak,reference,transpose]

The reference (NVIDIA/multi-gpu-programming-models, its multi_threaded_p2p and nccl_overlap Jacobi
solvers) is not part of this repository: put its folders under --ref and this script builds them
with nvcc (-std=c++17) and runs them with the same mesh, iterations and norm interval as ours.
Writes DIR/multigpu.json and prints a table at the end. The record is measurements/multigpu_jacobi.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off on shared machines

from gpu_parts import log, run_part  # noqa: E402 - tools/, this script's folder

import gpucourse  # noqa: E402  (first: it picks the mode)
from gpucourse import multigpu  # noqa: E402
from gpucourse.multigpu import alltoall  # noqa: E402
from gpucourse.multigpu import transpose as D  # noqa: E402
from gpucourse.multigpu.domains import scaling  # noqa: E402

RESULTS: dict = {}


def guarded(name: str, function, *args, **kwargs):
    """Run one part; log and record an exception instead of stopping."""
    value, error = run_part(name, function, *args, **kwargs)
    if error:
        RESULTS[name] = {"error": error}
    return value


def nccl_paths() -> tuple[str, str]:
    """(include, lib) folders of the NCCL that the nvidia-nccl Python package ships."""
    import nvidia.nccl

    root = Path(list(nvidia.nccl.__path__)[0])
    return str(root / "include"), str(root / "lib")


def build_reference(ref: Path) -> dict:
    """Build the reference's p2p and NCCL-overlap solvers for this GPU (sm_90 on Hopper)."""
    cc = gpucourse.current_device().cc.replace(".", "")
    arch = f"-gencode arch=compute_{cc},code=sm_{cc}"
    built = {}
    p2p = ref / "multi_threaded_p2p"
    cmd = f"nvcc -DHAVE_CUB -Xcompiler -fopenmp -lineinfo -DUSE_NVTX -ldl {arch} -std=c++17 jacobi.cu -o jacobi"
    built["multi_threaded_p2p"] = subprocess.run(cmd, shell=True, cwd=p2p, capture_output=True, text=True).returncode
    inc, lib = nccl_paths()
    nccl = ref / "nccl_overlap"
    cmd = (f"nvcc -DHAVE_CUB -lineinfo {arch} -std=c++17 -c jacobi_kernels.cu && mpicxx -DUSE_NVTX -I/usr/local/cuda/include "
           f"-I{inc} -std=c++17 jacobi.cpp jacobi_kernels.o -L/usr/local/cuda/lib64 -L{lib} -lcudart -ldl -l:libnccl.so.2 "
           f"-Wl,-rpath,{lib} -o jacobi")
    out = subprocess.run(cmd, shell=True, cwd=nccl, capture_output=True, text=True)
    built["nccl_overlap"] = out.returncode
    if out.returncode:
        log(out.stderr[-2000:])
    return built


def run_reference(ref: Path, counts: list[int], niter: int, nccheck: int, n: int) -> list[dict]:
    """Run the reference on each GPU count: its CSV line (name, nx, ny, iterations, nccheck, GPUs, ..., time, one-GPU time)."""
    rows = []
    for gpus in counts:
        visible = ",".join(str(d) for d in range(gpus))
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible, "NCCL_NVLS_ENABLE": "0"}
        args = f"-niter {niter} -nccheck {nccheck} -nx {n} -ny {n} -csv"
        commands = {"multi_threaded_p2p": f"./jacobi {args}",
                    "nccl_overlap": f"mpirun --allow-run-as-root -np {gpus} -x NCCL_NVLS_ENABLE=0 -x CUDA_VISIBLE_DEVICES ./jacobi {args}"}
        for name, cmd in commands.items():
            if not (ref / name / "jacobi").exists():
                continue
            out = subprocess.run(cmd, shell=True, cwd=ref / name, env=env, capture_output=True, text=True, timeout=300)
            line = [x for x in out.stdout.splitlines() if x.startswith(name)]
            if not line:
                log(f"!! reference {name} on {gpus} GPUs: no result\n{out.stdout[-1500:]}\n{out.stderr[-1500:]}")
                continue
            fields = [f.strip() for f in line[-1].split(",")]
            seconds, serial = float(fields[-2]), float(fields[-1])
            rows.append({"name": name, "gpus": gpus, "seconds": seconds, "one_gpu_seconds": serial, "ms_per_sweep": seconds / niter * 1e3,
                         "efficiency": serial / (gpus * seconds), "csv": line[-1]})
            log(f"   reference {name}, {gpus} GPU(s): {seconds:.4f} s ({serial:.4f} s on one GPU), efficiency {serial / (gpus * seconds):.3f}")
    return rows


def summarize(results: dict, commit: str | None) -> dict:
    """The record's keys: efficiency on 2 and 4 GPUs (strong, the default halo, graphs), the reference's time over ours, the transpose."""
    strong = [r for r in results.get("strong", []) if r["graphs"] and (r["halo"] == 10 or r["gpus"] == 1)]
    eff = {r["gpus"]: r["efficiency"] for r in strong}
    ours = {r["gpus"]: r["ms_per_sweep"] for r in strong}
    ref = {r["gpus"]: r["ms_per_sweep"] for r in results.get("reference") or [] if r["name"] == "multi_threaded_p2p"}
    model = {r["gpus"]: r["of_model"] for r in results.get("transpose_model", [])}
    one = {r["gpus"]: r.get("bits") for r in results.get("strong", []) if r["gpus"] == 1 and r.get("bits")}
    bits = {r["ranks"]: r.get("digest") for r in results.get("ranks", []) if r.get("digest")}
    same = [r["same_bits"] for r in strong if r["same_bits"] is not None]
    return {"efficiency_2": eff.get(2), "efficiency_4": eff.get(4), "ms_per_sweep": ours,
            "reference_ms_per_sweep": ref, "reference_over_ours_4": ref[4] / ours[4] if 4 in ref and 4 in ours else None,
            "transpose_of_model_2": model.get(2), "transpose_of_model_4": model.get(4),
            "same_bits_as_one_gpu": all(same) if same else None,
            "nccl_same_bits_as_one_gpu": all(d == next(iter(one.values()), None) for d in bits.values()) if bits and one else None,
            "gpus": results["machine"]["devices"][:1] and f"{results['machine']['count']} x {gpucourse.current_device().name}",
            "driver": results.get("driver"), "commit": commit, "date": time.strftime("%Y-%m-%d")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".gpu-out")
    parser.add_argument("--ref", default=".ref")
    parser.add_argument("--n", type=int, default=None, help="mesh side (default: 16384 on a GPU, 66 in the simulator)")
    parser.add_argument("--sweeps", type=int, default=None)
    parser.add_argument("--every", type=int, default=None)
    parser.add_argument("--halos", default="1,10")
    parser.add_argument("--parts", default="jacobi,weak,ranks,reference,transpose")
    parser.add_argument("--commit", default=None)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sim = gpucourse.is_simulator()
    n = args.n or (66 if sim else 16384)
    sweeps = args.sweeps or (20 if sim else 1000)
    every = args.every or (10 if sim else 100)
    counts = scaling.gpu_counts()
    parts = args.parts.split(",")
    RESULTS["machine"] = {"devices": [str(d) for d in multigpu.devices()], "count": multigpu.device_count(), "simulated": sim}
    log(RESULTS["machine"])
    if not sim:
        RESULTS["topology"] = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
        RESULTS["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True).stdout.split()[0]
    RESULTS["one_gpu_sweep"] = guarded("one-GPU sweep", scaling.one_gpu_sweep, (n, n))
    log(RESULTS["one_gpu_sweep"])
    if "jacobi" in parts:
        RESULTS["strong"] = []
        for halo in [int(h) for h in args.halos.split(",")]:
            for graphs in (True, False):
                runs = guarded(f"strong scaling, halo {halo}, graphs {graphs}", scaling.strong_scaling, (n, n), counts,
                               sweeps=sweeps, every=every, halo=halo, graphs=graphs, check_bits=graphs)
                for run in runs or []:
                    RESULTS["strong"].append(run.as_dict())
                    log(f"   {run.gpus} GPU(s) halo {run.halo} graphs {run.graphs}: {run.ms_per_sweep:.4f} ms/sweep, "
                        f"efficiency {run.efficiency:.3f}, same bits {run.same_bits}")
        json.dump(RESULTS, open(out / "multigpu.json", "w"), indent=1, default=str)
    if "weak" in parts:
        runs = guarded("weak scaling", scaling.weak_scaling, n - 2, n, counts, sweeps=sweeps, every=every, halo=10 if not sim else 2)
        RESULTS["weak"] = [run.as_dict() for run in runs or []]
        for run in runs or []:
            log(f"   weak {run.gpus} GPU(s) {run.shape}: {run.ms_per_sweep:.4f} ms/sweep, efficiency {run.efficiency:.3f}")
    if "ranks" in parts:
        from gpucourse.multigpu import mpi

        RESULTS["ranks"] = []
        halo = 10 if not sim else 2
        for gpus in counts:
            args_ = ["--shape", n, n, "--sweeps", sweeps, "--every", every, "--halo", halo, "--check", "--repeat", 3, "--expect-ranks", gpus]
            run = guarded(f"NCCL ranks, {gpus}", mpi.run_program, "gpucourse.multigpu.domains.ranks", gpus, args_, timeout_s=300, check=False)
            if run is None:
                continue
            result = run.result or {"error": (run.stdout + run.stderr)[-1500:]}
            RESULTS["ranks"].append(result)
            log(f"   {gpus} rank(s): {result.get('ms_per_sweep')} ms/sweep, exchange {result.get('exchange')}, digest {result.get('digest')}"
                f" {result.get('error', '')}")
    if "reference" in parts and not sim:
        ref = Path(args.ref)
        RESULTS["reference_build"] = guarded("build the reference", build_reference, ref)
        RESULTS["reference"] = guarded("run the reference", run_reference, ref, counts, sweeps, every, n)
    if "transpose" in parts:
        RESULTS["transpose"] = []
        for gpus in counts[1:] or [2]:
            runs = guarded(f"transpose over {gpus}", D.measure, (n, n), scaling.devices_for(gpus),
                           overlaps=("graphs", *(f"graphs-{r}" for r in D.GRAPH_ROUTES if r != D.GRAPH_ROUTE), True, False))
            for run in runs or []:
                RESULTS["transpose"].append(run.as_dict())
                log(f"   {run}")
        one = guarded("one-GPU transpose", D.one_gpu_transpose, (n, n))
        RESULTS["transpose_one_gpu"] = one.as_dict() if one else None
        RESULTS["transpose_model"] = []
        for gpus in counts[1:]:
            if one is None or sim:
                break
            block = n * n * 4 // gpus**2
            pair = multigpu.peer_bandwidth(0, 1, block, peer=True, repeat=10).gbs
            # the first schedule's rate, kept beside the honest model for comparison with earlier records
            link = alltoall.alltoall_bandwidth(scaling.devices_for(gpus), block, schedule="queued", issuer="receiver", repeat=10).gbs()
            model = D.StageModel.from_rates(n * n * 4, gpus, one.gbs, link)
            pair_model = D.StageModel.from_rates(n * n * 4, gpus, one.gbs, pair)
            measured = {r["how"].split(",")[0]: r["ms"] for r in RESULTS["transpose"] if r["gpus"] == gpus}
            graphs_ms = measured.get(D.HOW_WORDS["graphs"])
            routes = {r: measured.get(D.HOW_WORDS[f"graphs-{r}"]) for r in D.GRAPH_ROUTES}
            row = {"routes_ms": routes, "default_route": D.GRAPH_ROUTE,
                   "gpus": gpus, "block_bytes": block, "link_gbs": link, "pair_link_gbs": pair,
                   "pair_model_ms": pair_model.overlapped_ms, "transpose_gbs": one.gbs, "model_ms": model.overlapped_ms,
                   "graphs_ms": graphs_ms, "overlapped_ms": measured.get(D.HOW_WORDS["overlapped"]),
                   "of_model": pair_model.overlapped_ms / graphs_ms if graphs_ms else None,
                   "of_queued_model": model.overlapped_ms / graphs_ms if graphs_ms else None}
            RESULTS["transpose_model"].append(row)
            log(f"   transpose model {gpus} GPUs: {row}")
    summary = summarize(RESULTS, args.commit)
    RESULTS["summary"] = summary
    log(json.dumps(summary, indent=1))
    json.dump(RESULTS, open(out / "multigpu.json", "w"), indent=1, default=str)
    log("wrote", out / "multigpu.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
