"""pytest plugin of tools/gpu_ci.py: the `timing` marker, each result as it comes, and the tests that timed GPU work.

    python -m pytest -p gpu_ci_plugin [--gpu-ci-results FILE] [--gpu-ci-timed FILE] [--gpu-ci-serial FILE] ...

(with tools/ on PYTHONPATH). A test is marked `timing` when `tests/timing_tests.txt` lists it (a
file name, `file::test` for all its parameters, or a whole node id) or the file given by
`--gpu-ci-serial` does: tools/gpu_ci.py runs those alone, after the rest ran side by side under
pytest-xdist. `--gpu-ci-timed` names a file to which every test that calls one of the package's
timing functions appends its node id: a test that timed GPU work beside other tests is run again
alone (an exercise check's speed comparison too: tests/timing_tests.txt says why).
`--gpu-ci-results` names a file that gets one JSON line per test phase as it finishes, so that a run
stopped by its time limit still says what passed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

LISTED = Path(__file__).resolve().parent.parent / "tests" / "timing_tests.txt"


def pytest_addoption(parser) -> None:
    group = parser.getgroup("gpu_ci", "tools/gpu_ci.py")
    group.addoption("--gpu-ci-results", default=None, help="append one JSON line per test phase to this file")
    group.addoption("--gpu-ci-timed", default=None, help="append the id of each test that calls a timing function to this file")
    group.addoption("--gpu-ci-serial", default=None, help="a file of further test ids to mark `timing`")


def listed(path: Path | None) -> set[str]:
    """The entries of a list of tests: one per line, '#' starts a comment."""
    if path is None or not path.exists():
        return set()
    return {line.split("#", 1)[0].strip() for line in path.read_text().splitlines()} - {""}


def short_id(nodeid: str) -> str:
    """'tests/test_x.py::test_y[p]' -> 'test_x.py::test_y[p]': the same test whatever folder pytest counted from."""
    path, _, name = nodeid.partition("::")
    return path.rsplit("/", 1)[-1] + (f"::{name}" if name else "")


def matches(nodeid: str, entries: set[str]) -> bool:
    """True if `nodeid` ('tests/test_x.py::test_y[p]') is named by an entry: 'test_x.py', 'test_x.py::test_y' or the whole id."""
    file, _, name = short_id(nodeid).partition("::")
    return bool({file, f"{file}::{name.split('[', 1)[0]}", f"{file}::{name}"} & {short_id(entry) for entry in entries})


_RESULTS: list[Path] = []  # the results file, in the process that collects the reports (not in xdist's workers)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "timing: the test times GPU work; tools/gpu_ci.py runs it alone, not beside other tests")
    results = config.getoption("--gpu-ci-results")
    if results and not hasattr(config, "workerinput"):
        _RESULTS.append(Path(results))
    timed = config.getoption("--gpu-ci-timed")
    if timed:
        _watch_timing(Path(timed))


def pytest_collection_modifyitems(config, items) -> None:
    extra = config.getoption("--gpu-ci-serial")
    entries = listed(LISTED) | listed(Path(extra) if extra else None)
    for item in items:
        if matches(item.nodeid, entries):
            item.add_marker(pytest.mark.timing)


def pytest_runtest_logreport(report) -> None:
    if not _RESULTS:
        return
    line = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome, "seconds": round(report.duration, 3)}
    if report.outcome == "failed" and report.longrepr:
        line["message"] = str(report.longrepr).strip().splitlines()[-1][:300]
    with open(_RESULTS[0], "a") as handle:
        handle.write(json.dumps(line) + "\n")


def final_outcomes(lines: list[dict]) -> dict[str, dict]:
    """Each test's outcome (by its short id) from its phases' lines: 'error' (setup or teardown failed), 'failed', 'skipped',
    'passed', or 'unfinished' (stopped by the time limit)."""
    tests: dict[str, dict] = {}
    for line in lines:
        test = tests.setdefault(short_id(line["nodeid"]), {"outcome": None, "seconds": 0.0, "message": ""})
        test["seconds"] += line.get("seconds", 0.0)
        if line["outcome"] == "failed":
            test["outcome"] = "failed" if line["when"] == "call" else "error"
            test["message"] = line.get("message", "")
        elif line["outcome"] == "skipped" and test["outcome"] is None:
            test["outcome"] = "skipped"
        elif line["outcome"] == "passed" and line["when"] == "call" and test["outcome"] is None:
            test["outcome"] = "passed"
    for test in tests.values():
        if test["outcome"] is None:  # set up, never called (stopped by the time limit)
            test["outcome"] = "unfinished"
    return tests


# -- which tests time GPU work ---------------------------------------------------------------------------
def _timing_code_objects() -> set:
    """The code the package runs when it times something: timing.alone's wrapper and the timeline recorder."""
    from gpucourse import timeline, timing

    return {timing.alone(lambda: None).__code__, timeline.TimelineRecorder.__init__.__code__}


def _watch_timing(log: Path) -> None:
    """Append the current test's id to `log` the first time it runs timing code (sys.monitoring on 3.12+, else a profiler)."""
    codes = _timing_code_objects()
    seen: set[str] = set()
    lock = threading.Lock()

    def note() -> None:
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        if test and test not in seen:
            with lock:
                seen.add(test)
                with open(log, "a") as handle:
                    handle.write(test + "\n")

    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        tool = monitoring.PROFILER_ID
        if monitoring.get_tool(tool) is None:
            monitoring.use_tool_id(tool, "gpu_ci timing watch")
            monitoring.register_callback(tool, monitoring.events.PY_START, lambda code, offset: note())
            for code in codes:
                monitoring.set_local_events(tool, code, monitoring.events.PY_START)
            return

    def profile(frame, event, arg):  # Python before 3.12: slower, used only when asked
        if event == "call" and frame.f_code in codes:
            note()

    sys.setprofile(profile)
    threading.setprofile(profile)
