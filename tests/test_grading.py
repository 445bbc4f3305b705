"""nbgrader end to end, as the README's instructor section says: release every solution notebook, autograde, feedback.

Autograde scores each check from the grader's verdict, computed in a fresh process from the notebook run's
transcripts (gpucourse.checks.remote): a submission whose answers fool the checks in its own kernel (here with
the course's screen switched off, standing for a route the screen misses) still scores 0.
"""

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


def nbgrader(course: Path, *args: str, env: dict | None = None) -> str:
    """Run one nbgrader command in `course` as the README does (venv activated); fail on any logged error."""
    env = {**os.environ, **(env or {}), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
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
    """A course folder with every solution notebook released by one `nbgrader generate_assignment "*"` (the README's way)."""
    if not (BIN / "nbgrader").exists():  # a GPU image with only the course's run-time wheels
        if os.environ.get("CI"):
            pytest.fail("nbgrader is not installed: it is in the dev extra that ./course installs")
        pytest.skip("nbgrader is not installed (the dev extra)")
    course = tmp_path_factory.mktemp("grading")
    shutil.copy(ROOT / "grading" / "nbgrader_config.py", course)
    for stem in SOLUTIONS:
        (course / "source" / stem).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / f"{stem}.ipynb", course / "source" / stem)
    log = nbgrader(course, "generate_assignment", "*")  # one process for all: nbgrader's start-up is most of each one's time
    assert all(f"release/{stem}/{stem}.ipynb" in log or f"release/./{stem}" in log for stem in SOLUTIONS), log
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


FAKE_CH1 = """

class Passing:
    def __getattr__(self, name):
        return lambda *args: print("\u2705 passed")


ch1 = Passing()
"""

SILENCE_FAILURES = """

import gpucourse.checks

gpucourse.checks.fail = lambda problems, exercise: None
"""

TAMPER_WHEN_CALLED = '''def launch_config(n, threads_per_block, device):
    import gpucourse.checks.ch1 as checks
    checks.fail = lambda problems, exercise: None
    return 1, threads_per_block
'''


def tampered_submission(released: dict, solution: dict) -> dict:
    """Ways to forge a pass in exercise notebook 1: every one must score 0 (the set-up cell is put back as released)."""
    notebook = json.loads(json.dumps(released))
    cells = notebook["cells"]
    setup = next(cell for cell in cells if "from gpucourse.checks import ch1" in "".join(cell["source"]))
    setup["source"] = "from numba import cuda" + FAKE_CH1  # the set-up cell itself: locked, so autograde restores it
    answer_cell(notebook, "add_arrays")["source"] = WRONG_ADD + FAKE_CH1  # 1.1: the check module's name rebound
    answer_cell(notebook, "scale_rows")["source"] = "".join(answer_cell(solution, "scale_rows")["source"]) + SILENCE_FAILURES  # 1.2
    stub = next(cell for cell in cells if "cuda.gridsize(1)" in "".join(cell["source"]) and "NotImplementedError" in "".join(cell["source"]))
    stub["source"] = "import sys\n\nsys.modules['gpucourse.checks'].fail = lambda problems, exercise: None\nfill_kernel = None\n"  # 1.3
    answer_cell(notebook, "launch_config")["source"] = TAMPER_WHEN_CALLED  # 1.4: tampers only when the check calls it
    cells.insert(0, {"cell_type": "code", "execution_count": None, "id": "inserted", "metadata": {}, "outputs": [],
                     "source": "import builtins\n\nbuiltins.isinstance = lambda value, kinds: True\n"})  # before the set-up
    return notebook


@pytest.fixture(scope="module")
def autograded(course) -> Path:
    """The course after `nbgrader autograde` and `generate_feedback` of notebook 1 for three students: right, wrong, tampered."""
    stem = "ch01_introduction"
    solution = json.loads((course / "source" / stem / f"{stem}.ipynb").read_text())
    released = json.loads((course / "release" / stem / f"{stem}.ipynb").read_text())
    wrong = json.loads(json.dumps(released))
    answer_cell(wrong, "add_arrays")["source"] = WRONG_ADD  # exercise 1.1: a typical wrong answer
    answer_cell(wrong, "scale_rows")["source"] = answer_cell(solution, "scale_rows")["source"]  # exercise 1.2: right
    tampered = tampered_submission(released, solution)
    for student, notebook in (("right", solution), ("wrong", wrong), ("tampered", tampered)):
        folder = course / "submitted" / student / stem
        folder.mkdir(parents=True)
        (folder / f"{stem}.ipynb").write_text(json.dumps(notebook))
    nbgrader(course, "autograde", stem)
    nbgrader(course, "generate_feedback", stem)
    return course


def test_autograde_scores_a_right_and_a_wrong_submission_and_feeds_back_the_check_messages(autograded):
    from nbgrader.api import Gradebook

    course, stem = autograded, "ch01_introduction"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        scores = {student: {grade.name: grade.score for grade in gradebook.find_submission(stem, student).notebooks[0].grades}
                  for student in ("right", "wrong", "tampered")}
    checks = sorted(scores["right"], key=lambda name: int(name.rsplit("-", 1)[1]))
    assert len(checks) == 4 and all(name.startswith(f"{stem}-check-") for name in checks)
    assert [scores["right"][name] for name in checks] == [1.0, 1.0, 1.0, 1.0]
    assert [scores["wrong"][name] for name in checks] == [0.0, 1.0, 0.0, 0.0]  # 1.1 wrong, 1.2 right, 1.3 and 1.4 not done
    assert [scores["tampered"][name] for name in checks] == [0.0, 0.0, 0.0, 0.0]  # every forged pass refused

    feedback = (course / "feedback" / "wrong" / stem / f"{stem}.html").read_text()
    assert "The number of blocks must be rounded up" in feedback  # the check's own message
    assert "start at cuda.grid(1) and step by cuda.gridsize(1)" in feedback  # the hint of an exercise left undone
    assert "gpucourse/checks" not in feedback  # the message alone, not a traceback through the package
    assert (course / "feedback" / "right" / stem / f"{stem}.html").exists()
    graded = json.loads((course / "autograded" / "right" / stem / f"{stem}.ipynb").read_text())
    errors = [out for cell in graded["cells"] for out in cell.get("outputs", []) if out["output_type"] == "error"]
    assert errors == [] and "\u2705" in json.dumps(graded, ensure_ascii=False)  # every check printed its pass mark


def test_autograde_refuses_every_tampered_cell_before_it_runs(autograded):
    """The tampered submission, as autograded: each refused cell raised the screen's message, and nothing passed."""
    course, stem = autograded, "ch01_introduction"
    graded = json.loads((course / "autograded" / "tampered" / stem / f"{stem}.ipynb").read_text())
    checks = [cell for cell in graded["cells"] if cell["metadata"].get("nbgrader", {}).get("grade")]
    assert len(checks) == 4 and "\u2705" not in json.dumps([cell["outputs"] for cell in checks], ensure_ascii=False)  # no pass
    refused = [cell for cell in graded["cells"] if cell["cell_type"] == "code" and "".join(cell["source"]).startswith("raise RuntimeError(")]
    assert len(refused) == 5  # the inserted cell and the four answers (the set-up cell was put back as released)
    for cell in refused:
        errors = [out for out in cell["outputs"] if out["output_type"] == "error"]
        assert errors and "the course's checks refuse code that could change them" in errors[0]["evalue"]
        assert "line " in errors[0]["evalue"]
    setup = next(cell for cell in graded["cells"] if "from gpucourse.checks import ch1" in "".join(cell["source"]))
    assert "".join(setup["source"]) == "from numba import cuda\n\nfrom gpucourse.checks import ch1"
    assert not any(out["output_type"] == "error" for out in setup["outputs"])
    feedback = (course / "feedback" / "tampered" / stem / f"{stem}.html").read_text()
    assert "refuse code that could change them" in feedback


# ---------------------------------------------------------------------------------------------
# Answers that fool the checks in their own kernel: the screen switched off, the grader apart still scores them 0

#: An IPython start-up file for the kernel: the screen of answer cells never starts (a route it misses, for every cell).
NO_SCREEN = """
import gpucourse.checks.guard as _guard
import gpucourse.checks.screen as _screen

_screen.watch = _screen.install = lambda shell, earlier=(): None
_screen.earlier_refusal = _guard.earlier_refusal = lambda sources: None
"""

#: The course's config, then the screen of submitted cells left out of autograde's sanitizing steps.
NO_SCREEN_CONFIG = """
c.Autograde.sanitize_preprocessors = [step for step in c.Autograde.sanitize_preprocessors if step.__name__ != "ScreenCells"]
"""

SILENCED_CHECK = WRONG_ADD + """

import gpucourse.checks.ch1 as checks

checks.fail = lambda problems, exercise: None  # every failure of the chapter's checks silenced
"""

REPLACED_CHECK = """
def scale_rows(out, matrix, factors):
    pass


ch1.check_scale_rows = lambda answer: print("\u2705 Exercise 1.2: scale_rows is right.")  # the check itself replaced
"""

BLINDED_CHECK = """
@cuda.jit
def fill_kernel(out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = 3 * i  # off by one everywhere


import gpucourse.checks.ch1 as checks

checks.array_problems = lambda *args, **kwargs: []  # the comparison with the reference, and the trace's, made blind
checks.rewritten = lambda trace, name: (0, 0)
checks.coalescing_problems = lambda *args, **kwargs: []
"""


def unscreened_submission(released: dict) -> dict:
    """Exercise notebook 1 with four answers that each print the check's pass in their own kernel, all wrong."""
    notebook = json.loads(json.dumps(released))
    answer_cell(notebook, "add_arrays")["source"] = SILENCED_CHECK  # 1.1
    answer_cell(notebook, "scale_rows")["source"] = REPLACED_CHECK  # 1.2
    stub = next(cell for cell in notebook["cells"] if "cuda.gridsize(1)" in "".join(cell["source"])
                and "NotImplementedError" in "".join(cell["source"]))
    stub["source"] = BLINDED_CHECK  # 1.3
    answer_cell(notebook, "launch_config")["source"] = TAMPER_WHEN_CALLED  # 1.4: silences the check while it runs
    return notebook


@pytest.fixture(scope="module")
def unscreened(autograded, tmp_path_factory) -> Path:
    """The course after autograding, with no screen at all, one student whose four answers fool the checks in their kernel."""
    course, stem = autograded, "ch01_introduction"
    released = json.loads((course / "release" / stem / f"{stem}.ipynb").read_text())
    folder = course / "submitted" / "unscreened" / stem
    folder.mkdir(parents=True)
    (folder / f"{stem}.ipynb").write_text(json.dumps(unscreened_submission(released)))
    ipython = tmp_path_factory.mktemp("ipython")
    (ipython / "profile_default" / "startup").mkdir(parents=True)
    (ipython / "profile_default" / "startup" / "00-no-screen.py").write_text(NO_SCREEN)
    config = course / "nbgrader_config.py"
    kept = config.read_text()
    config.write_text(kept + NO_SCREEN_CONFIG)
    try:
        log = nbgrader(course, "autograde", stem, "--student=unscreened", env={"IPYTHONDIR": str(ipython)})
    finally:
        config.write_text(kept)
    assert "refused by the course's screen" not in log  # the screen was off: nothing was refused
    return course


def test_answers_that_fool_the_checks_in_their_own_kernel_score_0_under_autograde(unscreened):
    """Each answer printed the check's pass in the notebook's kernel; the grader, apart, failed each, and nbgrader scored 0."""
    from nbgrader.api import Gradebook

    from gpucourse.grading import UNCONFIRMED

    course, stem = unscreened, "ch01_introduction"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        grades = gradebook.find_submission(stem, "unscreened").notebooks[0].grades
        scores = {grade.name: grade.score for grade in grades}
    checks = sorted(scores, key=lambda name: int(name.rsplit("-", 1)[1]))
    assert [scores[name] for name in checks] == [0.0, 0.0, 0.0, 0.0]
    graded = json.loads((course / "autograded" / "unscreened" / stem / f"{stem}.ipynb").read_text())
    cells = [cell for cell in graded["cells"] if cell["metadata"].get("nbgrader", {}).get("grade") and cell["cell_type"] == "code"]
    errors = [[out for out in cell["outputs"] if out["output_type"] == "error"] for cell in cells]
    assert all(len(found) == 1 for found in errors)
    # every one had printed a pass in its own kernel (the tamper worked there), and the grader's reason replaced it
    assert all(UNCONFIRMED in found[0]["evalue"] for found in errors)
    assert "\u2705" not in json.dumps([cell["outputs"] for cell in cells], ensure_ascii=False)
    reasons = [found[0]["evalue"] for found in errors]
    assert "The number of blocks must be rounded up" in reasons[0]  # the wrong 1.1, named by the check's own message
    assert "never ran in your notebook's run" in reasons[1]  # the replaced check: no record of any call of the answer
    assert "wrong values" in reasons[2]  # 1.3's values, compared by the grader's own check
    assert "launch_config(" in reasons[3]


# ---------------------------------------------------------------------------------------------
# The README's recipe grades in a venv of its own, the course installed there from a wheel


def test_the_grading_venv_imports_the_course_from_its_own_wheel_not_the_checkout(tmp_path):
    """`python -m gpucourse grading-env` as the README runs it, its install without dependencies (the cheap part to test)."""
    from gpucourse import gradingenv

    probe = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(tmp_path / "probe"),
                            "setuptools>=77"], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:  # pip builds the wheel in an isolated environment, from the package index
        if os.environ.get("CI"):
            pytest.fail(f"no package index to build the course's wheel with: {probe.stderr[-300:]}")
        pytest.skip("no package index reachable: pip cannot build the course's wheel (setuptools>=77)")
    python = gradingenv.build(tmp_path / "grader", pip_args=["--no-deps"])
    origin = gradingenv.installed_from_wheel(python)
    assert origin.name == "__init__.py" and origin.is_relative_to((tmp_path / "grader").resolve())
    assert not origin.is_relative_to(ROOT)
    assert (origin.parent / "checks" / "remote.py").read_bytes() == (ROOT / "gpucourse" / "checks" / "remote.py").read_bytes()
    site = origin.parent.parent
    assert not [path.name for path in site.glob("*.pth") if "gpucourse" in path.read_text()]  # no editable finder of the checkout


def test_the_readme_recipe_autogrades_in_the_grading_venv():
    text = (ROOT / "README.md").read_text()
    recipe = text[text.index("**Grading with nbgrader**"):text.index("**What the checks guard against")]
    assert "python -m gpucourse grading-env" in recipe and "source .venv/bin/activate" not in recipe
    activate = recipe.index("/bin/activate")
    assert activate < recipe.index("nbgrader generate_assignment") and activate < recipe.index("nbgrader autograde")


#: Solution notebooks autograded by the next test in the simulator (on a GPU: all): ch01 is graded above; these two hand
#: the answer the check's own objects (a stand-in GPU that times a real kernel, MPI endpoints), which the grader replays.
SIMULATOR_SOLUTIONS = ("ch02_metrics", "ch04_multi_gpu")


def test_every_solution_notebook_scores_full_marks_from_the_grader_apart(course):
    """Reference solutions, autograded: each check cell scores its point from the grader's verdict (or, for the checks
    listed in remote.JUDGED_IN_NOTEBOOK, from the notebook's run), and shows the grader's pass line.

    All eight notebooks on a GPU; in the simulator two (about 15 s of CPU; all eight take about 75 s).
    """
    from nbgrader.api import Gradebook

    from gpucourse import mode
    from gpucourse.checks.remote import JUDGED_IN_NOTEBOOK, check_call

    stems = SOLUTIONS if mode.on_gpu() else SIMULATOR_SOLUTIONS
    for stem in stems:
        folder = course / "submitted" / "reference" / stem
        folder.mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / f"{stem}.ipynb", folder)
    log = nbgrader(course, "autograde", "*", "--student=reference", "--log-level=INFO")
    apart, total = 0, 0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for stem in stems:
            notebook = gradebook.find_submission(stem, "reference").notebooks[0]
            scores = {grade.name: (grade.score, grade.max_score) for grade in notebook.grades if "-check-" in grade.name}
            assert scores and all(score == most for score, most in scores.values()), (stem, scores)
            graded = json.loads((course / "autograded" / "reference" / stem / f"{stem}.ipynb").read_text())
            for cell in graded["cells"]:
                if cell["metadata"].get("nbgrader", {}).get("grade") and cell["cell_type"] == "code":
                    module, check, _ = check_call("".join(cell["source"]))
                    assert "\u2705" in json.dumps(cell["outputs"], ensure_ascii=False), (stem, check)
                    apart += f"{module}.{check}" not in JUDGED_IN_NOTEBOOK
                    total += 1
    assert total and log.count("judged in the notebook's own run") == total - apart  # the others were graded apart
