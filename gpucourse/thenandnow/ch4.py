"""Chapter 4 of the report: device memory, peer-to-peer copies, the distributed transpose, and the MPI transposes."""

from __future__ import annotations

from .. import mode, multigpu
from ..errors import CourseError
from ..multigpu import mpi
from ..multigpu import transpose as D
from ..sizes import problem_size
from .core import BookCell, ChapterPlan, Context, Row, Section, cells

STEPS = ("ch4: device memory", "ch4: peer-to-peer copies", "ch4: distributed transpose", "ch4: MPI transposes")

NOT_MEASURED = {
    r"ch4_mpi_assigndevice_ranks": "ranks of the book's three-node demo; the course's rank placement (one GPU per node-local rank) is "
                                   "tested in tests/test_mpi*.py and shown in notebook 4.4",
}


def memory(ctx: Context) -> list[Section]:
    """Free device memory before and after a 16 MiB allocation (the book's directTransfer opening)."""
    ctx.step(STEPS[0])
    section = Section("Devices and their memory (§4.1)")
    section.rows.append(Row("GPUs visible", [], multigpu.device_count() if not ctx.simulated else 0,
                            note="CUDA_VISIBLE_DEVICES: " + multigpu.visible_devices_setting()))
    if ctx.simulated:
        for label, ids in (("free memory before a 16 MiB array", ("ch4_direct_freemem_before_M2050", "ch4_direct_freemem_before_K10")),
                           ("free memory after it", ("ch4_direct_freemem_after_M2050", "ch4_direct_freemem_after_K10")),
                           ("difference", ("ch4_direct_alloc_diff",))):
            section.rows.append(Row(label, cells(*ids), None, "bytes", note="a GPU's memory: none in the simulator"))
        return [section]
    from ..arrays import require_cupy

    cupy = require_cupy("device memory")
    cupy.get_default_memory_pool().free_all_blocks()
    before = multigpu.memory_info(0)[0]
    block = cupy.empty(16 * 2**20 // 4, dtype=cupy.float32)
    after = multigpu.memory_info(0)[0]
    section.rows.append(Row("free memory on GPU 0 before a 16 MiB array", cells("ch4_direct_freemem_before_M2050", "ch4_direct_freemem_before_K10"),
                            before, "bytes"))
    section.rows.append(Row("free memory after it", cells("ch4_direct_freemem_after_M2050", "ch4_direct_freemem_after_K10"), after, "bytes"))
    section.rows.append(Row("difference", cells("ch4_direct_alloc_diff"), before - after, "bytes",
                            note="CuPy's memory pool may reserve more than the array" if before - after != block.nbytes else ""))
    return [section]


def peer(ctx: Context) -> list[Section]:
    """Copies between GPUs with and without peer access, beside the book's M2050, K10 and S2050 figures."""
    ctx.step(STEPS[1])
    section = Section("Peer-to-peer copies between two GPUs (§4.2)")
    count = 0 if ctx.simulated else multigpu.device_count()
    nbytes = problem_size("ch4_p2p_bytes")
    with_peer = cells("ch4_direct_assign_timingdev0_M2050", "ch4_direct_memcpypeer_timingdev0_M2050", "ch4_direct_assign_timingdev1_M2050",
                      "ch4_direct_memcpypeer_timingdev1_M2050", "ch4_direct_assign_timingdev0_K10", "ch4_direct_memcpypeer_timingdev0_K10",
                      "ch4_direct_assign_timingdev1_K10", "ch4_direct_memcpypeer_timingdev1_K10", "ch4_p2pbw_K10_*",
                      "ch4_p2pbw_S2050_intra")
    without = cells("ch4_direct_memcpypeer_nop2p_timingdev0_M2050", "ch4_direct_memcpypeer_nop2p_timingdev1_M2050",
                    "ch4_direct_memcpypeer_nop2p_timingdev0_K10", "ch4_direct_memcpypeer_nop2p_timingdev1_K10",
                    "ch4_direct_crossboard_timingdev0_K10", "ch4_direct_crossboard_timingdev1_K10", "ch4_p2pbw_S2050_inter",
                    "ch4_p2pbw_S2050_inter_min1", "ch4_p2pbw_S2050_inter_min2")
    for label, book_cells in ((f"copy of {nbytes // 2**20} MiB, GPU 0 to GPU 1, peer access on", [BookCell.of(c.id, False) for c in with_peer]),
                              ("the same copy, peer access off (staged through the host)", [BookCell.of(c.id, False) for c in without])):
        here, note = None, "needs two GPUs: this machine has " + ("none (simulator)" if ctx.simulated else f"{count}")
        if count >= 2:
            allowed = multigpu.can_access_peer(0, 1)
            on = "peer access on" in label
            if on and not allowed:
                note = "this pair cannot reach each other directly"
            else:
                transfer = multigpu.peer_bandwidth(0, 1, nbytes, peer=on, repeat=ctx.repeat)
                here, note = transfer.gbs, "" if transfer.verified else "the copy came out WRONG"
        section.rows.append(Row(label, book_cells, here, "GB/s", note=note))
    return [section]


def transpose(ctx: Context) -> list[Section]:
    """The book's transpose split by rows over the GPUs (or as two slices of one), beside one GPU's transpose."""
    ctx.step(STEPS[2])
    shape = problem_size("ch4_transpose")
    tile, block_rows = problem_size("ch4_tile")
    section = Section(f"The peer-to-peer transpose of a {shape[0]} x {shape[1]} float32 matrix (§4.3)")
    count = 1 if ctx.simulated else multigpu.device_count()
    single = D.one_gpu_transpose(shape, repeat=ctx.repeat, tile=tile, block_rows=block_rows)
    section.rows.append(Row("one GPU, chapter 3's transpose of the whole matrix", [], single.gbs, "GB/s", ctx.fraction(single.gbs),
                            note="checked" if single.mismatches == 0 else f"{single.mismatches} WRONG"))
    devices = list(range(count)) if count > 1 else [0, 0]
    try:
        runs = D.measure(shape, devices, repeat=ctx.repeat, tile=tile, block_rows=block_rows)
    except CourseError as refused:
        section.rows.append(Row("split over the GPUs", cells("ch4_p2p_transpose_async_M2050"), None, "GB/s", note=f"refused: {refused}"))
        return [section]
    where = f"{count} GPUs" if count > 1 else "two slices of one GPU"
    for run in runs:
        figure_id = "ch4_p2p_transpose_async_M2050" if "overlapped" in run.how else "ch4_p2p_transpose_sync_M2050"
        section.rows.append(Row(f"split by rows over {where}, {run.how}", cells(figure_id), run.gbs, "GB/s",
                                note=("checked" if run.mismatches == 0 else f"{run.mismatches} WRONG") + f"; {run.ms:.3f} ms"))
    return [section]


def mpi_rows(ctx: Context) -> list[Section]:
    """The MPI transpose with two ranks: staged through host memory, and device to device through NCCL where it can run."""
    ctx.step(STEPS[3])
    section = Section("The MPI transpose, two ranks (§4.4)")
    launcher = mpi.launcher_or_none()
    if launcher is None:
        for figure_id in ("ch4_mpi_transpose_hoststaged", "ch4_mpi_transpose_gpuaware"):
            section.rows.append(Row(figure_id.replace("ch4_mpi_transpose_", "MPI transpose, "), cells(figure_id), None, "GB/s",
                                    note="no MPI launcher (mpiexec) found on this machine"))
        return [section]
    shape = problem_size("ch4_mpi_transpose")
    ranks = problem_size("ch4_mpi_ranks")
    for method, figure_id in (("host", "ch4_mpi_transpose_hoststaged"), ("nccl", "ch4_mpi_transpose_gpuaware")):
        args = ["--shape", *shape, "--method", method, "--repeat", max(2, ctx.repeat // 2), "--expect-ranks", ranks]
        run = mpi.run_program("gpucourse.multigpu.mpi.transpose", ranks, args, timeout_s=300, check=False)
        result = run.result or {}
        label = "staged through host memory (D2H, MPI, H2D)" if method == "host" else "device to device through NCCL (the book: CUDA-aware MPI)"
        if "gbs" in result:
            section.rows.append(Row(f"MPI transpose {shape[0]} x {shape[1]}, {label}", [BookCell.of(figure_id, False)], result["gbs"], "GB/s",
                                    note=("verified" if result.get("verified") else "WRONG") + f"; {result['ms']:.2f} ms"
                                         + ("; simulator mode: NumPy arrays" if mode.is_simulator() else "")))
        else:
            reason = result.get("skipped") or result.get("error") or f"exit code {run.returncode}"
            section.rows.append(Row(f"MPI transpose, {label}", [BookCell.of(figure_id, False)], None, "GB/s", note=str(reason)[:200]))
    return [section]


def measure(ctx: Context) -> list[Section]:
    """Every chapter-4 section of the report."""
    return memory(ctx) + peer(ctx) + transpose(ctx) + mpi_rows(ctx)


PLAN = ChapterPlan(4, "Multi-GPU programming", STEPS, measure, NOT_MEASURED)
