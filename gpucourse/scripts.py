"""Run a piece of Python as a separate script: for errors that would break the notebook's own CUDA
context, and for tools (compute-sanitizer, ncu) that start a program themselves."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .errors import EnvironmentProblem


def run_python(code: str, *, tool: Sequence[str] = (), timeout_s: float = 300.0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `code` in a fresh Python process (optionally under a tool such as compute-sanitizer); return the result."""
    if tool and shutil.which(tool[0]) is None:
        raise EnvironmentProblem(f"{tool[0]} is not on the PATH: it comes with the CUDA toolkit (not with the pip wheels).")
    package_parent = str(Path(__file__).resolve().parent.parent)
    environment = dict(os.environ if env is None else env)
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, environment.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "snippet.py"
        script.write_text(code)
        return subprocess.run([*tool, sys.executable, str(script)], capture_output=True, text=True, timeout=timeout_s, env=environment)


def last_lines(text: str, count: int = 3) -> str:
    """The last `count` non-empty lines of a program's output."""
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-count:])
