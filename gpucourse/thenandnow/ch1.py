"""Chapter 1 and appendices A–C of the report: device properties, compiler reports, host-device copies, nvidia-smi, SGEMM."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable

import numpy as np

from .. import book
from ..device import DeviceInfo
from ..errors import GPUOnlyFeature
from ..report import _DEVICE_READERS
from ..roofline import gflops as rate_gflops
from ..sizes import problem_size
from .core import BookCell, ChapterPlan, Context, Row, Section, cells

STEPS = ("ch1: device properties", "ch1: compiler reports", "ch1: host-device copies", "appendices: nvidia-smi and SGEMM")


NOT_MEASURED = {
    r"ch1_ptx_cminusd_rdc_.*": "registers of a kernel built with separate compilation (-Mcuda=rdc); Numba links device functions "
                               "into each kernel, so there is no such build to report",
    r"ch1_pgaccelinfo_(pitch|texalign|init)_K20": "pgaccelinfo lines (maximum pitch, texture alignment, initialization time) that "
                                                  "no course experiment uses",
    r"appB_cuda_cache_(default|max)": "defaults of the driver's JIT cache (CUDA_CACHE_MAXSIZE), quoted in notebook 1.3",
    r"appA_(l1_sm|constcache_sm)": "on-chip cache sizes the driver does not report",
    r"ch1_1d_launch_limit_pre_cc30": "a limit of GPUs older than compute capability 3.0; the grid-size rows show this GPU's limits",
}


def _cores(d: DeviceInfo, which: int) -> int | None:
    """FP32 (which=0) or FP64 (which=1) lanes per SM of this architecture (the driver does not report them)."""
    from ..kernels.metrics import FP32_LANES_PER_SM, FP64_LANES_PER_SM

    return (FP32_LANES_PER_SM if which == 0 else FP64_LANES_PER_SM).get(tuple(d.compute_capability))


def _dims(values) -> str:
    return " x ".join(str(v) for v in values)


# quantity as the book names it (deviceQuery, Tables 1.1/1.2, pgaccelinfo) -> how to read it off this device
READERS: dict[str, Callable[[DeviceInfo], object]] = {
    "compute capability": lambda d: d.cc,
    "multiprocessors": lambda d: d.multiprocessors,
    "max threads per multiprocessor": lambda d: d.max_threads_per_multiprocessor,
    "global memory": lambda d: None if d.total_memory_bytes is None else round(d.total_memory_bytes / 2**30, 3),
    "global memory (nominal)": lambda d: None if d.total_memory_bytes is None else round(d.total_memory_bytes / 1e9),
    "max grid dims": lambda d: _dims(d.max_grid_dim),
    "max block dims": lambda d: _dims(d.max_block_dim),
    "max threads per block": lambda d: d.max_threads_per_block,
    "max threads per thread block": lambda d: d.max_threads_per_block,
    "max thread blocks per multiprocessor": lambda d: d.max_blocks_per_multiprocessor,
    "CUDA devices per board": lambda d: 1,
    "single-precision cores per multiprocessor": lambda d: _cores(d, 0),
    "total single-precision cores": lambda d: None if _cores(d, 0) is None else _cores(d, 0) * d.multiprocessors,
    "double-precision cores per multiprocessor": lambda d: _cores(d, 1),
    "total double-precision cores": lambda d: None if _cores(d, 1) is None else _cores(d, 1) * d.multiprocessors,
    "maximum registers per thread": lambda d: 255 if d.compute_capability >= (3, 5) else None,
    "CUDA driver version": lambda d: d.driver_cuda_version,
    "global memory size": lambda d: d.total_memory_bytes,
    "SP cores": lambda d: None if _cores(d, 0) is None else _cores(d, 0) * d.multiprocessors,
    "DP cores": lambda d: None if _cores(d, 1) is None else _cores(d, 1) * d.multiprocessors,
    "total constant memory": lambda d: d.total_constant_memory,
    "shared memory per block": lambda d: d.max_shared_per_block,
    "registers per block": lambda d: d.max_registers_per_block,
    "warp size": lambda d: d.warp_size,
    "clock rate": lambda d: None if d.clock_rate_khz is None else round(d.clock_rate_khz / 1e3),
    "memory clock rate": lambda d: None if d.memory_clock_khz is None else round(d.memory_clock_khz / 1e3),
    "memory bus width": lambda d: d.memory_bus_bits,
    "max threads per SMP": lambda d: d.max_threads_per_multiprocessor,
    "async engines": lambda d: d.async_engines,
}


def _reader(quantity: str) -> Callable[[DeviceInfo], object] | None:
    if quantity in READERS:
        return READERS[quantity]
    reader = _DEVICE_READERS.get(quantity)
    if reader is None and quantity in ("single-precision peak (multiply+add)", "double-precision peak (multiply+add)"):
        which = 0 if quantity.startswith("single") else 1
        return lambda d: None if _cores(d, which) is None or d.clock_rate_khz is None else \
            round(2 * _cores(d, which) * d.multiprocessors * d.clock_rate_khz / 1e6)
    return reader


def properties(ctx: Context) -> list[Section]:
    """Every device property the book prints (deviceQuery, Tables 1.1–1.2, pgaccelinfo, Appendix A), beside this device's."""
    ctx.step(STEPS[0])
    section = Section("Device properties: deviceQuery (§1.4), Tables 1.1–1.2, pgaccelinfo, Appendix A")
    groups: dict[tuple[str, str], list[str]] = {}
    for prefix in ("ch1_devquery_", "ch1_tab1_1_", "ch1_tab1_2_", "ch1_pgaccelinfo_", "appA_"):
        for fig in book.figures(prefix):
            if prefix == "ch1_pgaccelinfo_" and any(word in fig.quantity for word in ("time", "bandwidth", "free memory")):
                continue  # pgaccelinfo's copy figures are measured in the copies section
            source = {"ch1_devquery_": "deviceQuery", "ch1_tab1_1_": "Table 1.1", "ch1_tab1_2_": "Table 1.2",
                      "ch1_pgaccelinfo_": "pgaccelinfo", "appA_": "Appendix A"}[prefix]
            groups.setdefault((source, fig.quantity), []).append(fig.id)
    for (source, quantity), ids in groups.items():
        reader = _reader(quantity)
        here = None if (reader is None or ctx.device.simulated) else reader(ctx.device)
        note = "" if reader is not None else "not reported by the driver"
        if ctx.device.simulated:
            note = "simulator: no device to read"
        section.rows.append(Row(f"{quantity} ({source})", cells(*ids), here,
                                book.figure(ids[0]).unit, note=note))
    section.rows.append(Row("CUDA cores of the largest book GPU (§1.1)", cells("ch1_k20x_total_cores"),
                            READERS["total single-precision cores"](ctx.device) if not ctx.device.simulated else None, "cores"))
    section.rows.append(Row("threads of a one-block launch, at most (§1.3.2)", cells("ch1_max_tpb_kepler_fermi", "ch1_max_tpb_pre_fermi"),
                            ctx.device.max_threads_per_block, "threads"))
    from ..kernels import metrics

    rates = {}
    for dtype in (np.float32, np.float64):
        rates[np.dtype(dtype).name] = metrics.measure_fma_rate(dtype, repeat=ctx.repeat)
    section.rows.append(Row("measured fused multiply-add rate, float32", cells("appA_sp_gflops_K20"), rates["float32"],
                            "GFLOP/s" if not ctx.simulated else "GFLOP/s (simulator)",
                            note="metrics.fma_peak: 16 independent FMAs per loop step in every thread"))
    section.rows.append(Row("measured fused multiply-add rate, float64", cells("appA_dp_gflops_K20"), rates["float64"],
                            "GFLOP/s" if not ctx.simulated else "GFLOP/s (simulator)"))
    return [section]


def compiler(ctx: Context) -> list[Section]:
    """Registers per thread of the book's increment kernels (ptxinfo) beside Numba's compiler report for this GPU."""
    from ..arrays import to_device
    from ..compilation import resource_usage
    from ..kernels import intro

    ctx.step(STEPS[1])
    section = Section("Compiler reports: registers of the increment kernel (§1.6)")
    for dtype, prefix in ((np.int32, "ch1_ptx_increment_"), (np.float64, "ch1_ptx_incdp_")):
        a = to_device(np.zeros(1024, dtype))
        intro.increment(a, 1)
        try:
            usage = next(u for u in resource_usage(intro.increment_kernel) if np.dtype(dtype).name in u.signature)
            here, note = usage.registers, f"{usage.signature} for compute capability {ctx.device.cc}"
        except (GPUOnlyFeature, StopIteration) as exc:
            here, note = None, f"not available here ({type(exc).__name__}: the simulator compiles nothing)"
        section.rows.append(Row(f"registers per thread, increment of {np.dtype(dtype).name}", cells(prefix + "*"), here, "registers", note=note))
    return [section]


def copies(ctx: Context) -> list[Section]:
    """pgaccelinfo's 4 MB copy times and bandwidths (K20) beside this machine's pageable and pinned copies of 4 MB."""
    from ..kernels import transfers

    ctx.step(STEPS[2])
    section = Section("Host-device copies of 4 MB (pgaccelinfo, §1.4)")
    nbytes = 4 * 2**20 if not ctx.simulated else 64 * 2**10
    for direction, word in (("H2D", "up"), ("D2H", "down")):
        for pinned in (False, True):
            kind = "pinned" if pinned else "pageable"
            suffix = "_pinned" if pinned else ""
            measured = transfers.measure_transfer(nbytes, direction, pinned, repeat=ctx.repeat)
            section.rows.append(Row(f"{'upload' if word == 'up' else 'download'} of {nbytes // 2**10} KiB, {kind}: time",
                                    [BookCell.of(f"ch1_pgaccelinfo_{word}_time{suffix}_K20")], 1e3 * measured.timing.median_ms, "us"))
            section.rows.append(Row(f"{'upload' if word == 'up' else 'download'}, {kind}: bandwidth",
                                    [BookCell.of(f"ch1_pgaccelinfo_{word}_bw{suffix}_K20", as_bandwidth=False)], measured.gbs * 1e3, "MB/s",
                                    note="simulator: a host memory copy" if ctx.simulated else ""))
    free = None
    if not ctx.simulated:
        from ..arrays import require_cupy

        free = require_cupy("the free device memory").cuda.runtime.memGetInfo()[0]
    section.rows.append(Row("free device memory", cells("ch1_pgaccelinfo_freemem_K20"), free, "bytes"))
    return [section]


def _smi(query: str) -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        result = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.splitlines()[0].strip() if result.returncode == 0 and result.stdout.strip() else None


def appendices(ctx: Context) -> list[Section]:
    """nvidia-smi's power and memory figures (Appendix B) and cuBLAS SGEMM through CuPy (Appendix C)."""
    ctx.step(STEPS[3])
    smi = Section("nvidia-smi (Appendix B)")
    for query, figure_id, unit in (("power.limit", "appB_smi_k20_power_cap", "W"), ("power.draw", "appB_smi_k20_power_idle", "W"),
                                   ("memory.total", "appB_smi_k20_mem_total", "MiB")):
        value = None if ctx.simulated else _smi(query)
        number = None if value is None else float(re.sub(r"[^0-9.]", "", value) or "nan")
        smi.rows.append(Row(f"nvidia-smi {query}", cells(figure_id), number, unit,
                            note="read while this report runs (not idle)" if query == "power.draw" and number is not None else ""))
    sgemm = Section("SGEMM through cuBLAS (Appendix C)")
    n = problem_size("sgemm")
    gflops, note = None, "cuBLAS needs a GPU (CuPy)"
    if not ctx.simulated:
        from ..arrays import require_cupy

        cupy = require_cupy("cuBLAS SGEMM")
        a = cupy.random.random((n, n), dtype=cupy.float32)
        b = cupy.random.random((n, n), dtype=cupy.float32)
        c = cupy.empty((n, n), dtype=cupy.float32)
        timing = ctx.time(lambda: cupy.matmul(a, b, out=c))
        gflops, note = rate_gflops(2 * n**3, timing.median_ms), f"{n} x {n} float32 (cupy.matmul)"
    sgemm.rows.append(Row("SGEMM rate (the book runs m = n = k = 100 and prints no time)", cells("appC_sgemm_size"), gflops, "GFLOP/s", note=note))
    return [smi, sgemm]


def measure(ctx: Context) -> list[Section]:
    """Every chapter-1 and appendix section of the report."""
    return properties(ctx) + compiler(ctx) + copies(ctx) + appendices(ctx)


PLAN = ChapterPlan(1, "Introduction, and appendices A–C", STEPS, measure, NOT_MEASURED)
