"""The all-to-all's schedules and the distributed 3D FFT: every block where it belongs, errors where a size does not split.

In the simulator the parts share the one stand-in device and the FFTs are NumPy's; on a GPU the same
tests run with cuFFT, the parts on every visible GPU (or several on one).
"""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse.errors import DecompositionError
from gpucourse.multigpu import alltoall as A
from gpucourse.multigpu import fft as F
from gpucourse.multigpu import gpus


def layouts() -> list[list[int]]:
    """Devices for 1 .. 4 parts: the visible GPUs in turn (parts share a GPU where there are fewer)."""
    count = gpus.device_count()
    return [[k % count for k in range(parts)] for parts in (1, 2, 3, 4)]


@pytest.mark.parametrize("parts", [2, 3, 4, 5, 8])
def test_rotated_steps_are_permutations(parts):
    steps = A.steps(parts, "rotated")
    assert len(steps) == parts - 1
    pairs = [pair for step in steps for pair in step]
    assert sorted(pairs) == sorted((s, r) for s in range(parts) for r in range(parts) if s != r)  # every block once
    for step in steps:  # every part sends one block and receives one in each step
        assert sorted(s for s, _ in step) == list(range(parts)) and sorted(r for _, r in step) == list(range(parts))
    assert A.step_load(parts, "rotated") == [1] * (parts - 1)


def test_queued_schedule_piles_readers_on_the_first_gpu():
    assert A.step_load(4, "queued") == [3, 2, 3]  # GPU 0 serves three readers at the first step
    assert A.lockstep_gbs(4, 374.0, "queued") == pytest.approx(374.0 * 3 / 8)
    assert A.lockstep_gbs(4, 374.0, "rotated") == pytest.approx(374.0)
    assert A.alltoall_ms(4, 1e9, 100.0) == pytest.approx(30.0)  # three steps of 10 ms
    with pytest.raises(ValueError, match="schedule"):
        A.steps(4, "random")


@pytest.mark.parametrize("graphs", [False, True])
@pytest.mark.parametrize("issuer", A.ISSUERS)
@pytest.mark.parametrize("schedule", A.SCHEDULES)
def test_alltoall_moves_every_block(schedule, issuer, graphs):
    for devices in layouts()[1:]:
        run = A.alltoall_bandwidth(devices, 1024, schedule=schedule, issuer=issuer, graphs=graphs, repeat=2)
        assert run.mismatches == 0, (devices, schedule, issuer)
        if gpucourse.is_simulator():
            assert run.times_ms == [] and np.isnan(run.gbs()) and not run.graphs  # no graphs in the simulator
        else:
            assert len(run.times_ms) == 2 and run.gbs() > 0 and run.graphs == graphs


def test_nccl_alltoall_runs_or_says_why():
    count = gpus.device_count()
    outcome = A.nccl_alltoall_bandwidth(list(range(count)) if count > 1 else [0, 0], 1 << 20, repeat=2)
    if gpucourse.is_simulator():
        assert outcome == "NCCL moves GPU memory, and this session runs in simulator mode"
    elif count < 2:
        assert isinstance(outcome, str) and "one GPU per rank" in outcome
    elif isinstance(outcome, str):
        assert "NCCL" in outcome or "nccl" in outcome  # CuPy without NCCL: the reason
    else:
        assert outcome.mismatches == 0 and outcome.gbs() > 0


def test_alltoall_refuses_mismatched_blocks():
    send = [[np.zeros((1, 4), np.float32)] * 2] * 2
    recv = [[np.zeros((1, 5), np.float32)] * 2] * 2
    with pytest.raises(DecompositionError, match="block 0 -> 0"):
        A.AllToAll(send, recv, [0, 0])
    with pytest.raises(DecompositionError, match="two or more parts"):
        A.alltoall_bandwidth([0], 64)


SHAPES = [((8, 6, 10), False), ((7, 5, 9), True), ((9, 8, 6), False), ((6, 7, 8), True)]


@pytest.mark.parametrize(("shape", "real"), SHAPES)
def test_slab_fft_matches_fftn(shape, real):
    """Forward against NumPy's whole-array FFT (even and uneven slabs), and back again; rel. error <= 1e-5 in complex64."""
    rng = np.random.default_rng(sum(shape))
    x = rng.random(shape).astype(np.float32)
    if not real:
        x = (x + 1j * rng.random(shape)).astype(np.complex64)
    reference = np.fft.rfftn(x.astype(np.float64)) if real else np.fft.fftn(x.astype(np.complex128))
    for devices in layouts():
        plan = F.SlabFFT(shape, devices, real=real)
        spectrum = plan.forward(plan.scatter(x))
        assert F.relative_error(plan.gather(spectrum), reference) <= 1e-5, devices
        back = np.concatenate([s if isinstance(s, np.ndarray) else s.get() for s in plan.inverse(spectrum)])
        assert F.relative_error(back, x) <= 1e-5, devices


def test_poisson_on_slabs():
    n = 16
    grid = np.arange(n) * 2 * np.pi / n
    x, y, z = np.meshgrid(grid, grid, grid, indexing="ij")
    u = np.sin(x) * np.cos(2 * y) * np.sin(3 * z)
    for devices in layouts()[1:]:
        plan = F.SlabFFT((n, n, n), devices, real=True)
        solved = F.poisson_periodic(plan, plan.scatter((-14 * u).astype(np.float32)))
        whole = np.concatenate([s if isinstance(s, np.ndarray) else s.get() for s in solved])
        assert F.relative_error(whole, u) <= 1e-5


def test_sizes_that_do_not_split():
    assert F.split_sizes(10, 4) == [3, 3, 2, 2]
    with pytest.raises(DecompositionError, match="do not split over 3 parts"):
        F.SlabFFT((2, 8, 8), [0, 0, 0])
    with pytest.raises(DecompositionError, match="axis 1"):
        F.SlabFFT((8, 2, 8), [0, 0, 0])
    with pytest.raises(DecompositionError, match="3D"):
        F.SlabFFT((8, 8), [0])


def test_model_and_cufftmp_status():
    model = F.fft3d_model_ms((512, 512, 512), 4, 4000.0, 400.0)
    assert model["total_ms"] == pytest.approx(model["fft_ms"] + model["alltoall_ms"])
    assert 0 < model["alltoall_share"] < 1
    assert F.fft3d_model_ms((512, 512, 512), 1, 4000.0, 400.0)["alltoall_ms"] == 0
    ok, reason = F.cufftmp_status()
    assert isinstance(ok, bool) and reason  # a reason, whichever way
    if gpucourse.is_simulator():
        assert not ok and "simulator" in reason


@pytest.mark.parametrize("order", ["rotated", "grouped"])
@pytest.mark.parametrize(("shape", "real", "ranks"), [((8, 6, 10), False, 3), ((7, 5, 9), True, 2), ((6, 8, 4), False, 4)])
def test_rank_slab_fft_on_a_loopback_fabric(order, shape, real, ranks):
    """The rank program's pack, exchange and finish, played by N ranks in one process under NCCL's pairing rules."""
    from gpucourse.multigpu.mpi.exchange import LoopbackFabric
    from gpucourse.multigpu.mpi.fft3d import RankSlabFFT, whole_array

    fabric = LoopbackFabric(ranks)
    workers = [RankSlabFFT(fabric.endpoint(r), shape, real=real, order=order) for r in range(ranks)]
    for worker in workers:
        worker.pack(worker.slab_of(5))
        worker.post()
    fabric.complete()
    result = np.concatenate([worker.finish() for worker in workers], axis=1)
    full = whole_array(shape, 5, real)
    assert F.relative_error(result, np.fft.rfftn(full) if real else np.fft.fftn(full)) <= 1e-5


def test_rank_slab_fft_under_mpiexec():
    """Two ranks under mpiexec: NCCL on a GPU (one per rank), MPI on host arrays in the simulator; checked on rank 0."""
    from gpucourse.multigpu import mpi

    if mpi.launcher_or_none() is None or not mpi.mpi4py_available():
        pytest.skip("no MPI launcher or mpi4py here")
    ranks = 2
    run = mpi.run_program("gpucourse.multigpu.mpi.fft3d", ranks, ["--shape", 12, 10, 8, "--repeat", 1], check=False)
    if not gpucourse.is_simulator() and gpus.device_count() < ranks:
        assert "share GPU" in run.result.get("error", ""), run.stdout + run.stderr  # more ranks than GPUs: said so
        return
    run.check()
    assert run.result["rel_error"] <= 1e-5 and run.result["ranks"] == ranks
