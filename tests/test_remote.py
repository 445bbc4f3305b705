"""Grading apart from the answer (gpucourse.checks.remote): a check recorded as the notebook runs it, then replayed.

These run the recording and the replay in this one process (cheap); tests/test_grading.py runs them as nbgrader
does, the replay in a fresh process. Tampering here is undone before the replay, as a fresh process would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gpucourse
from gpucourse.checks import CheckFailed, ch1, ch2, plaindata, remote

SEED = "test-seed"


def launch_config(n, threads_per_block, device):
    if not 0 < threads_per_block <= device.max_threads_per_block:
        raise ValueError(f"threads_per_block must be between 1 and {device.max_threads_per_block}; got {threads_per_block}")
    return (n + threads_per_block - 1) // threads_per_block, threads_per_block


def best_block_size(time_ms, block_sizes, bytes_moved):
    bandwidth = {}
    for threads_per_block in block_sizes:
        try:
            milliseconds = time_ms(threads_per_block)
        except gpucourse.LaunchConfigError:
            continue
        bandwidth[threads_per_block] = bytes_moved / 1e9 / (milliseconds * 1e-3)
    best = max(bandwidth, key=bandwidth.get)
    return best, bandwidth[best]


def record(folder, monkeypatch, module, check_name: str, *answers) -> bool:
    """Run a check as the notebook's kernel does under autograde (its transcript in `folder`); whether it passed there."""
    monkeypatch.setenv(remote.TRANSCRIPT_ENV, str(folder))
    monkeypatch.setenv(remote.SEED_ENV, SEED)
    try:
        remote.recorded(getattr(module, check_name), module.__name__.rsplit(".", 1)[-1])(*answers)
        return True
    except CheckFailed:
        return False
    finally:
        monkeypatch.delenv(remote.TRANSCRIPT_ENV)


def test_a_right_answer_replayed_passes_and_a_wrong_one_fails(tmp_path, monkeypatch, capsys):
    assert record(tmp_path / "right", monkeypatch, ch1, "check_launch_config", launch_config)
    verdict = remote.grade_cell("ch1.check_launch_config(launch_config)", tmp_path / "right", SEED)
    assert verdict.passed and verdict.text.startswith("\u2705 Exercise 1.4")

    def rounds_down(n, threads_per_block, device):
        return launch_config(n, threads_per_block, device)[0] - (n % threads_per_block > 0), threads_per_block

    assert not record(tmp_path / "wrong", monkeypatch, ch1, "check_launch_config", rounds_down)
    verdict = remote.grade_cell("ch1.check_launch_config(launch_config)", tmp_path / "wrong", SEED)
    assert not verdict.passed and "round the blocks up" in verdict.text


def test_an_answer_that_silences_the_check_while_it_runs_fails_when_replayed(tmp_path, monkeypatch):
    def silencing(n, threads_per_block, device):
        monkeypatch.setattr(ch1, "fail", lambda problems, exercise: None)  # undone after the test, as a fresh process is clean
        return 1, threads_per_block

    assert record(tmp_path, monkeypatch, ch1, "check_launch_config", silencing)  # it fooled the check in its own process
    monkeypatch.undo()
    verdict = remote.grade_cell("ch1.check_launch_config(launch_config)", tmp_path, SEED)
    assert not verdict.passed and "returned (1, " in verdict.text


def test_an_answer_that_writes_into_the_checks_stand_in_fails_when_replayed(tmp_path, monkeypatch):
    """2.2 hands the answer a stand-in GPU (a function): an answer that reads its insides, or writes its attribute, fails apart."""

    def peeking(time_ms, block_sizes, bytes_moved):
        getattr(time_ms, "__closure__", None)  # the stand-in's own bandwidth table is in there
        return best_block_size(time_ms, block_sizes, bytes_moved)

    assert record(tmp_path / "item", monkeypatch, ch2, "check_best_block_size", peeking)  # only read: right in its process
    verdict = remote.grade_cell("ch2.check_best_block_size(best_block_size)", tmp_path / "item", SEED)
    assert not verdict.passed and "read '__closure__', a private part" in verdict.text

    def rebound(time_ms, block_sizes, bytes_moved):
        time_ms.gbs = {32: 1e9}
        return best_block_size(time_ms, block_sizes, bytes_moved)

    assert record(tmp_path / "attribute", monkeypatch, ch2, "check_best_block_size", rebound)
    verdict = remote.grade_cell("ch2.check_best_block_size(best_block_size)", tmp_path / "attribute", SEED)
    assert not verdict.passed and "wrote the attribute 'gbs'" in verdict.text


def test_a_check_that_never_ran_or_never_finished_fails_with_its_reason(tmp_path):
    verdict = remote.grade_cell("ch1.check_launch_config(launch_config)", tmp_path, SEED)
    assert not verdict.passed and "never ran in your notebook's run" in verdict.text
    folder = tmp_path / "001-ch1.check_launch_config"
    folder.mkdir()
    (folder / "transcript.json").write_text(json.dumps({"check": "ch1.check_launch_config", "entries": [], "finished": False}))
    verdict = remote.grade_cell("ch1.check_launch_config(launch_config)", tmp_path, SEED)
    assert not verdict.passed and "did not finish in your notebook's run" in verdict.text
    verdict = remote.grade_cell("import os; ch1.check_launch_config(launch_config)", tmp_path, SEED)
    assert not verdict.passed and "not a check call" in verdict.text


def test_a_transcript_is_read_as_plain_data_only(tmp_path):
    store = plaindata.Store(tmp_path)
    np.save(tmp_path / "1.npy", np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle"):
        store.get("1.npy")
    with pytest.raises(plaindata.ReplayMismatch):
        store.get("../1.npy")
    with pytest.raises(plaindata.ReplayMismatch, match="outside the course"):
        plaindata.decode({"dataclass": "subprocess:Popen", "fields": {}}, store)
    with pytest.raises(plaindata.ReplayMismatch, match="not a plain dataclass"):  # building it would run its __post_init__
        plaindata.decode({"dataclass": "gpucourse.multigpu.mpi.exchange:LoopbackFabric", "fields": {"size": 2}}, store)
    assert isinstance(plaindata.rebuilt_exception({"type": "os:system", "message": "x"}), RuntimeError)
    assert str(plaindata.rebuilt_exception(plaindata.exception_data(KeyError("x")))) == str(KeyError("x"))
    value = (1, 2.5, np.float32(3), {"a": [np.arange(3)]}, None)
    assert plaindata.digest(plaindata.decode(plaindata.encode(value, store), store)) == plaindata.digest(value)


def test_the_grader_process_that_fails_or_hangs_fails_every_check_with_the_reason(tmp_path):
    pytest.importorskip("nbgrader")
    import nbformat

    from gpucourse.grading import GradeApart

    cell = nbformat.v4.new_code_cell("ch1.check_launch_config(launch_config)")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "check-1", "points": 1, "locked": True}
    notebook = nbformat.v4.new_notebook(cells=[cell])
    verdicts = GradeApart(timeout=0).grade(notebook, tmp_path, SEED, tmp_path)
    assert verdicts == {"check-1": {"passed": False, "text": "\u274c no verdict: the grader process did not finish within 0 s."}}
    grader = GradeApart(timeout=60)
    resources = {"gpucourse_grading": {"folder": str(tmp_path / "none"), "seed": SEED}}
    graded, _ = grader.preprocess(notebook, resources)  # a real grader process: no transcript, so no answer to judge
    error = graded.cells[0].outputs[-1]
    assert error.output_type == "error" and "never ran in your notebook's run" in error.evalue


#: A few check tests, graded apart too by the replaying plugin in CI: runs checked (ch1), generated cases and counted
#: work (ch1's properties), streams watched inside Numba (3.4), a ufunc's and CuPy kernels' declarations (3.7.1), an answer
#: that empties or sorts the list it was given (ch4), dynamic shared memory, a trace and racecheck (5.2), fresh spectra (ch7).
GRADED_APART = ["tests/test_checks_ch3_answers.py::test_overlapped_right_another_way",
                "tests/test_checks_ch3_memory.py::test_ufunc_kernel_float64_declarations_are_named_in_both_modes",
                "tests/test_checks_ch5.py::test_block_sums",
                "tests/test_checks_ch1_properties.py::test_add_arrays_wrong_answers_are_named",
                "tests/test_checks_ch1_properties.py::test_fill_grid_stride_wrong_answers_are_named",
                "tests/test_checks_ch4_fresh.py::test_fresh_wrong_device_assignments_are_named",
                "tests/test_checks_ch7_fresh.py::test_fresh_right_poisson_divisions_pass"]


def test_check_tests_give_the_same_verdicts_graded_apart():
    """A check that reads the answer's code outside an @remote.evidence helper, or draws unseeded cases, fails here."""
    from conftest import ROOT

    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "-p", "gpucourse.checks.replaying", *GRADED_APART], cwd=ROOT, env=environment, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1] and "failed" not in done.stdout.splitlines()[-1]


def test_generated_cases_and_fresh_seeds_are_the_same_in_a_fresh_process():
    """The grader's process draws the worker's cases: Hypothesis's search (derandomized, whatever local modules are loaded: the
    notebook's kernel has others) and a check module's fresh seed."""
    from conftest import run_python

    code = ("from gpucourse.checks import ch1, ch4, properties, remote\n"
            "seen = []\n"
            "properties.smallest_failure(lambda case: seen.append(case) or ('bad' if case[0] % 7 == 3 else None), ch1.FILL_CASES, "
            "max_examples=5, shrink_calls=10)\n"
            "with remote._seeded('s:ch4.check_assign_devices'):\n"
            "    drawn = ch4._host_lists()[-4:]\n"
            "print(seen, drawn)\n")
    more_modules = "import gpucourse, sys\nsys.path.insert(0, 'tests')\nimport test_checks_ch2, test_checks_ch7_fresh\n"  # local, full of constants
    runs = [run_python(code, GPUCOURSE_MODE="simulator"), run_python(more_modules + code, GPUCOURSE_MODE="simulator")]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.count("(") >= 5
