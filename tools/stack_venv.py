#!/usr/bin/env python3
"""The CUDA 12 stack as a learner's notebook service installs it, in a virtual environment of its own (no GPU needed).

It runs the install cell of docs/notebook_services.md, as a learner would on a T4 service whose driver reports CUDA 12,
in a fresh virtual environment: the course is copied to a folder of its own (as a clone would be) and installed from
there as a package (not editable), with its `cuda12` extra. The environment is kept in a cache folder
(GPUCOURSE_STACK_CACHE, else ~/.cache/gpucourse/), one per pyproject.toml, install cell and Python version: the first
run downloads about 1.2 GB of wheels (CuPy and the CUDA 12 toolkit wheels); a later run only runs the install cell
again when the course's files changed, which reinstalls the course from the checkout (the rest is already there).

    python3 tools/stack_venv.py      # make or refresh it; prints its Python and the time taken

CI runs it once before the tests (.ci/run); tests/test_stack.py calls `ensure()` too (a no-op but the refresh when
CI already did). Standard library only: it runs before the course's .venv exists.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "notebook_services.md"
COURSE_FOLDER = "gpu-course"  # the name the install cell gives the learner's copy of the repository
# What a notebook service has before the install cell runs and a fresh virtual environment lacks: a Jupyter kernel
# and the library that runs a notebook (the test runs the first chapter notebook with it).
SERVICE_PACKAGES = ["ipykernel>=6.29,<7", "nbclient>=0.10", "nbformat>=5"]
# What nvidia-smi prints on a T4 notebook service with a CUDA 12 driver (the line the install cell reads).
NVIDIA_SMI_OUTPUT = "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |"


def install_cell(page: Path = PAGE) -> str:
    """The code of the page's install cell: the python block after the `<!-- install cell -->` marker."""
    match = re.search(r"<!-- install cell -->\s*```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    if match is None:
        raise SystemExit(f"{page}: no python block after '<!-- install cell -->'")
    return match.group(1)


def cache_root() -> Path:
    """Where the environments are kept: GPUCOURSE_STACK_CACHE, else ~/.cache/gpucourse."""
    return Path(os.environ.get("GPUCOURSE_STACK_CACHE") or Path.home() / ".cache" / "gpucourse")


def key(root: Path = ROOT) -> str:
    """What the environment depends on: the package's requirements, the install cell and this Python."""
    digest = hashlib.sha256()
    digest.update((root / "pyproject.toml").read_bytes())
    digest.update(install_cell(root / "docs" / "notebook_services.md").encode())
    digest.update(" ".join(SERVICE_PACKAGES).encode())
    digest.update(sys.version.encode())
    return digest.hexdigest()[:16]


def course_files(root: Path) -> list[str]:
    """The files a clone of the repository has: tracked ones, and new files git does not ignore."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"], capture_output=True)
    if listed.returncode != 0:
        raise SystemExit(f"{root} is not a git checkout: {listed.stderr.decode(errors='replace')}")
    return [name for name in listed.stdout.decode().split("\0") if name and (root / name).is_file()]


def course_digest(root: Path) -> str:
    """A digest of the course's files, names and contents: the install cell runs again when it changes."""
    digest = hashlib.sha256()
    for name in sorted(course_files(root)):
        digest.update(name.encode() + b"\0" + (root / name).read_bytes())
    return digest.hexdigest()


def copy_course(root: Path, destination: Path) -> None:
    """The files a clone of the repository has into `destination`."""
    for name in course_files(root):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def fake_nvidia_smi(folder: Path) -> Path:
    """A folder with an `nvidia-smi` that prints a CUDA 12 driver's header line, as the install cell reads it."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho '{NVIDIA_SMI_OUTPUT}'\n")
    script.chmod(0o755)
    return folder


def run_install_cell(python: Path, root: Path = ROOT) -> subprocess.CompletedProcess:
    """Run the install cell with `python` in a fresh folder holding a copy of the course, the driver saying CUDA 12."""
    with tempfile.TemporaryDirectory(prefix="gpucourse-service-") as folder:
        work = Path(folder)
        copy_course(root, work / COURSE_FOLDER)
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCOURSE_", "NUMBA_", "PYTHONPATH", "VIRTUAL_ENV"))}
        environment["PATH"] = f"{fake_nvidia_smi(work / 'bin')}{os.pathsep}{python.parent}{os.pathsep}{environment.get('PATH', '')}"
        return subprocess.run([str(python), "-c", install_cell(root / "docs" / "notebook_services.md")], cwd=work,
                              env=environment, capture_output=True, text=True, timeout=1800)


def ensure(root: Path = ROOT, log=print) -> Path:
    """The Python of the CUDA 12 environment, made if missing and with the course reinstalled from `root`."""
    cache = cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / f"stack-{key(root)}"
    python = venv / "bin" / "python"
    with open(cache / "stack.lock", "w") as lock:  # one builder at a time (pytest-xdist workers, CI's step)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / "ready").exists():
            shutil.rmtree(venv, ignore_errors=True)
            for old in cache.glob("stack-*"):  # environments of earlier requirements: 1.3 GB each
                shutil.rmtree(old, ignore_errors=True)
            log(f"Creating {venv} (downloads CuPy and the CUDA 12 wheels, about 1.2 GB, the first time) ...")
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            fresh = True
        else:
            fresh = False
        digest = course_digest(root)
        if not fresh and (venv / "course-digest").exists() and (venv / "course-digest").read_text() == digest:
            return python  # installed from these very files already (CI's step before the tests)
        result = run_install_cell(python, root)
        if result.returncode != 0:
            raise SystemExit(f"The install cell failed in {venv}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        if fresh:
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", *SERVICE_PACKAGES], check=True)
            (venv / "ready").write_text(result.stdout)
        (venv / "course-digest").write_text(digest)
    return python


def main() -> int:
    start = time.perf_counter()
    python = ensure()
    print(f"CUDA 12 stack: {python} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
