"""The pieces a kernel exercise's check is made of, beyond right values: a trace, compute-sanitizer, speed.

Each returns problems in words (an empty list when all is well) and, where useful, a phrase for
the check's success line. They give the same verdict in both modes wherever the evidence exists in
both (a trace runs in the simulator, in this process or replayed); what only a GPU can show (a
timing, compute-sanitizer) is said to be judged there.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Callable, Sequence

from .. import mode
from .guard import paused
from .remote import evidence
from .runs import host_round_trip_problems
from .sanitizer import racecheck_available, sanitize
from .speed import SLOWER_THAN_REFERENCE, compare_speed, gpu_only_note, launch_evidence, record, skipped_work, slow_cause, speed_problem
from .trace import (
    ReplayError,
    Trace,
    block_race,
    divergent_barrier,
    first_request_example,
    float64_message,
    race_problem,
    traced_run,
    uncoalesced,
    uninitialised_shared_read,
)


@evidence  # under autograde: recorded where the answer runs, replayed by the grader (remote.py)
def trace_of(entry: Callable, arguments: Sequence[tuple[str, str, object]], shared: bool = False) -> tuple[Trace | None, str]:
    """A trace of `entry(*arguments)` and an empty note, or None and a note saying why it could not be traced."""
    try:
        with paused() if mode.on_gpu() else contextlib.nullcontext():  # a replay in a subprocess has its own time limit
            return traced_run(entry, arguments, shared=shared), ""
    except NotImplementedError:
        raise
    except ReplayError as exc:
        return None, f" (its memory accesses could not be traced: {_last_line(str(exc))})"
    except Exception as exc:  # noqa: BLE001 - the run on small data failed: the values already tell what is wrong
        text = re.sub(r"tid=\[[^\]]*\] ctaid=\[[^\]]*\]:\s*", "", str(exc))  # the simulator's thread words
        return None, f" (its memory accesses could not be traced: {type(exc).__name__}: {text[:200]})"


_TRACEBACK = "Traceback (most recent call last):"


def _last_line(text: str) -> str:
    """A failed replay's words with its Python traceback cut to the last line, the error itself."""
    if _TRACEBACK not in text:
        return text
    head, _, tail = text.partition(_TRACEBACK)
    lines = [line.strip() for line in tail.strip().splitlines() if line.strip()]
    return f"{head}{lines[-1] if lines else 'an error in the replay'}"


def hazard(trace: Trace | None, unwritten_hint: str = "") -> str | None:
    """The first hazard a trace shows, in words: a barrier not every thread reaches, a shared-memory race, a read of shared
    memory nobody wrote (followed by `unwritten_hint`), a global element two blocks update without an atomic (None if none)."""
    if trace is None:
        return None
    found = divergent_barrier(trace) or race_problem(trace)
    if found:
        return found
    unwritten = uninitialised_shared_read(trace)
    if unwritten:
        return f"{unwritten} {unwritten_hint}" if unwritten_hint else unwritten
    return block_race(trace)


def trace_naming_races(entry: Callable, arguments: Sequence[tuple[str, str, object]], exercise: str,
                       unwritten_hint: str = "") -> tuple[Trace | None, str]:
    """`trace_of` with shared memory; if the trace shows a hazard (`hazard`), fail with it alone: it is the cause of wrong values.

    `unwritten_hint` follows the words for a shared slot read before anyone wrote it: what the exercise's kernel should store.
    """
    from . import fail

    trace, note = trace_of(entry, arguments, shared=True)
    found = hazard(trace, unwritten_hint)
    if found:
        fail([found], exercise)
    return trace, note


def coalescing_problems(trace: Trace, array: str, shape, advice: str, write: bool = False, itemsize: int = 4) -> list[str]:
    """Words for a warp's uncoalesced requests to `array` (of `shape`, traced), with one request as an example and `advice`."""
    found = uncoalesced(trace, array, itemsize, write)
    if found is None:
        return []
    sectors, ideal = found
    verb = "writes to" if write else "reads of"
    return [f"the {verb} {array} are not coalesced: a warp's request touches {sectors:.1f} sectors of 32 bytes on average, "
            f"{ideal:.1f} if its 32 threads took neighbouring elements. For example, "
            f"{first_request_example(trace.accesses, array, shape, write)}. {advice}"]


def float64_problems(trace: Trace | None) -> list[str]:
    """float64 evidence from the trace (float64 values stored into float32 arrays), else a float64 argument of the answer's
    kernels that `run_checked` saw in this check (a Python float makes a float64 parameter): the same in both modes.

    On a GPU the trace is replayed in the simulator; `run_checked` also prints what the compiled code holds, as advice.
    """
    from .runs import float64_arguments_seen

    message = float64_message(trace) if trace is not None else None
    return [message] if message else float64_arguments_seen()[:1]


@evidence  # under autograde: recorded where the answer runs, replayed by the grader (remote.py)
def racecheck_problems(entry: Callable, arguments: Sequence[tuple[str, str, object]]) -> tuple[list[str], str]:
    """On a GPU, compute-sanitizer's racecheck and synccheck of `entry(*arguments)`: (problems, a phrase for the success line)."""
    if not mode.on_gpu():
        return [], ""
    if not racecheck_available():
        return [], "; compute-sanitizer is not on the PATH, so racecheck and synccheck did not run"
    for tool in ("synccheck", "racecheck"):  # a barrier in a branch first: it also makes racecheck report hazards
        try:
            with paused():  # the run has its own time limit: the check's clock stops meanwhile
                report = sanitize(entry, arguments, tool)
        except subprocess.TimeoutExpired as exc:
            return [f"compute-sanitizer's {tool} run of your launcher did not end within {exc.timeout:.0f} s. Does every loop in "
                    "the kernel end? A `while` whose condition never becomes false runs forever."], ""
        if report.errors:
            return [report.describe()], ""
    return [], "; compute-sanitizer's racecheck and synccheck found no hazard"


def speed_note(exercise: str, what: str) -> None:
    """In the simulator, one line after the success line: the speed of `what` is judged only on a GPU."""
    if mode.is_simulator():
        gpu_only_note(exercise, f"the speed of your {what}")


@evidence  # under autograde: recorded where the answer runs, replayed by the grader (remote.py)
def speed_verdict(exercise: str, what: str, mine: Callable[[], object], reference: Callable[[], object], bytes_moved: int,
                  bytes_per_array: int, where_to_look: str, slowest: float = SLOWER_THAN_REFERENCE) -> tuple[list[str], str]:
    """On a GPU, the student's speed beside the reference and the copy ceiling: (problems, a phrase for the success line).

    A right answer fails when it reaches less than `slowest` times the reference's bandwidth; its message then says
    what the launches and the compiled code show (`slow_cause`), and `where_to_look` only where they show nothing.
    Before the timing a call that copies device arrays to the host is named (`host_round_trip_problems`); after it the
    student's call runs once more on poisoned outputs (`skipped_work`). In the simulator nothing
    is timed (the check then calls `speed_note` after its success line).
    """
    if mode.is_simulator():
        return [], ""
    round_trips = host_round_trip_problems(mine, what)
    if round_trips:
        record(exercise, 0.0, slowest)
        return round_trips, ""
    comparison = compare_speed(mine, reference, bytes_moved, bytes_per_array, what)
    skipped = skipped_work(mine, reference, what)
    if skipped:
        record(exercise, 0.0, slowest)
        return [skipped], ""
    record(exercise, comparison.ratio, slowest)
    if comparison.ratio < slowest and not comparison.waits_at:
        mine_launches = launch_evidence(mine)
        itemsize = mine_launches[0].itemsize if mine_launches else 4
        where_to_look = slow_cause(mine_launches, launch_evidence(reference), bytes_per_array // itemsize) or where_to_look
    problem = speed_problem(comparison, what, where_to_look, slowest)
    return ([problem] if problem else []), "; " + comparison.summary()
