"""A matrix split by rows over several GPUs, and its transpose by peer copies overlapped with local transposes.

Book §4.1.3 and Appendix D.4.1, in NumPy's row-major order. An `n_rows x n_cols` matrix is split
into P horizontal slices of `h = n_rows / P` rows; part p lives on device `devices[p]`. The
transpose (`n_cols x n_rows`) is split the same way, into slices of `w = n_cols / P` rows. Block
(s, r) of the input, rows of part s and columns `r*w : (r+1)*w`, becomes block (r, s) of the
output, so part r of the output needs one `h x w` block from every input part:

    out[r][:, s*h:(s+1)*h] = in[s][:, r*w:(r+1)*w].T

The work goes in P stages. In stage 0 every part transposes its own diagonal block (no copy).
In stage k, part r receives the block of part (r + k) mod P into a receive buffer with one 2D
copy, then transposes it; every part sends one block and receives one in every stage, so no part
idles. With one stream per part and stage (`run(overlap=True)`), the P copies of a stage run at
once, each GPU's copy engines moving its outgoing and incoming block together, and the transposes
of earlier stages run under them. With the host waiting for each copy (`run(overlap=False)`, the
book's blocking `cudaMemcpy2D`) the copies of a stage run one after another: a stage takes P copy
times instead of one. `StageModel` puts numbers on both.

The transposes are chapter 3's kernel (`gpucourse.kernels.transpose`), launched on strided views:
a view carries its row pitch, which the book passes to its kernel as a leading dimension. Devices
may repeat (`devices=[0, 0]` splits the matrix in two on one GPU), so every step of the
algorithm also runs on one GPU and in the simulator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import mode
from ..arrays import array_module, poison_value
from ..errors import DecompositionError
from ..graphs import capture
from ..kernels import transpose as T
from ..timing import effective_bandwidth_gbs
from .gpus import check_ordinal, new_stream, on_device, synchronize_all, wall_time_ms
from .model import staged_transpose_ms
from .peer import capable_pairs, copy_2d, copy_to_device, restore_all_peer_access, switch_peer_access

#: The transpose kernel used for each block (chapter 3's padded shared-memory tile).
VARIANT = "no_bank_conflicts"
#: How each block is transposed: chapter 3's Numba kernel, or CuPy's own copy of a transposed view.
KERNELS = ("numba", "cupy")
#: Pieces of rows each incoming block is copied and transposed in, in `run_graphs` (a shorter last transpose after the last copy).
GRAPH_CHUNKS = 4
#: How the graph of each GPU brings in the others' blocks (DistributedTranspose._graph_of), and the default.
GRAPH_ROUTES = ("copies", "parallel", "direct")
GRAPH_ROUTE = "parallel"
#: How a transpose can be issued: "graphs" (one CUDA graph per GPU, GRAPH_ROUTE), "graphs-<route>" (another route),
#: "overlapped" (a stream per stage, issued block by block from Python), "blocking" (the host waits for each copy).
HOW = ("graphs", *(f"graphs-{route}" for route in GRAPH_ROUTES), "overlapped", "blocking")


@dataclass(frozen=True)
class RowSplit:
    """How a (rows, cols) matrix splits into `parts` slices of rows, and its transpose likewise."""

    shape: tuple[int, int]
    parts: int

    @property
    def rows_per_part(self) -> int:
        """h: rows of the input each part holds."""
        return self.shape[0] // self.parts

    @property
    def cols_per_part(self) -> int:
        """w: columns of the input whose transpose each part holds (rows of its output slice)."""
        return self.shape[1] // self.parts


def split_rows(shape: tuple[int, int], parts: int) -> RowSplit:
    """Check that a (rows, cols) matrix splits into `parts` equal slices of rows and of columns (DecompositionError if not)."""
    if not isinstance(parts, (int, np.integer)) or parts < 1:
        raise DecompositionError(f"the number of parts must be a positive int; got {parts!r}.")
    if len(shape) != 2 or min(shape) < 1:
        raise DecompositionError(f"the matrix must be 2D and not empty; got shape {tuple(shape)}.")
    rows, cols = (int(n) for n in shape)
    bad = [f"{n} {what}" for n, what in ((rows, "rows"), (cols, "columns")) if n % parts]
    if bad:
        raise DecompositionError(
            f"a {rows} x {cols} matrix does not split over {parts} parts: {' and '.join(bad)} are not a multiple of {parts}. "
            f"Each part holds rows/{parts} rows of the input and columns/{parts} rows of the transpose: choose sides that "
            f"{parts} divides (pad the matrix), or use a number of GPUs or ranks that divides both."
        )
    return RowSplit((rows, cols), int(parts))


def transpose_schedule(parts: int) -> list[list[tuple[int, int]]]:
    """The book's stages: stage k lists (sender, receiver) with receiver r receiving from (r + k) mod P; stage 0 is local."""
    return [[((receiver + stage) % parts, receiver) for receiver in range(parts)] for stage in range(parts)]


def schedule_problems(stages, parts: int) -> list[str]:
    """What is wrong with a schedule of (sender, receiver) stages for `parts` parts, in words (empty: a valid schedule)."""
    problems: list[str] = []
    try:
        stages = [[(int(s), int(r)) for s, r in stage] for stage in stages]
    except (TypeError, ValueError):
        return [f"a schedule is a list of stages, each a list of (sender, receiver) pairs; got {stages!r}."]
    seen: dict[tuple[int, int], int] = {}
    for number, stage in enumerate(stages):
        for s, r in stage:
            if not (0 <= s < parts and 0 <= r < parts):
                problems.append(f"stage {number} has the pair ({s}, {r}), but parts are numbered 0 to {parts - 1}.")
            elif (s, r) in seen:
                problems.append(f"the pair (sender {s}, receiver {r}) comes twice, in stages {seen[(s, r)]} and {number}: each block "
                                "moves once.")
            else:
                seen[(s, r)] = number
        senders = [s for s, _ in stage]
        receivers = [r for _, r in stage]
        for who, listed in (("sends", senders), ("receives", receivers)):
            twice = sorted({p for p in listed if listed.count(p) > 1})
            if twice:
                problems.append(f"in stage {number}, part {twice[0]} {who} {listed.count(twice[0])} blocks: in a stage each part "
                                f"should send one block and receive one, so that no part idles while another copies twice.")
    missing = [(s, r) for s in range(parts) for r in range(parts) if (s, r) not in seen]
    if missing:
        local = [pair for pair in missing if pair[0] == pair[1]]
        what = "the diagonal blocks (a part's own block, transposed without a copy)" if local else "these blocks"
        problems.append(f"{len(missing)} of the {parts * parts} blocks never move; first {missing[0]} (sender, receiver): {what}.")
    return problems


class DistributedMatrix:
    """A matrix split by rows: part p (an `h x n_cols` slice) lives on device `devices[p]`."""

    def __init__(self, shape: tuple[int, int], devices: Sequence[int], parts: Sequence, dtype) -> None:
        self.split = split_rows(shape, len(devices))
        self.shape = self.split.shape
        self.devices = tuple(check_ordinal(d) for d in devices)
        self.parts = list(parts)
        self.dtype = np.dtype(dtype)

    @classmethod
    def filled(cls, shape: tuple[int, int], devices: Sequence[int], dtype=np.float32, *, seed: int | None = None) -> DistributedMatrix:
        """A split matrix of random values in [0, 1) from `seed` (each part made on its own device), or of the poison value."""
        split = split_rows(shape, len(devices))
        xp = array_module()
        parts = []
        for index, device in enumerate(devices):
            with on_device(device):
                part_shape = (split.rows_per_part, split.shape[1])
                if seed is None:
                    parts.append(xp.full(part_shape, poison_value(dtype), dtype=dtype))
                else:
                    parts.append(random_part(seed, index, part_shape, dtype))
        return cls(shape, devices, parts, dtype)

    def gather(self) -> np.ndarray:
        """The whole matrix on the host."""
        synchronize_all(self.devices)
        xp = array_module()
        return np.concatenate([part if xp is np else part.get() for part in self.parts])

    @property
    def nbytes(self) -> int:
        """Bytes of the whole matrix."""
        return self.shape[0] * self.shape[1] * self.dtype.itemsize


def random_part(seed: int, part: int, shape: tuple[int, int], dtype=np.float32):
    """Part `part` of a random matrix, made on the current device: the same values wherever it is made again."""
    xp = array_module()
    return xp.random.default_rng(1000 * seed + part).random(shape, dtype=dtype)


def kernel_view(array):
    """`array` as a kernel argument: in the simulator a NumPy view becomes a simulated device array sharing its memory.

    (The simulator copies a plain NumPy argument to its "device" and back, and refuses a strided view.)
    """
    if mode.is_simulator() and isinstance(array, np.ndarray):
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(array)
    return array


@dataclass
class Step:
    """One block of the transpose: an optional copy to the receiver, then the transpose into the output slice."""

    sender: int
    receiver: int
    copy: tuple | None  # (destination view, source view)
    transpose: Callable[[], None]
    stream: object


class DistributedTranspose:
    """The transpose of a `DistributedMatrix` into another one split the same way: made once, then `run()` only launches."""

    def __init__(self, inp: DistributedMatrix, *, schedule: Sequence[Sequence[tuple[int, int]]] | None = None,
                 tile: int = T.BOOK_TILE, block_rows: int = T.BOOK_BLOCK_ROWS, kernel: str = "numba",
                 peer_access: bool = True) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}; got {kernel!r}")
        self.inp = inp
        parts = len(inp.devices)
        rows, cols = inp.shape
        self.schedule = [list(stage) for stage in (transpose_schedule(parts) if schedule is None else schedule)]
        problems = schedule_problems(self.schedule, parts)
        if problems and schedule is None:  # pragma: no cover - the book's schedule is valid for every P
            raise AssertionError(problems)
        self.schedule_problems = problems
        self.out = DistributedMatrix.filled((cols, rows), inp.devices, inp.dtype)
        self.kernel, self.tile, self.block_rows = kernel, tile, block_rows
        # As the book does, switch peer access on between every pair of GPUs that allows it, so that the block copies go
        # straight over NVLink or PCIe; peer_access=False switches it off, and the driver stages them through host memory.
        # It stays so while the transpose is in use; close() (or the end of a with block) puts back what was there before.
        self._peer_before: dict[tuple[int, int], tuple[bool, bool]] = {}
        self.peer_pairs = self._set_peer_access(peer_access)
        xp = array_module()
        h, w = inp.split.rows_per_part, inp.split.cols_per_part
        self.recv = []
        for device in inp.devices:
            with on_device(device):
                self.recv.append(xp.full((h, cols), poison_value(inp.dtype), dtype=inp.dtype) if parts > 1 else None)
        stages = max(1, len(self.schedule))
        self.streams = [[new_stream(device) for _ in range(stages)] for device in inp.devices]
        # overlap=True: one stream per (receiver, stage); overlap=False: one stream per receiver, copies waited for.
        self._steps = {overlap: self.plan_steps(overlap, h, w) for overlap in (True, False)}
        self._graphs: dict = {}  # run_graphs(): one CUDA graph per GPU and route, made at its first call
        # The streams do not wait for the legacy default stream, where the arrays were filled: wait here, once.
        self.synchronize()

    def _set_peer_access(self, enabled: bool) -> list[tuple[int, int]]:
        """Switch peer access on or off between every pair of the transpose's GPUs that allows it; return those pairs."""
        pairs = capable_pairs(self.inp.devices)
        self._peer_before.update(switch_peer_access(pairs, enabled))
        return pairs

    def close(self) -> None:
        """Put peer access back as it was before this transpose switched it (its buffers go with the object)."""
        restore_all_peer_access(self._peer_before)
        self._peer_before = {}

    def __enter__(self) -> DistributedTranspose:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _views(self, sender: int, receiver: int) -> tuple:
        """(target in the receiver's output, the sender's block, where it lands on the receiver: None for the diagonal block)."""
        h, w = self.inp.split.rows_per_part, self.inp.split.cols_per_part
        target = self.out.parts[receiver][:, sender * h:(sender + 1) * h]
        block = self.inp.parts[sender][:, receiver * w:(receiver + 1) * w]
        landing = None if sender == receiver else self.recv[receiver][:, sender * w:(sender + 1) * w]
        return target, block, landing

    def plan_steps(self, overlap: bool, h: int, w: int) -> list[list[Step]]:
        """Every stage's steps, made once: the views to copy and transpose, the stream, and a bound transpose plan."""
        steps = []
        for number, stage in enumerate(self.schedule):
            made = []
            for sender, receiver in stage:
                stream = self.streams[receiver][number if overlap else 0]
                target, block, landing = self._views(sender, receiver)
                copy = None
                if landing is not None:
                    copy, block = (landing, block), landing
                made.append(Step(sender, receiver, copy, self._transposer(target, block, receiver, stream), stream))
            steps.append(made)
        return steps

    def _transposer(self, target, block, receiver: int, stream) -> Callable[..., None]:
        """A call that transposes `block` into `target` on the receiver's device and `stream` (planned once, here).

        Called with stream=None it launches on CuPy's current stream instead (as inside a graph's capture).
        """
        device = self.inp.devices[receiver]
        with on_device(device), (stream if stream is not None else contextlib.nullcontext()):
            if self.kernel == "numba":
                plan = T.transpose.plan(kernel_view(target), kernel_view(block), VARIANT, self.tile, self.block_rows)
                return lambda stream=stream: plan(stream=stream)
        if mode.is_simulator():
            return lambda stream=None: np.copyto(target, block.T)

        def cupy_copy(stream=stream) -> None:
            with on_device(device), (stream if stream is not None else contextlib.nullcontext()):
                target[...] = block.T

        return cupy_copy

    def _graph_of(self, receiver: int, route: str):
        """A CUDA graph of everything one receiver does: its diagonal block, then each incoming block brought in and transposed.

        `route` (GRAPH_ROUTES): "copies", every block pulled by one copy stream, one after another
        (they share the receiver's link); "parallel", a copy stream per sender, so that the copy
        engines pull from all senders at once; "direct", no copy at all: the transpose kernel reads
        the sender's memory over the link (peer access) and writes the receiver's. With copies, each
        block moves in `GRAPH_CHUNKS` pieces of rows, each transposed as soon as it is in, so the
        last transpose after the last copy is short. The host launches one graph per GPU and switches
        devices P times a run, not once per block.
        """
        import cupy

        if route not in GRAPH_ROUTES:
            raise ValueError(f"route must be one of {GRAPH_ROUTES}; got {route!r}")
        h = self.inp.split.rows_per_part
        incoming = [s for stage in self.schedule for s, r in stage if r == receiver]  # in stage order, the diagonal first
        senders = [s for s in incoming if s != receiver]
        sides = {s: cupy.cuda.Stream(non_blocking=True) for s in (senders if route == "parallel" else senders[:1])}
        local = self._transposer(*self._views(receiver, receiver)[:2], receiver, None) if receiver in incoming else None
        pieces = []  # (side stream or None, copy or None, transpose)
        for sender in senders:
            target, block, landing = self._views(sender, receiver)
            if route == "direct":
                pieces.append((None, None, self._transposer(target, block, receiver, None)))
                continue
            side = sides[sender] if route == "parallel" else sides[senders[0]]
            bounds = np.linspace(0, h, min(GRAPH_CHUNKS, h) + 1).astype(int)
            for r0, r1 in zip(bounds[:-1], bounds[1:]):
                pieces.append((side, (landing[r0:r1], block[r0:r1]), self._transposer(target[:, r0:r1], landing[r0:r1], receiver, None)))
        events = [cupy.cuda.Event(disable_timing=True) for _ in range(len(pieces) + len(sides) + 1)]
        fork, joins = events[-1], events[len(pieces):-1]

        def record() -> None:
            main = cupy.cuda.get_current_stream()
            fork.record(main)
            for side in sides.values():
                side.wait_event(fork)  # each side stream joins the capture
            for (side, copy, _), event in zip(pieces, events):  # queue every copy first, each on its stream
                if copy is not None:
                    copy_2d(*copy, stream=side)
                    event.record(side)
            if local is not None:
                local(None)
            for (_side, copy, transpose), event in zip(pieces, events):
                if copy is not None:
                    main.wait_event(event)
                transpose(None)
            for side, join in zip(sides.values(), joins):
                join.record(side)
                main.wait_event(join)  # and is joined again before the capture ends

        graph = capture(record, f"transpose blocks into part {receiver} ({route})")
        return graph, sides, events

    def run_graphs(self, route: str | None = None) -> None:
        """Queue the whole transpose as one CUDA graph per GPU (made at the first call for `route`): P launches, no per-block host work."""
        route = route or GRAPH_ROUTE
        if mode.is_simulator() or (route == "direct" and not self.peer_pairs and len(set(self.inp.devices)) > 1):
            self.run(True)  # the simulator has no graphs; without peer access a kernel cannot read another GPU
            return
        if route not in self._graphs:
            made = []
            for receiver, device in enumerate(self.inp.devices):
                with on_device(device):
                    made.append(self._graph_of(receiver, route))
            self._graphs[route] = made
        for receiver, device in enumerate(self.inp.devices):
            with on_device(device):
                self._graphs[route][receiver][0].launch(self.streams[receiver][0])

    @property
    def parts(self) -> int:
        """Number of slices (and of stages)."""
        return len(self.inp.devices)

    @property
    def bytes_moved(self) -> int:
        """Bytes a transpose reads plus writes, each element once each way (the book's effective-bandwidth count)."""
        return 2 * self.inp.nbytes

    def run(self, overlap: bool = True) -> None:
        """Queue the whole transpose: stage by stage, each block copied to its receiver (if needed) and transposed there.

        overlap=True (the book's asynchronous version): every (receiver, stage) has its own stream and
        the host waits for nothing, so the P copies of a stage run at the same time (each GPU sends one
        block and receives one, on separate copy engines and both directions of its link), and the
        transposes run under the copies of later stages. overlap=False (the book's blocking
        `cudaMemcpy2D`): one stream per receiver, and the host waits for each receiver's copy before
        it issues the next, so the copies of a stage run one after another; only the transposes,
        launched without a wait, overlap the next copy. Where a copy takes longer than a transpose, a
        stage then takes about P copies instead of one (`StageModel`).
        """
        for stage in self._steps[overlap]:
            for step in stage:
                with on_device(self.inp.devices[step.receiver]):  # a kernel launches in its own device's context
                    if step.copy is not None:
                        copy_2d(*step.copy, stream=step.stream)
                        if not overlap and step.stream is not None:
                            step.stream.synchronize()
                    step.transpose()

    def poison(self) -> None:
        """Fill the output with the poison value (NaN), so that a check after the next run sees every element it missed."""
        for device, part in zip(self.inp.devices, self.out.parts):
            with on_device(device):
                part[...] = poison_value(self.inp.dtype)
        self.synchronize()

    def synchronize(self) -> None:
        """Wait until every device has finished the transpose."""
        synchronize_all(self.inp.devices)

    def mismatches(self) -> int:
        """Elements of the output that differ from the input's transpose (NaN, never written, counts as different)."""
        self.synchronize()
        h, w = self.inp.split.rows_per_part, self.inp.split.cols_per_part
        wrong = 0
        for receiver, device in enumerate(self.inp.devices):
            for sender in range(self.parts):
                block = copy_to_device(self.inp.parts[sender][:, receiver * w:(receiver + 1) * w], device)
                with on_device(device):
                    xp = array_module()
                    target = self.out.parts[receiver][:, sender * h:(sender + 1) * h]
                    wrong += int(xp.count_nonzero(~(target == block.T)))
        return wrong

    def issue(self, how: str) -> None:
        """Queue one transpose the way `how` names (HOW): "graphs", "overlapped" or "blocking"."""
        if how not in HOW:
            raise ValueError(f"how must be one of {HOW}; got {how!r}")
        if how.startswith("graphs"):
            self.run_graphs(how.partition("-")[2] or None)
        else:
            self.run(how == "overlapped")

    def time_ms(self, overlap: bool | str = True, repeat: int = 10) -> float:
        """Median wall-clock ms of one whole transpose, from idle GPUs until all of them are done (as the book times it).

        `overlap`: True or False as in `run`, or a name from HOW.
        """
        how = overlap if isinstance(overlap, str) else ("overlapped" if overlap else "blocking")
        return wall_time_ms(lambda: self.issue(how), self.inp.devices, repeat=repeat)

    def __repr__(self) -> str:
        rows, cols = self.inp.shape
        return (f"DistributedTranspose({rows} x {cols} {self.inp.dtype.name} over devices {list(self.inp.devices)}, "
                f"{len(self.schedule)} stages, kernel={self.kernel!r})")


# ---------------------------------------------------------------------------------------------
# Measurements (the notebook and tools/gpu_ch4.py call these)


@dataclass(frozen=True)
class StageModel:
    """What the book's stage schedule should take on P GPUs, from the time of one block's transpose and of its copy (ms).

    A block is `h x w`, 1/P^2 of the matrix. The model assumes a copy between GPUs takes at least
    as long as a transpose (as it does over any link slower than memory), and that a GPU's incoming
    copies share its link, so they take one copy time each.
    """

    parts: int
    transpose_ms: float  #: one block transposed on one GPU
    copy_ms: float  #: one block copied from one GPU to another

    @classmethod
    def from_rates(cls, nbytes: float, parts: int, transpose_gbs: float, copy_gbs: float) -> StageModel:
        """The model for `nbytes` split over `parts` GPUs: blocks transposed at `transpose_gbs` (effective GB/s) and copied at `copy_gbs` (GB/s)."""
        if parts < 2:
            raise ValueError(f"the model is for two or more GPUs; got parts={parts}")
        block = nbytes / parts**2
        return cls(parts, 2 * block / (transpose_gbs * 1e9) * 1e3, block / (copy_gbs * 1e9) * 1e3)

    @property
    def overlapped_ms(self) -> float:
        """run(overlap=True), in ms: the P - 1 copies each GPU receives, then its last transpose (or its P transposes, if longer)."""
        return staged_transpose_ms(self.parts, self.transpose_ms, self.copy_ms, overlapped=True)

    @property
    def blocking_ms(self) -> float:
        """run(overlap=False), in ms: the diagonal transposes, P - 1 stages of P copies one after another, the last transpose."""
        return staged_transpose_ms(self.parts, self.transpose_ms, self.copy_ms, overlapped=False)


@dataclass(frozen=True)
class TransposeRun:
    """One measured transpose: where it ran, how, its median time, bandwidth and the check's result."""

    devices: tuple[int, ...]
    shape: tuple[int, int]
    how: str
    ms: float
    nbytes: int
    mismatches: int

    @property
    def gbs(self) -> float:
        """Effective bandwidth in GB/s: the matrix read once and written once, over the median time."""
        return effective_bandwidth_gbs(self.nbytes, self.ms)

    @property
    def gpus(self) -> int:
        """Number of different GPUs the parts lived on."""
        return len(set(self.devices))

    def as_dict(self) -> dict:
        """The run as a plain dict (for JSON records)."""
        return {"devices": list(self.devices), "gpus": self.gpus, "shape": list(self.shape), "how": self.how, "ms": self.ms,
                "gbs": self.gbs, "mismatches": self.mismatches}

    def __str__(self) -> str:
        from ..report import rate

        check = "checked" if self.mismatches == 0 else f"{self.mismatches} WRONG"
        return (f"{self.shape[0]} x {self.shape[1]} over devices {list(self.devices)} ({self.how}): {self.ms:.3f} ms, "
                f"{rate(self.gbs)} ({check})")


#: How each way of issuing the transpose is described in a measured run.
HOW_WORDS = {"graphs": "a CUDA graph per GPU", **{f"graphs-{r}": f"a CUDA graph per GPU ({r})" for r in GRAPH_ROUTES},
             "overlapped": "overlapped streams", "blocking": "blocking copies"}


def measure(shape: tuple[int, int], devices: Sequence[int], *, overlaps: Sequence[bool | str] = ("graphs", True, False),
            kernel: str = "numba", repeat: int = 10, seed: int = 0, tile: int = T.BOOK_TILE, block_rows: int = T.BOOK_BLOCK_ROWS,
            peer_access: bool = True) -> list[TransposeRun]:
    """Transpose a random split matrix over `devices` each way in `overlaps` (True, False or a name from HOW): check, then time (wall clock)."""
    inp = DistributedMatrix.filled(shape, devices, seed=seed)
    runs = []
    with DistributedTranspose(inp, kernel=kernel, tile=tile, block_rows=block_rows, peer_access=peer_access) as transpose:
        for overlap in overlaps:
            name = overlap if isinstance(overlap, str) else ("overlapped" if overlap else "blocking")
            transpose.poison()
            transpose.issue(name)
            wrong = transpose.mismatches()
            ms = transpose.time_ms(name, repeat=repeat)
            how = f"{HOW_WORDS[name]}, {kernel} kernel" if len(devices) > 1 else f"{kernel} kernel"
            if len(set(devices)) > 1:
                how += f", peer access {'on' if transpose.peer_pairs and peer_access else 'off'}"
            runs.append(TransposeRun(tuple(devices), inp.shape, how, ms, transpose.bytes_moved, wrong))
    return runs


def one_gpu_transpose(shape: tuple[int, int], *, repeat: int = 10, seed: int = 0, tile: int = T.BOOK_TILE,
                      block_rows: int = T.BOOK_BLOCK_ROWS) -> TransposeRun:
    """Chapter 3's transpose of the whole matrix on the current GPU, timed with CUDA events (gpucourse.benchmark) and checked."""
    from ..timing import benchmark

    xp = array_module()
    inp = random_part(seed, 0, shape)
    out = xp.full(shape[::-1], poison_value(np.float32), dtype=np.float32)
    plan = T.transpose.plan(kernel_view(out), kernel_view(inp), VARIANT, tile, block_rows)  # checked and bound once
    plan()
    synchronize_all()
    wrong = int(xp.count_nonzero(~(out == inp.T)))
    timing = benchmark(plan, warmup=1, repeat=repeat)
    return TransposeRun((0,), tuple(shape), "one kernel, CUDA events" if not timing.simulated else "one kernel",
                        timing.median_ms, 2 * inp.nbytes, wrong)
