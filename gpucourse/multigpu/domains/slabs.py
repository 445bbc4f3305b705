"""How a 2D mesh splits into slabs of rows, one per GPU (or MPI rank), and which rows each sweep and exchange touches.

The mesh is `ny x nx` values, x contiguous, with fixed boundary rows 0 and ny - 1 and fixed boundary
columns. Its interior rows 1 .. ny - 2 are split into P slabs, as evenly as possible; part p *owns*
global rows [first, stop). It also holds `halo` rows of each neighbour on either side (its *local*
rows, [local_first, local_stop)), so that it can make `halo` sweeps on its own before it needs new
values from its neighbours:

* sweep j of a round (j = 1 .. halo) updates global rows [first - halo + j, stop + halo - j), clipped
  to the interior: the region of valid values shrinks by one row on each side per sweep, and after
  the last sweep exactly the owned rows hold the new iteration;
* then each part receives the `halo` rows on either side of its slab from the neighbours that own
  them, and the next round can start.

With halo = 1 that is the usual exchange of one row per sweep. A wider halo recomputes a few rows
twice (2 x (halo - 1) rows a sweep at most) and exchanges `halo` times fewer times: fewer messages
and fewer launches, the same numbers bit for bit (every point is computed by the same arithmetic
from the same neighbours).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import DecompositionError


@dataclass(frozen=True)
class Part:
    """One slab: the global rows it owns, the rows it holds, and its neighbours (None at the mesh's edge)."""

    index: int
    first: int  #: first owned global row
    stop: int  #: one past the last owned global row
    local_first: int  #: first global row held (halo or boundary row above the owned ones)
    local_stop: int  #: one past the last global row held
    above: int | None  #: the part that owns the rows just above, or None
    below: int | None  #: the part that owns the rows just below, or None

    @property
    def rows(self) -> int:
        """Owned rows."""
        return self.stop - self.first

    @property
    def local_rows(self) -> int:
        """Rows held: the owned ones, the halos and, at the mesh's edges, the boundary row."""
        return self.local_stop - self.local_first

    def local(self, global_row: int) -> int:
        """The local index of `global_row` in this part's arrays."""
        return global_row - self.local_first


@dataclass(frozen=True)
class SlabPlan:
    """The split of a (ny, nx) mesh into `parts` slabs of rows with `halo` rows exchanged every `halo` sweeps."""

    shape: tuple[int, int]
    parts: tuple[Part, ...]
    halo: int

    @property
    def count(self) -> int:
        """Number of slabs."""
        return len(self.parts)

    def sweep_rows(self, part: int, j: int) -> tuple[int, int]:
        """Global rows [lo, hi) that sweep j (1 .. halo) of a round updates on `part`."""
        if not 1 <= j <= self.halo:
            raise ValueError(f"sweep j must be between 1 and the halo ({self.halo}); got {j}")
        p = self.parts[part]
        ny = self.shape[0]
        return max(p.first - self.halo + j, 1), min(p.stop + self.halo - j, ny - 1)

    def received_rows(self, part: int) -> list[tuple[int, int, int]]:
        """After a round, the rows `part` receives: (source part, first global row, stop) for each neighbour."""
        p = self.parts[part]
        ny = self.shape[0]
        pieces = []
        if p.above is not None:
            pieces.append((p.above, max(p.local_first, 1), p.first))
        if p.below is not None:
            pieces.append((p.below, p.stop, min(p.local_stop, ny - 1)))
        return [piece for piece in pieces if piece[2] > piece[1]]

    def halo_bytes(self, itemsize: int) -> int:
        """Bytes all parts receive in one exchange (each received row once)."""
        nx = self.shape[1]
        return sum((stop - first) * nx * itemsize for p in range(self.count) for _, first, stop in self.received_rows(p))

    def redundant_rows(self) -> int:
        """Rows computed more than once over a round, all parts together (the price of a halo wider than one row)."""
        computed = sum(hi - lo for p in range(self.count) for j in range(1, self.halo + 1) for lo, hi in [self.sweep_rows(p, j)])
        return computed - self.halo * (self.shape[0] - 2)

    def local_block(self, mesh: np.ndarray, part: int) -> np.ndarray:
        """The rows of a whole (host) mesh that `part` holds: its initial local array."""
        p = self.parts[part]
        return mesh[p.local_first:p.local_stop]

    def owned_block(self, mesh: np.ndarray, part: int) -> np.ndarray:
        """The rows of a whole mesh that `part` owns."""
        p = self.parts[part]
        return mesh[p.first:p.stop]


def split_rows(ny: int, parts: int) -> list[tuple[int, int]]:
    """The owned global rows [first, stop) of each of `parts` slabs of the ny - 2 interior rows (the first slabs one row more)."""
    interior = ny - 2
    base, extra = divmod(interior, parts)
    bounds, first = [], 1
    for p in range(parts):
        stop = first + base + (1 if p < extra else 0)
        bounds.append((first, stop))
        first = stop
    return bounds


def plan_slabs(shape: tuple[int, int], parts: int, halo: int = 1) -> SlabPlan:
    """Split an (ny, nx) mesh into `parts` slabs of rows with `halo` rows exchanged every `halo` sweeps (DecompositionError if it cannot)."""
    if len(shape) != 2:
        raise DecompositionError(f"the mesh must be 2D (ny, nx); got shape {tuple(shape)}")
    ny, nx = (int(s) for s in shape)
    if ny < 3 or nx < 3:
        raise DecompositionError(f"the mesh needs at least 3 x 3 points (a boundary and an interior); got {ny} x {nx}")
    if not isinstance(parts, (int, np.integer)) or parts < 1:
        raise DecompositionError(f"parts must be a positive whole number of GPUs or ranks; got {parts!r}")
    if not isinstance(halo, (int, np.integer)) or halo < 1:
        raise DecompositionError(f"halo must be a whole number of rows, at least 1; got {halo!r}")
    if ny - 2 < parts:
        raise DecompositionError(
            f"a mesh of {ny} rows has {ny - 2} interior rows: it does not split over {parts} GPUs (each needs at least one row). "
            f"Use at most {ny - 2} GPUs, or a mesh of at least {parts + 2} rows."
        )
    bounds = split_rows(ny, parts)
    smallest = min(stop - first for first, stop in bounds)
    if parts > 1 and halo > smallest:
        raise DecompositionError(
            f"a halo of {halo} rows is wider than the smallest slab ({smallest} rows of {ny - 2} interior rows over {parts} "
            f"parts): a part would need rows from a neighbour's neighbour. Use halo <= {smallest}, fewer parts or a taller mesh."
        )
    made = []
    for p, (first, stop) in enumerate(bounds):
        made.append(Part(p, first, stop, max(first - halo, 0), min(stop + halo, ny),
                         p - 1 if p > 0 else None, p + 1 if p < parts - 1 else None))
    return SlabPlan((ny, nx), tuple(made), int(halo))
