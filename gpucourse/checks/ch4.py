"""Checks for the chapter 4 exercises (solutions/ch04_multi_gpu.ipynb).

The exercises are about who does what on which device, so the checks run the student's code where
it matters and compare with the package's own answer: device assignment on random host lists, a
stage schedule that then drives a real distributed transpose, an all-to-all on a stand-in for NCCL
with NCCL's rules. The same verdict comes on a GPU and in the simulator.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import distributed as D
from ..mpi import ranks
from ..mpi.exchange import ExchangeError, loopback_exchange
from ..sizes import problem_size
from . import CheckFailed, fail, passed

_SEED = np.random.SeedSequence()  # fresh data for every session; the cases that expose each mistake are always included


def _host_lists() -> list[tuple[list[str], int]]:
    """Interleaved host lists (where world rank and node-local rank differ) and random ones, with GPUs per host."""
    cases = [(["c0-7", "c0-2", "c0-7", "c0-3", "c0-7"], 4), (["c0-7", "c0-2", "c0-7", "c0-3", "c0-7", "c0-7"], 2),
             (["b", "a", "b", "a", "b", "a"], 3), (["a", "b"], 1)]
    rng = np.random.default_rng(_SEED.spawn(1)[0])
    for _ in range(4):
        hosts = [f"node{int(h)}" for h in rng.integers(0, int(rng.integers(2, 5)), size=int(rng.integers(5, 13)))]
        cases.append((hosts, int(rng.integers(1, 5))))
    return cases


def check_assign_devices(assign_devices: Callable[[list[str], int], object]) -> None:
    """Exercise 4.1: `assign_devices(hostnames, gpus_per_host)` returns each rank's device (node-local rank, wrapped)."""
    problems: list[str] = []
    for hosts, gpus in _host_lists():
        want = ranks.assign_devices(hosts, gpus)
        call = f"assign_devices({hosts}, {gpus})"
        try:
            got = [int(d) for d in assign_devices(list(hosts), gpus)]
        except Exception as exc:  # any exception is a wrong answer, reported in words
            problems.append(f"{call} raised {type(exc).__name__}: {exc}")
            break
        if got == want:
            continue
        if len(got) != len(hosts):
            problems.append(f"{call} returned {len(got)} devices; one per rank ({len(hosts)}) is expected, in rank order.")
        elif any(d >= gpus or d < 0 for d in got):
            bad = next(d for d in got if d >= gpus or d < 0)
            problems.append(f"{call} gives device {bad}, but each host has GPUs 0 to {gpus - 1}: when a host runs more ranks than "
                            "GPUs, wrap the node-local rank with % gpus_per_host (ranks then share a GPU).")
        elif got == [r % gpus for r in range(len(hosts))]:
            problems.append(f"{call} returned {got}, the world rank modulo the GPUs. Ranks of one host are not numbered 0, 1, ... "
                            f"when hosts interleave: number each rank among the ranks of its own host (expected {want}).")
        elif got == [ranks.device_for(local + 1, gpus) for local in ranks.node_local_ranks(hosts)]:
            problems.append(f"{call} returned {got}: node-local ranks count from 0, as device ordinals do (expected {want}).")
        elif sorted(got) == sorted(want) and got == [want[i] for i in sorted(range(len(hosts)), key=lambda i: hosts[i])]:
            problems.append(f"{call} returned the devices in the order of the sorted host names; return them in rank order "
                            f"(expected {want}).")
        else:
            problems.append(f"{call} returned {got}; expected {want}.")
        break
    fail(problems, "Exercise 4.1")
    passed("Exercise 4.1: every rank gets its node-local rank as device, wrapped where a host has fewer GPUs "
           "(the book's interleaved hosts and random ones).")


def check_transpose_schedule(transpose_schedule: Callable[[int], object]) -> None:
    """Exercise 4.2: `transpose_schedule(parts)` lists the stages of (sender, receiver) pairs; it then drives a transpose."""
    problems: list[str] = []
    for parts in (1, 2, 3, 4, 5, 8):
        try:
            stages = [list(stage) for stage in transpose_schedule(parts)]
        except Exception as exc:  # any exception is a wrong answer, reported in words
            problems.append(f"transpose_schedule({parts}) raised {type(exc).__name__}: {exc}")
            break
        found = D.schedule_problems(stages, parts)
        if not found and len(stages) != parts:
            found = [f"{len(stages)} stages: {parts} parts need {parts} (stage 0 for the local blocks, then {parts - 1} in which every "
                     "part sends once and receives once)."]
        if found:
            problems += [f"with {parts} parts: {p}" for p in found[:3]]
            break
    if not problems:  # the schedule must also drive the transpose: fresh random data, poisoned output, three slices on one device
        h, w = problem_size("ch4_exercise_slice")
        tile, block_rows = problem_size("ch4_tile")
        seed = int(np.random.default_rng(_SEED.spawn(1)[0]).integers(1, 10**6))
        inp = D.DistributedMatrix.filled((3 * h, 3 * w), [0, 0, 0], seed=seed)
        transpose = D.DistributedTranspose(inp, schedule=transpose_schedule(3), tile=tile, block_rows=block_rows)
        transpose.run()
        wrong = transpose.mismatches()
        if wrong:
            problems.append(f"the transpose driven by your schedule left {wrong} elements wrong or unwritten.")
    fail(problems, "Exercise 4.2")
    passed("Exercise 4.2: the schedule is valid for 1 to 8 parts (every block once, each part sending and receiving once per "
           "stage), and it transposed a random matrix split in three.")


def _received_problems(received, sends, size: int) -> list[str]:
    for rank in range(size):
        for peer in range(size):
            got, want = received[rank][peer], sends[peer][rank]
            if np.array_equal(got, want):
                continue
            if np.isnan(got).all():
                if peer == rank:
                    return [f"recv[{rank}] on rank {rank} was never written: a rank's block for itself must arrive too (send it to "
                            "yourself inside the group, or copy send[comm.rank] into recv[comm.rank])."]
                return [f"recv[{peer}] on rank {rank} was never written: receive from every rank p into recv[p]."]
            if peer != rank and np.array_equal(got, sends[peer][peer]):
                return [f"rank {peer} sent its block send[{peer}] to rank {rank}; rank p must send send[q] to rank q (the block "
                        f"meant for q), so rank {rank} should get rank {peer}'s send[{rank}]."]
            source = next((q for q in range(size) if np.array_equal(got, sends[q][rank])), None)
            if source is not None:
                return [f"recv[{peer}] on rank {rank} holds the block of rank {source}: receive from rank p into recv[p]."]
            return [f"recv[{peer}] on rank {rank} holds wrong values; it should hold what rank {peer} has in send[{rank}]."]
    return []


def check_all_to_all(all_to_all: Callable[..., object]) -> None:
    """Exercise 4.3: `all_to_all(comm, send, recv)` gives every rank p's send[r] to rank r's recv[p], with grouped sends and receives."""
    h, w = problem_size("ch4_exercise_slice")
    rng = np.random.default_rng(_SEED.spawn(1)[0])
    problems: list[str] = []
    groups_per_rank: list[int] = []  # groups of calls each rank issued (an ungrouped call is a group of its own)

    def watched(comm, send, recv):
        all_to_all(comm, send, recv)
        groups_per_rank.append(sum(1 for group in comm.fabric.groups[comm.rank] if group))

    for size in (2, 3, 4):
        sends = [rng.random((size, h, w), dtype=np.float32) for _ in range(size)]
        try:
            received = loopback_exchange(watched, sends, (h, w), np.float32)
        except ExchangeError as exc:
            problems.append(f"with {size} ranks: {exc}")
            break
        except CheckFailed:
            raise
        except Exception as exc:  # any other exception is a wrong answer, reported in words
            problems.append(f"with {size} ranks, all_to_all raised {type(exc).__name__}: {exc}")
            break
        found = _received_problems(received, sends, size)
        if found:
            problems += [f"with {size} ranks: {p}" for p in found]
            break
    fail(problems, "Exercise 4.3")
    if max(groups_per_rank, default=0) <= 1:
        passed("Exercise 4.3: with 2, 3 and 4 ranks every block reaches its rank, in one grouped exchange that cannot deadlock.")
    else:
        passed("Exercise 4.3: with 2, 3 and 4 ranks every block reaches its rank. Your sends and receives go in several steps, "
               "ordered so that every send meets its receive; one `with comm.group():` around them all would issue them "
               "together, with no order to get right.")
