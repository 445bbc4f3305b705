"""Chapter 4 on a GPU machine in one run: devices, links, peer copies, the distributed transpose, the MPI transposes.

    NCCL_NVLS_ENABLE=0 python3 tools/gpu_ch4.py [--out DIR] [--budget SECONDS]

Works on any number of GPUs: with one, the peer-to-peer parts say what they would measure and the
distributed transpose runs as two slices on one GPU; the MPI runs put two ranks on it (NCCL then
runs with one rank). Each part is checked before it is timed; a part that fails is logged and the
others go on. Prints as it goes and a short table at the end; writes DIR/ch4_results.json.
The measurements of record are in measurements/ch4.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off on shared machines

from gpu_parts import log, run_part  # noqa: E402 - tools/, this script's folder

import gpucourse  # noqa: E402  (first: it picks the mode)
from gpucourse import multigpu  # noqa: E402
from gpucourse.multigpu import links as topology  # noqa: E402
from gpucourse.multigpu import mpi  # noqa: E402
from gpucourse.multigpu import transpose as D  # noqa: E402
from gpucourse.multigpu.mpi.exchange import nccl_status  # noqa: E402

RESULTS: dict = {}
SUMMARY: list[str] = []
DEADLINE = float("inf")


def part(name: str):
    """Decorator: run a part of the script, log and record an exception instead of stopping, skip when out of time."""
    def wrap(function):
        def run(*args, **kwargs):
            if time.time() > DEADLINE:
                log(f"== {name}: skipped (time budget spent)")
                RESULTS[name] = {"skipped": "time budget spent"}
                return None
            value, error = run_part(name, function, *args, **kwargs)
            if error:
                RESULTS[name] = {"error": error}
            return value
        return run
    return wrap


def smi(*arguments: str) -> str:
    if shutil.which("nvidia-smi") is None:
        return ""
    return subprocess.run(["nvidia-smi", *arguments], capture_output=True, text=True, timeout=60).stdout


def free_memory() -> None:
    if gpucourse.on_gpu():
        import cupy

        for ordinal in range(multigpu.device_count()):
            with multigpu.on_device(ordinal):
                cupy.get_default_memory_pool().free_all_blocks()


@part("environment")
def environment() -> None:
    from gpucourse.banner import versions

    launcher = mpi.launcher_or_none()
    try:
        import mpi4py

        mpi4py_text = f"mpi4py {mpi4py.__version__}, config {mpi4py.get_config()}"
    except Exception as exc:
        mpi4py_text = f"mpi4py: {exc}"
    info = {"gpus": smi("--query-gpu=index,name,driver_version,pci.bus_id,memory.total", "--format=csv,noheader").strip(),
            "versions": versions(), "launcher": str(launcher) if launcher else None, "mpi4py": mpi4py_text,
            "nccl": nccl_status()[1], "visible": multigpu.visible_devices_setting(),
            "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE")}
    for key, value in info.items():
        log(f"   {key}: {value}")
    RESULTS["environment"] = info


@part("devices and links")
def devices_and_links() -> topology.Topology:
    log(multigpu.device_table())
    matrix = multigpu.peer_matrix()
    log(multigpu.peer_table(matrix))
    links = topology.read_topology()
    log(links.topo_text.strip() or "   (nvidia-smi topo -m gave nothing)")
    log(links.nvlink_text.strip() or "   (nvidia-smi nvlink -s gave nothing)")
    figures = {f"{a}-{b}": links.link_figure(a, b).__dict__ for a in range(len(matrix)) for b in range(len(matrix)) if a != b}
    for pair, figure in figures.items():
        log(f"   link {pair}: {figure['description']}")
    ceilings = {}
    for ordinal in range(multigpu.device_count()):
        with multigpu.on_device(ordinal):
            ceilings[ordinal] = gpucourse.bandwidth_ceilings()
            log(f"   device {ordinal}: {ceilings[ordinal]}")
    RESULTS["devices"] = {"table": [list(map(str, row)) for row in multigpu.device_table().rows], "peer_matrix": matrix.tolist(),
                          "topo": links.topo_text, "nvlink": links.nvlink_text, "pcie": {str(k): v for k, v in links.pcie.items()},
                          "link_figures": figures,
                          "copy_gbs": {str(k): c.copy_gbs for k, c in ceilings.items()},
                          "theoretical_gbs": {str(k): c.theoretical_gbs for k, c in ceilings.items()}}
    SUMMARY.append(f"devices: {multigpu.device_count()}; peer matrix {matrix.astype(int).tolist()}; copy ceiling device 0 "
                   f"{ceilings[0].copy_gbs:.0f} GB/s")
    return links


@part("peer-to-peer copies")
def peer_copies(links: topology.Topology | None, repeat: int) -> None:
    if multigpu.device_count() < 2:
        log("   one GPU: with two or more this part times cudaMemcpyPeer between every pair, with and without peer access")
        RESULTS["p2p"] = {"skipped": "one GPU"}
        return
    nbytes = gpucourse.problem_size("ch4_p2p_bytes")
    can = bool(multigpu.peer_matrix()[0, 1])
    direct = []
    for timing_device in (0, 1):  # the book's directTransfer: 16 MiB from 0 to 1, events on each device in turn
        for peer in ((True, False) if can else (False,)):
            transfer = multigpu.peer_bandwidth(0, 1, nbytes, peer=peer, timing_device=timing_device, repeat=repeat)
            log(f"   {transfer}")
            direct.append(transfer.__dict__ | {"gbs": transfer.gbs})
    matrix = multigpu.bandwidth_matrix(nbytes, peer=True, repeat=repeat)
    log(f"   bandwidth matrix (GB/s, rows send, columns receive), {nbytes / 2**20:.0f} MiB, peer access where possible:\n{matrix.round(1)}")
    sizes = gpucourse.problem_size("ch4_p2p_sizes")
    sweeps = {}
    for peer in ((True, False) if can else (False,)):
        transfers = multigpu.peer_sweep(0, 1, sizes, peer=peer, repeat=repeat)
        sweeps["on" if peer else "off"] = [{"bytes": t.nbytes, "ms": t.median_ms, "gbs": t.gbs, "verified": t.verified} for t in transfers]
        for t in transfers:
            log(f"   sweep peer {'on ' if peer else 'off'} {t.nbytes:>11d} B  {t.median_ms * 1e3:10.1f} us  {t.gbs:8.1f} GB/s"
                f"{'' if t.verified else '  WRONG'}")
    reverse = multigpu.peer_bandwidth(1, 0, max(sizes), peer=can, repeat=repeat)
    log(f"   {reverse}")
    figure = links.link_figure(0, 1) if links else topology.LinkFigure("unknown", None, "not read")
    largest = sweeps["on" if can else "off"][-1]
    fraction = largest["gbs"] / figure.gbs if figure.gbs else None
    log(f"   largest copy {largest['gbs']:.1f} GB/s against the link's {figure.description}"
        + (f": {fraction:.0%}" if fraction else ""))
    RESULTS["p2p"] = {"direct": direct, "matrix_gbs": matrix.tolist(), "sweeps": sweeps, "reverse_largest": reverse.__dict__ | {"gbs": reverse.gbs},
                      "link": figure.__dict__, "largest_fraction_of_link": fraction}
    SUMMARY.append(f"P2P 0->1 {largest['bytes'] / 2**30:.2g} GiB: {largest['gbs']:.1f} GB/s (peer {'on' if can else 'off'})"
                   + (f", {fraction:.0%} of the link's {figure.gbs:.0f} GB/s ({figure.kind})" if fraction else f", link {figure.kind}")
                   + (f"; peer off {sweeps['off'][-1]['gbs']:.1f} GB/s" if can else ""))


@part("distributed transpose")
def distributed_transpose(repeat: int) -> None:
    shape = gpucourse.problem_size("ch4_transpose")
    tile, block_rows = gpucourse.problem_size("ch4_tile")
    count = multigpu.device_count()
    with multigpu.on_device(0):
        copy_gbs = gpucourse.bandwidth_ceilings().copy_gbs if gpucourse.on_gpu() else None
        single = D.one_gpu_transpose(shape, repeat=repeat, tile=tile, block_rows=block_rows)
    log(f"   {single}" + (f" = {single.gbs / copy_gbs:.2f} of the copy" if copy_gbs else ""))
    runs = [single]
    free_memory()
    layouts = [list(range(n)) for n in range(1, count + 1)] + [[0, 0]]
    for devices in layouts:
        try:
            D.split_rows(shape, len(devices))
        except gpucourse.errors.DecompositionError as exc:
            log(f"   {len(devices)} parts: {exc}")
            continue
        several = len(set(devices)) == count and count > 1 and gpucourse.on_gpu()
        variants = [("numba", True)] + ([("numba", False), ("cupy", True)] if several else [])
        for kernel, peer in variants:
            for run in D.measure(shape, devices, kernel=kernel, repeat=repeat, tile=tile, block_rows=block_rows, peer_access=peer,
                                 overlaps=(True, False) if len(devices) > 1 else (True,)):
                log(f"   {run}" + (f" = {run.gbs / copy_gbs:.2f} of one GPU's copy" if copy_gbs else ""))
                runs.append(run)
            free_memory()
    RESULTS["distributed"] = {"copy_gbs_device0": copy_gbs, "runs": [r.as_dict() for r in runs]}
    for run in runs:
        where = "2 slices on GPU 0" if run.devices == (0, 0) else f"{run.gpus} GPU(s)"
        SUMMARY.append(f"transpose {shape[0]}x{shape[1]} on {where} ({run.how}): {run.ms:.3f} ms, {run.gbs:.0f} GB/s"
                       + (f", {run.gbs / copy_gbs:.2f} of one GPU's copy" if copy_gbs else ""))
    if any(r.mismatches for r in runs):
        SUMMARY.append("transpose: SOME RESULTS WRONG (see log)")


@part("MPI")
def mpi_programs(repeat: int) -> None:
    launcher = mpi.find_launcher()
    log(f"   launcher: {launcher}")
    shape = gpucourse.problem_size("ch4_mpi_transpose")
    ranks = mpi.default_ranks()
    runs = {}
    devices = mpi.run_program("gpucourse.multigpu.mpi.devices", ranks, timeout_s=240)
    log("\n".join(devices.lines))
    runs["devices"] = devices.result
    plan = [("host", ranks), ("nccl", ranks), ("cuda-aware", ranks)]
    if multigpu.device_count() < ranks:
        plan.append(("nccl", 1))  # NCCL needs a GPU per rank: on one GPU it runs with one rank
    for method, count in plan:
        args = ["--shape", *shape, "--method", method, "--repeat", repeat, "--expect-ranks", count]
        run = mpi.run_program("gpucourse.multigpu.mpi.transpose", count, args, timeout_s=300, check=False)
        log("\n".join(f"   {line}" for line in run.lines[-3:]))
        if run.returncode != 0 or not run.result:
            log(run.stderr[-3000:])
        runs[f"{method} {count} ranks"] = {k: v for k, v in run.result.items() if k != "placements"} | {"returncode": run.returncode}
        result = run.result
        if "gbs" in result:
            SUMMARY.append(f"MPI {method}, {count} rank(s), {shape[0]}x{shape[1]}: {result['ms']:.2f} ms, {result['gbs']:.1f} GB/s, "
                           f"{'verified' if result['verified'] else 'WRONG'}")
        else:
            SUMMARY.append(f"MPI {method}, {count} rank(s): {result.get('skipped') or result.get('error') or 'failed'}"[:160])
    RESULTS["mpi"] = runs


def main() -> int:
    global DEADLINE
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=".")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds after which remaining parts are skipped")
    args = parser.parse_args()
    DEADLINE = time.time() + args.budget
    repeat = gpucourse.problem_size("ch4_repeat")
    log(gpucourse.banner().headline())
    environment()
    links = devices_and_links()
    peer_copies(links, repeat)
    free_memory()
    distributed_transpose(repeat)
    free_memory()
    mpi_programs(min(repeat, 10))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ch4_results.json").write_text(json.dumps(RESULTS, indent=1, default=str))
    log("\n==== summary")
    for line in SUMMARY:
        log(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
