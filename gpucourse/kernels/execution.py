"""Chapter 3 kernels and helpers for the execution configuration (book §3.5, App. D.3).

The book's experiment: a copy kernel, one element per thread, launched with block sizes from 32 to
1024 threads; then the same launches with so much dynamic shared memory reserved that only one
block fits on a multiprocessor (occupancy drops, bandwidth with it); then a copy in which each
thread has ILP loads in flight (instruction-level parallelism), which wins most of it back.
The occupancy arithmetic is `gpucourse.occupancy`; this module adds the kernels, their launchers,
and the tables and widget that set the calculator's answers beside the book's.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from .. import book, mode
from ..arrays import as_numba
from ..device import DeviceInfo, current_device
from ..errors import GPUOnlyFeature, LaunchConfigError
from ..launch import bind, planned
from ..occupancy import Occupancy, SMLimits, book_sm_limits, kernel_occupancy, occupancy, sm_limits
from ..report import Table
from ..validate import blocks_to_cover, check_blocks, check_device_array, check_same_shape, check_threads_per_block

#: The book's block sizes (§3.5.1) and its GPUs for the occupancy tables.
BOOK_BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
BOOK_GPUS = ("Tesla K20", "Tesla C2050")
#: Registers per thread the book's double-precision copy kernel needs on the K20 and C2050 (the
#: calculator with this value reproduces every occupancy the book prints: tests/test_occupancy.py).
BOOK_COPY_REGISTERS = 8
#: The book reserves 90% of a block's shared memory to leave room for one block per SM (§3.5.1.1).
BOOK_SHARED_FRACTION = 0.9
#: Whatever a block may use without opting in: the static limit of every GPU since Fermi.
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024

# ---------------------------------------------------------------------------------------------
# Kernels


@cuda.jit
def copy_kernel(out, inp):
    """One element per thread: a thread has one load in flight."""
    i = cuda.grid(1)
    if i < inp.size:
        out[i] = inp[i]


def _build_copy_ilp(ilp: int):
    ILP = ilp  # compile-time constant: the loops below unroll and `values` lives in registers

    @cuda.jit
    def copy_ilp_kernel(out, inp):
        """ILP elements per thread, a block's elements blockDim.x apart: loads batched before stores."""
        values = cuda.local.array(ILP, inp.dtype)
        n = inp.size
        first = cuda.blockIdx.x * cuda.blockDim.x * ILP + cuda.threadIdx.x
        for j in range(ILP):  # all ILP loads are issued before the first value is used
            values[j] = inp[min(first + j * cuda.blockDim.x, n - 1)]  # clamped: no branch, no wait
        for j in range(ILP):
            i = first + j * cuda.blockDim.x
            if i < n:
                out[i] = values[j]

    return copy_ilp_kernel


@functools.cache
def copy_ilp_kernel(ilp: int):
    """The ILP copy kernel compiled for `ilp` elements per thread (cached per value)."""
    if not isinstance(ilp, (int, np.integer)) or not 1 <= ilp <= 32:
        raise LaunchConfigError(f"ilp must be an int from 1 to 32; got {ilp!r}.")
    return _build_copy_ilp(int(ilp))


# ---------------------------------------------------------------------------------------------
# Dynamic shared memory: a launch may reserve it without the kernel touching it, which is how the
# book lowers occupancy without changing the kernel. Over 48 KiB a kernel must opt in.


def dynamic_shared_limit(device: DeviceInfo | None = None) -> int:
    """The most dynamic shared memory one block may reserve on `device` (bytes), opting in where the GPU allows it."""
    device = device or current_device()
    return device.max_shared_per_block_optin or device.max_shared_per_block or DEFAULT_DYNAMIC_SHARED_LIMIT


def shared_bytes_for_one_block(device: DeviceInfo | None = None) -> int:
    """Dynamic shared memory per block (bytes) that leaves room for one block per SM: the book's 90% of the limit."""
    return int(BOOK_SHARED_FRACTION * dynamic_shared_limit(device))


def check_dynamic_shared(shared_bytes: int, device: DeviceInfo | None = None) -> int:
    """Check a launch's dynamic shared memory (bytes) against what a block may reserve; return it."""
    device = device or current_device()
    if not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
        raise LaunchConfigError(f"shared_bytes must be a non-negative int; got {shared_bytes!r}.")
    limit = dynamic_shared_limit(device)
    if shared_bytes > limit:
        raise LaunchConfigError(
            f"shared_bytes={shared_bytes} is over the {limit} bytes of dynamic shared memory one block may reserve on "
            f"{device.name}. Ask for at most {limit} (shared_bytes_for_one_block() gives the book's 90%)."
        )
    return int(shared_bytes)


def _opt_in_dynamic_shared(kernel, args: tuple, shared_bytes: int) -> None:
    """Let `kernel` (compiled for `args`) reserve `shared_bytes` of dynamic shared memory: needed over 48 KiB."""
    if mode.is_simulator() or shared_bytes <= DEFAULT_DYNAMIC_SHARED_LIMIT:
        return
    from numba.cuda.cudadrv.driver import binding, driver

    compiled = kernel.compile(tuple(kernel.typeof_pyval(a) for a in args))
    function = compiled._codelibrary.get_cufunc()
    attribute = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attribute, int(shared_bytes), function.handle, function.device.id)


# ---------------------------------------------------------------------------------------------
# Launchers


def _check_copy_arrays(out, inp) -> None:
    check_device_array(inp, "inp", ndim=1)
    check_device_array(out, "out", dtype=inp.dtype, ndim=1)
    check_same_shape(out, inp, ("out", "inp"))


@planned
def copy(out, inp, threads_per_block: int = 256, shared_bytes: int = 0):
    """out <- inp (1D device arrays), one element per thread, reserving `shared_bytes` of dynamic shared memory per block."""
    out, inp = as_numba(out), as_numba(inp)
    _check_copy_arrays(out, inp)
    (tpb,) = check_threads_per_block(threads_per_block)
    shared_bytes = check_dynamic_shared(shared_bytes)
    blocks = blocks_to_cover(inp.shape[0], tpb)
    check_blocks(blocks)
    _opt_in_dynamic_shared(copy_kernel, (out, inp), shared_bytes)
    return bind(copy_kernel, blocks, tpb, out, inp, shared_bytes=shared_bytes)


@planned
def copy_ilp(out, inp, threads_per_block: int = 256, ilp: int = 4, shared_bytes: int = 0):
    """out <- inp (1D device arrays), `ilp` elements per thread with their loads in flight together."""
    out, inp = as_numba(out), as_numba(inp)
    _check_copy_arrays(out, inp)
    (tpb,) = check_threads_per_block(threads_per_block)
    shared_bytes = check_dynamic_shared(shared_bytes)
    kernel = copy_ilp_kernel(ilp)
    blocks = blocks_to_cover(inp.shape[0], tpb * ilp)
    check_blocks(blocks)
    _opt_in_dynamic_shared(kernel, (out, inp), shared_bytes)
    return bind(kernel, blocks, tpb, out, inp, shared_bytes=shared_bytes)


def copy_bytes(inp) -> int:
    """Bytes a copy of `inp` reads plus writes."""
    return 2 * int(np.prod(inp.shape)) * np.dtype(inp.dtype).itemsize


# ---------------------------------------------------------------------------------------------
# Occupancy, for this GPU and the book's


def limits_by_name(include_this_gpu: bool = True) -> dict[str, SMLimits]:
    """SM limits to choose from: this GPU (on a GPU) and the book's Tesla K20 and C2050 (always)."""
    choices: dict[str, SMLimits] = {}
    if include_this_gpu and mode.on_gpu():
        limits = sm_limits()
        choices[f"this GPU ({limits.name})"] = limits
    for gpu in BOOK_GPUS:
        choices[f"{gpu} (book)"] = book_sm_limits(gpu)
    return choices


def occupancy_table(threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int, limits: SMLimits) -> Table:
    """Each limit on resident blocks per SM for one launch configuration, and the one that binds."""
    result = occupancy(threads_per_block, registers_per_thread, shared_bytes_per_block, limits)
    table = Table(
        headers=["limit", "blocks per SM it allows", "binds?"],
        title=(f"{limits.name}: {threads_per_block} threads, {registers_per_thread} registers/thread, "
               f"{shared_bytes_per_block} B shared/block"),
        notes=[f"{result.blocks_per_sm} blocks x {result.warps_per_block} warps = {result.active_warps} of "
               f"{result.max_warps_per_sm} warps: occupancy {result.fraction:.3f}, limited by {result.limited_by}."],
    )
    explain = {
        "warps": f"{limits.max_warps_per_sm} warps per SM / {result.warps_per_block} per block",
        "blocks": f"at most {limits.max_blocks_per_sm} blocks per SM",
        "registers": f"{limits.registers_per_sm} registers per SM",
        "shared memory": f"{limits.shared_per_sm} B shared memory per SM",
    }
    for name, blocks in result.limits.items():
        table.rows.append([f"{name} ({explain[name]})", blocks, "yes" if name == result.limited_by else ""])
    return table


def occupancy_widget(limits_choices: dict[str, SMLimits] | None = None):
    """Sliders for threads, registers and shared memory; shows the occupancy on the chosen GPU's limits."""
    import ipywidgets as widgets
    from IPython.display import display

    choices = limits_choices or limits_by_name()
    gpu = widgets.Dropdown(options=list(choices), description="GPU", style={"description_width": "initial"})
    threads = widgets.SelectionSlider(options=list(range(32, 1025, 32)), value=256, description="threads/block",
                                      continuous_update=False, style={"description_width": "initial"})
    registers = widgets.IntSlider(value=32, min=1, max=255, description="registers/thread", continuous_update=False,
                                  style={"description_width": "initial"})
    shared = widgets.IntSlider(value=0, min=0, max=96, step=1, description="shared KiB/block", continuous_update=False,
                               style={"description_width": "initial"})
    output = widgets.Output()

    def redraw(*_):
        with output:
            output.clear_output(wait=True)
            try:
                display(occupancy_table(threads.value, registers.value, 1024 * shared.value, choices[gpu.value]))
            except LaunchConfigError as exc:  # a configuration that cannot run at all: say why, keep the widget
                print(f"Cannot launch: {exc}")

    for control in (gpu, threads, registers, shared):
        control.observe(redraw, names="value")
    redraw()
    return widgets.VBox([gpu, threads, registers, shared, output])


def occupancy_here(kernel, threads_per_block: int, dynamic_shared_bytes: int = 0) -> Occupancy | None:
    """The calculator's occupancy of a compiled kernel on this GPU, or None in the simulator (nothing is compiled there)."""
    try:
        return kernel_occupancy(kernel, threads_per_block, dynamic_shared_bytes)
    except GPUOnlyFeature:
        return None


def book_occupancy(gpu: str, threads_per_block: int, shared_limited: bool = False) -> Occupancy:
    """The calculator's occupancy of the book's copy kernel on `gpu` ('Tesla K20', 'Tesla C2050'), optionally shared-limited."""
    limits = book_sm_limits(gpu)
    shared = int(BOOK_SHARED_FRACTION * limits.shared_per_sm) if shared_limited else 0
    return occupancy(threads_per_block, BOOK_COPY_REGISTERS, shared, limits)


def book_figure_or_none(figure_id: str) -> float | None:
    """A numeric book figure by id, or None where the book prints none."""
    try:
        return book.figure(figure_id).number
    except KeyError:
        return None


def book_block_size_table(gpu: str) -> Table:
    """The book's block-size table for `gpu` (occupancy and GB/s as printed) with the calculator's occupancy beside it."""
    short = gpu.replace("Tesla ", "")
    table = Table(
        headers=["threads/block", "occupancy (book)", "occupancy (calculator)", "GB/s (book)", "limited by"],
        title=f"Double-precision copy on the {gpu}: the book's table (§3.5.1), occupancy recomputed",
        notes=[f"Calculator: gpucourse.occupancy with the {gpu}'s limits from the book's Appendix A and "
               f"{BOOK_COPY_REGISTERS} registers per thread."],
    )
    for threads in BOOK_BLOCK_SIZES:
        result = book_occupancy(gpu, threads)
        table.rows.append([
            threads,
            book_figure_or_none(f"ch3_occ_copy_dp_occupancy_bs{threads}_{short}"),
            round(result.fraction, 3),
            book_figure_or_none(f"ch3_occ_copy_dp_bw_bs{threads}_{short}"),
            result.limited_by,
        ])
    return table
