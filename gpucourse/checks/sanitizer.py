"""compute-sanitizer's racecheck and synccheck on a student's launcher, run as a script (GPU only).

The launcher and everything it reaches are described as for a replay (`gpucourse.checks.trace`),
rebuilt in a fresh Python process with its kernels compiled with line information, and run once on
small arrays under `compute-sanitizer --tool racecheck` (shared-memory hazards: its report names the
two source lines of each) or `--tool synccheck` (invalid uses of barriers and warp-level calls: its
report names the line). On an H200 (compute capability 9.0) synccheck reported no error for a
`cuda.syncthreads()` inside `if t < step:` (measurements/checks_round2.md): the checks name that
mistake from the trace, in both modes, and run synccheck beside racecheck for what it does report.
"""

from __future__ import annotations

import pickle
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import mode
from ..scripts import run_python
from .trace import describe_launcher, source_line

SANITIZER = "compute-sanitizer"
TOOLS = ("racecheck", "synccheck")

_SCRIPT = r"""
import pickle, sys
import gpucourse
from numba import cuda
from gpucourse.checks import trace
with open({job!r}, "rb") as f:
    job = pickle.load(f)
launcher = trace._rebuild(job["payload"], typed_constants=False, jit_options={{"lineinfo": True}})
arguments = [cuda.to_device(value) if kind == "traced" else value for kind, name, value in job["arguments"]]
launcher(*arguments)
cuda.synchronize()
print("GPUCOURSE-SANITIZER-DONE")
"""

_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+) errors?")
_RACE_LOCATION = re.compile(r"(Read|Write) access at .*? in (\S+):(\d+)")
_SYNC_ERROR = re.compile(r"^=+\s+(Barrier error[^\n]*|[^\n]*[Dd]ivergent[^\n]*)$", re.MULTILINE)
_SYNC_LOCATION = re.compile(r"at .*? in ([^\s:]+):(\d+)")


@dataclass(frozen=True)
class SanitizerReport:
    """What one compute-sanitizer tool found: error and warning counts, the first finding's locations (kind, file, line)."""

    tool: str
    errors: int
    warnings: int
    first: tuple[tuple[str, str, int], ...]
    output: str
    what: str = ""  # the tool's own words for its first finding (synccheck)

    def describe(self) -> str:
        """The first finding in words, naming the student's lines."""
        if self.tool == "racecheck":
            parts = [f"a {kind.lower()} at line {line} (`{source_line(file, line)}`)" for kind, file, line in self.first]
            where = " and ".join(parts) if parts else "lines it could not name"
            return (f"compute-sanitizer's racecheck found {self.errors} shared-memory race(s) on this GPU, between {where}: a "
                    "cuda.syncthreads() must separate a thread's write to shared memory from another thread's access to it.")
        where = (f"at line {self.first[0][2]} (`{source_line(self.first[0][1], self.first[0][2])}`)" if self.first
                 else "at a line it could not name")
        said = f" ({self.what.strip('= ').rstrip('.')})" if self.what else ""
        return (f"compute-sanitizer's synccheck found {self.errors} barrier error(s) on this GPU{said}, {where}: every thread "
                "of a block must reach every cuda.syncthreads(). Move the barrier out of the `if`.")


def sanitizer_available() -> bool:
    """True on a GPU with compute-sanitizer on the PATH."""
    return mode.on_gpu() and shutil.which(SANITIZER) is not None


racecheck_available = sanitizer_available


def sanitize(entry: Callable, arguments: Sequence[tuple[str, str, object]], tool: str, timeout_s: float = 300.0) -> SanitizerReport:
    """Run `entry(*arguments)` under compute-sanitizer's `tool` (racecheck or synccheck) in a fresh process; return its findings.

    `arguments` as for `gpucourse.checks.trace.traced_run`: ("traced", name, host array) become device arrays.
    """
    if tool not in TOOLS:
        raise ValueError(f"tool must be one of {TOOLS}; got {tool!r}")
    if not mode.on_gpu():
        raise RuntimeError(f"{tool} needs a GPU")
    payload = describe_launcher(entry, portable=True)
    with tempfile.TemporaryDirectory() as folder:
        job = Path(folder) / "job.pickle"
        job.write_bytes(pickle.dumps({"payload": payload, "arguments": list(arguments)}))
        done = run_python(_SCRIPT.format(job=str(job)), tool=[SANITIZER, "--tool", tool, "--report-api-errors", "no"],
                          timeout_s=timeout_s)
    output = done.stdout + done.stderr
    if "GPUCOURSE-SANITIZER-DONE" not in output and not (tool == "synccheck" and _ERROR_SUMMARY.search(output)):
        raise RuntimeError(f"the {tool} run failed (exit {done.returncode}): {output[-1500:]}")
    if tool == "racecheck":
        summary = _RACE_SUMMARY.search(output)
        errors, warnings = (int(summary.group(2)), int(summary.group(3))) if summary else (0, 0)
        errors = max(errors, output.count("Race reported between"))  # in case the summary's wording changes
        first = tuple((kind, file, int(line)) for kind, file, line in _RACE_LOCATION.findall(output)[:2])
        return SanitizerReport(tool, errors, warnings, first, output)
    summary = _ERROR_SUMMARY.search(output)
    found = _SYNC_ERROR.findall(output)
    errors = max(int(summary.group(1)) if summary else 0, len(found))
    location = _SYNC_LOCATION.search(output[output.find(found[0]):]) if found else None
    first = (("barrier", location.group(1), int(location.group(2))),) if location else ()
    return SanitizerReport(tool, errors, 0, first, output, found[0] if found else "")


def racecheck(entry: Callable, arguments: Sequence[tuple[str, str, object]], timeout_s: float = 300.0) -> SanitizerReport:
    """compute-sanitizer's racecheck of `entry(*arguments)` (see `sanitize`)."""
    return sanitize(entry, arguments, "racecheck", timeout_s)

