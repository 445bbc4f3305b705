"""The split Jacobi iteration as an MPI program: one process (rank) per GPU, halos exchanged with NCCL.

    mpiexec -n 4 python -m gpucourse.multigpu.domains.ranks --shape 16384 16384 --sweeps 1000 --every 100 --halo 10

Each rank holds one slab (`slabs.plan_slabs` with as many parts as ranks) in a `lane.SlabLane`, on
the GPU its node-local rank gives (`gpucourse.multigpu.mpi.ranks.place`). A round is the lane's first group
of launches, then on its copy stream an NCCL group that sends its edge rows to its neighbours and
receives their edge rows into its halo, under the lane's interior sweep. Nothing here knows how many
nodes there are: with a host file, `mpiexec -n 16 --hostfile hosts ...` runs the same program over
four nodes of four GPUs, NCCL choosing NVLink inside a node and the network between nodes.

`--exchange host` stages the halo rows through host memory with MPI_Sendrecv (mpi4py on NumPy
arrays): what runs in the simulator and where NCCL is missing. Rank 0 prints the result line (time
per sweep, residuals, a fingerprint of the whole mesh when `--check`).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

EXCHANGES = ("nccl", "host")


def _parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gpucourse.multigpu.domains.ranks", description=__doc__.split("\n")[0])
    parser.add_argument("--shape", type=int, nargs=2, default=(258, 258), metavar=("NY", "NX"))
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--halo", type=int, default=1)
    parser.add_argument("--exchange", choices=EXCHANGES, default="nccl")
    parser.add_argument("--heat-d", type=float, default=None, help="explicit heat-equation steps with this diffusion number instead")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of --sweeps sweeps (median reported)")
    parser.add_argument("--no-graphs", action="store_true", help="launch every sweep from Python instead of replaying graphs")
    parser.add_argument("--check", action="store_true", help="gather the mesh on rank 0 and report its fingerprint")
    parser.add_argument("--expect-ranks", type=int, default=None, help="fail clearly if MPI starts another number of ranks")
    return parser.parse_args(argv)


class RankJacobi:
    """This rank's part of the split iteration: its lane, its neighbours' ranks and the halo exchange."""

    def __init__(self, comm, initial: np.ndarray, *, halo: int, every: int, exchange: str, graphs: bool, device: int,
                 heat_d: float | None = None) -> None:
        from ...errors import DecompositionError
        from .lane import SlabLane
        from .peer import check_options
        from .slabs import plan_slabs

        self.comm, self.rank, self.size = comm, comm.Get_rank(), comm.Get_size()
        self.plan = plan_slabs(initial.shape, self.size, halo)
        check_options(self.plan, every, "global")
        if exchange not in EXCHANGES:
            raise DecompositionError(f"exchange must be one of {EXCHANGES}; got {exchange!r}")
        self.halo, self.every, self.exchange = halo, every, exchange
        self.lane = SlabLane(self.plan, self.rank, initial, device, every=every, graphs=graphs, heat_d=heat_d)
        self.receive = self.plan.received_rows(self.rank)  # (source rank, first, stop)
        self.send = [(q, first, stop) for q in range(self.size) for source, first, stop in self.plan.received_rows(q)
                     if source == self.rank]  # (destination rank, first, stop)
        self.sweeps_done = 0
        self.nccl = None
        if exchange == "nccl":
            from ..mpi.exchange import NcclExchange

            self.nccl = NcclExchange(comm, stream=self.lane.copies)
        self.wait_for_device()

    def wait_for_device(self) -> None:
        """Wait until this rank's GPU is idle."""
        from ...timing import synchronize

        synchronize()

    def _exchange_nccl(self, buffer: int) -> None:
        from .lane import record, wait

        lane = self.lane
        wait(lane.copies, [lane.edges_ready])
        with self.nccl.group():  # every send and receive of the round in one group: no order to deadlock on
            for destination, first, stop in self.send:
                self.nccl.send(lane.rows(buffer, first, stop), destination)
            for source, first, stop in self.receive:
                self.nccl.recv(lane.rows(buffer, first, stop), source)
        record(lane.halos_in, lane.copies)

    def _exchange_host(self, buffer: int) -> None:
        from ...arrays import to_host

        self.wait_for_device()  # MPI reads host copies of the edge rows now
        lane = self.lane
        requests, landing = [], []
        for destination, first, stop in self.send:
            requests.append(self.comm.Isend(np.ascontiguousarray(to_host(lane.rows(buffer, first, stop))), dest=destination, tag=first))
        for source, first, stop in self.receive:
            rows = np.empty((stop - first, self.plan.shape[1]), lane.dtype)
            requests.append(self.comm.Irecv(rows, source=source, tag=first))
            landing.append((rows, first, stop))
        for request in requests:
            request.Wait()
        for rows, first, stop in landing:
            target = lane.rows(buffer, first, stop)
            target[...] = _to_device_like(target, rows)

    def run(self, sweeps: int) -> None:
        """Queue `sweeps` sweeps (whole rounds of `halo` sweeps) on this rank's GPU, exchanging halos with its neighbours."""
        from ...errors import DecompositionError
        from ..gpus import on_device
        from .lane import wait

        if sweeps < 0 or sweeps % self.halo:
            raise DecompositionError(f"sweeps ({sweeps}) must be a whole number of rounds of {self.halo} sweeps (the halo)")
        lane = self.lane
        with on_device(lane.device):
            for _ in range(sweeps // self.halo):
                source, end = self.sweeps_done % 2, self.sweeps_done + self.halo
                residual = end % self.every == 0
                wait(lane.compute, [lane.halos_in])
                lane.first(source, residual)
                if self.exchange == "nccl":
                    lane.rest(source, residual)
                    self._exchange_nccl(end % 2)
                else:
                    self._exchange_host(end % 2)
                    lane.rest(source, residual)
                self.sweeps_done = end

    def residuals(self) -> list[tuple[int, float]]:
        """(sweep, max |change| over the whole mesh) at every check so far: the maximum over all ranks (waits)."""
        from mpi4py import MPI

        self.wait_for_device()
        checks = self.sweeps_done // self.every
        mine = self.lane.history_values(checks).astype(np.float64)
        every = np.empty_like(mine)
        self.comm.Allreduce(mine, every, op=MPI.MAX)
        return [((k + 1) * self.every, float(every[k])) for k in range(checks)]

    def gather(self) -> np.ndarray | None:
        """The whole mesh on rank 0 (None elsewhere), from every rank's owned rows and the boundary rows (waits)."""
        from ...arrays import to_host

        self.wait_for_device()
        current = self.sweeps_done % 2
        lane = self.lane
        pieces = self.comm.gather(to_host(lane.owned(current)), root=0)
        ends = self.comm.gather((to_host(lane.buffers[current])[0], to_host(lane.buffers[current])[-1]), root=0)
        if self.rank != 0:
            return None
        return np.concatenate([ends[0][0][None, :], *pieces, ends[-1][1][None, :]])


def _to_device_like(target, rows: np.ndarray):
    """`rows` as an array of the same kind as `target` (NumPy in the simulator, CuPy on a GPU)."""
    if isinstance(target, np.ndarray):
        return rows
    import cupy

    return cupy.asarray(rows)


def main(argv=None) -> int:
    """Run the split iteration on every rank; rank 0 prints the result line."""
    args = _parse(argv)
    from ... import mode
    from ...errors import DecompositionError
    from ..mpi import report
    from ..mpi.exchange import nccl_status
    from ..mpi.support import start_ranks, timed_on_all_ranks
    from .scaling import digest, sample_mesh

    world = start_ranks(args.expect_ranks)
    if world is None:
        return 2
    comm, rank, size, placement, placements = world.comm, world.rank, world.size, world.placement, world.placements
    result = {"program": "domains.ranks", "ranks": size, "shape": list(args.shape), "halo": args.halo, "every": args.every,
              "sweeps": args.sweeps, "exchange": args.exchange, "mode": mode.MODE, "placements": placements}
    exchange = args.exchange
    if exchange == "nccl":
        ready, why = nccl_status()
        shared = len({(p["host"], p["device"]) for p in placements}) < size
        reason = ("the simulator has no NCCL" if mode.is_simulator() else why if not ready else
                  "NCCL needs one GPU per rank and some ranks share a GPU: start at most as many ranks per node as it has GPUs"
                  if shared else None)
        if reason:
            exchange = "host"
            result["exchange_note"] = f"NCCL not used ({reason}); halos staged through the host with MPI"
    try:
        worker = RankJacobi(comm, sample_mesh(tuple(args.shape)), halo=args.halo, every=args.every, exchange=exchange,
                            graphs=not args.no_graphs, device=placement.device, heat_d=args.heat_d)
    except (DecompositionError, ValueError) as exc:
        if rank == 0:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            report({**result, "error": str(exc)})
        return 3
    result["exchange"] = exchange
    if args.check:
        worker.run(args.sweeps)
        mesh = worker.gather()
        if rank == 0:
            result["digest"] = digest(mesh)
        result["residuals"] = worker.residuals()
    samples = timed_on_all_ranks(comm, lambda: worker.run(args.sweeps), worker.wait_for_device, args.repeat)
    ms = 1e3 * statistics.median(samples) / max(1, args.sweeps)
    if rank == 0:
        result.update(ms_per_sweep=ms, samples_ms=[1e3 * s for s in samples])
        print(f"{exchange}: {size} rank(s), {args.shape[0]} x {args.shape[1]}, halo {args.halo}: {ms:.4f} ms per sweep", flush=True)
        report(result)
    if worker.nccl is not None:
        worker.nccl.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
