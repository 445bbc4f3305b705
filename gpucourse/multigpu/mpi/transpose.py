"""The MPI transpose (book §4.2.2, §4.2.3, Appendix D.4.2-3): one rank per GPU, the matrix split by rows over the ranks.

    mpiexec -n 2 python -m gpucourse.multigpu.mpi.transpose --shape 16384 16384 --method host

The decomposition is the one of `gpucourse.multigpu.transpose`: rank r holds rows r*h .. (r+1)*h of the
input and rows r*w .. (r+1)*w of the transpose, and needs one h x w block from every rank.
Methods:

- ``host``: the book's first version. In stage k rank r sends its block for rank (r - k) mod P
  and receives the block of rank (r + k) mod P: a 2D copy from the device into a pinned host
  buffer, `MPI_Sendrecv` between host buffers, a copy back to the device, a transpose.
- ``nccl``: device to device, block by block: every block packed into a contiguous buffer on one
  stream, one NCCL exchange a stage on another, each received block transposed as soon as it is in
  (`NcclTranspose`), so that the transposes run under the later stages' exchanges.
- ``cuda-aware``: the book's second version, `MPI_Sendrecv` on device buffers. Only where the MPI
  library says it is CUDA-aware; otherwise the program says so and stops cleanly.

Every rank makes its input from a seed, so every rank can check its output against the input of
the others without sending it. Rank 0 prints one result line (see `gpucourse.multigpu.mpi.report`).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

METHODS = ("host", "nccl", "cuda-aware")


def _parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gpucourse.multigpu.mpi.transpose", description=__doc__.split("\n")[0])
    parser.add_argument("--shape", type=int, nargs=2, default=(1024, 1024), metavar=("ROWS", "COLS"))
    parser.add_argument("--method", choices=METHODS, default="host")
    parser.add_argument("--repeat", type=int, default=10, help="timed transposes (median reported)")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--tile", type=int, nargs=2, default=None, metavar=("TILE", "BLOCK_ROWS"))
    parser.add_argument("--expect-ranks", type=int, default=None, help="fail clearly if MPI starts another number of ranks")
    return parser.parse_args(argv)


class _Rank:
    """What every method shares: the rank's slices, the transposes planned once, device waits and the check."""

    def __init__(self, comm, shape, seed: int, tile: tuple[int, int]) -> None:
        from ...arrays import array_module
        from ..transpose import random_part, split_rows

        self.comm, self.rank, self.size = comm, comm.Get_rank(), comm.Get_size()
        self.split = split_rows(shape, self.size)
        self.h, self.w = self.split.rows_per_part, self.split.cols_per_part
        self.xp = array_module()
        self.seed, self.tile = seed, tile
        rows, cols = self.split.shape
        self.inp = random_part(seed, self.rank, (self.h, cols))
        self.out = self.xp.full((self.w, rows), np.nan, dtype=np.float32)

    def block_of_input(self, peer: int):
        """The block of this rank's input that rank `peer` needs (h x w, strided)."""
        return self.inp[:, peer * self.w:(peer + 1) * self.w]

    def slot_of_output(self, peer: int):
        """Where the transpose of rank `peer`'s block goes in this rank's output (w x h, strided)."""
        return self.out[:, peer * self.h:(peer + 1) * self.h]

    def plan(self, target, source):
        """A transpose of `source` into `target`, planned now on the current stream: the call only launches."""
        from ...kernels import transpose as T
        from ..transpose import VARIANT, kernel_view

        return T.transpose.plan(kernel_view(target), kernel_view(source), VARIANT, *self.tile)

    def wait_for_device(self) -> None:
        """Wait until this rank's GPU is idle."""
        from ...timing import synchronize

        synchronize()

    def mismatches(self) -> int:
        """Wrong or unwritten elements of this rank's output, against the inputs of every rank made again from the seed."""
        from ..transpose import random_part

        self.wait_for_device()
        wrong = 0
        for peer in range(self.size):
            expected = random_part(self.seed, peer, (self.h, self.split.shape[1]))[:, self.rank * self.w:(self.rank + 1) * self.w]
            wrong += int(self.xp.count_nonzero(~(self.slot_of_output(peer) == expected.T)))
        return wrong


class HostStaged(_Rank):
    """The book's MPI transpose: device -> pinned host buffer -> MPI_Sendrecv -> host buffer -> device, stage by stage.

    With device_buffers=True (CUDA-aware MPI only) MPI_Sendrecv takes the device buffers themselves.
    """

    def __init__(self, comm, shape, seed, tile, *, cuda_aware: bool | None, device_buffers: bool = False) -> None:
        super().__init__(comm, shape, seed, tile)
        self.cuda_aware, self.device_buffers = cuda_aware, device_buffers
        block = (self.h, self.w)
        self.recv_device = self.xp.empty(block, np.float32)  # every received block lands here before its transpose
        if device_buffers:  # MPI reads and writes device memory: one more device buffer to pack into
            self.sendrecv = (self.xp.empty(block, np.float32), self.recv_device)
        elif self.xp is np:
            self.sendrecv = tuple(np.empty(block, np.float32) for _ in range(2))
        else:  # staged through pinned host memory, which MPI reads and the copy engines reach
            import cupyx

            self.sendrecv = tuple(cupyx.empty_pinned(block, np.float32) for _ in range(2))
        self.local = self.plan(self.slot_of_output(self.rank), self.block_of_input(self.rank))
        self.remote = {peer: self.plan(self.slot_of_output(peer), self.recv_device) for peer in range(self.size) if peer != self.rank}
        self.wait_for_device()  # the arrays were filled on the default stream

    def run(self) -> None:
        """One whole transpose."""
        from ..peer import copy_2d
        from .support import check_buffers

        self.local()
        for stage in range(1, self.size):
            to, source = (self.rank - stage) % self.size, (self.rank + stage) % self.size
            send, recv = self.sendrecv  # the buffers MPI_Sendrecv gets: host pair, or device buffers with CUDA-aware MPI
            copy_2d(send, self.block_of_input(to))  # pack: device to host (or to a contiguous device buffer)
            self.wait_for_device()  # MPI reads the buffer now, outside any stream
            check_buffers(send, recv, cuda_aware=self.cuda_aware, call="MPI_Sendrecv")
            self.comm.Sendrecv(send, dest=to, sendtag=self.rank, recvbuf=recv, source=source, recvtag=source)
            if not self.device_buffers:
                copy_2d(self.recv_device, recv)  # host to device, ahead of the transpose on the same stream
            self.remote[source]()


class NcclTranspose(_Rank):
    """Device to device, block by block: every block packed, then one NCCL exchange per stage, each block transposed on arrival.

    Stage k (1 .. P - 1) sends this rank's block for rank + k and receives the block of rank - k. The
    packing and the transposes run on one stream, the exchanges on another: each stage's exchange
    waits only for its own block's packing, and each transpose only for its own block's arrival, so the
    transposes of early blocks run under the exchanges of later ones.
    """

    def __init__(self, comm, shape, seed, tile) -> None:
        super().__init__(comm, shape, seed, tile)
        import cupy

        from .exchange import NcclExchange

        self.exchange = NcclExchange(comm)
        self.compute = cupy.cuda.Stream(non_blocking=True)
        self.send = self.xp.empty((self.size, self.h, self.w), np.float32)
        self.recv = self.xp.empty((self.size, self.h, self.w), np.float32)
        self.stages = [((self.rank + k) % self.size, (self.rank - k) % self.size) for k in range(1, self.size)]
        self.packed = [cupy.cuda.Event(disable_timing=True) for _ in self.stages]
        self.arrived = [cupy.cuda.Event(disable_timing=True) for _ in self.stages]
        with self.compute:  # the plans launch on the compute stream
            self.local = self.plan(self.slot_of_output(self.rank), self.block_of_input(self.rank))
            self.plans = {source: self.plan(self.slot_of_output(source), self.recv[source]) for _, source in self.stages}
        self.wait_for_device()  # the slices were filled on the default stream; the two streams do not wait for it

    def run(self) -> None:
        """One whole transpose."""
        from ..peer import copy_2d

        compute, wire = self.compute, self.exchange.stream
        self.local(stream=compute)
        for (to, _), packed in zip(self.stages, self.packed):
            copy_2d(self.send[to], self.block_of_input(to), stream=compute)
            packed.record(compute)
        for (to, source), packed, arrived in zip(self.stages, self.packed, self.arrived):
            wire.wait_event(packed)
            with self.exchange.group():  # this stage's pair in one group: neither side waits for the other's order
                self.exchange.send(self.send[to], to)
                self.exchange.recv(self.recv[source], source)
            arrived.record(wire)
        for (_, source), arrived in zip(self.stages, self.arrived):
            compute.wait_event(arrived)
            self.plans[source](stream=compute)

    def wait_for_device(self) -> None:
        """Wait until this rank's GPU is idle."""
        self.exchange.stream.synchronize()
        super().wait_for_device()


def _unavailable(method: str, awareness, placements: list[dict]) -> str | None:
    """Why `method` cannot run here (None: it can)."""
    from ... import mode
    from .exchange import nccl_status

    if method == "cuda-aware" and not awareness.supported:
        return (f"this MPI is not CUDA-aware ({awareness}); handing it a device buffer would crash it. "
                "The host-staged and NCCL versions run instead.")
    if method == "nccl":
        ready, why = nccl_status()
        if not ready:
            return why
        used = {}
        for placement in placements:
            key = (placement["host"], placement["device"])
            if key in used:
                return (f"NCCL needs one GPU per rank, and ranks {used[key]} and {placement['rank']} share GPU {placement['device']} "
                        f"of {placement['host']}. Start as many ranks per node as it has GPUs.")
            used[key] = placement["rank"]
    if method != "host" and mode.is_simulator():
        return "device-to-device transfers need GPUs; this run is in simulator mode"
    return None


def main(argv=None) -> int:
    """Run the transpose on every rank; rank 0 prints the result line. Exit status 0 also when a method is skipped."""
    args = _parse(argv)
    from ... import mode, sizes
    from ...errors import DecompositionError
    from ...report import rate
    from ...timing import effective_bandwidth_gbs
    from . import ranks, report, support

    world = support.start_ranks(args.expect_ranks)
    if world is None:
        return 2
    from mpi4py import MPI

    comm, rank, size, placements = world.comm, world.rank, world.size, world.placements
    awareness = support.cuda_awareness()
    tile = tuple(args.tile) if args.tile else tuple(sizes.problem_size("ch4_tile"))
    result = {"program": "transpose", "method": args.method, "ranks": size, "shape": list(args.shape), "mode": mode.MODE,
              "placements": placements, "mpi_library": awareness.library,
              "cuda_aware": str(awareness), "repeat": args.repeat}
    if rank == 0:
        for line in placements:
            print(ranks.Placement(**line), flush=True)
    reason = _unavailable(args.method, awareness, placements)
    if reason:
        if rank == 0:
            print(f"{args.method}: skipped: {reason}", flush=True)
            report({**result, "skipped": reason})
        return 0
    try:
        if args.method == "nccl":
            worker = NcclTranspose(comm, tuple(args.shape), args.seed, tile)
        else:
            worker = HostStaged(comm, tuple(args.shape), args.seed, tile, cuda_aware=awareness.supported,
                                device_buffers=args.method == "cuda-aware")
    except DecompositionError as exc:
        if rank == 0:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            report({**result, "error": str(exc)})
        return 3
    worker.run()  # the first run, on poisoned output, is the one checked
    wrong = comm.allreduce(worker.mismatches(), op=MPI.SUM)
    samples = support.timed_on_all_ranks(comm, worker.run, worker.wait_for_device, args.repeat)
    ms = 1e3 * statistics.median(samples)
    nbytes = 2 * args.shape[0] * args.shape[1] * 4
    if rank == 0:
        result.update(mismatches=wrong, verified=wrong == 0, ms=ms, gbs=effective_bandwidth_gbs(nbytes, ms), samples_ms=[1e3 * s for s in samples])
        print(f"{args.method}: {size} ranks, {args.shape[0]} x {args.shape[1]} float32: "
              f"{'verified' if wrong == 0 else f'{wrong} WRONG elements'}, {ms:.3f} ms, {rate(result['gbs'])}", flush=True)
        report(result)
    if args.method == "nccl":
        worker.exchange.close()
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
