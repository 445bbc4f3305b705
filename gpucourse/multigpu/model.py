"""When does splitting work over P GPUs pay? A performance model on paper, in ms (GB = 1e9 bytes).

Every GPU holds 1/P of the data. Its time has three parts:

* **memory**: it reads and writes its share in HBM (or computes on it, if the arithmetic takes longer);
* **link**: the bytes it must send to other GPUs, over its link's bandwidth *per direction*. A link
  carries both directions at once, so what a GPU receives travels beside what it sends and costs
  no extra time. Through an NVSwitch every GPU talks to all others at its full NVLink bandwidth, so
  an all-to-all is counted as each GPU's outgoing bytes over its own per-direction bandwidth;
* **steps**: what is paid per step, not per byte: the host's cost of each launch or copy it issues
  (10-40 µs from Python, about 0 for the steps inside a CUDA graph), and the link's latency for
  each message.

Splitting pays when this time on P GPUs is below the same model's time on one GPU. A stencil sends
only its halos, a few rows, and pays as soon as the slabs are large enough to hide the steps; a
transpose sends (P-1)/P of its data over a link several times slower than HBM: with overlap it
pays only where HBM bandwidth / link bandwidth < 2 (P + 1) (`transpose_model`), so never over
PCIe or a network at small P, and on NVSwitch only from 3 GPUs on, by little.

Three levels of detail:

* `split_estimate_ms` (exercise 4.2): the first estimate, from a `Problem`'s bytes, flops and
  exchange, with nothing overlapped and one process per GPU;
* `transpose_model` and `jacobi_model`: the distributed transpose of notebook 4.3 (its stages, the
  copies hidden under the transposes when overlapped) and one sweep of the 5-point Jacobi on P slabs
  of rows (the halo exchange hidden behind the interior sweep when overlapped), with the host's
  launches issued from one process or one per GPU, or replaced by CUDA graphs;
* `beyond_one_machine`: the Jacobi model with an InfiniBand link between nodes, an estimate for
  8 to 64 GPUs.

The host's cost is *added* to the GPUs' time: an upper bound (a host that runs far enough ahead of
the GPUs hides part of it), and the one that matches Python issuing every GPU's steps in turn.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DecompositionError

GB = 1e9  #: bytes in a GB (bandwidths in GB/s)
EXCHANGES = ("none", "halo", "all_to_all")  #: what the GPUs of a `Problem` send each other


# ---------------------------------------------------------------------------------------------
# The machine


@dataclass(frozen=True)
class Machine:
    """One GPU's memory, arithmetic and link to the others, and the host's cost per step: what the model needs."""

    hbm_gbs: float  #: HBM bandwidth, GB/s: the measured copy ceiling (or the peak)
    link_gbs: float  #: link bandwidth to the other GPUs, GB/s in each direction (NVSwitch: all of a GPU's NVLinks)
    launch_us: float = 15.0  #: the host's cost per launch or copy it issues, µs (10-40 from Python; ~0 inside a CUDA graph)
    latency_us: float = 2.0  #: the link's latency per message, µs
    tflops: float = 67.0  #: arithmetic peak, TFLOP/s (67: an H100 SXM in float32 without tensor cores)
    kernel_us: float = 2.0  #: the GPU's own cost per kernel on a sweep's critical path (start, tail, a wait on a peer), µs
    name: str = ""

    def __post_init__(self) -> None:
        for what, value, example in (("hbm_gbs", self.hbm_gbs, "3000 for an H100 SXM's measured copy"),
                                     ("link_gbs", self.link_gbs, "450 for NVLink 4 through an NVSwitch, 50 for PCIe 5 or "
                                      "InfiniBand NDR"),
                                     ("tflops", self.tflops, "67 for an H100 SXM in float32")):
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not value > 0 or math.isinf(value):
                raise ValueError(f"{what} must be a positive number (GB/s or TFLOP/s); got {value!r}. Give a measured or rated "
                                 f"figure, e.g. {example}.")
        for what, value in (("launch_us", self.launch_us), ("latency_us", self.latency_us), ("kernel_us", self.kernel_us)):
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not value >= 0 or math.isinf(value):
                raise ValueError(f"{what} must be a number of µs >= 0; got {value!r} (use 0 for a cost you want to leave out).")

    def with_link(self, link_gbs: float, latency_us: float, name: str = "") -> Machine:
        """The same GPU with another link (GB/s a direction, µs latency)."""
        return dataclasses.replace(self, link_gbs=link_gbs, latency_us=latency_us, name=name or self.name)


#: 4 or 8 H100 SXM through NVSwitch: 3000 GB/s copy (chapter 3), 15 µs a launch, and the RATED NVLink 4 figure, 450 GB/s a direction
#: (18 links of 25 GB/s). One pair's peer copy measured 374-397 GB/s (measurements/multigpu_jacobi.json, 4 x H100 80GB HBM3):
#: a model on this constant is an upper bound; `with_link(measured, ...)` gives the honest one.
H100_NVSWITCH = Machine(3000.0, 450.0, launch_us=15.0, latency_us=2.0, tflops=67.0, kernel_us=2.0,
                        name="H100 SXM, NVLink 4 through NVSwitch")
#: The course's record of chapter 4.5's Jacobi run on several GPUs, with its one-GPU copy rate and one pair's peer-copy rate.
JACOBI_RECORD = Path(__file__).resolve().parents[2] / "measurements" / "multigpu_jacobi.json"


@dataclass(frozen=True)
class RecordedRates:
    """Rates read from a course record: the GPUs and date, one GPU's device-to-device copy and one pair's peer copy (GB/s)."""

    gpus: str
    date: str
    hbm_copy_gbs: float
    pair_gbs: float


def recorded_rates(path: Path = JACOBI_RECORD, parts: int = 4) -> RecordedRates:
    """The copy rates of the course's multi-GPU record (GB/s): one GPU's HBM copy and one pair's peer copy on `parts` GPUs."""
    import json

    if not path.exists():
        raise FileNotFoundError(f"{path} is not there: the course's records come with its repository (measurements/); "
                                "pass the path of a record of your own, or type the rates you measured.")
    record = json.loads(path.read_text())
    return RecordedRates(record["gpus"], record["date"], float(record["one_gpu_sweep_events"]["copy_gbs"]),
                         float(record["transpose"][str(parts)]["one_pair_link_gbs"]))


#: The same GPUs through PCIe 5.0 x16 (peer access over the host bridge): ~50 GB/s a direction.
H100_PCIE = H100_NVSWITCH.with_link(50.0, 5.0, "H100, PCIe 5.0 x16")
#: Between nodes: InfiniBand NDR, 400 Gb/s = 50 GB/s a direction, one adapter per GPU.
INFINIBAND_NDR_GBS = 50.0
INFINIBAND_LATENCY_US = 4.0


# ---------------------------------------------------------------------------------------------
# Checks of the input, with messages that say what to change


def _whole(value) -> bool:
    """True for an int (NumPy's too), False for a bool, a float or anything else."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_gpus(gpus: int) -> int:
    if not _whole(gpus) or gpus < 1:
        raise ValueError(f"gpus must be a whole number >= 1; got {gpus!r}.")
    return int(gpus)


def _check_positive(what: str, value: float) -> None:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not value > 0 or math.isinf(value):
        raise ValueError(f"{what} must be a positive number; got {value!r}.")


def _check_count(what: str, value: int, least: int) -> None:
    if not _whole(value) or value < least:
        raise ValueError(f"{what} must be a whole number >= {least}; got {value!r}.")


def slab_rows(rows: int, gpus: int, halo_rows: int = 1) -> int:
    """Rows of the largest slab when `rows` rows are split over `gpus` GPUs (DecompositionError if a GPU gets too few)."""
    _check_gpus(gpus)
    _check_count("the number of rows", rows, 1)
    if rows < gpus:
        raise DecompositionError(f"a mesh of {rows} rows does not split over {gpus} GPUs: every GPU needs rows of its own. "
                                 f"Use at most {rows} GPUs, or a mesh of at least {gpus} rows.")
    largest = -(-rows // gpus)
    smallest = rows // gpus
    if gpus > 1 and smallest < halo_rows:
        raise DecompositionError(f"a halo of {halo_rows} rows is wider than the slabs of {smallest} rows that {rows} rows make over "
                                 f"{gpus} GPUs: a GPU would need rows from beyond its neighbour. Use fewer GPUs (at most "
                                 f"{rows // halo_rows}), a narrower halo, or more rows.")
    return largest


def _ms(nbytes: float, gbs: float) -> float:
    """Time to move `nbytes` at `gbs` GB/s, in ms."""
    return nbytes / (gbs * GB) * 1e3


# ---------------------------------------------------------------------------------------------
# The first estimate (exercise 4.2)


@dataclass(frozen=True)
class Problem:
    """A piece of work as the estimate sees it: its bytes and flops on one GPU, and what the GPUs exchange when it is split."""

    name: str
    data_bytes: float  #: bytes of its data; one run reads each once and writes each once in HBM
    flops: float = 0.0  #: arithmetic of one run, flop
    exchange: str = "none"  #: "none", "halo" (to the neighbouring slabs) or "all_to_all" (every GPU to every other)
    halo_bytes: float = 0.0  #: bytes a GPU sends to each neighbour in one run ("halo" only)
    launches: int = 1  #: kernel launches each GPU needs for one run

    def __post_init__(self) -> None:
        _check_positive("data_bytes", self.data_bytes)
        if not self.flops >= 0:
            raise ValueError(f"flops must be >= 0; got {self.flops!r}.")
        if self.exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}; got {self.exchange!r}.")
        if self.exchange == "halo":
            _check_positive("halo_bytes (the bytes a GPU sends each neighbour)", self.halo_bytes)
        _check_count("launches", self.launches, 1)


@dataclass(frozen=True)
class Estimate:
    """The first estimate of one run on P GPUs, by part (ms): nothing overlaps, so the parts add up."""

    gpus: int
    memory_ms: float  #: each GPU reads and writes its share in HBM
    compute_ms: float  #: each GPU's share of the flops at the arithmetic peak
    link_ms: float  #: the bytes each GPU sends, over its link's per-direction bandwidth
    step_ms: float  #: the host's cost per launch and copy, and the link's latency per message
    sent_bytes: float  #: bytes each GPU sends (it receives as many, on the link's other direction)
    messages: int  #: messages each GPU sends

    @property
    def total_ms(self) -> float:
        """The whole run, ms: the larger of memory and compute (a kernel overlaps them), plus link and steps."""
        return max(self.memory_ms, self.compute_ms) + self.link_ms + self.step_ms


def exchanged(problem: Problem, gpus: int) -> tuple[float, int]:
    """(bytes, messages) each GPU sends in one run of `problem` on `gpus` GPUs (the busiest GPU where they differ)."""
    if gpus == 1 or problem.exchange == "none":
        return 0.0, 0
    if problem.exchange == "halo":
        neighbours = min(gpus - 1, 2)  # the middle slabs have two neighbours; with 2 GPUs each has one
        return neighbours * problem.halo_bytes, neighbours
    share = problem.data_bytes / gpus
    return share * (gpus - 1) / gpus, gpus - 1  # all but its own block goes to the P - 1 others


def split_estimate(problem: Problem, gpus: int, machine: Machine) -> Estimate:
    """The first estimate of one run of `problem` on `gpus` GPUs, part by part (ms); one process per GPU issues its steps."""
    _check_gpus(gpus)
    sent, messages = exchanged(problem, gpus)
    return Estimate(gpus=gpus,
                    memory_ms=_ms(2 * problem.data_bytes / gpus, machine.hbm_gbs),
                    compute_ms=problem.flops / gpus / (machine.tflops * 1e12) * 1e3,
                    link_ms=_ms(sent, machine.link_gbs),
                    step_ms=((problem.launches + messages) * machine.launch_us + messages * machine.latency_us) / 1e3,
                    sent_bytes=sent, messages=messages)


def split_estimate_ms(problem: Problem, gpus: int, machine: Machine) -> float:
    """The first estimate of one run of `problem` on `gpus` GPUs, ms (exercise 4.2's reference answer)."""
    return split_estimate(problem, gpus, machine).total_ms


def splitting_pays(problem: Problem, gpus: int, machine: Machine) -> bool:
    """True where `gpus` GPUs finish `problem` sooner than one GPU, by the first estimate."""
    return split_estimate_ms(problem, gpus, machine) < split_estimate_ms(problem, 1, machine)


# ---------------------------------------------------------------------------------------------
# The distributed transpose (chapter 4.3)


def staged_transpose_ms(parts: int, block_transpose_ms: float, block_copy_ms: float, overlapped: bool = True) -> float:
    """The book's stage schedule on `parts` GPUs from one block's transpose and copy times, ms (`distributed.StageModel`).

    A block is 1/parts² of the matrix. Overlapped (a stream per stage, no host waits): each GPU
    receives parts - 1 blocks over its link, one per stage, its transposes running under the copies,
    so the copies and the last block's transpose set the time, or the parts transposes if those are
    longer. Blocking (the host waits for each copy): a stage's parts copies run one after another.
    """
    if parts == 1:
        return block_transpose_ms
    if overlapped:
        return max((parts - 1) * block_copy_ms + block_transpose_ms, parts * block_transpose_ms)
    return 2 * block_transpose_ms + (parts - 1) * parts * block_copy_ms


@dataclass(frozen=True)
class TransposePrediction:
    """The distributed transpose of an n x n matrix on P GPUs, part by part (ms), beside one GPU's transpose."""

    n: int
    itemsize: int
    gpus: int
    hbm_ms: float  #: each GPU's transposes: its slice read and written once in HBM
    link_ms: float  #: the (P - 1)/P of its slice each GPU sends, over its link's per-direction bandwidth
    gpu_ms: float  #: the GPUs' time: hbm and link as the stages overlap them (or not)
    host_ms: float  #: the host's cost of issuing the launches and copies
    latency_ms: float  #: the link's latency, once for each of a GPU's P - 1 copies
    one_gpu_ms: float  #: the whole matrix transposed on one GPU (one launch)
    overlapped: bool

    @property
    def total_ms(self) -> float:
        """The whole transpose on P GPUs, ms."""
        return self.gpu_ms + self.host_ms + self.latency_ms

    @property
    def speedup(self) -> float:
        """One GPU's time over P GPUs' time."""
        return self.one_gpu_ms / self.total_ms

    @property
    def efficiency(self) -> float:
        """Speed-up over P."""
        return self.speedup / self.gpus

    @property
    def pays(self) -> bool:
        """True where P GPUs transpose sooner than one."""
        return self.total_ms < self.one_gpu_ms


def transpose_model(n: int, itemsize: int, gpus: int, machine: Machine, *, overlapped: bool = True, graphs: bool = False,
                    one_process: bool = True) -> TransposePrediction:
    """The distributed transpose of an n x n matrix (`itemsize` bytes a value) over `gpus` GPUs, by part, in ms.

    Each GPU holds n/P rows and transposes P blocks of them; it sends the P - 1 blocks that belong to
    the others (they come back transposed the other way: every GPU sends and receives at once, each
    on its own direction of the link, so a GPU's time is its outgoing bytes over the per-direction
    bandwidth). The stages follow `staged_transpose_ms`. Per step: each GPU issues P transposes and
    P - 1 copies; from one process the host issues all GPUs' steps in turn (P (2P - 1) of them, the
    P² that makes many GPUs slow from Python), with a process per GPU only its own; CUDA graphs
    remove the host's cost. Each copy pays the link's latency.

    Left out: the copies' own HBM traffic (it runs at link speed under the transposes). With
    overlap, the model pays where HBM/link bandwidth < 2 (P + 1), latency and launches aside.
    """
    _check_gpus(gpus)
    _check_count("n", n, 1)
    _check_count("itemsize", itemsize, 1)
    rows = slab_rows(n, gpus, halo_rows=1)
    slice_bytes = rows * n * itemsize
    block_bytes = slice_bytes / gpus
    block_transpose_ms = _ms(2 * block_bytes, machine.hbm_gbs)
    block_copy_ms = _ms(block_bytes, machine.link_gbs)
    steps_per_gpu = 2 * gpus - 1
    issuing = 0 if graphs else steps_per_gpu * (gpus if one_process else 1)
    one_gpu_ms = _ms(2 * n * n * itemsize, machine.hbm_gbs) + (0 if graphs else machine.launch_us / 1e3)
    return TransposePrediction(n=n, itemsize=itemsize, gpus=gpus,
                               hbm_ms=gpus * block_transpose_ms, link_ms=(gpus - 1) * block_copy_ms,
                               gpu_ms=staged_transpose_ms(gpus, block_transpose_ms, block_copy_ms, overlapped),
                               host_ms=issuing * machine.launch_us / 1e3, latency_ms=(gpus - 1) * machine.latency_us / 1e3,
                               one_gpu_ms=one_gpu_ms, overlapped=overlapped)


# ---------------------------------------------------------------------------------------------
# The 5-point Jacobi sweep on P slabs of rows


@dataclass(frozen=True)
class JacobiPrediction:
    """One sweep of the 5-point Jacobi on an nx x ny mesh split into P slabs of rows, by part (ms), beside one GPU's sweep."""

    nx: int
    ny: int
    itemsize: int
    gpus: int
    rows_per_gpu: int  #: rows of the largest slab
    hbm_ms: float  #: the slab swept: each of its values read and written once in HBM
    halo_bytes: int  #: bytes crossing the busiest GPU's link in one exchange (every `halo_rows` sweeps), sent and received together
    halo_ms: float  #: one exchange (its outgoing rows over the per-direction link bandwidth, plus the latency per message) per sweep
    gpu_ms: float  #: the GPUs' time a sweep: kernels, sweep and halo exchange, the exchange hidden behind the interior if overlapped
    launch_ms: float  #: the host's time a sweep: every call it issues in a round (launches or graph replays, event waits and
    #: records, peer copies or NCCL calls, device switches), over the round's sweeps
    one_gpu_ms: float  #: the whole mesh swept by one GPU, one launch a sweep
    overlapped: bool
    graphs: bool
    halo_rows: int = 1  #: rows exchanged with each neighbour every `halo_rows` sweeps (a round)
    host_calls: int = 0  #: calls the host issues a round, every GPU's together (one process) or one GPU's (a process each)

    @property
    def sweep_ms(self) -> float:
        """One sweep on P GPUs, ms: the host issues ahead of the GPUs, so the slower of the two sets the pace."""
        return max(self.gpu_ms, self.launch_ms)

    @property
    def host_bound(self) -> bool:
        """True where the GPUs wait for the host (its calls take longer than their sweep)."""
        return self.launch_ms > self.gpu_ms

    @property
    def speedup(self) -> float:
        """One GPU's sweep over P GPUs' sweep."""
        return self.one_gpu_ms / self.sweep_ms

    @property
    def efficiency(self) -> float:
        """Speed-up over P (1: every GPU busy sweeping all the time)."""
        return self.speedup / self.gpus

    @property
    def halo_share(self) -> float:
        """The halo exchange's time over the sweep's time: what it would cost if nothing hid it."""
        return self.halo_ms / self.sweep_ms

    @property
    def pays(self) -> bool:
        """True where P GPUs sweep sooner than one."""
        return self.sweep_ms < self.one_gpu_ms


def _sweep_ms(nx: int, rows: int, itemsize: int, machine: Machine) -> float:
    """HBM time of sweeping `rows` rows of `nx` values (each read and written once), ms."""
    return _ms(2 * itemsize * nx * rows, machine.hbm_gbs)


def round_host_calls(neighbours: int, launches: int, *, one_process: bool = True) -> int:
    """Calls the host issues for one GPU in a round of the split solver, besides its `launches` (counted off the code).

    One process (`domains.peer.PeerJacobi.run`): two device switches, a wait on its own and each
    neighbour's event on each of two streams, a peer copy from each neighbour, one event recorded.
    A rank (`domains.ranks`): a wait on each of two streams, an NCCL group (start, end) of a send and
    a receive per neighbour, one event recorded. CUDA graphs replace the launches only (two replays).
    """
    if neighbours == 0:
        return launches
    exchange = 2 + 2 * (1 + neighbours) + neighbours + 1 if one_process else 2 + 2 + 2 * neighbours + 1
    return exchange + launches


def jacobi_model(nx: int, ny: int, itemsize: int, gpus: int, machine: Machine, launches_per_sweep: int = 3,
                 overlapped: bool = True, graphs: bool = False, *, one_process: bool = True, halo_rows: int = 1,
                 links: tuple[Machine, Machine] | None = None) -> JacobiPrediction:
    """One Jacobi sweep of an nx x ny mesh (`itemsize` bytes a value) on `gpus` slabs of rows, by part, in ms (averaged over a round).

    A round is `halo_rows` = h sweeps, then one exchange. Each GPU sweeps its slab (ny/P rows; the
    largest sets the pace) plus the rows of its halos it sweeps again (h - 1 .. 1 rows per neighbour
    over the round's sweeps: (h - 1) / 2 a sweep on average), and once a round exchanges h rows with
    each neighbour: it sends them and receives as many, both directions of its link at once, so the
    exchange takes the outgoing rows over the per-direction bandwidth plus the latency of each message.
    The middle slabs have two neighbours, the end slabs one. Overlapped, the edge rows of the round's
    last sweep go first and their halos move while its interior is swept. The round's first h - 1
    sweeps are a launch each, the last `launches_per_sweep` (edges, interior, halos). The host issues
    every call of a round (`round_host_calls`: launches, event waits and records, copies, device
    switches), every GPU's in turn from one process or only its own with a process per GPU; CUDA graphs
    replace the launches by two replays and leave the rest. The host runs ahead of the GPUs: a sweep
    takes the longer of the two (`sweep_ms`). One GPU sweeps the whole mesh with one launch a sweep
    (none with graphs). On the GPU each kernel costs `kernel_us` (in a graph too).
    `links` = (left, right): other links to the two neighbours of the busiest GPU (between nodes).
    """
    _check_gpus(gpus)
    _check_count("nx", nx, 1)
    _check_count("ny", ny, 1)
    _check_count("itemsize", itemsize, 1)
    _check_count("launches_per_sweep", launches_per_sweep, 1)
    _check_count("halo_rows", halo_rows, 1)
    rows = slab_rows(ny, gpus, halo_rows)
    h = halo_rows if gpus > 1 else 1
    neighbours = min(gpus - 1, 2)
    hbm_ms = _sweep_ms(nx, rows + neighbours * (h - 1) / 2, itemsize, machine)  # the slab, and the halo rows swept again
    row_bytes = h * nx * itemsize
    over = list(links) if links is not None else [machine, machine]
    exchange_ms = sum(_ms(row_bytes, link.link_gbs) + link.latency_us / 1e3 for link in over[:neighbours])
    boundary_ms = _sweep_ms(nx, min(neighbours, rows), itemsize, machine)  # the last sweep's edge rows
    kernels = launches_per_sweep if gpus > 1 else 1  # one GPU sweeps its whole mesh in one launch
    kernel_ms = machine.kernel_us / 1e3
    if overlapped:  # the round's first sweeps, then edges, then the exchange beside the interior: one kernel a sweep on the path
        round_ms = h * kernel_ms + (h - 1) * hbm_ms + max(hbm_ms, boundary_ms + exchange_ms)
    else:  # the kernels and the exchange one after another
        round_ms = (h - 1 + kernels) * kernel_ms + h * hbm_ms + exchange_ms
    launches = (2 if graphs else h - 1 + kernels) if gpus > 1 else (0 if graphs else 1)
    calls = round_host_calls(neighbours, launches, one_process=one_process) * (gpus if one_process else 1)
    launch_ms = calls * machine.launch_us / 1e3 / h
    one_gpu_ms = max(kernel_ms + _sweep_ms(nx, ny, itemsize, machine), 0.0 if graphs else machine.launch_us / 1e3)
    return JacobiPrediction(nx=nx, ny=ny, itemsize=itemsize, gpus=gpus, rows_per_gpu=rows, hbm_ms=hbm_ms,
                            halo_bytes=2 * neighbours * row_bytes, halo_ms=exchange_ms / h, gpu_ms=round_ms / h, launch_ms=launch_ms,
                            one_gpu_ms=one_gpu_ms, overlapped=overlapped, graphs=graphs, halo_rows=h, host_calls=calls)


@dataclass(frozen=True)
class WeakScaling:
    """Weak scaling: the slab per GPU fixed, the mesh P times as tall; efficiency = one GPU's slab sweep over P GPUs' sweep."""

    prediction: JacobiPrediction  #: the P-GPU sweep of the P times taller mesh
    one_slab_ms: float  #: one GPU sweeping one slab alone, ms

    @property
    def efficiency(self) -> float:
        """One slab on one GPU over the P-GPU sweep (1: the extra GPUs cost nothing)."""
        return self.one_slab_ms / self.prediction.sweep_ms


def jacobi_weak_scaling(nx: int, rows_per_gpu: int, itemsize: int, gpus: int, machine: Machine, launches_per_sweep: int = 3,
                        overlapped: bool = True, graphs: bool = False, *, one_process: bool = True, halo_rows: int = 1) -> WeakScaling:
    """Weak scaling of the Jacobi sweep: `rows_per_gpu` rows of `nx` values on each of `gpus` GPUs (times in ms)."""
    _check_count("rows_per_gpu", rows_per_gpu, 1)
    _check_gpus(gpus)
    on_p = jacobi_model(nx, rows_per_gpu * gpus, itemsize, gpus, machine, launches_per_sweep, overlapped, graphs,
                        one_process=one_process, halo_rows=halo_rows)
    alone = jacobi_model(nx, rows_per_gpu, itemsize, 1, machine, launches_per_sweep, overlapped, graphs)
    return WeakScaling(on_p, alone.sweep_ms)


# ---------------------------------------------------------------------------------------------
# Beyond one machine (an estimate)


@dataclass
class ScalingEstimate:
    """Predicted strong scaling over several nodes: an ESTIMATE from the model, nothing measured."""

    title: str
    rows: list[dict] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    estimate: bool = True  #: always True: these numbers are the model's, not a measurement

    def table(self):
        """The estimate as a `gpucourse.report.Table` (its title and notes say it is an estimate)."""
        from ..report import Table

        headers = ["GPUs", "nodes", "rows per GPU", "sweep (ms)", "speed-up", "efficiency (estimate)"]
        body = [[r["gpus"], r["nodes"], r["rows_per_gpu"], r["sweep_ms"], r["speedup"], r["efficiency"]] for r in self.rows]
        return Table(headers=headers, rows=body, title=self.title, notes=self.assumptions)

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __str__(self) -> str:
        return str(self.table())


def beyond_one_machine(nx: int, ny: int, gpus_list: tuple[int, ...] = (8, 16, 32, 64), *, gpus_per_node: int = 8,
                       machine: Machine = H100_NVSWITCH, network_gbs: float = INFINIBAND_NDR_GBS,
                       network_latency_us: float = INFINIBAND_LATENCY_US, itemsize: int = 4, launches_per_sweep: int = 3,
                       overlapped: bool = True, graphs: bool = True, halo_rows: int = 10) -> ScalingEstimate:
    """Estimated strong scaling of the Jacobi sweep (nx x ny) over nodes of `gpus_per_node` GPUs joined by InfiniBand, in ms.

    One process per GPU (the NCCL solver under mpiexec). Slabs are numbered along the nodes, so a
    node's first and last GPU send one halo over the network (`network_gbs` a direction per GPU, one
    adapter each) and one over NVLink; that GPU sets the pace. Efficiency is against one GPU.
    """
    _check_count("gpus_per_node", gpus_per_node, 1)
    network = machine.with_link(network_gbs, network_latency_us, "InfiniBand")  # validates the figures
    result = ScalingEstimate(
        title=f"ESTIMATE (model, not measured): Jacobi sweep of {nx} x {ny} on nodes of {gpus_per_node} GPUs",
        assumptions=[f"Estimate from gpucourse.multigpu.model, nothing measured: {machine.name or 'GPU'} at {machine.hbm_gbs:g} "
                     f"GB/s HBM, {machine.link_gbs:g} GB/s NVLink a direction in a node, {network_gbs:g} GB/s and "
                     f"{network_latency_us:g} µs between nodes (one adapter per GPU).",
                     f"One process per GPU, a halo of {halo_rows} rows (an exchange every {halo_rows} sweeps), "
                     f"{'CUDA graphs for the launches' if graphs else f'{launches_per_sweep} launches a sweep'}, "
                     f"{machine.launch_us:g} µs for each call the host issues, halo exchange "
                     f"{'hidden behind the interior' if overlapped else 'after the sweep'}; efficiency against one GPU."])
    for gpus in gpus_list:
        _check_gpus(gpus)
        nodes = -(-gpus // gpus_per_node)
        links = (machine, network) if nodes > 1 else None  # the node's edge GPU: one neighbour inside, one outside
        if nodes > 1 and gpus_per_node == 1:
            links = (network, network)
        prediction = jacobi_model(nx, ny, itemsize, gpus, machine, launches_per_sweep, overlapped, graphs, one_process=False,
                                  links=links, halo_rows=halo_rows)
        result.rows.append({"gpus": gpus, "nodes": nodes, "rows_per_gpu": prediction.rows_per_gpu,
                            "sweep_ms": prediction.sweep_ms, "speedup": prediction.speedup,
                            "efficiency": prediction.efficiency})
    return result
