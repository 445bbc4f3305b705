"""exercises/ is generated from solutions/; the generator strips answers and keeps everything else."""

from __future__ import annotations

import json

import pytest

from gpucourse import exercises
from gpucourse.exercises import MarkerError, strip_solutions


def notebook(*cells):
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def code(source):
    output = {"output_type": "stream", "name": "stdout", "text": "x"}
    return {"cell_type": "code", "execution_count": 3, "metadata": {}, "outputs": [output], "source": source}


def test_solution_block_becomes_a_stub_with_the_hint():
    text = "def f(x):\n    ### BEGIN SOLUTION (hint: double it)\n    return 2 * x\n    ### END SOLUTION\nprint(f(2))"
    out = strip_solutions(text, "code")
    assert "return 2 * x" not in out
    assert "    # YOUR CODE HERE\n    raise NotImplementedError('double it')" in out
    assert out.startswith("def f(x):") and out.endswith("print(f(2))")


def test_hint_keeps_its_own_brackets():
    out = strip_solutions("### BEGIN SOLUTION (hint: call f(a, b))\nx = 1\n### END SOLUTION", "code")
    assert "raise NotImplementedError('call f(a, b)')" in out


def test_default_hint_and_markdown_answers():
    assert "run the check cell" in strip_solutions("### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "code")
    assert strip_solutions("Why?\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION", "markdown") == "Why?\nYOUR ANSWER HERE"


def test_hidden_tests_are_removed():
    text = "check(f)\n### BEGIN HIDDEN TESTS\nassert f(3) == 6\n### END HIDDEN TESTS"
    assert strip_solutions(text, "code") == "check(f)"


@pytest.mark.parametrize("text", ["### BEGIN SOLUTION\nx", "### END SOLUTION", "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"])
def test_unbalanced_markers_are_errors(text):
    with pytest.raises(MarkerError):
        strip_solutions(text, "code")


def test_build_and_stale(tmp_path):
    solutions, student = tmp_path / "solutions", tmp_path / "exercises"
    solutions.mkdir()
    answer = code("x = 1\n### BEGIN SOLUTION\ny = 2\n### END SOLUTION")
    source = notebook(answer, code("from gpucourse.checks import ch1\nch1.check_add_arrays(f)"))
    (solutions / "ch09.ipynb").write_text(json.dumps(source))
    expected = {"solutions/ch09.ipynb has outputs or lacks nbgrader metadata", "exercises/ch09.ipynb is missing"}
    assert set(exercises.stale(solutions, student)) == expected
    written = exercises.build(solutions, student)
    assert {p.name for p in written} == {"ch09.ipynb"} and len(written) == 2
    assert exercises.stale(solutions, student) == []
    solved = json.loads((solutions / "ch09.ipynb").read_text())
    assert solved["cells"][0]["outputs"] == [] and solved["cells"][0]["metadata"]["nbgrader"]["solution"] is True
    assert solved["cells"][1]["metadata"]["nbgrader"]["grade"] is True
    assert "y = 2" in solved["cells"][0]["source"]
    given = json.loads((student / "ch09.ipynb").read_text())
    stub = "".join(given["cells"][0]["source"])  # stored as lines, as Jupyter stores a cell
    assert "y = 2" not in stub and "NotImplementedError" in stub
    assert given["metadata"]["gpucourse"]["generated_from"] == "solutions/ch09.ipynb"
    (student / "ch09.ipynb").write_text((student / "ch09.ipynb").read_text().replace("YOUR CODE", "MY CODE"))
    assert exercises.stale(solutions, student) == ["exercises/ch09.ipynb is out of date with solutions/ch09.ipynb"]
    (student / "extra.ipynb").write_text("{}")
    assert "exercises/extra.ipynb has no solution notebook" in exercises.stale(solutions, student)
    exercises.build(solutions, student)
    assert not (student / "extra.ipynb").exists() and exercises.stale(solutions, student) == []


def test_the_course_exercises_are_up_to_date(root):
    problems = exercises.stale(root / "solutions", root / "exercises")
    assert problems == [], "\n".join(problems) + "\nRun `python -m gpucourse exercises` to rebuild exercises/."
    names = sorted(p.name for p in (root / "solutions").glob("*.ipynb"))
    assert names, "there are no solution notebooks"
    for name in names:
        text = (root / "exercises" / name).read_text()
        assert "### BEGIN SOLUTION" not in text and "NotImplementedError" in text, name


def test_every_exercise_notebook_ends_with_checks(root):
    for path in sorted((root / "solutions").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        answers = [i for i, c in enumerate(cells) if "### BEGIN SOLUTION" in "".join(c["source"]) and c["cell_type"] == "code"]
        checks = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and exercises.CHECK_CALL.search("".join(c["source"]))]
        assert answers, f"{path.name} has no exercise"
        for answer in answers:
            assert any(check > answer for check in checks), f"{path.name}: the answer in cell {answer} has no check cell after it"


def test_student_notebooks_stop_at_the_first_stub(root):
    """Run each exercise notebook as a student first gets it: the first error is the hint of exercise 1."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    for path in sorted((root / "exercises").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        try:  # as Run All does in JupyterLab, the run stops at the first error
            NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
        except CellExecutionError:
            pass
        errors = [(cell, out) for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs if out.output_type == "error"]
        assert errors, f"{path.name}: the student version runs without any stub raising"
        _, first_error = errors[0]
        assert first_error.ename == "NotImplementedError", f"{path.name}: first error is {first_error.ename}: {first_error.evalue}"
        hint = first_error.evalue.strip("'\"")
        stubs = [cell.source for cell in notebook.cells if "YOUR CODE HERE" in cell.source]
        assert hint and any(hint in stub for stub in stubs), f"{path.name}: the first error does not come from a stub's hint"


def test_setup_cells_are_locked_read_only_nbgrader_cells(root):
    """The cells that import gpucourse and the checks: nbgrader puts them back as released, so an answer cannot replace them."""
    for path in sorted((root / "exercises").glob("*.ipynb")):
        cells = [cell for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]
        setup = [cell for cell in cells if exercises.SETUP_IMPORT.search("".join(cell["source"]))
                 and not cell["metadata"].get("nbgrader", {}).get("solution")]  # an answer may import from gpucourse too
        assert any("from gpucourse.checks import" in "".join(cell["source"]) for cell in setup), path.name
        for cell in setup:
            metadata = cell["metadata"]
            assert metadata["nbgrader"]["locked"] and not metadata["nbgrader"]["solution"] and not metadata["nbgrader"]["grade"]
            assert metadata["nbgrader"]["grade_id"].startswith(f"{path.stem}-setup-")
            assert metadata["editable"] is False and metadata["deletable"] is False
