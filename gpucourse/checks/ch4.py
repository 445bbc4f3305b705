"""Checks for the chapter 4 exercises (solutions/ch04_multi_gpu.ipynb).

The checks run the student's code and compare with the package's own answer: device assignment on
random host lists, a prediction of whether splitting a problem over GPUs pays against the model of
`gpucourse.multigpu.model` (each usual mistake recognised by the numbers it gives), an all-to-all on
a stand-in for NCCL with NCCL's rules. The same verdict comes on a GPU and in the simulator.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..multigpu import model as M
from ..multigpu.mpi import ranks
from ..multigpu.mpi.exchange import ExchangeError, loopback_exchange
from ..sizes import problem_size
from . import CheckFailed, fail, passed
from .runs import input_changes, keep_inputs

_SEED = np.random.SeedSequence()  # fresh data for every session; the cases that expose each mistake are always included


def _host_lists() -> list[tuple[list[str], int]]:
    """Host lists and GPUs per host covering every edge class of exercise 4.1, then random ones.

    Properties of a right answer (what the lesson teaches): one device per rank, in rank order; a rank's device is its
    node-local rank (its place among the ranks of its own host, from 0) modulo the host's GPUs, so it lies in
    0..gpus_per_host - 1; ranks of one host get distinct devices while the host has GPUs enough; the answer depends on
    the order of the ranks, not on the order or spelling of the host names; the caller's list is left as it was.
    The cases: interleaved hosts (world rank and node-local rank differ), a host with fewer, exactly as many and more
    ranks than GPUs, every GPU count from 1 to 8 (odd ones included), a single rank, a single host, and random lists.
    """
    cases = [(["c0-7", "c0-2", "c0-7", "c0-3", "c0-7"], 4), (["c0-7", "c0-2", "c0-7", "c0-3", "c0-7", "c0-7"], 2),
             (["b", "a", "b", "a", "b", "a"], 3), (["a", "b"], 1), (["solo"], 1), (["z"] * 7, 7), (["z"] * 6, 5),
             (["n2", "n1", "n2", "n1", "n2", "n1", "n2", "n1", "n2"], 4), (["q"] * 9, 2)]
    for gpus in range(1, 9):  # for every count, one host with exactly as many ranks and one with one rank more (it wraps)
        cases.append(([f"h{(r * 7) % 3}" for r in range(3 * gpus + 1)], gpus))
    rng = np.random.default_rng(_SEED.spawn(1)[0])
    for _ in range(4):
        hosts = [f"node{int(h)}" for h in rng.integers(0, int(rng.integers(2, 5)), size=int(rng.integers(5, 13)))]
        cases.append((hosts, int(rng.integers(1, 9))))
    return cases


def check_assign_devices(assign_devices: Callable[[list[str], int], object]) -> None:
    """Exercise 4.1: `assign_devices(hostnames, gpus_per_host)` returns each rank's device (node-local rank, wrapped)."""
    problems: list[str] = []
    for hosts, gpus in _host_lists():
        want = ranks.assign_devices(hosts, gpus)
        call = f"assign_devices({hosts}, {gpus})"
        given = list(hosts)  # the very list the answer gets: what it does to it, the caller sees
        try:
            returned = assign_devices(given, gpus)
            got = [int(d) for d in returned]
        except Exception as exc:  # any exception is a wrong answer, reported in words
            problems.append(f"{call} raised {type(exc).__name__}: {exc}")
            break
        if given != hosts:
            problems.append(f"{call} changed the list it was given: afterwards it holds {given}. The caller still needs its host "
                            "names: read hostnames, never pop, sort or overwrite it (copy it first if you must change something).")
            break
        if returned is given:
            problems.append(f"{call} returned the list of host names it was given, filled with devices: return a new list.")
            break
        if got == want:
            continue
        if len(got) != len(hosts):
            problems.append(f"{call} returned {len(got)} devices; one per rank ({len(hosts)}) is expected, in rank order.")
        elif any(d >= gpus or d < 0 for d in got):
            bad = next(d for d in got if d >= gpus or d < 0)
            problems.append(f"{call} gives device {bad}, but each host has GPUs 0 to {gpus - 1}: when a host runs more ranks than "
                            "GPUs, wrap the node-local rank with % gpus_per_host (ranks then share a GPU).")
        elif got == [min(local, gpus - 1) for local in ranks.node_local_ranks(hosts)]:
            problems.append(f"{call} returned {got}: ranks beyond a host's GPUs all get its last GPU. Wrap instead, node-local rank "
                            f"% gpus_per_host, so that they share the GPUs in turn (expected {want}).")
        elif got == [local & (gpus - 1) for local in ranks.node_local_ranks(hosts)]:
            problems.append(f"{call} returned {got}: `& (gpus_per_host - 1)` wraps like % only when the count is a power of two, "
                            f"and {gpus} is not. Use node-local rank % gpus_per_host (expected {want}).")
        elif got == [r % gpus for r in range(len(hosts))]:
            problems.append(f"{call} returned {got}, the world rank modulo the GPUs. Ranks of one host are not numbered 0, 1, ... "
                            f"when hosts interleave: number each rank among the ranks of its own host (expected {want}).")
        elif got == [ranks.device_for(local + 1, gpus) for local in ranks.node_local_ranks(hosts)]:
            problems.append(f"{call} returned {got}: node-local ranks count from 0, as device ordinals do (expected {want}).")
        elif sorted(got) == sorted(want) and got == [want[i] for i in sorted(range(len(hosts)), key=lambda i: hosts[i])]:
            problems.append(f"{call} returned the devices in the order of the sorted host names; return them in rank order "
                            f"(expected {want}).")
        else:
            problems.append(f"{call} returned {got}; expected {want}.")
        break
    fail(problems, "Exercise 4.1")
    passed("Exercise 4.1: every rank gets its node-local rank as device, wrapped where a host has fewer GPUs "
           "(the book's interleaved hosts and random ones).")


# --- Exercise 4.2: does splitting pay? ------------------------------------------------------------

_N = 16384
_NVSWITCH = M.H100_NVSWITCH
_PCIE = M.H100_PCIE
_GRAPHS = M.Machine(1500.0, 250.0, launch_us=2.0, latency_us=3.0, tflops=19.5, name="A100 SXM, NVLink 3, steps in CUDA graphs")
#: Two made-up machines (not products) on which a transpose starts to pay at 3 and at 5 GPUs: a verdict that holds only for
#: powers of two, or that looks only at the nearest one, gives itself away.
_FAST_LINK = M.Machine(3000.0, 600.0, launch_us=15.0, latency_us=2.0, name="a 3000 GB/s GPU with a 600 GB/s link (a model case)")
_SLOW_LINK = M.Machine(2000.0, 250.0, launch_us=2.0, latency_us=2.0, name="a 2000 GB/s GPU with a 250 GB/s link (a model case)")
_TRANSPOSE = M.Problem(f"the transpose of {_N}² float32", _N * _N * 4, exchange="all_to_all")
_SMALL_TRANSPOSE = M.Problem("the transpose of 1024² float32", 1024 * 1024 * 4, exchange="all_to_all")
_STENCIL = M.Problem(f"a Jacobi sweep of {_N}² float32", _N * _N * 4, flops=5.0 * _N * _N, exchange="halo", halo_bytes=_N * 4,
                     launches=3)
_SMALL_STENCIL = M.Problem("a Jacobi sweep of 512² float32", 512 * 512 * 4, flops=5.0 * 512 * 512, exchange="halo",
                           halo_bytes=512 * 4, launches=3)
#: A 3D stencil whose halos are 4 planes deep: its link time is a tenth of the run or more, so a halo too many shows.
_DEEP_HALO = M.Problem("a 7-point stencil on 512³ float32, halos 4 planes deep", 512**3 * 4, flops=8.0 * 512**3, exchange="halo",
                       halo_bytes=4 * 512 * 512 * 4, launches=2)
_COMPUTE = M.Problem("a compute-bound kernel (2**24 float32, 4000 flop each)", 2**24 * 4, flops=4000.0 * 2**24)
_SMALL_COMPUTE = M.Problem("a compute-bound kernel (2**16 float32, 4000 flop each)", 2**16 * 4, flops=4000.0 * 2**16)
#: (problem, gpus, machine): large and small, every exchange, every P from 1 to 8, NVSwitch, PCIe and graphs' cheap steps.
SPLIT_CASES = ((_TRANSPOSE, 1, _NVSWITCH), (_TRANSPOSE, 2, _NVSWITCH), (_TRANSPOSE, 4, _NVSWITCH), (_TRANSPOSE, 4, _PCIE),
               (_TRANSPOSE, 8, _GRAPHS), (_SMALL_TRANSPOSE, 4, _NVSWITCH), (_STENCIL, 1, _NVSWITCH), (_STENCIL, 2, _NVSWITCH),
               (_STENCIL, 4, _NVSWITCH), (_STENCIL, 8, _PCIE), (_SMALL_STENCIL, 2, _GRAPHS), (_SMALL_STENCIL, 4, _NVSWITCH),
               (_COMPUTE, 1, _GRAPHS), (_COMPUTE, 4, _NVSWITCH), (_COMPUTE, 8, _PCIE), (_SMALL_COMPUTE, 4, _NVSWITCH),
               # odd and other counts (a rule that holds only for powers of two shows), and halos large enough to count
               (_TRANSPOSE, 3, _NVSWITCH), (_TRANSPOSE, 5, _PCIE), (_SMALL_TRANSPOSE, 7, _GRAPHS), (_STENCIL, 7, _GRAPHS),
               (_DEEP_HALO, 2, _NVSWITCH), (_DEEP_HALO, 3, _PCIE), (_DEEP_HALO, 6, _NVSWITCH), (_COMPUTE, 5, _GRAPHS),
               # both sides of the P at which a transpose starts to pay
               (_TRANSPOSE, 2, _FAST_LINK), (_TRANSPOSE, 3, _FAST_LINK), (_TRANSPOSE, 4, _SLOW_LINK), (_TRANSPOSE, 5, _SLOW_LINK))
_TOLERANCE = 1e-3  # relative: the same arithmetic in another order agrees to far better


def _mistaken_ms(mistake: str, problem: M.Problem, gpus: int, machine: M.Machine) -> float:
    """The estimate as a usual mistake computes it, ms."""
    e = M.split_estimate(problem, gpus, machine)
    memory, compute, link, steps = e.memory_ms, e.compute_ms, e.link_ms, e.step_ms
    sent, messages = e.sent_bytes, e.messages
    launch, latency = machine.launch_us / 1e3, machine.latency_us / 1e3
    if mistake == "link_for_hbm":
        memory = memory * machine.hbm_gbs / machine.link_gbs
    elif mistake == "read_only":
        memory /= 2
    elif mistake == "not_divided":
        memory, compute = memory * gpus, compute * gpus
    elif mistake == "sent_and_received":
        link *= 2
    elif mistake == "both_directions_bandwidth":
        link /= 2
    elif mistake in ("p_peers", "halo_to_all", "two_neighbours"):
        if mistake == "p_peers" and problem.exchange == "all_to_all" and gpus > 1:
            sent, messages = problem.data_bytes / gpus, gpus
        elif mistake == "halo_to_all" and problem.exchange == "halo":
            messages = gpus - 1
            sent = messages * problem.halo_bytes
        elif mistake == "two_neighbours" and problem.exchange == "halo" and gpus > 1:
            sent, messages = 2 * problem.halo_bytes, 2
        link = sent / (machine.link_gbs * M.GB) * 1e3
        steps = (problem.launches + messages) * launch + messages * latency
    elif mistake == "no_steps":
        steps = 0.0
    elif mistake == "no_launch_cost":
        steps = messages * latency
    elif mistake == "no_latency":
        steps = (problem.launches + messages) * launch
    elif mistake == "messages_not_issued":
        steps = problem.launches * launch + messages * latency
    elif mistake == "one_process":
        steps = gpus * (problem.launches + messages) * launch + messages * latency
    elif mistake == "added_compute":
        return memory + compute + link + steps
    elif mistake == "no_compute":
        compute = 0.0
    total = max(memory, compute) + link + steps
    return {"seconds": total / 1e3, "microseconds": total * 1e3}.get(mistake, total)


#: Each usual mistake and what to tell its author, cause first.
SPLIT_MISTAKES = {
    "link_for_hbm": "the memory time uses the link's bandwidth. Each GPU reads and writes its share in its own HBM, at "
                    "machine.hbm_gbs; only the bytes it sends to other GPUs go at machine.link_gbs.",
    "read_only": "the memory time counts the data once. A run reads every byte and writes it back: 2 * data_bytes / P "
                 "cross each GPU's HBM.",
    "not_divided": "the memory and compute times are not divided by the GPUs: each GPU holds 1/P of the data and does 1/P of the "
                   "flops.",
    "sent_and_received": "the link time puts the bytes a GPU sends and those it receives on one direction. A link carries both "
                         "directions at once, each at machine.link_gbs: count only what a GPU sends.",
    "both_directions_bandwidth": "the link time uses both directions' bandwidth for the bytes a GPU sends. machine.link_gbs is "
                                 "per direction, and everything a GPU sends goes one way.",
    "p_peers": "in the all-to-all a GPU sends to P - 1 others, not P: its own block stays, so it sends (P - 1)/P of its share, "
               "in P - 1 messages.",
    "halo_to_all": "a halo goes to the neighbouring slabs only (at most 2), not to every other GPU.",
    "two_neighbours": "with 2 GPUs each slab has one neighbour, so it sends one halo in one message; only middle slabs have two.",
    "no_steps": "the per-step costs are left out: each launch and each message costs machine.launch_us, and each message the "
                "link's machine.latency_us as well. They decide small problems.",
    "no_launch_cost": "the host's cost per step (machine.launch_us, for each launch and each message) is left out.",
    "no_latency": "the link's latency (machine.latency_us, once per message) is left out.",
    "messages_not_issued": "only the launches pay machine.launch_us: the host issues every message (a copy) too, so each pays "
                           "machine.launch_us as well as the latency.",
    "one_process": "the steps are counted for all P GPUs: here each GPU has a process of its own (as with MPI), which issues "
                   "only its own launches and messages.",
    "added_compute": "memory and compute times are added: a kernel computes while its loads are in flight, so take the larger "
                     "of the two.",
    "no_compute": "the flops are left out: a compute-bound kernel takes flops / P / (machine.tflops * 1e12) s, longer than its "
                  "memory time.",
    "seconds": "your times are 1000 times too small: return milliseconds.",
    "microseconds": "your times are 1000 times too large: return milliseconds (1 µs = 1e-3 ms).",
}


_GIB = 2**30 / M.GB  # a GiB in GB


def _one_part_off(part: str, factor: float, problem: M.Problem, gpus: int, machine: M.Machine) -> float:
    """The model's estimate (ms) with one part (memory, compute, link, steps, bandwidths: memory and link, or all) times `factor`."""
    e = M.split_estimate(problem, gpus, machine)
    parts = {"memory": e.memory_ms, "compute": e.compute_ms, "link": e.link_ms, "steps": e.step_ms}
    if part == "all":
        return e.total_ms * factor
    for name in ("memory", "link") if part == "bandwidths" else (part,):
        parts[name] *= factor
    return max(parts["memory"], parts["compute"]) + parts["link"] + parts["steps"]


def _halo_off(extra: int, problem: M.Problem, gpus: int, machine: M.Machine) -> float:
    """The estimate with `extra` halos more (bytes and messages) sent by each GPU of a split halo exchange, ms."""
    e = M.split_estimate(problem, gpus, machine)
    if problem.exchange != "halo" or gpus == 1:
        return e.total_ms
    link = e.link_ms + extra * problem.halo_bytes / (machine.link_gbs * M.GB) * 1e3
    steps = e.step_ms + extra * (machine.launch_us + machine.latency_us) / 1e3
    return max(e.memory_ms, e.compute_ms) + link + steps


_PART_WORDS = {"memory": "the memory time", "compute": "the compute time", "link": "the link time", "steps": "the per-step costs",
               "bandwidths": "every time in bytes over a bandwidth (memory and link)", "all": "every part"}
#: Unit slips, one part at a time: (factor on the part's time, what it is in words).
_UNIT_SLIPS = ((1 / _GIB, "GiB (2**30 bytes) where the bandwidths are GB/s, GB = 1e9 bytes: divide bytes by machine.hbm_gbs (or link_gbs) * 1e9"),
               (_GIB, "bytes counted in GiB (2**30) against bandwidths in GB/s (1e9 bytes): use 1e9 throughout"),
               (8.0, "bits: machine.hbm_gbs and link_gbs are in gigaBYTES per second, so divide bytes by it directly, without * 8"),
               (1 / 8, "bits where bytes are meant: the bandwidths are GB/s, bytes per second, not bits"),
               (1e3, "a conversion to ms missing or done twice: µs / 1e3 = ms, and s * 1e3 = ms"),
               (1e-3, "a conversion to ms missing or done twice: µs / 1e3 = ms, and s * 1e3 = ms"),
               (2**40 / 1e12, "TFLOP/s taken as 2**40 flop/s: a TFLOP/s is 1e12 flop/s"),
               (1e12 / 2**40, "TFLOP/s taken as 2**40 flop/s: a TFLOP/s is 1e12 flop/s"))


def _slips() -> list[tuple[str, Callable[..., float]]]:
    """Words and estimate (ms) for each slip that changes one part by a unit or one count by one, generated part by part."""
    found: list[tuple[str, Callable[..., float]]] = []
    for part, words in _PART_WORDS.items():
        for factor, unit in _UNIT_SLIPS:
            if "TFLOP" in unit and part != "compute" or "TFLOP" not in unit and part == "compute" and factor in (8.0, 1 / 8):
                continue
            found.append((f"{words} is {factor:.4g} times the model's on every case: {unit}.",
                          lambda p, g, m, part=part, factor=factor: _one_part_off(part, factor, p, g, m)))
    for extra in (1, -1):
        found.append((f"the halo exchange sends one halo {'too many' if extra > 0 else 'too few'} (bytes and message): a slab sends "
                      "one halo to each neighbouring slab, 2 for a middle slab, 1 with 2 GPUs.",
                      lambda p, g, m, extra=extra: _halo_off(extra, p, g, m)))
    return found


def _case(problem: M.Problem, gpus: int, machine: M.Machine) -> str:
    return f"{problem.name} on {gpus} GPU{'s' if gpus > 1 else ''} ({machine.name})"


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= _TOLERANCE * abs(want)


def split_model_problems(predicted_time_ms: Callable[..., object], split_pays: Callable[..., object]) -> list[str]:
    """What is wrong with an answer to exercise 4.2, in words (empty: right on every case)."""
    got: list[float] = []
    for problem, gpus, machine in SPLIT_CASES:
        call = f"predicted_time_ms({problem.name!r}, {gpus}, {machine.name!r})"
        try:
            value = predicted_time_ms(problem, gpus, machine)
        except Exception as exc:  # any exception is a wrong answer, reported in words
            return [f"{call} raised {type(exc).__name__}: {exc}"]
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            return [f"{call} returned {value!r}; return the time in ms, a number."]
        got.append(float(value))
    want = [M.split_estimate_ms(*case) for case in SPLIT_CASES]
    wrong = [i for i, (g, w) in enumerate(zip(got, want)) if not _close(g, w)]
    if wrong:
        first = wrong[0]
        problem, gpus, machine = SPLIT_CASES[first]
        where = f"For {_case(problem, gpus, machine)}: yours {got[first]:.4g} ms, the model's {want[first]:.4g} ms."
        fits = {mistake: sum(_close(g, _mistaken_ms(mistake, *case)) for g, case in zip(got, SPLIT_CASES))
                for mistake in SPLIT_MISTAKES}
        explains = [m for m in SPLIT_MISTAKES if fits[m] == len(SPLIT_CASES)]
        if not explains:  # a mistake together with another: name the one that fits the first wrong case and most others
            explains = sorted((m for m in SPLIT_MISTAKES if _close(got[first], _mistaken_ms(m, *SPLIT_CASES[first]))),
                              key=lambda m: -fits[m])
        if explains and fits[explains[0]] == len(SPLIT_CASES):
            cause = SPLIT_MISTAKES[explains[0]]
            return [f"{cause[0].upper()}{cause[1:]} {where}"]
        slip = next((words for words, estimate in _slips() if all(_close(g, estimate(*case)) for g, case in zip(got, SPLIT_CASES))), None)
        if slip:
            return [f"{slip[0].upper()}{slip[1:]} {where}"]
        if explains:
            cause = SPLIT_MISTAKES[explains[0]]
            return [f"{cause[0].upper()}{cause[1:]} {where}"]
        parts = M.split_estimate(problem, gpus, machine)
        return [f"{where} The model's parts: memory {parts.memory_ms:.4g} ms, compute {parts.compute_ms:.4g} ms (the larger "
                f"counts), link {parts.link_ms:.4g} ms ({parts.sent_bytes:.4g} bytes sent), steps {parts.step_ms:.4g} ms "
                f"({problem.launches} launch{'es' if problem.launches != 1 else ''}, {parts.messages} message"
                f"{'s' if parts.messages != 1 else ''}): compare yours with these."]
    for problem, gpus, machine in SPLIT_CASES:
        if gpus == 1:
            continue
        call = f"split_pays({problem.name!r}, {gpus}, {machine.name!r})"
        try:
            verdict = split_pays(problem, gpus, machine)
        except Exception as exc:  # any exception is a wrong answer, reported in words
            return [f"{call} raised {type(exc).__name__}: {exc}"]
        if not isinstance(verdict, (bool, np.bool_)):
            return [f"{call} returned {verdict!r}; return True or False."]
        split, alone = M.split_estimate_ms(problem, gpus, machine), M.split_estimate_ms(problem, 1, machine)
        if bool(verdict) != (split < alone):
            return [f"{call} says {bool(verdict)}, but {gpus} GPUs take {split:.4g} ms and one GPU {alone:.4g} ms: splitting pays "
                    "when the split run is faster at all, its time below the same estimate with gpus=1."]
    return []


# Properties of a right answer to 4.2 (what notebook 4.3 teaches): the time is max(memory, compute) + link + steps, in ms, with
# memory = 2 bytes / P over HBM (GB = 1e9 bytes), compute = flops / P over TFLOP/s (1e12), link = the bytes ONE GPU sends over
# ONE direction (all-to-all: (P - 1)/P of its share in P - 1 messages; halo: 1 neighbour with 2 GPUs, 2 beyond), steps = one
# process per GPU paying launch_us per launch and per message and latency_us per message; nothing is sent on 1 GPU; the
# verdict is "faster than the same estimate on 1 GPU". The cases: every P from 1 to 8, every exchange, NVSwitch, PCIe and
# graphs' cheap steps, halos deep enough that a halo too many is not lost in the tolerance, and both sides of the P at which a
# transpose starts to pay (3 and 5 GPUs); tested on generated answers in tests/test_checks_properties_ch4_7.py.
def check_split_estimate(predicted_time_ms: Callable[..., object], split_pays: Callable[..., object]) -> None:
    """Exercise 4.2: `predicted_time_ms(problem, gpus, machine)` is the first estimate, `split_pays` compares it with one GPU."""
    fail(split_model_problems(predicted_time_ms, split_pays), "Exercise 4.2")
    splits = [M.splitting_pays(*case) for case in SPLIT_CASES if case[1] > 1]
    passed(f"Exercise 4.2: your estimate matches the model on {len(SPLIT_CASES)} cases (transposes, stencils, compute, small and "
           f"large, NVLink, PCIe, CUDA graphs), and tells the {sum(splits)} splits that pay from the "
           f"{len(splits) - sum(splits)} that do not.")


def _received_problems(received, sends, size: int) -> list[str]:
    for rank in range(size):
        for peer in range(size):
            got, want = received[rank][peer], sends[peer][rank]
            if np.array_equal(got, want):
                continue
            if np.isnan(got).all():
                if peer == rank:
                    return [f"recv[{rank}] on rank {rank} was never written: a rank's block for itself must arrive too (send it to "
                            "yourself inside the group, or copy send[comm.rank] into recv[comm.rank])."]
                return [f"recv[{peer}] on rank {rank} was never written: receive from every rank p into recv[p]."]
            if peer != rank and np.array_equal(got, sends[peer][peer]):
                return [f"rank {peer} sent its block send[{peer}] to rank {rank}; rank p must send send[q] to rank q (the block "
                        f"meant for q), so rank {rank} should get rank {peer}'s send[{rank}]."]
            source = next((q for q in range(size) if np.array_equal(got, sends[q][rank])), None)
            if source is not None:
                return [f"recv[{peer}] on rank {rank} holds the block of rank {source}: receive from rank p into recv[p]."]
            return [f"recv[{peer}] on rank {rank} holds wrong values; it should hold what rank {peer} has in send[{rank}]."]
    return []


#: Ranks of the all-to-all check: even and odd counts, then a rank alone (its own block only; last: its deadlock says less).
ALL_TO_ALL_RANKS = (2, 3, 4, 5, 1)


# Properties of a right answer to 4.3: rank r's recv[p] holds rank p's send[r] for every p, its own block included; send is
# never written; the calls obey NCCL's rule (a send completes when its receive is posted), so they are grouped or ordered.
# The cases: 2 to 5 ranks (odd and even), then 1 rank alone.
def check_all_to_all(all_to_all: Callable[..., object]) -> None:
    """Exercise 4.3: `all_to_all(comm, send, recv)` gives every rank p's send[r] to rank r's recv[p], with grouped sends and receives."""
    h, w = problem_size("ch4_exercise_slice")
    rng = np.random.default_rng(_SEED.spawn(1)[0])
    problems: list[str] = []
    groups_per_rank: list[int] = []  # groups of calls each rank issued (an ungrouped call is a group of its own)

    def watched(comm, send, recv):
        all_to_all(comm, send, recv)
        groups_per_rank.append(sum(1 for group in comm.fabric.groups[comm.rank] if group))

    for size in ALL_TO_ALL_RANKS:
        sends = [rng.random((size, h, w), dtype=np.float32) for _ in range(size)]
        kept = keep_inputs([f"rank {rank}'s send" for rank in range(size)], sends)
        try:
            received = loopback_exchange(watched, sends, (h, w), np.float32)
        except ExchangeError as exc:
            problems.append(f"with {size} ranks: {exc}")
            break
        except CheckFailed:
            raise
        except Exception as exc:  # any other exception is a wrong answer, reported in words
            problems.append(f"with {size} ranks, all_to_all raised {type(exc).__name__}: {exc}")
            break
        changed = input_changes(kept, "all_to_all", "recv")
        if changed:
            problems.append(f"with {size} ranks, {changed[0]} (send is what the rank gives away: NCCL may still be reading it "
                            "until the group completes).")
            break
        found = _received_problems(received, [item.before for item in kept], size)
        if found:
            problems += [f"with {size} ranks: {p}" for p in found]
            break
    fail(problems, "Exercise 4.3")
    if max(groups_per_rank, default=0) <= 1:
        passed("Exercise 4.3: with 1 to 5 ranks every block reaches its rank, in one grouped exchange that cannot deadlock.")
    else:
        passed("Exercise 4.3: with 1 to 5 ranks every block reaches its rank. Your sends and receives go in several steps, "
               "ordered so that every send meets its receive; one `with comm.group():` around them all would issue them "
               "together, with no order to get right.")
