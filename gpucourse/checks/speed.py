"""How fast a student's kernel is, beside the reference and the copy ceiling, measured in one run (GPU only).

Absolute times say little (they depend on the GPU); ratios measured together say a lot. `compare_speed`
times the student's call and the reference's in interleaved samples with `gpucourse.benchmark` (both
launched the same way, on the same arrays), takes the median of the paired ratios and the
device-to-device copy ceiling of the same session, and turns a slow answer into a sentence that says
what is slow and where to look. The reference is the kernel the exercise describes, written plainly,
so that a right answer lands near a ratio of 1 on any GPU, well above the bar. The arrays must not
fit in the L2 cache (`check_beyond_l2`; `elements_beyond_l2` sizes them), so that no figure can
exceed the measured ceiling. `history()` lists every comparison made in this process; with
GPUCOURSE_SPEED_LOG naming a file, each is also appended to it as a line of JSON (the GPU CI runs each
solution's checks several times and records the lowest ratio: it reads that file, since the screen of
answer cells refuses any cell that reaches into `gpucourse.checks`, its own probes too). In the simulator a timing
says nothing about a GPU: `gpu_only_note` prints one line saying that this part is judged only on a GPU.

A slow answer is told what the evidence shows, not a guess: `launch_evidence` records what one call of each
launches (kernels, blocks, threads) and what the compiler made of each kernel (`ptx_facts`: instructions,
those before the first global access, integer divisions; its registers and local memory), and `slow_cause` turns the difference with the
reference into words. The one a grid-stride loop meets: for `range(start, stop, step)` with a step known only
at run time, Numba computes the trip count with a 64-bit division in every thread (and LLVM's unrolling of
any such loop, a `while` too, one more division for its remainder); with one element per thread that set-up
is paid per element. `skipped_work` calls the student's function once more after the timing on poisoned
outputs: an answer that skips its work after its first call must not be timed as doing nothing.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import random
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import mode
from ..device import current_device
from ..timing import bandwidth_ceilings, benchmark, effective_bandwidth_gbs

#: A right answer need not match the reference, but it must reach this fraction of its bandwidth.
SLOWER_THAN_REFERENCE = 0.7
#: Interleaved samples of each kernel per comparison, and timed batches per sample.
ROUNDS, REPEAT = 5, 5
#: Arrays timed by a check are at least this many times the L2 cache.
L2_FACTOR = 4

_HISTORY: list[dict] = []


def history() -> list[dict]:
    """Every speed comparison made in this process, in order: {'exercise', 'ratio' (yours / the reference's), 'bar', 'passed'}."""
    return [dict(entry) for entry in _HISTORY]


def elements_beyond_l2(itemsize: int, at_least: int = 1 << 20) -> int:
    """Elements of `itemsize` bytes for one timed array of a check: L2_FACTOR times the L2 cache, and at least `at_least`."""
    l2 = current_device().l2_cache_bytes or 0
    return max(at_least, -(-L2_FACTOR * l2 // itemsize))


def gpu_only_note(exercise: str, what: str, verb: str = "is", reason: str = "simulator times are Python's, not a GPU's") -> None:
    """In the simulator, say in one line (not a check mark) that `what` is judged only on a GPU, and why."""
    print(f"\u23f1 {exercise}: {what} {verb} judged only on a GPU ({reason}).")


def check_beyond_l2(bytes_per_array: int, what: str) -> None:
    """Refuse a timing whose arrays could live in the L2 cache (a course bug: fix the size in gpucourse.sizes)."""
    l2 = current_device().l2_cache_bytes or 0
    if bytes_per_array < 2 * l2:
        raise ValueError(f"{what}: {bytes_per_array / 1e6:.1f} MB per array fits in twice the {l2 / 1e6:.0f} MB L2 cache; "
                         "timings would exceed the memory ceiling. Use a larger size in gpucourse.sizes.")


@dataclass(frozen=True)
class SpeedComparison:
    """Bandwidths (GB/s) of the student's call, the reference's, and the copy ceiling, measured together."""

    mine_gbs: float
    reference_gbs: float
    copy_gbs: float
    paired_ratio: float | None = None  # the median of the ratios of samples taken side by side
    waits_at: str | None = None  # where the student's call waits for the GPU (gpucourse.timing.benchmark), if it does

    @property
    def mine_fraction(self) -> float:
        """The student's bandwidth as a fraction of the copy ceiling (at most 1)."""
        return min(self.mine_gbs / self.copy_gbs, 1.0)

    @property
    def reference_fraction(self) -> float:
        """The reference's bandwidth as a fraction of the copy ceiling (at most 1)."""
        return min(self.reference_gbs / self.copy_gbs, 1.0)

    @property
    def ratio(self) -> float:
        """Student over reference (from samples taken side by side, where there are some)."""
        return self.paired_ratio if self.paired_ratio is not None else self.mine_gbs / self.reference_gbs

    def summary(self) -> str:
        """One phrase: both bandwidths and their share of the copy ceiling."""
        return (f"{self.mine_gbs:.0f} GB/s = {self.mine_fraction:.0%} of the measured device-to-device copy "
                f"(the reference: {self.reference_gbs:.0f} GB/s = {self.reference_fraction:.0%})")


def compare_speed(mine: Callable[[], object], reference: Callable[[], object], bytes_moved: int, bytes_per_array: int,
                  what: str, rounds: int = ROUNDS) -> SpeedComparison:
    """Time `mine()` and `reference()` in interleaved samples (GPU only); bandwidths from `bytes_moved` per call.

    Each round times one sample of each, the two in a random order, so that a drift of the clocks or
    of a neighbour's load touches both alike; the ratio is the median of the rounds' ratios.
    """
    if mode.is_simulator():
        raise RuntimeError("speed is compared on a GPU only")
    check_beyond_l2(bytes_per_array, what)
    ceiling = bandwidth_ceilings()
    order = random.Random(len(_HISTORY))
    mine_ms, reference_ms = [], []
    waits_at = None
    for _ in range(rounds):
        pair = {}
        for name in order.sample(["mine", "reference"], 2):
            timing = benchmark(mine if name == "mine" else reference, repeat=REPEAT)
            pair[name] = timing.median_ms
            if name == "mine" and timing.waits_at:
                waits_at = timing.waits_at
        mine_ms.append(pair["mine"])
        reference_ms.append(pair["reference"])
    mine_gbs = effective_bandwidth_gbs(bytes_moved, statistics.median(mine_ms))
    reference_gbs = effective_bandwidth_gbs(bytes_moved, statistics.median(reference_ms))
    paired = statistics.median(r / m for m, r in zip(mine_ms, reference_ms))
    return SpeedComparison(mine_gbs, reference_gbs, ceiling.copy_gbs, paired, waits_at)


def record(exercise: str, ratio: float, bar: float) -> bool:
    """Add one speed comparison to `history()` (`ratio`: the student's speed over the reference's); True if it reaches `bar`."""
    passed = ratio >= bar
    entry = {"exercise": exercise, "ratio": round(float(ratio), 4), "bar": bar, "passed": passed}
    _HISTORY.append(entry)
    log = os.environ.get("GPUCOURSE_SPEED_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as file:
            file.write(json.dumps(entry) + "\n")
    return passed


def speed_problem(comparison: SpeedComparison, what: str, where_to_look: str, slowest: float = SLOWER_THAN_REFERENCE) -> str | None:
    """Words for a student's kernel below `slowest` times the reference's bandwidth (None if it keeps up)."""
    if comparison.ratio >= slowest:
        return None
    if comparison.waits_at:  # the cause is the host, not the kernel: say that first
        return (f"your {what} is right, but each call makes the host wait for the GPU ({comparison.waits_at}): the GPU "
                f"idles while Python issues the next launch, {comparison.ratio:.0%} of the reference's speed (at least {slowest:.0%} "
                "expected). Queue the work instead: set or clear device arrays with a kernel, not a copy from the host.")
    return (f"your {what} is right but slow: {comparison.ratio:.0%} of the reference's speed (at least {slowest:.0%} "
            f"expected); it reaches {comparison.mine_fraction:.0%} of the copy ceiling ({comparison.mine_gbs:.0f} GB/s), the "
            f"reference {comparison.reference_fraction:.0%} ({comparison.reference_gbs:.0f} GB/s), measured together on this GPU. "
            f"{where_to_look}")


# ---------------------------------------------------------------------------------------------
# Evidence for a slow verdict: what was launched and what was compiled

#: A thread that handles fewer elements than this pays its loop's set-up per element, or nearly.
FEW_ELEMENTS_PER_THREAD = 4
#: Blocks of fewer threads than this, each moving few elements, are limited by the rate at which the GPU starts blocks.
SMALL_BLOCK = 128

_INSTRUCTION = re.compile(r"^\s+(?:@!?%\w+\s+)?([a-z][\w.]*)")
_INTEGER_DIVISION = re.compile(r"^(?:div|rem)\.[su](?:16|32|64)$")
_GLOBAL_ACCESS = re.compile(r"^(?:ld|st|red|atom)\.global\b")
_STEPPED_RANGE = re.compile(r"\brange\s*\([^()]*(?:\([^()]*\)[^()]*)*,[^()]*(?:\([^()]*\)[^()]*)*,")


@dataclass(frozen=True)
class PtxFacts:
    """Counts read from a kernel's PTX: instructions (parameter loads left out), those before the first global access, divisions."""

    instructions: int
    setup: int
    divisions: tuple[str, ...]


def ptx_facts(ptx: str) -> PtxFacts:
    """What a PTX listing holds: its instructions, how many come before the first global load or store, its integer div/rem."""
    opcodes = []
    for line in ptx.splitlines():
        found = _INSTRUCTION.match(line)
        if found and not found.group(1).startswith("ld.param"):
            opcodes.append(found.group(1))
    first = next((k for k, op in enumerate(opcodes) if _GLOBAL_ACCESS.match(op)), len(opcodes))
    return PtxFacts(len(opcodes), first, tuple(op for op in opcodes if _INTEGER_DIVISION.match(op)))


@dataclass(frozen=True)
class KernelEvidence:
    """One launch of a timed call: its grid and block, and the facts of its compiled code (`ptx_facts`)."""

    name: str
    blocks: int
    threads_per_block: int
    facts: PtxFacts
    stepped_range: bool = False  # its source loops over range(start, stop, step)
    itemsize: int = 4  # bytes per element of its first array argument
    registers: int = 0  # per thread, as the compiler reports them (0: not known)
    local_bytes: int = 0  # local memory per thread (spills, arrays indexed at run time)

    @property
    def threads(self) -> int:
        """Threads in the whole grid."""
        return self.blocks * self.threads_per_block


def _compiled_itemsize(kernel) -> int:
    """Bytes per element of the first array argument of the kernel's latest compiled version (4 if none is known)."""
    for args in reversed(list(getattr(kernel, "overloads", {}))):
        for arg in args:
            dtype = getattr(arg, "dtype", None)
            if getattr(arg, "ndim", 0) and hasattr(dtype, "bitwidth"):
                return max(1, dtype.bitwidth // 8)
    return 4


def kernel_evidence(launch, ptx: str, registers: int = 0, local_bytes: int = 0) -> KernelEvidence:
    """Evidence of one recorded launch (`gpucourse.checks.launches.RecordedLaunch`) whose kernel compiled to `ptx`."""
    from .launches import python_function

    try:
        source = inspect.getsource(python_function(launch.kernel))
    except (OSError, TypeError):
        source = ""
    return KernelEvidence(launch.name, math.prod(launch.blocks), math.prod(launch.threads), ptx_facts(ptx),
                          bool(_STEPPED_RANGE.search(source)), _compiled_itemsize(launch.kernel), registers, local_bytes)


def launch_evidence(call: Callable[[], object]) -> list[KernelEvidence]:
    """On a GPU, run `call()` once and return the evidence of each Numba kernel it launched (empty where there is none)."""
    from .. import compilation
    from ..timing import synchronize
    from .launches import recorded_launches

    with recorded_launches() as launches:
        call()
    synchronize()
    found = []
    for launch in launches:
        try:
            usage = compilation.resource_usage(launch.kernel)[-1]
            found.append(kernel_evidence(launch, compilation.ptx(launch.kernel, -1), usage.registers, usage.local_bytes))
        except Exception:  # noqa: BLE001 - a kernel without Numba's PTX (CuPy's): no evidence from it
            continue
    return found


def slow_cause(mine: Sequence[KernelEvidence], reference: Sequence[KernelEvidence], elements: int) -> str | None:
    """Words for what the evidence shows a slow answer does that the reference does not (None if the evidence shows nothing)."""
    if not mine or not reference:
        return None
    if len(mine) > len(reference):
        names = ", ".join(kernel.name for kernel in mine[:4])
        return (f"Each call launches {len(mine)} kernels ({names}), the reference {len(reference)}: every launch waits for the one "
                "before it and reads its arrays again. Do the work in one kernel.")
    threads = sum(kernel.threads for kernel in mine)
    per_thread = elements / max(threads, 1)
    kernel, model = max(mine, key=lambda k: k.facts.setup), reference[0]
    spilling = next((k for k in mine if k.local_bytes > 0), None)
    if spilling is not None and not any(k.local_bytes for k in reference):
        return (f"Its compiled {spilling.name} keeps {spilling.local_bytes} bytes per thread in local memory (the reference none): "
                "values spilled from registers, or an array indexed at run time, which go to DRAM and back. Keep per-thread values "
                "in scalars, or index local arrays with constants.")
    hungry = max(mine, key=lambda k: k.registers)
    if hungry.registers > 64 and hungry.registers >= 2 * max(model.registers, 1):
        return (f"Its compiled {hungry.name} needs {hungry.registers} registers per thread (the reference {model.registers}): a "
                f"multiprocessor's 65536 registers then hold at most {65536 // hungry.registers} of its threads, and so fewer loads in "
                "flight than the reference keeps. Keep fewer values alive at once.")
    wide = [op for op in kernel.facts.divisions if op.endswith(("s64", "u64")) and op not in model.facts.divisions]
    if per_thread >= FEW_ELEMENTS_PER_THREAD and kernel.stepped_range and len(wide) >= 2:
        return (f"Its compiled {kernel.name} holds {len(wide)} 64-bit integer divisions ({', '.join(wide)}; the reference none): "
                "two `range(start, stop, step)` loops, one inside the other, and Numba computes the inner loop's trip count "
                "again, with a 64-bit division, on every pass of the outer one: once per row. Walk one loop over the whole "
                "array, or write the inner loop as a `while` (measurements/gridstride/ has an H200's figures of both).")
    if per_thread >= FEW_ELEMENTS_PER_THREAD:
        return None
    launched = f"{threads} threads for {elements} elements, about {per_thread:.1f} per thread"
    if kernel.threads_per_block < SMALL_BLOCK and model.threads_per_block >= SMALL_BLOCK:
        return (f"It launches blocks of {kernel.threads_per_block} threads ({launched}), the reference blocks of "
                f"{model.threads_per_block}: blocks that move so few elements are limited by the rate at which the GPU starts "
                f"blocks (notebook 2.3). Use blocks of {SMALL_BLOCK} threads or more.")
    extra = [op for op in kernel.facts.divisions if op not in model.facts.divisions]
    heavier = kernel.facts.setup >= 2 * model.facts.setup + 16
    if not extra and not heavier:
        return None
    compiled = f"its compiled {kernel.name} runs {kernel.facts.setup} instructions before its first global access (the reference {model.facts.setup})"
    if extra:
        compiled += f", integer division among them ({', '.join(sorted(set(extra)))}; the reference has none)"
    if kernel.stepped_range:
        why = ("Numba computes the trip count of `range(start, stop, step)` with a step known only at run time by a 64-bit "
               "division in every thread, before its first element (LLVM's unrolling of the loop adds more set-up, for a "
               "`while` loop too)")
    elif extra:
        why = "an integer division or remainder (`//`, `%`) costs tens of instructions per thread"
    else:
        why = "every thread pays that set-up before it moves anything"
    return (f"Measured: {compiled}; the call runs {launched}. {why}: with one element per thread, every element pays that "
            "set-up. Take one element per thread without a loop (i = cuda.grid(1); if i < n: ...); a grid-stride loop pays off "
            "only when the grid holds no more threads than the GPU runs at once, each covering many elements.")


# ---------------------------------------------------------------------------------------------
# After the timing: does the student's call still do its work?


def _device_arrays(function: Callable) -> dict[int, object]:
    """The device arrays a function closes over or takes as defaults, by id."""
    from .launches import closure_values

    found = {}
    for value in closure_values(function) + list(getattr(function, "__defaults__", None) or ()):
        if hasattr(value, "__cuda_array_interface__") or hasattr(value, "copy_to_host"):
            found[id(value)] = value
    return found


def _write(array, host: np.ndarray) -> None:
    if hasattr(array, "copy_to_device"):
        array.copy_to_device(host)
    else:
        array.set(host)


#: After the timing, an element the student's call writes must be this close to the reference's (sums in another order differ).
RECHECK_RTOL = 1e-3


def _close(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise: equal (integers), or within RECHECK_RTOL of `want` relative to its largest magnitude (floats)."""
    if got.dtype.kind not in "fc":
        return got == want
    scale = float(np.nanmax(np.abs(want))) if want.size and not np.isnan(want).all() else 0.0
    return np.isclose(got, want, rtol=RECHECK_RTOL, atol=RECHECK_RTOL * scale, equal_nan=True)


def skipped_work(mine: Callable[[], object], reference: Callable[[], object], what: str) -> str | None:
    """Words if `mine()`, called again on poisoned outputs, leaves unwritten or wrong what `reference()` writes (else None).

    The outputs are the device arrays both calls close over whose poisoned elements the reference writes again; the elements
    it writes are the ones checked (a stencil's untouched boundary is not). Values are compared within RECHECK_RTOL.
    """
    from ..arrays import poisoned, to_host, unwritten_mask
    from ..timing import synchronize

    mine_arrays = _device_arrays(mine)
    shared = [array for key, array in _device_arrays(reference).items() if key in mine_arrays]
    if not shared:
        return None
    reference()
    synchronize()
    right = [to_host(array).copy() for array in shared]
    outputs = []
    for array, values in zip(shared, right):
        try:
            _write(array, poisoned(values.shape, values.dtype))
        except (TypeError, ValueError, AttributeError):  # a view that cannot be written whole, or no poison for its type
            continue
        reference()
        synchronize()
        written = _close(to_host(array), values) & ~unwritten_mask(values)
        _write(array, values)
        reference()  # outputs computed from a poisoned input are right again
        synchronize()
        if written.any():
            outputs.append((array, values, written))
    for array, values, written in outputs:
        _write(array, poisoned(values.shape, values.dtype))
        mine()
        synchronize()
        got = to_host(array)
        _write(array, values)
        unwritten = written & unwritten_mask(got)
        wrong = written & ~unwritten & ~_close(got, values)
        if unwritten.any() or wrong.any():
            return (f"your {what} does not do its work on every call: called once more after the timing, on an output filled "
                    f"with a marker value, it left {int(unwritten.sum())} of {int(written.sum())} elements unwritten and "
                    f"{int(wrong.sum())} other than the reference's. Each call must compute the whole result again (a call "
                    "that skips its work is timed as doing nothing).")
    return None
