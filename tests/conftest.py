"""Shared test helpers. The same tests run on a GPU and in the simulator; sizes come from gpucourse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

import gpucourse

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def device():
    return gpucourse.current_device()


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (a fresh mode choice) with extra environment variables."""
    environment = {k: v for k, v in os.environ.items() if k not in ("GPUCOURSE_MODE", "NUMBA_ENABLE_CUDASIM")}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, cwd=ROOT, timeout=300)


def gpu_only(reason: str) -> NoReturn:
    """End a test where there is no GPU: skipped, with `reason` (what only a GPU shows), never counted as passed.

    Call it after asserting what this mode does show (a GPU-only feature refused with its reason, for instance)."""
    pytest.skip(f"needs a GPU: {reason}")


# Files that take minutes (a website build that executes every chapter notebook, nbgrader, a browser, every kernel
# compiled for seven GPU classes):
# collected first, so that pytest-xdist starts them at once and the rest runs beside them.
SLOW_FIRST = ("test_site.py", "test_grading.py", "test_browser.py", "test_stack.py")


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: Path(str(item.fspath)).name not in SLOW_FIRST)  # stable: the order within stays
