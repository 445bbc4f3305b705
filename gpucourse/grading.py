"""nbgrader with the course's exercise notebooks: released stubs keep the hints that `exercises/` carries.

nbgrader's ClearSolutions replaces every `### BEGIN SOLUTION (hint: ...)` block with a bare
`raise NotImplementedError()`, losing the hint. `ClearSolutionsWithHints` writes the same stub as
`python -m gpucourse exercises`, hint included; `generate_assignment_preprocessors()` is nbgrader's
list with it in ClearSolutions' place. `grading/nbgrader_config.py` uses it (see the README).
"""

from __future__ import annotations

from typing import Any

from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import ClearSolutions

from .exercises import BEGIN_SOLUTION, strip_solutions


class ClearSolutionsWithHints(ClearSolutions):
    """ClearSolutions whose Python stubs carry the hint written after `### BEGIN SOLUTION`."""

    def _replace_solution_region(self, cell: Any, language: str) -> bool:
        if language != "python" or BEGIN_SOLUTION not in cell.source:
            return super()._replace_solution_region(cell, language)
        cell.source = strip_solutions(cell.source, cell.cell_type)
        return True


def generate_assignment_preprocessors() -> list[type]:
    """nbgrader's generate_assignment preprocessors with ClearSolutionsWithHints in place of ClearSolutions."""
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    return [ClearSolutionsWithHints if step is ClearSolutions else step for step in default]
