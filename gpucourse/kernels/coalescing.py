"""Chapter 3, coalescing: the book's offset and stride kernels (§3.2.2), and a model of the traffic they cause.

Both kernels add one to `n` elements of an array, one element per thread. `offset_increment`
shifts the elements by `offset` (misaligned but contiguous access); `stride_increment` spaces them
`stride` elements apart. A warp's 32 loads are served in 32-byte sectors: `sector_efficiency`
counts the sectors a warp touches, so a notebook can set the measured bandwidth beside what the
bytes alone predict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numba import cuda

from ..arrays import array_module, as_numba
from ..launch import bind, planned
from ..timing import Ceilings
from ..validate import check_device_array, check_float_dtype, launch_1d

# ---------------------------------------------------------------------------------------------
# The kernels. The increment is passed in the array's own dtype: a literal 1 would be an int64,
# and float32 + int64 is computed in float64.


@cuda.jit
def offset_kernel(a, n, offset, one):
    i = cuda.grid(1)
    if i < n:
        a[i + offset] += one  # thread i touches element i + offset: contiguous, shifted


@cuda.jit
def stride_kernel(a, n, stride, one):
    i = cuda.grid(1)
    if i < n:
        a[i * stride] += one  # thread i touches element i * stride: neighbours are `stride` apart


@planned
def offset_increment(a, n: int, offset: int, threads_per_block: int = 256):
    """Add one to a[offset : offset + n] of a float32/float64 device array, one element per thread."""
    check_device_array(a, "a", ndim=1)
    dtype = check_float_dtype(a.dtype, "a.dtype")
    if n < 1 or offset < 0:
        raise ValueError(f"n must be positive and offset non-negative; got n={n}, offset={offset}")
    if offset + n > a.shape[0]:
        raise ValueError(f"a has {a.shape[0]} elements but offset + n = {offset + n}: allocate at least n + largest offset")
    blocks, tpb = launch_1d(n, threads_per_block)
    return bind(offset_kernel, blocks, tpb, a, np.int64(n), np.int64(offset), dtype.type(1))


@planned
def stride_increment(a, n: int, stride: int, threads_per_block: int = 256):
    """Add one to a[0 : n*stride : stride] of a float32/float64 device array, one element per thread."""
    check_device_array(a, "a", ndim=1)
    dtype = check_float_dtype(a.dtype, "a.dtype")
    if n < 1 or stride < 1:
        raise ValueError(f"n and stride must be positive; got n={n}, stride={stride}")
    if (n - 1) * stride + 1 > a.shape[0]:
        raise ValueError(f"a has {a.shape[0]} elements but the last index is {(n - 1) * stride}: allocate n * largest stride")
    blocks, tpb = launch_1d(n, threads_per_block)
    return bind(stride_kernel, blocks, tpb, a, np.int64(n), np.int64(stride), dtype.type(1))


def bytes_moved(n: int, dtype) -> int:
    """Bytes the book counts for one launch: each of the n elements read once and written once."""
    return 2 * n * np.dtype(dtype).itemsize


# ---------------------------------------------------------------------------------------------
# A model of the memory traffic: which 32-byte sectors does one warp touch?


def warp_sectors(offset: int, stride: int, itemsize: int, warp: int = 0, warp_size: int = 32, sector_bytes: int = 32) -> int:
    """Distinct `sector_bytes`-byte sectors touched by warp number `warp` (array start aligned to 256 bytes)."""
    first = warp * warp_size
    addresses = [((first + lane) * stride + offset) * itemsize for lane in range(warp_size)]
    return len({address // sector_bytes for address in addresses})


def sector_efficiency(offset: int, stride: int, itemsize: int, warp_size: int = 32, sector_bytes: int = 32, warps: int = 8) -> float:
    """Bytes a warp asks for over bytes in the sectors it touches, averaged over `warps` warps (1.0 = perfect)."""
    requested = warp_size * itemsize
    touched = [warp_sectors(offset, stride, itemsize, w, warp_size, sector_bytes) * sector_bytes for w in range(warps)]
    return requested / (sum(touched) / len(touched))


def dram_efficiency(stride: int, itemsize: int, sector_bytes: int = 32) -> float:
    """Fraction of each sector read from DRAM that a stride-`stride` sweep uses, when neighbouring warps share sectors."""
    if stride * itemsize <= sector_bytes:
        return 1.0 / stride  # a sector holds several wanted elements, one in every `stride`
    return itemsize / sector_bytes  # every element needs a sector of its own


# ---------------------------------------------------------------------------------------------
# Sweeps with a Tuner, so that a notebook can offer the offset or the stride on a slider.


class CoalescingArrays:
    """One device array per dtype, large enough for every offset and stride of the sweep, zeroed once."""

    def __init__(self, n: int, largest_offset: int, largest_stride: int, dtypes: Sequence[str] = ("float32", "float64")) -> None:
        self.n = n
        length = max(n + largest_offset, n * largest_stride)
        xp = array_module()  # zeros made on the device: no host array of gigabytes to copy over
        self.arrays = {name: as_numba(xp.zeros(length, dtype=name)) for name in dtypes}

    def call(self, kind: str, value: int, dtype: str, threads_per_block: int):
        """A function of no arguments that launches the offset or stride kernel once."""
        a = self.arrays[dtype]
        if kind == "offset":
            return lambda: offset_increment(a, self.n, value, threads_per_block)
        if kind == "stride":
            return lambda: stride_increment(a, self.n, value, threads_per_block)
        raise ValueError(f"kind must be 'offset' or 'stride'; got {kind!r}")


def coalescing_tuner(kind: str, n: int, values: Sequence[int], threads_per_block: int, ceilings: Ceilings | None = None,
                     repeat: int | None = None, dtypes: Sequence[str] = ("float32", "float64")):
    """A Tuner with parameters `kind` ('offset' or 'stride') and 'dtype'; GB/s counts 2 * n * itemsize bytes."""
    from ..widgets import Tuner

    if kind not in ("offset", "stride"):
        raise ValueError(f"kind must be 'offset' or 'stride'; got {kind!r}")
    values = list(values)
    arrays = CoalescingArrays(n, max(values) if kind == "offset" else 0, max(values) if kind == "stride" else 1, dtypes)

    def make_call(dtype: str, **config):
        return arrays.call(kind, config[kind], dtype, threads_per_block)

    def nbytes(dtype: str, **config) -> int:
        return bytes_moved(n, dtype)

    return Tuner(make_call, nbytes, {kind: values, "dtype": list(dtypes)}, name=f"{kind} kernel", ceilings=ceilings, repeat=repeat)


def predicted_fraction(kind: str, value: int, dtype: str) -> float:
    """What the bytes alone predict (as a fraction of the aligned, unit-stride bandwidth) for one point of the sweep."""
    itemsize = np.dtype(dtype).itemsize
    if kind == "offset":
        return 1.0  # neighbouring warps share the split sectors, so DRAM still delivers each byte once
    if kind == "stride":
        return dram_efficiency(value, itemsize)
    raise ValueError(f"kind must be 'offset' or 'stride'; got {kind!r}")


def stride_where_sectors_saturate(itemsize: int, sector_bytes: int = 32) -> int:
    """The stride from which every element of a warp needs a sector of its own."""
    return max(1, math.ceil(sector_bytes / itemsize))
