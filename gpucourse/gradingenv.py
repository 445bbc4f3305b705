"""The environment `nbgrader autograde` runs in: a fresh venv with the course installed from a wheel, never the editable checkout.

`python -m gpucourse grading-env DIR` builds a wheel of this checkout (pip, in an isolated build), makes a
new venv in DIR and installs the wheel there with its `grading` extra (nbgrader, ipykernel) and, for a GPU,
`cuda12` or `cuda13`. The instructor's checkout and its `.venv` are then out of reach of the grading run's
imports: a submission that writes into the package it imports writes into DIR, which the next
`grading-env --clear` throws away (README, "For instructors", says to run autograde as another user too).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

#: The extra of pyproject.toml with what autograding needs beyond the course's run-time dependencies.
GRADING_EXTRA = "grading"


def venv_python(target: Path) -> Path:
    """The Python interpreter of the venv in `target`."""
    return target / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def checkout() -> Path:
    """The course's checkout this package was imported from (it holds pyproject.toml)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        raise FileNotFoundError(f"{root} is not a checkout of the course (no pyproject.toml): build the grading venv from one")
    return root


def build(target: Path, cuda: str | None = None, pip_args: Sequence[str] = (), source: Path | None = None,
          run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Path:
    """Build the grading venv in `target` (emptied first) from a wheel of `source` (this checkout); return its interpreter.

    `cuda`: "12" or "13" for a GPU machine (the course's extras of the same names). `pip_args` go to the
    install step (e.g. `--no-index --find-links WHEELS` offline).
    """
    source = source or checkout()
    wheels = target.parent / f"{target.name}-wheel"
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(source)], check=True)
    found = sorted(wheels.glob("gpucourse-*.whl"), key=lambda path: path.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"pip built no gpucourse wheel in {wheels}")
    run([sys.executable, "-m", "venv", "--clear", str(target)], check=True)
    extras = ",".join([GRADING_EXTRA, *([f"cuda{cuda}"] if cuda else [])])
    python = venv_python(target)
    run([str(python), "-m", "pip", "install", "--quiet", *pip_args, f"gpucourse[{extras}] @ {found[-1].resolve().as_uri()}"], check=True,
        env=clean_environment())
    return python


def clean_environment() -> dict[str, str]:
    """This process's environment without what would make a venv's Python import from elsewhere (PYTHONPATH, PYTHONHOME...)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("PYTHON") and key != "VIRTUAL_ENV"}


def installed_from_wheel(python: Path) -> Path:
    """Where the venv of `python` imports gpucourse from; fails unless it is that venv's own copy (no editable install)."""
    done = subprocess.run([str(python), "-I", "-c", "import importlib.util; print(importlib.util.find_spec('gpucourse').origin)"],
                          capture_output=True, text=True, check=True, env={"PYTHONNOUSERSITE": "1", "PATH": ""})
    origin = Path(done.stdout.strip()).resolve()
    prefix = python.parent.parent.resolve()
    if not origin.is_relative_to(prefix):
        raise RuntimeError(f"the grading venv {prefix} imports gpucourse from {origin}, outside it")
    return origin
