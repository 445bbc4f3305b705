"""nbgrader with the course's exercise notebooks: released stubs keep their hints, submissions are screened.

nbgrader's ClearSolutions replaces every `### BEGIN SOLUTION (hint: ...)` block with a bare
`raise NotImplementedError()`, losing the hint. `ClearSolutionsWithHints` writes the same stub as
`python -m gpucourse exercises`, hint included; `generate_assignment_preprocessors()` is nbgrader's
list with it in ClearSolutions' place.

`ScreenCells` runs in `nbgrader autograde` after nbgrader has put back the locked cells (the set-up
and check cells, from its database): every other code cell goes through `gpucourse.checks.guard`'s
screen, and one it refuses is replaced, before anything runs, by a cell that raises with the
screen's message (the submitted code follows as comments, for the instructor). Its exercise's check
then scores 0. `autograde_sanitize_preprocessors()` is nbgrader's list with it after OverwriteCells.
`grading/nbgrader_config.py` uses both (see the README).
"""

from __future__ import annotations

from typing import Any

from nbgrader import utils
from nbgrader.converters import Autograde, GenerateAssignment
from nbgrader.preprocessors import ClearSolutions, NbGraderPreprocessor, OverwriteCells

from .checks.guard import course_names, refusal_message, screen
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


def refused_cell_source(source: str, message: str) -> str:
    """What a refused cell becomes: a raise of the screen's message, then the submitted code as comments (it never runs)."""
    submitted = "\n".join(f"# {line}" if line else "#" for line in source.split("\n"))
    return f"raise RuntimeError({message!r})\n# The cell as submitted (refused, not run):\n{submitted}"


class ScreenCells(NbGraderPreprocessor):
    """Screen every code cell that is not one of nbgrader's locked cells; a refused cell raises the screen's message instead."""

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        # what every cell's imports bind to the course's modules: a cell's use of a module another cell imported is followed
        self.names = course_names([cell.source for cell in nb.cells if cell.cell_type == "code"])
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: Any, resources: Any, index: int) -> tuple[Any, Any]:
        if cell.cell_type != "code":
            return cell, resources
        # After OverwriteCells a cell with a grade_id is one in nbgrader's database, and a locked one holds its source as released.
        if "grade_id" in cell.metadata.get("nbgrader", {}) and utils.is_locked(cell):
            return cell, resources
        refusals = screen(cell.source, self.names)
        if refusals:
            message = refusal_message(refusals)
            self.log.warning("Cell %d refused by the course's screen: %s", index, message.replace("\n", " "))
            cell.source = refused_cell_source(cell.source, message)
        return cell, resources


def autograde_sanitize_preprocessors() -> list[type]:
    """nbgrader's autograde preprocessors that run before execution, with ScreenCells after OverwriteCells."""
    default = list(Autograde.class_traits()["sanitize_preprocessors"].default())
    at = default.index(OverwriteCells) + 1
    return [*default[:at], ScreenCells, *default[at:]]
