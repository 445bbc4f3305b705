"""The split Jacobi solver: its decomposition, its bits against the one-GPU sweep, its errors, and the MPI program.

The same code on a GPU (parts on different GPUs where there are several, on one GPU otherwise) and in
the simulator; sizes from gpucourse.sizes ("ch4_domain_test_mesh").
"""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse.errors import DecompositionError
from gpucourse.kernels import laplace
from gpucourse.multigpu import mpi
from gpucourse.multigpu.domains import PeerJacobi, plan_slabs, scaling

SHAPE = tuple(gpucourse.problem_size("ch4_domain_test_mesh"))


def one_gpu(mesh: np.ndarray, sweeps: int, every: int):
    return laplace.jacobi_iterations(mesh, sweeps, "global", every=every, graph=False)


@pytest.mark.parametrize("ny,parts,halo", [(23, 1, 1), (23, 3, 2), (12, 4, 2), (9, 7, 1), (40, 5, 6)])
def test_each_round_leaves_exactly_the_owned_rows_current(ny, parts, halo):
    """Follow which rows hold iteration t: after a round and an exchange every held row is current again, on every part."""
    plan = plan_slabs((ny, 5), parts, halo)
    owned = set()
    for p in plan.parts:
        rows = set(range(p.first, p.stop))
        assert not rows & owned
        owned |= rows
    assert owned == set(range(1, ny - 1))
    for index, p in enumerate(plan.parts):
        current = set(range(p.local_first, p.local_stop))  # the start of a round: every held row current
        for j in range(1, halo + 1):
            lo, hi = plan.sweep_rows(index, j)
            assert all(r in current or r in (0, ny - 1) for r in range(lo - 1, hi + 1)), (index, j)
            current = set(range(lo, hi)) | {0, ny - 1}
        assert set(range(p.first, p.stop)) <= current
        received = {r for _, first, stop in plan.received_rows(index) for r in range(first, stop)}
        assert (current | received | {0, ny - 1}) >= set(range(p.local_first, p.local_stop))
        for source, first, stop in plan.received_rows(index):
            assert plan.parts[source].first <= first and stop <= plan.parts[source].stop  # a neighbour owns what it sends


def test_bad_splits_get_errors_that_say_what_to_change():
    with pytest.raises(DecompositionError, match="does not split over 9 GPUs"):
        plan_slabs((10, 10), 9)
    with pytest.raises(DecompositionError, match="wider than the smallest slab"):
        plan_slabs((12, 10), 4, halo=3)
    with pytest.raises(DecompositionError, match="at least 1"):
        plan_slabs((12, 10), 2, halo=0)
    with pytest.raises(DecompositionError, match="positive whole number"):
        plan_slabs((12, 10), 0)
    mesh = scaling.sample_mesh((12, 10))
    with pytest.raises(DecompositionError, match="multiple of the halo"):
        PeerJacobi(mesh, [0, 0], halo=2, every=3)
    solver = PeerJacobi(mesh, [0], halo=1, every=2)
    with pytest.raises(DecompositionError, match="whole number of rounds"):
        PeerJacobi(mesh, [0, 0], halo=2, every=2).run(3)
    with pytest.raises(gpucourse.errors.DeviceOrdinalError):
        PeerJacobi(mesh, [0, 99])
    del solver


@pytest.mark.parametrize("parts,halo,graphs", [(2, 1, True), (3, 2, False), (4, 3, True)])
def test_split_sweeps_give_the_one_gpu_bits(parts, halo, graphs):
    """The split iteration on random data equals the one-GPU sweep bit for bit: mesh and residuals (every row written each round)."""
    sweeps, every = 4 * halo, 2 * halo  # two residuals; the first run stops between them
    mesh = scaling.sample_mesh(SHAPE, seed=parts)
    reference, residuals = one_gpu(mesh, sweeps, every)
    with PeerJacobi(mesh, scaling.devices_for(parts), halo=halo, every=every, graphs=graphs) as solver:
        solver.run(halo)
        solver.run(sweeps - halo)  # a run may stop and go on, between two residuals: the state carries over
        result = solver.gather()
        assert solver.residuals() == residuals
    assert np.array_equal(result, reference)


def test_the_mpi_program_gives_the_one_gpu_bits():
    """One rank per GPU here (two in the simulator), NCCL where it can run: the gathered mesh equals the one-GPU sweep's."""
    ranks = max(2, mpi.default_ranks()) if gpucourse.is_simulator() else mpi.default_ranks()
    sweeps, every, halo = 4, 2, 2
    mesh = scaling.sample_mesh(SHAPE)
    reference, residuals = one_gpu(mesh, sweeps, every)
    run = mpi.run_program("gpucourse.multigpu.domains.ranks", ranks, ["--shape", *SHAPE, "--sweeps", sweeps, "--every", every, "--halo", halo,
                                                             "--check", "--repeat", 1, "--expect-ranks", ranks], timeout_s=600)
    assert run.result["digest"] == scaling.digest(reference), run.lines
    assert [tuple(r) for r in run.result["residuals"]] == residuals
    assert run.result["exchange"] == ("host" if gpucourse.is_simulator() else "nccl")


def test_more_ranks_than_gpus_say_so_and_still_agree():
    """Ranks sharing a GPU cannot use NCCL: the program says why and stages the halos through the host, with the same bits."""
    ranks = mpi.default_ranks() + 1
    mesh = scaling.sample_mesh(SHAPE)
    reference, _ = one_gpu(mesh, 2, 2)
    run = mpi.run_program("gpucourse.multigpu.domains.ranks", ranks, ["--shape", *SHAPE, "--sweeps", 2, "--every", 2, "--check", "--repeat", 1],
                          timeout_s=600)
    assert run.result["exchange"] == "host"
    assert "NCCL not used" in run.result["exchange_note"]
    assert run.result["digest"] == scaling.digest(reference)


@pytest.mark.parametrize("parts,halo", [(2, 1), (3, 2)])
def test_the_heat_equation_split_gives_the_one_gpu_bits(parts, halo):
    """Explicit heat steps (chapter 6.5's kernel) split the same way equal the one-GPU steps bit for bit."""
    from gpucourse.kernels import heat

    steps, d = 4 * halo, 0.2
    mesh = scaling.sample_mesh(SHAPE, seed=7)
    reference = heat.heat_run(mesh, steps, d, "global", graph=False)
    with PeerJacobi(mesh, scaling.devices_for(parts), halo=halo, every=2 * halo, heat_d=d) as solver:
        assert not solver.overlap  # the heat kernel writes its view's edge rows: one launch a sweep
        solver.run(steps)
        assert np.array_equal(solver.gather(), reference)
    with pytest.raises(ValueError, match="stable explicit step"):
        PeerJacobi(mesh, [0, 0], heat_d=0.3)
