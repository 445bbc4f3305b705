"""The screen as an allowlist: routes to a forged ✅ refused with their reason and line, no exercise answered by the course's own
implementation, and every right answer (the solutions', the tests') let through."""

from __future__ import annotations

import ast
import importlib
import json
import re
from functools import cache

import pytest
from conftest import ROOT

from gpucourse.checks import allowed, screen
from gpucourse.checks.screen import CHECK_MODULES

NOTEBOOK_OF = {"ch1": "ch01_introduction", "ch2": "ch02_metrics", "ch3_execution": "ch03_execution", "ch3_memory": "ch03_memory",
               "ch4": "ch04_multi_gpu",
               "ch4_distributed": "ch04_multi_gpu", "ch5": "ch05_monte_carlo", "ch6": "ch06_finite_difference", "ch7": "ch07_fft"}


def code_cells(stem: str) -> list[dict]:
    return [cell for cell in json.loads((ROOT / "solutions" / f"{stem}.ipynb").read_text())["cells"] if cell["cell_type"] == "code"]


@cache
def notebook_names(checks: str) -> dict:
    """The names a solution notebook's imports bind, as `nbgrader autograde` gives them to the screen."""
    return screen.course_names(["".join(cell["source"]) for cell in code_cells(NOTEBOOK_OF[checks])])


def refusals_in(checks: str | None, source: str) -> list:
    return screen.screen(source, notebook_names(checks) if checks else {})


def assert_refused(refusals: list, line: int, reason: str) -> None:
    """One refusal on `line` whose message matches `reason` (a regular expression), and each message one sentence."""
    assert refusals, "not refused"
    assert all(refusal.message.endswith(".") and refusal.line >= 1 for refusal in refusals), refusals
    found = [refusal for refusal in refusals if refusal.line == line and re.search(reason, refusal.message)]
    assert found, f"no refusal on line {line} matching {reason!r}: {[str(refusal) for refusal in refusals]}"


# --- tamper routes: (notebook, source as a student would paste it, line, reason). None of these is in tests/test_guard.py.
PICKLE = "b'\\x80\\x04\\x95\\x05\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x8c\\x01x\\x94.'"
ROUTES = {
    # serialization reachable through an allowed library
    "numba's pickle loader imported by name": (
        "ch7", f"from numba.core.serialize import _numba_unpickle\n\nreplaced = _numba_unpickle(b'', {PICKLE}, None)\n",
        1, r"`numba\.core\.serialize\._numba_unpickle` is not among what an answer may use of numba"),
    "numba's pickle loader through a module alias": (
        "ch7", f"import numba.core.serialize as s\n\ns._numba_unpickle(b'', {PICKLE}, None)\n", 1,
        r"`numba\.core\.serialize` is not among what an answer may use of numba"),
    "numba's pickle loader along an attribute chain": (
        "ch7", f"import numba\n\n\ndef expected_streamed_time(io_only, single_stream):\n"
               f"    return numba.core.serialize._numba_unpickle(b'', {PICKLE}, None)\n", 5, r"`numba\.core` is not among"),
    "numba.core bound by a from import": ("ch7", "from numba import core\n", 1, r"`numba\.core` is not among"),
    "cloudpickle as an attribute of numba.cuda": ("ch7", "from numba import cuda\n\nloads = cuda.cloudpickle.loads\n", 3,
                                                   r"`cuda\.cloudpickle` is not among"),
    "numpy's pickle reader": ("ch7", "import numpy as n\n\nverdict = n.lib.format.read_array(None, allow_pickle=True)\n", 3,
                              r"`n\.lib` is not among what an answer may use of numpy"),
    "np.load with pickles": ("ch7", "x = np.load('answer.npy', allow_pickle=True)\n", 1, r"`np\.load` is not among"),
    # classes that lie, made without a class statement
    "make_dataclass with a run-time dunder": (
        "ch2", "import dataclasses\n\nLabel = dataclasses.make_dataclass('Label', [], bases=(str,), namespace={'_' * 2 + 'eq' + '_' * 2: "
               "lambda self, other: True})\n", 3, r"`dataclasses\.make_dataclass` is not among"),
    "make_dataclass imported by name": ("ch2", "from dataclasses import make_dataclass as md\n", 1, r"make_dataclass` is not among"),
    "a dunder name built from pieces": ("ch2", "name = '__' + 'eq__'\n", 1, r"name-like string holding `__`"),
    "a dunder name in escapes": ("ch2", "name = '\\x5f\\x5fclass\\x5f\\x5f'\n", 1, r"name-like string holding `__`"),
    "a metaclass": ("ch2", "class Label(str, metaclass=abc):\n    pass\n", 1, r"class statement's keyword \(`metaclass=`\)"),
    "type() spelled through an alias of a builtin": ("ch2", "maker = type\n", 1, r"`type` other than as a question"),
    # raw memory and reflection
    "numba.carray over an object's address": ("ch7", "import numba\n\nwords = numba.carray(id(print), 8)\n", 3,
                                              r"`numba\.carray` is not among"),
    "an address from id()": ("ch7", "where = id(expected_streamed_time)\n", 1, r"`id` gives an object's address"),
    "numpy's ctypes view of an array": ("ch7", "import numpy\n\npointer = numpy.zeros(4).ctypes.data\n", 3,
                                        r"`\.ctypes` reaches frames, raw memory"),
    "np.ctypeslib": ("ch7", "view = np.ctypeslib.as_array\n", 1, r"`np\.ctypeslib` is not among"),
    "a device array over a raw pointer": ("ch7", "from numba import cuda\n\nview = cuda.from_cuda_array_interface\n", 3,
                                          r"`cuda\.from_cuda_array_interface` is not among"),
    "operator.attrgetter with a frame's name": ("ch7", "import operator\n\nup = operator.attrgetter('f_back')\n", 3,
                                                r"`operator\.attrgetter` is not among"),
    "partial reaching getattr": ("ch7", "from functools import partial\n\nread = partial(hasattr, print)\n", 3,
                                 r"`hasattr` reads attributes by a name"),
    "dir() to list a module": ("ch7", "names = dir(math)\n", 1, r"`dir` lists another object's names"),
    "a coroutine's frame": ("ch7", "async def probe():\n    pass\n\n\ncaller = probe().cr_frame\n", 5, r"`\.cr_frame` reaches frames"),
    "object.__setattr__": ("ch7", "object.__setattr__(math, 'isclose', print)\n", 1, r"`\.__setattr__` is Python's machinery"),
    "__builtins__ by name": ("ch7", "lookup = __builtins__\n", 1, r"`__builtins__` is Python's machinery"),
    "a format field reading private attributes": ("ch7", "text = '{0._fields}'.format(print)\n", 1, r"format field that reads a private"),
    # modules passed on, reached through other modules, or bound another way
    "a module as a default argument": ("ch7", "def reach(m=np):\n    return m.load\n", 1, r"`np` is a module: .* do not pass it on"),
    "a module captured by a lambda": ("ch7", "from numba import cuda\n\nreach = lambda m=cuda: m.simulator\n", 3, r"`cuda` is a module"),
    "sys as an attribute of numba.cuda": ("ch7", "from numba import cuda\n\nloaded = cuda.sys.modules\n", 3, r"`cuda\.sys` is not among"),
    "the simulator through an alias": ("ch7", "from numba import cuda as c\n\napi = c.simulator.kernelapi\n", 3, r"`c\.simulator` is not among"),
    "the CUDA driver module": ("ch7", "from numba.cuda import cudadrv\n", 1, r"`numba\.cuda\.cudadrv` is not among"),
    "numba.extending": ("ch7", "from numba.extending import overload\n", 1, r"`numba\.extending\.overload` is not among"),
    "objmode inside a jitted function": ("ch7", "import numba\n\n\n@numba.njit\ndef f(x):\n    with numba.objmode(y='float64'):\n"
                                                "        y = 0.0\n    return y\n", 6, r"`numba\.objmode` is not among"),
    "cupy's runtime through require_cupy's result": (
        "ch3_memory", "cupy = gpucourse.require_cupy('cupy.cuda')\ncupy.cuda.runtime.memcpy(0, 0, 8, 0)\n", 2,
        r"`cupy\.cuda\.runtime` is not among what an answer may use of cupy"),
    "require_cupy's result used without a name": (
        "ch3_memory", "runtime = gpucourse.require_cupy('x').cuda.runtime\n", 1, r"assign `gpucourse\.require_cupy\(\.\.\.\)` to a name"),
    "require_cupy's result under a name of one's own": (
        "ch3_memory", "xp = gpucourse.require_cupy('x')\nfree = xp.cuda.runtime.free\n", 2, r"`xp\.cuda\.runtime` is not among"),
    "a star import of the course": ("ch5", "from gpucourse.kernels.reductions import *\n", 1, r"`from gpucourse\.kernels\.reductions import \*`"),
    "a course module the notebook does not use": ("ch5", "import gpucourse.summation as s\n", 1,
                                                  r"`gpucourse\.summation` is not among the course modules this notebook"),
    "the course's global state": ("ch5", "gpucourse.sizes.SIZES['ch5_threads_per_block'] = 1\n", 1, r"`gpucourse\.sizes\.SIZES` is not among"),
    "the global random state a check could draw from": ("ch4", "import numpy\n\nnumpy.random.seed(0)\n", 3, r"`numpy\.random\.seed` is not among"),
    "numpy's process-wide error settings": ("ch4", "np.seterr(all='ignore')\n", 1, r"`np\.seterr` is not among"),
    "a check module bound by a match statement": ("ch7", "match 1:\n    case ch7:\n        pass\n", 2, r"`ch7` is a name the set-up"),
    "a decorator reaching the checks": ("ch7", "import functools\n\n\n@functools.wraps(gpucourse.checks.fail)\ndef f():\n    pass\n", 4,
                                        r"`gpucourse\.checks` is the course's own machinery"),
    "an f-string reaching the checks": ("ch7", "text = f'{gpucourse.checks}'\n", 1, r"`gpucourse\.checks` is the course's own machinery"),
    "the reference kernel's globals": ("ch2", "g = metrics.copy.__globals__\n", 1, r"`\.__globals__` is Python's machinery"),
    "the padded transpose from the kernels' factory": (
        "ch3_execution", "transpose_kernel = gpucourse.kernels.transpose.kernels().no_bank_conflicts\n", 1,
        r"may read only coalesced, copy, copy_shared, naive"),
    "the sixth-order weights from 6.5's helper": ("ch6", "def sixth_order_coefficients():\n    return fd.exact_central_coefficients(3)\n",
                                                  2, r"`fd\.exact_central_coefficients\(3\)` is Exercise 6\.1's answer"),
    "type itself from type(type)": ("ch2", "Liar = type(type(0))('Liar', (str,), {})\n", 1, r"`type` other than as a question"),
    "type kept under a name": ("ch2", "maker = type(int)\nLiar = maker('Liar', (str,), {})\n", 1, r"`type` other than as a question"),
    "a forged pass line": ("ch7", "print('\\u2705 Exercise 7.4: right.')\n", 1, r"a check mark \(U\+2705\) is the checks' to print"),
    "host memory pinned for the device at any address": (
        "ch7", "from numba import cuda\n\nview = cuda.get_current_device().get_primary_context().mempin(print, 0, 64, mapped=True)\n",
        3, r"`\.get_primary_context` reaches frames, raw memory"),
    "the CUDA context": ("ch7", "from numba import cuda\n\ncontext = cuda.current_context()\n", 3, r"`cuda\.current_context` is not among"),
    "a kernel's compiler context": ("ch7", "from numba import cuda\n\n\n@cuda.jit\ndef k(x):\n    pass\n\n\nctx = k.targetctx\n", 9,
                                    r"`\.targetctx` reaches"),
    "fullwidth letters for a builtin": ("ch7", "up = \uff47\uff45\uff54\uff41\uff54\uff54\uff52(print, 'x')\n", 1, r"`getattr` reads attributes"),
    "top-level await around a forbidden call": ("ch7", "await expected_streamed_time(vars(math), 0)\n", 1, r"`vars` reaches"),
    "a module reached through a conditional": ("ch7", "loader = (np if True else math).load\n", 1, r"`np` is a module"),
    "a module reached through a walrus": ("ch7", "loader = (m := np).load\n", 1, r"`np` is a module"),
    "a module handed to a class as its base": ("ch7", "class Liar(np):\n    pass\n", 1, r"`np` is a module"),
    "the course's command line imported (and so run)": ("ch7", "import gpucourse.__main__ as cli\n", 1,
                                                         r"`gpucourse\.__main__` is the course's own machinery"),
    "numpy.testing's temporary folders": ("ch7", "from numpy.testing import tempdir\n", 1, r"`numpy\.testing\.tempdir` is not among"),
    "6.5's helper passed on": ("ch6", "weights = fd.exact_central_coefficients\n", 1,
                               r"may be used here only as `fd\.exact_central_coefficients\(4\)`"),
}
# The six: each exercise answered by calling the course's own implementation, as pasted by a student.
ROUTES.update({
    "4.2 by the model's estimate": ("ch4", "from gpucourse.multigpu import model\n\n\ndef predicted_time_ms(problem, gpus, machine):\n"
                                           "    return model.split_estimate_ms(problem, gpus, machine)\n", 5,
                                    r"`model\.split_estimate_ms` is the course's own implementation of Exercise 4\.2"),
    "4.1 by the rank-to-device rule": ("ch4", "from gpucourse.multigpu.mpi.ranks import assign_devices\n", 1,
                                       r"`gpucourse\.multigpu\.mpi\.ranks\.assign_devices` is the course's own implementation of Exercise 4\.1"),
    "2.3 by the bound classification": ("ch2", "def classify(base_ms, memory_ms, math_ms):\n"
                                               "    return gpucourse.kernels.metrics.classify_bound(base_ms, memory_ms, math_ms).label\n",
                                        2, r"`gpucourse\.kernels\.metrics\.classify_bound` is the course's own implementation of Exercise 2\.3"),
    "2.4 by the four-wide copy": ("ch2", "def copy_four(out, inp, threads_per_block=256):\n"
                                         "    metrics.copy_ilp(out, inp, 4, threads_per_block)\n", 2,
                                  r"`metrics\.copy_ilp` is the course's own implementation of Exercise 2\.4"),
    "5.5 by the Kahan sum": ("ch5", "from gpucourse import summation\n\nkahan_sum = summation.kahan_sum\n", 3,
                             r"`summation\.kahan_sum` is the course's own implementation of Exercise 5\.5"),
    "6.6 by the book's shared-memory Jacobi": ("ch6", "def jacobi_sweep(a, a_new):\n    laplace.jacobi_shared_book(a, a_new)\n", 2,
                                               r"`laplace\.jacobi_shared_book` is the course's own implementation of Exercise 6\.6"),
})


def test_there_are_at_least_twenty_routes_beyond_the_old_tests():
    from test_guard import TAMPERS

    old = set(TAMPERS.values())
    assert len([name for name, (_, source, _, _) in ROUTES.items() if source not in old]) >= 20


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_each_tamper_route_is_refused_with_its_reason_and_line(name):
    checks, source, line, reason = ROUTES[name]
    assert_refused(refusals_in(checks, source), line, reason)


# --- no exercise answered by the course's own implementation


def exercises_of_the_checks() -> set[str]:
    """Every exercise number a chapter check's docstring names ("Exercise 3.4.1: ...")."""
    found = set()
    for name in CHECK_MODULES:
        module = importlib.import_module(f"gpucourse.checks.{name}")
        for attribute, value in vars(module).items():
            if attribute.startswith("check_") and callable(value) and getattr(value, "__module__", "") == module.__name__:
                match = re.match(r"Exercise (\d+(?:\.\d+)+):", value.__doc__ or "")
                assert match, f"{name}.{attribute} names no exercise"
                found.add(match.group(1))
    return found


def test_every_exercise_has_its_course_implementations_in_the_table():
    assert set(allowed.REFERENCES) == exercises_of_the_checks()
    for exercise, (checks, paths) in allowed.REFERENCES.items():
        assert checks in CHECK_MODULES and paths, exercise
        for path in paths:
            assert screen._course_object(path, private=True) is not screen._MISSING, f"{exercise}: {path} is not in the course"


def reference_answers(path: str) -> list[tuple[str, int]]:
    """(source, line of the call) for three ways a student calls the course object at `path`: imported by name, through its
    module under an alias of one's own, and along the whole chain from gpucourse."""
    module, _, name = path.rpartition(".")
    short = module.rpartition(".")[2]
    return [
        (f"from {module} import {name} as helper\n\n\ndef answer(*args):\n    return helper(*args)\n", 5),
        (f"import {module} as {short}_\n\n\ndef answer(*args):\n    return {short}_.{name}(*args)\n", 5),
        (f"def answer(*args):\n    return {path}(*args)\n", 2),
    ]


REFERENCE_CASES = [(exercise, path) for exercise, (_, paths) in sorted(allowed.REFERENCES.items()) for path in paths]


@pytest.mark.parametrize(("exercise", "path"), REFERENCE_CASES, ids=[f"{e}-{p.rpartition('.')[2]}" for e, p in REFERENCE_CASES])
def test_no_exercise_can_be_answered_by_the_course_own_implementation(exercise, path):
    checks = allowed.REFERENCES[exercise][0]
    for source, line in reference_answers(path):
        refusals = refusals_in(checks, source)
        assert refusals, f"Exercise {exercise}: {source!r} is not refused"
        reasons = r"(course's own implementation of Exercise [\d.]+|not among the course (helpers|modules)|course's own machinery)"
        assert any(refusal.line in (1, line) and re.search(reasons, refusal.message) for refusal in refusals), \
            f"Exercise {exercise}: {[str(refusal) for refusal in refusals]}"
    if not path.startswith("gpucourse.checks."):  # a check module's insides are refused as machinery, whichever exercise
        named = {other for other, (_, paths) in allowed.REFERENCES.items() if path in paths}
        messages = [refusal.message for refusal in refusals_in(checks, reference_answers(path)[0][0])]
        assert any(f"Exercise {other}" in message for other in named for message in messages), messages


def test_the_notebook_names_never_import_a_module_a_cell_merely_names():
    import sys

    names = screen.course_names(["import antigravity\nfrom this import s\nimport gpucourse.__main__\nimport numpy.linalg as la\n"])
    assert "antigravity" not in sys.modules and "this" not in sys.modules and "gpucourse.__main__" not in sys.modules
    assert set(names) == {"la", "gpucourse"}  # `import gpucourse.__main__` binds the name gpucourse, as Python does


def test_the_helpers_each_notebook_may_use_are_no_exercise_reference():
    references = {id(screen._course_object(path, private=True)) for _, paths in allowed.REFERENCES.values() for path in paths}
    for checks, paths in allowed.COURSE.items():
        for path in sorted(paths | allowed.COURSE_GENERAL):
            value = screen._course_object(path)
            assert value is not screen._MISSING, path
            assert id(value) not in references, f"{checks}: {path} is an exercise's own implementation"


# --- every right answer passes


@pytest.mark.parametrize("checks", sorted(NOTEBOOK_OF))
def test_every_cell_of_every_solution_notebook_passes_in_its_notebook(checks):
    cells = code_cells(NOTEBOOK_OF[checks])
    assert any(cell["metadata"].get("nbgrader", {}).get("solution") for cell in cells)
    for index, cell in enumerate(cells):
        refusals = screen.screen("".join(cell["source"]), notebook_names(checks))
        assert refusals == [], f"{NOTEBOOK_OF[checks]} code cell {index}: {screen.refusal_message(refusals)}"


def test_the_table_of_helpers_is_what_the_solutions_use():
    """Each notebook's COURSE entry is used by its solution or set-up cells, or named by its text: nothing listed for nothing."""
    for checks, paths in allowed.COURSE.items():
        text = json.dumps(json.loads((ROOT / "solutions" / f"{NOTEBOOK_OF[checks]}.ipynb").read_text())["cells"])
        for path in paths:
            assert path.rpartition(".")[2] in text, f"{checks}: {path} is neither used nor named in {NOTEBOOK_OF[checks]}"


#: Functions of the check tests that are not answers a student could write: helpers of the tests themselves, and wrong
#: answers built by calling the course's own model or the check's catalogue (the screen refuses those, rightly).
NOT_ANSWERS = {"access", "student", "sorted_hosts", "no_steps_by_hand"}


def answers_in(path) -> list[tuple[str, str, list[str]]]:
    """(name, source with decorators, the check modules the file calls) for each answer of a check test file.

    An answer is a top-level function or class handed to a check (`chN.check_...(answer)`) or listed in a table of cases, and
    whatever top-level function or kernel those use; fixtures and the tests' own helpers are not.
    """
    source = path.read_text()
    tree = ast.parse(source)
    used = sorted(set(re.findall(r"\b(" + "|".join(sorted(CHECK_MODULES)) + r")\.check_", source)))
    definitions = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                   and not node.name.startswith("test_") and node.name not in NOT_ANSWERS}

    def names_in(node) -> set[str]:
        return {child.id for child in ast.walk(node) if isinstance(child, ast.Name) and child.id in definitions}

    seeds: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("check_"):
            seeds |= set().union(*(names_in(argument) for argument in [*node.args, *node.keywords]))
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            seeds |= names_in(node)
    answers, todo = set(), list(seeds)
    while todo:
        name = todo.pop()
        if name not in answers:
            answers.add(name)
            todo += names_in(definitions[name]) - answers
    found = []
    for name in sorted(answers):
        node = definitions[name]
        decorators = "".join(f"@{ast.get_source_segment(source, decorator)}\n" for decorator in node.decorator_list)
        found.append((name, decorators + ast.get_source_segment(source, node), used))
    return found


def test_every_answer_in_the_check_tests_passes_in_its_notebook():
    paths = sorted((ROOT / "tests").glob("test_checks_*.py"))
    assert paths
    seen = 0
    for path in paths:
        for name, source, used in answers_in(path):
            seen += 1
            outcomes = [screen.screen(source, notebook_names(checks)) for checks in used or ["ch1"]]
            assert any(outcome == [] for outcome in outcomes), f"{path.name}: {name}: {screen.refusal_message(outcomes[0])}"
    assert seen > 100


# --- in a kernel: the notebook's own names say its chapter (IPython's namespace, not course_names)

KAHAN_BY_REFERENCE = "from gpucourse import summation\n\n\ndef kahan_sum(x):\n    return summation.kahan_sum(x)\n"
WRONG_KAHAN = "def kahan_sum(x):\n    total = np.float32(0)\n    for value in x:\n        total += value\n    return total\n"


def test_in_a_kernel_the_new_routes_are_refused_and_a_right_answer_still_passes():
    from test_guard import errors_of, run_notebook, text_of

    setup = [cell for cell in code_cells("ch05_monte_carlo") if "setup" in cell["metadata"].get("nbgrader", {}).get("grade_id", "")]
    solution = next("".join(cell["source"]) for cell in code_cells("ch05_monte_carlo") if "def kahan_sum" in "".join(cell["source"]))
    routes = [KAHAN_BY_REFERENCE, ROUTES["numba's pickle loader through a module alias"][1],
              ROUTES["make_dataclass with a run-time dunder"][1], ROUTES["type itself from type(type)"][1],
              ROUTES["a module as a default argument"][1]]
    reasons = ["`summation.kahan_sum` is the course's own implementation of Exercise 5.5", "`numba.core.serialize` is not among",
               "`dataclasses.make_dataclass` is not among", "`type` other than as a question", "`np` is a module"]
    check = "ch5.check_kahan(kahan_sum)"
    sources = ["".join(cell["source"]) for cell in setup] + [WRONG_KAHAN] + routes + [check, solution, check]
    cells = run_notebook(sources)
    first = len(setup) + 1
    assert not any(errors_of(cell) for cell in cells[:first]), text_of(cells[:first])
    for cell, reason in zip(cells[first:first + len(routes)], reasons):
        refused = errors_of(cell)
        assert refused and refused[0].ename == "InputRejected" and reason in refused[0].evalue, cell.outputs
    wrong, right = cells[first + len(routes)], cells[-1]
    assert errors_of(wrong) and errors_of(wrong)[0].ename == "CheckFailed", wrong.outputs
    assert not errors_of(right) and "\u2705 Exercise 5.5" in text_of([right]), right.outputs


RAW_KERNEL = """def make_rel_diff_elementwise():
    cupy = gpucourse.require_cupy("cupy.RawKernel")
    source = r'''
    extern "C" __global__ void rel_diff(const float* x, const float* y, float* d, int n) {
        int i = blockDim.x * blockIdx.x + threadIdx.x;
        if (i < n) d[i] = fabsf(x[i] - y[i]) / (fabsf(x[i]) + fabsf(y[i]) + 1.0f);
        __syncthreads();
    }'''
    return cupy.RawKernel(source, "rel_diff")
"""


def test_cuda_c_source_with_its_double_underscores_passes():
    assert refusals_in("ch3_memory", RAW_KERNEL) == []


def test_no_name_of_the_library_table_is_a_module_it_does_not_list():
    """A leaf of the table is a function, type or number: were it a module, its attributes would go unchecked."""
    table = allowed.library()
    checked = 0
    for key, names in table.items():
        try:
            namespace = importlib.import_module(key)
        except ImportError:
            parent, _, last = key.rpartition(".")
            try:
                namespace = getattr(importlib.import_module(parent), last)
            except (ImportError, AttributeError, ValueError):
                continue  # not in this installation (cupy without a GPU) or not in this mode (the simulator's numba.cuda.atomic)
        for name in names:
            value = getattr(namespace, name, None)
            assert not isinstance(value, type(importlib)) or f"{key}.{name}" in table, f"{key}.{name} is a module"
            checked += 1
    assert checked > 500
