"""Chapter 3 of the report: transfers, coalescing, memory spaces, transpose, execution configuration, instructions, ufunc-style kernels."""

from __future__ import annotations

import numpy as np

from .. import book
from ..arrays import device_empty, random_array, to_device
from ..errors import CourseError, GPUOnlyFeature
from ..sizes import problem_size
from .core import BookCell, ChapterPlan, Context, Row, Section, cells

STEPS = ("ch3: host-device transfers", "ch3: overlapping transfers and kernels", "ch3: coalescing", "ch3: texture and memory spaces",
         "ch3: matrix transpose", "ch3: occupancy and instruction-level parallelism", "ch3: device limits and instructions",
         "ch3: ufunc-style kernels")

NOT_MEASURED = {
    r"ch3_(pcie_gen2_x16_peak|hyperq_queues_K20|fermi_onchip_mem|l1smem_total|regs_sm_cc10|regs_sm_cc3x|regs_full_occ_cc20|"
    r"maxregs_thread_cc1x|maxregs_thread_cc2x_30|maxregs_thread_cc35|regs_threads_multiple|smem_banks_cc1x|smem_banks_cc2x|"
    r"smem_bank_width_cc3x_option|constmem_size)": "hardware facts of the book's GPU generations, quoted in the chapter 3 notebooks; "
                                                   "this GPU's limits have rows under 'device limits'",
    r"ch3_offset_(C870_misaligned_factor|C1060_aligned_bytes|C1060_off1_bytes|C1060_off8_bytes)": "coalescing rules of compute "
        "capability 1.x (half-warp segments); notebook 3.2 counts this GPU's 32-byte sectors per request instead",
    r"ch3_stride_C2050_noL1_(SP|DP)_threshold": "the effect of PGI's -Mcuda=noL1 on a C2050; notebook 3.3 compares the L1 and L2-only "
                                                 "load paths over strides on this GPU",
    r"ch3_local_k3_sm1x_lmem|ch3_spill_example_(stores|loads)": "compiler reports for compute capability 1.x and of a code not in the "
                                                               "course; the local-memory rows report Numba's kernels for this GPU",
    r"ch3_const_incr_.*": "ptxinfo of a CUDA Fortran increment with its constant in constant or device memory: Numba passes scalars "
                          "as kernel parameters (which live in constant memory), so there is no pair to compare",
    r"ch3_partitions_(C870|C1060)|ch3_partition_stride_C1060|ch3_partition_camping_C870_size": "partition camping on GPUs of compute "
        "capability 1.x; current GPUs hash addresses over partitions (the diagonal transpose rows show it no longer pays)",
    r"ch3_tab3_2_(and_or_xor|shift|iadd|imul|fp32_rcp)_cc[0-9]+|ch3_tab3_2_fp32_fma_cc(10|13|20|30)|ch3_tab3_2_fp64_fma_cc(13|20|30)":
        "Table 3.2's instruction throughputs of old compute capabilities; the measured FMA rates of this GPU are in the rows",
    r"ch3_cuf_ilp_elements_per_thread": "the CUF compiler's choice of four elements per thread; the ufunc rows time 1 and 4 per thread",
}


def transfers_rows(ctx: Context) -> list[Section]:
    """The book's 16 MB BandwidthTest (two hosts) beside this machine's pageable and pinned copies."""
    from ..kernels import transfers

    ctx.step(STEPS[0])
    section = Section("Host-device transfers, pageable and pinned (§3.1.1)")
    nbytes = problem_size("ch3_bandwidth_test")
    for direction in ("H2D", "D2H"):
        for pinned in (False, True):
            kind = "pinned" if pinned else "pageable"
            measured = transfers.measure_transfer(nbytes, direction, pinned, repeat=ctx.repeat)
            section.rows.append(Row(f"{nbytes // 2**20 or nbytes / 2**20} MiB copy {direction}, {kind}",
                                    [BookCell.of(f"ch3_bwtest_{kind}_{direction}_{host}", as_bandwidth=False) for host in ("E5540", "E52667")],
                                    measured.gbs, "GB/s", note="a host memory copy in the simulator" if ctx.simulated else ""))
    section.rows.append(Row("size of the test copy", cells("ch3_bwtest_size_E5540", "ch3_bwtest_size_E52667"), nbytes / 2**20, "MiB"))
    link = None if ctx.simulated else _pcie_peak()
    section.rows.append(Row("peak of the host link (PCIe, by generation and width)", cells("ch3_pcie_gen3_x16_peak", "ch3_devmem_peak_K20"),
                            link, "GB/s", note="from nvidia-smi's PCIe generation and width (one direction)" if link else
                            "the link's figure is read from nvidia-smi on a GPU machine"))
    return [section]


def _pcie_peak() -> float | None:
    from .ch1 import _smi

    generation, width = _smi("pcie.link.gen.max"), _smi("pcie.link.width.max")
    per_lane = {"1": 0.25, "2": 0.5, "3": 0.985, "4": 1.969, "5": 3.938, "6": 7.563}
    try:
        return round(per_lane[generation] * int(width), 1)
    except (KeyError, TypeError, ValueError):
        return None


def async_rows(ctx: Context) -> list[Section]:
    """Sequential against staged (V1–V3) transfers and kernels, on this GPU and the book's three."""
    from ..kernels import transfers

    ctx.step(STEPS[1])
    section = Section("Overlapping transfers and kernels with streams (§3.1.3)")
    n, streams = problem_size("ch3_async")
    p = transfers.make_pipeline(n, streams)
    times = transfers.time_schedules(p, repeat=ctx.repeat)
    sequential = times["sequential"].median_ms
    worst = max(transfers.check_schedule(p, name) for name in transfers.SCHEDULES)
    for name, timing in times.items():
        suffix = transfers.BOOK_SUFFIX[name]
        section.rows.append(Row(f"{name}: time of the whole version", [BookCell.of(f"ch3_async_{suffix}_{gpu}") for gpu in transfers.BOOK_ASYNC_GPUS],
                                timing.median_ms, "ms", note="" if ctx.simulated else f"{sequential / timing.median_ms:.2f}x faster than sequential"))
    section.rows.append(Row("largest error of any version", [BookCell.of(f"ch3_async_maxerr_{gpu}") for gpu in transfers.BOOK_ASYNC_GPUS],
                            worst, "abs"))
    stage = transfers.measure_stage_times(p, repeat=ctx.repeat)
    predicted_sequential, predicted_overlapped = stage.predicted_ms(streams, p.repeats)
    section.rows.append(Row("model: fully overlapped time", cells("ch3_async_model_v2v3_C1060", "ch3_async_model_v2_C2050"),
                            predicted_overlapped, "ms",
                            note=f"model from one chunk's pieces timed alone (sequential by the model: {predicted_sequential:.3g} ms)"))
    section.rows.append(Row("copy engines", cells("ch3_copy_engines_C1060", "ch3_copy_engines_C2050"), ctx.device.async_engines, "engines"))
    section.notes.append(f"n = {n} float32, {streams} streams (the book: 4M floats, 4 streams): compare the versions with each other, "
                         "not the times with the book's.")
    return [section]


def coalescing_rows(ctx: Context) -> list[Section]:
    """Unit-stride and strided access, and the alignment of allocations."""
    from ..kernels import coalescing

    ctx.step(STEPS[2])
    section = Section("Coalescing: offset and stride (§3.2.2)")
    n = problem_size("ch3_coalescing")
    tpb = problem_size("ch3_threads_per_block")
    for stride, ids in ((1, ("ch3_stride_C870_unit",)), (2, ("ch3_stride_C870_nonunit",))):
        a = to_device(np.zeros(n * stride + 1, np.float32))
        timing = ctx.time(lambda a=a, s=stride: coalescing.stride_increment(a, n, s, tpb))
        gbs = timing.bandwidth_gbs(coalescing.bytes_moved(n, np.float32))
        section.rows.append(Row(f"increment with stride {stride}, float32", cells(*ids), gbs, "GB/s", ctx.fraction(gbs)))
    section.rows.append(Row("elements each offset/stride launch touches", cells("ch3_offset_transfer_size"), n * 4 / 2**20, "MiB of float32"))
    if ctx.simulated:
        alignment = None
    else:
        addresses = [int(device_empty(1 + k, np.float32).__cuda_array_interface__["data"][0]) for k in range(8)]
        alignment = min((a & -a) for a in addresses)
    section.rows.append(Row("alignment of device allocations (largest power of two dividing 8 addresses)", cells("ch3_alloc_alignment"),
                            alignment, "bytes"))
    return [section]


def memory_rows(ctx: Context) -> list[Section]:
    """Texture against global loads for the 4- and 8-point averages, and the local-memory kernels' compiler reports."""
    from ..kernels import memory_spaces as ms

    ctx.step(STEPS[3])
    texture = Section("Texture against global loads: 4- and 8-point averages (§3.2.3)")
    side = problem_size("ch3_stencil")
    mesh = random_array((side + 2, side + 2), np.float32, seed=2)
    mesh_device, out = to_device(mesh), device_empty((side, side), np.float32)
    nbytes = ms.average_bytes(side, side)
    texture.rows.append(Row("mesh side", cells("ch3_tex_2d_n"), side, "points"))
    for points in (4, 8):
        gbs = ctx.time(lambda p=points: ms.average(out, mesh_device, p)).bandwidth_gbs(nbytes)
        texture.rows.append(Row(f"{points}-point average, global loads (Numba)", cells(f"ch3_tex_avg{points}_global_K20"), gbs, "GB/s",
                                ctx.fraction(gbs)))
        try:
            from ..arrays import require_cupy

            cupy = require_cupy("a texture object")
            mesh_cupy, out_cupy = cupy.asarray(mesh_device), cupy.asarray(out)
            fetched = ms.linear_texture(mesh_cupy.ravel())
            gbs = ctx.time(lambda p=points, o=out_cupy, m=mesh_cupy, t=fetched: ms.cuda_c_average(o, m, p, t)).bandwidth_gbs(nbytes)
            note = ""
        except GPUOnlyFeature:
            gbs, note = None, "textures exist on a GPU only (CUDA C through CuPy)"
        texture.rows.append(Row(f"{points}-point average, texture fetches (CUDA C)", cells(f"ch3_tex_avg{points}_texture_K20"), gbs, "GB/s",
                                ctx.fraction(gbs), note=note))
    local = Section("Local memory: Numba's compiler report for the book's three kernels (§3.2.4)")
    from ..compilation import resource_usage

    n = 1024
    values, result = to_device(np.ones(n, np.float32)), device_empty(n, np.float32)
    for variant, kernel, ids in (("static", ms.local_static_kernel, ("ch3_local_k1_sm20_regs",)),
                                 ("dynamic", ms.local_dynamic_kernel, ("ch3_local_k2_sm20_stack", "ch3_local_k2_sm20_regs")),
                                 ("large", ms.local_large_kernel, ("ch3_local_k3_sm20_stack", "ch3_local_k3_sm20_regs"))):
        ms.local_memory_demo(result, values, variant)
        try:
            usage = resource_usage(kernel)[0]
            here, note = f"{usage.registers} registers, {usage.local_bytes} bytes of local memory", ""
        except (GPUOnlyFeature, IndexError) as exc:
            here, note = None, f"not available here ({type(exc).__name__})"
        local.rows.append(Row(f"kernel with a {variant}ally indexed private array" if variant != "large" else "kernel with a large private array",
                              cells(*ids), here, note=note))
    shared = Section("Static and dynamic shared memory: the book's array reversal (§3.3.3.1)")
    reversal = {False: to_device(np.arange(ms.REVERSE_STATIC, dtype=np.int32)), True: to_device(np.arange(ms.REVERSE_STATIC, dtype=np.int32))}
    for dynamic, kernel, ids in ((False, ms.static_reverse_kernel, ("ch3_smem_staticreverse_gputime_K20",)),
                                 (True, ms.dynamic_reverse_kernel, ("ch3_smem_dynamicreverse1_gputime_K20", "ch3_smem_dynamicreverse2_gputime_K20",
                                                                    "ch3_smem_dynamicreverse3_gputime_K20"))):
        kind = "dynamic" if dynamic else "static"
        timing = ctx.time(lambda d=reversal[dynamic], dy=dynamic: ms.reverse(d, dy))
        shared.rows.append(Row(f"reverse {ms.REVERSE_STATIC} int32 with {kind} shared memory: GPU time", cells(*ids), 1e3 * timing.median_ms,
                               "us", note="simulator time" if ctx.simulated else "one block: the time of a launch"))
        regs_ids = ("ch3_smem_staticreverse_sm30_regs",) if not dynamic else (
            "ch3_smem_dynamicreverse1_sm30_regs", "ch3_smem_dynamicreverse2_sm30_regs", "ch3_smem_dynamicreverse3_sm30_regs")
        try:
            usage = resource_usage(kernel)[0]
            here, note = f"{usage.registers} registers, {usage.shared_bytes} bytes of static shared memory", ""
        except (GPUOnlyFeature, IndexError) as exc:
            here, note = None, f"not available here ({type(exc).__name__})"
        extra = ("ch3_smem_staticreverse_sm30_smem", "ch3_smem_staticreverse_sm10_smem") if not dynamic else ()
        shared.rows.append(Row(f"{kind} reversal kernel: compiler report", cells(*regs_ids, *extra), here, note=note))
    occupancy = None if ctx.device.simulated else ms.REVERSE_STATIC / ctx.device.max_threads_per_multiprocessor
    shared.rows.append(Row(f"occupancy of one block of {ms.REVERSE_STATIC} threads", cells("ch3_smem_reverse_occupancy_K20"),
                           None if occupancy is None else round(occupancy, 3)))
    return [texture, local, shared]


def transpose_rows(ctx: Context) -> list[Section]:
    """The book's six transpose kernels (five GPUs) beside this GPU's, and CuPy's transposed copy as the anchor."""
    from ..kernels import transpose as T

    ctx.step(STEPS[4])
    rows, cols = problem_size("ch3_transpose")
    inp = to_device(random_array((rows, cols), np.float32, seed=3))
    nbytes = T.bytes_moved(inp)
    section = Section(f"Matrix transpose, {rows} x {cols} float32 (§3.4; the book: 1024 x 1024)")
    anchor = None
    if not ctx.simulated:
        from ..arrays import require_cupy

        cupy = require_cupy("CuPy's transposed copy")
        inp_cupy = cupy.asarray(inp)
        anchor_gbs = ctx.time(lambda: T.cupy_transpose(inp_cupy)).bandwidth_gbs(nbytes)
        anchor = f"cupy.ascontiguousarray(a.T): {anchor_gbs:.0f} GB/s ({ctx.fraction(anchor_gbs):.0%} of copy)"
    measured = {}
    for variant in T.VARIANTS:
        out = device_empty(T.output_shape(variant, (rows, cols)), np.float32)
        gbs = ctx.time(lambda o=out, v=variant: T.transpose(o, inp, v)).bandwidth_gbs(nbytes)
        measured[variant] = gbs
        name = T.BOOK_NAMES[variant]
        ids = [f"ch3_transpose_{name}_{gpu}" for gpu in ("C870", "C1060", "C2050", "K10", "K20")] if name else []
        section.rows.append(Row(f"{variant}" + (f" ({name})" if name else ""), cells(*ids), gbs, "GB/s", ctx.fraction(gbs),
                                anchor=anchor if variant == "no_bank_conflicts" else None))
    for gpu, before, after in (("K10", "ch3_diag_K10_before", "ch3_diag_K10_after"), ("C1060", "ch3_diag_C1060_before", "ch3_diag_C1060_after")):
        shares = (measured["no_bank_conflicts"] / measured["copy_shared"], measured["diagonal"] / measured["copy_shared"])
        section.rows.append(Row(f"no-bank-conflict and diagonal transposes as a fraction of copySharedMem (book: {gpu})", cells(before, after),
                                None if ctx.simulated else f"{shares[0]:.0%} and {shares[1]:.0%}",
                                note="not measured in the simulator" if ctx.simulated else ""))
    section.rows.append(Row("write stride of the naive transpose", cells("ch3_transpose_naive_stride"), rows, "elements",
                            note="a row of the output: the matrix side"))
    section.rows.append(Row("bank conflict of a column read of a 32 x 32 float32 tile", cells("ch3_transpose_bankconflict_way_cc2x",
                            "ch3_transpose_bankconflict_way_cc1x"), T.column_read_conflict(32), "way", note="and with a padded 33-wide tile: "
                            f"{T.column_read_conflict(33)}-way"))
    return [section]


def execution_rows(ctx: Context) -> list[Section]:
    """The book's block-size tables (float64 copy: occupancy and bandwidth), shared memory as a limiter, and ILP."""
    from ..kernels import execution as E

    ctx.step(STEPS[5])
    section = Section("Execution configuration: a float64 copy over block sizes (§3.5)")
    n = problem_size("ch3_copy")
    inp = to_device(random_array(n, np.float64, seed=4))
    out = device_empty(n, np.float64)
    nbytes = E.copy_bytes(inp)
    one_block = E.shared_bytes_for_one_block(ctx.device)
    measured_sizes = set(problem_size("ch3_block_sizes"))
    gains = {}
    for tpb in (32, 64, 128, 256, 512, 1024):  # the book's block sizes; the simulator measures a few of them
        occupancy_ids = [i for i in (f"ch3_occ_copy_dp_occupancy_bs{tpb}_K20", f"ch3_occ_copy_dp_occupancy_bs{tpb}_C2050") if book.has_figure(i)]
        bw_ids = [i for i in (f"ch3_occ_copy_dp_bw_bs{tpb}_K20", f"ch3_occ_copy_dp_bw_bs{tpb}_C2050") if book.has_figure(i)]
        limited_occ_ids = [i for i in (f"ch3_occ_copy_dp_smemlimited_occupancy_bs{tpb}_K20",) if book.has_figure(i)]
        limited_ids = [i for i in (f"ch3_occ_copy_dp_smemlimited_bw_bs{tpb}_K20",) if book.has_figure(i)]
        ilp_ids = [i for i in (f"ch3_ilp4_smemlimited_bw_bs{tpb}_K20",) if book.has_figure(i)]
        occ = gbs = limited = ilp = occ_limited = None
        note = "" if tpb in measured_sizes else "not measured at simulator sizes"
        if tpb in measured_sizes:
            gbs = ctx.time(lambda t=tpb: E.copy(out, inp, t)).bandwidth_gbs(nbytes)
            occ = E.occupancy_here(E.copy_kernel, tpb) if not ctx.simulated else None  # after the launch that compiled it
            try:
                limited = ctx.time(lambda t=tpb: E.copy(out, inp, t, shared_bytes=one_block)).bandwidth_gbs(nbytes)
                ilp = ctx.time(lambda t=tpb: E.copy_ilp(out, inp, t, 4, shared_bytes=one_block)).bandwidth_gbs(nbytes)
                occ_limited = E.occupancy_here(E.copy_kernel, tpb, one_block) if not ctx.simulated else None
                gains[tpb] = ilp / limited
            except CourseError as refused:
                note = f"one block per SM refused: {refused}"
        section.rows.append(Row(f"{tpb} threads per block: occupancy", cells(*occupancy_ids), None if occ is None else round(occ.fraction, 3),
                                note=note))
        section.rows.append(Row(f"{tpb} threads per block: bandwidth", cells(*bw_ids), gbs, "GB/s", ctx.fraction(gbs), note=note))
        section.rows.append(Row(f"{tpb} threads, shared memory for one block per SM: occupancy", cells(*limited_occ_ids),
                                None if occ_limited is None else round(occ_limited.fraction, 3), note=note))
        section.rows.append(Row(f"{tpb} threads, one block per SM: bandwidth", cells(*limited_ids), limited, "GB/s", ctx.fraction(limited),
                                note=note))
        section.rows.append(Row(f"{tpb} threads, one block per SM, 4 elements in flight per thread (ILP)", cells(*ilp_ids), ilp, "GB/s",
                                ctx.fraction(ilp), note=note))
    smallest = min(gains) if gains else None
    section.rows.append(Row("speed-up of ILP = 4 at one block per SM", cells("ch3_ilp_gain_factor"),
                            None if smallest is None else round(gains[smallest], 2), "x",
                            note="" if smallest is None else f"at {smallest} threads per block"))
    return [section]


def limits_rows(ctx: Context) -> list[Section]:
    """Figure 3.22's limits per GPU, this GPU's, and the FMA rate per SM per clock (Table 3.2)."""
    from ..kernels import metrics

    ctx.step(STEPS[6])
    section = Section("Device limits (Figure 3.22) and instruction throughput (Table 3.2)")
    d = ctx.device
    readers = {"cc": d.cc, "tpb": d.max_threads_per_block, "blk_sm": d.max_blocks_per_multiprocessor,
               "warps_sm": None if d.max_threads_per_multiprocessor is None else d.max_threads_per_multiprocessor // d.warp_size,
               "tpw": d.warp_size, "thr_sm": d.max_threads_per_multiprocessor,
               "regs_sm": None if d.max_registers_per_multiprocessor is None else f"{d.max_registers_per_multiprocessor // 1024}K"}
    for key, here in readers.items():
        figs = book.figures(f"ch3_fig3_22_{key}_")
        section.rows.append(Row(figs[0].quantity, [BookCell.of(f.id) for f in figs], None if d.simulated else here, figs[0].unit))
    fp32 = metrics.measure_fma_rate(np.float32, repeat=ctx.repeat)
    fp64 = metrics.measure_fma_rate(np.float64, repeat=ctx.repeat)
    per_clock = None if d.simulated or not d.clock_rate_khz else (lambda g: round(g * 1e9 / 2 / (d.multiprocessors * d.clock_rate_khz * 1e3)))
    section.rows.append(Row("float32 fused multiply-adds per clock per SM (measured)", cells("ch3_tab3_2_fp32_fma_cc35"),
                            None if per_clock is None else per_clock(fp32), "ops/clock/SM", note="measured rate / (2 x SMs x clock)"))
    section.rows.append(Row("float64 fused multiply-adds per clock per SM (measured)", cells("ch3_tab3_2_fp64_fma_cc35"),
                            None if per_clock is None else per_clock(fp64), "ops/clock/SM"))
    return [section]


def ufunc_rows(ctx: Context) -> list[Section]:
    """The book's CUF kernel (an increment of 1M integers) as ufunc-style kernels, with the copies around it."""
    from ..kernels import transfers, ufuncs

    ctx.step(STEPS[7])
    section = Section("Kernel loop directives: ufunc-style kernels (§3.7)")
    n = problem_size("ch3_ufunc_book")
    a = to_device(np.zeros(n, np.int32))
    one = ctx.time(lambda: ufuncs.handwritten_increment(a, 1, 256, 1))
    four = ctx.time(lambda: ufuncs.handwritten_increment(a, 1, 256, 4))
    section.rows.append(Row(f"increment of {n} int32, one element per thread: GPU time", cells("ch3_cuf_kernel_gputime_K20"),
                            1e3 * one.median_ms, "us", note=f"4 elements per thread: {1e3 * four.median_ms:.1f} us"))
    section.rows.append(Row("blocks of the one-element-per-thread grid", cells("ch3_cuf_kernel_grid_K20"), -(-n // 256), "blocks"))
    for direction, figure_id in (("H2D", "ch3_cuf_memcpyHtoD_K20"), ("D2H", "ch3_cuf_memcpyDtoH_K20")):
        measured = transfers.measure_transfer(4 * n, direction, False, repeat=ctx.repeat)
        section.rows.append(Row(f"copy of the array, {direction}, pageable", cells(figure_id), 1e3 * measured.timing.median_ms, "us"))
    return [section]


def measure(ctx: Context) -> list[Section]:
    """Every chapter-3 section of the report."""
    return (transfers_rows(ctx) + async_rows(ctx) + coalescing_rows(ctx) + memory_rows(ctx) + transpose_rows(ctx)
            + execution_rows(ctx) + limits_rows(ctx) + ufunc_rows(ctx))


PLAN = ChapterPlan(3, "Optimization", STEPS, measure, NOT_MEASURED)
