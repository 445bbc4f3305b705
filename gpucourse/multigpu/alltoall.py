"""The all-to-all: every part sends one block to every other part, in an order that keeps every link busy.

P parts live on `devices[p]` (a device may repeat: several parts on one GPU). Part p holds a block
for every part q, `send[p][q]`; afterwards part q holds it in `recv[q][p]`. The order the copies are
queued in decides the rate:

* "queued" (what chapter 4 measured first): each receiver pulls its P - 1 blocks one after another,
  every receiver starting with the lowest-numbered peer. At the first step GPU 0 serves P - 1
  readers while the last GPU sends nothing, and its link sets the pace.
* "rotated": at step k (1 .. P - 1) part p sends to part (p + k) mod P. Each step is a permutation:
  every part sends one block and receives one, so each GPU's link carries one block each way at once.

Who issues a copy: "receiver" (a pull, on the receiver's stream), "sender" (a push, on the sender's
stream) or "per-peer" (a push, a stream for each (sender, receiver) pair, so that the copy engines
see every copy at once). With `graphs=True` each GPU's copies are captured once into one CUDA graph
(its streams forked from and joined to the capture), so that a run costs the host one launch per GPU.

`step_load` counts, step by step, how many blocks the busiest GPU sends or receives; the lockstep
model (`lockstep_gbs`) turns that into the rate into each GPU from ONE pair's copy rate, measured
by `peer.peer_bandwidth` and never by the code under test. In the simulator the copies are NumPy
copies and no rate is measured (nan), but every schedule is checked.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import mode
from ..arrays import poison_value, require_cupy
from ..errors import DecompositionError
from ..graphs import capture
from .gpus import check_ordinal, on_device, synchronize_all, wall_times_ms
from .peer import copy_2d, peer_access_between

SCHEDULES = ("queued", "rotated")  #: the order of the copies (see the module's docstring)
ISSUERS = ("receiver", "sender", "per-peer")  #: which side's stream queues each copy


def steps(parts: int, schedule: str = "rotated") -> list[list[tuple[int, int]]]:
    """The copies (sender, receiver) of an all-to-all over `parts` parts, step by step, in the order `schedule` queues them."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}; got {schedule!r}")
    if parts < 1:
        raise DecompositionError(f"an all-to-all needs at least one part; got {parts}")
    if schedule == "rotated":
        return [[(p, (p + k) % parts) for p in range(parts)] for k in range(1, parts)]
    # queued: receiver r pulls from the others in increasing order; its k-th pull is step k
    return [[(sorted(q for q in range(parts) if q != r)[k], r) for r in range(parts)] for k in range(parts - 1)]


def step_load(parts: int, schedule: str = "rotated") -> list[int]:
    """For each step, the most blocks one part sends or receives in it (1 for every step of the rotated order)."""
    load = []
    for step in steps(parts, schedule):
        sent = np.bincount([s for s, _ in step], minlength=parts)
        received = np.bincount([r for _, r in step], minlength=parts)
        load.append(int(max(sent.max(), received.max())))
    return load


def lockstep_gbs(parts: int, pair_gbs: float, schedule: str = "rotated") -> float:
    """GB/s into each GPU if the steps ran one after another, a GPU serving n blocks at once at 1/n of one pair's rate `pair_gbs`."""
    if parts < 2:
        return float("nan")
    return (parts - 1) / sum(step_load(parts, schedule)) * pair_gbs


def alltoall_ms(parts: int, block_bytes: float, pair_gbs: float, schedule: str = "rotated") -> float:
    """ms the all-to-all of `block_bytes` blocks takes in the lockstep model on one pair's rate `pair_gbs` (GB/s)."""
    if parts < 2:
        return 0.0
    return sum(step_load(parts, schedule)) * block_bytes / (pair_gbs * 1e9) * 1e3


class AllToAll:
    """Copies send[p][q] (on devices[p]) into recv[q][p] (on devices[q]) for every p != q (and p == q with include_self).

    Blocks are 2D views with contiguous rows (any pitch), one shape for each (p, q) pair's two ends;
    `issue()` queues every copy and returns without waiting (the host waits with `synchronize()`).
    """

    def __init__(self, send: Sequence[Sequence], recv: Sequence[Sequence], devices: Sequence[int], *, schedule: str = "rotated",
                 issuer: str = "sender", graphs: bool = False, include_self: bool = True) -> None:
        parts = len(devices)
        if len(send) != parts or len(recv) != parts or any(len(row) != parts for row in (*send, *recv)):
            raise DecompositionError(f"an all-to-all over {parts} parts needs {parts} x {parts} blocks to send and to receive")
        if issuer not in ISSUERS:
            raise ValueError(f"issuer must be one of {ISSUERS}; got {issuer!r}")
        for p in range(parts):
            for q in range(parts):
                a, b = send[p][q], recv[q][p]
                if tuple(a.shape) != tuple(b.shape) or np.dtype(a.dtype) != np.dtype(b.dtype):
                    raise DecompositionError(f"block {p} -> {q}: {tuple(a.shape)} {np.dtype(a.dtype)} sent, "
                                             f"{tuple(b.shape)} {np.dtype(b.dtype)} received")
        self.devices = [check_ordinal(d) for d in devices]
        self.send, self.recv = send, recv
        self.schedule, self.issuer, self.graphs = schedule, issuer, graphs and not mode.is_simulator()
        # each part's own block first (a copy within its GPU), unless only the exchange is wanted (a rate)
        self.order = ([[(p, p) for p in range(parts)]] if include_self else []) + steps(parts, schedule)
        self._streams = self._make_streams()
        self._graph_list: list | None = None

    @property
    def parts(self) -> int:
        """Number of parts."""
        return len(self.devices)

    def _issuing_part(self, sender: int, receiver: int) -> int:
        return receiver if self.issuer == "receiver" else sender

    def _make_streams(self) -> dict:
        """One stream per issuing part (receiver, sender) or per (sender, receiver) pair (per-peer); None in the simulator."""
        if mode.is_simulator():
            return {}
        cupy = require_cupy("all-to-all streams")
        keys = {self._stream_key(s, r) for step in self.order for s, r in step}
        made = {}
        for key in sorted(keys):
            with on_device(self.devices[key[0]]):
                made[key] = cupy.cuda.Stream(non_blocking=True)
        return made

    def _stream_key(self, sender: int, receiver: int) -> tuple[int, int]:
        part = self._issuing_part(sender, receiver)
        return (part, receiver if part == sender else sender) if self.issuer == "per-peer" else (part, part)

    def _copy(self, sender: int, receiver: int, stream) -> None:
        copy_2d(self.recv[receiver][sender], self.send[sender][receiver], stream=stream)

    def _issue_streams(self) -> None:
        for step in self.order:
            for sender, receiver in step:
                key = self._stream_key(sender, receiver)
                with on_device(self.devices[key[0]]):
                    self._copy(sender, receiver, self._streams.get(key))

    def _make_graphs(self) -> list:
        """One CUDA graph per GPU: every copy that GPU's parts issue, on their streams, forked from and joined to the capture."""
        cupy = require_cupy("CUDA graphs")
        made = []
        for device in sorted(set(self.devices)):
            mine = [(s, r) for step in self.order for s, r in step if self.devices[self._issuing_part(s, r)] == device]
            keys = list(dict.fromkeys(self._stream_key(s, r) for s, r in mine))
            with on_device(device):
                sides = {key: cupy.cuda.Stream(non_blocking=True) for key in keys}
                fork = cupy.cuda.Event(disable_timing=True)
                joins = [cupy.cuda.Event(disable_timing=True) for _ in keys]

                def record(mine=mine, sides=sides, fork=fork, joins=joins) -> None:
                    main = cupy.cuda.get_current_stream()
                    fork.record(main)
                    for side in sides.values():
                        side.wait_event(fork)
                    for sender, receiver in mine:
                        self._copy(sender, receiver, sides[self._stream_key(sender, receiver)])
                    for side, join in zip(sides.values(), joins):
                        join.record(side)
                        main.wait_event(join)

                made.append((device, capture(record, f"all-to-all copies issued by GPU {device}"), sides, fork, joins))
        return made

    def issue(self) -> None:
        """Queue the whole all-to-all (streams, or one graph launch per GPU); the host does not wait."""
        if not self.graphs:
            self._issue_streams()
            return
        if self._graph_list is None:
            self._graph_list = self._make_graphs()
        for device, graph, *_ in self._graph_list:
            with on_device(device):
                graph.launch(self._streams[min(k for k in self._streams if self.devices[k[0]] == device)])

    def synchronize(self) -> None:
        """Wait until every GPU of the all-to-all is idle."""
        synchronize_all(self.devices)

    def mismatches(self) -> int:
        """Blocks whose received copy differs from what was sent (after waiting for the copies)."""
        self.synchronize()
        wrong = 0
        for p in range(self.parts):
            for q in range(self.parts):
                if p == q and not any((p, p) in step for step in self.order):
                    continue
                a, b = self.send[p][q], self.recv[q][p]
                host_a = a if isinstance(a, np.ndarray) else a.get()
                host_b = b if isinstance(b, np.ndarray) else b.get()
                wrong += int(not np.array_equal(host_a, host_b))
        return wrong


def _blocks(devices: Sequence[int], nbytes: int) -> tuple[list, list]:
    """float32 send blocks of `nbytes` (random) and receive blocks (NaN), each a (1, n) row on its part's GPU."""
    count = nbytes // 4
    parts = len(devices)
    if mode.is_simulator():
        rng = np.random.default_rng(0)
        send = [[rng.random((1, count), dtype=np.float32) for _ in range(parts)] for _ in range(parts)]
        recv = [[np.full((1, count), np.nan, np.float32) for _ in range(parts)] for _ in range(parts)]
        return send, recv
    cupy = require_cupy("all-to-all buffers")
    send, recv = [], []
    for p, device in enumerate(devices):
        with on_device(device):
            rng = cupy.random.default_rng(p)
            send.append([rng.random((1, count), dtype=np.float32) for _ in range(parts)])
            recv.append([cupy.full((1, count), poison_value(np.float32), np.float32) for _ in range(parts)])
    synchronize_all(devices)
    return send, recv


@dataclass(frozen=True)
class AllToAllRun:
    """One measured all-to-all: where, how, the block size and the wall times of every call (ms)."""

    devices: tuple[int, ...]
    block_bytes: int
    schedule: str
    issuer: str
    graphs: bool
    times_ms: list[float] = field(default_factory=list)
    mismatches: int = 0

    @property
    def gpus(self) -> int:
        """Number of different GPUs the parts lived on."""
        return len(set(self.devices))

    def gbs(self, ms: float | None = None) -> float:
        """GB/s into each part: the P - 1 blocks it receives over the median time (or over `ms`)."""
        if ms is None:
            if not self.times_ms:
                return float("nan")  # nothing timed (the simulator)
            ms = statistics.median(self.times_ms)
        return (len(self.devices) - 1) * self.block_bytes / (ms * 1e-3) / 1e9

    @property
    def how(self) -> str:
        """The schedule and issuer in words."""
        return f"{self.schedule}, {self.issuer}" + (", a CUDA graph per GPU" if self.graphs else ", streams")

    def as_dict(self) -> dict:
        """The run as a plain dict (JSON records)."""
        times = self.times_ms
        return {"devices": list(self.devices), "gpus": self.gpus, "block_bytes": self.block_bytes, "schedule": self.schedule,
                "issuer": self.issuer, "graphs": self.graphs, "min_ms": min(times) if times else None,
                "median_ms": statistics.median(times) if times else None, "max_ms": max(times) if times else None,
                "gbs_into_each": self.gbs() if times else None, "mismatches": self.mismatches}


def alltoall_bandwidth(devices: Sequence[int], nbytes: int, *, schedule: str = "rotated", issuer: str = "sender", graphs: bool = False,
                       repeat: int = 20) -> AllToAllRun:
    """Time `repeat` all-to-alls of `nbytes` blocks over `devices` (wall clock, idle GPUs to the last copy's end); check them first.

    Peer access is on between every pair of different GPUs that allows it. In the simulator the
    copies run and are checked, and no time is taken.
    """
    if nbytes < 4 or nbytes % 4:
        raise ValueError(f"nbytes must be a positive multiple of 4 (float32 elements); got {nbytes}")
    if len(devices) < 2:
        raise DecompositionError(f"an all-to-all needs two or more parts; got devices {list(devices)}")
    send, recv = _blocks(devices, nbytes)
    with peer_access_between(devices):
        exchange = AllToAll(send, recv, devices, schedule=schedule, issuer=issuer, graphs=graphs, include_self=False)
        exchange.issue()
        wrong = exchange.mismatches()
        if mode.is_simulator():
            times: list[float] = []
        else:
            times = wall_times_ms(exchange.issue, devices, repeat=repeat)
    return AllToAllRun(tuple(devices), nbytes, schedule, issuer, graphs and not mode.is_simulator(), times, wrong)


def nccl_alltoall_bandwidth(devices: Sequence[int], nbytes: int, repeat: int = 20) -> AllToAllRun | str:
    """NCCL's own all-to-all in this process (one communicator per GPU, every send and receive in one group), timed as
    `alltoall_bandwidth` times ours; or the reason it cannot run here (a string)."""
    from .mpi.exchange import nccl_status

    ready, why = nccl_status()
    if not ready:
        return why
    if len(set(devices)) != len(devices) or len(devices) < 2:
        return (f"NCCL takes one GPU per rank and two or more of them; devices {list(devices)} "
                + ("put several parts on one GPU" if len(devices) > 1 else "are one"))
    from cupy.cuda import nccl

    cupy = require_cupy("NCCL")
    parts, count = len(devices), nbytes // 4
    comms = nccl.NcclCommunicator.initAll(list(devices))
    send, recv, streams = [], [], []
    for p, device in enumerate(devices):
        with on_device(device):
            send.append(cupy.random.default_rng(p).random((parts, count), dtype=np.float32))
            recv.append(cupy.full((parts, count), poison_value(np.float32), np.float32))
            streams.append(cupy.cuda.Stream(non_blocking=True))
    synchronize_all(devices)

    def issue() -> None:
        nccl.groupStart()
        for p, device in enumerate(devices):
            with on_device(device):
                for q in range(parts):
                    if q != p:
                        comms[p].send(send[p][q].data.ptr, count, nccl.NCCL_FLOAT32, q, streams[p].ptr)
                        comms[p].recv(recv[p][q].data.ptr, count, nccl.NCCL_FLOAT32, q, streams[p].ptr)
        nccl.groupEnd()

    try:
        issue()
        synchronize_all(devices)
        wrong = sum(int(not np.array_equal(recv[q][p].get(), send[p][q].get())) for p in range(parts) for q in range(parts) if p != q)
        times = wall_times_ms(issue, devices, repeat=repeat)
    finally:
        for comm in comms:
            comm.destroy()
    return AllToAllRun(tuple(devices), nbytes, "nccl", "nccl (one group)", False, times, wrong)
