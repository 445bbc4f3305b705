"""An estimate of each chapter notebook's GPU time and device memory on a device profile.

Each chapter notebook declares the measurements it makes, by experiment of `gpucourse.sizes`: how
many times an experiment is timed with `gpucourse.benchmark` (and with how many samples), how many
plain calls it gets besides (first runs, checks, wall-clock runs), and which experiments' arrays it
keeps at once. One call moves the experiment's bytes (`Size.moved`) through device memory at the
profile's theoretical peak bandwidth, or through the host link for copies to and from the host.
`benchmark` is counted as it runs: warm-up, the host's three issue calls, a first sample, then its
samples and five back-to-back samples, each sample at least 2 ms long (or 200 calls).

This is an ESTIMATE from bytes moved and bandwidth, no more. It leaves out compilation, the host's
Python time, kernels bound by arithmetic or latency rather than memory (the FMA chains, sgemm, the
sines, the fused pi and option kernels, the pointer chase, the bank-conflict and constant-memory
sweeps count only their bytes), chapter 4's measurements that need two GPUs, and the start of MPI
processes. Real kernels reach only part of the peak, so real times are longer. The counts of calls
are read off the notebooks by hand: they are as precise as that, and no more.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import sizes
from .profiles import DeviceProfile

#: The GPU time of one launch, however little it moves (ms): a kernel takes a few microseconds.
MIN_CALL_MS = 0.005
#: `gpucourse.benchmark`'s shortest sample (ms) and most calls per sample (its defaults).
SAMPLE_MS, MAX_CALLS_PER_SAMPLE = 2.0, 200
#: Host link assumed where a profile does not give one (GB/s): PCIe 3.0 x16, the slowest of the profiles'.
DEFAULT_HOST_LINK_GBS = 15.75


@dataclass(frozen=True)
class Measured:
    """What a notebook does with one experiment: benchmarks of `repeat` samples and plain calls, and the bytes of one call.

    `moved(z)` gives the bytes of one call from every experiment's size (`z`: name -> size), or a
    list of them for a sweep (each value of the sweep is benchmarked and called as many times).
    Without it, one call moves the Size's `moved` bytes times `traffic`.
    """

    size: str  # the experiment in gpucourse.sizes
    benchmarks: int = 0  # times it is timed with gpucourse.benchmark (per value of a sweep)
    repeat: int = 20  # samples per benchmark
    calls: int = 0  # plain calls besides (first runs, checks, wall-clock runs), per value of a sweep
    traffic: float = 1.0  # bytes of one call as a multiple of the Size's `moved` (float64: 2, uncoalesced: up to 8)
    moved: Callable[[Mapping[str, Any]], float | list[float]] | None = None
    link: bool = False  # the bytes cross the host link (copies to and from the host), not device memory

    def bytes_per_call(self, z: Mapping[str, Any]) -> list[float]:
        """Bytes one call moves, for each value of the sweep (one value if it is no sweep), with the sizes `z`."""
        if self.moved is not None:
            value = self.moved(z)
        else:
            moved = sizes.SIZES[self.size].moved
            if moved is None:
                raise ValueError(f"{self.size}: no bytes per call known; give Measured(moved=...)")
            value = moved(z[self.size])
        return [self.traffic * v for v in (value if isinstance(value, list) else [value])]


@dataclass(frozen=True)
class Notebook:
    """A chapter notebook's GPU work: its measurements, what it keeps on the device at once, the sizes it explains."""

    path: str  # relative to chapters/
    work: tuple[Measured, ...]
    holds: tuple[str, ...] = ()  # experiments whose arrays the notebook keeps at once (their Size.held)
    ceilings: bool = False  # measures the copy ceiling (gpucourse.bandwidth_ceilings)
    also_holds: Callable[[Mapping[str, Any]], float] | None = None  # bytes held beyond the experiments' own
    explains: tuple[str, ...] = ()  # the experiments its `gpucourse.sizes.explain` cell names (notebooks that compare with the book)

    @property
    def chapter(self) -> int:
        """The chapter number, from the folder name."""
        return int(self.path.split("_", 1)[0])


def benchmark_calls(call_ms: float, repeat: int, warmup: int = 2) -> float:
    """Calls of a function taking `call_ms` that `gpucourse.benchmark(repeat=repeat)` makes (its own arithmetic)."""
    per_sample = min(MAX_CALLS_PER_SAMPLE, max(1, math.ceil(SAMPLE_MS / max(call_ms, 1e-9))))
    return max(warmup, 1) + 3 + 1 + (repeat + 5) * per_sample


def _call_ms(nbytes: float, gbs: float) -> float:
    return max(MIN_CALL_MS, nbytes / (gbs * 1e9) * 1e3)


def predicted_seconds(notebook: Notebook, profile: DeviceProfile) -> float:
    """ESTIMATED GPU time (s) of `notebook` on `profile`: bytes moved by its measurements over peak bandwidth."""
    z = sizes.sizes_for(profile)
    link = profile.host_link_gbs or DEFAULT_HOST_LINK_GBS
    work = list(notebook.work)
    if notebook.ceilings:
        copy = sizes.ceiling_copy_bytes(profile)
        work.append(Measured("ch2_copy", benchmarks=1, repeat=15, moved=lambda _: 2 * copy))
    total_ms = 0.0
    for item in work:
        for nbytes in item.bytes_per_call(z):
            ms = _call_ms(nbytes, link if item.link else profile.bandwidth_gbs)
            total_ms += item.benchmarks * benchmark_calls(ms, item.repeat) * ms + item.calls * ms
    return total_ms / 1e3


def held_bytes(notebook: Notebook, profile: DeviceProfile) -> float:
    """ESTIMATED device bytes `notebook` keeps at once on `profile` (its experiments' arrays and the ceiling's copy)."""
    z = sizes.sizes_for(profile)
    total = sum(sizes.SIZES[name].held(z[name]) for name in notebook.holds)
    if notebook.ceilings:
        total += 2 * sizes.ceiling_copy_bytes(profile)
    if notebook.also_holds is not None:
        total += notebook.also_holds(z)
    return total


def _area(shape) -> int:
    return math.prod(shape)


def _strided(n: int, strides, itemsize: int) -> list[float]:
    # the sector model: a launch reads and writes n elements, each in a 32-byte sector of its own once the stride spreads them
    return [2 * n * min(32, s * itemsize) for s in strides]


_m = Measured

#: Every chapter notebook's GPU work (counts read off the notebooks; see the module's docstring).
NOTEBOOKS: tuple[Notebook, ...] = (
    # --- Chapter 1 ---
    Notebook("01_introduction/01_first_kernels.ipynb",
             (_m("increment", calls=6), _m("increment_2d", benchmarks=1), _m("increment_2d", benchmarks=1, traffic=8)),  # rows, then columns
             holds=("increment", "increment_2d")),
    Notebook("01_introduction/02_device_and_precision.ipynb",
             (_m("saxpy", calls=4), _m("fp_rate", benchmarks=2, repeat=5, moved=lambda z: 16 * z["fp_rate"][0])),
             holds=("saxpy", "fp_rate")),
    Notebook("01_introduction/03_errors_compiling_tools.ipynb",
             (_m("increment", calls=4), _m("sgemm", benchmarks=2, repeat=5, moved=lambda z: 12 * z["sgemm"] ** 2)),
             holds=("increment", "sgemm")),
    # --- Chapter 2 ---
    Notebook("02_metrics/01_timing.ipynb",
             (_m("ch2_timing", benchmarks=2, repeat=15, calls=10), _m("ch2_short_kernel", benchmarks=12, calls=230)),
             holds=("ch2_timing", "ch2_short_kernel")),
    Notebook("02_metrics/02_bound_kernels.ipynb", (_m("ch2_limit", benchmarks=7, calls=4),), holds=("ch2_limit",), explains=("ch2_limit",)),
    Notebook("02_metrics/03_bandwidth.ipynb",  # the tuner (6 block sizes x 9 copies), CuPy's copies, the roofline, the report's chapter 2
             (_m("ch2_copy", benchmarks=54 + 2 + 10, calls=4), _m("ch2_roofline", benchmarks=9), _m("ch2_limit", benchmarks=6),
              _m("ch2_short_kernel", benchmarks=1)),
             holds=("ch2_copy", "ch2_roofline", "ch2_latency"), ceilings=True,
             explains=("ch2_copy", "ch2_roofline", "ch2_latency", "ch2_limit")),
    # --- Chapter 3 ---
    Notebook("03_optimization/01_transfers.ipynb",  # 4 kinds of copy (pinned or not, each way) of each size
             (_m("ch3_bandwidth_test", benchmarks=4, repeat=15, moved=lambda z: z["ch3_bandwidth_test"], link=True),
              _m("ch3_transfer_sizes", benchmarks=4, repeat=15, moved=lambda z: list(z["ch3_transfer_sizes"]), link=True),
              _m("ch3_batching", benchmarks=2, repeat=15, moved=lambda z: z["ch3_batching"][0], link=True),
              _m("ch3_async", benchmarks=3 + 4 + 5, repeat=15, calls=8, link=True)),
             holds=("ch3_async", "ch3_transfer_sizes"), ceilings=True, explains=("ch3_bandwidth_test", "ch3_async")),
    Notebook("03_optimization/02_coalescing.ipynb",  # 33 offsets and the strides, float32 and float64
             (_m("ch3_coalescing", benchmarks=33, repeat=15, moved=lambda z: 8 * z["ch3_coalescing"]),
              _m("ch3_coalescing", benchmarks=33, repeat=15),
              _m("ch3_strides", benchmarks=1, repeat=15, moved=lambda z: _strided(z["ch3_coalescing"], z["ch3_strides"], 4)),
              _m("ch3_strides", benchmarks=1, repeat=15, moved=lambda z: _strided(z["ch3_coalescing"], z["ch3_strides"], 8))),
             holds=("ch3_coalescing",), ceilings=True,
             also_holds=lambda z: 12 * (max(z["ch3_strides"]) - 8) * z["ch3_coalescing"], explains=("ch3_coalescing", "ch3_strides")),
    Notebook("03_optimization/03_memory_spaces.ipynb",  # 5 load paths x 6 strides, 3 x 2 averages, local, registers, constant, banks, tiles
             (_m("ch3_texture", benchmarks=5, repeat=15,
                 moved=lambda z: [4 * z["ch3_texture"] + v / 2 for v in _strided(z["ch3_texture"], z["ch3_texture_strides"], 4)]),
              _m("ch3_stencil", benchmarks=6, repeat=15), _m("ch3_local", calls=3, moved=lambda z: 8 * z["ch3_local"]),
              _m("ch3_hungry", benchmarks=2, repeat=15, moved=lambda z: 4 * 64 * z["ch3_hungry"][0]),
              _m("ch3_constant", benchmarks=3 * 6, repeat=15), _m("ch3_banks", benchmarks=33, repeat=15),
              _m("ch3_tile_rows", benchmarks=2, repeat=15)),
             holds=("ch3_texture", "ch3_stencil", "ch3_constant", "ch3_banks", "ch3_tile_rows"), ceilings=True,
             explains=("ch3_stencil", "ch3_tile_rows")),
    Notebook("03_optimization/04_transpose.ipynb",  # six kernels, CuPy's a.T, the block-rows sweep; the naive one writes a sector per element
             (_m("ch3_transpose", benchmarks=5 + 1 + 6, calls=8), _m("ch3_transpose", benchmarks=1, traffic=4.5)),
             holds=("ch3_transpose",), ceilings=True, explains=("ch3_transpose",)),
    Notebook("03_optimization/05_execution_configuration.ipynb", (_m("ch3_copy", benchmarks=4 * 6, calls=4),),
             holds=("ch3_copy",), ceilings=True, explains=("ch3_copy",)),
    Notebook("03_optimization/06_instructions.ipynb",
             (_m("ch3_math", benchmarks=2), _m("ch3_divergence", benchmarks=2 + 3 + 3),
              _m("ch3_accuracy", calls=8, moved=lambda z: 8 * z["ch3_accuracy"])),
             holds=("ch3_math", "ch3_divergence"), ceilings=True),
    Notebook("03_optimization/07_ufunc_kernels.ipynb",
             (_m("ch3_ufunc_book", benchmarks=4, repeat=15), _m("ch3_ufunc", benchmarks=5 + 2 + 5, repeat=15, calls=4),
              _m("ch3_reduce", benchmarks=4, repeat=15, calls=4)),
             holds=("ch3_ufunc_book", "ch3_ufunc", "ch3_reduce"), ceilings=True, explains=("ch3_ufunc_book", "ch3_ufunc", "ch3_reduce")),
    # --- Chapter 4 (on one GPU: what needs two is left out) ---
    Notebook("04_multi_gpu/01_devices.ipynb", (_m("ch4_alloc", calls=2, moved=lambda z: 4 * z["ch4_alloc"]),)),
    Notebook("04_multi_gpu/02_peer_to_peer.ipynb", ()),
    Notebook("04_multi_gpu/03_p2p_transpose.ipynb",  # one kernel, then the matrix split in two on the one GPU: 2 modes x 21 wall-clock runs, twice
             (_m("ch4_transpose", benchmarks=1, calls=4 * 21, traffic=1.5),), holds=("ch4_transpose",), ceilings=True, explains=("ch4_transpose",)),
    Notebook("04_multi_gpu/04_mpi.ipynb",  # host-staged, NCCL and one more exchange, 11 transposes each; host-staged crosses the link
             (_m("ch4_mpi_transpose", calls=3 * 11),
              _m("ch4_mpi_transpose", calls=11, link=True, moved=lambda z: 4 * _area(z["ch4_mpi_transpose"]))),
             holds=("ch4_mpi_transpose",), explains=("ch4_mpi_transpose",)),
    Notebook("04_multi_gpu/05_domain_decomposition.ipynb",  # about 50 timed runs of 100 sweeps: launch costs, strong, weak, MPI
             (_m("ch4_domain_mesh", calls=5000, moved=lambda z: 8 * _area(z["ch4_domain_mesh"])),),
             holds=("ch4_domain_mesh",), explains=("ch4_domain_mesh",)),
    Notebook("04_multi_gpu/06_distributed_fft.ipynb",  # the all-to-all six ways (20 runs each), then 2 x 3 sizes of forward transforms
             (_m("ch4_alltoall_block", calls=6 * 21, moved=lambda z: 2 * 4 * z["ch4_alltoall_block"]),
              _m("ch4_fft3d_sizes", calls=2 * 21, moved=lambda z: [5 * 2 * 8 * s**3 for s in z["ch4_fft3d_sizes"]]))),
    # --- Chapter 5 ---
    Notebook("05_monte_carlo/01_random_numbers.ipynb",  # nine generators, float32 then float64
             (_m("ch5_random_numbers", benchmarks=9, repeat=15, moved=lambda z: 4 * z["ch5_random_numbers"]),
              _m("ch5_random_numbers", benchmarks=9, repeat=15), _m("ch5_random_numbers", calls=2, moved=lambda z: 4 * z["ch5_random_numbers"])),
             holds=("ch5_random_numbers",), ceilings=True),
    Notebook("05_monte_carlo/02_pi.ipynb",
             (_m("ch5_pi", benchmarks=7, repeat=15, calls=6), _m("ch5_pi_book", calls=3, moved=lambda z: [16 * n for n in z["ch5_pi_book"]])),
             holds=("ch5_pi", "ch5_pi_book"), ceilings=True),
    Notebook("05_monte_carlo/03_ieee754.ipynb", (_m("ch5_fma", calls=6, moved=lambda z: 12 * z["ch5_fma"]),), holds=("ch5_fma",)),
    Notebook("05_monte_carlo/04_reductions.ipynb",  # every sum and the libraries', the loads-per-thread sweep
             (_m("ch5_reduce", benchmarks=10 + 5, repeat=15, calls=12), _m("ch5_atomic_contention", benchmarks=2, repeat=15),
              _m("ch5_reduce_small", benchmarks=2, repeat=15)),
             holds=("ch5_reduce", "ch5_atomic_contention", "ch5_reduce_small"), ceilings=True),
    Notebook("05_monte_carlo/05_summation_accuracy.ipynb", (_m("ch5_gpu_sum_accuracy", calls=8, moved=lambda z: 4 * z["ch5_gpu_sum_accuracy"]),)),
    Notebook("05_monte_carlo/06_option_pricing.ipynb",  # the variants, then the book's program 4 x 2 times, 4 runs each
             (_m("ch5_options", benchmarks=6, repeat=15, moved=lambda z: 8 * z["ch5_options"]),
              _m("ch5_options", calls=4 * 2 * 4, moved=lambda z: 8 * z["ch5_options"])),
             holds=("ch5_options",), ceilings=True),
    # --- Chapter 6 ---
    Notebook("06_finite_difference/01_stencil_derivatives.ipynb", (_m("ch6_book_grid", calls=20, moved=lambda z: 8 * z["ch6_book_grid"] ** 3),)),
    Notebook("06_finite_difference/02_derivative_performance.ipynb",  # every kernel of the table on each cube, the tuners on the beyond-L2 cube
             (_m("ch6_table_grids", benchmarks=19, moved=lambda z: [8 * n**3 for n in z["ch6_table_grids"]]),
              _m("ch6_table_grids", benchmarks=2, moved=lambda z: [24 * n**3 for n in z["ch6_table_grids"]]),  # transpose, x kernel, transpose back
              _m("ch6_grid", benchmarks=2 + 4 + 4, calls=4)),
             holds=("ch6_table_grids",), ceilings=True, explains=("ch6_grid", "ch6_table_grids")),
    Notebook("06_finite_difference/03_nonuniform_grids.ipynb",
             (_m("ch6_grid", benchmarks=6, traffic=1.25), _m("ch6_book_grid", calls=30, moved=lambda z: 8 * z["ch6_book_grid"] ** 3)),
             holds=("ch6_grid",), ceilings=True, explains=("ch6_grid",)),
    Notebook("06_finite_difference/04_laplace.ipynb",  # 4 methods x 100 sweeps, their times, then 2 methods x 3 ways x 20 runs
             (_m("ch6_laplace", benchmarks=4, calls=4 * 100), _m("ch6_laplace_run", calls=2 * (3 * 20 + 1)),
              _m("ch6_laplace_run", benchmarks=2 * 2, moved=lambda z: 8 * _area(z["ch6_laplace_run"][0]))),
             holds=("ch6_laplace", "ch6_laplace_run"), ceilings=True, explains=("ch6_laplace", "ch6_laplace_run")),
    Notebook("06_finite_difference/05_heat_temporal_blocking.ipynb",  # the global step and 8 multi-step launches, then 2 methods x 3 ways x 3 runs
             (_m("ch6_heat", benchmarks=1 + 8), _m("ch6_heat_run", calls=2 * (3 * 3 + 1)),
              _m("ch6_heat_run", benchmarks=2, repeat=3, moved=lambda z: 8 * _area(z["ch6_heat_run"][0]))),
             holds=("ch6_heat", "ch6_heat_run"), ceilings=True),
    # --- Chapter 7 ---
    Notebook("07_fft/01_cufft.ipynb",
             (_m("ch7_transforms", benchmarks=1, moved=lambda z: [2 * _area(shape) * (16 if dtype == "complex128" else 8)
                                                                  for _, shape, dtype in z["ch7_transforms"]]),
              _m("ch7_batched", benchmarks=2), _m("ch7_strided", benchmarks=2, traffic=2),
              _m("ch7_plan_shapes", benchmarks=1, repeat=5, moved=lambda z: [16 * _area(shape) for shape in z["ch7_plan_shapes"]]),
              _m("ch7_fast_sizes", benchmarks=1, moved=lambda z: [16 * 1024 * n for n in z["ch7_fast_sizes"]])),
             holds=("ch7_transforms", "ch7_batched", "ch7_strided"), ceilings=True, explains=("ch7_batched",)),
    Notebook("07_fft/02_spectral_derivatives.ipynb", (_m("ch7_spectral_grid", benchmarks=2 + 4),), holds=("ch7_spectral_grid",), ceilings=True),
    Notebook("07_fft/03_convolution.ipynb",  # each plane goes to the GPU and back
             (_m("ch7_convolution", benchmarks=3 + 2, calls=6), _m("ch7_convolution", benchmarks=5, repeat=5, link=True)),
             holds=("ch7_convolution",)),
    Notebook("07_fft/04_poisson.ipynb",
             (_m("ch7_poisson", benchmarks=4 + 3 + 2),
              _m("ch7_poisson_sizes", benchmarks=3, repeat=10, moved=lambda z: [32 * n * n for n in z["ch7_poisson_sizes"]]),
              _m("ch7_poisson_book", calls=4, moved=lambda z: 64 * z["ch7_poisson_book"] ** 2)),
             holds=("ch7_poisson",), ceilings=True, explains=("ch7_poisson", "ch7_poisson_book")),
)


def notebook(path: str) -> Notebook:
    """The model of the chapter notebook at `path` (relative to chapters/)."""
    for entry in NOTEBOOKS:
        if entry.path == path:
            return entry
    raise KeyError(f"no model of the notebook {path!r}; models: {', '.join(n.path for n in NOTEBOOKS)}")


def chapter_seconds(profile: DeviceProfile) -> dict[int, float]:
    """ESTIMATED GPU time (s) of each chapter's notebooks on `profile`, by chapter number."""
    totals: dict[int, float] = {}
    for entry in NOTEBOOKS:
        totals[entry.chapter] = totals.get(entry.chapter, 0.0) + predicted_seconds(entry, profile)
    return totals


def markdown_table(profiles: Mapping[str, DeviceProfile] | None = None) -> str:
    """The README's table: each GPU class and the ESTIMATED GPU time (s) of each chapter's notebooks on it."""
    from .profiles import PROFILES

    profiles = PROFILES if profiles is None else profiles
    chapters = sorted({entry.chapter for entry in NOTEBOOKS})
    head = ["GPU", "memory (GB)", "L2 (MiB)", "peak (GB/s)", *(f"ch. {c}" for c in chapters), "all"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for profile in profiles.values():
        seconds = chapter_seconds(profile)
        cells = [profile.name, f"{profile.memory_bytes / 1e9:g}", f"{profile.l2_bytes / 2**20:g}", f"{profile.bandwidth_gbs:g}",
                 *(f"{seconds[c]:.1f}" for c in chapters), f"{sum(seconds.values()):.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def notebook_table(profile: DeviceProfile) -> str:
    """Each chapter notebook's ESTIMATED GPU time (s) and device memory held at once on `profile`, as text."""
    rows = [(entry.path, predicted_seconds(entry, profile), held_bytes(entry, profile)) for entry in NOTEBOOKS]
    width = max(len(path) for path, _, _ in rows)
    cap = sizes.memory_for_notebook(profile)
    lines = [f"{'notebook':{width}s}  GPU time (s, estimate)  held (GiB, estimate; at most {cap / 2**30:.1f})"]
    lines += [f"{path:{width}s}  {seconds:22.1f}  {held / 2**30:8.2f}" for path, seconds, held in rows]
    return "\n".join(lines)
