"""compute-sanitizer's racecheck on a student's launcher, run as a script (GPU only).

The launcher and everything it reaches are described as for a replay (`gpucourse.checks.trace`),
rebuilt in a fresh Python process with its kernels compiled with line information, and run once on
small arrays under `compute-sanitizer --tool racecheck`. Its report names the two source lines of
each shared-memory hazard.
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
print("GPUCOURSE-RACECHECK-DONE")
"""

_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_LOCATION = re.compile(r"(Read|Write) access at .*? in (\S+):(\d+)")


@dataclass(frozen=True)
class RacecheckReport:
    """What racecheck found: error and warning counts and the first hazard's two accesses (kind, file, line)."""

    errors: int
    warnings: int
    first: tuple[tuple[str, str, int], ...]
    output: str

    def describe(self) -> str:
        """The first hazard in words."""
        parts = [f"a {kind.lower()} at line {line} (`{source_line(file, line)}`)" for kind, file, line in self.first]
        where = " and ".join(parts) if parts else "lines it could not name"
        return (f"compute-sanitizer's racecheck found {self.errors} shared-memory race(s) on this GPU, between {where}: a "
                "cuda.syncthreads() must separate a thread's write to shared memory from another thread's access to it.")


def racecheck_available() -> bool:
    """True on a GPU with compute-sanitizer on the PATH."""
    return mode.on_gpu() and shutil.which(SANITIZER) is not None


def racecheck(entry: Callable, arguments: Sequence[tuple[str, str, object]], timeout_s: float = 300.0) -> RacecheckReport:
    """Run `entry(*arguments)` under compute-sanitizer's racecheck in a fresh process; return its findings.

    `arguments` as for `gpucourse.checks.trace.traced_run`: ("traced", name, host array) become device arrays.
    """
    if not mode.on_gpu():
        raise RuntimeError("racecheck needs a GPU")
    payload = describe_launcher(entry, portable=True)
    with tempfile.TemporaryDirectory() as folder:
        job = Path(folder) / "job.pickle"
        job.write_bytes(pickle.dumps({"payload": payload, "arguments": list(arguments)}))
        done = run_python(_SCRIPT.format(job=str(job)), tool=[SANITIZER, "--tool", "racecheck", "--report-api-errors", "no"],
                          timeout_s=timeout_s)
    output = done.stdout + done.stderr
    if "GPUCOURSE-RACECHECK-DONE" not in output:
        raise RuntimeError(f"the racecheck run failed (exit {done.returncode}): {output[-1500:]}")
    summary = _SUMMARY.search(output)
    errors, warnings = (int(summary.group(2)), int(summary.group(3))) if summary else (0, 0)
    errors = max(errors, output.count("Race reported between"))  # in case the summary's wording changes
    first = tuple((kind, file, int(line)) for kind, file, line in _LOCATION.findall(output)[:2])
    return RacecheckReport(errors, warnings, first, output)
