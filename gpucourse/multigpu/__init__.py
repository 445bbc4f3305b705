"""Chapter 4's code: several GPUs from one process and from one rank per GPU.

Sub-modules, from the bottom up (they import each other by name and the rest of `gpucourse`, never this package's face below):

* `gpus`: which GPUs a process sees, making one current, waiting for them (`on_device`, `device_count`).
* `links`: what joins them (nvidia-smi's topology, NVLink and PCIe figures).
* `peer`: peer access, copies between GPUs, one pair's measured copy rate (`peer_bandwidth`).
* `alltoall`: every GPU sending a block to every other one, in a schedule that keeps each link busy.
* `model`: what splitting work over P GPUs costs (HBM passes, launches, links), the stage model of the transpose.
* `transpose`: the distributed transpose of notebook 4.3 (peer copies, streams, CUDA graphs).
* `fft`: the distributed 3D FFT (slabs) and the periodic Poisson solve on it.
* `mpi`: ranks, launchers, MPI and NCCL exchanges (`python -m gpucourse.multigpu.mpi.transpose`).
* `domains`: the split Jacobi solver of notebook 4.5 (slabs, halos, one process or one rank per GPU).
"""

# The base layer, devices and peer copies, is the package's face: `multigpu.on_device(1)`, `multigpu.peer_bandwidth(0, 1, n)`.
from .gpus import (
    check_ordinal,
    device_count,
    device_of,
    device_table,
    devices,
    memory_info,
    new_stream,
    on_device,
    synchronize_all,
    visible_devices_setting,
    wall_time_ms,
    wall_times_ms,
)
from .peer import (
    PeerTransfer,
    add_from_peer,
    bandwidth_matrix,
    can_access_peer,
    capable_pairs,
    copy_2d,
    copy_peer,
    copy_to_device,
    peer_access,
    peer_access_between,
    peer_bandwidth,
    peer_buffers,
    peer_matrix,
    peer_sum_kernel,
    peer_sweep,
    peer_table,
    restore_all_peer_access,
    restore_peer_access,
    set_peer_access,
    switch_peer_access,
)

__all__ = [
    "PeerTransfer", "add_from_peer", "bandwidth_matrix", "can_access_peer", "capable_pairs", "check_ordinal", "copy_2d", "copy_peer",
    "copy_to_device", "device_count", "device_of", "device_table", "devices", "memory_info", "new_stream", "on_device", "peer_access",
    "peer_access_between", "peer_bandwidth", "peer_buffers", "peer_matrix", "peer_sum_kernel", "peer_sweep", "peer_table",
    "restore_all_peer_access", "restore_peer_access", "set_peer_access", "switch_peer_access", "synchronize_all",
    "visible_devices_setting", "wall_time_ms", "wall_times_ms",
]
