"""One slab on one GPU: its two buffers, the sweeps of a round planned once, and the residual's history on the device.

Every way of exchanging halos (peer copies in one process, NCCL between MPI ranks) drives the same
lanes; only how the halo rows arrive differs. A round from buffer `source` is two groups of
launches: `first` (sweeps 1 .. halo - 1, then the edge rows of the last sweep, which the neighbours
need) and `rest` (the interior of the last sweep, under the halo exchange, and the residual every
`every` sweeps). With `graphs` each group is captured once as a CUDA graph and replayed. With `heat_d`
the lane takes explicit steps of the heat equation (chapter 6.5's kernel) instead of Jacobi sweeps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ... import mode
from ...arrays import array_module, to_host
from ...graphs import capture
from ...kernels import heat, laplace
from ..gpus import new_stream, on_device
from ..transpose import kernel_view
from .slabs import SlabPlan


def make_event(ordinal: int):
    """A CUDA event on GPU `ordinal` with timing off (None in the simulator)."""
    if mode.is_simulator():
        return None
    import cupy

    with on_device(ordinal):
        return cupy.cuda.Event(disable_timing=True)


def record(event, stream) -> None:
    """Record `event` on `stream` (nothing in the simulator)."""
    if event is not None:
        event.record(stream)


def wait(stream, events) -> None:
    """Make `stream` wait for each of `events` on the device (nothing in the simulator)."""
    if stream is not None:
        for event in events:
            stream.wait_event(event)


def _launcher(plans: list, stream) -> Callable[[], None]:
    """A call that launches `plans` in order on `stream` (None: CuPy's current stream, as inside a capture)."""
    def launch() -> None:
        for plan in plans:
            plan(stream=stream)
    return launch


def _replayer(graph, stream) -> Callable[[], None]:
    """A call that replays `graph` on `stream`."""
    return lambda: graph.launch(stream)


class SlabLane:
    """Part `index` of `plan` on GPU `device`: made once (arrays, plans, graphs), then `first` / `rest` of each round only launch."""

    def __init__(self, plan: SlabPlan, index: int, initial: np.ndarray, device: int, *, method: str = "global", every: int = 100,
                 graphs: bool = True, overlap: bool = True, max_checks: int = 1024, heat_d: float | None = None) -> None:
        self.plan, self.index, self.device, self.method = plan, index, device, method
        self.part = plan.parts[index]
        # heat_d: explicit heat-equation steps (chapter 6.5's tuned one-step kernel) instead of Jacobi sweeps. That kernel
        # also writes its view's first and last rows (it copies the boundary), so a sweep cannot be cut into edge and
        # interior launches of adjacent views: each sweep is one launch, and the halos move after it (no overlap).
        self.heat_d = heat_d
        self.halo, self.overlap, self.every = plan.halo, overlap and heat_d is None, every
        self.dtype = np.dtype(initial.dtype)
        block = np.ascontiguousarray(plan.local_block(initial, index))
        with on_device(device):
            xp = array_module()
            self.buffers = (xp.asarray(block.copy()), xp.asarray(block.copy()))  # both hold the boundary and the start
            self.partial = xp.zeros(laplace.residual_blocks(self.owned(0).shape), self.dtype)
            self.history = xp.full(max_checks, np.nan, self.dtype)
            self.count = xp.zeros(1, np.int32)
            self.compute, self.copies = new_stream(device), new_stream(device)
            self.edges_ready, self.halos_in = make_event(device), make_event(device)
            self.graphs = bool(graphs) and not mode.is_simulator()
            self.steps: dict = {}
            for source in (0, 1):
                for residual in (False, True):
                    groups = self._round_plans(source, residual)
                    if self.graphs:  # captured on the graph's stream (CuPy's current one), replayed on the lane's
                        made = [capture(_launcher(group, None), f"part {index} of a round on GPU {device}") for group in groups]
                        self.steps[(source, residual)] = tuple(_replayer(graph, self.compute) for graph in made)
                    else:
                        self.steps[(source, residual)] = tuple(_launcher(group, self.compute) for group in groups)

    def owned(self, buffer: int):
        """The owned rows of buffer 0 or 1 (a view)."""
        return self.rows(buffer, self.part.first, self.part.stop)

    def rows(self, buffer: int, first: int, stop: int):
        """Global rows [first, stop) of buffer 0 or 1 (a view of this lane's local array)."""
        return self.buffers[buffer][self.part.local(first):self.part.local(stop)]

    def _sweep(self, source: int, lo: int, hi: int):
        """A plan of one sweep of global rows [lo, hi), from buffer `source` into the other."""
        r0, r1 = self.part.local(lo - 1), self.part.local(hi + 1)
        a, b = self.buffers[source][r0:r1], self.buffers[1 - source][r0:r1]
        if self.heat_d is not None:
            return heat.heat_step_global.plan(kernel_view(a), kernel_view(b), self.heat_d)
        launcher, args = laplace.sweep_call(kernel_view(a), kernel_view(b), self.method)
        return launcher.plan(*args)

    def _round_plans(self, source: int, residual: bool) -> tuple[list, list]:
        """(first, rest): the plans of a round from buffer `source`, before and after the edge rows are ready."""
        h, part = self.halo, self.part
        first = [self._sweep((source + j - 1) % 2, *self.plan.sweep_rows(self.index, j)) for j in range(1, h)]
        last_source = (source + h - 1) % 2
        lo, hi = self.plan.sweep_rows(self.index, h)  # the owned rows
        edges, interior = [(lo, hi)], []  # without overlap: the whole last sweep before the exchange
        if self.overlap and self.plan.count > 1 and hi - lo > 2 * h:
            top = (lo, lo + h) if part.above is not None else None
            bottom = (hi - h, hi) if part.below is not None else None
            edges = [piece for piece in (top, bottom) if piece is not None]
            interior = [(top[1] if top else lo, bottom[0] if bottom else hi)]
        first += [self._sweep(last_source, a, b) for a, b in edges]
        rest = [self._sweep(last_source, a, b) for a, b in interior]
        if residual:
            arrays = (self.owned(0), self.owned(1), self.partial, self.history, self.count)
            rest.append(laplace.record_residual.plan(*(kernel_view(x) for x in arrays)))
        return first, rest

    def first(self, source: int, residual: bool) -> None:
        """Queue the first group of a round from buffer `source` and record "edges ready" (call on this lane's device)."""
        self.steps[(source, residual)][0]()
        record(self.edges_ready, self.compute)

    def rest(self, source: int, residual: bool) -> None:
        """Queue the rest of a round from buffer `source` (call on this lane's device)."""
        self.steps[(source, residual)][1]()

    def history_values(self, checks: int) -> np.ndarray:
        """The first `checks` residuals this lane recorded (waits for them)."""
        return to_host(self.history)[:checks]
