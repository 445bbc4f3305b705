"""exercises/ is generated from solutions/; the generator strips answers and keeps everything else."""

from __future__ import annotations

import json

import pytest

from gpucourse import exercises
from gpucourse.checks import UNANSWERED
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


def test_a_top_level_answer_becomes_stubs_that_define_its_names():
    """A kernel and its launcher answered at the top of a cell: the stub defines both (decorators, signatures, docstrings), each
    raising the hint, so that the check cell finds them; `stub_hint` recognises them, and not an answer."""
    text = ("from numba import cuda\n### BEGIN SOLUTION (hint: one thread per element)\nimport math\nSIZE = 4\n@cuda.jit\n"
            "def k(out):\n    i = cuda.grid(1)\n    out[i] = math.pi\n\ndef launch(out):\n    \"\"\"Fill out.\"\"\"\n"
            "    k[1, SIZE](out)\n### END SOLUTION\nprint(1)")
    out = strip_solutions(text, "code")
    assert "out[i]" not in out and "SIZE = 4" not in out and "import math" in out and out.endswith("print(1)")
    assert "@cuda.jit\ndef k(out):\n    raise NotImplementedError('one thread per element')" in out
    assert 'def launch(out):\n    """Fill out."""\n    raise NotImplementedError(' in out
    from gpucourse.checks import stub_hint

    names: dict = {}
    exec(compile(out.replace("@cuda.jit\n", "").replace("print(1)", ""), "stub", "exec"), names)
    assert stub_hint(names["k"]) == stub_hint(names["launch"]) == "one thread per element"
    assert stub_hint(lambda x: x + 1) is None and stub_hint(len) is None
    long = strip_solutions("### BEGIN SOLUTION (hint: " + "word " * 60 + ")\ndef f():\n    return 1\n### END SOLUTION", "code")
    assert max(len(line) for line in long.splitlines()) < 120  # a long hint is cut into strings: the stub stays on the page


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


def test_an_unanswered_notebook_reaches_every_check_and_each_says_not_yet_right(root):
    """Run each exercise notebook as a student first gets it, every cell (as Run All with errors allowed): every check cell
    shows its own "not yet right" line (a CheckFailed naming its exercise and the stub's hint), and no cell shows a traceback
    (no NameError of a name the stub did not define, no NotImplementedError raised outside a check)."""
    import nbformat
    from nbclient import NotebookClient

    for path in sorted((root / "exercises").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        checks = [cell for cell in notebook.cells if cell.cell_type == "code" and exercises.CHECK_CALL.search(cell.source)]
        stubs = "\n".join(cell.source for cell in notebook.cells if "YOUR CODE HERE" in cell.source)
        assert checks, path.name
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            errors = [out for out in cell.outputs if out.output_type == "error"]
            text = "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")
            assert "Traceback" not in text, f"{path.name}: a cell printed a traceback:\n{cell.source[:200]}\n{text[-800:]}"
            if cell not in checks:  # a cell that uses an answer after its check: the stub's hint in a line, no traceback
                assert all(e.ename == "NotImplementedError" and e.traceback[0].startswith(f"\u274c {UNANSWERED}") for e in errors), \
                    f"{path.name}: {cell.source[:120]!r} stopped at {errors[0].ename}: {errors[0].evalue[:300]}"
                continue
            assert len(errors) == 1 and errors[0].ename == "CheckFailed", \
                f"{path.name}: check {cell.source[:80]!r} shows {[(e.ename, e.evalue[:300]) for e in errors] or 'no error'}"
            message = errors[0].evalue
            assert "not yet right" in message.splitlines()[0] and "Exercise" in message, f"{path.name}: {message[:300]}"
            hint = message.split("Hint: ", 1)[-1].split("\n")[0][:30]
            assert "Hint: " in message and hint.split(" ")[0] in stubs, f"{path.name}: the message names no stub's hint: {message[:300]}"
            assert not any("Traceback" in line for out in errors for line in out.traceback), f"{path.name}: {errors[0].traceback}"


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
