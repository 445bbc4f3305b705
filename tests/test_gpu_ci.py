"""The GPU CI driver (tools/gpu_ci.py, tools/gpu_ci_plugin.py): its record, the course's commit, the leak verdict, the
solution checks (with a fake speed history), packing for machines that return few files, merging calls, filing
the record in measurements/, and the lock that lets processes sharing a GPU time one at a time."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time

import nbformat
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
spec = importlib.util.spec_from_file_location("gpu_ci", ROOT / "tools" / "gpu_ci.py")
gpu_ci = importlib.util.module_from_spec(spec)
sys.modules["gpu_ci"] = gpu_ci
spec.loader.exec_module(gpu_ci)
import gpu_ci_plugin  # noqa: E402


def fake_call(folder, commit="abc1234", started="2026-11-25T10:00:00+00:00", steps=None, gpu="NVIDIA H200", count=1):
    """An output folder as one call leaves it: gpu_ci.json and a log."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"schema": 1, "commit": commit, "commit_source": "--commit", "date": started[:10], "gpu": gpu, "driver": "580.1",
              "gpu_count": count, "ecc": "Enabled", "gpu_memory": "143771 MiB", "versions": "{}",
              "calls": [{"started": started, "command": "python3 tools/gpu_ci.py OUT --steps x", "steps": list(steps or {}), "seconds": 1.0}],
              "steps": steps or {}}
    (folder / "gpu_ci.json").write_text(json.dumps(record))
    (folder / "logs").mkdir(exist_ok=True)
    (folder / "logs" / "tests.log").write_text(f"log of {started}\n")
    return record


def test_pack_leaves_the_record_beside_one_archive(tmp_path):
    fake_call(tmp_path, steps={"tests": {"status": "ok"}})
    (tmp_path / "gpu_ci.md").write_text("# record\n")
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "report.md").write_text("| row |\n")
    (tmp_path / "executed" / "01_introduction").mkdir(parents=True)
    (tmp_path / "executed" / "01_introduction" / "01.ipynb").write_text("{}")
    (tmp_path / ".timing.lock").write_text("")
    archive = gpu_ci.pack(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_ci.json", "gpu_ci.md", "gpu_ci.tar.gz"]
    with tarfile.open(archive) as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile())
        assert names == ["executed/01_introduction/01.ipynb", "gpu_ci.json", "gpu_ci.md", "logs/tests.log", "report/report.md"]


def test_the_commit_is_the_courses_own(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUCOURSE_COMMIT", raising=False)
    assert gpu_ci.course_commit("1234abc") == ("1234abc", "--commit")
    monkeypatch.setenv("GPUCOURSE_COMMIT", "feed123")
    assert gpu_ci.course_commit(None) == ("feed123", "GPUCOURSE_COMMIT")
    monkeypatch.delenv("GPUCOURSE_COMMIT")
    # A copy of the course inside another repository: git names that repository's commit, so it is not used.
    outer = tmp_path / "outer"
    copy = outer / "course"
    copy.mkdir(parents=True)
    for command in (["git", "init", "-q"], ["git", "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(command, cwd=outer, check=True, capture_output=True)
    monkeypatch.setattr(gpu_ci, "ROOT", copy)
    commit, source = gpu_ci.course_commit(None)
    assert commit is None and "not the course's" in source
    (copy / "COMMIT").write_text("c0ffee1\n")
    assert gpu_ci.course_commit(None) == ("c0ffee1", "COMMIT file")


def test_gpu_short_names():
    def name(gpu, count=1):
        return gpu_ci.gpu_short_name({"gpu": gpu, "gpu_count": count})

    assert name("NVIDIA H200") == "h200"
    assert name("NVIDIA H100 80GB HBM3") == "h100"
    assert name("NVIDIA A100-SXM4-80GB") == "a100"
    assert name("Tesla T4") == "t4"
    assert name("NVIDIA L4") == "l4"
    assert name("NVIDIA GeForce RTX 4090") == "rtx4090"
    assert name("NVIDIA H200", 2) == "h200x2"
    assert gpu_ci.gpu_short_name({"gpu": "none (simulator mode)", "gpu_count": 0}) == "simulator"


def test_the_record_holds_no_machine_paths(tmp_path):
    scrub = gpu_ci.Scrubber(tmp_path)
    text = scrub(f"{gpu_ci.ROOT}/tests/test_x.py failed; wrote {tmp_path}/logs; {sys.prefix}/bin/python")
    assert str(gpu_ci.ROOT) not in text and str(tmp_path) not in text and sys.prefix not in text
    assert "./tests/test_x.py" in text and "OUT/logs" in text


def test_leak_verdict_on_device_memory_and_in_the_simulator():
    args = gpu_ci.parse(["OUT"])

    def rows(left, simulated=None, card=8 * 2**30):
        return [{"notebook": f"nb{i}", "seconds": 1, "cells": 1, "peak_bytes": None if v is None else v + 5, "left_bytes": v,
                 "probe": {"device_memory_bytes": card, **({} if simulated is None else {"simulated_bytes": simulated[i]})}, "error": ""}
                for i, v in enumerate(left)]

    mib = 2**20
    held = gpu_ci.leaks_result(rows([785 * mib, 900 * mib, 9728 * mib, 1000 * mib]), [], args)
    assert held["status"] == "failed" and held["growth_bytes"] == (9728 - 785) * mib
    assert held["largest_step"]["notebook"] == "nb2" and held["measured"].startswith("device memory")
    given_back = gpu_ci.leaks_result(rows([785 * mib, 900 * mib, 1000 * mib]), [], args)
    assert given_back["status"] == "ok" and given_back["growth_bytes"] == 215 * mib
    simulated = gpu_ci.leaks_result(rows([None, None, None], simulated=[0, 4096, 0]), [], args)
    assert simulated["status"] == "failed" and simulated["tolerance_bytes"] == 0  # none of the simulator's arrays may stay
    assert gpu_ci.leaks_result(rows([None, None], simulated=[0, 0]), ["nb9"], args)["status"] == "incomplete"
    whole_card = gpu_ci.leaks_result(rows([785 * mib, 785 * mib], card=141 * 2**30), [], args)  # the emulation did not take
    assert whole_card["status"] == "failed" and whole_card["not_emulated"] == ["nb0", "nb1"]
    assert gpu_ci.leaks_result(rows([785 * mib, 785 * mib], card=141 * 2**30), [], gpu_ci.parse(["OUT", "--small-card", "none"]))["status"] == "ok"
    assert gpu_ci.memory_size("8GiB") == 8 * 2**30 and gpu_ci.memory_size("16GB") == 16 * 10**9


class FakeMemory:
    """Device memory readings from a list (the last repeats)."""

    def __init__(self, readings):
        self.readings = list(readings)
        self.available = True

    def used(self):
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def feed(self, readings, timeout: float = 30) -> bool:
        """Give the sampler's thread these readings and wait until it has read all but the last; False if it never did."""
        self.readings = list(readings)
        deadline = time.monotonic() + timeout  # a loaded CI machine may start the thread late: wait for it, not a fixed time
        while len(self.readings) > 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        return len(self.readings) == 1


def test_the_sampler_keeps_the_peak_of_a_window():
    memory = FakeMemory([100])
    with gpu_ci.PeakSampler(memory, interval=0.001) as sampler:
        with sampler.window() as found:
            read = memory.feed([900, 300, 200])  # the peak comes and goes inside the window, read only by the sampler's thread
        assert read, "the sampler's thread never read the memory"
    assert found["peak_bytes"] == 900


def test_the_sampler_keeps_nothing_from_before_a_window():
    memory = FakeMemory([100])
    with gpu_ci.PeakSampler(memory, interval=0.001) as sampler:
        memory.feed([900, 300, 200])
        with sampler.window() as found:
            pass
    assert found["peak_bytes"] == 200


SOLUTION = [  # the speed comparisons go through gpucourse.checks.speed.record, as the checks' do (GPUCOURSE_SPEED_LOG)
    ("import numpy as np\nfrom gpucourse.checks import speed\n_runs = [0]", {}),
    ("_runs[0] += 1\nspeed.record('Exercise 9.1', 0.95 - 0.05 * _runs[0], 0.7)  # a fake speed comparison, lower at every run",
     {"grade": True, "grade_id": "fake-check-1"}),
    ("speed.record('Exercise 9.1', 1.0, 0.7)\nassert _runs[0] < 3, 'slow on the third run'", {"grade": True, "grade_id": "fake-check-2"}),
    ("_others = globals().get('_others', 0) + 1  # a check that times nothing", {"grade": True, "grade_id": "fake-check-3"}),
    ("print('done')", {}),
]


def test_a_solutions_check_cells_run_again_and_their_lowest_speed_is_kept(tmp_path):
    notebook = nbformat.v4.new_notebook()
    for source, grading in SOLUTION:
        cell = nbformat.v4.new_code_cell(source)
        if grading:
            cell.metadata["nbgrader"] = {**grading, "solution": False, "locked": True, "points": 1}
        notebook.cells.append(cell)
    path = tmp_path / "ch09_fake.ipynb"
    nbformat.write(notebook, path)
    monkey_root = tmp_path
    original = gpu_ci.ROOT
    gpu_ci.ROOT = monkey_root
    try:
        run = gpu_ci.Run(gpu_ci.parse([str(tmp_path / "out"), "--check-runs", "4"]), [str(tmp_path / "out")])
        row = gpu_ci.run_solution(path, run, {}, 4, None)
    finally:
        gpu_ci.ROOT = original
    assert row["error"] == "" and row["cells"] == 5 and row["history_available"]
    first, second = row["checks"]["fake-check-1"], row["checks"]["fake-check-2"]
    assert row["checks"]["fake-check-3"]["runs"] == 1  # it compared no speed: run once
    assert first["runs"] == 4 and [s["ratio"] for s in first["speeds"]] == pytest.approx([0.9, 0.85, 0.8, 0.75])
    assert second["runs"] == 4 and len(second["failures"]) == 2 and "slow on the third run" in second["failures"][0]
    result = gpu_ci.solutions_result([row], [], 1, run.args, small=False)
    (one, two, three) = result["checks"]
    assert one["lowest_ratio"] == pytest.approx(0.75) and one["bar"] == 0.7 and one["margin"] == pytest.approx(0.75 / 0.7 - 1, abs=1e-4)
    assert one["exercise"] == "Exercise 9.1" and two["failed_runs"] == 2 and result["status"] == "failed"
    assert "(within 15 %)" in gpu_ci.render_markdown({**fake_call(tmp_path / "r"), "steps": {"solutions": {**result, "seconds": 1}}})


def test_calls_merge_into_one_record_of_one_commit(tmp_path):
    first = fake_call(tmp_path / "a", steps={"tests": {"status": "failed"}, "report": {"status": "ok", "summary": "396 rows"}})
    second = fake_call(tmp_path / "b", started="2026-11-25T10:20:00+00:00", steps={"tests": {"status": "ok"}})
    merged = gpu_ci.merge([second, first])
    assert [c["started"][11:16] for c in merged["calls"]] == ["10:00", "10:20"]
    assert merged["steps"]["tests"]["status"] == "ok" and merged["steps"]["report"]["status"] == "ok"  # the later call's tests
    text = gpu_ci.render_markdown(merged)  # a step no call ran is named, so that a partial record does not read as whole
    assert "| leaks | not run (no call of this record ran it) |" in text and "| tests | not run" not in text
    other = fake_call(tmp_path / "c", commit="fff0000")
    with pytest.raises(SystemExit, match="different commits"):
        gpu_ci.merge([first, other])


def test_a_step_left_incomplete_goes_on_in_a_later_call(tmp_path):
    def row(name, error=""):
        return {"notebook": f"chapters/07_fft/{name}.ipynb", "seconds": 1.0, "cells": 3, "peak_bytes": 1, "end_bytes": 1, "error": error}

    names = [f"0{k}_n" for k in range(1, 5)]
    first = gpu_ci.chapters_result([row(n) for n in names[:2]], [f"chapters/07_fft/{n}.ipynb" for n in names[2:]])
    second = gpu_ci.chapters_result([row(n) for n in names], [])  # --chapter 7: the two run before are run again
    assert first["status"] == "incomplete"
    calls = [fake_call(tmp_path / "a", steps={"chapters": {**first, "seconds": 5}}),
             fake_call(tmp_path / "b", started="2026-11-25T10:20:00+00:00", steps={"chapters": {**second, "seconds": 2}})]
    merged = gpu_ci.merge(calls)["steps"]["chapters"]
    assert merged["status"] == "ok" and merged["counts"]["notebooks"] == 4 and merged["not_run"] == [] and merged["seconds"] == 7
    failing = gpu_ci.chapters_result([row(names[2], error="ValueError: x")], [])
    calls[1]["steps"]["chapters"] = {**failing, "seconds": 1}
    merged = gpu_ci.merge(calls)["steps"]["chapters"]
    assert merged["status"] == "failed" and merged["not_run"] == ["chapters/07_fft/04_n.ipynb"]
    calls[0]["steps"]["chapters"] = {**second, "seconds": 1}  # a step finished before: the later call's alone
    assert gpu_ci.merge(calls)["steps"]["chapters"]["counts"]["notebooks"] == 1


def test_file_puts_the_record_where_the_site_reads_it(tmp_path):
    chapters = {"status": "ok", "counts": {"notebooks": 1}, "notebooks": [
        {"notebook": "chapters/01_introduction/01_first_kernels.ipynb", "seconds": 9.5, "cells": 14, "peak_bytes": 2**30,
         "end_bytes": 2**29, "error": ""}], "not_run": []}
    fake_call(tmp_path / "a", steps={"report": {"status": "ok", "summary": "7 chapters"}})
    from gpucourse import thenandnow
    from gpucourse.thenandnow import core

    def report_of(number, device):
        return thenandnow.Report({"device": device, "simulated": False, "date": "2026-11-25 10:00"},
                                 [core.ChapterResult(number, f"Chapter {number}", [core.Section("s", [core.Row("r", here=1.0)])])])

    thenandnow.write(report_of(7, "NVIDIA H200"), tmp_path / "a" / "report")
    thenandnow.write(report_of(1, "NVIDIA H100"), tmp_path / "measurements" / "thenandnow")  # filed before: stays beside it
    fake_call(tmp_path / "b", started="2026-11-25T10:20:00+00:00", steps={"chapters": chapters})
    (tmp_path / "b" / "executed" / "01_introduction").mkdir(parents=True)
    (tmp_path / "b" / "executed" / "01_introduction" / "01_first_kernels.ipynb").write_text("{}")
    gpu_ci.pack(tmp_path / "b")  # one call's files came back as an archive
    measurements = tmp_path / "measurements"
    assert gpu_ci.main(["file", str(tmp_path / "a"), str(tmp_path / "b" / "gpu_ci.tar.gz"), "--measurements", str(measurements)]) == 0
    folder = measurements / "gpu_ci" / "2026-11-25_h200"
    assert (folder / "executed" / "01_introduction" / "01_first_kernels.ipynb").exists()
    assert sorted(p.name for p in (folder / "logs").iterdir()) == ["call2_tests.log", "tests.log"]
    record = json.loads((folder / "gpu_ci.json").read_text())
    assert record["gpu"] == "NVIDIA H200" and record["driver"] == "580.1" and record["date"] == "2026-11-25"
    assert set(record["steps"]) == {"report", "chapters"} and len(record["calls"]) == 2
    assert sorted(p.name for p in (measurements / "thenandnow").iterdir()) == ["report.html", "report.json", "report.md"]
    filed = json.loads((measurements / "thenandnow" / "report.json").read_text())["chapters"]
    assert [(c["number"], c["recorded"]["device"]) for c in filed] == [(1, "NVIDIA H100"), (7, "NVIDIA H200")]
    text = (folder / "gpu_ci.md").read_text()
    assert "chapters/01_introduction/01_first_kernels.ipynb | 9.5 | 14 | 1024 | 512" in text and "abc1234" in text
    assert gpu_ci.versions_in_words("{'python': '3.12.3', 'numpy': '2.4.6'}") == "python 3.12.3, numpy 2.4.6"


def test_stale_picks_the_notebooks_no_gpu_record_of_their_code_holds(tmp_path):
    """`--stale`: with no record every chapter notebook; with the repository's records, exactly the website's waiting pages."""
    every = gpu_ci.notebooks_of("chapters")
    assert gpu_ci.stale_notebooks(tmp_path) == every
    stale = gpu_ci.stale_notebooks()
    assert set(stale) <= set(every) and len(stale) < len(every)
    assert gpu_ci.parse([str(tmp_path / "out"), "--steps", "chapters", "--stale"]).stale


def test_a_record_on_other_cuda_wheels_is_filed_and_described_as_such(tmp_path):
    record = fake_call(tmp_path / "a", steps={"chapters": {"status": "ok", "counts": {"notebooks": 0}, "notebooks": [], "not_run": []}})
    record.update(versions="{'python': '3.12.3', 'numba-cuda': '0.30.4', 'cupy-cuda12x': '14.2.0'}",
                  executed_as="each chapter notebook in its own kernel, the whole card")
    (tmp_path / "a" / "gpu_ci.json").write_text(json.dumps(record))
    assert gpu_ci.cuda_wheels(record) == ("12", "14.2.0")
    assert gpu_ci.cuda_wheels({**record, "versions": "{'cupy-cuda13x': '14.2.0'}"}) is None  # the GPU image's own stack
    assert gpu_ci.main(["file", str(tmp_path / "a"), "--measurements", str(tmp_path / "m")]) == 0
    filed = json.loads((tmp_path / "m" / "gpu_ci" / "2026-11-25_h200_cuda12" / "gpu_ci.json").read_text())
    assert filed["executed_as"].endswith("the whole card, CuPy and Numba on the CUDA 12 wheels (cupy-cuda12x 14.2.0)")


def test_the_plugin_marks_listed_tests_and_reads_outcomes():
    entries = {"test_timing.py", "test_widgets.py::test_widget_builds_and_reruns", "tests/test_x.py::test_y[a]"}
    assert gpu_ci_plugin.matches("tests/test_timing.py::test_anything", entries)
    assert gpu_ci_plugin.matches("tests/test_widgets.py::test_widget_builds_and_reruns[p]", entries)
    assert gpu_ci_plugin.matches("tests/test_x.py::test_y[a]", entries) and not gpu_ci_plugin.matches("tests/test_x.py::test_y[b]", entries)
    assert not gpu_ci_plugin.matches("tests/test_widgets.py::test_other", entries)
    lines = [{"nodeid": "a", "when": "setup", "outcome": "passed"}, {"nodeid": "a", "when": "call", "outcome": "passed"},
             {"nodeid": "b", "when": "setup", "outcome": "failed", "message": "fixture"},
             {"nodeid": "c", "when": "setup", "outcome": "passed"}, {"nodeid": "c", "when": "call", "outcome": "failed", "message": "x"},
             {"nodeid": "d", "when": "setup", "outcome": "skipped"}, {"nodeid": "e", "when": "setup", "outcome": "passed"}]
    outcomes = {k: v["outcome"] for k, v in gpu_ci_plugin.final_outcomes(lines).items()}
    assert gpu_ci_plugin.short_id("tests/test_x.py::test_y[a]") == "test_x.py::test_y[a]" == gpu_ci_plugin.short_id("test_x.py::test_y[a]")
    assert outcomes == {"a": "passed", "b": "error", "c": "failed", "d": "skipped", "e": "unfinished"}
    assert all(line.strip().startswith("#") or "::" in line or line.strip().endswith(".py")
               for line in (ROOT / "tests" / "timing_tests.txt").read_text().splitlines() if line.strip())


def test_the_tests_step_runs_timing_tests_alone_after_the_rest(tmp_path):
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "test_fake.py").write_text(textwrap.dedent("""
        import gpucourse

        def test_plain():
            assert 1 + 1 == 2

        def test_times():
            assert gpucourse.timing.wall_time_ms(lambda: None, repeat=1, warmup=0) >= 0

        def compare_speed():  # as an exercise check's paired comparison: run again alone too
            return gpucourse.timing.wall_time_ms(lambda: None, repeat=1, warmup=0)

        def test_paired():
            assert compare_speed() >= 0
    """))
    out = tmp_path / "out"
    run = gpu_ci.Run(gpu_ci.parse([str(out), "--tests", str(folder / "test_fake.py"), "--test-workers", "2"]), [str(out)])
    result = gpu_ci.step_tests(run)
    assert result["status"] == "ok", (out / "logs" / "tests.log").read_text()[-2000:]
    assert result["counts"] == {"passed": 3}
    assert sorted(t.rsplit("::", 1)[-1] for t in result["timed_beside_others"]) == ["test_paired", "test_times"]  # run again alone
    log = (out / "logs" / "tests.log").read_text()
    assert "===== side by side" in log and "===== alone" in log and str(tmp_path) not in log
    packed = sorted(p.name for p in (out / "logs").glob("tests_results_*"))
    assert packed == ["tests_results_0.jsonl.gz", "tests_results_1.jsonl.gz"]  # the per-test logs are kept packed


def test_timing_functions_take_turns_on_a_shared_gpu(tmp_path):
    import fcntl

    lock = tmp_path / "timing.lock"
    code = ("import time, gpucourse; from gpucourse import timing; print('ready', flush=True); start = time.monotonic(); "
            "timing.wall_time_ms(lambda: None, repeat=1, warmup=0); print(time.monotonic() - start)")
    env = {k: v for k, v in os.environ.items() if k not in ("GPUCOURSE_MODE", "NUMBA_ENABLE_CUDASIM")}
    env["GPUCOURSE_TIMING_LOCK"] = str(lock)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # another process is timing
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(1.5)
        assert child.poll() is None  # it waits for its turn
        fcntl.flock(handle, fcntl.LOCK_UN)
    waited = float(child.communicate(timeout=300)[0].strip().splitlines()[-1])
    assert waited >= 1.4


def test_the_leak_pass_can_keep_the_executed_copies(tmp_path):
    """With --leaks-executed the one-kernel pass keeps each notebook's outputs, and the record and the site say how they were made."""
    out = tmp_path / "out"
    run = gpu_ci.Run(gpu_ci.parse([str(out), "--steps", "leaks", "--chapter", "1", "--small-card", "none", "--leaks-executed"]), [str(out)])
    result = gpu_ci.step_leaks(run)
    # no notebook failed (the growth is judged where the pass runs alone: on a GPU, tests beside this one hold memory too)
    assert result["counts"]["failed"] == 0 and result["counts"]["notebooks"] == 3, result
    copies = sorted(out.glob("executed/01_introduction/*.ipynb"))
    assert [p.name for p in copies] == [p.name for p in sorted((ROOT / "chapters" / "01_introduction").glob("*.ipynb"))]
    executed = nbformat.read(copies[0], as_version=4)
    assert any(cell.get("outputs") for cell in executed.cells if cell.cell_type == "code")
    assert executed.metadata["gpucourse_site"]["source_sha256"]
    assert run.record["executed_as"] == "every chapter notebook in turn in one kernel"
    sys.path.insert(0, str(ROOT / "book"))
    import build as site

    fake_call(tmp_path / "measurements" / "gpu_ci" / "2026-11-25_h200")
    record_file = tmp_path / "measurements" / "gpu_ci" / "2026-11-25_h200" / "gpu_ci.json"
    record_file.write_text(json.dumps({**json.loads(record_file.read_text()), "executed_as": run.record["executed_as"]}))
    assert site.record_of(record_file.parent).describe() == "NVIDIA H200, driver 580.1, 2026-11-25 (every chapter notebook in turn in one kernel)"


def test_executed_copies_name_no_machine_paths():
    """Warnings and tracebacks in an executed copy name the machine's paths: the record keeps names instead."""
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("1 / 0")
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=f"{ROOT}/gpucourse/x.py:3: Warning\n"),
                    nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue=f"in {ROOT}/y.py",
                                           traceback=[f"File {ROOT}/gpucourse/z.py:1"]),
                    nbformat.v4.new_output("execute_result", data={"text/plain": f"'{ROOT}'"}, execution_count=1)]
    notebook.cells.append(cell)
    gpu_ci.scrub_outputs(notebook, lambda text: text.replace(str(ROOT), "."))
    assert str(ROOT) not in json.dumps(notebook) and "./gpucourse/z.py" in notebook.cells[0].outputs[1]["traceback"][0]


def test_the_harness_adds_no_cell_the_screen_would_refuse(tmp_path):
    """A solution whose set-up cell starts the screen of answer cells runs as a student's would: the CI sends none of its own cells."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("from gpucourse.checks import ch1"), nbformat.v4.new_code_cell("answer = 2 + 2"),
                      nbformat.v4.new_code_cell("print(answer)")]
    path = tmp_path / "ch09_screened.ipynb"
    nbformat.write(notebook, path)
    original = gpu_ci.ROOT
    gpu_ci.ROOT = tmp_path
    try:
        run = gpu_ci.Run(gpu_ci.parse([str(tmp_path / "out")]), [str(tmp_path / "out")])
        row = gpu_ci.run_solution(path, run, {}, 1, None)
    finally:
        gpu_ci.ROOT = original
    assert row["error"] == "" and row["cells"] == 3 and row["history_available"]
    assert "device_memory_bytes" in row  # read by a process of its own (None in the simulator, which has no card)


def test_a_notebook_cut_off_by_the_budget_in_an_older_record_is_not_run():
    rows = [{"notebook": "chapters/06_x/03_a.ipynb", "seconds": 5, "cells": 9, "peak_bytes": 1, "end_bytes": 1, "error": ""},
            {"notebook": "chapters/06_x/04_b.ipynb", "seconds": 45, "cells": 20, "peak_bytes": 1, "end_bytes": None,
             "error": "TimeoutError: the cell ran past 19 s and was interrupted"}]
    record = {"steps": {"chapters": {**gpu_ci.chapters_result(rows, []), "seconds": 50}}}
    assert record["steps"]["chapters"]["status"] == "failed"
    assert gpu_ci.budget_stops_as_not_run(record) == ["chapters/06_x/04_b.ipynb"]
    step = record["steps"]["chapters"]
    assert step["status"] == "incomplete" and step["not_run"] == ["chapters/06_x/04_b.ipynb"] and step["counts"]["failed"] == 0
    real = {"steps": {"chapters": gpu_ci.chapters_result([{**rows[1], "error": "TimeoutError: the cell ran past 900 s and was interrupted"}],
                                                         [])}}
    assert gpu_ci.budget_stops_as_not_run(real) == [] and real["steps"]["chapters"]["status"] == "failed"  # a cell that took too long
