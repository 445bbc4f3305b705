"""One GPU per MPI rank: the rank's place on its node decides its device (book §4.2.1).

Ranks on one node must not all take device 0. The node-local rank (0, 1, ... among the ranks of
one node) is the natural device number. MPI-3 finds it in one call: splitting the world
communicator by shared memory (`Split_type(COMM_TYPE_SHARED)`) groups the ranks of each node, and a
rank's number in its group is its node-local rank. (The book, written for MPI-2, gathers the host
names, sorts them and splits by a colour per host: the same groups.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass


def node_local_ranks(hostnames: Sequence[str]) -> list[int]:
    """For each rank (in world order, given its host's name), its number among the ranks of the same host."""
    seen: dict[str, int] = {}
    local = []
    for host in hostnames:
        local.append(seen.get(host, 0))
        seen[host] = local[-1] + 1
    return local


def device_for(local_rank: int, device_count: int) -> int:
    """The device of a rank with this node-local rank: its local rank, wrapped when there are more ranks than GPUs."""
    if device_count < 1:
        raise ValueError(f"a node needs at least one device; got {device_count}")
    return local_rank % device_count


def assign_devices(hostnames: Sequence[str], gpus_per_host: int) -> list[int]:
    """The device of every rank (world order) from the host each runs on: node-local rank modulo the host's GPUs."""
    return [device_for(local, gpus_per_host) for local in node_local_ranks(hostnames)]


@dataclass(frozen=True)
class Placement:
    """Where one rank runs: host, world and node-local rank, and the device it took."""

    rank: int
    size: int
    host: str
    local_rank: int
    local_size: int
    device: int
    device_name: str
    device_count: int

    def as_dict(self) -> dict:
        """The placement as a plain dict (for JSON)."""
        return asdict(self)

    def __str__(self) -> str:
        return (f"[{self.rank}] host {self.host}, node-local rank {self.local_rank} of {self.local_size}: "
                f"device {self.device} ({self.device_name})")


def place(comm) -> Placement:
    """Find this rank's node-local rank, make its device current for the rest of the program, and say where it runs."""
    from mpi4py import MPI

    import gpucourse
    from gpucourse import multigpu

    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    local_rank, local_size = local.Get_rank(), local.Get_size()
    local.Free()
    count = multigpu.device_count()
    device = device_for(local_rank, count)
    info = gpucourse.select_device(device)
    return Placement(comm.Get_rank(), comm.Get_size(), MPI.Get_processor_name(), local_rank, local_size, device, info.name, count)
