"""Sending device blocks between ranks: NCCL's grouped sends and receives, and an in-process stand-in to check exchange code.

An *exchange* object has `rank`, `size`, `send(array, peer)`, `recv(array, peer)` and `group()`.
NCCL's point-to-point calls follow two rules: a send completes only when the peer has posted the
matching receive, and calls made between `groupStart()` and `groupEnd()` (here: inside
`with comm.group():`) are issued together, so that every rank can send and receive at once. The
k-th send from rank a to rank b pairs with the k-th receive at b from a, and both must hold the
same number of elements of the same type.

`NcclExchange` does this over NCCL (cupy.cuda.nccl) between the GPUs of MPI ranks. `LoopbackFabric`
plays N ranks in one process on host arrays, with the same rules: it finds a deadlock or a
mismatched pair and says where, so exchange code can be checked without GPUs or MPI.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...errors import CourseError


class ExchangeError(CourseError, RuntimeError):
    """Exchange code that would hang or mismatch under NCCL's rules (the message names the ranks and calls)."""


def all_to_all(comm, send: Sequence, recv: Sequence) -> None:
    """recv[p] <- the block rank p holds for this rank (its send[comm.rank]), for every rank p: one grouped exchange."""
    with comm.group():
        for peer in range(comm.size):
            comm.send(send[peer], peer)
            comm.recv(recv[peer], peer)


# ---------------------------------------------------------------------------------------------
# NCCL


def nccl_status() -> tuple[bool, str]:
    """(True, NCCL version) if CuPy can use NCCL here; (False, the reason) otherwise."""
    from ... import mode

    if mode.is_simulator():
        return False, "NCCL moves GPU memory, and this session runs in simulator mode"
    try:
        from cupy.cuda import nccl
    except Exception as exc:  # CuPy without NCCL support, or the library missing
        return False, f"cupy.cuda.nccl cannot be imported ({type(exc).__name__}: {exc})"
    if not getattr(nccl, "available", False):
        return False, "CuPy finds no NCCL library (install nvidia-nccl-cu12 or -cu13)"
    version = nccl.get_version()
    return True, f"NCCL {version // 10000}.{version // 100 % 100}.{version % 100}"


class NcclExchange:
    """Sends and receives of contiguous device arrays between MPI ranks over NCCL, on one CuPy stream."""

    def __init__(self, mpi_comm, stream=None) -> None:
        import cupy
        from cupy.cuda import nccl

        self._nccl = nccl
        self.rank, self.size = mpi_comm.Get_rank(), mpi_comm.Get_size()
        unique_id = nccl.get_unique_id() if self.rank == 0 else None
        unique_id = mpi_comm.bcast(unique_id, root=0)  # every rank must join with rank 0's id
        self._comm = nccl.NcclCommunicator(self.size, unique_id, self.rank)
        self.stream = stream if stream is not None else cupy.cuda.Stream(non_blocking=True)
        self._types = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.int32): nccl.NCCL_INT32, np.dtype(np.int64): nccl.NCCL_INT64}
        self._to_self: list = []  # a rank's block for itself is copied on the device, not sent through NCCL

    def _check(self, array, peer: int):
        if not 0 <= peer < self.size:
            raise ExchangeError(f"rank {peer} does not exist: there are {self.size} ranks, 0 to {self.size - 1}.")
        if not array.flags.c_contiguous:
            raise ExchangeError("NCCL sends and receives contiguous buffers; pack the block into one first.")
        if np.dtype(array.dtype) not in self._types:
            raise ExchangeError(f"no NCCL type for {np.dtype(array.dtype)}; use one of {sorted(t.name for t in self._types)}.")
        return self._types[np.dtype(array.dtype)]

    def send(self, array, peer: int) -> None:
        """Send the contiguous device array to rank `peer` (queued on this exchange's stream)."""
        kind = self._check(array, peer)
        if peer == self.rank:
            self._to_self.append(array)
            return
        self._comm.send(array.data.ptr, array.size, kind, peer, self.stream.ptr)

    def recv(self, array, peer: int) -> None:
        """Receive into the contiguous device array from rank `peer` (queued on this exchange's stream)."""
        kind = self._check(array, peer)
        if peer == self.rank:
            if not self._to_self:
                raise ExchangeError(f"rank {self.rank} receives from itself before sending to itself: send first.")
            source = self._to_self.pop(0)
            with self.stream:
                array[...] = source.reshape(array.shape)
            return
        self._comm.recv(array.data.ptr, array.size, kind, peer, self.stream.ptr)

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """Inside the block, sends and receives are collected and issued together at its end (ncclGroupStart/End)."""
        self._nccl.groupStart()
        try:
            yield
        finally:
            self._nccl.groupEnd()

    def close(self) -> None:
        """Release the NCCL communicator."""
        self._comm.destroy()


# ---------------------------------------------------------------------------------------------
# An in-process stand-in with NCCL's rules, for checks and tests


@dataclass
class _Call:
    kind: str  # "send" or "recv"
    rank: int
    peer: int
    array: np.ndarray
    done: bool = False

    def describe(self) -> str:
        direction = "to" if self.kind == "send" else "from"
        return f"{self.kind} {direction} rank {self.peer} ({self.array.size} {self.array.dtype})"


@dataclass
class LoopbackEndpoint:
    """One rank of a `LoopbackFabric`: records its calls; nothing moves until the fabric completes."""

    fabric: LoopbackFabric
    rank: int
    _group: list | None = None

    @property
    def size(self) -> int:
        """Number of ranks."""
        return self.fabric.size

    def _record(self, kind: str, array, peer) -> None:
        if not isinstance(peer, (int, np.integer)) or not 0 <= peer < self.size:
            raise ExchangeError(f"rank {self.rank} calls {kind} with peer {peer!r}; ranks are 0 to {self.size - 1}.")
        if not isinstance(array, np.ndarray):
            raise ExchangeError(f"rank {self.rank} calls {kind} with a {type(array).__name__}; pass an array.")
        if not array.flags.c_contiguous:
            raise ExchangeError(f"rank {self.rank} calls {kind} with a strided view of shape {array.shape}: NCCL moves contiguous "
                                "buffers, so pass whole blocks (send[p], recv[p]).")
        call = _Call(kind, self.rank, int(peer), array)
        if self._group is not None:
            self._group.append(call)
        else:  # outside a group a call is a group of its own: it must complete before the rank goes on
            self.fabric.groups[self.rank].append([call])

    def send(self, array, peer: int) -> None:
        """Record a send of `array` to rank `peer`."""
        self._record("send", array, peer)

    def recv(self, array, peer: int) -> None:
        """Record a receive into `array` from rank `peer`."""
        self._record("recv", array, peer)

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """Calls inside the block form one group (nested groups join the outer one, as in NCCL)."""
        if self._group is not None:
            yield
            return
        self._group = []
        try:
            yield
        finally:
            calls, self._group = self._group, None
            if calls:
                self.fabric.groups[self.rank].append(calls)


@dataclass
class LoopbackFabric:
    """`size` ranks in one process: each records sends and receives; `complete()` pairs them as NCCL would and copies."""

    size: int
    groups: list[list[list[_Call]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.groups = [[] for _ in range(self.size)]

    def endpoint(self, rank: int) -> LoopbackEndpoint:
        """The exchange object of rank `rank`."""
        return LoopbackEndpoint(self, rank)

    def _partner(self, call: _Call, current: list[int]) -> _Call | None:
        """The call that pairs with `call`, if the partner rank has posted it in its current group."""
        peer = call.peer
        opposite = "recv" if call.kind == "send" else "send"
        pending = [c for group in self.groups[peer] for c in group if c.kind == opposite and c.peer == call.rank and not c.done]
        if not pending or current[peer] >= len(self.groups[peer]):
            return None
        first = pending[0]
        return first if any(first is c for c in self.groups[peer][current[peer]]) else None

    def complete(self) -> None:
        """Pair every send with its receive and copy the data; ExchangeError on a deadlock or a mismatched pair."""
        current = [0] * self.size
        while True:
            progressed = False
            for rank in range(self.size):
                if current[rank] >= len(self.groups[rank]):
                    continue
                for call in self.groups[rank][current[rank]]:
                    if call.done:
                        continue
                    partner = self._partner(call, current)
                    if partner is None:
                        continue
                    send, recv = (call, partner) if call.kind == "send" else (partner, call)
                    if send.array.size != recv.array.size or send.array.dtype != recv.array.dtype:
                        raise ExchangeError(f"rank {send.rank} sends {send.array.size} {send.array.dtype} to rank {recv.rank}, but the "
                                            f"matching recv of rank {recv.rank} from {send.rank} holds {recv.array.size} "
                                            f"{recv.array.dtype}: the k-th send from a to b pairs with the k-th recv at b from a.")
                    np.copyto(recv.array, send.array.reshape(recv.array.shape))
                    send.done = recv.done = True
                    progressed = True
                while current[rank] < len(self.groups[rank]) and all(c.done for c in self.groups[rank][current[rank]]):
                    current[rank] += 1
                    progressed = True
            if all(current[r] >= len(self.groups[r]) for r in range(self.size)):
                return
            if not progressed:
                raise ExchangeError(self._deadlock(current))

    def _deadlock(self, current: list[int]) -> str:
        waiting = []
        stuck = [r for r in range(self.size) if current[r] < len(self.groups[r])]
        calls = {r: next(c for c in self.groups[r][current[r]] if not c.done) for r in stuck}
        for rank in sorted(range(self.size), key=lambda r: r in calls and calls[r].peer == r):  # waits on another rank first
            if rank in calls:
                call = calls[rank]
                if call.peer == rank:  # a rank waiting on itself: its matching call comes later in its own code
                    other = "receive" if call.kind == "send" else "send"
                    waiting.append(f"rank {rank} waits in its {call.describe().replace(f'rank {rank}', 'itself')}, whose matching "
                                   f"{other} it posts only afterwards")
                else:
                    waiting.append(f"rank {rank} waits in its {call.describe()}")
            else:
                unmatched = [c for group in self.groups[rank] for c in group if not c.done]
                waiting.append(f"rank {rank} has finished" + (f" with {unmatched[0].describe()} unmatched" if unmatched else ""))
        lonely = [c for r in range(self.size) for g in self.groups[r] for c in g if not c.done]
        never = [c for c in lonely if not any(o.rank == c.peer and o.peer == c.rank and o.kind != c.kind and not o.done
                                              for g in self.groups[c.peer] for o in g)]
        if never:
            c = never[0]
            return (f"rank {c.rank} posts a {c.describe()}, and rank {c.peer} never posts the matching "
                    f"{'recv' if c.kind == 'send' else 'send'}: every send needs a receive on the other side. ({'; '.join(waiting)}.)")
        return ("deadlock: " + "; ".join(waiting) + ". A send waits until its partner has posted the matching receive, so ranks "
                "that all send first wait for each other. Put all sends and receives of the exchange inside one "
                "`with comm.group():`, which issues them together.")


def loopback_exchange(exchange, send_blocks: Sequence[np.ndarray], recv_shape: tuple, dtype) -> list[np.ndarray]:
    """Run `exchange(comm, send, recv)` for every rank of a loopback fabric (recv starts poisoned); return each rank's recv."""
    size = len(send_blocks)
    fabric = LoopbackFabric(size)
    received = [np.full((size, *recv_shape), np.nan, dtype=dtype) for _ in range(size)]
    for rank in range(size):
        exchange(fabric.endpoint(rank), send_blocks[rank], received[rank])
    fabric.complete()
    return received
