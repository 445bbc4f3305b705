"""The Jacobi iteration split over several GPUs of one process, halos exchanged by peer copies.

Every GPU holds one slab of the mesh (`slabs.plan_slabs`) in a `lane.SlabLane` and sweeps it with the
course's own one-GPU kernel (`kernels.laplace`, on views of its rows), so each point is computed
exactly as on one GPU. A *round* is `halo` sweeps; after it each GPU pulls the `halo` rows on either
side of its slab from its neighbours' memory.

What the host queues in a round, all of it asynchronous (it never waits for a GPU):

1. on each GPU's compute stream: it waits until its own and its neighbours' halos of the last round
   are in (a neighbour must have read our edge rows before we overwrite them), then sweeps 1 .. halo - 1
   and the edge rows of the last sweep, then records "edges ready";
2. on each GPU: the interior of the last sweep (and the residual every `every` sweeps) on the compute
   stream; on its copy stream, a wait for its own and its neighbours' "edges ready", the peer copies
   of its halo rows, and "halos in". The copies run under the interior sweep.

The host switches to each GPU twice a round. With `graphs` the launches of each group are one graph
replay; with a halo of h rows a round is h sweeps, so the host's work per sweep shrinks h times.
In the simulator the same steps run one after another, on one stand-in device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import DecompositionError
from ...kernels import laplace
from ..gpus import check_ordinal, on_device, synchronize_all
from ..peer import capable_pairs, copy_peer, restore_all_peer_access, switch_peer_access
from .lane import SlabLane, record, wait
from .slabs import SlabPlan, plan_slabs


def check_options(plan: SlabPlan, every: int, method: str) -> None:
    """Refuse options the split solvers cannot honour, saying what to change."""
    if not isinstance(every, (int, np.integer)) or every < 1 or every % plan.halo:
        raise DecompositionError(f"the residual is taken at the end of a round: every ({every}) must be a positive multiple of "
                                 f"the halo ({plan.halo})")
    if method not in laplace.METHODS + laplace.BOOK_METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {laplace.METHODS + laplace.BOOK_METHODS}")


class PeerJacobi:
    """Jacobi sweeps of one mesh split over `devices` (repeats allowed: two parts on one GPU), made once, then `run` only queues."""

    def __init__(self, initial: np.ndarray, devices: Sequence[int], *, halo: int = 1, every: int = 100, method: str = "global",
                 graphs: bool = True, overlap: bool = True, peer_access: bool = True, max_checks: int = 1024,
                 heat_d: float | None = None) -> None:
        """`heat_d`: take explicit heat-equation steps with diffusion number d (chapter 6.5's kernel) instead of Jacobi sweeps."""
        initial = np.asarray(initial)
        if initial.ndim != 2:
            raise DecompositionError(f"the initial mesh must be a 2D host array; got shape {initial.shape}")
        self.devices = [check_ordinal(d) for d in devices]
        if not self.devices:
            raise DecompositionError("give at least one device")
        self.plan: SlabPlan = plan_slabs(initial.shape, len(self.devices), halo)
        check_options(self.plan, every, method)
        self.halo, self.every, self.method, self.overlap = halo, every, method, overlap
        self.dtype = initial.dtype
        self.max_checks = max_checks
        self.sweeps_done = 0
        self.peer_pairs = capable_pairs(self.devices)
        self._peer_before = switch_peer_access(self.peer_pairs, peer_access)
        self.lanes = [SlabLane(self.plan, p, initial, device, method=method, every=every, graphs=graphs, overlap=overlap,
                               max_checks=max_checks, heat_d=heat_d) for p, device in enumerate(self.devices)]
        self.overlap = self.lanes[0].overlap
        self.graphs = self.lanes[0].graphs
        self._neighbours = [[self.lanes[q] for q, _, _ in self.plan.received_rows(p)] for p in range(self.plan.count)]
        synchronize_all(self.devices)  # the buffers were filled on the default stream, which the lanes' streams do not wait for

    @property
    def parts(self) -> int:
        """Number of slabs."""
        return self.plan.count

    def _pull(self, p: int, buffer: int) -> None:
        """Queue, on part p's copy stream, the peer copies of its halo rows of `buffer` from its neighbours."""
        lane = self.lanes[p]
        for source, first, stop in self.plan.received_rows(p):
            copy_peer(lane.rows(buffer, first, stop), self.lanes[source].rows(buffer, first, stop), stream=lane.copies)

    def run(self, sweeps: int) -> None:
        """Queue `sweeps` sweeps (a whole number of rounds of `halo` sweeps) on every GPU; the host does not wait for them."""
        if sweeps < 0 or sweeps % self.halo:
            raise DecompositionError(f"sweeps ({sweeps}) must be a whole number of rounds of {self.halo} sweeps (the halo)")
        for _ in range(sweeps // self.halo):
            source = self.sweeps_done % 2
            end = self.sweeps_done + self.halo
            residual = end % self.every == 0
            if residual and end // self.every > self.max_checks:
                raise DecompositionError(f"more than max_checks={self.max_checks} residual checks: make the solver with a larger max_checks")
            for p, lane in enumerate(self.lanes):
                with on_device(lane.device):
                    wait(lane.compute, [lane.halos_in] + [n.halos_in for n in self._neighbours[p]])
                    lane.first(source, residual)
            for p, lane in enumerate(self.lanes):
                with on_device(lane.device):
                    lane.rest(source, residual)
                    wait(lane.copies, [lane.edges_ready] + [n.edges_ready for n in self._neighbours[p]])
                    self._pull(p, end % 2)
                    record(lane.halos_in, lane.copies)
            self.sweeps_done = end

    def synchronize(self) -> None:
        """Wait until every GPU has finished what was queued."""
        synchronize_all(self.devices)

    def residuals(self) -> list[tuple[int, float]]:
        """(sweep, max |change| over the whole mesh) at every residual check so far (waits for the GPUs)."""
        self.synchronize()
        checks = self.sweeps_done // self.every
        per_part = [lane.history_values(checks) for lane in self.lanes]
        return [((k + 1) * self.every, float(max(h[k] for h in per_part))) for k in range(checks)]

    def gather(self) -> np.ndarray:
        """The whole mesh after the sweeps so far, on the host (waits for the GPUs)."""
        from ...arrays import to_host

        self.synchronize()
        current = self.sweeps_done % 2
        mesh = np.empty(self.plan.shape, self.dtype)
        mesh[0], mesh[-1] = (to_host(self.lanes[0].buffers[current])[0], to_host(self.lanes[-1].buffers[current])[-1])
        for lane in self.lanes:
            mesh[lane.part.first:lane.part.stop] = to_host(lane.owned(current))
        return mesh

    def close(self) -> None:
        """Put peer access back as it was before this solver switched it."""
        restore_all_peer_access(self._peer_before)
        self._peer_before = {}

    def __enter__(self) -> PeerJacobi:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        ny, nx = self.plan.shape
        return (f"PeerJacobi({ny} x {nx} {np.dtype(self.dtype).name} over devices {self.devices}, halo {self.halo}, residual every "
                f"{self.every}, graphs {'on' if self.graphs else 'off'}, overlap {'on' if self.overlap else 'off'})")
