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

`RecordTranscripts` and `GradeApart` surround nbgrader's Execute: the submission runs in its kernel as
before (the *worker*), each check writing a transcript of its calls of the answer
(`gpucourse.checks.remote`); then a fresh Python process, where no answer ever ran, runs every check
cell's check again against those transcripts, and its verdict replaces the cell's output: a failed one
becomes the cell's error (nbgrader then scores 0), a passed one the check's own lines. A grader that
crashes or runs past `GradeApart.timeout` fails every check of the notebook, saying why.
`autograde_preprocessors()` is nbgrader's list with both. `grading/nbgrader_config.py` uses all three
lists (see the README).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from nbformat.v4 import new_output
from nbgrader import utils
from nbgrader.converters import Autograde, GenerateAssignment
from nbgrader.preprocessors import ClearSolutions, Execute, NbGraderPreprocessor, OverwriteCells
from traitlets import Integer

from .checks.guard import course_names, refusal_message, screen
from .checks.remote import SEED_ENV, TRANSCRIPT_ENV
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


# ---------------------------------------------------------------------------------------------
# Grading apart from the answer's process


class RecordTranscripts(NbGraderPreprocessor):
    """Before Execute: a fresh folder for the checks' transcripts and a fresh seed, passed to the kernel in its environment."""

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        folder = tempfile.mkdtemp(prefix="gpucourse-transcripts-")
        seed = secrets.token_hex(8)  # fresh data for every submission, the same in the kernel and the grader
        resources["gpucourse_grading"] = {"folder": folder, "seed": seed}
        os.environ[TRANSCRIPT_ENV], os.environ[SEED_ENV] = folder, seed  # the kernel Execute starts inherits them
        return nb, resources


def check_cells(nb: Any) -> list[Any]:
    """The graded code cells that are not answers: the check cells, one point each."""
    return [cell for cell in nb.cells if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)]


def failed_output(text: str) -> list[Any]:
    """A check cell's outputs for a failed verdict: the lines the check printed, then its message (from the first \u274c) as the error."""
    lines = text.rstrip("\n").split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith("\u274c")), 0)
    message = "\n".join(lines[at:])
    printed = [new_output("stream", name="stdout", text="\n".join(lines[:at]) + "\n")] if at else []
    return [*printed, new_output("error", ename="CheckFailed", evalue=message.removeprefix("\u274c "), traceback=[message])]


#: Added to a failed verdict whose cell printed a pass in the notebook's own run (a pass the answer forged, or a check that differs).
UNCONFIRMED = "(Your notebook's own run printed a pass for this check; recomputed apart from your code, it failed.)"


class GradeApart(NbGraderPreprocessor):
    """After Execute: every check cell's verdict recomputed in a fresh process from the transcripts; it replaces the cell's output."""

    timeout = Integer(900, help="Seconds the grader process may take for one notebook (every check of it).").tag(config=True)

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        grading = resources.pop("gpucourse_grading", None)
        os.environ.pop(TRANSCRIPT_ENV, None)
        os.environ.pop(SEED_ENV, None)
        if grading is None:
            raise RuntimeError("GradeApart runs after RecordTranscripts and Execute (gpucourse.grading.autograde_preprocessors())")
        work = Path(tempfile.mkdtemp(prefix="gpucourse-grader-"))
        try:
            verdicts = self.grade(nb, Path(grading["folder"]), grading["seed"], work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(grading["folder"], ignore_errors=True)
        for cell in check_cells(nb):
            verdict = verdicts.get(cell.metadata["nbgrader"]["grade_id"])
            if verdict is None:
                verdict = {"passed": False, "text": "\u274c the grader gave no verdict for this check."}
            if verdict["passed"] is None:  # judged in the notebook's own run (remote.JUDGED_IN_NOTEBOOK): its outputs stand
                self.log.info("Check %s: %s", cell.metadata["nbgrader"]["grade_id"], verdict["text"])
            elif not verdict["passed"]:
                forged = any("\u2705" in str(output.get("text", "")) for output in cell.outputs)
                if forged:  # the notebook's own run printed a pass the grader did not confirm: say so, for the instructor
                    self.log.warning("Check %s: the notebook printed a pass; recomputed apart it failed", cell.metadata["nbgrader"]["grade_id"])
                cell.outputs = failed_output(verdict["text"] + (f"\n{UNCONFIRMED}" if forged else ""))
            elif not any(output.output_type == "error" for output in cell.outputs):
                cell.outputs = [new_output("stream", name="stdout", text=verdict["text"])]
            else:  # passed apart, failed in the notebook: the notebook's error stands (a score of 0), with a word on why
                cell.outputs.append(new_output("stream", name="stdout", text="(The grader, apart from your notebook, saw this check "
                                                                             "pass; it failed in your notebook's run, which counts.)\n"))
        return nb, resources

    def grade(self, nb: Any, folder: Path, seed: str, work: Path) -> dict[str, dict]:
        """Run the grader process on the executed notebook; on a crash or a timeout every check fails with the reason."""
        notebook, verdicts = work / "notebook.json", work / "verdicts.json"
        notebook.write_text(json.dumps(nb))
        env = {k: v for k, v in os.environ.items() if k not in (TRANSCRIPT_ENV, SEED_ENV)}
        command = [sys.executable, "-m", "gpucourse.checks.remote", str(notebook), str(folder), seed, str(verdicts)]
        try:
            done = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=self.timeout)
            if done.returncode == 0 and verdicts.is_file():
                return json.loads(verdicts.read_text())
            reason = f"the grader process ended with status {done.returncode}: {(done.stderr or done.stdout).strip()[-600:]}"
        except subprocess.TimeoutExpired:
            reason = f"the grader process did not finish within {self.timeout} s"
        self.log.error("Grading apart failed: %s", reason)
        return {cell.metadata["nbgrader"]["grade_id"]: {"passed": False, "text": f"\u274c no verdict: {reason}."} for cell in check_cells(nb)}


def autograde_preprocessors() -> list[type]:
    """nbgrader's autograde preprocessors with RecordTranscripts before Execute and GradeApart right after it."""
    default = list(Autograde.class_traits()["autograde_preprocessors"].default())
    at = default.index(Execute)
    return [*default[:at], RecordTranscripts, Execute, GradeApart, *default[at + 1:]]
