"""Student notebooks from solution notebooks: one source for every exercise.

A notebook in `solutions/` marks each answer with nbgrader's delimiters::

    ### BEGIN SOLUTION  (hint: use cuda.grid(1))
    ...the instructor's answer...
    ### END SOLUTION

`build` writes `exercises/<same name>` with each such block replaced by a stub that defines what
the block defined (its functions and kernels, their bodies raising NotImplementedError with the
hint), so that the check cells run and say "not yet right", hidden tests (``### BEGIN HIDDEN TESTS`` ...
``### END HIDDEN TESTS``) removed and outputs cleared. It also gives the solution cells and the check
cells the cell metadata nbgrader expects, so instructors can use either tool, and makes the set-up
cells (those that import gpucourse) locked, read-only nbgrader cells: autograde puts them back as
released, so a submission cannot change what the checks are. `stale` lists every
difference between what `build` would write and what is on disk; a test fails on any.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
CHECK_CALL = re.compile(r"\bcheck_\w+\(")
SETUP_IMPORT = re.compile(r"^(?:import gpucourse\b|from gpucourse[\w.]* import )", re.MULTILINE)
DEFAULT_HINT = "write your answer here, then run the check cell below"


class MarkerError(ValueError):
    """A solution notebook whose markers do not pair up."""


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _hint(line: str) -> str:
    rest = line.split(BEGIN_SOLUTION, 1)[1].strip()
    if rest.startswith("(") and rest.endswith(")"):  # one pair of brackets around the whole hint
        rest = rest[1:-1].strip()
    if rest.lower().startswith("hint:"):
        rest = rest[5:].strip()
    return rest or DEFAULT_HINT


#: Characters of a hint on one line of a stub: a stub's lines stay within a notebook's and a page's width.
HINT_WIDTH = 80


def raise_lines(hint: str, indent: str) -> list[str]:
    """`raise NotImplementedError("hint")` at `indent`, the hint cut at spaces into strings of at most HINT_WIDTH characters."""
    pieces: list[str] = []
    for word in hint.split(" "):
        if pieces and len(pieces[-1]) + len(word) + 1 <= HINT_WIDTH:
            pieces[-1] += " " + word
        else:
            pieces.append(word)
    pieces = [piece + " " for piece in pieces[:-1]] + pieces[-1:]
    opening = f"{indent}raise NotImplementedError("
    return [opening + repr(pieces[0]) + (")" if len(pieces) == 1 else "")] + [
        " " * len(opening) + repr(piece) + (")" if k == len(pieces) - 1 else "") for k, piece in enumerate(pieces) if k]


def stub_of(block: list[str], indent: str, hint: str) -> list[str]:
    """The stub of one solution block: inside a function, its body raises; at the top of a cell, every function the block
    defines is defined again (decorators, signature, docstring) with a body that raises NotImplementedError with the hint, and
    its imports are kept. So an unanswered notebook reaches its check cells, which say "not yet right" in their own words."""
    if indent:
        return [f"{indent}# YOUR CODE HERE", *raise_lines(hint, indent)]
    import ast
    import textwrap

    code = textwrap.dedent("\n".join(block))
    try:
        tree = ast.parse(code)
    except SyntaxError:  # not Python we can read (a magic): the plain stub
        return ["# YOUR CODE HERE", *raise_lines(hint, "")]
    lines = code.split("\n")
    out = ["# YOUR CODE HERE: define the names below (the check calls them)"]
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out += lines[node.lineno - 1:node.end_lineno]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            body = node.body
            docstring = (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                         and isinstance(body[0].value.value, str))
            header_end = body[0].end_lineno if docstring else body[0].lineno - 1
            header = lines[first - 1:header_end]
            inner = lines[body[0].lineno - 1][:body[0].col_offset]
            statement = raise_lines(hint, inner) if isinstance(node, ast.FunctionDef) else [f"{inner}pass"]
            out += ([""] if len(out) > 1 else []) + header + statement
    return out if len(out) > 1 else ["# YOUR CODE HERE", *raise_lines(hint, "")]


def strip_solutions(text: str, cell_type: str, where: str = "") -> str:
    """Replace solution blocks with stubs (`stub_of`) and drop hidden tests in one cell's source."""
    out: list[str] = []
    inside: str | None = None
    block: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if inside is None:
            if BEGIN_SOLUTION in stripped:
                inside = "solution"
                indent = line[: len(line) - len(line.lstrip())]
                hint = _hint(line)
                block = []
            elif BEGIN_HIDDEN in stripped:
                inside = "hidden"
            elif END_SOLUTION in stripped or END_HIDDEN in stripped:
                raise MarkerError(f"{where}: line {number} closes a block that was never opened")
            else:
                out.append(line)
        elif inside == "solution" and END_SOLUTION in stripped:
            inside = None
            out += stub_of(block, indent, hint) if cell_type == "code" else ["YOUR ANSWER HERE"]
        elif inside == "hidden" and END_HIDDEN in stripped:
            inside = None
        elif BEGIN_SOLUTION in stripped or BEGIN_HIDDEN in stripped:
            raise MarkerError(f"{where}: line {number} opens a block inside another block")
        elif inside == "solution":
            block.append(line)
    if inside is not None:
        raise MarkerError(f"{where}: a {inside} block is never closed")
    return "\n".join(out)


def _grade_id(path_stem: str, index: int, kind: str) -> str:
    return f"{path_stem}-{kind}-{index}"


def normalise_solution(notebook: dict, stem: str) -> dict:
    """The solution notebook as stored: outputs cleared, nbgrader metadata on solution and check cells."""
    notebook = copy.deepcopy(notebook)
    for index, cell in enumerate(notebook.get("cells", [])):
        text = _source(cell)
        metadata = cell.setdefault("metadata", {})
        if BEGIN_SOLUTION in text and cell.get("cell_type") == "markdown":
            # a written answer: nbgrader grades it by hand, so it must be a grade cell with points
            metadata["nbgrader"] = {"grade": True, "grade_id": _grade_id(stem, index, "answer"), "locked": False,
                                    "points": 1, "schema_version": 3, "solution": True, "task": False}
        elif BEGIN_SOLUTION in text:
            metadata["nbgrader"] = {"grade": False, "grade_id": _grade_id(stem, index, "answer"), "locked": False,
                                    "schema_version": 3, "solution": True, "task": False}
        elif cell.get("cell_type") == "code" and CHECK_CALL.search(text):
            metadata["nbgrader"] = {"grade": True, "grade_id": _grade_id(stem, index, "check"), "locked": True,
                                    "points": 1, "schema_version": 3, "solution": False, "task": False}
        elif cell.get("cell_type") == "code" and SETUP_IMPORT.search(text):
            # a set-up cell: locked and read-only, so that autograde restores it as released
            metadata.update({"deletable": False, "editable": False})
            metadata["nbgrader"] = {"grade": False, "grade_id": _grade_id(stem, index, "setup"), "locked": True,
                                    "schema_version": 3, "solution": False, "task": False}
        else:
            metadata.pop("nbgrader", None)
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return notebook


def student_version(notebook: dict, stem: str) -> dict:
    """The exercise notebook a student gets from a (normalised) solution notebook."""
    notebook = normalise_solution(notebook, stem)
    for index, cell in enumerate(notebook.get("cells", [])):
        text = _source(cell)
        if BEGIN_SOLUTION in text or BEGIN_HIDDEN in text:
            # as lines, as Jupyter stores a cell's source: opening and saving the exercise changes nothing
            cell["source"] = strip_solutions(text, cell.get("cell_type", "code"), f"{stem}.ipynb cell {index}").splitlines(keepends=True)
    notebook.setdefault("metadata", {})["gpucourse"] = {
        "generated_from": f"solutions/{stem}.ipynb",
        "note": "generated by `python -m gpucourse exercises`: edit the solution notebook, not this one",
    }
    return notebook


def dumps(notebook: dict) -> str:
    """Serialise a notebook the way Jupyter does (one-space indent, sorted keys, trailing newline)."""
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _expected(solutions: Path, only: str | None = None) -> dict[str, tuple[str, str]]:
    """For each solution notebook name (or just `only`): (normalised solution text, student text)."""
    expected = {}
    for path in sorted(solutions.glob(only or "*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        expected[path.name] = (dumps(normalise_solution(notebook, path.stem)), dumps(student_version(notebook, path.stem)))
    return expected


def build(solutions: Path, exercises: Path, only: str | None = None) -> list[Path]:
    """Normalise every solution notebook (or just `only`) and write its student version; return the files written."""
    exercises.mkdir(parents=True, exist_ok=True)
    written = []
    expected = _expected(solutions, only)
    for name, (solution_text, student_text) in expected.items():
        if (solutions / name).read_text(encoding="utf-8") != solution_text:
            (solutions / name).write_text(solution_text, encoding="utf-8")
            written.append(solutions / name)
        target = exercises / name
        if not target.exists() or target.read_text(encoding="utf-8") != student_text:
            target.write_text(student_text, encoding="utf-8")
            written.append(target)
    if only is None:
        for orphan in sorted(exercises.glob("*.ipynb")):
            if orphan.name not in expected:
                orphan.unlink()
                written.append(orphan)
    return written


def stale(solutions: Path, exercises: Path) -> list[str]:
    """Every way `exercises/` (or a solution's metadata) differs from what `build` would write."""
    problems = []
    expected = _expected(solutions)
    for name, (solution_text, student_text) in expected.items():
        if (solutions / name).read_text(encoding="utf-8") != solution_text:
            problems.append(f"solutions/{name} has outputs or lacks nbgrader metadata")
        target = exercises / name
        if not target.exists():
            problems.append(f"exercises/{name} is missing")
        elif target.read_text(encoding="utf-8") != student_text:
            problems.append(f"exercises/{name} is out of date with solutions/{name}")
    for orphan in sorted(exercises.glob("*.ipynb")):
        if orphan.name not in expected:
            problems.append(f"exercises/{orphan.name} has no solution notebook")
    return problems
