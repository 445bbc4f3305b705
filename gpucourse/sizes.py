"""Problem sizes for every experiment of the course, by mode, in one table.

On a GPU an experiment runs at the book's size or larger (large enough to fill a current GPU and
to spill out of its L2 cache). In the simulator every CUDA thread is a Python thread (a 64 x 96
shared-memory transpose takes seconds), so sizes there are tiny: they show that the code is right,
not how fast it is. Notebooks and tests ask `problem_size(name)` and never branch on the mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import mode


@dataclass(frozen=True)
class Size:
    """The size of one experiment on a GPU and in the simulator, and what the numbers count."""

    gpu: Any
    simulator: Any
    unit: str


SIZES: dict[str, Size] = {
    # --- Chapter 1: introduction -------------------------------------------------------------
    "increment": Size(gpu=1 << 24, simulator=1000, unit="float32 elements"),
    "increment_2d": Size(gpu=(4096, 4096), simulator=(24, 40), unit="(rows, columns)"),
    "saxpy": Size(gpu=1 << 24, simulator=1000, unit="elements"),
    "sgemm": Size(gpu=4096, simulator=32, unit="matrix order n (n x n)"),
    "threads_per_block": Size(gpu=256, simulator=64, unit="threads per block"),
    "fp_rate": Size(gpu=(1 << 22, 4096), simulator=(256, 8), unit="(elements, multiply-add steps per element)"),
    "fp_rate_check": Size(gpu=(1 << 16, 256), simulator=(256, 8), unit="(elements, steps) checked against NumPy"),
    "exercise_1d": Size(gpu=(1 << 25) + 37, simulator=1000, unit="elements (134 MB of float32 an array on a GPU: beyond any L2 cache)"),
    "exercise_2d": Size(gpu=(6000, 6001), simulator=(21, 37), unit="(rows, columns); 144 MB of float32 on a GPU"),
    # --- Chapter 2: performance measurement and metrics ----------------------------------------
    # The book's limitingFactor uses 8 * 1024**2 floats; on a GPU we take 8x more, so that the two
    # arrays (512 MiB) are ten times an H100's 50 MiB L2 and repeated runs cannot live in it.
    "ch2_limit": Size(gpu=1 << 26, simulator=600, unit="float32 elements"),
    "ch2_threads_per_block": Size(gpu=256, simulator=64, unit="threads per block (the book's blockSize)"),
    "ch2_copy": Size(gpu=1 << 26, simulator=512, unit="float32 elements per array (a multiple of 4)"),
    "ch2_block_sizes": Size(gpu=(32, 64, 128, 256, 512, 1024), simulator=(32, 64, 128), unit="threads per block in a sweep"),
    "ch2_elements_per_thread": Size(gpu=(1, 2, 4, 8), simulator=(1, 4), unit="elements each thread copies"),
    "ch2_tuner_largest_block": Size(gpu=1024, simulator=128, unit="largest threads per block a tuner offers"),
    "ch2_timing": Size(gpu=(1 << 24, 256), simulator=(256, 2), unit="(elements, loop steps of 4 fused multiply-adds)"),
    "ch2_short_kernel": Size(gpu=1 << 15, simulator=64, unit="float32 elements of a kernel shorter than its launch"),
    "ch2_roofline": Size(gpu=(1 << 25, (1, 2, 4, 8, 16, 32, 64, 128)), simulator=(256, (1, 4, 16)),
                         unit="(elements, loop steps: intensity = steps flop/byte in float32)"),
    "ch2_peak_flops": Size(gpu=(1 << 20, 2048), simulator=(128, 2), unit="(threads, loop steps of 16 fused multiply-adds)"),
    "ch2_latency": Size(gpu=(1 << 20, 32, 20000), simulator=(64, 4, 200), unit="(slots, int32 per slot, dependent loads)"),
    "ch2_graph_launches": Size(gpu=100, simulator=2, unit="launches recorded in the graph whose replay is timed"),
    "ch2_test": Size(gpu=1 << 21, simulator=320, unit="float32 elements of the unit tests (a multiple of 4; tests add odd tails)"),
    "ch2_test_steps": Size(gpu=8, simulator=2, unit="loop steps of the compute kernels in the unit tests"),
    "ch2_exercise": Size(gpu=(1 << 25) + 37, simulator=1000 + 37,
                         unit="elements (not a multiple of 4 or of a block; 134 MB of float32 on a GPU, beyond any L2)"),
    # --- Chapter 3: optimization ---------------------------------------------------------------
    # Part A (transfers, coalescing, memory spaces, ufunc-style kernels). On a GPU every array that a
    # kernel streams through is at least 64 MiB, beyond an H100's 50 MiB L2.
    "ch3_threads_per_block": Size(gpu=256, simulator=64, unit="threads per block (the book's blockSize)"),
    "ch3_repeats": Size(gpu=15, simulator=2, unit="timed samples per measurement"),
    "ch3_transfer_sizes": Size(gpu=tuple(4096 * 4**k for k in range(9)), simulator=(4096, 65536, 1 << 20),
                               unit="bytes per host-device copy (4 KiB .. 256 MiB on a GPU)"),
    "ch3_bandwidth_test": Size(gpu=16 * 2**20, simulator=64 * 2**10, unit="bytes (the book's BandwidthTest copies 16 MiB)"),
    "ch3_batching": Size(gpu=(16 * 2**20, 128), simulator=(64 * 2**10, 8), unit="(bytes in all, number of copies)"),
    "ch3_async": Size(gpu=(1 << 26, 4), simulator=(512, 4), unit="(float32 elements, streams); the book: 4M elements, 4 streams"),
    "ch3_stream_counts": Size(gpu=(1, 2, 4, 8, 16), simulator=(1, 4), unit="streams offered by the slider"),
    "ch3_coalescing": Size(gpu=1 << 24, simulator=256, unit="elements each offset/stride launch touches"),
    "ch3_offsets": Size(gpu=tuple(range(33)), simulator=(0, 1, 16), unit="element offsets in the sweep"),
    "ch3_strides": Size(gpu=tuple(range(1, 33)), simulator=(1, 2, 32), unit="element strides in the sweep"),
    "ch3_texture": Size(gpu=1 << 22, simulator=256, unit="elements read with a stride (1D textures span at most 2**27)"),
    "ch3_texture_strides": Size(gpu=(1, 2, 4, 8, 16, 32), simulator=(1, 4), unit="strides of the load-path comparison"),
    "ch3_stencil": Size(gpu=8192, simulator=16, unit="mesh points per side (the book: 2048)"),
    "ch3_local": Size(gpu=1 << 20, simulator=128, unit="elements of the local-memory kernels"),
    "ch3_hungry": Size(gpu=(1 << 20, 4), simulator=(64, 2), unit="(threads, rounds) of the register-hungry kernel"),
    "ch3_constant": Size(gpu=(1 << 22, 64), simulator=(64, 4), unit="(elements, table reads per element)"),
    "ch3_distinct": Size(gpu=(1, 2, 4, 8, 16, 32), simulator=(1, 32), unit="different table words per warp"),
    "ch3_banks": Size(gpu=(1 << 22, 64), simulator=(64, 4), unit="(threads, shared-memory reads per thread)"),
    "ch3_bank_strides": Size(gpu=tuple(range(1, 34)), simulator=(1, 2, 33), unit="strides in 32-bit words"),
    "ch3_tile_rows": Size(gpu=1 << 20, simulator=64, unit="rows of the (rows, 32) float32 input"),
    "ch3_ufunc": Size(gpu=1 << 26, simulator=1000, unit="elements of the element-wise comparisons"),
    "ch3_ufunc_book": Size(gpu=1 << 20, simulator=1000, unit="int32 elements (the book's CUF kernel: 1024 * 1024)"),
    "ch3_ilp_factors": Size(gpu=(1, 2, 4, 8, 16), simulator=(1, 4), unit="elements per thread"),
    "ch3_reduce": Size(gpu=(1 << 26, 1024), simulator=(1000, 2), unit="(float32 elements, blocks of the hand-written sum)"),
    "ch3_test_elements": Size(gpu=(1 << 18) + 7, simulator=253, unit="elements in the tests (not a multiple of a block)"),
    "ch3_test_side": Size(gpu=300, simulator=16, unit="mesh points per side in the tests"),
    "ch3_test_async": Size(gpu=(1 << 24, 4), simulator=(512, 4), unit="(float32 elements, streams) in the tests"),
    "ch3_exercise_2d": Size(gpu=(8192, 4099), simulator=(21, 37), unit="(rows, columns) of exercise 3.1 (134 MB of float32 on a GPU)"),
    "ch3_exercise_tiles": Size(gpu=1 << 19, simulator=64, unit="rows of 64 floats in exercise 3.3 (a multiple of 32)"),
    "ch3_exercise_block_sums": Size(gpu=(1 << 25) + 37, simulator=300 + 37, unit="float32 elements summed block by block in exercise 3.7"),
    "ch3_exercise_async": Size(gpu=(1 << 24, 4), simulator=(256, 4), unit="(float32 elements, streams) of exercise 3.4"),
    # Part B (transpose, execution configuration, instructions). The book transposes 1024 x 1024; on a
    # GPU we take 8192 x 8192 float32 (256 MiB a matrix, five times an H100's L2). In the simulator
    # the sides are not multiples of the 32 x 32 tile, and the grid is not square.
    "ch3_transpose": Size(gpu=(8192, 8192), simulator=(40, 70), unit="(rows, columns) of the float32 matrix"),
    "ch3_timing_samples": Size(gpu=20, simulator=1, unit="timed samples per measurement in notebooks 3.4-3.6"),
    "ch3_transpose_test": Size(gpu=((1030, 1500), (1100, 1100)), simulator=((10, 13), (9, 9)),
                               unit="(rows, columns) pairs tested: a non-square grid of tiles and a square one"),
    "ch3_transpose_test_tile": Size(gpu=(32, 8), simulator=(4, 2), unit="(tile, block_rows) the tests use"),
    "ch3_transpose_tiles": Size(gpu=(8, 16, 32, 64), simulator=(16, 32), unit="tile sides offered by the widget"),
    "ch3_transpose_block_rows": Size(gpu=(1, 2, 4, 8, 16, 32), simulator=(4, 8), unit="block rows offered by the widget"),
    "ch3_copy": Size(gpu=1 << 25, simulator=250, unit="float64 elements per array (the book: 1024 * 1024)"),
    "ch3_copy_test": Size(gpu=(1 << 22) + 3, simulator=253, unit="float64 elements the copy tests use (not a multiple of a block)"),
    "ch3_block_sizes": Size(gpu=(32, 64, 128, 256, 512, 1024), simulator=(32, 64), unit="threads per block (the book's sweep)"),
    "ch3_copy_ilp": Size(gpu=(1, 2, 4, 8, 16), simulator=(1, 4), unit="elements per thread offered by the ILP controls"),
    "ch3_math": Size(gpu=(1 << 22, 64), simulator=(64, 3), unit="(float32 elements, sine evaluations per element)"),
    "ch3_accuracy": Size(gpu=1 << 20, simulator=256, unit="float32 arguments per function"),
    "ch3_divergence": Size(gpu=(1 << 22, 32), simulator=(128, 2), unit="(float32 elements, sin or cos steps per element)"),
    "ch3_rounding": Size(gpu=(1 << 20, 100_000), simulator=(256, 100), unit="(operand pairs, values summed by one thread)"),
    "ch3_exercise_transpose": Size(gpu=(6000, 6001), simulator=(20, 37), unit="(rows, columns), not multiples of 32 (144 MB on a GPU)"),
    "ch3_exercise_ilp": Size(gpu=(1 << 22) + 37, simulator=333, unit="float64 elements (not a multiple of a block)"),
    "ch3_exercise_divergence": Size(gpu=(1 << 22) + 37, simulator=201, unit="float32 elements (not a multiple of 64)"),
    # --- Chapter 4: multi-GPU programming -----------------------------------------------------
    # The book transposes 2048 x 2048 over two GPUs; on a GPU we take 16384 x 16384 float32 (1 GiB a
    # matrix, 512 MiB a slice on each of two GPUs: far beyond any L2). Sides must split over the parts,
    # so the simulator's are multiples of 2 and 4, and not multiples of its 4 x 4 tile.
    "ch4_transpose": Size(gpu=(16384, 16384), simulator=(12, 20), unit="(rows, columns) of the float32 matrix split over the GPUs"),
    "ch4_tile": Size(gpu=(32, 8), simulator=(4, 2), unit="(tile, block_rows) of the transpose kernel (chapter 3's)"),
    "ch4_repeat": Size(gpu=20, simulator=2, unit="timed repeats per measurement"),
    "ch4_alloc": Size(gpu=4 * 1024 * 1024, simulator=1024, unit="float32 elements each device allocates (the book: 4M)"),
    "ch4_p2p_bytes": Size(gpu=16 * 2**20, simulator=64 * 2**10, unit="bytes per peer copy (the book's 16 MiB)"),
    "ch4_p2p_sizes": Size(gpu=tuple(4096 * 4**k for k in range(10)), simulator=(4096, 65536),
                          unit="bytes per peer copy in the sweep (4 KiB .. 1 GiB on a GPU)"),
    "ch4_mpi_transpose": Size(gpu=(16384, 16384), simulator=(8, 12), unit="(rows, columns) of the MPI transpose"),
    "ch4_mpi_ranks": Size(gpu=2, simulator=2, unit="MPI ranks the notebook starts"),
    "ch4_test_slice": Size(gpu=(300, 170), simulator=(5, 7), unit="(rows, columns) per part in the tests (times the parts)"),
    "ch4_exercise_slice": Size(gpu=(96, 80), simulator=(3, 5), unit="(rows, columns) per part in the exercise checks"),
    # --- Chapter 5: Monte Carlo ----------------------------------------------------------------
    # On a GPU every array a generator writes or a sum reads is 1 GiB or more, twenty times an H100's L2.
    "ch5_threads_per_block": Size(gpu=256, simulator=32, unit="threads per block of the chapter's kernels"),
    "ch5_repeat": Size(gpu=15, simulator=1, unit="timed samples per measurement"),
    "ch5_random_numbers": Size(gpu=1 << 28, simulator=2048, unit="numbers each generator writes (float32: 1 GiB on a GPU)"),
    "ch5_state_counts": Size(gpu=(1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20), simulator=(8, 32, 64),
                             unit="xoroshiro128+ states made on the host"),
    "ch5_streams": Size(gpu=(4096, 256), simulator=(256, 16), unit="(numbers per stream, streams) of the independence test"),
    "ch5_pi": Size(gpu=1 << 27, simulator=2000, unit="points per estimate in the throughput comparison (2 x 512 MiB of float32)"),
    "ch5_pi_book": Size(gpu=(10**4, 10**5, 10**6, 10**7, 10**8), simulator=(10**2, 10**3),
                        unit="points of the book's convergence tables"),
    "ch5_pi_convergence": Size(gpu=((10**2, 10**3, 10**4, 10**5, 10**6, 10**7, 10**8, 10**9), 8), simulator=((10, 100, 1000), 2),
                               unit="((points per estimate, ...), seeds per point count)"),
    "ch5_fma": Size(gpu=10**8, simulator=3000, unit="points of the FMA comparison (the book: 10**8, seed 1234567)"),
    "ch5_reduce": Size(gpu=1 << 28, simulator=3000, unit="float32 elements summed (1 GiB on a GPU)"),
    "ch5_reduce_small": Size(gpu=1 << 20, simulator=500, unit="float32 elements of a sum too short to hide its launches"),
    "ch5_graph_sums": Size(gpu=100, simulator=2, unit="sums recorded in the CUDA graph whose replay is timed"),
    "ch5_atomic_contention": Size(gpu=1 << 22, simulator=500, unit="float32 elements summed with one atomic each"),
    "ch5_block_sizes": Size(gpu=(64, 128, 256, 512, 1024), simulator=(32, 64), unit="threads per block offered by the widget"),
    "ch5_loads_per_thread": Size(gpu=(1, 2, 4, 8, 16), simulator=(1, 4), unit="independent loads per thread offered by the widget"),
    "ch5_reduce_test_sizes": Size(gpu=(1, 255, 257, 4097, 1_000_003, 10**7), simulator=(1, 31, 33, 1000, 2049),
                                  unit="elements the sum tests use: 1, block - 1, block + 1, non-powers of two, 10**7"),
    "ch5_sum7": Size(gpu=(10**7, 2 * 10**7), simulator=(10**7, 2 * 10**7), unit="copies of 7.0 summed (the book's two runs; host)"),
    "ch5_sum7_curve": Size(gpu=3 * 10**7, simulator=3 * 10**7, unit="largest count of 7.0s in the error curve (host)"),
    "ch5_series": Size(gpu=8192, simulator=8192, unit="terms of the 1/i and 1/i^2 series (the book's N)"),
    "ch5_gpu_sum_accuracy": Size(gpu=10**7, simulator=2000, unit="float32 values the GPU sums in the accuracy table"),
    "ch5_options": Size(gpu=10**8, simulator=2000, unit="paths per price in the throughput comparison (the book's largest run)"),
    "ch5_option_convergence": Size(gpu=(10**3, 10**4, 10**5, 10**6, 10**7, 10**8), simulator=(100, 1000),
                                   unit="paths per estimate in the error plot"),
    "ch5_test_points": Size(gpu=1 << 22, simulator=1500, unit="points or paths of a Monte Carlo test"),
    "ch5_exercise": Size(gpu=(1 << 22) + 37, simulator=1000 + 37, unit="elements of the exercise checks (not a multiple of a block)"),
    "ch5_exercise_paths": Size(gpu=1 << 20, simulator=600, unit="normal draws of the option exercise"),
    # --- Chapter 6: finite differences ---------------------------------------------------------
    "ch6_grid": Size(gpu=256, simulator=9, unit="points per side of the periodic cube (derivatives)"),
    "ch6_book_grid": Size(gpu=64, simulator=12, unit="points per side: the book's 64^3 (tiny in the simulator)"),
    # 512^3 float32 (512 MiB an array) is ten times an H100's L2; 256^3 (64 MiB) partly stays in it between launches
    "ch6_table_grids": Size(gpu=(64, 256, 512), simulator=(9,), unit="points per side of each cube in the bandwidth table"),
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
    "ch6_laplace": Size(gpu=(4096, 4096), simulator=(14, 22), unit="(ny, nx) mesh of the Laplace solve"),
    "ch6_laplace_block": Size(gpu=(32, 16), simulator=(8, 8), unit="(x, y) threads per block of the Jacobi kernels"),
    "ch6_laplace_iterations": Size(gpu=(100, 10), simulator=(4, 2), unit="(sweeps, report every)"),
    "ch6_heat": Size(gpu=(8192, 8192), simulator=(11, 13), unit="(ny, nx) mesh of the heat equation"),
    "ch6_heat_test": Size(gpu=(1000, 1200), simulator=(11, 13), unit="(ny, nx) mesh of the heat-equation tests"),
    "ch6_laplace_test": Size(gpu=(515, 1027), simulator=(14, 22), unit="(ny, nx) mesh of the Laplace tests"),
    "ch6_heat_block": Size(gpu=(32, 8), simulator=(8, 8), unit="(x, y) threads per block of the global-memory heat step"),
    "ch6_heat_tile": Size(gpu=32, simulator=10, unit="threads per side of a temporal-blocking block (p)"),
    "ch6_exercise_shape": Size(gpu=(40, 48, 36), simulator=(10, 9, 11), unit="(nz, ny, nx) of the exercise checks, no axis a power of two"),
    "ch6_exercise_laplace": Size(gpu=(6000, 6002), simulator=(10, 34), unit="(ny, nx) mesh of the Jacobi-sweep exercise (144 MB on a GPU)"),
    "ch6_exercise_heat": Size(gpu=(500, 700), simulator=(11, 13), unit="(ny, nx) mesh of the two-step heat exercise"),
    "ch6_heat_run": Size(gpu=((4096, 4096), 2000), simulator=((11, 13), 8), unit="((ny, nx), time steps) of the end-to-end run"),
    "ch6_laplace_run": Size(gpu=((4096, 4096), 1000, 10), simulator=((10, 12), 8, 4),
                            unit="((ny, nx), sweeps, sweeps between residual checks) of the end-to-end run"),
    "ch6_heat_steps": Size(gpu=(1, 2, 3, 4, 5, 6, 7, 8), simulator=(1, 2, 3), unit="time steps per launch (s) to compare"),
    # --- Chapter 7: FFT -----------------------------------------------------------------------
    # 4096^2 float32 is 64 MiB a mesh and 64 MiB a half spectrum, beyond an H100's 50 MiB L2.
    "ch7_book_points": Size(gpu=16, simulator=16, unit="points of the book's first transform (cos 2x + sin 3x)"),
    "ch7_book_derivative_points": Size(gpu=8, simulator=8, unit="points of the book's spectral derivative"),
    "ch7_transforms": Size(
        gpu=(("C2C", (1024, 1024), "complex128"), ("C2C", (1024, 1024), "complex64"), ("C2C", (4096, 4096), "complex64"),
             ("R2C", (4096, 4096), "float32"), ("C2R", (4096, 4096), "float32"), ("C2C", (4096, 4096), "complex128"),
             ("R2C", (256, 256, 256), "float32"), ("C2C", (1 << 24,), "complex64")),
        simulator=(("C2C", (16, 16), "complex128"), ("C2C", (16, 16), "complex64"), ("R2C", (16, 16), "float32"),
                   ("C2R", (16, 16), "float32"), ("R2C", (8, 8, 8), "float32")),
        unit="(kind, shape of the real side, dtype) of each transform in the table"),
    "ch7_batched": Size(gpu=(256, 512, 512), simulator=(4, 8, 8), unit="(batch, ny, nx): batched 2D transforms against a loop of single ones"),
    "ch7_strided": Size(gpu=(4096, 4096), simulator=(16, 12), unit="(ny, nx): 1D transforms down the columns, strided against transposed"),
    "ch7_plan_shapes": Size(gpu=((1024, 1024), (4096, 4096), (3000, 3000), (4099, 4099)), simulator=((16, 16),),
                            unit="(ny, nx) of the C2C plans whose creation is timed (GPU only)"),
    "ch7_fast_sizes": Size(gpu=(4096, 4095, 4097, 4099, 4100), simulator=(16, 17), unit="1D lengths (x 1024 batches) timed against the fast sizes"),
    "ch7_spectral_grid": Size(gpu=256, simulator=12, unit="points per side of the cube for the time per derivative"),
    "ch7_convergence_sizes": Size(gpu=(12, 16, 24, 32, 48, 64, 96, 128, 256), simulator=(12, 16, 24, 32),
                                  unit="points per period in the error-against-n study"),
    "ch7_convolution": Size(gpu=((512, 512), 196, 4), simulator=((8, 8), 8, 4),
                            unit="(plane shape, planes, streams); the book: 512 x 512 x 196, 4 streams"),
    "ch7_timeline_planes": Size(gpu=12, simulator=4, unit="planes drawn on the convolution timelines"),
    "ch7_stream_counts": Size(gpu=(1, 2, 3, 4, 8), simulator=(1, 2), unit="streams of the multi-stream loop in the sweep"),
    "ch7_poisson": Size(gpu=4096, simulator=16, unit="points per side of the timed Poisson solve (float32)"),
    "ch7_poisson_book": Size(gpu=1024, simulator=32, unit="points per side of the book's problem (the book: 1024, float64)"),
    "ch7_poisson_sizes": Size(gpu=(64, 128, 256, 512, 1024, 2048, 4096), simulator=(8, 16), unit="points per side: solve against FFTs"),
    "ch7_poisson_convergence": Size(gpu=(8, 12, 16, 24, 32, 48, 64, 96, 128), simulator=(8, 12, 16), unit="points per side, smooth problem"),
    "ch7_repeat": Size(gpu=20, simulator=1, unit="timed samples per measurement"),
    "ch7_test_shape": Size(gpu=(24, 40, 64), simulator=(3, 5, 16), unit="(nz, ny, nx) of the derivative tests"),
    "ch7_test_mesh": Size(gpu=(96, 160), simulator=(12, 20), unit="(ny, nx) of the Poisson and transform tests"),
    "ch7_exercise_spectrum": Size(gpu=(30, 130), simulator=(5, 18), unit="(rows, n) of the derivative-spectrum exercise"),
    "ch7_exercise_mesh": Size(gpu=(72, 100), simulator=(10, 14), unit="(ny, nx) of the Poisson-division exercise"),
}


def problem_size(name: str, for_mode: str | None = None) -> Any:
    """The size of experiment `name` in the current mode (or in `for_mode`, 'gpu' or 'simulator')."""
    try:
        entry = SIZES[name]
    except KeyError:
        known = ", ".join(sorted(SIZES))
        raise KeyError(f"no problem size named {name!r}; known sizes: {known}") from None
    chosen = for_mode or mode.MODE
    if chosen not in ("gpu", "simulator"):
        raise ValueError(f"for_mode must be 'gpu' or 'simulator'; got {for_mode!r}")
    return entry.gpu if chosen == "gpu" else entry.simulator
