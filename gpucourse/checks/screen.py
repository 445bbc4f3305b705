"""The screen of answer cells: what an answer may import and call is listed; anything else is refused before it runs.

`screen(source, names)` reads a cell's Python source (it runs nothing) and returns a `Refusal`, with
its line and one sentence saying what to write instead, for each construct outside the allowlist
(`gpucourse.checks.allowed`):

* an import, or an attribute chain on an imported module, that the library table does not list
  (`np.add` yes; `np.load`, `np.lib...`, `numba.core...`, `cuda.simulator` no), and a module passed
  on as a value (a callee could then reach any of its attributes);
* any object of the course other than the helpers the notebook's exercises use (derived per
  exercise notebook from the chapter check module its set-up cell imports), and the course's own
  implementation of an exercise, named as such; the check modules except in the check cell's call;
* Python's machinery: `exec`, `eval`, `compile`, `getattr`/`setattr`/`hasattr`, `vars`, `globals`,
  `dir`, `id`, `open`, `__import__`, `type` other than as a question (`type(x) is float`: type(int)
  is `type` itself, a maker of classes), a dunder or private attribute, frame, code, raw-memory and
  compiler-context attributes, name-like strings holding `__` (names of the machinery built at run
  time), format fields that read private attributes, a printed check mark, a class statement's
  keywords (metaclass=) and its special methods other than `__init__`, `__repr__`, `__str__`, any
  attribute assignment (`x.y = ...`), and rebinding the names the set-up and check cells use or
  Python's builtins.

`install` registers the screen with IPython as an AST transformer (a refused cell never runs);
`gpucourse.grading.ScreenCells` applies it under `nbgrader autograde`.

What it leaves open: it reads the source as written, so an object the check hands over (an argument)
or a value returned by an allowed call is not followed (its attributes are checked by name only),
and a string built at run time is not read (it can reach nothing without the refused sinks above).
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from . import allowed

#: The chapter check modules: the only `gpucourse.checks` names a set-up cell imports and a check cell calls.
CHECK_MODULES = frozenset(path.stem for path in Path(__file__).resolve().parent.glob("ch*.py"))

#: Builtins whose use in an answer is a route around the checks, with what they do.
FORBIDDEN_CALLS = {
    "exec": "runs code the screen cannot read",
    "eval": "runs code the screen cannot read",
    "compile": "makes code the screen cannot read",
    "setattr": "changes another object's attributes",
    "delattr": "changes another object's attributes",
    "getattr": "reads attributes by a name the screen cannot check",
    "hasattr": "reads attributes by a name the screen cannot check",
    "globals": "reaches the notebook's own names",
    "vars": "reaches another object's names",
    "locals": "reaches a function's names",
    "dir": "lists another object's names",
    "id": "gives an object's address in memory",
    "__import__": "imports modules the screen cannot see",
    "breakpoint": "stops the kernel in a debugger",
    "help": "imports modules the screen cannot see",
    "open": "reads or writes files",
    "input": "waits for typing that never comes under grading",
    "exit": "ends the kernel",
    "quit": "ends the kernel",
    "get_ipython": "reaches the notebook's machinery (magics `%` and shell commands `!` become get_ipython calls)",
}

#: Attributes of any value that lead to frames, code objects, raw memory, files or a compiler's insides.
FORBIDDEN_ATTRIBUTES = frozenset({
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next", "gi_frame", "gi_code",
    "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "ag_await", "func_globals", "ctypes", "tofile",
    "dump", "dumps", "targetctx", "typingctx", "target_context", "typing_context", "cudadrv", "simulator", "checks", "grading",
    "exercises", "scripts", "modules", "mro", "targetdescr", "mempin", "memhostalloc", "memalloc", "memfree", "memunpin",
    "get_primary_context", "memory_manager", "deallocations",
})

#: Names the set-up and check cells bind, with the one thing each may be bound to (an import of exactly that).
CANONICAL_BINDINGS = {
    "gpucourse": "gpucourse", "np": "numpy", "cuda": "numba.cuda", **{name: f"gpucourse.checks.{name}" for name in CHECK_MODULES},
}

#: Special methods a class in an answer may define (the others let an object lie to a comparison).
ALLOWED_DUNDER_METHODS = frozenset({"__init__", "__repr__", "__str__"})

_DUNDER = re.compile(r"^__\w+__$")
_NAME_LIKE = re.compile(r"\w*")  # a string that could be an attribute's name (C source such as `__global__ void k()` is not)
_PRIVATE_FIELD = re.compile(r"\{[^{}]*[.\[]\s*_")  # a format field reading a private attribute: "{0._x}", "{0[_x]}"
_BUILTIN_NAMES = frozenset(name for name in dir(builtins) if not name.startswith("_"))
_MISSING = object()


@dataclass(frozen=True)
class Refusal:
    """One construct the screen refuses: its line in the cell and what to change, in one sentence."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


# ---------------------------------------------------------------------------------------------
# The course's objects


def _course_object(path: str, private: bool = False) -> object:
    """The object a dotted gpucourse path names (`gpucourse.sizes.SIZES`), importing modules on the way; _MISSING if none.

    A path with a private part (`gpucourse.__main__`) is followed only for the course's own tables (`private=True`): an
    answer's is refused by name, and importing it could run it.
    """
    parts = path.split(".")
    if parts[0] != "gpucourse" or (not private and any(part.startswith("_") for part in parts)):
        return _MISSING
    value: object = importlib.import_module("gpucourse")
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


def _is_course_value(value: object) -> bool:
    """A function, class, kernel or launcher defined by the course (not a plain instance of one: those are values)."""
    if isinstance(value, types.ModuleType):
        return _is_course_module(value)
    try:  # a kernel's Python function, read from the instance's own attributes (no __getattr__ of a library object runs)
        own = vars(value) if not isinstance(value, type) else {}
    except TypeError:  # no __dict__
        own = {}
    candidates = [value, own.get("py_func"), own.get("fn"), own.get("__wrapped__")]
    if callable(value) and not isinstance(value, type):
        candidates.append(type(value))  # a launcher object of the course's own class
    for candidate in candidates:
        if isinstance(candidate, (types.FunctionType, types.BuiltinFunctionType, type, functools.partial)):
            module = getattr(candidate, "__module__", "") or ""
            if module == "gpucourse" or module.startswith("gpucourse."):
                return True
    return False


@functools.cache
def _course_table(checks: frozenset[str]) -> tuple[dict[int, str], tuple[object, ...]]:
    """id() -> path of the course objects the notebooks of these check modules may use (and the objects, kept alive)."""
    paths = set(allowed.COURSE_GENERAL)
    chapters = [allowed.COURSE[name] for name in checks if name in allowed.COURSE]
    if chapters:
        paths |= frozenset.intersection(*chapters)
    table, kept = {}, []
    for path in sorted(paths):
        value = _course_object(path)
        if value is not _MISSING:
            table[id(value)] = path
            kept.append(value)
    return table, tuple(kept)


@functools.cache
def _special_table() -> tuple[dict[int, tuple[str, object]], tuple[object, ...]]:
    """id() -> (kind, data) of course objects with rules of their own: references, constant calls, factories, module results."""
    table: dict[int, tuple[str, object]] = {}
    kept = []

    def add(path: str, kind: str, data: object) -> None:
        value = _course_object(path, private=True)
        if value is not _MISSING:
            table.setdefault(id(value), (kind, data))
            kept.append(value)

    for exercise, (_, paths) in allowed.REFERENCES.items():
        for path in paths:
            add(path, "reference", exercise)
    for path, arguments in allowed.COURSE_CALLS.items():
        add(path, "calls", arguments)
    for path, attributes in allowed.COURSE_FACTORIES.items():
        add(path, "factory", attributes)
    for path, module in allowed.MODULE_RESULTS.items():
        add(path, "module", module)
    return table, tuple(kept)


def _special(value: object) -> tuple[str, object] | None:
    return _special_table()[0].get(id(value))


# ---------------------------------------------------------------------------------------------
# Libraries


def _library_allowed(path: str) -> bool:
    """True if an answer may name this library path (a namespace of the table, or a name the table lists in its parent)."""
    table = allowed.library()
    if path in table:
        return True
    parent, _, name = path.rpartition(".")
    names = table.get(parent)
    return names is not None and not name.startswith("_") and name in names


def _library_top(path: str) -> str:
    return path.split(".")[0]


# ---------------------------------------------------------------------------------------------
# What a name stands for

_LIBRARY, _COURSE = "library", "course"
_INSTEAD = "write that part with numpy's or cupy's array functions, numba.cuda's kernels and math, or in plain Python."


def _binding_of_value(value: object) -> tuple[str, object] | None:
    """(kind, what) for a value of the notebook's namespace: a library module's path, a course object; None: a plain value."""
    if isinstance(value, types.ModuleType):
        return (_COURSE, value) if _is_course_module(value) else (_LIBRARY, value.__name__)
    if _is_course_value(value):
        return _COURSE, value
    return None


def course_names(sources: list[str]) -> dict[str, object]:
    """The names that import statements in these cells bind to gpucourse's objects and to library modules (`screen`'s `names`).

    Only the course's modules and the libraries the allowlist names are imported here, never a module a cell merely mentions.
    """
    names: dict[str, object] = {}

    def load(path: str) -> object:
        if path.split(".")[0] == "gpucourse":
            return _course_object(path)
        if not _library_allowed(path):
            return _MISSING
        try:
            return importlib.import_module(path)
        except ImportError:
            return _MISSING

    for tree in filter(None, map(_tree, sources)):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    path = alias.name if alias.asname else alias.name.split(".")[0]
                    value = load(path)
                    if value is not _MISSING:
                        names[alias.asname or path] = value
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    path = f"{node.module}.{alias.name}"
                    value = _course_object(path) if node.module.split(".")[0] == "gpucourse" else load(path)
                    if value is not _MISSING:
                        names[alias.asname or alias.name] = value
    return names


# ---------------------------------------------------------------------------------------------
# The walk


class _Screen(ast.NodeVisitor):
    """Walks one cell's AST and collects refusals (see `screen`)."""

    def __init__(self, tree: ast.AST, names: Mapping[str, object] | None = None) -> None:
        self.refusals: list[Refusal] = []
        self.parents: dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        self.bindings: dict[str, tuple[str, object]] = {}  # name -> (kind, what): the notebook's, then this cell's imports
        checks = set()
        for name, value in (names or {}).items():
            if name in CHECK_MODULES and _is_course_module(value) and value.__name__ == f"gpucourse.checks.{name}":
                checks.add(name)
            binding = _binding_of_value(value) if isinstance(name, str) and not name.startswith("_") else None
            if binding:
                self.bindings[name] = binding
        self.module_results: set[int] = set()  # id() of the calls whose result is a module, assigned to a name
        self._prescan(tree, checks)
        self.course, _ = _course_table(frozenset(checks))
        self.chapters = ", ".join(sorted(checks)) or "none"
        self.allowed_check_names: set[int] = set()  # id() of the `chN` Name nodes of check-cell calls
        self.depth = 0  # 0 at the cell's top level; > 0 inside a function, lambda, class body or comprehension

    def refuse(self, node: ast.AST, message: str) -> None:
        self.refusals.append(Refusal(getattr(node, "lineno", 0), message))

    # --- before the walk: this cell's imports and module results ---------------------------------

    def _prescan(self, tree: ast.AST, checks: set[str]) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    path = alias.name if alias.asname else alias.name.split(".")[0]
                    self._bind_path(alias.asname or path, path)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if node.module == "gpucourse.checks" and alias.name in CHECK_MODULES and not alias.asname:
                        checks.add(alias.name)
                    elif alias.name != "*":
                        self._bind_path(alias.asname or alias.name, f"{node.module}.{alias.name}")
        for node in ast.walk(tree):  # `cupy = gpucourse.require_cupy(...)`: the name is then cupy's alias
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call)):
                module = self._module_result(node.value.func)
                if module:
                    self.bindings[node.targets[0].id] = (_LIBRARY, module)
                    self.module_results.add(id(node.value))

    def _bind_path(self, name: str, path: str) -> None:
        if path.split(".")[0] == "gpucourse":
            value = _course_object(path)
            if value is not _MISSING:  # whatever a cell imports from the course is the course's, data included
                self.bindings[name] = (_COURSE, value)
        else:
            self.bindings[name] = (_LIBRARY, path)

    def _root(self, name: str) -> tuple[str, object] | None:
        if name in self.bindings:
            return self.bindings[name]
        conventional = allowed.CONVENTIONAL_ROOTS.get(name)
        if conventional == "gpucourse":
            return _COURSE, importlib.import_module("gpucourse")
        return (_LIBRARY, conventional) if conventional else None

    def _module_result(self, function: ast.AST) -> str | None:
        """The module a call of this function returns (`gpucourse.require_cupy` -> "cupy"), or None."""
        chain = _chain(function)
        if not chain:
            return None
        root = self._root(chain[0].id)
        if root is None:
            return None
        kind, what = root
        if kind == _LIBRARY:
            return allowed.MODULE_RESULTS.get(".".join([str(what), *chain[1:]]))
        value = what
        for part in chain[1:]:
            value = getattr(value, part, _MISSING) if isinstance(value, types.ModuleType) else _MISSING
        special = _special(value) if value is not _MISSING else None
        return special[1] if special and special[0] == "module" else None

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
        for keyword in node.keywords:
            self.refuse(node, f"a class statement's keyword (`{keyword.arg or '**'}=`) can give the class a maker of its own: "
                              "write a plain class, or none.")
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
            if alias.name.split(".")[0] == "gpucourse":
                if not self._course_import_allowed(node, alias.name):
                    continue
            elif not self._library_import_allowed(node, alias.name):
                continue
            bound = alias.asname or alias.name.split(".")[0]
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
        for alias in node.names:
            path = f"{module}.{alias.name}"
            if alias.name == "*":
                self.refuse(node, f"`from {module} import *` can rebind the notebook's names: import the names you use.")
                continue
            if module.split(".")[0] == "gpucourse":
                if not self._course_import_allowed(node, path):
                    continue
            elif not self._library_import_allowed(node, path):
                continue
            if self.depth == 0:
                self.bind(node, alias.asname or alias.name, path)

    def _library_import_allowed(self, node: ast.AST, path: str) -> bool:
        if _library_allowed(path) and not any(part.startswith("_") for part in path.split(".")):
            return True
        top = _library_top(path)
        if top in {_library_top(key) for key in allowed.library()}:
            self.refuse(node, f"`{path}` is not among what an answer may use of {top}: {_INSTEAD}")
        else:
            self.refuse(node, f"`{top}` is not among the libraries an answer may import: use numpy, math, numba.cuda or cupy.")
        return False

    def _course_import_allowed(self, node: ast.AST, path: str) -> bool:
        parts = path.split(".")
        if len(parts) > 1 and parts[1] in ("checks", "grading", "exercises", "scripts", "mode", "__main__"):
            self.refuse(node, f"`{path}` is the course's own machinery: import only the helpers the exercise names.")
            return False
        value = _course_object(path)
        if value is _MISSING:
            self.refuse(node, f"`{path}` is not among the course helpers this notebook's exercises use: write that part yourself.")
            return False
        if isinstance(value, types.ModuleType):
            if value.__name__ == "gpucourse" or any(name.startswith(value.__name__ + ".") for name in self.course.values()):
                return True
            self.refuse(node, f"`{path}` is not among the course modules this notebook's exercises use: write that part yourself.")
            return False
        return self._course_value_allowed(node, path, value)

    # --- names, attributes, calls ----------------------------------------------------------------

    def _course_value_allowed(self, node: ast.AST, text: str, value: object) -> bool:
        """Refuse a course object (function, class, kernel) that is not a helper of this notebook; True if it is one."""
        special = _special(value)
        if special and special[0] == "reference":
            self.refuse(node, f"`{text}` is the course's own implementation of Exercise {special[1]}: write your own, as the "
                              "exercise asks.")
            return False
        if id(value) not in self.course:
            self.refuse(node, f"`{text}` is not among the course helpers this notebook's exercises use: write that part yourself "
                              "with numpy, numba.cuda and math.")
            return False
        return True

    def _check_course_use(self, node: ast.AST, text: str, value: object) -> None:
        """The rules of an allowed course object that has some: constant arguments, attributes of its result, a module result."""
        special = _special(value)
        if not special:
            return
        kind, data = special
        parent = self.parents.get(id(node))
        call = parent if isinstance(parent, ast.Call) and parent.func is node else None
        if kind == "calls":
            arguments = tuple(argument.value for argument in call.args if isinstance(argument, ast.Constant)) if call else None
            if call is None or call.keywords or arguments is None or len(arguments) != len(call.args) or arguments not in data:
                shown = " or ".join(f"{text}{item!r}".replace(",)", ")") for item in sorted(data))
                answer = next((exercise for exercise, (path, args) in allowed.REFERENCE_CALLS.items()
                               if _course_object(path) is value and args == arguments), None)
                what = "`" + f"{text}{arguments!r}".replace(",)", ")") + f"` is Exercise {answer}'s answer" if answer else \
                    f"`{text}` may be used here only as `{shown}`"
                self.refuse(node, f"{what}: compute the rest yourself, as the exercise asks.")
        elif kind == "factory":
            outer = self.parents.get(id(call)) if call else None
            if not (isinstance(outer, ast.Attribute) and outer.value is call and outer.attr in data):
                self.refuse(node, f"of `{text}()` an answer may read only {', '.join(sorted(data))} (the others are an exercise's "
                                  "answer): write your own kernel.")
        elif kind == "module" and (call is None or id(call) not in self.module_results):
            self.refuse(node, f"assign `{text}(...)` to a name of its own (`cupy = {text}(...)`) and use that name.")

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        parent = self.parents.get(id(node))
        is_root = isinstance(parent, ast.Attribute) and parent.value is node
        if name in FORBIDDEN_CALLS:
            self.refuse(node, f"`{name}` {FORBIDDEN_CALLS[name]}: an answer does not need it; write the code itself.")
        elif _DUNDER.match(name) or name.startswith("__"):
            self.refuse(node, f"`{name}` is Python's machinery: an answer does not need it.")
        elif name in CHECK_MODULES and isinstance(node.ctx, (ast.Store, ast.Del)):
            self.refuse(node, f"`{name}` is a name the set-up and check cells use: give your own value another name.")
        elif name in CHECK_MODULES and id(node) not in self.allowed_check_names:
            self.refuse(node, f"`{name}` is the checks' module: an answer cell may only call it as the check cell does "
                              f"(`{name}.check_...(your_function)` on a line of its own).")
        elif name == "type" and not self._type_question(node):
            self.refuse(node, "`type` other than as a question (type(x) is float, print(type(x))) can make classes the screen cannot "
                              "read: compare type(x) with a type, or use isinstance(x, kind).")
        elif isinstance(node.ctx, ast.Load) and not is_root:
            self._bare_name(node)
        elif isinstance(node.ctx, (ast.Store, ast.Del)) and self.depth == 0:
            self.bind(node, name)

    def _type_question(self, node: ast.Name) -> bool:
        """True for `type(x)` compared with something, formatted, or passed to print, str, repr, isinstance or issubclass.

        Anywhere else its result could be `type` itself (type(int)), which makes classes from strings.
        """
        call = self.parents.get(id(node))
        if not (isinstance(call, ast.Call) and call.func is node and len(call.args) == 1 and not call.keywords):
            return False
        outer = self.parents.get(id(call))
        if isinstance(outer, (ast.Compare, ast.FormattedValue)):
            return True
        return (isinstance(outer, ast.Call) and call in outer.args and isinstance(outer.func, ast.Name)
                and outer.func.id in ("print", "str", "repr", "isinstance", "issubclass"))

    def _bare_name(self, node: ast.Name) -> None:
        root = self._root(node.id) if node.id in self.bindings or node.id in allowed.CONVENTIONAL_ROOTS else None
        if root is None:
            return
        kind, what = root
        if kind == _LIBRARY:
            if str(what) in allowed.library():
                self.refuse(node, f"`{node.id}` is a module: use its functions (`{node.id}.function(...)`), do not pass it on.")
            elif not _library_allowed(str(what)):
                self.refuse(node, f"`{node.id}` is `{what}`, which is not among what an answer may use: use numpy, math, "
                                  "numba.cuda or cupy.")
            return
        if isinstance(what, types.ModuleType):
            self.refuse(node, f"`{node.id}` is one of the course's modules: call its functions (`{node.id}.function(...)`), do not "
                              "pass it on.")
        elif self._course_value_allowed(node, node.id, what):
            self._check_course_use(node, node.id, what)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        parent = self.parents.get(id(node))
        if not (isinstance(parent, ast.Attribute) and parent.value is node):  # the whole chain, once
            self._chain(node)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.refuse(node, f"an answer may not assign or delete attributes (`.{node.attr} = ...`): keep your values in "
                              "names and arrays of your own.")
        self.generic_visit(node)

    def _chain(self, node: ast.Attribute) -> None:
        """Check an attribute chain `root.a.b.c` as a whole: a library's or the course's by the tables, any other by its names."""
        parts: list[str] = []
        current: ast.AST = node
        while isinstance(current, ast.Attribute):
            parts.append(current.attr)
            current = current.value
        parts.reverse()
        root = self._root(current.id) if isinstance(current, ast.Name) and current.id not in CHECK_MODULES else None
        rest = parts
        if root is not None and root[0] == _LIBRARY:
            rest = self._library_chain(node, current.id, str(root[1]), parts)
        elif root is not None:
            rest = self._course_chain(node, current.id, root[1], parts)
        if rest is None:
            return
        self_root = isinstance(current, ast.Name) and current.id in ("self", "cls")
        for part in rest:
            if part.startswith("__"):
                self.refuse(node, f"`.{part}` is Python's machinery: an answer does not need it.")
            elif part.startswith("_") and not self_root:
                self.refuse(node, f"`.{part}` is private to its library: use its public functions.")
            elif part in FORBIDDEN_ATTRIBUTES:
                self.refuse(node, f"`.{part}` reaches frames, raw memory, files or a compiler's insides: an answer does not need it.")
            else:
                continue
            return

    def _library_chain(self, node: ast.Attribute, name: str, path: str, parts: list[str]) -> list[str] | None:
        """Walk a chain on a library module by the table; the attributes past its leaf (checked as any value's), or None."""
        table = allowed.library()
        if path not in table and not _library_allowed(path):
            self.refuse(node, f"`{name}` is `{path}`, which is not among what an answer may use: use numpy, math, numba.cuda or cupy.")
            return None
        text = name
        for number, part in enumerate(parts):
            if path not in table:
                return parts[number:]
            text += f".{part}"
            names = table[path]
            if part.startswith("_") or part not in names:
                self.refuse(node, f"`{text}` is not among what an answer may use of {_library_top(path)}: {_INSTEAD}")
                return None
            path = f"{path}.{part}"
            if path in allowed.MODULE_RESULTS:
                call = self.parents.get(id(node))
                if not (isinstance(call, ast.Call) and call.func is node and id(call) in self.module_results):
                    self.refuse(node, f"assign `{text}(...)` to a name of its own (`xp = {text}(...)`) and use that name.")
                    return None
        if path in table:  # the chain ends on a namespace: a module passed on
            self.refuse(node, f"`{text}` is a module: use its functions (`{text}.function(...)`), do not pass it on.")
            return None
        return []

    def _course_chain(self, node: ast.Attribute, name: str, value: object, parts: list[str]) -> list[str] | None:
        """Walk a chain on the course's modules: every object reached must be a helper of this notebook."""
        text = name
        if isinstance(value, types.ModuleType) and value.__name__.split(".")[1:2] in (["checks"], ["grading"], ["scripts"]):
            self.refuse(node, f"`{name}` is the course's own machinery (`{value.__name__}`): call only the helpers the exercise names.")
            return None
        for number, part in enumerate(parts):
            if not isinstance(value, types.ModuleType):
                return parts[number:]
            text += f".{part}"
            if part.startswith("_") or part in ("checks", "grading", "exercises", "scripts", "mode"):
                self.refuse(node, f"`{text}` is the course's own machinery: call only the helpers the exercise names.")
                return None
            found = getattr(value, part, _MISSING)
            if found is _MISSING:
                found = _course_object(f"{value.__name__}.{part}")
            if found is _MISSING:
                self.refuse(node, f"`{text}` is not among the course helpers this notebook's exercises use: write that part yourself.")
                return None
            value = found
            if not isinstance(value, types.ModuleType):
                if not self._course_value_allowed(node, text, value):
                    return None
                self._check_course_use(node, text, value)
        if isinstance(value, types.ModuleType):
            self.refuse(node, f"`{text}` is one of the course's modules: call its functions, do not pass it on.")
            return None
        return []

    def visit_Call(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            if keyword.arg == "allow_pickle":
                self.refuse(keyword.value, "loading pickles runs code the screen cannot read: an answer does not need it.")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(value, str) and "__" in value and _NAME_LIKE.fullmatch(value):
            self.refuse(node, "a name-like string holding `__` can name Python's machinery at run time: an answer does not need one.")
        elif isinstance(value, str) and "\u2705" in value:
            self.refuse(node, "a check mark (U+2705) is the checks' to print: let the check cell say whether the answer is right.")
        elif isinstance(value, str) and _PRIVATE_FIELD.search(value):
            self.refuse(node, "a format field that reads a private attribute (`{0._x}`) reaches another object's insides: format "
                              "plain values.")


def _chain(node: ast.AST) -> list | None:
    """[root Name, attr, attr...] of a plain attribute chain, or None."""
    parts: list = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node, *reversed(parts)]


def screen_tree(tree: ast.AST, names: Mapping[str, object] | None = None) -> list[Refusal]:
    """The refusals for a parsed cell (an `ast.Module`), in line order; `names`: the notebook's names (`course_names`, or IPython's)."""
    visitor = _Screen(tree, names)
    visitor.visit(tree)
    unique = {(refusal.line, refusal.message): refusal for refusal in visitor.refusals}
    return sorted(unique.values(), key=lambda refusal: refusal.line)


def _tree(source: str) -> ast.Module | None:
    """A cell's source parsed as Python, IPython's magics and shell commands as the get_ipython() calls they run; None if not Python."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # plain Python: magics stay syntax errors
        TransformerManager = None
    try:
        return ast.parse(TransformerManager().transform_cell(source) if TransformerManager else source)
    except SyntaxError:
        return None


def screen(source: str, names: Mapping[str, object] | None = None) -> list[Refusal]:
    """The refusals for one cell's source; [] if it may run. `names`: the notebook's names (`course_names`), which say its chapter.

    A cell that is not valid Python is not refused here: it cannot run, so Python's own SyntaxError says why.
    """
    tree = _tree(source)
    return screen_tree(tree, names) if tree else []


#: How many refusals a message lists (the first ones; fixing them shows the rest).
SHOWN_REFUSALS = 3


def refusal_message(refusals: list[Refusal]) -> str:
    """The words a refused cell shows: what the guard is, then the first refusals, each with its line."""
    more = f"\n  (and {len(refusals) - SHOWN_REFUSALS} more)" if len(refusals) > SHOWN_REFUSALS else ""
    return f"This cell was not run: the course's checks refuse code that could change them.\n{_shown(refusals)}{more}"


def _shown(refusals: list[Refusal]) -> str:
    """The first SHOWN_REFUSALS refusals, one a line, each with its line number."""
    return "\n".join(f"  - {refusal}" for refusal in refusals[:SHOWN_REFUSALS])


# ---------------------------------------------------------------------------------------------
# IPython


class ScreenCells(ast.NodeTransformer):
    """IPython AST transformer: a cell the screen refuses raises InputRejected before any of it runs."""

    def __init__(self, names: Mapping[str, object] | None = None) -> None:
        super().__init__()
        self.names = names  # the notebook's namespace: its imports say the chapter and what names stand for
        self.earlier: str | None = None  # a refusal of a cell run before the screen was installed: refuses the next cell

    def visit(self, node: ast.AST) -> ast.AST:
        from IPython.core.error import InputRejected

        if self.earlier:
            message, self.earlier = self.earlier, None
            raise InputRejected(message)
        try:
            refusals = screen_tree(node, self.names)
        except Exception as exc:  # noqa: BLE001 - IPython drops a transformer that raises anything else: refuse instead
            raise InputRejected("This cell was not run: the course's screen could not read it "
                                f"({type(exc).__name__}: {exc}); write it more plainly.") from exc
        if refusals:
            raise InputRejected(refusal_message(refusals))
        return node


def imports_check_module(source: str) -> bool:
    """True for an exercise notebook's set-up cell: one that imports a chapter check module (`from gpucourse.checks import ch1`)."""
    tree = _tree(source)
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, ast.ImportFrom) and node.module == "gpucourse.checks" and any(
                alias.name in CHECK_MODULES for alias in node.names):
            return True
        if isinstance(node, ast.Import) and any(alias.name.startswith("gpucourse.checks.ch") for alias in node.names):
            return True
    return False


def earlier_refusal(sources: list[str]) -> str | None:
    """The message for the first of these cells (run before the screen was installed) that the screen refuses, or None."""
    names = course_names([source for source in sources if source])
    for number, source in enumerate(sources):
        refusals = screen(source, names) if source and source.strip() else []
        if refusals:
            return (f"The checks were not loaded: cell [{number}], run before this one, holds code that could change them.\n"
                    + _shown(refusals)
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
    permitted = (ast.Expression, ast.Call, ast.Subscript, ast.Slice, ast.Tuple, ast.Load, ast.Name, ast.Constant)
    for node in ast.walk(tree):
        if not isinstance(node, permitted):
            return False
        if isinstance(node, ast.Name) and (node.id in _BUILTIN_NAMES or node.id.startswith("_")):
            return False
        if isinstance(node, ast.Constant) and not isinstance(node.value, int):
            return False
    return True


def guard_signature_strings() -> None:
    """Make Numba refuse a signature string that is not `safe_signature` (it evaluates them: a string could run any code)."""
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
