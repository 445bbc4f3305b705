"""How much work a kernel does as its problem grows, beside the reference's: a kernel whose every thread walks the whole
array does about n² work, and is named before a timing loop at full size would run for minutes.

`work_problems(mine, reference, arguments_at, what)` runs `mine(*arguments)` and `reference(*arguments)` at two small
sizes in the simulator and counts the kernel source lines their simulated threads execute (a trace function in each
simulated thread: deterministic, whatever the machine's load). On a GPU the same count is made in a simulator
subprocess, the launchers sent there as the trace's replay sends them (`gpucourse.checks.trace.describe_launcher`): the
verdict is the same in both modes. Mine is named when doubling n multiplies its work by clearly more than it multiplies
the reference's, and mine does several times the reference's work.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import mode
from .remote import evidence

#: The sizes (elements) the work is counted at: small, since lines say it all; one doubling.
SIZES = (128, 256)
#: Mine is named when doubling n multiplies its work GROWTH_MARGIN times more than the reference's, and it does at least
#: EXCESS_WORK times the reference's work at the larger size.
GROWTH_MARGIN = 1.4
EXCESS_WORK = 4.0
#: A replay of the counts in a simulator subprocess (on a GPU) may take this long (seconds).
REPLAY_SECONDS = 120

_CHECKS = Path(__file__).resolve().parent
_KERNELS = _CHECKS.parent / "kernels"


def _is_kernel_code(filename: str) -> bool:
    """Whether lines of this file count as a kernel's work: an answer's code, or the course's kernels (the references)."""
    if filename.startswith("<"):
        return not filename.startswith("<frozen")
    path = Path(filename).resolve()
    if "site-packages" in path.parts or "dist-packages" in path.parts or path.is_relative_to(Path(os.__file__).resolve().parent):
        return False
    if path.is_relative_to(_CHECKS.parent):
        return (path.parent == _CHECKS and path.name.startswith("ch")) or path.is_relative_to(_KERNELS)
    return True


def simulated_lines(run: Callable[[], object]) -> int:
    """The kernel source lines that the simulated threads execute while `run()` runs (simulator only)."""
    counter = itertools.count()  # next() on it is atomic under the GIL: threads may count at once
    kernel_code: dict[object, bool] = {}

    def local(frame, event, arg):
        if event == "line":
            next(counter)
        return local

    def starting(frame, event, arg):
        if event != "call":
            return None
        code = frame.f_code
        counted = kernel_code.get(code)
        if counted is None:
            counted = kernel_code[code] = _is_kernel_code(code.co_filename)
        return local if counted else None

    previous = threading.gettrace()
    threading.settrace(starting)
    try:
        run()
    finally:
        threading.settrace(previous)
    return next(counter)


def _counts_here(launchers: Sequence[Callable], arguments: Sequence[Sequence[tuple[str, str, object]]]) -> list[list[int]]:
    from .trace import _prepared

    return [[simulated_lines(lambda launcher=launcher, given=given: launcher(*_prepared(given))) for given in arguments]
            for launcher in launchers]


_COUNT_SCRIPT = r"""
import json, pickle, sys
import gpucourse
from gpucourse.checks import trace, work
job = pickle.loads(sys.stdin.buffer.read())
launchers = [trace._rebuild(payload, typed_constants=False) for payload in job["payloads"]]
sys.stdout.write("WORK" + json.dumps(work._counts_here(launchers, job["arguments"])))
"""


def _counts_replayed(launchers: Sequence[Callable], arguments: Sequence[Sequence[tuple[str, str, object]]]) -> list[list[int]]:
    from .guard import paused
    from .trace import describe_launcher, in_simulator_subprocess

    job = {"payloads": [describe_launcher(launcher, portable=True) for launcher in launchers], "arguments": [list(a) for a in arguments]}
    with paused():  # the subprocess has its own time limit
        output = in_simulator_subprocess(_COUNT_SCRIPT, job, "WORK", "counting the kernels' work in the simulator failed", REPLAY_SECONDS)
    return json.loads(output)


@evidence
def simulated_work(launchers: Sequence[Callable], arguments: Sequence[Sequence[tuple[str, str, object]]]) -> list[list[int]]:
    """Kernel lines run by each launcher on each argument list (the trace's format), in the simulator here or in a subprocess."""
    return _counts_replayed(launchers, arguments) if mode.on_gpu() else _counts_here(launchers, arguments)


def work_problems(mine: Callable, reference: Callable, arguments_at: Callable[[int], list[tuple[str, str, object]]], what: str,
                  sizes: Sequence[int] = SIZES) -> list[str]:
    """Words for a kernel whose work grows faster with n than the reference's (about n² where the reference's is n).

    `arguments_at(n)`: the arguments of a run on n elements, as `gpucourse.checks.trace.traced_run` takes them.
    """
    from .trace import ReplayError

    small, large = sizes[0], sizes[-1]
    arguments = [arguments_at(n) for n in (small, large)]
    try:
        (mine_small, mine_large), (reference_small, reference_large) = simulated_work([mine, reference], arguments)
    except ReplayError:
        return []  # no count (a launcher the replay cannot send): the other evidence judges it
    if min(mine_small, reference_small) <= 0:
        return []
    growth, reference_growth = mine_large / mine_small, reference_large / reference_small
    excess = mine_large / reference_large
    if growth < GROWTH_MARGIN * max(reference_growth, 1.0) or excess < EXCESS_WORK:
        return []
    exponent = math.log(growth) / math.log(large / small)
    power = "n²" if 1.7 <= exponent < 2.4 else "n³" if 2.6 <= exponent < 3.4 else f"n^{exponent:.1f}"
    return [f"{what} does about {power} work: from n = {small} to n = {large} the lines its threads ran grew {growth:.1f} times, "
            f"the reference's {reference_growth:.1f} times; at n = {large} they are {excess:.0f} times the reference's ({mine_large} "
            f"against {reference_large}, counted in the simulator). Does every thread loop over the whole array, or over the elements "
            "before its own? Let each thread visit only its own elements: for i in range(cuda.grid(1), n, cuda.gridsize(1))."]


def _one_thread_per_element(kernel, threads: int) -> Callable:
    return lambda *arrays: kernel[-(-arrays[0].size // threads), threads](*arrays)


def kernel_work_problems(kernel, reference, arrays_at: Callable[[int], list[tuple[str, object]]], what: str, threads: int = 64,
                         sizes: Sequence[int] = SIZES) -> list[str]:
    """`work_problems` for two kernels launched with one thread per element of their first array (blocks of `threads`);
    `arrays_at(n)`: (name, host array) of each argument of a run on n elements."""
    return work_problems(_one_thread_per_element(kernel, threads), _one_thread_per_element(reference, threads),
                         lambda n: [("traced", name, array) for name, array in arrays_at(n)], what, sizes)
