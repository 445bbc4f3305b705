"""Argument checks for the course's kernel launchers: a clear error that says what to change."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from . import mode
from .device import DeviceInfo, current_device
from .errors import ArrayArgumentError, LaunchConfigError


def _dims(value: int | Sequence[int], what: str) -> tuple[int, ...]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise LaunchConfigError(f"{what} must be an int or a tuple of 1 to 3 ints; got {value!r}.")
    if any(d < 1 for d in dims):
        raise LaunchConfigError(f"{what} must be positive in every dimension; got {value!r}.")
    return tuple(int(d) for d in dims)


def check_threads_per_block(threads_per_block: int | Sequence[int], device: DeviceInfo | None = None) -> tuple[int, ...]:
    """Check a block shape against the device's limits; return it as a tuple."""
    device = device or current_device()
    dims = _dims(threads_per_block, "threads_per_block")
    total = math.prod(dims)
    if total > device.max_threads_per_block:
        raise LaunchConfigError(
            f"threads_per_block={threads_per_block!r} asks for {total} threads per block, over the limit of "
            f"{device.max_threads_per_block} on {device.name}. Use at most {device.max_threads_per_block} "
            f"threads per block (a multiple of the warp size, {device.warp_size}), and more blocks instead."
        )
    for axis, (d, limit) in enumerate(zip(dims, device.max_block_dim)):
        if d > limit:
            raise LaunchConfigError(
                f"threads_per_block={threads_per_block!r}: dimension {'xyz'[axis]} is {d}, over the limit of "
                f"{limit} on {device.name}. Move threads to another dimension."
            )
    return dims


def check_whole_warps(threads_per_block: int, why: str) -> int:
    """Refuse a block size that is not a multiple of the warp size (32), saying `why` the kernel needs whole warps."""
    if threads_per_block % 32:
        raise LaunchConfigError(f"threads_per_block must be a multiple of the warp size (32): {why}; got {threads_per_block}.")
    return threads_per_block


def check_blocks(blocks: int | Sequence[int], device: DeviceInfo | None = None) -> tuple[int, ...]:
    """Check a grid shape (blocks per grid) against the device's limits; return it as a tuple."""
    device = device or current_device()
    dims = _dims(blocks, "blocks")
    for axis, (d, limit) in enumerate(zip(dims, device.max_grid_dim)):
        if d > limit:
            raise LaunchConfigError(
                f"blocks={blocks!r}: dimension {'xyz'[axis]} is {d}, over the grid limit of {limit} on "
                f"{device.name}. Use a grid-stride loop, or put the blocks in dimension x."
            )
    return dims


def check_shared_memory(bytes_per_block: int, device: DeviceInfo | None = None) -> int:
    """Check a block's static shared memory (bytes) against the 48 KiB a kernel gets without opting in."""
    device = device or current_device()
    if bytes_per_block > device.max_shared_per_block:
        raise LaunchConfigError(
            f"the block needs {bytes_per_block} bytes of shared memory, over the {device.max_shared_per_block} "
            f"bytes a kernel may use statically on {device.name}. Use a smaller tile."
        )
    return bytes_per_block


def blocks_to_cover(n: int, threads_per_block: int) -> int:
    """The number of blocks of `threads_per_block` threads needed to give each of `n` items a thread."""
    if n < 0 or threads_per_block < 1:
        raise LaunchConfigError(f"cannot cover n={n} items with blocks of {threads_per_block} threads")
    return max(1, -(-n // threads_per_block))


def launch_1d(n: int, threads_per_block: int) -> tuple[int, int]:
    """The checked (blocks, threads_per_block) of a 1D launch giving each of `n` items a thread."""
    (threads,) = check_threads_per_block(threads_per_block)
    blocks = blocks_to_cover(n, threads)
    check_blocks(blocks)
    return blocks, threads


def launch_2d(shape: tuple[int, int], threads_per_block: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """The checked (blocks, threads) of a 2D launch over `shape` (rows, columns): x across columns, y across rows."""
    tx, ty = check_threads_per_block(threads_per_block)
    rows, cols = shape
    blocks = (blocks_to_cover(cols, tx), blocks_to_cover(rows, ty))
    check_blocks(blocks)
    return blocks, (tx, ty)


def is_device_array(array) -> bool:
    """True for arrays a kernel may take in this mode: device arrays on a GPU; NumPy ones too in the simulator."""
    if hasattr(array, "__cuda_array_interface__"):
        return True
    if mode.is_simulator():
        return isinstance(array, np.ndarray) or type(array).__name__ == "FakeCUDAArray"
    return False


def check_device_array(
    array,
    name: str,
    dtype=None,
    ndim: int | None = None,
    shape: tuple[int, ...] | None = None,
):
    """Check that `array` is a device array of the given dtype, rank and shape; return it."""
    if not hasattr(array, "shape") or not hasattr(array, "dtype"):
        raise ArrayArgumentError(
            f"{name} must be an array; got {type(array).__name__}. Make one with numpy and copy it to the "
            f"device: {name} = cuda.to_device(numpy.asarray(...)) or gpucourse.to_device(...)."
        )
    if not is_device_array(array):
        raise ArrayArgumentError(
            f"{name} is a {type(array).__module__.split('.')[0]} array in host memory; this kernel reads device "
            f"memory. Copy it first: {name}_d = cuda.to_device({name}) (or cupy.asarray({name}))."
        )
    if dtype is not None and np.dtype(array.dtype) != np.dtype(dtype):
        want = np.dtype(dtype).name
        raise ArrayArgumentError(
            f"{name} has dtype {np.dtype(array.dtype).name}, but this kernel is compiled for {want}. "
            f"Create it as {want} (for example host.astype(numpy.{want}) before copying it to the device)."
        )
    if ndim is not None and len(array.shape) != ndim:
        raise ArrayArgumentError(f"{name} must have {ndim} dimension(s); got shape {tuple(array.shape)}.")
    if shape is not None and tuple(array.shape) != tuple(shape):
        raise ArrayArgumentError(f"{name} must have shape {tuple(shape)}; got {tuple(array.shape)}.")
    return array


def check_same_shape(first, second, names: tuple[str, str]) -> None:
    """Check that two arrays have one shape."""
    if tuple(first.shape) != tuple(second.shape):
        raise ArrayArgumentError(
            f"{names[0]} has shape {tuple(first.shape)} but {names[1]} has {tuple(second.shape)}: they must match."
        )


def check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    """Check that `dtype` is float32 or float64, the two precisions the course's kernels compile for."""
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ArrayArgumentError(f"{name} must be float32 or float64; got {dtype.name}.")
    return dtype
