"""What one kernel launch costs from Python, measured on this machine, from a bare Numba launch to a graph replay.

The same small copy kernel is issued seven ways. For each: the host's time to issue one call
(the GPU is idle when a batch starts, so the host never waits for it) and, on a GPU, the time per
call of many calls issued back to back, measured with CUDA events: when the host is slower than the
kernel, the GPU waits between launches and that figure shows it. Chapter 2 shows the table; the
course report and the record in `measurements/` call the same function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import graphs, mode
from .arrays import device_empty, random_array, require_cupy, to_device
from .kernels import metrics
from .report import Table
from .sizes import problem_size
from .timing import back_to_back_us, host_cost_us
from .validate import blocks_to_cover
from .verdicts import SAME_SPEED


@dataclass(frozen=True)
class LaunchCost:
    """One way of launching: host us to issue a call, and GPU-side us per call back to back (None in the simulator)."""

    way: str
    host_us: float
    back_to_back_us: float | None
    note: str


# The copy in CUDA C, launched through CuPy beside Numba's launch paths
COPY_CUDA_C = r'''extern "C" __global__ void copy(float* out, const float* inp, long long n)
{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) out[i] = inp[i]; }'''


def _ways(elements: int) -> list[tuple[str, Callable[[], object], int, str]]:
    """(name, function issuing one call, launches per call, note) for each way of launching the copy."""
    source = to_device(random_array(elements, np.float32, seed=11))
    target = device_empty(elements, np.float32)
    threads = 256
    blocks = blocks_to_cover(elements, threads)
    kernel = metrics.copy_kernel

    def nothing() -> None:
        return None

    ways = [
        ("an empty Python function", nothing, 1, "the floor: calling anything from Python"),
        ("Numba: kernel[blocks, threads](out, inp), Numba arrays", lambda: kernel[blocks, threads](target, source), 1,
         "types the arguments, looks the kernel up, marshals them, every call"),
    ]
    if mode.on_gpu():
        cupy = require_cupy("CuPy arrays")
        source_cp, target_cp = cupy.asarray(source), cupy.empty(elements, np.float32)
        ways.append(("Numba: kernel[blocks, threads](out, inp), CuPy arrays", lambda: kernel[blocks, threads](target_cp, source_cp), 1,
                     "also converts each CuPy array, and waits on the host for its stream"))
    ways.append(("the course's launcher metrics.copy(out, inp)", lambda: metrics.copy(target, source, threads), 1,
                 "finds the plan it made at the first call (checks done then), launches it"))
    plan = metrics.copy.plan(target, source, threads)
    ways.append(("a plan: plan = metrics.copy.plan(out, inp); plan()", plan, 1, "one driver call with arguments marshalled once"))
    if mode.on_gpu():
        raw = cupy.RawKernel(COPY_CUDA_C, "copy")
        ways.append(("CuPy RawKernel (CUDA C)", lambda: raw((blocks,), (threads,), (target_cp, source_cp, np.int64(elements))), 1,
                     "CuPy's Cython launch path"))
    launches = problem_size("ch2_graph_launches")
    graph = graphs.capture(lambda: [plan() for _ in range(launches)], "copies")
    ways.append((f"a CUDA graph of {launches} plan launches, replayed (per launch)", graph.launch, launches,
                 "the driver launches the whole recorded sequence from one call"))
    return ways


def measure_launch_costs(elements: int, calls: int | None = None) -> list[LaunchCost]:
    """Host cost and back-to-back time per launch (us) of a copy of `elements` float32, issued in each way."""
    calls = calls or (200 if mode.on_gpu() else 2)
    costs = []
    for way, call, launches, note in _ways(elements):
        repeats = max(1, calls // launches)
        host = host_cost_us(call, calls=repeats, batches=5 if mode.on_gpu() else 1) / launches
        gpu = back_to_back_us(call, repeats) / launches if mode.on_gpu() and launches >= 1 and "empty" not in way else None
        costs.append(LaunchCost(way, host, gpu, note))
    return costs


def launch_cost_table(costs: list[LaunchCost], elements: int, gpu_us: float | None, simulated: bool | None = None) -> Table:
    """The measured costs as a table, with the copy's GPU time per call behind a gate (us) for comparison."""
    simulated = mode.is_simulator() if simulated is None else simulated
    table = Table(["way of launching", "host us per call", "back to back, us per call", "what it does"],
                  title=f"Launching a copy of {elements} float32 ({8 * elements / 1e3:.0f} kB moved)")
    for cost in costs:
        table.rows.append([cost.way, cost.host_us, cost.back_to_back_us, cost.note])
    if gpu_us is not None and not simulated:
        table.notes.append(f"Launched one after another behind a gate (gpucourse.benchmark), a copy takes {gpu_us:.3g} us of GPU time, "
                           "the GPU's own work between two launches included: any way slower than that per call leaves the GPU idle "
                           "between launches.")
        graph = [cost.back_to_back_us for cost in costs if cost.way.startswith("a CUDA graph") and cost.back_to_back_us is not None]
        if graph and graph[0] < (1 - SAME_SPEED) * gpu_us:
            table.notes.append(f"The graph's copies take {graph[0]:.3g} us each, less than that: a graph hands the GPU its whole "
                               "sequence of kernels at once, so it starts each one with less work after the previous one than a "
                               "launch that comes through the stream on its own.")
    if simulated:
        table.notes.append("Simulator: every launch runs the kernel in Python threads before it returns, so these are not "
                           "launch costs; on a GPU this table compares the ways of launching.")
    return table
