"""Kernels of the course, one module per chapter or theme; `course_kernels()` and `cuda_c_sources()` list them all.

The two lists are what tools/compile_kernels.py compiles for every GPU class of gpucourse.architectures (tests/test_stack.py
runs it without a GPU): each Numba kernel with a signature it is launched with and the launch shape the course uses for
it (the tuned defaults on a GPU), each CUDA C source with the options CuPy compiles it with and its kernels' block sizes.
A kernel made by a factory (a tile size compiled in) appears once per shape the course launches by default.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from .. import mode as _mode

if _mode.is_simulator():
    # numba-cuda's numba.cuda.random jits its host helpers with nopython=False when the simulator is on, and Numba >= 0.59
    # warns about that keyword (a NumbaDeprecationWarning a learner would see under the first cell that imports the
    # generators). The cause is in numba-cuda; the course imports the module here, once, with only that warning hidden.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The keyword argument 'nopython=False' was supplied", module="numba.core.decorators")
        import numba.cuda.random  # noqa: F401


@dataclass(frozen=True)
class KernelCase:
    """A Numba kernel of the course, a signature it is launched with, and its usual launch shape (threads, bytes)."""

    name: str
    kernel: object
    signature: tuple
    threads_per_block: int
    dynamic_shared_bytes: int = 0


@dataclass(frozen=True)
class CudaCSource:
    """CUDA C that the course compiles with NVRTC: source, options, each kernel's threads per block, and who calls NVRTC.

    `through_cupy`: built by cupy.RawKernel or cupy.RawModule, which add compilation.CUPY_NVRTC_OPTIONS to `options`;
    False for a source built by compilation.nvrtc_kernel with exactly `options`.
    """

    name: str
    code: str
    options: tuple[str, ...]
    entries: dict[str, int] = field(default_factory=dict)
    through_cupy: bool = True

    @property
    def nvrtc_options(self) -> tuple[str, ...]:
        """Every option NVRTC gets for this source."""
        from ..compilation import CUPY_NVRTC_OPTIONS

        return (*self.options, *CUPY_NVRTC_OPTIONS) if self.through_cupy else self.options


def _module_kernels() -> list[tuple[str, object]]:
    """Every kernel (not device function) defined at module level in gpucourse.kernels, as (module.name, object)."""
    import importlib
    import pkgutil

    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for name, value in vars(module).items():
            source = getattr(value, "py_func", None) or getattr(value, "fn", None)
            is_kernel = hasattr(value, "overloads") and not (getattr(value, "targetoptions", {}).get("device") or getattr(value, "_device", False))
            if is_kernel and getattr(source, "__module__", None) == module.__name__:
                found.append((f"{info.name}.{name}", value))
    return found


def course_kernels() -> list[KernelCase]:
    """Every Numba kernel of gpucourse.kernels with a representative signature and the launch shape the course gives it."""
    import numba
    from numba import types as nt
    from numba.cuda.random import xoroshiro128p_dtype

    from . import (
        coalescing,
        execution,
        heat,
        instructions,
        intro,
        laplace,
        memory_spaces,
        metrics,
        montecarlo,
        random_numbers,
        reductions,
        spectral,
        stencil,
        transfers,
        transpose,
        ufuncs,
    )

    f32, f64, i32, i64, u32, u64 = nt.float32, nt.float64, nt.int32, nt.int64, nt.uint32, nt.uint64
    c64 = nt.complex64

    def a(dtype, ndim=1):
        return nt.Array(dtype, ndim, "C")

    state = a(numba.from_dtype(xoroshiro128p_dtype))  # the generators' states
    coef4 = nt.UniTuple(f32, 4)
    heat_args = (a(f32), a(f32), u32, u32, f32, f32)
    cases = []

    def add(name, kernel, signature, threads, shared=0):
        cases.append(KernelCase(name, kernel, tuple(signature), int(threads), int(shared)))

    # chapter 1
    add("intro.increment_one_block_kernel", intro.increment_one_block_kernel, (a(i32), i32), 256)
    add("intro.increment_kernel", intro.increment_kernel, (a(i32), i32), 256)
    add("intro.increment_grid_stride_kernel", intro.increment_grid_stride_kernel, (a(f32), f32), 256)
    add("intro.increment_2d_kernel", intro.increment_2d_kernel, (a(f32, 2), f32), 16 * 16)
    add("intro.increment_2d_column_major_kernel", intro.increment_2d_column_major_kernel, (a(f32, 2), f32), 16 * 16)
    add("intro.axpy_kernel", intro.axpy_kernel, (f32, a(f32), a(f32)), 256)
    add("intro.multiply_add_chain_kernel", intro.multiply_add_chain_kernel, (a(f32), f32, f32, i32), 256)
    add("intro.matmul_naive_kernel", intro.matmul_naive_kernel, (a(f32, 2), a(f32, 2), a(f32, 2)), 16 * 16)
    add("intro.scale_by_literal_kernel", intro.scale_by_literal_kernel, (a(f32),), 256)
    add("intro.scale_by_typed_constant_kernel", intro.scale_by_typed_constant_kernel, (a(f32), f32), 256)
    add("intro.increment_unchecked_kernel", intro.increment_unchecked_kernel, (a(f32), f32), 256)
    # chapter 2
    for name in ("base_kernel", "base_fastmath_kernel"):
        add(f"metrics.{name}", getattr(metrics, name), (a(f32), a(f32)), 256)
    for name in ("math_kernel", "math_fastmath_kernel", "grid_only_kernel"):
        add(f"metrics.{name}", getattr(metrics, name), (a(f32), f32, f32, f32), 256)
    add("metrics.copy_kernel", metrics.copy_kernel, (a(f32), a(f32)), 1024)
    add("metrics.intensity_kernel", metrics.intensity_kernel, (a(f32), a(f32), f32, f32, i32), 256)
    add("metrics.fma_peak_kernel", metrics.fma_peak_kernel, (a(f32), f32, f32, i32), 256)
    add("metrics.pointer_chase_kernel", metrics.pointer_chase_kernel, (a(i32), i32, i32, a(i32)), 1)
    for per_thread in (2, 4, 8):
        add(f"metrics.ilp_copy_kernel({per_thread})", metrics.ilp_copy_kernel(per_thread), (a(f32), a(f32)), 256)
    for per_thread in (1, 4):
        add(f"metrics.copy_variant_kernel({per_thread}, 4)", metrics.copy_variant_kernel(per_thread, 4), (a(f32), a(f32)), 256)
        add(f"metrics.copy_variant_kernel({per_thread}, 16)", metrics.copy_variant_kernel(per_thread, 16), (a(c64), a(c64)), 256)
    # chapter 3
    add("transfers.unit_kernel", transfers.unit_kernel, (a(f32), i64, i32), 256)
    add("coalescing.offset_kernel", coalescing.offset_kernel, (a(f32), i64, i64, f32), 256)
    add("coalescing.stride_kernel", coalescing.stride_kernel, (a(f32), i64, i64, f32), 256)
    add("memory_spaces.strided_read_kernel", memory_spaces.strided_read_kernel, (a(f32), a(f32), i64, f32), 256)
    add("memory_spaces.strided_read_l2_kernel", memory_spaces.strided_read_l2_kernel, (a(f32), a(f32), i64, f32), 256)
    add("memory_spaces.average4_kernel", memory_spaces.average4_kernel, (a(f32, 2), a(f32, 2), f32), 32 * 8)
    add("memory_spaces.average8_kernel", memory_spaces.average8_kernel, (a(f32, 2), a(f32, 2), f32), 32 * 8)
    add("memory_spaces.local_static_kernel", memory_spaces.local_static_kernel, (a(f32), a(f32)), 256)
    add("memory_spaces.local_dynamic_kernel", memory_spaces.local_dynamic_kernel, (a(f32), a(f32), i32, i32), 256)
    add("memory_spaces.local_large_kernel", memory_spaces.local_large_kernel, (a(f32), a(f32), i32), 256)
    add("memory_spaces.register_hungry_kernel", memory_spaces.register_hungry_kernel, (a(f32), a(f32, 2), i32), 128)
    add("memory_spaces.constant_table_kernel", memory_spaces.constant_table_kernel, (a(f32), a(f32), i32, i32), 256)
    add("memory_spaces.global_table_kernel", memory_spaces.global_table_kernel, (a(f32), a(f32), a(f32), i32, i32), 256)
    add("memory_spaces.static_reverse_kernel", memory_spaces.static_reverse_kernel, (a(i32),), 64)
    add("memory_spaces.dynamic_reverse_kernel", memory_spaces.dynamic_reverse_kernel, (a(i32),), 1024, 1024 * 4)
    add("memory_spaces.shared_stride_kernel", memory_spaces.shared_stride_kernel, (a(f32), a(f32), i32, i32), 256)
    add("memory_spaces.tile_row_sums_kernel", memory_spaces.tile_row_sums_kernel, (a(f32), a(f32, 2)), 32)
    add("memory_spaces.tile_row_sums_padded_kernel", memory_spaces.tile_row_sums_padded_kernel, (a(f32), a(f32, 2)), 32)
    tile, block_rows = transpose.BOOK_TILE, transpose.BOOK_BLOCK_ROWS
    book_tiles = transpose._kernels_cached(tile, block_rows, "float32")  # transpose.kernels() without its check against a device
    for variant in transpose.VARIANTS:
        add(f"transpose.kernels({tile}, {block_rows}).{variant}", book_tiles[variant], (a(f32, 2), a(f32, 2)), tile * block_rows)
    add("execution.copy_kernel", execution.copy_kernel, (a(f32), a(f32)), 1024, execution.DEFAULT_DYNAMIC_SHARED_LIMIT)
    for ilp in (2, 4):
        add(f"execution.copy_ilp_kernel({ilp})", execution.copy_ilp_kernel(ilp), (a(f32), a(f32)), 1024)
    for name in ("divide_kernel", "divide_fast_kernel", "sin_cos_separate_kernel", "sin_cos_together_kernel"):
        add(f"instructions.{name}", getattr(instructions, name), (a(f32),) * (3 if "divide" in name or "sin_cos" in name else 2), 256)
    for name in ("sine_chain_kernel", "sine_chain_fast_kernel"):
        add(f"instructions.{name}", getattr(instructions, name), (a(f32), i32, f32, f32), 256)
    for name in ("add_rounded_kernel", "multiply_rounded_kernel"):
        add(f"instructions.{name}", getattr(instructions, name), (a(f32, 2), a(f32), a(f32)), 256)
    add("instructions.interval_sum_kernel", instructions.interval_sum_kernel, (a(f64), a(f64)), 256)
    for name in ("branch_by_thread_kernel", "branch_by_warp_kernel"):
        add(f"instructions.{name}", getattr(instructions, name), (a(f32), i32), 256)
    for name in ("parity_by_thread_kernel", "parity_by_warp_kernel"):
        add(f"instructions.{name}", getattr(instructions, name), (a(i32),), 256)
    for function in instructions.FUNCTIONS:
        for fast in (False, True):
            add(f"instructions.unary_kernel({function!r}, {fast})", instructions.unary_kernel(function, fast), (a(f32), a(f32)), 256)
    add("ufuncs.zero_kernel", ufuncs.zero_kernel, (a(i64),), 1)
    add("ufuncs.block_sum_kernel", ufuncs.block_sum_kernel, (a(f32), a(f32)), 256, 256 * 4)
    # chapter 5
    add("random_numbers.streams_kernel", random_numbers.streams_kernel, (state, a(f64, 2)), 256)
    for in_registers in (True, False):
        add(f"random_numbers.uniform_kernel('float32', {in_registers})", random_numbers.uniform_kernel("float32", in_registers),
            (state, a(f32)), 256)
    for rule in montecarlo.RULES:
        add(f"montecarlo.squared_distance_kernel({rule!r})", montecarlo.squared_distance_kernel(rule), (a(f32), a(f32)), 256)
        add(f"montecarlo.count_inside_kernel({rule!r})", montecarlo.count_inside_kernel(rule), (a(f32), a(i64)), 256)
    add("montecarlo.fused_pi_kernel('float32')", montecarlo.fused_pi_kernel("float32"), (state, i64, a(i64)), 256)
    add("montecarlo.european_fused_kernel('float32')", montecarlo.european_fused_kernel("float32"), (state, i64, *(f32,) * 7, a(f64)), 256)
    add("montecarlo.european_from_normals_kernel()", montecarlo.european_from_normals_kernel(), (a(f64), *(f64,) * 7, a(f64)), 256)
    add("montecarlo.zero_four_kernel", montecarlo.zero_four_kernel, (a(f64),), 32)
    best = reductions.BEST
    for block in reductions.BLOCK_REDUCTIONS:
        shared = 0 if block == "shuffle" else best["threads_per_block"] * 4
        add(f"reductions.partial_sum_kernel({block!r}, 'float32')", reductions.partial_sum_kernel(block, "float32"),
            (a(f32), a(f32)), best["threads_per_block"], shared)
        add(f"reductions.partial_sum_kernel({block!r}, 'float64', atomic)", reductions.partial_sum_kernel(block, "float64", atomic=True),
            (a(f32), a(f64)), best["threads_per_block"], shared)
    add("reductions.partial_sum_kernel(BEST)", reductions.partial_sum_kernel(best["block"], "float32", best["loads_per_thread"], wide=True),
        (a(u64), a(f32), a(f32)), best["threads_per_block"])
    add("reductions.lock_sum_kernel('float32')", reductions.lock_sum_kernel("float32"), (a(f32), a(f32), a(i32)), 1024, 1024 * 4)
    add("reductions.element_atomic_kernel('float32')", reductions.element_atomic_kernel("float32"), (a(f32), a(f32)), 1024)
    add("reductions.zero_first_kernel", reductions.zero_first_kernel, (a(f32), a(i32)), 1)
    # chapter 6: the shapes the package picks for a 512^3 grid (sizes.ch6_grid on a large GPU) and the book's 64^3
    grid = (512, 512, 512)
    add("stencil.deriv_x_global_modulo_kernel", stencil.deriv_x_global_modulo_kernel, (a(f32, 3), a(f32, 3), f32, f32, f32, f32), 32 * 8)
    add("stencil.deriv_x_global_kernel", stencil.deriv_x_global_kernel, (a(f32, 3), a(f32, 3), f32, f32, f32, f32), 32 * 8)
    add("stencil.deriv_x_book_kernel(64, 4)", stencil.deriv_x_book_kernel(64, 4, "float32"), (a(f32, 3), a(f32, 3), coef4), 64 * 4)
    x_tile = stencil.default_x_tile(grid)
    add(f"stencil.deriv_x_kernel({x_tile})", stencil.deriv_x_kernel(grid[2], x_tile.threads_x, x_tile.pencils, x_tile.rows, "float32"),
        (a(f32, 3), a(f32, 3), coef4), x_tile.threads_x * x_tile.rows)
    for direction in ("y", "z"):
        t = stencil.default_axis_tile(grid, direction)
        add(f"stencil.deriv_axis1_kernel({t}, {direction})", stencil.deriv_axis1_kernel(t.length, t.pencils, t.rows, "float32"),
            (a(f32, 3), a(f32, 3), coef4), t.pencils * t.rows)
    add("stencil.deriv_axis1_kernel(lPencils 64)", stencil.deriv_axis1_kernel(64, 32, 8, "float32"), (a(f32, 3), a(f32, 3), coef4), 32 * 8)
    add("stencil.deriv_axis1_registers_kernel", stencil.deriv_axis1_registers_kernel(stencil.default_register_chunk(grid[1]), 32, 4, "float32"),
        (a(f32, 3), a(f32, 3), coef4), 32 * 4)
    add("stencil.swap_last_axes_kernel(32, 8)", stencil.swap_last_axes_kernel(32, 8, "float32"), (a(f32, 3), a(f32, 3)), 32 * 8)
    add("heat.heat_step_global_article_kernel", heat.heat_step_global_article_kernel, (a(f32, 2), a(f32, 2), f32, f32), 32 * 8)
    add("heat.heat_steps_shared_kernel(32, 1)", heat.heat_steps_shared_kernel(32, 1, "float32"), (a(f32, 2), a(f32, 2), f32, f32), 32 * 32)
    (bx, by), rows, shuffles = heat.TUNED_STEP
    add("heat.heat_step_rows_kernel(TUNED_STEP)", heat.heat_step_rows_kernel(rows, "float32", shuffles), heat_args, bx * by)
    add("heat.heat_step_rows_kernel(loads)", heat._heat_step_loads_kernel(rows, "float32"), heat_args, bx * by)
    columns, height, warps = heat.BLOCKED_TILE["gpu"]
    add("heat.heat_steps_registers_kernel(BLOCKED)", heat.heat_steps_registers_kernel(heat.BLOCKED_STEPS, columns, height, "float32"),
        heat_args, 32 * warps)
    add("laplace.jacobi_global_book_kernel", laplace.jacobi_global_book_kernel, (a(f32, 2), a(f32, 2), f32, f32), 32 * 16)
    add("laplace.jacobi_shared_book_kernel(32, 16)", laplace.jacobi_shared_book_kernel(32, 16, "float32"),
        (a(f32, 2), a(f32, 2), f32, f32), 32 * 16)
    (gx, gy), grows = laplace.TUNED["global"]
    add("laplace.jacobi_global_rows_kernel(TUNED)", laplace.jacobi_global_rows_kernel(grows, "float32", laplace.SHUFFLES["global"]),
        heat_args, gx * gy)
    add("laplace.jacobi_global_rows_kernel(loads)", laplace._jacobi_global_loads_kernel(grows, "float32"), heat_args, gx * gy)
    (sx, sy), srows = laplace.TUNED["shared"]
    add("laplace.jacobi_shared_rows_kernel(TUNED)", laplace.jacobi_shared_rows_kernel(sx, sy, srows, "float32"), heat_args, sx * sy)
    block_maxima, record_maximum = laplace.residual_kernels("float32")
    add("laplace.residual_kernels.block_maxima", block_maxima, (a(f32, 2), a(f32, 2), a(f32)), laplace.RESIDUAL_THREADS)
    add("laplace.residual_kernels.record_maximum", record_maximum, (a(f32), a(f32), a(i32)), laplace.RESIDUAL_THREADS)
    # chapter 7
    add("spectral.multiply_spectra_kernel", spectral.multiply_spectra_kernel, (a(c64, 2), a(c64, 2), f32), 32 * 8)
    add("spectral.book_complex_to_real_kernel", spectral.book_complex_to_real_kernel, (a(c64, 2), a(f32, 2), f32), 16 * 16)
    add("spectral.book_real_to_complex_kernel", spectral.book_real_to_complex_kernel("complex64"), (a(f32), a(c64)), 128)
    add("spectral.book_poisson_divide_kernel", spectral.book_poisson_divide_kernel("complex64"), (a(c64, 2), a(f32), a(f32)), 16 * 16)
    add("spectral.derivative_spectrum_simple_kernel", spectral.derivative_spectrum_simple_kernel("complex64"),
        (a(c64, 2), a(c64, 2), f32, f32, i32, i64), 32 * 8)
    add("spectral.derivative_spectrum_kernel(DERIVATIVE_TUNED)", spectral.derivative_spectrum_kernel("complex64"),
        (a(c64), a(c64), u32, u32, f32, f32, i32, i64), spectral.DERIVATIVE_THREADS)
    add("spectral.poisson_spectrum_simple_kernel", spectral.poisson_spectrum_simple_kernel("complex64"),
        (a(c64, 2), a(c64, 2), f32, f32, f32), 32 * 8)
    tx, ty = spectral.TUNED_BLOCK
    add("spectral.poisson_spectrum_kernel(TUNED)", spectral.poisson_spectrum_kernel("complex64"),
        (a(c64), a(c64), u32, u32, f32, f32, f32), tx * ty)
    return cases


def cuda_c_sources() -> list[CudaCSource]:
    """Every CUDA C source the course compiles with NVRTC (through CuPy or not), with its options and block sizes."""
    from .. import launch_costs, timing
    from . import instructions, intro, laplace, memory_spaces, montecarlo

    (_, readonly_rows) = laplace.TUNED["readonly"]
    tuned = {"jacobi_texture_book": 32 * 16, "jacobi_readonly_book": 32 * 16, "jacobi_readonly_rows": 128 * 2,
             "jacobi_readonly_warp": 128 * 2, "jacobi_texture_rows": 32 * 2}
    return [
        CudaCSource("intro.INCREMENT_CUDA_C", intro.INCREMENT_CUDA_C, (), {"increment_c": 256}),
        CudaCSource("memory_spaces.STRIDED_READ_SOURCE", memory_spaces.STRIDED_READ_SOURCE, (),
                    {"strided_read_global": 256, "strided_read_ldg": 256, "strided_read_texture": 256}),
        CudaCSource("memory_spaces.AVERAGE_SOURCE", memory_spaces.AVERAGE_SOURCE, (), {"average_global": 256, "average_texture": 256}),
        CudaCSource("memory_spaces.CONSTANT_SOURCE", memory_spaces.CONSTANT_SOURCE, (), {"constant_table_c": 256}),
        CudaCSource("montecarlo.FMAD_SOURCE (--fmad=true)", montecarlo.FMAD_SOURCE, ("--fmad=true",), {"squared_distance": 256}),
        CudaCSource("montecarlo.FMAD_SOURCE (--fmad=false)", montecarlo.FMAD_SOURCE, ("--fmad=false",), {"squared_distance": 256}),
        CudaCSource("laplace.JACOBI_CUDA_C", laplace.JACOBI_CUDA_C, (f"-DROWS={readonly_rows}", f"-DWARP_COLUMNS={laplace.WARP_COLUMNS}"),
                    tuned),
        CudaCSource("laplace.JACOBI_CUDA_C (texture's rows)", laplace.JACOBI_CUDA_C,
                    (f"-DROWS={laplace.TUNED['texture'][1]}", f"-DWARP_COLUMNS={laplace.WARP_COLUMNS}"), {"jacobi_texture_rows": 32 * 2}),
        CudaCSource("timing.GATE_SOURCE", timing.GATE_SOURCE, (), {"gpucourse_gate": 1}),
        CudaCSource("launch_costs.COPY_CUDA_C", launch_costs.COPY_CUDA_C, (), {"copy": 1024}),
        *(CudaCSource(f"instructions.MULTIPLY_ADD_CHAIN_CUDA_C ({switch})", instructions.MULTIPLY_ADD_CHAIN_CUDA_C, options,
                      {"multiply_add_chain_c": 256}, through_cupy=False)
          for switch, options in instructions.COMPILER_SWITCHES.items()),
        *(CudaCSource(f"instructions.SPECIAL_CHAIN_CUDA_C ({switch})", instructions.SPECIAL_CHAIN_CUDA_C, options,
                      {"special_chain_c": 256}, through_cupy=False)
          for switch, options in instructions.COMPILER_SWITCHES.items() if switch != "--fmad=false"),
    ]
