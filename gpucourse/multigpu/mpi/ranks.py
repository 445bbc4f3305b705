"""One GPU per MPI rank: the rank's place on its node decides its device (book §4.2.1, §4.2.3).

Ranks on one node must not all take device 0. The node-local rank (0, 1, ... among the ranks of
one node) is the natural device number. There are two ways to learn it:

* **before MPI starts**, from the environment: every common launcher tells each process its
  node-local rank in a variable (`LOCAL_RANK_VARIABLES`). A CUDA-aware MPI sets up its CUDA
  machinery inside `MPI_Init` on the device current at that moment, so with such a library the
  device must be chosen first (book §4.2.3). In Python, `from mpi4py import MPI` calls `MPI_Init`,
  so `choose_device_before_init()` must run before that import. The course's MPI programs do so.
* **after MPI starts**, from MPI itself: splitting the world communicator by shared memory
  (`Split_type(COMM_TYPE_SHARED)`, MPI-3) groups the ranks of each node, and a rank's number in
  its group is its node-local rank. (The book, written for MPI-2, gathers the host names, sorts
  them and splits by a colour per host: the same groups.) `place(comm, chosen)` does this, and
  checks a device chosen before against it; with no launcher variable it chooses the device now.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from ...errors import MPIProblem

#: Variables in which launchers give each process its node-local rank (and the number of ranks on its node), in the order read.
LOCAL_RANK_VARIABLES = (
    ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),  # Open MPI's mpiexec / mpirun
    ("MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"),  # MVAPICH (the book's MPI)
    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),  # MPICH's Hydra launcher
    ("SLURM_LOCALID", None),  # Slurm's srun
)


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
class LauncherRank:
    """A process's node-local rank as its launcher set it in the environment, before MPI starts."""

    local_rank: int
    local_size: int | None
    variable: str


def launcher_local_rank(environ: Mapping[str, str] | None = None) -> LauncherRank | None:
    """The node-local rank the MPI launcher put in the environment (`LOCAL_RANK_VARIABLES`), or None outside a launcher."""
    environ = os.environ if environ is None else environ
    for rank_variable, size_variable in LOCAL_RANK_VARIABLES:
        value = environ.get(rank_variable, "").strip()
        if value.isdigit():
            size = environ.get(size_variable, "").strip() if size_variable else ""
            return LauncherRank(int(value), int(size) if size.isdigit() else None, rank_variable)
    return None


@dataclass(frozen=True)
class DeviceChoice:
    """A device made current before MPI_Init, and the launcher variable it was chosen from."""

    device: int
    device_count: int
    launcher: LauncherRank


def choose_device_before_init(environ: Mapping[str, str] | None = None) -> DeviceChoice | None:
    """Make this rank's device current before MPI starts (call it before `from mpi4py import MPI`); None without a launcher variable."""
    if "mpi4py.MPI" in sys.modules:
        raise MPIProblem("mpi4py.MPI is already imported, so MPI_Init has run: choose the device before `from mpi4py import MPI`.")
    launcher = launcher_local_rank(environ)
    if launcher is None:
        return None
    import gpucourse
    from gpucourse.multigpu import gpus

    count = gpus.device_count()
    device = device_for(launcher.local_rank, count)
    gpucourse.select_device(device)
    return DeviceChoice(device, count, launcher)


@dataclass(frozen=True)
class Placement:
    """Where one rank runs: host, world and node-local rank, the device it took, and when it chose it (before or after MPI_Init)."""

    rank: int
    size: int
    host: str
    local_rank: int
    local_size: int
    device: int
    device_name: str
    device_count: int
    chosen_before_init: bool = False
    chosen_from: str = "MPI_Comm_split_type"

    def as_dict(self) -> dict:
        """The placement as a plain dict (for JSON)."""
        return asdict(self)

    def __str__(self) -> str:
        when = f"before MPI_Init, from {self.chosen_from}" if self.chosen_before_init else "after MPI_Init"
        return (f"[{self.rank}] host {self.host}, node-local rank {self.local_rank} of {self.local_size}: "
                f"device {self.device} ({self.device_name}), chosen {when}")


def place(comm, chosen: DeviceChoice | None = None) -> Placement:
    """Find this rank's node-local rank from MPI, make its device current (or keep the one `chosen` before MPI_Init), and say where it runs.

    A device chosen before MPI_Init came from the launcher's variable; it must be the one MPI's own
    node-local rank gives, or the launcher and the MPI library disagree about the node (MPIProblem).
    """
    from mpi4py import MPI

    import gpucourse
    from gpucourse.multigpu import gpus

    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    local_rank, local_size = local.Get_rank(), local.Get_size()
    local.Free()
    count = gpus.device_count()
    device = device_for(local_rank, count)
    if chosen is not None and chosen.device != device:
        raise MPIProblem(f"rank {comm.Get_rank()}: the launcher's {chosen.launcher.variable}={chosen.launcher.local_rank} chose device "
                           f"{chosen.device} before MPI_Init, but MPI counts this rank as node-local rank {local_rank} of {local_size} "
                           f"(device {device}). The launcher and mpi4py's MPI library do not agree: use the mpiexec of mpi4py's MPI.")
    info = gpucourse.select_device(device)
    return Placement(comm.Get_rank(), comm.Get_size(), MPI.Get_processor_name(), local_rank, local_size, device, info.name, count,
                     chosen_before_init=chosen is not None, chosen_from=chosen.launcher.variable if chosen else "MPI_Comm_split_type")
