"""Whether the MPI library can read GPU memory (CUDA-aware MPI), and a guard for the buffers handed to it.

A CUDA-aware MPI takes device pointers in its calls and moves the data itself (over NVLink, or
GPUDirect RDMA between nodes). An MPI that is not CUDA-aware reads a device address as if it were
host memory, and the process crashes (or silently sends garbage). mpi4py passes any buffer it is
given, so the course checks first: `cuda_awareness()` asks the library, and `check_buffers` refuses
a device array when the answer is not yes.

How to ask depends on the library, and mpi4py 4.1 has no query of its own:
- MPI 4.1 defines the info key `mpi_memory_alloc_kinds`: a CUDA-aware library lists `cuda:device` there;
- Open MPI has `MPIX_Query_cuda_support()` (in its `mpi-ext.h`; found here in the loaded library);
- MPICH has `MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes)`;
- and, without starting MPI, `ompi_info --parsable --all` says how Open MPI was built.
"""

from __future__ import annotations

import ctypes
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...errors import DeviceBufferError


@dataclass(frozen=True)
class CudaAwareness:
    """The answer to 'can this MPI read device memory?': True, False or None (the library does not say), and how it was found."""

    supported: bool | None
    how: str
    library: str = ""

    def __str__(self) -> str:
        verdict = {True: "CUDA-aware", False: "not CUDA-aware", None: "CUDA-awareness unknown (treated as not CUDA-aware)"}
        library = f"{self.library}: " if self.library else ""
        return f"{library}{verdict[self.supported]} ({self.how})"


def _loaded_mpi_libraries() -> list[str]:
    """Paths of the MPI libraries mapped into this process (Linux: /proc/self/maps)."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return []
    paths = {line.split()[-1] for line in maps.read_text().splitlines() if "libmpi" in line and "/" in line}
    return sorted(paths)


def _query_symbol(name: str, *args):
    """Call C function `name` of the loaded MPI library, if it has one; None otherwise."""
    for path in _loaded_mpi_libraries():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        function = getattr(library, name, None)
        if function is not None:
            function.restype = ctypes.c_int
            return function(*args)
    return None


def cuda_awareness() -> CudaAwareness:
    """Ask the running MPI (call after MPI is initialised, in a rank) whether it can read CUDA device memory."""
    from mpi4py import MPI

    library = MPI.Get_library_version().strip().splitlines()[0].split(",")[0].strip()
    info = MPI.COMM_WORLD.Get_info()
    kinds = info.Get("mpi_memory_alloc_kinds")
    info.Free()
    if kinds:
        return CudaAwareness("cuda" in kinds.lower(), f"MPI 4.1 info key mpi_memory_alloc_kinds = {kinds!r}", library)
    answer = _query_symbol("MPIX_Query_cuda_support")
    if answer is not None:
        return CudaAwareness(bool(answer), f"MPIX_Query_cuda_support() returned {answer}", library)
    flag = ctypes.c_int(0)
    answer = _query_symbol("MPIX_GPU_query_support", ctypes.c_int(0), ctypes.byref(flag))  # 0: MPIX_GPU_SUPPORT_CUDA
    if answer == 0:
        return CudaAwareness(bool(flag.value), f"MPIX_GPU_query_support(CUDA) set {flag.value}", library)
    return CudaAwareness(None, "the library answers none of the known queries", library)


def ompi_info_cuda(ompi_info: str = "ompi_info") -> bool | None:
    """Whether Open MPI was built with CUDA support, from `ompi_info` (None if it is not there or does not say)."""
    try:
        text = subprocess.run([ompi_info, "--parsable", "--all"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in text.splitlines():
        if "built_with_cuda_support:value:" in line:
            return line.rsplit(":", 1)[1].strip() == "true"
    return None


def is_device_buffer(array) -> bool:
    """True for arrays in GPU memory (anything exposing __cuda_array_interface__)."""
    return hasattr(array, "__cuda_array_interface__")


def check_buffers(*buffers, cuda_aware: bool | None, call: str = "MPI") -> None:
    """Refuse (DeviceBufferError) device arrays for an MPI that is not known to be CUDA-aware; host arrays always pass."""
    if cuda_aware:
        return
    for number, array in enumerate(buffers):
        if is_device_buffer(array):
            kind = f"{type(array).__module__.split('.')[0]}.{type(array).__name__}"
            raise DeviceBufferError(
                f"buffer {number} of {call} is a device array ({kind}), but this MPI is not CUDA-aware: it would read the "
                "device address as host memory and crash. Copy the data to a (pinned) host buffer first and send that "
                "(the host-staged transpose), or move device data with NCCL."
            )


# ---------------------------------------------------------------------------------------------
# What every rank program's main does: start MPI on its device, time a step on all ranks


@dataclass(frozen=True)
class World:
    """One rank's MPI world: the communicator, this rank, the number of ranks, its placement and every rank's (rank 0 first)."""

    comm: object
    rank: int
    size: int
    placement: object
    placements: list


def start_ranks(expect_ranks: int | None) -> World | None:
    """Make this rank's device current, then start MPI and place the rank; None when MPI started another number of ranks
    than `expect_ranks` (said on stderr: the launcher of another MPI), where the program exits with status 2."""
    import gpucourse  # noqa: F401  (picks the mode, from GPUCOURSE_MODE set by the launcher)

    from . import ranks, world_is_as_expected

    chosen = ranks.choose_device_before_init()  # before MPI_Init: a CUDA-aware MPI sets up on the current device
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if not world_is_as_expected(size, expect_ranks):
        return None
    placement = ranks.place(comm, chosen)
    return World(comm, rank, size, placement, comm.allgather(placement.as_dict()))


def timed_on_all_ranks(comm, run, wait, repeat: int) -> list[float]:
    """Seconds of `run()` on the slowest rank, `repeat` times (at least once): each from a barrier, the device idle, until the
    device is idle again (`wait()`)."""
    from mpi4py import MPI

    samples = []
    for _ in range(max(1, repeat)):
        wait()
        comm.Barrier()
        start = MPI.Wtime()
        run()
        wait()
        samples.append(comm.allreduce(MPI.Wtime() - start, op=MPI.MAX))
    return samples
