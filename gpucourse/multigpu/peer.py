"""Peer access and copies between GPUs, and a kernel that reads another GPU's memory.

Two GPUs may be able to read and write each other's memory directly (*peer access*: over NVLink or
a PCIe switch, without the host). `peer_matrix()` asks the driver which pairs can;
`peer_access(a, b, enabled)` switches it on or off for the length of a block. A copy between two
devices works either way (`copy_peer`, `copy_2d`): without peer access the driver stages it through
host memory. A kernel can also read another GPU's memory directly, with no copy at all
(`add_from_peer`): that needs peer access, and there is no staged fallback. `peer_bandwidth` times
one pair's copy: the rate every model of chapter 4 builds on.

In the simulator there is one stand-in device (ordinal 0), no peer access, and copies are NumPy copies.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numba import cuda

from .. import mode, timing
from ..arrays import require_cupy
from ..errors import ArrayArgumentError, PeerAccessError
from ..report import Table
from ..validate import blocks_to_cover, check_device_array, check_threads_per_block
from .gpus import check_ordinal, device_count, device_of, on_device, synchronize_all

#: CUDA runtime error codes that mean "already in the state asked for".
_PEER_ALREADY_ENABLED = 704  # cudaErrorPeerAccessAlreadyEnabled
_PEER_NOT_ENABLED = 705  # cudaErrorPeerAccessNotEnabled

# ---------------------------------------------------------------------------------------------
# Peer access


def can_access_peer(device: int, peer: int) -> bool:
    """True if GPU `device` can map the memory of GPU `peer` (cudaDeviceCanAccessPeer); False for a device and itself."""
    device, peer = check_ordinal(device), check_ordinal(peer)
    if mode.is_simulator() or device == peer:
        return False
    cupy = require_cupy("cudaDeviceCanAccessPeer")
    return bool(cupy.cuda.runtime.deviceCanAccessPeer(device, peer))


def peer_matrix() -> np.ndarray:
    """Boolean matrix: [i, j] is True when GPU i can access GPU j's memory directly (diagonal False)."""
    count = device_count()
    return np.array([[can_access_peer(i, j) for j in range(count)] for i in range(count)], dtype=bool)


def peer_table(matrix: np.ndarray | None = None) -> Table:
    """The peer matrix as the book prints it: 'Y' where peer access is possible, '-' on the diagonal."""
    matrix = peer_matrix() if matrix is None else matrix
    count = len(matrix)
    table = Table(headers=["", *(str(j) for j in range(count))], title="Peer access: can row device access column device?")
    for i in range(count):
        table.rows.append([str(i), *("-" if i == j else ("Y" if matrix[i][j] else "") for j in range(count))])
    return table


def _set_one_way(device: int, peer: int, enabled: bool) -> bool:
    """Enable or disable `device`'s access to `peer`'s memory; return whether it was enabled before."""
    cupy = require_cupy("peer access")
    runtime = cupy.cuda.runtime
    with on_device(device):
        try:
            if enabled:
                runtime.deviceEnablePeerAccess(peer)
                return False
            runtime.deviceDisablePeerAccess(peer)
            return True
        except runtime.CUDARuntimeError as exc:
            if exc.status == _PEER_ALREADY_ENABLED:
                return True
            if exc.status == _PEER_NOT_ENABLED:
                return False
            raise


def set_peer_access(a: int, b: int, enabled: bool) -> tuple[bool, bool]:
    """Switch peer access between GPUs a and b on or off, both ways; return whether each way was on before."""
    a, b = check_ordinal(a), check_ordinal(b)
    if a == b:
        raise PeerAccessError(f"peer access joins two different GPUs; both ordinals are {a}. A GPU always reaches its own memory.")
    if enabled and not (can_access_peer(a, b) and can_access_peer(b, a)):
        raise PeerAccessError(
            f"GPUs {a} and {b} cannot access each other's memory (cudaDeviceCanAccessPeer says no): they share no NVLink or "
            "PCIe switch that allows it. Copy between them without peer access (copy_peer stages through the host), "
            "or pick a pair that peer_matrix() marks 'Y'."
        )
    if mode.is_simulator():  # the simulator has one device, so a != b cannot happen here
        raise PeerAccessError("the simulator has a single device: there is no peer")  # pragma: no cover
    return _set_one_way(a, b, enabled), _set_one_way(b, a, enabled)


@contextlib.contextmanager
def peer_access(a: int, b: int, enabled: bool = True) -> Iterator[None]:
    """Inside the block, peer access between GPUs a and b is on (or off, with enabled=False); afterwards as before."""
    before = set_peer_access(a, b, enabled)
    try:
        yield
    finally:
        restore_peer_access(a, b, before)


def capable_pairs(devices: Sequence[int]) -> list[tuple[int, int]]:
    """The pairs (a < b) of different GPUs among `devices` that allow peer access both ways."""
    gpus = sorted(set(devices))
    return [(a, b) for a in gpus for b in gpus if a < b and can_access_peer(a, b) and can_access_peer(b, a)]


def switch_peer_access(pairs: Sequence[tuple[int, int]], enabled: bool) -> dict[tuple[int, int], tuple[bool, bool]]:
    """Switch peer access on (or off) between each pair; return each pair's state before, for `restore_all_peer_access`."""
    return {(a, b): set_peer_access(a, b, enabled) for a, b in pairs}


def restore_all_peer_access(before: dict[tuple[int, int], tuple[bool, bool]]) -> None:
    """Put peer access back as `switch_peer_access` found it, pair by pair."""
    for (a, b), state in before.items():
        restore_peer_access(a, b, state)


@contextlib.contextmanager
def peer_access_between(devices: Sequence[int], enabled: bool = True) -> Iterator[list[tuple[int, int]]]:
    """Inside the block, peer access is on (or off) between every pair of `devices` that allows it; yields those pairs."""
    pairs = capable_pairs(devices)
    before = switch_peer_access(pairs, enabled)
    try:
        yield pairs
    finally:
        restore_all_peer_access(before)


def restore_peer_access(a: int, b: int, before: tuple[bool, bool]) -> None:
    """Put peer access between GPUs a and b back as `before` (what set_peer_access returned) says it was, each way."""
    for (device, peer), was in zip(((a, b), (b, a)), before):
        _set_one_way(device, peer, was)  # a no-op where it is already so


# ---------------------------------------------------------------------------------------------
# Direct access: a kernel on one GPU that reads another GPU's memory


@functools.cache
def peer_sum_kernel():
    """The kernel (out, local, remote): out[i] = local[i] + remote[i], whichever GPU each array lives on."""
    @cuda.jit
    def add_from_peer(out, local, remote):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = local[i] + remote[i]  # remote[i]: a load that crosses NVLink or PCIe when remote is on a peer

    return add_from_peer


def add_from_peer(out, local, remote, threads_per_block: int = 256) -> None:
    """out <- local + remote by one kernel on out's GPU that reads `remote` where it lives, on another GPU (peer access).

    The kernel is an ordinary one: with unified addressing a pointer says which GPU holds the data,
    and with peer access on, a load from it travels over the link. Access from out's GPU to
    remote's is switched on for the call if it was off, and put back after the kernel has finished.
    """
    for name, array in (("out", out), ("local", local), ("remote", remote)):
        check_device_array(array, name, dtype=np.dtype(out.dtype), ndim=1, shape=tuple(out.shape))
    device, peer = device_of(out), device_of(remote)
    if mode.is_simulator() or device == peer:
        raise PeerAccessError(f"add_from_peer reads `remote` on another GPU than `out`; both are on GPU {device}. Direct access "
                              "needs two GPUs (the simulator has one); on one GPU, add the arrays with an ordinary kernel.")
    if device_of(local) != device:
        raise ArrayArgumentError(f"`local` must live on out's GPU {device}; it is on GPU {device_of(local)}.")
    if not can_access_peer(device, peer):
        raise PeerAccessError(f"GPU {device} cannot access GPU {peer}'s memory (cudaDeviceCanAccessPeer says no), and a kernel "
                              f"has no staged path: copy `remote` to GPU {device} first (copy_to_device).")
    (tpb,) = check_threads_per_block(threads_per_block)
    was_on = _set_one_way(device, peer, True)
    try:
        with on_device(device):
            peer_sum_kernel()[blocks_to_cover(out.shape[0], tpb), tpb](out, local, remote)
        synchronize_all([device])  # before access may be switched off again
    finally:
        if not was_on:
            _set_one_way(device, peer, False)


# ---------------------------------------------------------------------------------------------
# Copies between devices (and, in the simulator, between NumPy arrays)


def _pointer(array) -> int:
    if isinstance(array, np.ndarray):
        return array.ctypes.data
    return int(array.__cuda_array_interface__["data"][0])


def copy_peer(dst, src, stream=None) -> None:
    """Copy the contiguous array `src` into `dst` (same size and dtype), on whichever GPUs they live (cudaMemcpyPeerAsync)."""
    if dst.nbytes != src.nbytes or np.dtype(dst.dtype) != np.dtype(src.dtype):
        raise ArrayArgumentError(f"copy_peer needs arrays of one size and dtype; got {src.nbytes} B of {np.dtype(src.dtype)} "
                                 f"into {dst.nbytes} B of {np.dtype(dst.dtype)}.")
    if mode.is_simulator():
        np.copyto(dst, src)
        return
    for name, array in (("dst", dst), ("src", src)):
        if not array.flags.c_contiguous:
            raise ArrayArgumentError(f"copy_peer copies whole contiguous buffers; {name} is a strided view. Use copy_2d for a block.")
    cupy = require_cupy("peer copies")
    handle = 0 if stream is None else stream.ptr
    cupy.cuda.runtime.memcpyPeerAsync(_pointer(dst), device_of(dst), _pointer(src), device_of(src), src.nbytes, handle)


def _rows_and_pitch(array, name: str) -> tuple[int, int, int]:
    """(rows, bytes per row, pitch in bytes) of a 2D array whose rows are contiguous."""
    if len(array.shape) != 2:
        raise ArrayArgumentError(f"{name} must be 2D; got shape {tuple(array.shape)}.")
    itemsize = np.dtype(array.dtype).itemsize
    rows, cols = array.shape
    row_stride, col_stride = array.strides
    if cols > 1 and col_stride != itemsize:
        raise ArrayArgumentError(f"{name} must have contiguous rows (a block of a C-ordered matrix); its strides are {array.strides}.")
    return rows, cols * itemsize, row_stride if rows > 1 else cols * itemsize


def copy_2d(dst, src, stream=None) -> None:
    """Copy the 2D block `src` into the 2D block `dst` (same shape and dtype; rows contiguous, any pitch), across GPUs or host.

    One cudaMemcpy2DAsync: rows of `width` bytes, `pitch` bytes apart in each array. With unified
    addressing the driver finds out from the addresses where each array lives, so the same call
    copies host to device, device to host, within a GPU or between two GPUs (directly with peer
    access, through the host without it).
    """
    if tuple(dst.shape) != tuple(src.shape) or np.dtype(dst.dtype) != np.dtype(src.dtype):
        raise ArrayArgumentError(f"copy_2d needs blocks of one shape and dtype; got {tuple(src.shape)} {np.dtype(src.dtype)} into "
                                 f"{tuple(dst.shape)} {np.dtype(dst.dtype)}.")
    rows, width, src_pitch = _rows_and_pitch(src, "src")
    _, _, dst_pitch = _rows_and_pitch(dst, "dst")
    if mode.is_simulator() or (isinstance(dst, np.ndarray) and isinstance(src, np.ndarray)):
        np.copyto(dst, src)
        return
    cupy = require_cupy("2D copies")
    runtime = cupy.cuda.runtime
    handle = 0 if stream is None else stream.ptr
    runtime.memcpy2DAsync(_pointer(dst), dst_pitch, _pointer(src), src_pitch, width, rows, runtime.memcpyDefault, handle)


def copy_to_device(array, ordinal: int):
    """A contiguous copy of `array` (host, or any GPU) on GPU `ordinal`; the copy is finished on return (NumPy in the simulator)."""
    ordinal = check_ordinal(ordinal)
    if mode.is_simulator():
        return np.array(array, copy=True)
    cupy = require_cupy("copies between GPUs")
    if isinstance(array, np.ndarray):
        with on_device(ordinal):
            return cupy.asarray(array)
    source_device = device_of(array)
    with on_device(source_device):
        source = cupy.ascontiguousarray(array)
    synchronize_all([source_device])
    with on_device(ordinal):
        target = cupy.empty(source.shape, dtype=source.dtype)
        copy_peer(target, source)
    synchronize_all([ordinal])
    return target


# ---------------------------------------------------------------------------------------------
# Peer bandwidth


@dataclass(frozen=True)
class PeerTransfer:
    """One timed copy between two GPUs: bytes, median time and bandwidth, and how it was made."""

    source: int
    target: int
    nbytes: int
    peer_access: bool
    timing_device: int
    median_ms: float
    verified: bool

    @property
    def gbs(self) -> float:
        """Bandwidth in GB/s (1e9 bytes per second): bytes copied over the median time (each byte counted once)."""
        return timing.effective_bandwidth_gbs(self.nbytes, self.median_ms)

    def __str__(self) -> str:
        how = "peer access on" if self.peer_access else "peer access off (staged through the host)"
        return (f"GPU {self.source} -> GPU {self.target}, {self.nbytes / 2**20:.3g} MiB, {how}: {self.median_ms:.4g} ms, "
                f"{self.gbs:.1f} GB/s (events on GPU {self.timing_device}; result {'checked' if self.verified else 'WRONG'})")


def peer_buffers(source: int, target: int, nbytes: int) -> tuple:
    """(src, dst): float32 buffers of `nbytes` on GPUs `source` (random values) and `target` (NaN), for `peer_bandwidth`."""
    cupy = require_cupy("peer copies")
    count = nbytes // 4
    with on_device(source):
        src = cupy.random.default_rng(count).random(count, dtype=cupy.float32)
    with on_device(target):
        dst = cupy.full(count, cupy.nan, dtype=cupy.float32)
    synchronize_all([source, target])
    return src, dst


def _same_values(dst, src) -> bool:
    """Whether the copy `dst` of `src` (on another GPU) is complete and right: float64 sums and both ends compared."""
    cupy = require_cupy("peer copies")
    sums = []
    for array in (src, dst):
        with on_device(device_of(array)):
            sums.append(float(cupy.sum(array, dtype=cupy.float64)))
    ends = [np.concatenate([cupy.asnumpy(a[:1024]), cupy.asnumpy(a[-1024:])]) for a in (src, dst)]
    return sums[0] == sums[1] and np.array_equal(ends[0], ends[1])


def peer_bandwidth(source: int, target: int, nbytes: int, *, peer: bool = True, timing_device: int | None = None,
                   repeat: int = 20, buffers: tuple | None = None) -> PeerTransfer:
    """Time cudaMemcpyPeerAsync of `nbytes` from GPU `source` to GPU `target`, with peer access on or off; check the copy.

    The copies are timed with CUDA events on `timing_device` (default: the source), queued behind
    the gate of `gpucourse.benchmark`. The target starts as NaN and random values are copied, so
    the check (float64 sums and both ends) sees a copy that is incomplete or wrong.
    `buffers` = (src, dst) from `peer_buffers` to reuse; they must hold at least `nbytes`.
    """
    from ..timing import benchmark

    source, target = check_ordinal(source), check_ordinal(target)
    cupy = require_cupy("peer bandwidth")
    if source == target:
        raise PeerAccessError(f"a peer copy needs two different GPUs; both are {source}.")
    if nbytes < 4 or nbytes % 4:
        raise ValueError(f"nbytes must be a positive multiple of 4 (float32 elements); got {nbytes}")
    timing_device = source if timing_device is None else check_ordinal(timing_device)
    count = nbytes // 4
    src, dst = buffers if buffers is not None else peer_buffers(source, target, nbytes)
    if src.size < count or dst.size < count:
        raise ValueError(f"the buffers hold {min(src.size, dst.size) * 4} bytes; {nbytes} asked for")
    src, dst = src[:count], dst[:count]
    switch = peer_access(source, target, peer) if (peer or can_access_peer(source, target)) else contextlib.nullcontext()
    with switch:
        with on_device(target):
            dst.fill(cupy.nan)
        synchronize_all([target])
        with on_device(timing_device):
            copy_peer(dst, src)
        synchronize_all([source, target, timing_device])
        verified = _same_values(dst, src)
        with on_device(timing_device):
            timing = benchmark(lambda: copy_peer(dst, src), warmup=1, repeat=repeat)
    return PeerTransfer(source, target, count * 4, peer, timing_device, timing.median_ms, verified)


def peer_sweep(source: int, target: int, sizes: Sequence[int], *, peer: bool, repeat: int = 10) -> list[PeerTransfer]:
    """`peer_bandwidth` over transfer sizes (bytes), reusing one pair of buffers of the largest size."""
    buffers = peer_buffers(source, target, max(sizes))
    return [peer_bandwidth(source, target, n, peer=peer, repeat=repeat, buffers=buffers) for n in sizes]


def bandwidth_matrix(nbytes: int, *, peer: bool = True, repeat: int = 10) -> np.ndarray:
    """GB/s of a copy of `nbytes` from each GPU (rows: senders) to each other GPU (columns: receivers); NaN on the diagonal.

    With peer=True, peer access is on for every pair that allows it (as in the book's p2pBandwidth).
    """
    count = device_count()
    result = np.full((count, count), np.nan)
    for i in range(count):
        for j in range(count):
            if i != j:
                allowed = peer and can_access_peer(i, j) and can_access_peer(j, i)
                result[i, j] = peer_bandwidth(i, j, nbytes, peer=allowed, timing_device=j, repeat=repeat).gbs
    return result
