"""Which device each MPI rank takes, and proof that it allocates there (book §4.2.1, mpiDevices / assignDevice).

    mpiexec -n 2 python -m gpucourse.multigpu.mpi.devices

Every rank takes the device of its node-local rank before MPI starts, from the launcher's variable
(`gpucourse.multigpu.mpi.ranks.choose_device_before_init`), and checks it against MPI's own count once MPI
runs (`gpucourse.multigpu.mpi.ranks.place`); without such a variable it chooses after MPI_Init. Then,
one rank after the other, each allocates an array, and every rank counts how many such arrays its
own device holds, from the free memory before and after. One array per device means every rank
has a GPU of its own; two, that two ranks share one. The free memory is the device's: another
program allocating at the same time counts too, so run it with the GPUs to yourself.
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    """Place the ranks, allocate, count; rank 0 prints one line per rank and the result line."""
    parser = argparse.ArgumentParser(prog="python -m gpucourse.multigpu.mpi.devices", description=__doc__.split("\n")[0])
    parser.add_argument("--elements", type=int, default=None, help="float32 elements each rank allocates")
    args = parser.parse_args(argv)
    import gpucourse

    from . import ranks

    chosen = ranks.choose_device_before_init()  # before `from mpi4py import MPI`, which runs MPI_Init
    from mpi4py import MPI

    from ... import sizes
    from .. import gpus
    from . import report

    comm = MPI.COMM_WORLD
    placement = ranks.place(comm, chosen)
    count = args.elements or sizes.problem_size("ch4_alloc")
    arrays_seen = []
    if gpucourse.on_gpu():
        import cupy

        comm.Barrier()
        free_before, _ = gpus.memory_info(placement.device)
        held = None
        for turn in range(comm.Get_size()):
            comm.Barrier()
            if turn == comm.Get_rank():
                with gpus.on_device(placement.device):
                    held = cupy.cuda.runtime.malloc(count * 4)  # not CuPy's pool: the driver's own accounting
                    cupy.cuda.runtime.deviceSynchronize()
            comm.Barrier()
            free_after, _ = gpus.memory_info(placement.device)
            arrays_seen.append(round((free_before - free_after) / (count * 4)))
        comm.Barrier()
        cupy.cuda.runtime.free(held)
    lines = comm.gather((placement.as_dict(), arrays_seen), root=0)
    if comm.Get_rank() == 0:
        for info, seen in lines:
            text = str(ranks.Placement(**info))
            if seen:
                text += f"; arrays on its device after each rank's turn: {seen}"
            print(text, flush=True)
        report({"program": "devices", "ranks": comm.Get_size(), "mode": gpucourse.MODE,
                "placements": [info for info, _ in lines], "arrays_seen": [seen for _, seen in lines]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
