"""The code cells of a solution notebook, compiled as a kernel would run them: what the maintainer tools that run the
exercise checks share (`check_seconds.py`, `gpu_checks.py`)."""

from __future__ import annotations

import json
import linecache
import types
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def solution_cells(name: str) -> Iterator[tuple[int, str, types.CodeType]]:
    """Each code cell of solutions/NAME.ipynb: (its number, its source, its compiled code), its source registered so that
    inspect.getsource finds the functions it defines (a check reads an answer's source)."""
    cells = json.loads((ROOT / "solutions" / f"{name}.ipynb").read_text())["cells"]
    for number, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        filename = f"<{name} cell {number}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        yield number, source, compile(source, filename, "exec")


def is_check_cell(source: str) -> bool:
    """Whether a cell calls an exercise check (`chN.check_...`): the rule that makes it an nbgrader check cell."""
    from gpucourse.exercises import CHECK_CALL  # the scripts that import this module put the checkout on sys.path first

    return bool(CHECK_CALL.search(source))
