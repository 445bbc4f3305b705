"""Several GPUs that pay: the Jacobi iteration (or explicit heat steps) split into slabs of rows, one per GPU, with halos exchanged.

* `slabs`: the decomposition (which rows each part owns and holds, which rows each sweep updates and
  each exchange moves); shared by every way of exchanging;
* `peer`: one process, one stream pair per GPU, halos pulled by peer copies while the interior is swept;
* `ranks`: one MPI process per GPU, halos exchanged with NCCL (or, without NCCL, staged through the host);
* `scaling`: strong and weak scaling against the course's own one-GPU sweep, and the record.
"""

from . import slabs
from .peer import PeerJacobi
from .slabs import SlabPlan, plan_slabs

__all__ = ["PeerJacobi", "SlabPlan", "plan_slabs", "slabs"]
