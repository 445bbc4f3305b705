"""The guard of the exercise checks: answers that try to forge a pass are refused, and every check ends."""

from __future__ import annotations

import inspect
import json
import re
import threading
import time

import nbformat
import pytest
from conftest import ROOT
from numba import cuda

from gpucourse.checks import CheckFailed, ch1, ch7, guard


@pytest.fixture(autouse=True)
def no_simulated_thread_outlives_its_test():
    """The endless kernels here are stopped by the checks; under a loaded machine a stopped simulated thread can take longer
    than the checks' grace to end, and would then slow the next test file this worker runs. Wait for them (up to 10 s)."""
    yield
    from gpucourse import mode

    if not mode.is_simulator():
        return
    from numba.cuda.simulator.kernel import BlockThread

    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if not any(isinstance(thread, BlockThread) and thread.is_alive() for thread in threading.enumerate()):
            return
        guard._stop_simulated_threads(grace_s=1.0)

# --- tamper attempts: each an answer cell a student could write to get the check's pass line without a right answer.
FAKE_CHECKS = '''class _Passing:
    def check_expected_streamed_time(self, function):
        print("\\u2705 Exercise 7.4: right.")


ch7 = _Passing()
'''

TAMPERS = {
    "rebind the check module name": FAKE_CHECKS,
    "replace a check function inside gpucourse.checks": (
        "import gpucourse.checks.ch7 as real\n\nreal.check_expected_streamed_time = lambda function: print('\\u2705')\n"),
    "replace it through the set-up import": (
        "from gpucourse.checks import ch7\n\nch7.check_expected_streamed_time = lambda function: None\n"),
    "silence the failure reporter": "import gpucourse.checks\n\ngpucourse.checks.fail = lambda problems, exercise: None\n",
    "silence it from gpucourse": "from gpucourse import checks\n\nchecks.fail = lambda problems, exercise: None\n",
    "rebind a builtin": "def isinstance(value, kinds):\n    return True\n",
    "a builtin through the builtins module": "import builtins\n\nbuiltins.float = lambda value: 0.0\n",
    "getattr with a computed name": "fail_name = 'fa' + 'il'\ngetattr(gpucourse, 'chec' + 'ks').fail = None\n",
    "vars of a module": "vars(gpucourse)['checks'].fail = None\n",
    "the module's __dict__": "ch7.__dict__['fail'] = None\n",
    "globals()": "globals()['ch7'] = None\n",
    "sys.modules": "import sys\n\nsys.modules['gpucourse.checks.ch7'].fail = None\n",
    "importlib": "import importlib\n\nchecks = importlib.import_module('gpucourse.checks')\n",
    "the checks' private reference": "from gpucourse.checks.ch7 import _derivative_kernel as derivative_spectrum_kernel\n",
    "the reference through the module": "derivative_spectrum_kernel = ch7._derivative_kernel\n",
    "exec of a string": "exec('gpucourse.checks.fail = None')\n",
    "eval of a string": "expected_streamed_time = eval('lambda io_only, single_stream: 0.0')\n",
    "monkeypatch numba": "from numba import cuda\n\ncuda.syncthreads = lambda: None\n",
    "monkeypatch the simulator": ("from numba.cuda.simulator import kernelapi\n\n"
                                  "kernelapi.FakeCUDAModule.syncthreads = lambda self: None\n"),
    "tamper only when the check calls": (
        "def expected_streamed_time(io_only, single_stream):\n"
        "    import gpucourse.checks.ch7 as checks\n"
        "    checks.math.isclose = lambda *args, **kwargs: True\n"
        "    return 0.0\n"),
    "walk the frames from a traceback": (
        "def expected_streamed_time(io_only, single_stream):\n"
        "    try:\n"
        "        raise ValueError\n"
        "    except ValueError as error:\n"
        "        error.__traceback__.tb_frame.f_back.f_globals['math'] = None\n"
        "    return 0.0\n"),
    "walk the frames from a generator": (
        "def expected_streamed_time(io_only, single_stream):\n"
        "    def steps():\n"
        "        yield 1\n"
        "    walker = steps()\n"
        "    caller = walker.gi_frame.f_back\n"
        "    return 0.0\n"),
    "an object that equals everything": (
        "class Anything(float):\n"
        "    def __eq__(self, other):\n"
        "        return True\n\n\n"
        "def expected_streamed_time(io_only, single_stream):\n"
        "    return Anything(0.0)\n"),
    "a magic": "%env GPUCOURSE_MODE=gpu\n",
    "a shell command": "!echo tampered\n",
    "a star import": "from numpy import *\n",
    "a walrus in a comprehension": "[(ch7 := value) for value in (1, 2)]\n",
    "a global statement": "def rebind():\n    global ch7\n    ch7 = None\n",
    "a for loop's name": "for ch7 in (None,):\n    pass\n",
    "an import alias": "import math as np\n",
    "a with target": "from numba import cuda\n\nwith open('x') as cuda:\n    pass\n",
    "type() with three arguments": "Fake = type('Fake', (), {'check_expected_streamed_time': print})\n",
    "the course's file writer": "gpucourse.scripts.run_python('print(1)')\n",
    "getattr as a value": "import functools\n\nglobals_of = functools.reduce(getattr, ['_' + '_globals__'], print)\n",
    "type as a value": "make = type\nFake = make('Fake', (), {})\n",
    "functools.update_wrapper on a module": (
        "import functools\n\nimport numpy as np\n\n\nclass Lenient:\n    isclose = staticmethod(lambda *args, **kwargs: True)\n\n\n"
        "functools.update_wrapper(np, Lenient, assigned=(), updated=('__dict__',))\n"),
    "string.Formatter": "import string\n\nfield = string.Formatter().get_field('0.f_globals', (print,), {})\n",
    "typing.get_type_hints": "import typing\n\n\ndef f(x: 'print(1)'):\n    pass\n\n\ntyping.get_type_hints(f)\n",
    "a dunder-named class attribute": "class Anything(float):\n    __eq__ = lambda self, other: True\n",
    "the course's size table": "gpucourse.sizes.SIZES.clear()\n",
    "the size table imported": "from gpucourse.sizes import SIZES\n\nSIZES.clear()\n",
    "the size table through its module": "from gpucourse import sizes\n\nsizes.SIZES.clear()\n",
    "a course module passed on": "import functools\n\nfunctools.partial(print, gpucourse.sizes)\n",
}


#: What the screen names for each attempt: (line, a regular expression its message matches).
REASONS = {
    "rebind the check module name": (6, r"`ch7` is a name the set-up and check cells use"),
    "replace a check function inside gpucourse.checks": (1, r"`gpucourse\.checks\.ch7` is the course's own machinery"),
    "replace it through the set-up import": (3, r"may not assign or delete attributes \(`\.check_expected_streamed_time = \.\.\.`\)"),
    "silence the failure reporter": (3, r"`gpucourse\.checks` is the course's own machinery"),
    "silence it from gpucourse": (3, r"`checks` is the course's own machinery"),
    "rebind a builtin": (1, r"`isinstance` is one of Python's builtins"),
    "a builtin through the builtins module": (1, r"`builtins` is not among the libraries an answer may import"),
    "getattr with a computed name": (2, r"`getattr` reads attributes by a name"),
    "vars of a module": (1, r"`vars` reaches another object's names"),
    "the module's __dict__": (1, r"`\.__dict__` is Python's machinery"),
    "globals()": (1, r"`globals` reaches the notebook's own names"),
    "sys.modules": (1, r"`sys` is not among the libraries"),
    "importlib": (1, r"`importlib` is not among the libraries"),
    "the checks' private reference": (1, r"`gpucourse\.checks\.ch7\._derivative_kernel` is the course's own machinery"),
    "the reference through the module": (1, r"`ch7` is the checks' module"),
    "exec of a string": (1, r"`exec` runs code the screen cannot read"),
    "eval of a string": (1, r"`eval` runs code the screen cannot read"),
    "monkeypatch numba": (3, r"may not assign or delete attributes \(`\.syncthreads = \.\.\.`\)"),
    "monkeypatch the simulator": (1, r"`numba\.cuda\.simulator\.kernelapi` is not among what an answer may use of numba"),
    "tamper only when the check calls": (2, r"`gpucourse\.checks\.ch7` is the course's own machinery"),
    "walk the frames from a traceback": (5, r"`\.__traceback__` is Python's machinery"),
    "walk the frames from a generator": (5, r"`\.gi_frame` reaches frames"),
    "an object that equals everything": (2, r"may not define `__eq__`"),
    "a magic": (1, r"`get_ipython` reaches the notebook's machinery"),
    "a shell command": (1, r"`get_ipython` reaches the notebook's machinery"),
    "a star import": (1, r"`from numpy import \*` can rebind"),
    "a walrus in a comprehension": (1, r"`ch7` is a name the set-up and check cells use"),
    "a global statement": (2, r"`ch7` is a name the set-up and check cells use"),
    "a for loop's name": (1, r"`ch7` is a name the set-up and check cells use"),
    "an import alias": (1, r"`np` is a name the set-up and check cells use"),
    "a with target": (3, r"`open` reads or writes files"),
    "type() with three arguments": (1, r"`type` other than as a question"),
    "the course's file writer": (1, r"`gpucourse\.scripts` is the course's own machinery"),
    "getattr as a value": (3, r"`getattr` reads attributes by a name"),
    "type as a value": (1, r"`type` other than as a question"),
    "functools.update_wrapper on a module": (10, r"`functools\.update_wrapper` is not among what an answer may use of functools"),
    "string.Formatter": (1, r"`string` is not among the libraries"),
    "typing.get_type_hints": (8, r"`typing\.get_type_hints` is not among"),
    "a dunder-named class attribute": (2, r"`__eq__` is Python's machinery"),
    "the course's size table": (1, r"`gpucourse\.sizes\.SIZES` is not among the course helpers"),
    "the size table imported": (1, r"`gpucourse\.sizes\.SIZES` is not among the course helpers"),
    "the size table through its module": (1, r"`gpucourse\.sizes` is not among the course modules"),
    "a course module passed on": (3, r"`gpucourse\.sizes` is one of the course's modules: .* do not pass it on"),
}


def test_every_tamper_attempt_has_its_reason():
    assert set(REASONS) == set(TAMPERS)


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_the_screen_refuses_each_tamper_attempt(name):
    refusals = guard.screen(TAMPERS[name])
    assert refusals, f"{name}: not refused"
    assert all(refusal.line >= 1 and refusal.message.endswith(".") for refusal in refusals)
    line, reason = REASONS[name]
    assert any(refusal.line == line and re.search(reason, refusal.message) for refusal in refusals), \
        f"{name}: {[str(refusal) for refusal in refusals]}"
    message = guard.refusal_message(refusals)
    assert message.count("\n") <= 1 + guard.SHOWN_REFUSALS + 1 and "line " in message


def answer_and_setup_cells(path):
    """Every code cell of a notebook that is not a check cell: the set-up, the answers, the demonstrations."""
    cells = json.loads(path.read_text())["cells"]
    return [(index, "".join(cell["source"])) for index, cell in enumerate(cells)
            if cell["cell_type"] == "code" and not cell["metadata"].get("nbgrader", {}).get("grade")]


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_every_cell_of_the_course_notebooks_passes_the_screen(folder):
    paths = sorted((ROOT / folder).glob("*.ipynb"))
    assert paths
    for path in paths:
        cells = answer_and_setup_cells(path)
        names = guard.course_names([source for _, source in cells])  # as autograde screens them: the notebook's imports followed
        for index, source in cells:
            refusals = guard.screen(source, names)
            assert refusals == [], f"{path.name} cell {index}: {guard.refusal_message(refusals)}"


def test_the_check_cell_form_and_the_setup_imports_pass():
    assert guard.screen("ch7.check_expected_streamed_time(expected_streamed_time)\n") == []
    assert guard.screen("import gpucourse\n\nimport numpy as np\nfrom numba import cuda\nfrom gpucourse.checks import ch7\n") == []
    assert guard.screen("x = ch7.check_expected_streamed_time(f)\n")  # not a check cell: the module is used as a value
    assert guard.screen("from gpucourse.checks import ch7 as checks\n")


def test_right_answers_in_many_styles_pass_the_screen():
    answer = '''import functools
import itertools
from dataclasses import dataclass

from numba import cuda, float32


@dataclass
class Tile:
    width: int = 32

    def __post_init_helper(self):
        return self.width


@functools.lru_cache(maxsize=None)
def smooth(n):
    m = n
    while any(m % p == 0 for p in (2, 3, 5, 7)):
        m //= next(p for p in (2, 3, 5, 7) if m % p == 0)
    return m == 1


@cuda.jit
def kernel(out, x):
    tile = cuda.shared.array(32, float32)
    i = cuda.grid(1)
    total = float32(0)
    for k in range(x.shape[0]):
        total += x[k]
    if i < out.size:
        out[i] = total
    cuda.syncthreads()
'''
    assert guard.screen(answer) == []


# --- real kernel runs: a small exercise notebook, a wrong answer, and the tamper attempts.


def run_notebook(sources: list[str]) -> list:
    """Run cells in a fresh kernel (nbclient) from the repository root; return the executed cells."""
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    return notebook.cells


def errors_of(cell) -> list:
    return [output for output in cell.outputs if output.output_type == "error"]


def text_of(cells) -> str:
    return json.dumps([cell.outputs for cell in cells], ensure_ascii=False)


WRONG_ANSWER = "def expected_streamed_time(io_only, single_stream):\n    return io_only + single_stream\n"
CHECK = "ch7.check_expected_streamed_time(expected_streamed_time)"


def test_no_tamper_attempt_runs_in_a_kernel_and_the_wrong_answer_still_fails():
    sources = ["import gpucourse", "from gpucourse.checks import ch7", WRONG_ANSWER]
    tampers = sorted(TAMPERS)
    for name in tampers:
        sources += [TAMPERS[name], CHECK]
    cells = run_notebook(sources)
    assert not errors_of(cells[0]) and not errors_of(cells[1]) and not errors_of(cells[2])
    for number, name in enumerate(tampers):
        tamper, check = cells[3 + 2 * number], cells[4 + 2 * number]
        refused = errors_of(tamper)
        assert refused and refused[0].ename == "InputRejected" and "line " in refused[0].evalue, f"{name}: {tamper.outputs}"
        failed = errors_of(check)
        assert failed and failed[0].ename == "CheckFailed", f"{name}: the check after it: {check.outputs}"
    assert "\u2705" not in text_of(cells)
    assert not (ROOT / "x").exists()


def test_a_cell_run_before_the_setup_cell_keeps_the_checks_from_loading():
    cells = run_notebook(["from numba import cuda\n\ncuda.syncthreads = lambda: None", "import gpucourse",
                          "from gpucourse.checks import ch7", WRONG_ANSWER.replace("io_only + single_stream", "0.0"), CHECK])
    assert not errors_of(cells[0])  # nothing of the course is loaded yet: it runs
    refused = errors_of(cells[2])
    assert refused and "cell [1]" in refused[0].evalue and "line 3" in refused[0].evalue
    assert errors_of(cells[4]) and "\u2705" not in text_of(cells)


def test_numba_signature_strings_are_type_names_only():
    assert guard.safe_signature("void(float32[:], float32[:, ::1], int32)") and guard.safe_signature("float32(float32, float32)")
    assert not guard.safe_signature("exec('import os')") and not guard.safe_signature("float32(float32).__class__")
    guard.guard_signature_strings()
    from numba.core import sigutils

    assert sigutils.normalize_signature("float32(float32, float32)")[1] is not None
    with pytest.raises(TypeError, match="Numba type names"):
        sigutils.normalize_signature("print('forged') or float32(float32)")


def test_a_chapter_notebook_that_imports_from_the_checks_is_not_screened():
    cells = run_notebook(["import gpucourse\nfrom gpucourse.checks import run_guarded", "import os\nprint(os.sep)"])
    assert not errors_of(cells[0]) and not errors_of(cells[1])


# --- every check ends


def endless_next_fast_size(n):
    """Exercise 7.1 answered with `if` where a `while` belongs: at n = 1000 it never returns (the issue's example)."""
    m = n
    while True:
        rest = m
        for prime in (2, 3, 5, 7):
            if rest % prime == 0:
                rest //= prime
        if rest == 1:
            return m
        m += 1


def test_a_host_function_that_never_returns_gets_a_message_naming_the_call():
    """7.1 gives each call of the answer its own limit (ch7.CALL_SECONDS, inside the check's): the real limit, not a lowered one."""
    start = time.monotonic()
    with pytest.raises(CheckFailed) as stopped:
        ch7.check_next_fast_size(endless_next_fast_size)
    assert time.monotonic() - start < ch7.CALL_SECONDS + 5
    message = str(stopped.value)
    assert re.search(rf"endless_next_fast_size\(n=\d+\) did not return within {ch7.CALL_SECONDS:.0f} s", message)
    body, first = inspect.getsourcelines(endless_next_fast_size)  # the line named is wherever the loop was when stopped
    named = re.search(r"at line (\d+), `(.+?)`", message)
    assert named and body[int(named.group(1)) - first].strip() == named.group(2)


ENDLESS_NEXT_FAST_SIZE = """def next_fast_size(n):
    m = n
    while True:
        rest = m
        for prime in (2, 3, 5, 7):
            if rest % prime == 0:
                rest //= prime
        if rest == 1:
            return m
        m += 1
"""


def test_in_a_kernel_the_endless_check_ends_with_its_message_and_the_kernel_goes_on():
    """Under the real limits (7.1's per call, inside the check's own): the check fails naming the call, and the kernel is free."""
    cells = run_notebook(["import gpucourse", "from gpucourse.checks import ch7", ENDLESS_NEXT_FAST_SIZE,
                          "ch7.check_next_fast_size(next_fast_size)", "print(next_fast_size(7))"])
    stopped = errors_of(cells[3])
    assert stopped and stopped[0].ename == "CheckFailed", cells[3].outputs
    assert re.search(rf"next_fast_size\(n=\d+\) did not return within {ch7.CALL_SECONDS:.0f} s \(it was at line \d+", stopped[0].evalue)
    assert cells[4].outputs[0].text.strip() == "7"  # the kernel is free again


@cuda.jit
def endless_kernel(out):
    i = cuda.grid(1)
    k = 0
    while k >= 0:  # never false
        k += 1
    if i < out.size:
        out[i] = k


def endless_add_arrays(out, x, y, threads_per_block=64):
    endless_kernel[1, 4](out)


ENDLESS_ON_A_GPU = """
import os
from numba import cuda
from gpucourse.checks import ch1, guard

@cuda.jit
def endless_kernel(out):
    i = cuda.grid(1)
    k = 0
    while k >= 0:  # never false
        k += 1
        if i < out.size:
            out[i] = k

guard.GPU_LAUNCH_SECONDS = 3.0
try:
    ch1.check_add_arrays(lambda out, x, y, threads_per_block=64: endless_kernel[1, 4](out))
except guard.CheckTimedOut as stopped:
    print("STOPPED", stopped, flush=True)
os._exit(0)  # the GPU still runs the kernel: leave without waiting for it
"""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the SystemExit that stops a thread
def test_a_kernel_that_never_ends_is_stopped_with_a_message(monkeypatch):
    from gpucourse import mode

    if mode.on_gpu():  # in a process of its own: the GPU runs the kernel until that process ends
        from conftest import run_python

        done = run_python(ENDLESS_ON_A_GPU, GPUCOURSE_MODE="gpu")
        assert "STOPPED the kernel endless_kernel[1, 4] did not finish within 3 s: the GPU is still running it" in done.stdout, \
            done.stdout + done.stderr
        return
    monkeypatch.setattr(guard, "SIMULATED_LAUNCH_SECONDS", 1.5)
    start = time.monotonic()
    with pytest.raises(guard.CheckTimedOut) as stopped:
        ch1.check_add_arrays(endless_add_arrays)
    assert time.monotonic() - start < 15
    message = str(stopped.value)
    assert "endless_kernel[1, 4] did not finish within 2 s in the simulator" in message and "while k >= 0" in message
    from numba.cuda.simulator.kernel import BlockThread

    assert not any(isinstance(thread, BlockThread) and thread.is_alive() for thread in threading.enumerate())


def test_deadlines_nest_and_give_back_the_previous_timer():
    import signal

    previous = signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.setitimer(signal.ITIMER_REAL, 50.0)
    try:
        with guard.deadline(5.0, lambda frame: "outer"):
            with guard.deadline(0.2, lambda frame: "inner"), pytest.raises(guard.CheckTimedOut, match="inner"):
                time.sleep(2)
            time.sleep(0.3)  # the outer clock was stopped while the inner one ran: it does not fire
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 40 < remaining <= 50 and signal.getsignal(signal.SIGALRM) is signal.SIG_IGN
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_right_answer_passes_under_the_limits(capsys):
    from gpucourse import fft

    ch7.check_next_fast_size(fft.next_fast_size)
    assert "\u2705" in capsys.readouterr().out


def test_a_check_still_reports_wrong_answers_in_words():
    with pytest.raises(CheckFailed, match="next_fast_size"):
        ch7.check_next_fast_size(lambda n: n)
