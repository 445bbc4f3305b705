"""Strong and weak scaling of the split Jacobi iteration, against the course's own one-GPU sweep.

Every figure here is measured in the run that prints it: the one-GPU sweep (the same kernel on the
whole mesh, timed with CUDA events behind a gate, beside the device-to-device copy), and the split
solver's wall time for a number of sweeps from idle GPUs to the last one's end, as a user waits
for it. Parallel efficiency is the one-GPU time over (P x the P-GPU time). Each split run is checked
bit for bit against the one-GPU run of the same sweeps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ... import mode
from ...kernels import laplace
from ..gpus import device_count, wall_time_ms
from .peer import PeerJacobi


def sample_mesh(shape: tuple[int, int], dtype=np.float32, seed: int = 0) -> np.ndarray:
    """A mesh of random interior values and a fixed boundary (1 on the top row, 0 elsewhere): the same for every run."""
    mesh = np.random.default_rng(seed).random(shape, dtype=dtype)
    mesh[0, :], mesh[-1, :], mesh[:, 0], mesh[:, -1] = 1, 0, 0, 0
    return mesh


def digest(mesh: np.ndarray) -> str:
    """A short fingerprint of a mesh's bytes (equal fingerprints: equal bits)."""
    return hashlib.sha256(np.ascontiguousarray(mesh).tobytes()).hexdigest()[:16]


@dataclass(frozen=True)
class ScalingRun:
    """One timed run of the split solver: how it was split and exchanged, its time per sweep and its efficiency."""

    gpus: int
    shape: tuple[int, int]
    halo: int
    graphs: bool
    overlap: bool
    sweeps: int
    every: int
    ms_per_sweep: float
    one_gpu_ms_per_sweep: float
    same_bits: bool | None
    bits: str | None = None  #: fingerprint of the mesh after the checked run (scaling.digest)
    simulated: bool = False  #: timed in the simulator: Python threads, so no speed-up is measured

    @property
    def speedup(self) -> float:
        """One-GPU time over this run's time, both per sweep of the same total mesh (strong) or per GPU's slab (weak); nan in the simulator."""
        return float("nan") if self.simulated else self.one_gpu_ms_per_sweep / self.ms_per_sweep

    @property
    def efficiency(self) -> float:
        """Speed-up over the number of GPUs (1: every GPU as busy as one GPU alone)."""
        return self.speedup / self.gpus

    def as_dict(self) -> dict:
        """The run as a plain dict (for JSON records)."""
        return {**asdict(self), "speedup": self.speedup, "efficiency": self.efficiency}


def time_per_sweep_ms(solver: PeerJacobi, sweeps: int, repeat: int = 3) -> float:
    """Median wall ms per sweep of `solver.run(sweeps)` from idle GPUs until all are done (one warm-up run first)."""
    return wall_time_ms(lambda: solver.run(sweeps), solver.devices, repeat=repeat, warmup=1) / sweeps


def gpu_counts(largest: int | None = None) -> list[int]:
    """1, 2, 4, ... up to the GPUs this process sees (or `largest`), and that count itself if it is no power of two."""
    top = device_count() if largest is None else largest
    counts = [1]
    while counts[-1] * 2 <= top:
        counts.append(counts[-1] * 2)
    if counts[-1] != top:
        counts.append(top)
    return counts


def devices_for(gpus: int) -> list[int]:
    """The device of each of `gpus` parts: one GPU each where there are enough, else parts share the GPUs round robin."""
    return [p % device_count() for p in range(gpus)]


def strong_scaling(shape: tuple[int, int], counts: Sequence[int], *, sweeps: int, every: int, halo: int = 1, graphs: bool = True,
                   overlap: bool = True, repeat: int = 3, check_bits: bool = True, dtype=np.float32) -> list[ScalingRun]:
    """Time `sweeps` sweeps of one `shape` mesh on each number of GPUs in `counts` (1 first: the baseline)."""
    mesh = sample_mesh(shape, dtype)
    runs, baseline, reference = [], None, None
    for gpus in sorted(set(counts) | {1}):
        with PeerJacobi(mesh, devices_for(gpus), halo=1 if gpus == 1 else halo, every=every, graphs=graphs, overlap=overlap) as solver:
            if check_bits:
                solver.run(sweeps)
                bits = digest(solver.gather())
            ms = time_per_sweep_ms(solver, sweeps, repeat)
        if gpus == 1:
            baseline, reference = ms, bits if check_bits else None
        same = (bits == reference) if check_bits else None
        runs.append(ScalingRun(gpus, tuple(shape), 1 if gpus == 1 else halo, graphs, overlap, sweeps, every, ms, baseline, same,
                               bits if check_bits else None, mode.is_simulator()))
    return [run for run in runs if run.gpus in counts]


def weak_scaling(rows_per_gpu: int, nx: int, counts: Sequence[int], *, sweeps: int, every: int, halo: int = 1,
                 graphs: bool = True, repeat: int = 3, dtype=np.float32) -> list[ScalingRun]:
    """Time `sweeps` sweeps of a mesh of `rows_per_gpu` interior rows per GPU (the slab fixed, the mesh growing with P)."""
    runs, baseline = [], None
    for gpus in sorted(set(counts) | {1}):
        shape = (rows_per_gpu * gpus + 2, nx)
        with PeerJacobi(sample_mesh(shape, dtype), devices_for(gpus), halo=1 if gpus == 1 else halo, every=every,
                        graphs=graphs) as solver:
            ms = time_per_sweep_ms(solver, sweeps, repeat)
        baseline = ms if gpus == 1 else baseline
        # weak scaling: the one-GPU time of this mesh would be P x the baseline; efficiency = baseline / ms
        runs.append(ScalingRun(gpus, shape, 1 if gpus == 1 else halo, graphs, True, sweeps, every, ms, baseline * gpus, None,
                               simulated=mode.is_simulator()))
    return [run for run in runs if run.gpus in counts]


def one_gpu_sweep(shape: tuple[int, int], dtype=np.float32, repeat: int = 20) -> dict:
    """The course's tuned one-GPU sweep of a whole `shape` mesh, measured as chapter 6's record measures it
    (`stencil2d.Measured`): GPU ms (events, gated), the loop of public calls, GB/s and fraction of the copy."""
    from ...arrays import to_device
    from ...stencil2d import Measured
    from ...timing import bandwidth_ceilings, benchmark

    mesh = sample_mesh(shape, dtype)
    launcher, arguments = laplace.sweep_call(to_device(mesh), to_device(mesh), "global")
    timing = benchmark(lambda: launcher(*arguments), repeat=repeat)
    result = {"shape": list(shape), "ms": timing.median_ms, "simulated": mode.is_simulator()}
    if not mode.is_simulator():
        measured = Measured("Jacobi global, tuned", timing, laplace.bytes_per_sweep(shape, np.dtype(dtype).itemsize),
                            bandwidth_ceilings().copy_gbs)
        result.update(gbs=timing.bandwidth_gbs(measured.nbytes), copy_gbs=measured.copy_gbs, of_copy=measured.of_copy,
                      loop_ms=timing.back_to_back_ms, loop_of_copy=measured.back_to_back_of_copy)
    return result
