"""Keeping a check's verdict honest: a screen of answer cells, and a time limit on every call of a student's code.

* `screen(source)` reads a cell's Python source (it runs nothing) and returns a `Refusal` for each
  construct an answer never needs and a forged grade does: `exec`, `eval`, `setattr`, `globals()`,
  a dunder attribute (`__dict__`, `__globals__`...), a frame or code object, an import outside the
  course's libraries, `sys`, `builtins`, `importlib`, an assignment to any attribute (`x.y = ...`),
  rebinding the names the set-up and check cells use (`ch1`, `gpucourse`, `cuda`, `np`, Python's
  builtins), and any use of a check module other than the check cell's own `chN.check_xxx(...)`.
  Importing `gpucourse.checks` in IPython registers the screen as an AST transformer (`install`), so a
  refused cell never runs; `gpucourse.grading.ScreenCells` applies it under `nbgrader autograde`.
* `deadline(seconds, ...)` ends a call that does not return in time (a SIGALRM timer of the main
  thread): every `check_*` function of the chapter modules runs under one (`limited_check`), sized
  from the time the check takes on its reference solution (`check_seconds`), and each simulated
  kernel launch inside it under its own, sized from its threads and within what is left of the
  check's (`limited_simulator`). On a GPU `wait_for_gpu` polls an
  event instead of blocking in a synchronize. A call past its limit raises `CheckTimedOut`, whose
  message names the call and the line it was running.

The screen is static: it refuses the routes to a forged grade we know of, in the source as written.
It does not sandbox the kernel process (README, "For instructors", says what that leaves open).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import linecache
import os
import re
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------
# The screen

#: The chapter check modules: the only `gpucourse.checks` names a set-up cell imports and a check cell calls.
CHECK_MODULES = frozenset(path.stem for path in Path(__file__).resolve().parent.glob("ch*.py"))

#: Names whose use in an answer is a route around the checks, with what to write instead.
FORBIDDEN_CALLS = {
    "exec": "runs code the screen cannot read",
    "eval": "runs code the screen cannot read",
    "compile": "makes code the screen cannot read",
    "setattr": "changes another object's attributes",
    "delattr": "changes another object's attributes",
    "globals": "reaches the notebook's own names",
    "vars": "reaches another object's names",
    "locals": "reaches a function's names",
    "__import__": "imports modules the screen cannot see",
    "breakpoint": "stops the kernel in a debugger",
    "open": "reads or writes files",
    "input": "waits for typing that never comes under grading",
    "get_ipython": "reaches the notebook's machinery (magics `%` and shell commands `!` become get_ipython calls)",
    "getattr": "reads attributes by a name the screen cannot check",
}

#: Modules (and attributes of that name) an answer must not mention at all.
FORBIDDEN_MODULES = frozenset({
    "sys", "builtins", "importlib", "inspect", "gc", "ctypes", "ctypeslib", "IPython", "ipykernel", "os", "posix", "subprocess",
    "pickle", "cloudpickle", "marshal", "shutil", "pathlib", "tempfile", "threading", "multiprocessing", "linecache", "runpy",
})

#: Attributes that lead to frames, code objects, other modules' insides or files.
FORBIDDEN_ATTRIBUTES = frozenset({
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next", "gi_frame", "gi_code",
    "cr_frame", "cr_code", "ag_frame", "ag_code", "func_globals", "attrgetter", "methodcaller", "checks", "grading",
    "exercises", "scripts", "run_python", "serialize", "Path", "write_text", "write_bytes", "save", "savez",
    "savez_compressed", "savetxt", "tofile", "fromfile", "load", "loadtxt", "genfromtxt", "memmap", "unlink",
    "mode", "set_mode", "modules", "update_wrapper", "wraps", "get_type_hints", "ForwardRef", "Formatter", "get_field",
    "extbuild", "f2py", "distutils", "extending", "overload", "overload_method", "overload_attribute", "intrinsic",
    "register_jitable", "lower_builtin", "typeof_impl", "objmode",
})

#: Top-level packages an answer may import (submodules included), besides `gpucourse` itself.
ALLOWED_IMPORTS = frozenset({
    "numpy", "math", "cmath", "numba", "cupy", "cupyx", "functools", "itertools", "operator", "time", "typing",
    "dataclasses", "collections", "random", "statistics", "fractions", "decimal", "heapq", "bisect", "numbers", "enum",
})

#: `gpucourse` submodules an answer may not import: the checks, the grading and the exercise machinery.
PRIVATE_COURSE_MODULES = frozenset({"checks", "grading", "exercises", "scripts", "mode", "__main__"})

#: Names the set-up cells bind, with the one thing each may be bound to (an import of exactly that).
CANONICAL_BINDINGS = {
    "gpucourse": "gpucourse", "np": "numpy", "cuda": "numba.cuda", **{name: f"gpucourse.checks.{name}" for name in CHECK_MODULES},
}

#: Special methods a class in an answer may define (the others let an object lie to a comparison).
ALLOWED_DUNDER_METHODS = frozenset({"__init__", "__repr__", "__str__"})

_DUNDER = re.compile(r"^__\w+__$")


@dataclass(frozen=True)
class Refusal:
    """One construct the screen refuses: its line in the cell and what to change, in one sentence."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


_MISSING = object()


def _course_object(path: str) -> object:
    """The object a dotted gpucourse path names (`gpucourse.sizes.SIZES`), importing modules on the way; _MISSING if none."""
    import importlib

    parts = path.split(".")
    try:
        value = importlib.import_module(parts[0])
    except ImportError:
        return _MISSING
    for number, part in enumerate(parts[1:], start=2):
        found = getattr(value, part, _MISSING)
        if found is _MISSING and isinstance(value, types.ModuleType):
            try:
                found = importlib.import_module(".".join(parts[:number]))
            except ImportError:
                return _MISSING
        value = found
        if value is _MISSING:
            return _MISSING
    return value


def _is_course_module(value: object) -> bool:
    return isinstance(value, types.ModuleType) and (value.__name__ == "gpucourse" or value.__name__.startswith("gpucourse."))


_SAFE_VALUES = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, int, float, complex, str, bytes, bool,
                type(None), tuple, frozenset, range)


def _safe_course_value(value: object) -> bool:
    """A value of the course's modules an answer may use: a module, class, function or immutable number, not its data."""
    import numpy as np

    return isinstance(value, (types.ModuleType, *_SAFE_VALUES, np.generic, np.dtype)) or callable(value)


def course_names(sources: list[str]) -> dict[str, object]:
    """The names that import statements in these cells bind to gpucourse's modules and objects (for `screen`'s `names`)."""
    names: dict[str, object] = {}
    for source in sources:
        try:
            tree = ast.parse(_python(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "gpucourse":
                        bound = alias.asname or "gpucourse"
                        value = _course_object(alias.name if alias.asname else "gpucourse")
                        if value is not _MISSING:
                            names[bound] = value
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gpucourse" and not node.level:
                for alias in node.names:
                    value = _course_object(f"{node.module}.{alias.name}")
                    if value is not _MISSING and alias.name != "*":
                        names[alias.asname or alias.name] = value
    return names


class _Screen(ast.NodeVisitor):
    """Walks one cell's AST and collects refusals (see `screen`)."""

    def __init__(self, names: Mapping[str, object] | None = None) -> None:
        self.names = {name: value for name, value in (names or {}).items() if _is_course_module(value)}
        self.attribute_roots: set[int] = set()  # id() of nodes that are the `.value` of an Attribute
        self.refusals: list[Refusal] = []
        self.allowed_check_names: set[int] = set()  # id() of the `chN` Name nodes of check-cell calls
        self.allowed_type_calls: set[int] = set()  # id() of the `type` Name nodes of one-argument calls
        self.depth = 0  # 0 at the cell's top level; > 0 inside a function, lambda, class body or comprehension

    def refuse(self, node: ast.AST, message: str) -> None:
        self.refusals.append(Refusal(getattr(node, "lineno", 0), message))

    # --- the top level: check calls, bindings of protected names --------------------------------

    def visit_Module(self, node: ast.Module) -> None:
        for statement in node.body:
            call = statement.value if isinstance(statement, ast.Expr) else None
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                    and call.func.value.id in CHECK_MODULES and call.func.attr.startswith("check_")):
                self.allowed_check_names.add(id(call.func.value))
        self.generic_visit(node)

    def bind(self, node: ast.AST, name: str, imported: str | None = None) -> None:
        """`name` is bound at the cell's top level (or declared global) to `imported` (a module path) or something else."""
        if name in CANONICAL_BINDINGS:
            if imported != CANONICAL_BINDINGS[name]:
                self.refuse(node, f"`{name}` is a name the set-up and check cells use: give your own value another name.")
        elif name in _BUILTIN_NAMES:
            self.refuse(node, f"`{name}` is one of Python's builtins: give your own value another name.")

    def _scoped(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if self.depth == 0:
            self.bind(node, node.name)
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.visit(node.args)
        if node.returns:
            self.visit(node.returns)
        self.depth += 1
        for statement in node.body:
            self.visit(statement)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self.depth == 0:
            self.bind(node, node.name)
        for statement in node.body:
            if (isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and _DUNDER.match(statement.name)
                    and statement.name not in ALLOWED_DUNDER_METHODS):
                self.refuse(statement, f"a class in an answer may not define `{statement.name}` (an object that redefines "
                                       "comparison or arithmetic can fool a check): return plain numbers and arrays.")
        self._scoped(node)

    visit_Lambda = _scoped
    visit_ListComp = _scoped
    visit_SetComp = _scoped
    visit_DictComp = _scoped
    visit_GeneratorExp = _scoped

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        for name in node.names:
            self.bind(node, name)

    visit_Nonlocal = visit_Global

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.bind(node, node.target.id)  # a walrus in a comprehension binds in the enclosing scope: treat it as top level
        self.visit(node.value)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name and self.depth == 0:
            self.bind(node, node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name and self.depth == 0:
            self.bind(node, node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name and self.depth == 0:
            self.bind(node, node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest and self.depth == 0:
            self.bind(node, node.rest)
        self.generic_visit(node)

    # --- imports ---------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not self._module_allowed(node, alias.name):
                continue
            bound = alias.asname or alias.name.split(".")[0]
            course = alias.name.split(".")[0] == "gpucourse"  # only the course's own modules are imported to be followed
            value = _course_object(alias.name if alias.asname else bound) if course else _MISSING
            if _is_course_module(value):
                self.names[bound] = value
            if self.depth == 0:
                self.bind(node, bound, alias.name if alias.asname else alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.refuse(node, "relative imports do not work in a notebook: import from numpy, math, numba, cupy or gpucourse.")
            return
        if module == "gpucourse.checks":
            for alias in node.names:
                if alias.name not in CHECK_MODULES or alias.asname:
                    self.refuse(node, "an answer may only import a check module as the set-up cell does "
                                      f"(`from gpucourse.checks import {sorted(CHECK_MODULES)[0]}`).")
            return
        if not self._module_allowed(node, module):
            return
        for alias in node.names:
            if alias.name == "*":
                self.refuse(node, f"`from {module} import *` can rebind the notebook's names: import the names you use.")
            elif alias.name.startswith("_") or alias.name in FORBIDDEN_ATTRIBUTES or alias.name in FORBIDDEN_MODULES \
                    or alias.name in FORBIDDEN_CALLS:
                self.refuse(node, f"`{alias.name}` is not for answers: use the public functions of {module}.")
            elif module == "gpucourse" and alias.name in PRIVATE_COURSE_MODULES:
                self.refuse(node, f"gpucourse.{alias.name} is the course's own machinery, not for answers.")
            else:
                if module.split(".")[0] == "gpucourse":
                    value = _course_object(f"{module}.{alias.name}")
                    if value is not _MISSING and not _safe_course_value(value):
                        self.refuse(node, f"{module}.{alias.name} is the course's own data: an answer computes its own values.")
                    elif _is_course_module(value):
                        self.names[alias.asname or alias.name] = value
                if self.depth == 0:
                    self.bind(node, alias.asname or alias.name, f"{module}.{alias.name}")

    def _module_allowed(self, node: ast.AST, module: str) -> bool:
        parts = module.split(".")
        if parts[0] == "gpucourse":
            if len(parts) > 1 and parts[1] in PRIVATE_COURSE_MODULES:
                self.refuse(node, f"{module} is the course's own machinery: an answer may import gpucourse's other modules only.")
                return False
            return True
        if parts[0] not in ALLOWED_IMPORTS or any(part.startswith("_") for part in parts):
            self.refuse(node, f"`{module}` is not among the libraries an answer may import (numpy, math, numba, cupy, "
                              "functools, itertools and the like): use those.")
            return False
        return True

    # --- names, attributes, calls ----------------------------------------------------------------

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in FORBIDDEN_CALLS:
            self.refuse(node, f"`{name}` {FORBIDDEN_CALLS[name]}: an answer does not need it; write the code itself.")
        elif name in FORBIDDEN_MODULES:
            self.refuse(node, f"`{name}` reaches Python's machinery: an answer does not need it.")
        elif _DUNDER.match(name):
            self.refuse(node, f"`{name}` is Python's machinery: an answer does not need it.")
        elif name in CHECK_MODULES and isinstance(node.ctx, (ast.Store, ast.Del)):
            self.refuse(node, f"`{name}` is a name the set-up and check cells use: give your own value another name.")
        elif name in CHECK_MODULES and id(node) not in self.allowed_check_names:
            self.refuse(node, f"`{name}` is the checks' module: an answer cell may only call it as the check cell does "
                              f"(`{name}.check_...(your_function)` on a line of its own).")
        elif isinstance(node.ctx, ast.Load) and id(node) not in self.attribute_roots and _is_course_module(self._root(name)):
            self.refuse(node, f"`{name}` is one of the course's modules: call its functions (`{name}.function(...)`), do not pass it on.")
        elif name == "type" and id(node) not in self.allowed_type_calls:
            self.refuse(node, "`type` as a value can make classes the screen cannot read: call type(x) to ask an object's type.")
        elif isinstance(node.ctx, (ast.Store, ast.Del)) and self.depth == 0:
            self.bind(node, name)

    def _root(self, name: str) -> object:
        if name in self.names:
            return self.names[name]
        return _course_object("gpucourse") if name == "gpucourse" else _MISSING

    def _course_chain(self, node: ast.Attribute) -> tuple[str, object] | None:
        """(dotted text, value) of an attribute chain rooted at one of the course's modules, or None."""
        parts = []
        current: ast.AST = node
        while isinstance(current, ast.Attribute):
            parts.append(current.attr)
            current = current.value
        if not isinstance(current, ast.Name):
            return None
        value = self._root(current.id)
        if not _is_course_module(value):
            return None
        walked = [current.id]
        for part in reversed(parts):
            if not isinstance(value, (types.ModuleType, type)):
                break  # a function or a number: what follows is not the course's data
            found = getattr(value, part, _MISSING)
            if found is _MISSING and isinstance(value, types.ModuleType):
                found = _course_object(f"{value.__name__}.{part}")
            if found is _MISSING:
                return None
            value = found
            walked.append(part)
            if not _safe_course_value(value):
                break  # the first data on the way (`gpucourse.sizes.SIZES` of `gpucourse.sizes.SIZES.clear`)
        return ".".join(walked), value

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attribute = node.attr
        self.attribute_roots.add(id(node.value))
        if isinstance(node.ctx, ast.Load) and id(node) not in self.attribute_roots:  # the whole chain, not a part of it
            chain = self._course_chain(node)
            if chain and not _safe_course_value(chain[1]):
                self.refuse(node, f"`{chain[0]}` is the course's own data: an answer computes its own values.")
            elif chain and _is_course_module(chain[1]):
                self.refuse(node, f"`{chain[0]}` is one of the course's modules: call its functions, do not pass it on.")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.refuse(node, f"an answer may not assign or delete attributes (`.{attribute} = ...`): keep your values in "
                              "names and arrays of your own.")
        elif attribute.startswith("__"):
            self.refuse(node, f"`.{attribute}` is Python's machinery: an answer does not need it.")
        elif attribute.startswith("_") and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            self.refuse(node, f"`.{attribute}` is private to its library: use its public functions.")
        elif attribute in FORBIDDEN_ATTRIBUTES or attribute in FORBIDDEN_MODULES:
            self.refuse(node, f"`.{attribute}` is not for answers: it reaches frames, files, modules or the course's machinery.")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if isinstance(function, ast.Name) and function.id == "type":
            if len(node.args) != 1 or node.keywords:
                self.refuse(node, "type() with three arguments makes a class the screen cannot read: write a class statement.")
            self.allowed_type_calls.add(id(function))
        for keyword in node.keywords:
            if keyword.arg == "allow_pickle":
                self.refuse(keyword.value, "loading pickles runs code the screen cannot read: an answer does not need it.")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _DUNDER.match(node.value):
            self.refuse(node, f"the string {node.value!r} names Python's machinery: an answer does not need it.")


_BUILTIN_NAMES = frozenset(name for name in dir(builtins) if not name.startswith("_"))


def screen_tree(tree: ast.AST, names: Mapping[str, object] | None = None) -> list[Refusal]:
    """The refusals for a parsed cell (an `ast.Module`), in line order; `names`: the notebook's names (modules are followed)."""
    visitor = _Screen(names)
    visitor.visit(tree)
    unique = {(refusal.line, refusal.message): refusal for refusal in visitor.refusals}
    return sorted(unique.values(), key=lambda refusal: refusal.line)


def _python(source: str) -> str:
    """A cell's source as Python: IPython's magics and shell commands become the get_ipython() calls they run."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # plain Python: magics stay syntax errors
        return source
    return TransformerManager().transform_cell(source)


def screen(source: str, names: Mapping[str, object] | None = None) -> list[Refusal]:
    """The refusals for one cell's source; [] if it may run. `names`: modules the notebook's other cells imported (`course_names`).

    A cell that is not valid Python is not refused here: it cannot run, so Python's own SyntaxError says why.
    """
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return []
    return screen_tree(tree, names)


#: How many refusals a message lists (the first ones; fixing them shows the rest).
SHOWN_REFUSALS = 3


def refusal_message(refusals: list[Refusal]) -> str:
    """The words a refused cell shows: what the guard is, then the first refusals, each with its line."""
    shown = "\n".join(f"  - {refusal}" for refusal in refusals[:SHOWN_REFUSALS])
    more = f"\n  (and {len(refusals) - SHOWN_REFUSALS} more)" if len(refusals) > SHOWN_REFUSALS else ""
    return f"This cell was not run: the course's checks refuse code that could change them.\n{shown}{more}"


class ScreenCells(ast.NodeTransformer):
    """IPython AST transformer: a cell the screen refuses raises InputRejected before any of it runs."""

    def __init__(self, names: Mapping[str, object] | None = None) -> None:
        super().__init__()
        self.names = names  # the notebook's namespace: names bound to the course's modules are followed
        self.earlier: str | None = None  # a refusal of a cell run before the screen was installed: refuses the next cell

    def visit(self, node: ast.AST) -> ast.AST:
        from IPython.core.error import InputRejected

        if self.earlier:
            message, self.earlier = self.earlier, None
            raise InputRejected(message)
        refusals = screen_tree(node, self.names)
        if refusals:
            raise InputRejected(refusal_message(refusals))
        return node


def imports_check_module(source: str) -> bool:
    """True for an exercise notebook's set-up cell: one that imports a chapter check module (`from gpucourse.checks import ch1`)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        tree = ast.parse(TransformerManager().transform_cell(source))
    except (ImportError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "gpucourse.checks" and any(
                alias.name in CHECK_MODULES for alias in node.names):
            return True
        if isinstance(node, ast.Import) and any(alias.name.startswith("gpucourse.checks.ch") for alias in node.names):
            return True
    return False


def earlier_refusal(sources: list[str]) -> str | None:
    """The message for the first of these cells (run before the screen was installed) that the screen refuses, or None."""
    for number, source in enumerate(sources):
        refusals = screen(source) if source and source.strip() else []
        if refusals:
            return (f"The checks were not loaded: cell [{number}], run before this one, holds code that could change them.\n"
                    + "\n".join(f"  - {refusal}" for refusal in refusals[:SHOWN_REFUSALS])
                    + "\nRemove it, restart the kernel (Kernel > Restart) and run the notebook from the top.")
    return None


class RefusedEarlierCell(ImportError):
    """A cell run before the checks were loaded that the screen refuses: the checks will not load in this kernel."""


def safe_signature(text: str) -> bool:
    """True for a Numba signature string made of type names, calls, subscripts and slices only (Numba evaluates it)."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    allowed = (ast.Expression, ast.Call, ast.Subscript, ast.Slice, ast.Tuple, ast.Load, ast.Name, ast.Constant)
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            return False
        if isinstance(node, ast.Name) and (node.id in _BUILTIN_NAMES or node.id.startswith("_")):
            return False
        if isinstance(node, ast.Constant) and not isinstance(node.value, int):
            return False
    return True


def guard_signature_strings() -> None:
    """Make Numba refuse a signature string that is not `safe_signature` (it evaluates them: a string could run any code)."""
    import importlib

    for name in ("numba.core.sigutils", "numba.cuda.core.sigutils"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        parse = module._parse_signature_string
        if getattr(parse, "_gpucourse_guarded", False):
            continue

        def guarded(signature: str, parse=parse):
            if not safe_signature(signature):
                raise TypeError(f"the signature {signature!r} is not made of Numba type names only, e.g. 'void(float32[:])'")
            return parse(signature)

        guarded._gpucourse_guarded = True
        module._parse_signature_string = guarded


def install(shell, earlier: list[str] = ()) -> ScreenCells:
    """Screen every later cell of this IPython `shell` (once); a refused cell among `earlier` ones refuses the next cell."""
    guard_signature_strings()
    transformers = shell.ast_transformers
    transformer = next((item for item in transformers if isinstance(item, ScreenCells)), None)
    if transformer is None:
        transformer = ScreenCells(getattr(shell, "user_ns", None))
        transformers.append(transformer)
        transformer.earlier = earlier_refusal(list(earlier))
    return transformer


def watch(shell) -> None:
    """Install the screen when an exercise notebook's set-up cell runs (now, or later), never in a chapter notebook.

    Called when `gpucourse.checks` is imported: if the cell importing it is a set-up cell (it imports a
    chapter check module), the screen starts now and the cells run before it are screened too (one
    refused makes this import fail); otherwise the screen starts with the first set-up cell that runs.
    """
    history = list(getattr(getattr(shell, "history_manager", None), "input_hist_parsed", []) or [""])
    if imports_check_module(history[-1]):
        install(shell)
        message = earlier_refusal(history[:-1])
        if message:
            raise RefusedEarlierCell(message)
        return

    def before_cell(info) -> None:
        if not any(isinstance(item, ScreenCells) for item in shell.ast_transformers) and imports_check_module(info.raw_cell or ""):
            install(shell, getattr(shell.history_manager, "input_hist_parsed", []))

    shell.events.register("pre_run_cell", before_cell)


# ---------------------------------------------------------------------------------------------
# Deadlines


class CheckTimedOut(BaseException):
    """A student's function or kernel that did not end in time. A BaseException: a check's `except Exception` cannot swallow it."""


#: The most a check may take (seconds), its kernel launches included: simulator, GPU. Compute-sanitizer and trace
#: replays on a GPU are not counted (they have their own limits).
CHECK_SECONDS = {"simulator": 120.0, "gpu": 600.0}
#: A check's own limit follows its reference: CHECK_FACTOR times the time the check took on the reference solution
#: (REFERENCE_SECONDS, measured by tools/check_seconds.py), and at least MIN_CHECK_SECONDS (a slower machine, a first
#: compile). On a GPU with no record of its own, the simulator's record stands in (a GPU runs the same check faster,
#: bar compiling and timing, which the floor covers).
CHECK_FACTOR = 20.0
MIN_CHECK_SECONDS = {"simulator": 10.0, "gpu": 45.0}
#: A simulated launch may take this long, plus SIMULATED_THREAD_SECONDS per thread of its grid, and never longer than
#: what is left of its check's own limit.
SIMULATED_LAUNCH_SECONDS = 30.0
SIMULATED_THREAD_SECONDS = 0.02
#: A launch on a GPU may run this long before the check says the GPU is stuck in it (check sizes run for milliseconds).
GPU_LAUNCH_SECONDS = 20.0
REFERENCE_SECONDS_FILE = PACKAGE_DIR / "data" / "check_seconds.json"


@functools.cache
def reference_seconds() -> dict[str, dict[str, float]]:
    """The time each check took on its reference solution (seconds), by mode and check name (tools/check_seconds.py)."""
    import json

    try:
        return json.loads(REFERENCE_SECONDS_FILE.read_text())
    except (OSError, ValueError):
        return {}


@dataclass
class _Deadline:
    seconds: float
    describe: Callable[[object], str]  # the message, from the main thread's frame when time ran out
    end: float = 0.0
    remaining: float = 0.0  # while paused by an inner deadline


_active: list[_Deadline] = []
_saved: dict[str, object] = {}


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _on_alarm(signum, frame) -> None:
    if not _active:
        return
    current = _active[-1]
    if time.monotonic() < current.end - 0.01:  # a stale signal (the timer was re-armed since): wait for the real one
        return
    try:
        message = current.describe(frame)
    except Exception as exc:  # noqa: BLE001 - the words must never stop the stop
        message = f"a call did not end within {current.seconds:.0f} s ({type(exc).__name__} while naming it)"
    raise CheckTimedOut(message)


def _arm(seconds: float) -> None:
    # repeat every second after the first expiry: code that swallows the exception is interrupted again
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001), 1.0)


@contextlib.contextmanager
def deadline(seconds: float, describe: Callable[[object], str], within_outer: bool = False) -> Iterator[None]:
    """Raise CheckTimedOut(describe(frame)) if the block runs longer than `seconds` (main thread; elsewhere: no limit).

    Deadlines nest: an inner one stops the outer one's clock while it runs, unless `within_outer`: then
    its time counts against the outer one too, and it ends no later than the outer one would. The
    process's own SIGALRM handler and timer (pytest-timeout's, say) are put back when the outermost
    deadline ends.
    """
    if not _can_alarm() or seconds == float("inf"):
        with contextlib.nullcontext() if within_outer else _paused_outer():
            yield
        return
    now = time.monotonic()
    outer_end = _active[-1].end if _active else None
    if not _active:
        _saved["handler"] = signal.signal(signal.SIGALRM, _on_alarm)
        _saved["timer"] = signal.setitimer(signal.ITIMER_REAL, 0)
        _saved["since"] = now
    else:
        _active[-1].remaining = max(_active[-1].end - now, 0.0)
        if within_outer:
            seconds = min(seconds, _active[-1].remaining)
    current = _Deadline(seconds, describe, end=now + seconds)
    _active.append(current)
    _arm(seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _active.remove(current)
        if _active:
            outer = _active[-1]
            outer.end = outer_end if within_outer and outer_end is not None else time.monotonic() + outer.remaining
            _arm(max(outer.end - time.monotonic(), 0.0))
        else:
            signal.signal(signal.SIGALRM, _saved.pop("handler"))
            delay, interval = _saved.pop("timer")
            if delay:
                signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - _saved["since"]), 0.001), interval)
            _saved.pop("since")


@contextlib.contextmanager
def _paused_outer() -> Iterator[None]:
    if not _active or not _can_alarm():
        yield
        return
    outer = _active[-1]
    outer.remaining = max(outer.end - time.monotonic(), 0.0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        outer.end = time.monotonic() + outer.remaining
        _arm(outer.remaining)


def paused() -> contextlib.AbstractContextManager[None]:
    """Stop the current deadline's clock for a step with its own time limit (a subprocess with a timeout)."""
    return _paused_outer()


_MACHINERY = (PACKAGE_DIR, Path(contextlib.__file__).resolve().parent)


def _is_student_frame(frame) -> bool:
    filename = frame.f_code.co_filename
    if filename.startswith("<"):  # <frozen ...>, <string>: Python's machinery, unless IPython's own cell name
        return filename.startswith(("<ipython-input", "<stdin>"))
    path = Path(filename).resolve()
    text = str(path)
    if "site-packages" in text or "dist-packages" in text:
        return False
    return not any(path.is_relative_to(folder) for folder in _MACHINERY)


def _shown_value(value: object) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"<{type(value).__name__} of shape {tuple(value.shape)}, {value.dtype}>"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _call_of(frame) -> str:
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    arguments = ", ".join(f"{name}={_shown_value(frame.f_locals[name])}" for name in names if name in frame.f_locals)
    return f"{code.co_name}({arguments})"


def _line_number(frame) -> int:
    """The frame's line; from its last instruction when f_lineno is None (a frame interrupted by a signal may say None)."""
    if frame.f_lineno:
        return frame.f_lineno
    number = frame.f_code.co_firstlineno
    for start, _, line in frame.f_code.co_lines():  # the last line that starts at or before the instruction (a jump has none)
        if start > frame.f_lasti:
            break
        number = line or number
    return number


def _where(frame) -> str:
    number = _line_number(frame)
    line = linecache.getline(frame.f_code.co_filename, number).strip()
    return f"line {number}" + (f", `{line}`" if line else "")


def _outermost_student_frame(frame):
    """The student's function the check called (the outermost student frame below the check), and the innermost one."""
    outer = inner = None
    while frame is not None:
        if _is_student_frame(frame):
            inner = inner or frame
            outer = frame
        elif outer is not None:
            break  # back in the check's machinery: `outer` is the call the check made
        frame = frame.f_back
    return outer, inner


def _host_message(check: str, seconds: float) -> Callable[[object], str]:
    def describe(frame) -> str:
        outer, inner = _outermost_student_frame(frame)
        if outer is None:
            return f"{check} did not finish within {seconds:.0f} s; it stopped in the course's code. Run the cell again; if it " \
                   "happens again, restart the kernel."
        return (f"{_call_of(outer)} did not return within {seconds:.0f} s (it was at {_where(inner)}). "
                "Does every loop in it end? A `while` whose condition never becomes false runs forever.")
    return describe


def check_seconds(where: str, check: str | None = None) -> float:
    """A check's own time limit in this mode (seconds): the environment's GPUCOURSE_CHECK_SECONDS if set; else CHECK_FACTOR
    times its reference's recorded time, at least MIN_CHECK_SECONDS; never more than CHECK_SECONDS (unrecorded: that)."""
    configured = os.environ.get("GPUCOURSE_CHECK_SECONDS", "")
    try:
        if configured:
            return float(configured)
    except ValueError:
        pass
    recorded = reference_seconds()
    measured = recorded.get(where, {}).get(check or "")
    measured = recorded.get("simulator", {}).get(check or "") if measured is None else measured
    if measured is None:
        return CHECK_SECONDS[where]
    return min(CHECK_SECONDS[where], max(MIN_CHECK_SECONDS[where], CHECK_FACTOR * float(measured)))


def remaining_seconds() -> float:
    """What is left of the innermost running deadline (seconds; infinite outside any)."""
    return max(_active[-1].end - time.monotonic(), 0.0) if _active else float("inf")


def limited_check(check: Callable[..., object]) -> Callable[..., object]:
    """`check` under its deadline (`check_seconds`), with every simulated launch inside it limited by its threads and by it."""
    if getattr(check, "_gpucourse_limited", False):
        return check

    @functools.wraps(check)
    def limited(*args, **kwargs):
        from .. import mode
        from .runs import float64_arguments_seen

        float64_arguments_seen(clear=True)  # what an earlier check saw is not this check's evidence
        seconds = check_seconds("gpu" if mode.on_gpu() else "simulator", check.__name__)
        with deadline(seconds, _host_message(check.__name__, seconds)), limited_simulator(), _gpu_watchdog(seconds):
            return check(*args, **kwargs)

    limited._gpucourse_limited = True
    return limited


def limit_checks(module) -> None:
    """Put every public `check_*` function of a chapter module under `limited_check` (in place, once)."""
    for name, value in list(vars(module).items()):
        if name.startswith("check_") and callable(value) and getattr(value, "__module__", None) == module.__name__:
            setattr(module, name, limited_check(value))


# --- simulated kernels


def simulated_launch_seconds(threads: int) -> float:
    """The time limit of one simulated launch of `threads` threads (seconds): generous on a slow, shared machine."""
    return SIMULATED_LAUNCH_SECONDS + SIMULATED_THREAD_SECONDS * threads


def _stop_simulated_threads(grace_s: float = 2.0) -> None:
    """End the simulator's threads left running by a launch that was stopped: they would keep the GIL busy forever."""
    import ctypes

    from numba.cuda.simulator.kernel import BlockThread

    stray = [thread for thread in threading.enumerate() if isinstance(thread, BlockThread) and thread.is_alive()]
    for thread in stray:
        thread.abort = True
        thread.syncthreads_blocked = False
        thread.syncthreads_event.set()  # wakes a thread waiting at a barrier: it then raises (abort)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(SystemExit))
    end = time.monotonic() + grace_s
    for thread in stray:
        thread.join(max(end - time.monotonic(), 0.0))


def _kernel_message(name: str, grid, block, seconds: float) -> Callable[[object], str]:
    def describe(frame) -> str:
        where = ""
        from numba.cuda.simulator.kernel import BlockThread

        frames = sys._current_frames()
        for thread in threading.enumerate():
            if isinstance(thread, BlockThread) and thread.ident in frames:
                _, inner = _outermost_student_frame(frames[thread.ident])
                if inner is not None:
                    where = f" (thread {tuple(thread.threadIdx)} of block {tuple(thread.blockIdx)} was at {_where(inner)})"
                    break
        return (f"the kernel {name}[{grid}, {block}] did not finish within {seconds:.0f} s in the simulator{where}. Does every "
                "loop in it end? A `while` whose condition never becomes false runs forever.")
    return describe


@contextlib.contextmanager
def limited_simulator() -> Iterator[None]:
    """In the simulator, every kernel launch made in the block runs under a deadline sized from its threads."""
    from .. import mode

    if not mode.is_simulator() or not _can_alarm():
        yield
        return
    from numba.cuda.simulator import kernel as simulated

    original = simulated.FakeCUDAKernel.__call__

    def call(self, *args):
        if self._device or simulated._kernel_context or threading.current_thread() is not threading.main_thread():
            return original(self, *args)
        grid, block = simulated.normalize_kernel_dimensions(self.grid_dim, self.block_dim)
        threads = _count(grid) * _count(block)
        seconds = simulated_launch_seconds(threads)
        name = getattr(self.fn, "__name__", "kernel")
        seconds = min(seconds, remaining_seconds())  # a launch counts against its check's own limit
        try:
            with deadline(seconds, _kernel_message(name, _dims(grid), _dims(block), seconds), within_outer=True):
                return original(self, *args)
        except CheckTimedOut:
            _stop_simulated_threads()
            raise

    simulated.FakeCUDAKernel.__call__ = call
    try:
        yield
    finally:
        simulated.FakeCUDAKernel.__call__ = original


def _count(dims) -> int:
    total = 1
    for value in (dims if isinstance(dims, tuple) else tuple(dims)):
        total *= int(value)
    return total


def _dims(dims) -> str:
    values = tuple(int(v) for v in dims)
    while len(values) > 1 and values[-1] == 1:
        values = values[:-1]
    return str(values[0]) if len(values) == 1 else str(values)


# --- a real GPU


def wait_for_gpu(what: str, seconds: float | None = None, poll_s: float = 0.005) -> None:
    """Wait for the GPU's work so far by polling an event (a synchronize could block for ever); past `seconds`, say so."""
    from numba import cuda

    seconds = GPU_LAUNCH_SECONDS if seconds is None else seconds
    event = cuda.event(timing=False)
    event.record()
    start = time.monotonic()
    while not event.query():
        if time.monotonic() - start > seconds:
            raise CheckTimedOut(
                f"{what} did not finish within {seconds:.0f} s: the GPU is still running it and will not stop by itself. "
                "Does every loop in the kernel end? Restart the kernel (Kernel > Restart) before running anything else.")
        time.sleep(poll_s)


@contextlib.contextmanager
def _gpu_watchdog(seconds: float) -> Iterator[None]:
    """On a GPU, a message from a helper thread if the check is still running past its limit (stuck in a CUDA call)."""
    from .. import mode

    if not mode.on_gpu():
        yield
        return

    def warn() -> None:
        print(f"\u26a0 the check is still running after {seconds + 30:.0f} s, stuck waiting for the GPU: a kernel of yours "
              "probably never ends (a loop whose condition stays true). Restart the kernel (Kernel > Restart).", flush=True)

    timer = threading.Timer(seconds + 30, warn)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
