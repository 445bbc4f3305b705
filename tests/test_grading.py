"""nbgrader end to end, as the README's instructor section says: release every solution notebook, autograde, feedback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

BIN = Path(sys.executable).parent  # the venv's bin/: nbgrader runs alembic from there
SOLUTIONS = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb"))


def nbgrader(course: Path, *args: str) -> str:
    """Run one nbgrader command in `course` as the README does (venv activated); fail on any logged error."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    # nbgrader logs a broken nbgrader_config.py and goes on without it: that must fail here
    assert "| ERROR]" not in log, log
    return log


def sources(notebook: dict) -> list[str]:
    return ["".join(cell["source"]) for cell in notebook["cells"]]


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A course folder with every solution notebook released by `nbgrader generate_assignment`."""
    if not (BIN / "nbgrader").exists():  # a GPU image with only the course's run-time wheels
        if os.environ.get("CI"):
            pytest.fail("nbgrader is not installed: it is in the dev extra that ./course installs")
        pytest.skip("nbgrader is not installed (the dev extra)")
    course = tmp_path_factory.mktemp("grading")
    shutil.copy(ROOT / "grading" / "nbgrader_config.py", course)
    for stem in SOLUTIONS:
        (course / "source" / stem).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / f"{stem}.ipynb", course / "source" / stem)
        nbgrader(course, "generate_assignment", stem)
    return course


def test_every_solution_notebook_is_released_with_the_hints_of_exercises(course):
    assert SOLUTIONS
    for stem in SOLUTIONS:
        released = json.loads((course / "release" / stem / f"{stem}.ipynb").read_text())
        student = json.loads((ROOT / "exercises" / f"{stem}.ipynb").read_text())
        assert sources(released) == sources(student), f"{stem}: nbgrader's release differs from exercises/{stem}.ipynb"
        text = "\n".join(sources(released))
        assert "### BEGIN SOLUTION" not in text and "raise NotImplementedError()" not in text  # every stub has its hint
    written = [cell for cell in json.loads((course / "release" / "ch02_metrics" / "ch02_metrics.ipynb").read_text())["cells"]
               if cell["cell_type"] == "markdown" and "YOUR ANSWER HERE" in "".join(cell["source"])]
    assert written and all(cell["metadata"]["nbgrader"]["grade"] and cell["metadata"]["nbgrader"]["points"] for cell in written)


def answer_cell(notebook: dict, defines: str) -> dict:
    return next(cell for cell in notebook["cells"] if cell["cell_type"] == "code" and f"def {defines}(" in "".join(cell["source"]))


WRONG_ADD = '''@cuda.jit
def add_kernel(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def add_arrays(out, x, y, threads_per_block=64):
    add_kernel[out.size // threads_per_block, threads_per_block](out, x, y)  # rounds the blocks down
'''


def test_autograde_scores_a_right_and_a_wrong_submission_and_feeds_back_the_check_messages(course):
    from nbgrader.api import Gradebook

    stem = "ch01_introduction"
    solution = json.loads((course / "source" / stem / f"{stem}.ipynb").read_text())
    wrong = json.loads((course / "release" / stem / f"{stem}.ipynb").read_text())
    answer_cell(wrong, "add_arrays")["source"] = WRONG_ADD  # exercise 1.1: a typical wrong answer
    answer_cell(wrong, "scale_rows")["source"] = answer_cell(solution, "scale_rows")["source"]  # exercise 1.2: right
    for student, notebook in (("right", solution), ("wrong", wrong)):
        folder = course / "submitted" / student / stem
        folder.mkdir(parents=True)
        (folder / f"{stem}.ipynb").write_text(json.dumps(notebook))
    nbgrader(course, "autograde", stem)
    nbgrader(course, "generate_feedback", stem)

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        scores = {student: {grade.name: grade.score for grade in gradebook.find_submission(stem, student).notebooks[0].grades}
                  for student in ("right", "wrong")}
    checks = sorted(scores["right"], key=lambda name: int(name.rsplit("-", 1)[1]))
    assert len(checks) == 4 and all(name.startswith(f"{stem}-check-") for name in checks)
    assert [scores["right"][name] for name in checks] == [1.0, 1.0, 1.0, 1.0]
    assert [scores["wrong"][name] for name in checks] == [0.0, 1.0, 0.0, 0.0]  # 1.1 wrong, 1.2 right, 1.3 and 1.4 not done

    feedback = (course / "feedback" / "wrong" / stem / f"{stem}.html").read_text()
    assert "The number of blocks must be rounded up" in feedback  # the check's own message
    assert "start at cuda.grid(1) and step by cuda.gridsize(1)" in feedback  # the hint of an exercise left undone
    assert "gpucourse/checks" not in feedback  # the message alone, not a traceback through the package
    assert (course / "feedback" / "right" / stem / f"{stem}.html").exists()
    graded = json.loads((course / "autograded" / "right" / stem / f"{stem}.ipynb").read_text())
    errors = [out for cell in graded["cells"] for out in cell.get("outputs", []) if out["output_type"] == "error"]
    assert errors == [] and "\u2705" in json.dumps(graded, ensure_ascii=False)  # every check printed its pass mark
