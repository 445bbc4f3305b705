"""Index arithmetic for the tuned 2D kernels: 32-bit where a thread works out where it is, 64-bit offsets only for addresses.

Numba types `cuda.threadIdx.x` as int32 but computes `blockIdx.x * blockDim.x + threadIdx.x` and
every array index in 64-bit integers (intp), and tests a signed index for a negative value at each
access. On a GPU a 64-bit multiply is several instructions. The tuned kernels of chapters 6 and 7
therefore compute a thread's position in unsigned 32-bit integers (`u32`), turn it once into an
unsigned 64-bit offset into a flat (1D) view of the array (`nonneg`, from `gpucourse.kernels.stencil`),
and then only add row lengths to that offset: a constant column offset such as +1 folds into the
load instruction.

Numba promotes the result of an operation on two uint32 values to uint64, and a mix of uint64 and
a signed integer to float64: `u32` truncates back, and the kernels add or subtract only uint64 values
(`ONE`, a row length) to an offset.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArrayArgumentError, LaunchConfigError
from ..simulation import device_function
from ..validate import blocks_to_cover

#: The offset one element further, as the unsigned 64-bit type that offsets have.
ONE = np.uint64(1)

#: Largest number of elements the 32-bit position arithmetic can address.
MAX_POINTS_32BIT = 2**31 - 1

#: Every lane of a warp takes part in a shuffle.
FULL_MASK = 0xFFFFFFFF
#: Columns a warp writes when its x-neighbours come from shuffles: its 32 lanes hold 30 columns and one more on each side.
WARP_COLUMNS = 30


@device_function
def u32(value):
    """`value` as an unsigned 32-bit integer (a thread's row or column; never negative)."""
    return np.uint32(value)


def check_32bit(shape: tuple[int, ...], what: str = "the mesh") -> None:
    """Refuse arrays whose flat offsets do not fit the 32-bit arithmetic of the tuned kernels."""
    size = int(np.prod(shape))
    if size > MAX_POINTS_32BIT:
        raise ArrayArgumentError(f"{what} has {size} points; the tuned kernels compute positions in 32-bit integers, which "
                                 f"address at most {MAX_POINTS_32BIT}. Split it, or use the book's kernels.")


def flat(array):
    """A C-contiguous array of any kind (NumPy, Numba, CuPy) as a 1D view, no copy."""
    from .stencil import is_c_contiguous

    if not is_c_contiguous(array):
        raise ArrayArgumentError("the tuned kernels read the array as one flat line: pass a C-contiguous array "
                                 "(numpy/cupy.ascontiguousarray), not a strided view")
    return array.reshape(int(np.prod(array.shape)))


def check_rows(rows: int, what: str = "rows per thread (points down a column)") -> int:
    """Points per thread of the tuned kernels (down a column, or `what`): an integer from 1 to 64 (their loops are unrolled)."""
    if not isinstance(rows, (int, np.integer)) or not 1 <= rows <= 64:
        raise LaunchConfigError(f"{what} must be an integer from 1 to 64; got {rows!r}")
    return int(rows)


def column_blocks(nx: int, threads_x: int, shuffles: bool) -> int:
    """Blocks across `nx` columns: a column per thread, or with `shuffles` WARP_COLUMNS a warp (blocks of whole warps)."""
    if not shuffles:
        return blocks_to_cover(nx, threads_x)
    if threads_x % 32:
        raise LaunchConfigError(f"the x-neighbours come from the lanes of a warp (shuffles): use a multiple of 32 threads along x; "
                                f"got {threads_x}, or pass shuffles=False")
    return blocks_to_cover(nx, WARP_COLUMNS * threads_x // 32)
