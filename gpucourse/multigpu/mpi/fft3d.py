"""The slab 3D FFT with one rank per GPU: 2D FFTs of each slab, an all-to-all over NCCL, 1D FFTs along the remaining axis.

    mpiexec -n 4 python -m gpucourse.multigpu.mpi.fft3d --shape 512 512 512 [--real] [--order rotated|grouped] [--cufftmp]

Rank r holds planes rows0[r] of the array (`fft.split_sizes`: uneven slabs allowed). The blocks for
each other rank are packed into contiguous buffers, exchanged, and unpacked into the n0 x rows1[r] x n2'
array the last FFT runs on. `--order grouped` hands every send and receive to NCCL in one group
(NCCL's own all-to-all: it schedules them); `--order rotated` issues one group per step k, sending to
rank r + k and receiving from rank r - k. In simulator mode the exchange goes through MPI on host
arrays (`HostExchange`) and the FFTs are NumPy's. `--cufftmp` runs NVIDIA's cuFFTMp on the same
ranks through nvmath-python instead, or says exactly why it cannot. Rank 0 prints one result line.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Iterator

import numpy as np

ORDERS = ("rotated", "grouped")


def _parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gpucourse.multigpu.mpi.fft3d", description=__doc__.split("\n")[0])
    parser.add_argument("--shape", type=int, nargs=3, default=None)
    parser.add_argument("--real", action="store_true", help="float32 input, R2C")
    parser.add_argument("--order", choices=ORDERS, default="rotated")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cufftmp", action="store_true")
    parser.add_argument("--expect-ranks", type=int, default=None)
    return parser.parse_args(argv)


class HostExchange:
    """send/recv/group of host arrays over MPI (Isend/Irecv, all waited for at the group's end): the simulator's exchange."""

    def __init__(self, comm) -> None:
        self.comm, self.rank, self.size = comm, comm.Get_rank(), comm.Get_size()
        self._requests: list | None = None

    def send(self, array, peer: int) -> None:
        """Send the contiguous host array to rank `peer`."""
        request = self.comm.Isend(array, dest=peer, tag=self.rank)
        self._finish([request])

    def recv(self, array, peer: int) -> None:
        """Receive into the contiguous host array from rank `peer`."""
        request = self.comm.Irecv(array, source=peer, tag=peer)
        self._finish([request])

    def _finish(self, requests: list) -> None:
        if self._requests is not None:
            self._requests.extend(requests)
        else:
            from mpi4py import MPI

            MPI.Request.Waitall(requests)

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """Calls inside the block are posted together and waited for at its end."""
        self._requests = []
        try:
            yield
        finally:
            requests, self._requests = self._requests, None
            from mpi4py import MPI

            MPI.Request.Waitall(requests)


class RankSlabFFT:
    """This rank's part of a slab FFT: its slab, packed blocks, exchange calls and the last FFT (xp: NumPy or CuPy)."""

    def __init__(self, exchange, shape: tuple[int, int, int], *, real: bool = False, order: str = "rotated", xp=np) -> None:
        from ..fft import _offsets, split_sizes

        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}; got {order!r}")
        self.exchange, self.xp, self.real, self.order = exchange, xp, real, order
        self.rank, self.size = exchange.rank, exchange.size
        self.shape = tuple(shape)
        n0, n1, n2 = self.shape
        self.nz = n2 // 2 + 1 if real else n2
        self.rows0 = split_sizes(n0, self.size, "axis 0 (the slabs)")
        self.rows1 = split_sizes(n1, self.size, "axis 1 (the columns after the all-to-all)")
        self.off0, self.off1 = _offsets(self.rows0), _offsets(self.rows1)
        mine0, mine1 = self.rows0[self.rank], self.rows1[self.rank]
        self.send = [xp.empty((mine0, self.rows1[q], self.nz), np.complex64) for q in range(self.size)]
        self.recv = [xp.empty((self.rows0[p], mine1, self.nz), np.complex64) for p in range(self.size)]

    def pack(self, slab) -> None:
        """Stage 1: the 2D FFTs of this rank's planes, cut into one contiguous block per rank."""
        transform = self.xp.fft.rfft2 if self.real else self.xp.fft.fft2
        freq = transform(slab, axes=(1, 2))
        for q in range(self.size):
            self.send[q][...] = freq[:, self.off1[q]:self.off1[q] + self.rows1[q]]

    def post(self) -> None:
        """Stage 2: the all-to-all's sends and receives (complex64 moved as pairs of float32)."""
        ex = self.exchange

        def pair(peer_to: int, peer_from: int) -> None:
            ex.send(self.send[peer_to].view(np.float32), peer_to)
            ex.recv(self.recv[peer_from].view(np.float32), peer_from)

        if self.order == "grouped":
            with ex.group():
                for q in range(self.size):
                    pair(q, q)
            return
        for k in range(self.size):  # k = 0: this rank's own block
            with ex.group():
                pair((self.rank + k) % self.size, (self.rank - k) % self.size)

    def finish(self):
        """Stage 3: the blocks put together along axis 0, and the 1D FFTs along it; this rank's columns of the result."""
        whole = self.xp.concatenate(self.recv, axis=0)
        return self.xp.fft.fft(whole, axis=0).astype(np.complex64, copy=False)

    def slab_of(self, seed: int):
        """This rank's planes of the seeded test array (plane i from its own generator, so every rank makes its planes alone)."""
        n0, n1, n2 = self.shape
        planes = [np.random.default_rng(seed + i).random((n1, n2), dtype=np.float32) for i in range(self.off0[self.rank],
                                                                                                   self.off0[self.rank] + self.rows0[self.rank])]
        host = np.stack(planes) if planes else np.empty((0, n1, n2), np.float32)
        return self.xp.asarray(host if self.real else host.astype(np.complex64))


def whole_array(shape: tuple[int, int, int], seed: int, real: bool) -> np.ndarray:
    """The whole test array `RankSlabFFT.slab_of` cuts slabs of (for checks at small sizes)."""
    planes = np.stack([np.random.default_rng(seed + i).random(shape[1:], dtype=np.float32) for i in range(shape[0])])
    return planes if real else planes.astype(np.complex64)


def _cufftmp(comm, shape, repeat: int) -> dict:
    """cuFFTMp through nvmath-python on these ranks (written against nvmath-python 0.7-1.0's documented API, not yet run): its
    median ms, or the exact reason it could not run."""
    from ..fft import cufftmp_status

    ready, why = cufftmp_status()
    if not ready:
        return {"skipped": why}
    import cupy
    import nvmath.distributed
    from nvmath.distributed.fft import FFT  # the distributed FFT (cuFFTMp with NVSHMEM)

    from .support import timed_on_all_ranks

    nvmath.distributed.initialize(cupy.cuda.runtime.getDevice(), comm, backends=["nvshmem"])
    rows = shape[0] // comm.Get_size()
    x = nvmath.distributed.allocate_symmetric_memory((rows, *shape[1:]), cupy, dtype=cupy.complex64)
    x[...] = cupy.random.default_rng(comm.Get_rank()).random(x.shape, dtype=np.float32)
    with FFT(x, distribution=nvmath.distributed.distribution.Slab.X) as fft:
        fft.plan()
        fft.execute()
        samples = timed_on_all_ranks(comm, fft.execute, cupy.cuda.runtime.deviceSynchronize, repeat)
    nvmath.distributed.free_symmetric_memory(x)
    return {"ms": 1e3 * statistics.median(samples), "samples_ms": [1e3 * s for s in samples], "version": why}


def main(argv=None) -> int:
    """Run the transform on every rank; rank 0 prints the result line."""
    args = _parse(argv)
    from ... import mode, sizes
    from ...errors import DecompositionError
    from . import report
    from .support import start_ranks, timed_on_all_ranks
    from .transpose import _unavailable

    world = start_ranks(args.expect_ranks)
    if world is None:
        return 2
    comm, rank, size, placements = world.comm, world.rank, world.size, world.placements
    shape = tuple(args.shape) if args.shape else (int(sizes.problem_size("ch4_fft3d")),) * 3
    result = {"program": "fft3d", "ranks": size, "shape": list(shape), "real": args.real, "order": args.order, "mode": mode.MODE,
              "placements": placements, "repeat": args.repeat}
    if args.cufftmp:
        try:
            outcome = _cufftmp(comm, shape, args.repeat)
        except Exception as exc:  # the API of nvmath.distributed moves between releases: say exactly what failed
            outcome = {"error": f"{type(exc).__name__}: {exc}"}
        if rank == 0:
            print(f"cuFFTMp: {outcome}", flush=True)
            report({**result, "cufftmp": outcome})
        return 0
    simulated = mode.is_simulator()
    if not simulated:
        reason = _unavailable("nccl", None, placements)
        if reason:
            if rank == 0:
                print(f"error: {reason}", file=sys.stderr, flush=True)
                report({**result, "error": reason})
            return 3
        import cupy

        from .exchange import NcclExchange

        exchange, xp = NcclExchange(comm), cupy
    else:
        exchange, xp = HostExchange(comm), np
    try:
        worker = RankSlabFFT(exchange, shape, real=args.real, order=args.order, xp=xp)
    except DecompositionError as exc:
        if rank == 0:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            report({**result, "error": str(exc)})
        return 3
    slab = worker.slab_of(args.seed)

    def wait() -> None:
        if not simulated:
            exchange.stream.synchronize()
            xp.cuda.runtime.deviceSynchronize()

    def run():
        worker.pack(slab)
        wait()  # the exchange's stream does not wait for the FFTs' stream
        worker.post()
        wait()
        return worker.finish()

    mine = run()
    error = None
    if np.prod(shape) <= 1 << 21:  # small: check against NumPy's whole-array FFT on rank 0
        parts = comm.gather(mine if simulated else mine.get(), root=0)
        if rank == 0:
            full = whole_array(shape, args.seed, args.real)
            reference = np.fft.rfftn(full) if args.real else np.fft.fftn(full)
            from ..fft import relative_error

            error = relative_error(np.concatenate(parts, axis=1), reference)
    samples = timed_on_all_ranks(comm, run, wait, args.repeat)
    if rank == 0:
        ms = 1e3 * statistics.median(samples)
        result.update(rel_error=error, ms=ms, samples_ms=[1e3 * s for s in samples], exchange="nccl" if not simulated else "mpi (host)")
        print(f"fft3d: {size} ranks, {shape}, {'R2C' if args.real else 'C2C'}, {args.order}: {ms:.3f} ms, rel. error {error}", flush=True)
        report(result)
    if not simulated:
        exchange.close()
    return 0 if error is None or error <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
