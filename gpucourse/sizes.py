"""Problem sizes for every experiment of the course, by mode and by device, in one table.

In the simulator every CUDA thread is a Python thread (a 64 x 96 shared-memory transpose takes
seconds), so sizes there are tiny and fixed: they show that the code is right, not how fast it is.

On a GPU a size is either fixed (a launch configuration, the book's own problem, a test) or a pure
function of a `gpucourse.profiles.DeviceProfile` (memory, L2 cache, peak bandwidth), given by a
`Rule`. A rule starts from the size the course was first written for (an 80 GB Hopper) and keeps
the experiment's constraints on any GPU:

* beyond L2: an array a bandwidth lesson streams through is at least `BEYOND_L2` (4) times the
  L2 cache, so that repeated launches cannot run from the cache and no figure exceeds the copy ceiling;
* fits in memory: what the experiment holds on the device stays within its share of
  `SAFE_MEMORY_FRACTION` (half) of the card, the part one notebook may use;
* a time budget: one timed call moves at most what the memory moves in `CALL_BUDGET_MS` at its
  peak (an end-to-end run, `RUN_BUDGET_MS`);
* its structure: the scale steps of the rule keep what the code needs (a power of two, a multiple
  of every tile, "+ 37" so that it is not a multiple of a block, the book's size as a floor).

The size is the one chosen for that Hopper if it keeps them all, else it is raised (beyond L2) or
lowered (memory, time) to the nearest size that does; a profile on which no size keeps them all is refused
(`SizeConflict`). `explain(name, ...)` says, for the GPU at hand, why each size differs from the
book's. Notebooks and tests ask `problem_size(name)` and never branch on the mode or the device.

`GPUCOURSE_DEVICE_MEMORY=8GiB` (see `gpucourse.emulation`) makes the current GPU report, and the
sizes follow, the memory of a smaller card.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import mode
from .profiles import REFERENCE, DeviceProfile, current_profile
from .report import Table

#: An array a bandwidth lesson streams through is at least this many times the L2 cache.
BEYOND_L2 = 4
#: One notebook may hold at most this fraction of the card's memory at once. The rest is for the
#: CUDA context (0.3-0.6 GiB), CuPy's memory pool (it keeps freed blocks for reuse, so a notebook's
#: temporaries stay reserved), cuFFT's work areas and plans, and what another open notebook holds.
SAFE_MEMORY_FRACTION = 0.5
#: One timed call moves at most what device memory moves in this time at its peak. `benchmark`
#: repeats a call about 30 times once a call is longer than its 2-ms sample, so one measurement stays
#: near a quarter of a second.
CALL_BUDGET_MS = 8.0
#: One end-to-end run (many launches timed on the wall clock, repeated) stays within this time.
RUN_BUDGET_MS = 100.0

MiB = 2**20


class SizeConflict(ValueError):
    """No size of an experiment keeps all its constraints on a device profile."""


@dataclass(frozen=True)
class Rule:
    """How a GPU size follows the device: sizes by scale k (1, 2, ...), the scale chosen for a large GPU, the smallest allowed."""

    size_of: Callable[[int], Any]  # scale -> size; a larger scale is a larger size
    preferred: int  # the scale of the size chosen for an 80 GB Hopper
    smallest: int = 1  # the smallest scale: the book's size, or the least the lesson needs
    memory_share: float = 1.0  # the share of a notebook's safe memory this experiment may hold
    budget_ms: float = CALL_BUDGET_MS  # the time one timed call (or run) may take at peak bandwidth
    steps: int = 1 << 14  # how far above `smallest` a size is searched


@dataclass(frozen=True)
class Derived:
    """A GPU size computed from other experiments' sizes on the same profile (`of(profile)`)."""

    of: Callable[[DeviceProfile], Any]
    preferred: Any  # the size chosen for an 80 GB Hopper
    label: str  # what sets it, in a few words ("fits in memory", "follows ch6_grid")
    why: str  # the same, in a sentence


@dataclass(frozen=True)
class Size:
    """The size of one experiment on a GPU (fixed, a Rule or Derived) and in the simulator, what it counts, and what it costs.

    `held(size)`: device bytes the experiment keeps while it runs; `moved(size)`: bytes one timed
    call reads plus writes; `streamed(size)`: bytes of the smallest array a timed kernel streams
    through (kept beyond L2). `book`: the book's size where the lesson compares with the book.
    """

    gpu: Any
    simulator: Any
    unit: str
    held: Callable[[Any], int] | None = None
    moved: Callable[[Any], int] | None = None
    streamed: Callable[[Any], int] | None = None
    book: Any = None
    book_where: str = ""
    note: str = ""  # why a fixed size differs from the book's

    @property
    def follows_device(self) -> bool:
        """True when the GPU size is a function of the device profile (a Rule or Derived)."""
        return isinstance(self.gpu, Rule | Derived)


@dataclass(frozen=True)
class Choice:
    """The GPU size of one experiment on one profile, and why: which constraint set it."""

    name: str
    size: Any
    preferred: Any
    why: str  # "as chosen for a large GPU", "beyond L2", "fits in memory", "time budget", "fixed"
    detail: str  # the numbers behind `why`, in words


# Scales: how a rule steps through sizes -------------------------------------------------------------


def power_of_two(k: int) -> int:
    """2**k elements."""
    return 1 << k


def power_of_two_plus_37(k: int) -> int:
    """2**k + 37 elements: not a multiple of 4, of a warp or of any block."""
    return (1 << k) + 37


def fft_friendly_side(k: int) -> int:
    """1024 times the k-th whole number with no prime factor above 7 (1, 2, ..., 9, 10, 12, 14, 15, 16, ...): sides cuFFT likes."""
    m = count = 0
    while count < k:
        m += 1
        rest = m
        for prime in (2, 3, 5, 7):
            while rest % prime == 0:
                rest //= prime
        count += rest == 1
    return 1024 * m


def mebi_elements(k: int) -> int:
    """k * 2**20 elements: a multiple of every block size and elements-per-thread factor."""
    return k * MiB


def square_of_1024(k: int) -> tuple[int, int]:
    """(1024 k, 1024 k): sides that every tile divides and that split over 2 and 4 GPUs."""
    return (1024 * k, 1024 * k)


def odd_pair(k: int) -> tuple[int, int]:
    """(32 k + 16, 32 k + 17): neither side a multiple of 32, the columns odd (a grid of partial tiles)."""
    return (32 * k + 16, 32 * k + 17)


def even_pair(k: int) -> tuple[int, int]:
    """(32 k + 16, 32 k + 18): neither side a multiple of 32 (a mesh with partial blocks)."""
    return (32 * k + 16, 32 * k + 18)


def _area(shape) -> int:
    return math.prod(shape)


SIZES: dict[str, Size] = {
    # --- Chapter 1: introduction -------------------------------------------------------------
    "increment": Size(gpu=1 << 24, simulator=1000, unit="float32 elements", held=lambda n: 8 * n, moved=lambda n: 8 * n),
    "increment_2d": Size(gpu=Rule(square_of_1024, preferred=4), simulator=(24, 40), unit="(rows, columns) of a float32 matrix",
                         held=lambda s: 4 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 4 * _area(s)),
    "saxpy": Size(gpu=1 << 24, simulator=1000, unit="elements", held=lambda n: 28 * n, moved=lambda n: 12 * n),
    "sgemm": Size(gpu=4096, simulator=32, unit="matrix order n (n x n)", held=lambda n: 24 * n * n),
    "threads_per_block": Size(gpu=256, simulator=64, unit="threads per block"),
    "fp_rate": Size(gpu=(1 << 22, 4096), simulator=(256, 8), unit="(elements, multiply-add steps per element)", held=lambda s: 8 * s[0]),
    "fp_rate_check": Size(gpu=(1 << 16, 256), simulator=(256, 8), unit="(elements, steps) checked against NumPy"),
    "exercise_1d": Size(gpu=Rule(power_of_two_plus_37, preferred=25), simulator=1000,
                        unit="float32 elements of exercises 1.1 and 1.3 (a power of two + 37: not a multiple of any block)",
                        held=lambda n: 12 * n, moved=lambda n: 12 * n, streamed=lambda n: 4 * n),
    "exercise_2d": Size(gpu=Rule(odd_pair, preferred=187), simulator=(21, 37),
                        unit="(rows, columns) of exercise 1.2's float32 matrix (neither a multiple of 32)",
                        held=lambda s: 8 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 4 * _area(s)),
    # --- Chapter 2: performance measurement and metrics ----------------------------------------
    "ch2_limit": Size(gpu=Rule(power_of_two, preferred=26, smallest=23), simulator=600, unit="float32 elements per array",
                      held=lambda n: 8 * n, moved=lambda n: 8 * n, streamed=lambda n: 4 * n,
                      book=8 * 1024 * 1024, book_where="§2.2, limitingFactor (n = 8*1024*1024 floats)"),
    "ch2_threads_per_block": Size(gpu=256, simulator=64, unit="threads per block (the book's blockSize)"),
    "ch2_copy": Size(gpu=Rule(power_of_two, preferred=26, smallest=20), simulator=512, unit="float32 elements per array (a multiple of 4)",
                     held=lambda n: 8 * n, moved=lambda n: 8 * n, streamed=lambda n: 4 * n),
    "ch2_block_sizes": Size(gpu=(32, 64, 128, 256, 512, 1024), simulator=(32, 64, 128), unit="threads per block in a sweep"),
    "ch2_elements_per_thread": Size(gpu=(1, 2, 4, 8), simulator=(1, 4), unit="elements each thread copies"),
    "ch2_tuner_largest_block": Size(gpu=1024, simulator=128, unit="largest threads per block a tuner offers"),
    "ch2_timing": Size(gpu=(1 << 24, 256), simulator=(256, 2), unit="(elements, loop steps of 4 fused multiply-adds)",
                       held=lambda s: 32 * s[0], moved=lambda s: 8 * s[0]),
    "ch2_short_kernel": Size(gpu=1 << 15, simulator=64, unit="float32 elements of a kernel shorter than its launch",
                             held=lambda n: 8 * n, moved=lambda n: 8 * n),
    "ch2_roofline": Size(gpu=Rule(lambda k: (1 << k, (1, 2, 4, 8, 16, 32, 64, 128)), preferred=25), simulator=(256, (1, 4, 16)),
                         unit="(elements, loop steps: intensity = steps flop/byte in float32)",
                         held=lambda s: 8 * s[0], moved=lambda s: 8 * s[0], streamed=lambda s: 4 * s[0]),
    "ch2_peak_flops": Size(gpu=(1 << 20, 2048), simulator=(128, 2), unit="(threads, loop steps of 16 fused multiply-adds)"),
    # The pointer chase must run through DRAM, so the slots it visits span beyond L2; its time is the
    # latency of its dependent loads, not a bandwidth, so it has no time budget.
    "ch2_latency": Size(gpu=Rule(lambda k: (1 << k, 32, 20000), preferred=20), simulator=(64, 4, 200),
                        unit="(slots, int32 per slot, dependent loads)", held=lambda s: 4 * s[0] * s[1], streamed=lambda s: 4 * s[0] * s[1]),
    "ch2_graph_launches": Size(gpu=100, simulator=2, unit="launches recorded in the graph whose replay is timed"),
    "ch2_test": Size(gpu=1 << 21, simulator=320, unit="float32 elements of the unit tests (a multiple of 4; tests add odd tails)"),
    "ch2_test_steps": Size(gpu=8, simulator=2, unit="loop steps of the compute kernels in the unit tests"),
    "ch2_exercise": Size(gpu=Rule(power_of_two_plus_37, preferred=25), simulator=1000 + 37,
                         unit="float32 elements of exercise 2.4 (not a multiple of 4 or of a block)",
                         held=lambda n: 8 * n, moved=lambda n: 8 * n, streamed=lambda n: 4 * n),
    # --- Chapter 3: optimization ---------------------------------------------------------------
    # Part A (transfers, coalescing, memory spaces, ufunc-style kernels).
    "ch3_threads_per_block": Size(gpu=256, simulator=64, unit="threads per block (the book's blockSize)"),
    "ch3_repeats": Size(gpu=15, simulator=2, unit="timed samples per measurement"),
    "ch3_transfer_sizes": Size(gpu=tuple(4096 * 4**k for k in range(9)), simulator=(4096, 65536, 1 << 20),
                               unit="bytes per host-device copy (4 KiB .. 256 MiB on a GPU)", held=lambda s: max(s)),
    "ch3_bandwidth_test": Size(gpu=16 * 2**20, simulator=64 * 2**10, unit="bytes (the book's BandwidthTest copies 16 MiB)",
                               book=16 * 2**20, book_where="§3.1.1, BandwidthTest (4*1024*1024 floats)"),
    "ch3_batching": Size(gpu=(16 * 2**20, 128), simulator=(64 * 2**10, 8), unit="(bytes in all, number of copies)"),
    "ch3_async": Size(gpu=(1 << 26, 4), simulator=(512, 4), unit="(float32 elements, streams)", held=lambda s: 4 * s[0],
                      moved=lambda s: 8 * s[0], book=(4 * 1024 * 1024, 4), book_where="§3.1.3, async (n = 4M floats, 4 streams)",
                      note="the same on every GPU: 16 x the book's, so that each chunk's copies last milliseconds on a current host link"),
    "ch3_stream_counts": Size(gpu=(1, 2, 4, 8, 16), simulator=(1, 4), unit="streams offered by the slider"),
    # The sweeps keep a float32 and a float64 array of n + 32 elements (offsets) and of n times the
    # largest stride (strides): (4 + 8) * (n + 32 + largest stride * n) bytes. Here held counts the
    # least the lesson needs, strides up to 4 (a card with little memory beside a large L2, such as an
    # H200 emulating 8 GiB, sweeps 1..4; every real profile reaches 8, where each float32 needs a sector of its own).
    "ch3_coalescing": Size(gpu=Rule(mebi_elements, preferred=16), simulator=256, unit="elements each offset/stride launch touches",
                           held=lambda n: 12 * (n + 32 + 4 * n), moved=lambda n: 16 * n, streamed=lambda n: 4 * n,
                           book=1 << 20, book_where="§3.2.2, offsetNStride (nMB = 4: 4 MB of float32)"),
    "ch3_offsets": Size(gpu=tuple(range(33)), simulator=(0, 1, 16), unit="element offsets in the sweep"),
    "ch3_strides": Size(gpu=Derived(lambda profile: _strides_that_fit(profile), preferred=tuple(range(1, 33)), label="fits in memory",
                                    why="the largest stride (32, 16, 8 or 4) whose arrays fit in memory"),
                        simulator=(1, 2, 32), unit="element strides in the sweep (up to 32, 16, 8 or 4: what fits in memory)"),
    "ch3_texture": Size(gpu=1 << 22, simulator=256, unit="elements read with a stride (1D textures span at most 2**27)",
                        held=lambda n: 132 * n, moved=lambda n: 8 * n),
    "ch3_texture_strides": Size(gpu=(1, 2, 4, 8, 16, 32), simulator=(1, 4), unit="strides of the load-path comparison"),
    "ch3_stencil": Size(gpu=Rule(lambda k: 1024 * k, preferred=8, smallest=2), simulator=16, unit="mesh points per side",
                        held=lambda side: 8 * (side + 2) ** 2, moved=lambda side: 8 * side**2, streamed=lambda side: 4 * side**2,
                        book=2048, book_where="§3.2.3, average4/average8 (n = 2048)"),
    "ch3_local": Size(gpu=1 << 20, simulator=128, unit="elements of the local-memory kernels"),
    "ch3_hungry": Size(gpu=(1 << 20, 4), simulator=(64, 2), unit="(threads, rounds) of the register-hungry kernel"),
    "ch3_constant": Size(gpu=(1 << 22, 64), simulator=(64, 4), unit="(elements, table reads per element)",
                         held=lambda s: 8 * s[0], moved=lambda s: 8 * s[0]),
    "ch3_distinct": Size(gpu=(1, 2, 4, 8, 16, 32), simulator=(1, 32), unit="different table words per warp"),
    "ch3_banks": Size(gpu=(1 << 22, 64), simulator=(64, 4), unit="(threads, shared-memory reads per thread)",
                      held=lambda s: 4 * s[0], moved=lambda s: 4 * s[0]),
    "ch3_bank_strides": Size(gpu=tuple(range(1, 34)), simulator=(1, 2, 33), unit="strides in 32-bit words"),
    "ch3_tile_rows": Size(gpu=Rule(power_of_two, preferred=20), simulator=64, unit="rows of the (rows, 32) float32 input",
                          held=lambda rows: 132 * rows, moved=lambda rows: 132 * rows, streamed=lambda rows: 128 * rows),
    "ch3_ufunc": Size(gpu=Rule(power_of_two, preferred=26), simulator=1000, unit="float32 elements of the element-wise comparisons",
                      held=lambda n: 8 * n, moved=lambda n: 8 * n, streamed=lambda n: 4 * n),
    "ch3_ufunc_book": Size(gpu=1 << 20, simulator=1000, unit="int32 elements (the book's CUF kernel: 1024 * 1024)",
                           held=lambda n: 8 * n, moved=lambda n: 8 * n, book=1 << 20, book_where="§3.7, CUF kernel (1024 * 1024)"),
    "ch3_ilp_factors": Size(gpu=(1, 2, 4, 8, 16), simulator=(1, 4), unit="elements per thread"),
    "ch3_reduce": Size(gpu=Rule(lambda k: (1 << k, 1024), preferred=26), simulator=(1000, 2),
                       unit="(float32 elements, blocks of the hand-written sum)",
                       held=lambda s: 4 * s[0], moved=lambda s: 4 * s[0], streamed=lambda s: 4 * s[0]),
    "ch3_test_elements": Size(gpu=(1 << 18) + 7, simulator=253, unit="elements in the tests (not a multiple of a block)"),
    "ch3_test_side": Size(gpu=300, simulator=16, unit="mesh points per side in the tests"),
    "ch3_test_async": Size(gpu=(1 << 24, 4), simulator=(512, 4), unit="(float32 elements, streams) in the tests"),
    "ch3_exercise_2d": Size(gpu=Rule(lambda k: (1024 * k, 4099), preferred=8), simulator=(21, 37),
                            unit="(rows, columns) of exercise 3.1's float32 matrix (4099 columns: not a multiple of 32)",
                            held=lambda s: 8 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 4 * _area(s)),
    "ch3_exercise_tiles": Size(gpu=1 << 19, simulator=64, unit="rows of 64 floats in exercise 3.3 (a multiple of 32)"),
    "ch3_exercise_block_sums": Size(gpu=Rule(power_of_two_plus_37, preferred=25), simulator=300 + 37,
                                    unit="float32 elements summed block by block in exercise 3.7",
                                    held=lambda n: 4 * n, moved=lambda n: 4 * n, streamed=lambda n: 4 * n),
    "ch3_exercise_async": Size(gpu=(1 << 24, 4), simulator=(256, 4), unit="(float32 elements, streams) of exercise 3.4"),
    # Part B (transpose, execution configuration, instructions). In the simulator the transpose's
    # sides are not multiples of the 32 x 32 tile, and the grid is not square.
    "ch3_transpose": Size(gpu=Rule(square_of_1024, preferred=8), simulator=(40, 70), unit="(rows, columns) of the float32 matrix",
                          held=lambda s: 12 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 4 * _area(s),
                          book=(1024, 1024), book_where="§3.4, transpose (nx = ny = 1024)"),
    "ch3_timing_samples": Size(gpu=20, simulator=1, unit="timed samples per measurement in notebooks 3.4-3.6"),
    "ch3_transpose_test": Size(gpu=((1030, 1500), (1100, 1100)), simulator=((10, 13), (9, 9)),
                               unit="(rows, columns) pairs tested: a non-square grid of tiles and a square one"),
    "ch3_transpose_test_tile": Size(gpu=(32, 8), simulator=(4, 2), unit="(tile, block_rows) the tests use"),
    "ch3_transpose_tiles": Size(gpu=(8, 16, 32, 64), simulator=(16, 32), unit="tile sides offered by the widget"),
    "ch3_transpose_block_rows": Size(gpu=(1, 2, 4, 8, 16, 32), simulator=(4, 8), unit="block rows offered by the widget"),
    "ch3_copy": Size(gpu=Rule(power_of_two, preferred=25, smallest=20), simulator=250, unit="float64 elements per array",
                     held=lambda n: 16 * n, moved=lambda n: 16 * n, streamed=lambda n: 8 * n,
                     book=1024 * 1024, book_where="§3.5.1, copy kernels (N = 1024*1024, double precision)"),
    "ch3_copy_test": Size(gpu=(1 << 22) + 3, simulator=253, unit="float64 elements the copy tests use (not a multiple of a block)"),
    "ch3_block_sizes": Size(gpu=(32, 64, 128, 256, 512, 1024), simulator=(32, 64), unit="threads per block (the book's sweep)"),
    "ch3_copy_ilp": Size(gpu=(1, 2, 4, 8, 16), simulator=(1, 4), unit="elements per thread offered by the ILP controls"),
    "ch3_math": Size(gpu=(1 << 22, 64), simulator=(64, 3), unit="(float32 elements, sine evaluations per element)",
                     held=lambda s: 8 * s[0], moved=lambda s: 8 * s[0]),
    "ch3_accuracy": Size(gpu=1 << 20, simulator=256, unit="float32 arguments per function"),
    "ch3_divergence": Size(gpu=(1 << 22, 32), simulator=(128, 2), unit="(float32 elements, sin or cos steps per element)",
                           held=lambda s: 12 * s[0], moved=lambda s: 8 * s[0]),
    "ch3_rounding": Size(gpu=(1 << 20, 100_000), simulator=(256, 100), unit="(operand pairs, values summed by one thread)"),
    "ch3_exercise_transpose": Size(gpu=Rule(odd_pair, preferred=187), simulator=(20, 37),
                                   unit="(rows, columns) of exercise 3.4.1, not multiples of 32",
                                   held=lambda s: 8 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 4 * _area(s)),
    "ch3_exercise_ilp": Size(gpu=(1 << 22) + 37, simulator=333, unit="float64 elements (not a multiple of a block)"),
    "ch3_exercise_divergence": Size(gpu=(1 << 22) + 37, simulator=201, unit="float32 elements (not a multiple of 64)"),
    # --- Chapter 4: multi-GPU programming -----------------------------------------------------
    # Sides split over 2 and 4 GPUs and are multiples of every tile. A slice on one of two GPUs (half
    # the matrix) stays beyond L2. On one GPU the matrix is split over that GPU itself: input,
    # output and the staging blocks are all there.
    "ch4_transpose": Size(gpu=Rule(square_of_1024, preferred=16, smallest=2, memory_share=0.75), simulator=(12, 20),
                          unit="(rows, columns) of the float32 matrix split over the GPUs",
                          held=lambda s: 12 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 2 * _area(s),
                          book=(2048, 2048), book_where="§4.1.3, P2P transpose (2048 x 2048 over 2 GPUs)"),
    "ch4_tile": Size(gpu=(32, 8), simulator=(4, 2), unit="(tile, block_rows) of the transpose kernel (chapter 3's)"),
    "ch4_repeat": Size(gpu=20, simulator=2, unit="timed repeats per measurement"),
    "ch4_alloc": Size(gpu=4 * 1024 * 1024, simulator=1024, unit="float32 elements each device allocates (the book: 4M)",
                      book=4 * 1024 * 1024, book_where="§4.1.2, N = 4*1024*1024 reals"),
    "ch4_p2p_bytes": Size(gpu=16 * 2**20, simulator=64 * 2**10, unit="bytes per peer copy (the book's 16 MiB)"),
    "ch4_p2p_sizes": Size(gpu=tuple(4096 * 4**k for k in range(10)), simulator=(4096, 65536),
                          unit="bytes per peer copy in the sweep (4 KiB .. 1 GiB on a GPU)"),
    "ch4_mpi_transpose": Size(gpu=Rule(square_of_1024, preferred=16, smallest=2, memory_share=0.75), simulator=(8, 12),
                              unit="(rows, columns) of the MPI transpose",
                              held=lambda s: 12 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 2 * _area(s),
                              book=(2048, 2048), book_where="§4.2.2, MPI transpose (2048 x 2048, 2 ranks)"),
    "ch4_mpi_ranks": Size(gpu=2, simulator=2, unit="MPI ranks in the simulator (on a GPU: one per GPU, mpi.default_ranks)"),
    "ch4_domain_mesh": Size(gpu=Rule(square_of_1024, preferred=16, smallest=2, memory_share=0.75), simulator=(18, 16),
                            unit="(ny, nx) of the Jacobi mesh split over the GPUs (NVIDIA's multi-GPU reference: 16384 x 16384)",
                            held=lambda s: 12 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 4 * _area(s)),
    "ch4_domain_sweeps": Size(gpu=(100, 50, 10), simulator=(4, 2, 2),
                              unit="(sweeps timed, sweeps between residual checks, halo rows) of the split solver"),
    "ch4_domain_test_mesh": Size(gpu=(1030, 777), simulator=(23, 17), unit="(ny, nx) of the split Jacobi solver's tests"),
    "ch4_test_slice": Size(gpu=(300, 170), simulator=(5, 7), unit="(rows, columns) per part in the tests (times the parts)"),
    "ch4_exercise_slice": Size(gpu=(96, 80), simulator=(3, 5), unit="(rows, columns) per part in the exercise checks"),
    "ch4_fft3d": Size(gpu=512, simulator=12, unit="points per side of the slab 3D FFT (its rank program's default)"),
    "ch4_fft3d_sizes": Size(gpu=(128, 256, 512), simulator=(8, 12), unit="points per side of the distributed 3D FFT's notebook runs"),
    "ch4_alltoall_block": Size(gpu=64 * 2**20, simulator=1024, unit="bytes per block of the all-to-all"),
    # --- Chapter 5: Monte Carlo ----------------------------------------------------------------
    "ch5_threads_per_block": Size(gpu=256, simulator=32, unit="threads per block of the chapter's kernels"),
    "ch5_repeat": Size(gpu=15, simulator=1, unit="timed samples per measurement"),
    # float32 and float64 outputs of the generators, and a float32 array drawn again later.
    "ch5_random_numbers": Size(gpu=Rule(power_of_two, preferred=28, memory_share=0.75), simulator=2048, unit="numbers each generator writes",
                               held=lambda n: 12 * n, moved=lambda n: 8 * n, streamed=lambda n: 4 * n),
    "ch5_state_counts": Size(gpu=(1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20), simulator=(8, 32, 64),
                             unit="xoroshiro128+ states made on the host"),
    "ch5_streams": Size(gpu=(4096, 256), simulator=(256, 16), unit="(numbers per stream, streams) of the independence test"),
    # Three arrays of 2n float32: the points drawn once, and the variants' buffer and stored points. Half
    # the notebook's memory: the book's tables draw up to 1e8 float64 points beside them.
    "ch5_pi": Size(gpu=Rule(power_of_two, preferred=27, memory_share=0.4), simulator=2000, unit="points per estimate in the throughput comparison",
                   held=lambda n: 24 * n, moved=lambda n: 8 * n, streamed=lambda n: 8 * n),
    "ch5_pi_book": Size(gpu=(10**4, 10**5, 10**6, 10**7, 10**8), simulator=(10**2, 10**3),
                        unit="points of the book's convergence tables", held=lambda s: 16 * max(s)),
    "ch5_pi_convergence": Size(gpu=((10**2, 10**3, 10**4, 10**5, 10**6, 10**7, 10**8, 10**9), 8), simulator=((10, 100, 1000), 2),
                               unit="((points per estimate, ...), seeds per point count)"),
    "ch5_fma": Size(gpu=10**8, simulator=3000, unit="points of the FMA comparison (the book: 10**8, seed 1234567)",
                    held=lambda n: 12 * n, book=10**8, book_where="§5.2.1, N = 1e8, seed 1234567"),
    "ch5_reduce": Size(gpu=Rule(power_of_two, preferred=28), simulator=3000, unit="float32 elements summed",
                       held=lambda n: 4 * n, moved=lambda n: 4 * n, streamed=lambda n: 4 * n),
    "ch5_reduce_small": Size(gpu=1 << 20, simulator=500, unit="float32 elements of a sum too short to hide its launches",
                             held=lambda n: 4 * n, moved=lambda n: 4 * n),
    "ch5_graph_sums": Size(gpu=100, simulator=2, unit="sums recorded in the CUDA graph whose replay is timed"),
    "ch5_atomic_contention": Size(gpu=1 << 22, simulator=500, unit="float32 elements summed with one atomic each",
                                  held=lambda n: 4 * n, moved=lambda n: 4 * n),
    "ch5_block_sizes": Size(gpu=(64, 128, 256, 512, 1024), simulator=(32, 64), unit="threads per block offered by the widget"),
    "ch5_loads_per_thread": Size(gpu=(1, 2, 4, 8, 16), simulator=(1, 4), unit="independent loads per thread offered by the widget"),
    "ch5_reduce_test_sizes": Size(gpu=(1, 255, 257, 4097, 1_000_003, 10**7), simulator=(1, 31, 33, 1000, 2049),
                                  unit="elements the sum tests use: 1, block - 1, block + 1, non-powers of two, 10**7"),
    "ch5_sum7": Size(gpu=(10**7, 2 * 10**7), simulator=(10**7, 2 * 10**7), unit="copies of 7.0 summed (the book's two runs; host)"),
    "ch5_sum7_curve": Size(gpu=3 * 10**7, simulator=3 * 10**7, unit="largest count of 7.0s in the error curve (host)"),
    "ch5_series": Size(gpu=8192, simulator=8192, unit="terms of the 1/i and 1/i^2 series (the book's N)"),
    "ch5_gpu_sum_accuracy": Size(gpu=10**7, simulator=2000, unit="float32 values the GPU sums in the accuracy table"),
    "ch5_options": Size(gpu=10**8, simulator=2000, unit="paths per price in the throughput comparison (the book's largest run)",
                        held=lambda n: 12 * n, book=10**8, book_where="§5.5, option pricing (its largest run)"),
    "ch5_option_convergence": Size(gpu=(10**3, 10**4, 10**5, 10**6, 10**7, 10**8), simulator=(100, 1000),
                                   unit="paths per estimate in the error plot"),
    "ch5_test_points": Size(gpu=1 << 22, simulator=1500, unit="points or paths of a Monte Carlo test"),
    "ch5_exercise": Size(gpu=(1 << 22) + 37, simulator=1000 + 37, unit="elements of the exercise checks (not a multiple of a block)"),
    "ch5_exercise_paths": Size(gpu=1 << 20, simulator=600, unit="normal draws of the option exercise"),
    # --- Chapter 6: finite differences ---------------------------------------------------------
    # The cube the derivatives are timed and tuned on (notebooks 6.2 and 6.3): 512^3 where it fits, beyond
    # L2 always; sides are multiples of 128, which every tile of the table and the widgets' first choices
    # divide. Held: what 6.2 keeps, f and df of the book's 64^3, of 256^3 and of this cube, and two
    # scratch arrays per direction y and z on this cube; 0.8 of the notebook's memory leaves room for
    # the copy ceiling's arrays.
    "ch6_grid": Size(gpu=Rule(lambda k: 128 * k, preferred=4, memory_share=0.8), simulator=9,
                     unit="points per side of the periodic float32 cube (derivatives)",
                     held=lambda n: 8 * (64**3 + 256**3) + 24 * n**3, moved=lambda n: 8 * n**3, streamed=lambda n: 4 * n**3,
                     book=64, book_where="§6.1, a 64^3 grid"),
    "ch6_book_grid": Size(gpu=64, simulator=12, unit="points per side: the book's 64^3 (tiny in the simulator)",
                          book=64, book_where="§6.1, a 64^3 grid"),
    # The bandwidth table: the book's 64^3, 256^3 (both partly stay in a large L2, on purpose) and the
    # derivative cube, beyond L2. Every cube keeps f and df; the largest also two scratch arrays per direction.
    "ch6_table_grids": Size(gpu=Derived(lambda profile: tuple(sorted({64, 256, choose("ch6_grid", profile).size})), preferred=(64, 256, 512),
                                        label="follows ch6_grid", why="the book's 64^3, 256^3 and the derivative cube ch6_grid"),
                            simulator=(9,),
                            unit="points per side of each cube in the bandwidth table",
                            held=lambda s: sum(8 * n**3 for n in s) + 16 * max(s) ** 3, moved=lambda s: 8 * max(s) ** 3,
                            streamed=lambda s: 4 * max(s) ** 3, book=(64,), book_where="§6.1, a 64^3 grid"),
    "ch6_test_shape": Size(gpu=(72, 80, 96), simulator=(9, 10, 12), unit="(nz, ny, nx) of the derivative tests"),
    "ch6_repeat": Size(gpu=20, simulator=1, unit="timed samples per measurement"),
    "ch6_lpencils_rows": Size(gpu=8, simulator=3, unit="rows of threads of the book's lPencils tile (32 x rows threads)"),
    "ch6_x_tuner": Size(gpu={"threads_x": (32, 64, 128, 256), "pencils": (16, 4, 8), "rows": (4, 1, 2)},
                        simulator={"threads_x": (3, 9), "pencils": (3,), "rows": (3,)},
                        unit="x tile parameters offered by the widget (first values: the starting point)"),
    "ch6_y_tuner": Size(gpu={"rows": (2, 4, 8, 16), "length": (64, 32, 128, 256), "pencils": (32, 4)},
                        simulator={"rows": (3, 9), "length": (9,), "pencils": (9,)},
                        unit="y tile parameters offered by the widget (first values: the starting point)"),
    "ch6_nonuniform_alpha": Size(gpu=0.5, simulator=0.5, unit="stretching parameter alpha (the book does not give its own)"),
    # The book's mesh, so that the residuals can be compared digit by digit with the book's.
    "ch6_laplace": Size(gpu=(4096, 4096), simulator=(14, 22), unit="(ny, nx) mesh of the Laplace solve",
                        held=lambda s: 40 * _area(s), moved=lambda s: 8 * _area(s), book=(4096, 4096), book_where="§6.2, Laplace (4096 x 4096)",
                        note="the book's mesh on every GPU, so that the residuals can be compared with the book's digit by digit"),
    "ch6_laplace_block": Size(gpu=(32, 16), simulator=(8, 8), unit="(x, y) threads per block of the Jacobi kernels"),
    "ch6_laplace_iterations": Size(gpu=(100, 10), simulator=(4, 2), unit="(sweeps, report every)"),
    "ch6_heat": Size(gpu=Rule(square_of_1024, preferred=8), simulator=(11, 13), unit="(ny, nx) mesh of the heat equation",
                     held=lambda s: 8 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 4 * _area(s)),
    "ch6_heat_test": Size(gpu=(1000, 1200), simulator=(11, 13), unit="(ny, nx) mesh of the heat-equation tests"),
    "ch6_laplace_test": Size(gpu=(515, 1027), simulator=(14, 22), unit="(ny, nx) mesh of the Laplace tests"),
    "ch6_heat_block": Size(gpu=(32, 8), simulator=(8, 8), unit="(x, y) threads per block of the global-memory heat step"),
    "ch6_heat_tile": Size(gpu=32, simulator=10, unit="threads per side of a temporal-blocking block (p)"),
    "ch6_exercise_shape": Size(gpu=(40, 48, 36), simulator=(10, 9, 11), unit="(nz, ny, nx) of the exercise checks, no axis a power of two"),
    "ch6_exercise_laplace": Size(gpu=Rule(even_pair, preferred=187), simulator=(10, 34),
                                 unit="(ny, nx) mesh of the Jacobi-sweep exercise (neither a multiple of 32)",
                                 held=lambda s: 8 * _area(s), moved=lambda s: 8 * _area(s), streamed=lambda s: 4 * _area(s)),
    "ch6_exercise_heat": Size(gpu=(500, 700), simulator=(11, 13), unit="(ny, nx) mesh of the two-step heat exercise"),
    # End-to-end runs: as many time steps (sweeps) as fit in the run budget, at most the first choice.
    "ch6_heat_run": Size(gpu=Rule(lambda k: ((4096, 4096), 100 * k), preferred=20, budget_ms=RUN_BUDGET_MS), simulator=((11, 13), 8),
                         unit="((ny, nx), time steps) of the end-to-end run",
                         held=lambda s: 12 * _area(s[0]), moved=lambda s: 8 * _area(s[0]) * s[1]),
    "ch6_laplace_run": Size(gpu=Rule(lambda k: ((4096, 4096), 10 * k, 10), preferred=100, smallest=10, budget_ms=RUN_BUDGET_MS),
                            simulator=((10, 12), 4, 2), unit="((ny, nx), sweeps, sweeps between residual checks) of the end-to-end run",
                            held=lambda s: 16 * _area(s[0]), moved=lambda s: 8 * _area(s[0]) * s[1],
                            book=((4096, 4096), 100, 10), book_where="§6.2, Laplace (100 sweeps, residual every 10)"),
    "ch6_heat_steps": Size(gpu=(1, 2, 3, 4, 5, 6, 7, 8), simulator=(1, 2, 3), unit="time steps per launch (s) to compare"),
    # --- Chapter 7: FFT -----------------------------------------------------------------------
    "ch7_book_points": Size(gpu=16, simulator=16, unit="points of the book's first transform (cos 2x + sin 3x)"),
    "ch7_book_derivative_points": Size(gpu=8, simulator=8, unit="points of the book's spectral derivative"),
    # Input, output and cuFFT's work area of the largest transform; the small ones stay in L2 on
    # purpose (the table says so).
    "ch7_transforms": Size(
        gpu=(("C2C", (1024, 1024), "complex128"), ("C2C", (1024, 1024), "complex64"), ("C2C", (4096, 4096), "complex64"),
             ("R2C", (4096, 4096), "float32"), ("C2R", (4096, 4096), "float32"), ("C2C", (4096, 4096), "complex128"),
             ("R2C", (256, 256, 256), "float32"), ("C2C", (1 << 24,), "complex64")),
        simulator=(("C2C", (16, 16), "complex128"), ("C2C", (16, 16), "complex64"), ("R2C", (16, 16), "float32"),
                   ("C2R", (16, 16), "float32"), ("R2C", (8, 8, 8), "float32")),
        unit="(kind, shape of the real side, dtype) of each transform in the table",
        held=lambda s: 3 * 16 * 4096 * 4096, moved=lambda s: sum(2 * _area(shape) * (16 if dtype == "complex128" else 8) for _, shape, dtype in s),
        book=(("C2C", (1024, 1024), "complex128"),), book_where="§7.4, the Poisson solver's transforms (1024 x 1024, double complex)"),
    # Power-of-two batches of 512 x 512 complex64 planes (input, output and cuFFT's work area), timed
    # against a loop of single-plane transforms: a ratio of times, so no L2 rule, but memory and time.
    "ch7_batched": Size(gpu=Rule(lambda k: (1 << k, 512, 512), preferred=8, memory_share=0.4), simulator=(4, 8, 8),
                        unit="(batch, ny, nx): batched 2D transforms against a loop of single ones",
                        held=lambda s: 3 * 8 * _area(s), moved=lambda s: 16 * _area(s)),
    "ch7_strided": Size(gpu=(4096, 4096), simulator=(16, 12), unit="(ny, nx): 1D transforms down the columns, strided against transposed",
                        held=lambda s: 4 * 8 * _area(s), moved=lambda s: 16 * _area(s)),
    "ch7_plan_shapes": Size(gpu=((1024, 1024), (4096, 4096), (3000, 3000), (4099, 4099)), simulator=((16, 16),),
                            unit="(ny, nx) of the C2C plans whose creation is timed (GPU only)"),
    "ch7_fast_sizes": Size(gpu=(4096, 4095, 4097, 4099, 4100), simulator=(16, 17), unit="1D lengths (x 1024 batches) timed against the fast sizes"),
    "ch7_spectral_grid": Size(gpu=Derived(lambda profile: choose("ch6_grid", profile).size, preferred=512, label="follows ch6_grid",
                                          why="chapter 6's derivative cube, the stencil the spectral derivative is timed against "
                                              "(beyond L2: a 256^3 cube's half spectrum, 64 MiB, is not, on a 50 or 72 MiB L2)"),
                              simulator=12, unit="points per side of the cube for the time per derivative",
                              held=lambda n: 32 * n**3, moved=lambda n: 16 * n**3, streamed=lambda n: 4 * n**3),
    "ch7_convergence_sizes": Size(gpu=(12, 16, 24, 32, 48, 64, 96, 128, 256), simulator=(12, 16, 24, 32),
                                  unit="points per period in the error-against-n study"),
    "ch7_convolution": Size(gpu=((512, 512), 196, 4), simulator=((8, 8), 8, 4), unit="(plane shape, planes, streams)",
                            held=lambda s: 4 * s[2] * 8 * _area(s[0]), moved=lambda s: 2 * 8 * _area(s[0]) * s[1],
                            book=((512, 512), 196, 4), book_where="§7.3, convolution (512 x 512 x 196, 4 streams)"),
    "ch7_timeline_planes": Size(gpu=12, simulator=4, unit="planes drawn on the convolution timelines"),
    "ch7_stream_counts": Size(gpu=(1, 2, 3, 4, 8), simulator=(1, 2), unit="streams of the multi-stream loop in the sweep"),
    # The timed solve: a float32 mesh whose side has no prime factor above 7 (cuFFT's fast lengths) and
    # which, with its half spectrum, stays beyond L2 (8192^2, 256 MiB, on a 50 or 60 MiB L2; 9216^2 on a
    # 72 MiB one); the book's own problem is ch7_poisson_book.
    "ch7_poisson": Size(gpu=Rule(fft_friendly_side, preferred=8, memory_share=0.75), simulator=16,
                        unit="points per side of the timed Poisson solve (float32)",
                        held=lambda n: 6 * 8 * n * n, moved=lambda n: 4 * 8 * n * n, streamed=lambda n: 4 * n * n,
                        book=1024, book_where="§7.4, Poisson (1024 x 1024, double precision)"),
    "ch7_poisson_book": Size(gpu=1024, simulator=32, unit="points per side of the book's problem (the book: 1024, float64)",
                             book=1024, book_where="§7.4, Poisson (1024 x 1024, double precision)"),
    "ch7_poisson_sizes": Size(gpu=(64, 128, 256, 512, 1024, 2048, 4096), simulator=(8, 16), unit="points per side: solve against FFTs"),
    "ch7_poisson_convergence": Size(gpu=(8, 12, 16, 24, 32, 48, 64, 96, 128), simulator=(8, 12, 16), unit="points per side, smooth problem"),
    "ch7_repeat": Size(gpu=20, simulator=1, unit="timed samples per measurement"),
    "ch7_test_shape": Size(gpu=(24, 40, 64), simulator=(3, 5, 16), unit="(nz, ny, nx) of the derivative tests"),
    "ch7_test_mesh": Size(gpu=(96, 160), simulator=(12, 20), unit="(ny, nx) of the Poisson and transform tests"),
    "ch7_exercise_spectrum": Size(gpu=(30, 130), simulator=(5, 18), unit="(rows, n) of the derivative-spectrum exercise"),
    "ch7_exercise_mesh": Size(gpu=(72, 100), simulator=(10, 14), unit="(ny, nx) of the Poisson-division exercise"),
}


def _entry(name: str) -> Size:
    try:
        return SIZES[name]
    except KeyError:
        known = ", ".join(sorted(SIZES))
        raise KeyError(f"no problem size named {name!r}; known sizes: {known}") from None


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2g} GiB" if nbytes >= 2**30 else f"{nbytes / MiB:.0f} MiB"


def memory_for_notebook(profile: DeviceProfile) -> float:
    """Device bytes one notebook may hold at once on `profile`: SAFE_MEMORY_FRACTION of its memory."""
    return SAFE_MEMORY_FRACTION * profile.memory_bytes


@functools.cache
def choose(name: str, profile: DeviceProfile) -> Choice:
    """The GPU size of experiment `name` on `profile`, and the constraint that set it (SizeConflict if none fits)."""
    entry = _entry(name)
    rule = entry.gpu
    if isinstance(rule, Derived):
        size = rule.of(profile)
        return Choice(name, size, rule.preferred, "as chosen for a large GPU" if size == rule.preferred else rule.label, rule.why)
    if not isinstance(rule, Rule):
        return Choice(name, rule, rule, "fixed", "")
    l2_floor = BEYOND_L2 * profile.l2_bytes
    memory_cap = rule.memory_share * memory_for_notebook(profile)
    time_cap = profile.bytes_in_ms(rule.budget_ms)

    def beyond_l2(k: int) -> bool:
        return entry.streamed is None or entry.streamed(rule.size_of(k)) >= l2_floor

    def fits_memory(k: int) -> bool:
        return entry.held is None or entry.held(rule.size_of(k)) <= memory_cap

    def in_budget(k: int) -> bool:
        return entry.moved is None or entry.moved(rule.size_of(k)) <= time_cap

    low = next((k for k in range(rule.smallest, rule.smallest + rule.steps) if beyond_l2(k)), None)
    if low is None:
        raise SizeConflict(f"{profile.name}: no size of {name} reaches {BEYOND_L2} x its {_gib(profile.l2_bytes)} L2")
    preferred = rule.size_of(rule.preferred)
    if rule.preferred >= low and fits_memory(rule.preferred) and in_budget(rule.preferred):
        k, why = rule.preferred, "as chosen for a large GPU"
    elif rule.preferred < low:
        if not (fits_memory(low) and in_budget(low)):
            raise SizeConflict(_conflict(name, entry, rule.size_of(low), profile, rule))
        k, why = low, "beyond L2"
    else:
        k = next((k for k in range(rule.preferred - 1, low - 1, -1) if fits_memory(k) and in_budget(k)), None)
        if k is None:
            raise SizeConflict(_conflict(name, entry, rule.size_of(low), profile, rule))
        why = "fits in memory" if not fits_memory(rule.preferred) else "time budget"
    return Choice(name, rule.size_of(k), preferred, why, _margins(entry, rule.size_of(k), profile, rule))


def _margins(entry: Size, size: Any, profile: DeviceProfile, rule: Rule) -> str:
    parts = []
    if entry.streamed is not None:
        parts.append(f"{entry.streamed(size) / max(profile.l2_bytes, 1):.1f} x the L2")
    if entry.held is not None:
        parts.append(f"holds {_gib(entry.held(size))} of {_gib(rule.memory_share * memory_for_notebook(profile))}")
    if entry.moved is not None:
        parts.append(f"{profile.ms_for_bytes(entry.moved(size)):.2g} ms a {'run' if rule.budget_ms == RUN_BUDGET_MS else 'call'}")
    return ", ".join(parts)


def _conflict(name: str, entry: Size, smallest: Any, profile: DeviceProfile, rule: Rule) -> str:
    return (f"{profile.name}: {name} cannot stay {BEYOND_L2} x beyond the {_gib(profile.l2_bytes)} L2 and fit the memory "
            f"and time budgets; its smallest size beyond L2, {smallest}: {_margins(entry, smallest, profile, rule)}")


def ceiling_copy_bytes(profile: DeviceProfile) -> int:
    """Bytes of each of the two arrays `gpucourse.bandwidth_ceilings` copies on `profile` (the choice gpucourse.timing makes)."""
    from types import SimpleNamespace

    from .timing import _copy_size_bytes

    return _copy_size_bytes(SimpleNamespace(l2_cache_bytes=profile.l2_bytes, total_memory_bytes=profile.memory_bytes))


def _strides_that_fit(profile: DeviceProfile) -> tuple[int, ...]:
    n = choose("ch3_coalescing", profile).size
    for largest in (32, 16, 8, 4):  # the copy ceiling's arrays are given back before the sweeps allocate theirs
        if 12 * (n + 32 + largest * n) <= memory_for_notebook(profile):
            return tuple(range(1, largest + 1))
    raise SizeConflict(f"{profile.name}: the stride sweep over {n} elements does not fit in memory even up to stride 4")


def sizes_for(profile: DeviceProfile) -> dict[str, Any]:
    """Every experiment's GPU size on `profile` (SizeConflict names the first that cannot be chosen)."""
    return {name: choose(name, profile).size for name in SIZES}


def problem_size(name: str, for_mode: str | None = None, profile: DeviceProfile | None = None) -> Any:
    """The size of experiment `name`: in the current mode on the current device, in `for_mode` ('gpu' or 'simulator'), or on `profile`.

    `for_mode='gpu'` answers for the current GPU, or in simulator mode for `profiles.REFERENCE`
    (an H100, the GPU the sizes were first chosen for). `profile=` answers for any GPU profile.
    """
    entry = _entry(name)
    if profile is not None:
        if for_mode not in (None, "gpu"):
            raise ValueError("a profile describes a GPU: leave for_mode out (or 'gpu') when you pass one")
        return choose(name, profile).size
    chosen = for_mode or mode.MODE
    if chosen not in ("gpu", "simulator"):
        raise ValueError(f"for_mode must be 'gpu' or 'simulator'; got {for_mode!r}")
    if chosen == "simulator":
        return entry.simulator
    if not entry.follows_device:  # without asking the device: an MPI rank may ask before it has chosen its GPU
        return entry.gpu
    return choose(name, current_profile() or REFERENCE).size


def explain(*names: str, profile: DeviceProfile | None = None) -> Table:
    """A table of the experiments `names` on this GPU (or `profile`): the size here, what it counts, the book's, and why they differ."""
    if not names:
        raise ValueError("name at least one experiment, e.g. explain('ch3_transpose')")
    profile = profile or current_profile()
    rows = []
    headers = ["experiment", "size here", "what the size counts", "the book's", "why"]
    for name in names:
        entry = _entry(name)
        book = None if entry.book is None else f"{_show(entry.book)} ({entry.book_where.split(',')[0]})"
        if profile is None:
            rows.append([name, _show(entry.simulator), entry.unit, book, "simulator: tiny, to check the code, not to time it"])
            continue
        rows.append([name, _show(choose(name, profile).size), entry.unit, book, reason(name, profile)])
    if profile is None:
        return Table(headers, rows, title="Problem sizes in the simulator")
    notes = [f"beyond L2: each array a bandwidth kernel streams is at least {BEYOND_L2} x the L2 cache; memory: a notebook holds "
             f"at most {SAFE_MEMORY_FRACTION:.0%} of the card; time: a timed call moves at most "
             f"{CALL_BUDGET_MS:g} ms of traffic at the peak bandwidth (a run, {RUN_BUDGET_MS:g} ms). The rules: gpucourse.sizes."]
    return Table(headers, rows, title=f"Problem sizes on {profile.summary()}", notes=notes)


def reason(name: str, profile: DeviceProfile) -> str:
    """Why experiment `name` has its size on `profile`, in words: beyond L2, fits in memory, time budget, or the book's size."""
    entry, choice = _entry(name), choose(name, profile)
    if choice.why == "fixed":
        return entry.note or ("the book's size" if entry.book is not None and choice.size == entry.book else "the same on every GPU")
    if choice.why == "as chosen for a large GPU":
        head = "beyond L2 (as on a large GPU)" if entry.streamed is not None else "as on a large GPU"
    elif choice.why in ("beyond L2", "fits in memory", "time budget"):
        head = f"{choice.why} (the size for a large GPU: {_show(choice.preferred)})"
    else:
        head = choice.why
    return f"{head}: {choice.detail}" if choice.detail else head


def _show(size: Any) -> str:
    """A size in few characters: 2^26, 2^25 + 37, 50 x 2^20, (8192, 8192), 1..32."""
    if isinstance(size, bool) or not isinstance(size, int | tuple):
        return str(size)
    if isinstance(size, int):
        for extra in (0, 37):
            base = size - extra
            if base >= 2**16 and base & (base - 1) == 0:
                return f"2^{base.bit_length() - 1}" + (f" + {extra}" if extra else "")
        if size >= 2**20 and size % 2**20 == 0:
            return f"{size >> 20} x 2^20"
        return f"{size:,}" if size >= 10**6 else str(size)
    if len(size) > 4 and all(isinstance(v, int) for v in size) and list(size) == list(range(size[0], size[0] + len(size))):
        return f"{size[0]}..{size[-1]}"
    if len(size) == 1:
        return _show(size[0])
    return "(" + ", ".join(_show(v) for v in size) + ")"
