"""Arrays in both modes: CuPy or Numba device arrays on a GPU, NumPy standing in for them in the simulator."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator

import numpy as np

from . import environment, mode
from .errors import EnvironmentProblem, GPUOnlyFeature


def require_cupy(feature: str) -> types.ModuleType:
    """Return the cupy module for `feature`; raise GPUOnlyFeature (simulator) or EnvironmentProblem (not installed)."""
    if mode.is_simulator():
        raise GPUOnlyFeature(feature)
    if not environment.cupy_installed():
        raise EnvironmentProblem(
            f"{feature} needs CuPy, which is not installed. Fix: pip install cupy-cuda12x "
            "(cupy-cuda13x for a CUDA 13 driver), then restart the kernel."
        )
    import cupy

    return cupy


@contextlib.contextmanager
def gpu_only() -> Iterator[None]:
    """In simulator mode, turn a GPUOnlyFeature raised in the block into one printed line and go on."""
    try:
        yield
    except GPUOnlyFeature as exc:
        print(f"Skipped in simulator mode: {exc.feature} needs a CUDA GPU.")


def array_module() -> types.ModuleType:
    """cupy on a GPU, numpy in the simulator: the module for array code that runs in both modes."""
    if mode.is_simulator():
        return np
    return require_cupy("CuPy arrays")


def to_device(host_array: np.ndarray):
    """Copy a host array into a Numba device array (a simulated one in simulator mode)."""
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(host_array))


def device_empty(shape, dtype) -> object:
    """Allocate an uninitialised Numba device array of `shape` and `dtype`."""
    from numba import cuda

    return cuda.device_array(shape, dtype=dtype)


def device_copy(array):
    """A copy of a device array made on the device (no trip through the host); NumPy arrays in the simulator copy too."""
    if hasattr(array, "copy_to_host"):  # Numba (real or simulated)
        from numba import cuda

        copy = cuda.device_array_like(array)
        copy.copy_to_device(array)
        return copy
    return array.copy()  # CuPy and NumPy


def on_host(array) -> bool:
    """True for a NumPy array: data a kernel cannot read until it is copied to the device."""
    return isinstance(array, np.ndarray)


def to_host(array) -> np.ndarray:
    """Copy any course array (Numba, CuPy, simulated or NumPy) back to a NumPy array."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "copy_to_host"):
        return array.copy_to_host()
    if hasattr(array, "get"):
        return array.get()
    return np.asarray(array)


def as_numba(array):
    """View a CuPy array as a Numba device array (no copy, no host wait); others pass through.

    Numba's own conversion waits on the host for the stream the array names (its CUDA array
    interface's "stream"). Here the wait stays on the device instead: when that stream is not the
    legacy default stream Numba launches on, the default stream waits for it through an event.
    """
    if not mode.on_gpu() or hasattr(array, "copy_to_host") or not hasattr(array, "__cuda_array_interface__"):
        return array
    from numba import cuda

    from .launch import STREAMS

    interface = array.__cuda_array_interface__
    producer = interface.get("stream")
    if producer not in (None, 1):  # 1 is the legacy default stream itself
        STREAMS.order(int(producer), 0)
    return cuda.from_cuda_array_interface(interface, owner=array, sync=False)


def random_array(shape, dtype=np.float32, seed: int = 0, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """A host array of uniform random values in [low, high), reproducible from `seed`."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(int(low), int(high), size=shape, dtype=dtype)
    if dtype.kind == "c":
        real = rng.uniform(low, high, size=shape)
        imag = rng.uniform(low, high, size=shape)
        return (real + 1j * imag).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def poison_value(dtype) -> object:
    """The value the course fills unwritten outputs with: NaN for floats, the type's minimum for integers."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    if dtype.kind == "b":
        raise TypeError("boolean outputs cannot be poisoned; use an integer array")
    raise TypeError(f"no poison value for dtype {dtype}")


def poisoned(shape, dtype=np.float32) -> np.ndarray:
    """A host array filled with the poison value, so that elements a kernel never writes stand out."""
    return np.full(shape, poison_value(dtype), dtype=dtype)


def unwritten_mask(array: np.ndarray) -> np.ndarray:
    """Boolean mask of the elements that still hold the poison value."""
    array = np.asarray(array)
    if array.dtype.kind in "fc":
        return np.isnan(array)
    return array == poison_value(array.dtype)
