"""What a student's launcher launches, and what the compiler made of it, in both modes.

* `recorded_launches()` records each kernel launch made inside it (kernel, grid, block), and with
  `dry=True` skips them: a check can learn the launch before it runs it, and size the guard band
  around the output from it (`guard_for`).
* `compile_problem()` turns the errors Numba raises when a kernel does not compile on a GPU into a
  message that says what to change; `shared_declaration_problems()` finds, in the source, the one
  the simulator cannot see (a shared array whose shape is an expression).
* `float64_instructions()` finds float64 arithmetic in the LLVM IR Numba made of a compiled kernel
  (GPU only: advice printed beside the verdict; the verdict's own float64 evidence comes from the
  trace, `gpucourse.checks.trace`, which runs in the simulator in both modes).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import math
import re
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import mode
from . import PACKAGE_DIR  # the course's package: a kernel written there is the course's, not the answer's
from .remote import evidence, remote_facts


@dataclass(frozen=True)
class RecordedLaunch:
    """One launch seen by `recorded_launches`: the kernel object, its grid and its block (3 dimensions each)."""

    kernel: object
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]
    args: tuple = field(default=(), compare=False, repr=False)  # the arguments it was launched with (empty for a bound launch)
    shared_bytes: int = field(default=0, compare=False)  # dynamic shared memory asked for at the launch (bytes)

    @property
    def name(self) -> str:
        """The kernel's Python name."""
        return getattr(python_function(self.kernel), "__name__", "kernel")

    @property
    def extent(self) -> tuple[int, int, int]:
        """Threads along x, y and z in the whole grid."""
        return tuple(b * t for b, t in zip(self.blocks, self.threads))


def _dims3(value) -> tuple[int, int, int]:
    dims = (int(value),) if isinstance(value, int) or hasattr(value, "__index__") else tuple(int(v) for v in value)
    return dims + (1,) * (3 - len(dims))


@contextlib.contextmanager
def recorded_launches(dry: bool = False) -> Iterator[list[RecordedLaunch]]:
    """Record every Numba kernel launch made inside the block (kernel, grid, block); with `dry`, launch nothing."""
    from ..launch import BoundKernel

    launches: list[RecordedLaunch] = []
    restore = []
    if mode.is_simulator():
        from numba.cuda.simulator import kernel as simulated

        original = simulated.FakeCUDAKernel.__call__

        def call(self, *args):
            if self._device or simulated._kernel_context:
                return original(self, *args)
            grid, block = simulated.normalize_kernel_dimensions(self.grid_dim, self.block_dim)
            launches.append(RecordedLaunch(self, _dims3(grid), _dims3(block), args, int(self.dynshared_size or 0)))
            return None if dry else original(self, *args)

        simulated.FakeCUDAKernel.__call__ = call
        restore.append(lambda: setattr(simulated.FakeCUDAKernel, "__call__", original))
    else:
        from numba.cuda import dispatcher

        original = dispatcher._LaunchConfiguration.__call__

        def call(self, *args):
            if _numba_internal(self.dispatcher):  # Numba's own kernels (a strided copy's): part of a copy, as in the simulator
                return original(self, *args)
            launches.append(RecordedLaunch(self.dispatcher, _dims3(self.griddim), _dims3(self.blockdim), args, int(self.sharedmem or 0)))
            return None if dry else original(self, *args)

        original_bound = BoundKernel.launch

        def bound(self, handle: int = 0):
            launches.append(RecordedLaunch(self.kernel, self.blocks, self.threads, (), self.shared_bytes))
            return None if dry else original_bound(self, handle)

        dispatcher._LaunchConfiguration.__call__ = call
        BoundKernel.launch = bound
        restore.append(lambda: setattr(dispatcher._LaunchConfiguration, "__call__", original))
        restore.append(lambda: setattr(BoundKernel, "launch", original_bound))
    _open.append((launches, dry))
    try:
        yield launches
    finally:
        del _open[next(i for i, (opened, _) in enumerate(_open) if opened is launches)]  # by identity: lists alike compare equal
        for undo in restore:
            undo()


# The recorders open now: the grader of `gpucourse.checks.remote` hands them the launches replayed from the grading run.
_open: list[tuple[list[RecordedLaunch], bool]] = []


def open_recorders(with_dry: bool = False) -> list:
    """The lists of the `recorded_launches` blocks open now, in the order they opened (with `with_dry`: (list, dry) pairs)."""
    return list(_open) if with_dry else [launches for launches, _ in _open]


#: Guard bands are at least this many of the launch's largest block dimension wide.
GUARD_BLOCKS = 4
#: ...and at least this many elements (a launch whose blocks are tiny still gets a real band).
GUARD_MIN = 64
#: In the simulator an index past the end raises IndexError anyway: a small band is enough.
SIMULATOR_GUARD = 16


def guard_for(launches: Sequence[RecordedLaunch], shape: tuple[int, ...]) -> int:
    """Guard band (elements on each side of each axis) wide enough for any thread of these launches to land in it.

    A thread past the end of an axis writes at most (grid extent - axis length) elements past it; the
    band is that, and at least GUARD_BLOCKS blocks, so that an unchecked tail always lands in it.
    """
    if not launches:
        guard = GUARD_BLOCKS * 256
    else:
        shortest = min(shape) if shape else 1
        overshoot = max(max(launch.extent) - shortest for launch in launches)
        blocks = GUARD_BLOCKS * max(max(launch.threads) for launch in launches)
        guard = max(overshoot, blocks, GUARD_MIN)
    if mode.is_simulator():
        return min(guard, SIMULATOR_GUARD)
    size = math.prod(shape) if shape else 1
    # Keep the framed buffer within ~64x the output (or 64 Mi elements): a band that wide catches any tail.
    while guard > GUARD_MIN and math.prod(n + 2 * guard for n in shape) > max(64 * size, 1 << 26):
        guard //= 2
    return guard


# ---------------------------------------------------------------------------------------------
# Compile errors and shared-array declarations


def python_function(kernel):
    """The Python function behind a Numba kernel (GPU or simulated), or the object itself."""
    return getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel


def closure_values(function) -> list[object]:
    """The values a Python function's closure holds, in order (empty cells left out)."""
    values = []
    for cell in getattr(function, "__closure__", None) or ():
        with contextlib.suppress(ValueError):  # an empty cell: a name not bound yet
            values.append(cell.cell_contents)
    return values


def _shared_array_calls(function) -> tuple[list[tuple[ast.expr | None, ast.expr | None]], dict[str, object]]:
    """The (shape, dtype) expressions of each `cuda.shared.array` call in a function's source (None where not given), and
    the names they may use (its globals and closure). Raises OSError or TypeError without source, SyntaxError."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    names = dict(getattr(function, "__globals__", {}))
    with contextlib.suppress(TypeError, ValueError):
        names.update(inspect.getclosurevars(function).nonlocals)
    calls = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "array"
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "shared"):
            given = {k.arg: k.value for k in node.keywords}
            calls.append((node.args[0] if node.args else given.get("shape"), node.args[1] if len(node.args) > 1 else given.get("dtype")))
    return calls, names


def shared_array_declarations(kernel) -> list[tuple[tuple[int, ...], bool]]:
    """Each shared array a kernel declares: (shape, computed) read from its source; `computed` if the shape is arithmetic."""
    facts = remote_facts(kernel)
    if facts is not None:  # a kernel of the grading run, known to the grader by what that run read of it
        return [(tuple(shape), computed) for shape, computed in facts["shared"]]
    function = python_function(kernel)
    try:
        calls, names = _shared_array_calls(function)
    except (OSError, TypeError) as exc:
        raise ValueError(f"cannot read the source of {function!r}: {exc}") from None
    shapes = []
    for shape_node, _ in calls:
        if shape_node is None:
            continue
        value = eval(compile(ast.Expression(shape_node), "<shape>", "eval"), names)  # constants only, as Numba demands
        computed = any(isinstance(part, (ast.BinOp, ast.Call, ast.UnaryOp)) for part in ast.walk(shape_node))
        shapes.append((tuple(int(v) for v in (value if isinstance(value, (tuple, list)) else (value,))), computed))
    return shapes


def computed_shape_message(shape: tuple[int, ...]) -> str:
    """What to change when a shared array's shape is an expression."""
    return (f"the shared array's shape {shape} is computed inside the kernel (an expression such as TILE + 1). The simulator "
            "accepts that, but Numba on a GPU needs a shared array's shape to be a constant it can see: compute it outside "
            "the kernel, e.g. TILE_SHAPE = (32, 32 + 1) at the top level, and write cuda.shared.array(TILE_SHAPE, float32).")


def shared_declaration_problems(kernels: Sequence[object]) -> list[str]:
    """Shared arrays declared with a computed shape, in any of these kernels (the same verdict in both modes)."""
    problems = []
    for kernel in kernels:
        try:
            declarations = shared_array_declarations(kernel)
        except Exception:  # no source (a kernel made elsewhere): nothing to read
            continue
        problems += [computed_shape_message(shape) for shape, computed in declarations if computed]
    return problems


def dynamic_shared_itemsizes(kernel) -> list[int]:
    """The item size (bytes) of each dynamic shared array (shape 0) a kernel declares, read from its source."""
    try:
        calls, names = _shared_array_calls(python_function(kernel))
    except (OSError, TypeError, SyntaxError):
        return []
    sizes = []
    for shape, dtype in calls:
        if not (isinstance(shape, ast.Constant) and shape.value == 0) or dtype is None:
            continue
        try:
            value = eval(compile(ast.Expression(dtype), "<dtype>", "eval"), names)  # a type name, as Numba demands
            sizes.append(np.dtype(str(value) if not isinstance(value, (type, np.dtype, str)) else value).itemsize)
        except Exception:  # noqa: BLE001 - a type we cannot read: nothing to say about it
            continue
    return sizes


@evidence
def dynamic_shared_problems(launches: Sequence[RecordedLaunch]) -> list[str]:
    """Dynamic shared memory asked for in elements, not bytes: one byte per thread of the block for an array of wider items."""
    for launch in launches:
        threads = math.prod(launch.threads)
        if not launch.shared_bytes or not written_by_answer(launch.kernel):
            continue
        for itemsize in dynamic_shared_itemsizes(launch.kernel):
            if itemsize > 1 and launch.shared_bytes == threads:
                return [f"{launch.name} is launched with {launch.shared_bytes} bytes of dynamic shared memory for its blocks of "
                        f"{threads} threads, one byte each: the launch's fourth value is a size in bytes, not in elements. An array "
                        f"of {threads} items of {itemsize} bytes needs {itemsize * threads}: kernel[blocks, threads, 0, "
                        f"{itemsize} * threads]."]
    return []


def compile_problem(error: BaseException) -> str | None:
    """Words for a Numba compile error (None if `error` is not one)."""
    try:
        from numba.core import errors
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    if not isinstance(error, errors.NumbaError):
        return None
    text = str(error)
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    if "shared" in text and "array" in text and ("shape" in text.lower() or "literal" in text.lower() or "constant" in text.lower()):
        return ("Numba could not compile the kernel: a shared array's shape must be a constant it can see (a number, a tuple "
                "of numbers, or a global name holding one). Compute the shape at the top level, e.g. TILE_SHAPE = (32, 32 + 1), "
                f"and write cuda.shared.array(TILE_SHAPE, float32). (Numba said: {first})")
    return (f"Numba could not compile the kernel: {first}. Read the message for the line and the types involved: a kernel "
            "may use only NumPy-style numbers and arrays, math functions and the cuda module.")


_SIMULATED_THREAD = re.compile(r"^tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]:\s*")


def index_problem(error: IndexError, hint: str) -> str:
    """Words for an index past an array's end that the simulator caught: which thread of which block, then `hint`."""
    text = str(error)
    found = _SIMULATED_THREAD.match(text)
    if found:
        thread, block = [int(v) for v in found.groups()[:3]], [int(v) for v in found.groups()[3:]]
        who = (f"thread {thread[0]} of block {block[0]}" if thread[1:] == [0, 0] and block[1:] == [0, 0]
               else f"thread {tuple(thread)} of block {tuple(block)}")
        text = f"{who}: {text[found.end():]}"
    return f"the kernel indexed outside an array ({text}). {hint}"


# ---------------------------------------------------------------------------------------------
# float64 in the compiled code

#: float64 arithmetic, widening and double-returning calls in Numba's LLVM IR. The IR is read before
#: libdevice is linked in, so a float32 math.sin (a call of __nv_sinf) does not count, although the
#: PTX of its slow argument reduction holds float64 instructions.
_FLOAT64_IR = re.compile(r"=\s*(?:f(?:add|sub|mul|div|rem|neg)\b(?:\s+\w+)*\s+double\b|fpext\s+float\b.*\bto\s+double\b"
                         r"|[su]itofp\s+i\d+\b.*\bto\s+double\b|(?:tail\s+)?call\s+(?:\w+\s+)*double\s+@)")


def float64_instructions(kernel) -> list[str]:
    """The float64 arithmetic in the LLVM IR of every compiled version of `kernel`, one line each (GPU only)."""
    facts = remote_facts(kernel)
    if facts is not None:
        return list(facts["float64"])
    if mode.is_simulator():
        return []
    found = []
    for _, compiled in getattr(kernel, "overloads", {}).items():
        try:
            ir = compiled.inspect_llvm()
        except (AttributeError, NotImplementedError):  # a kernel type without Numba's IR: nothing to read
            continue
        for line in ir.splitlines():
            if _FLOAT64_IR.search(line):
                found.append(line.strip())
    return found


def float64_problem(launches: Sequence[RecordedLaunch]) -> str | None:
    """On a GPU, words for float64 arithmetic in the kernels launched (None if none, and always in the simulator)."""
    from .trace import float64_advice

    for launch in launches:
        instructions = float64_instructions(launch.kernel)
        if instructions:
            shown = "; ".join(instructions[:3])
            return float64_advice(f"the compiled {launch.name} holds {len(instructions)} float64 operation(s) ({shown})")
    return None


def kernels_of(launches: Sequence[RecordedLaunch]) -> list[object]:
    """The distinct kernels of a list of launches, in order."""
    seen, kernels = set(), []
    for launch in launches:
        if id(launch.kernel) not in seen:
            seen.add(id(launch.kernel))
            kernels.append(launch.kernel)
    return kernels


# ---------------------------------------------------------------------------------------------
# Whose kernels did the work


def written_outside_package(code) -> bool:
    """Whether a code object was written outside the course's package (a notebook cell, `__main__`, a test module)."""
    if code.co_filename.startswith("<"):  # <ipython-input-...>, <string>: code typed in a cell or given to exec
        return True
    return not Path(code.co_filename).resolve().is_relative_to(PACKAGE_DIR)


def _numba_internal(kernel) -> bool:
    """Whether a kernel is one of Numba's own (the kernel a strided device-array copy launches on a GPU; the simulator copies
    without one): not the answer's work, and not recorded."""
    import numba.cuda

    code = getattr(python_function(kernel), "__code__", None)
    where = Path(numba.cuda.__file__).resolve().parents[1]  # numba-cuda's `numba` folder (numba_cuda/numba)
    return code is not None and not code.co_filename.startswith("<") and Path(code.co_filename).resolve().is_relative_to(where)


@evidence
def written_by_answer(kernel) -> bool:
    """Whether a kernel's work is the answer's: its Python function, or a device function it closes over (a check that wraps
    an answer's device function in a kernel of its own), was written outside the course's package (a notebook cell,
    `__main__`, a test module)."""
    function = python_function(kernel)
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    if written_outside_package(code):
        return True
    for value in closure_values(function):
        inner = getattr(python_function(value), "__code__", None)
        if inner is not None and written_outside_package(inner):
            return True
    return False


def kernel_launch_problems(launches: Sequence[RecordedLaunch], what: str = "your function") -> list[str]:
    """Words for work not done by a kernel the answer wrote and launched: no launch at all, or only the course's kernels."""
    if not launches:
        return [f"no kernel was launched: {what} must do its work on the GPU, in a @cuda.jit kernel of its own launched as "
                "kernel[blocks, threads](...). Computing with NumPy on the host and copying the result to the device is not "
                "the exercise."]
    if not any(written_by_answer(launch.kernel) for launch in launches):
        names = ", ".join(dict.fromkeys(launch.name for launch in launches))
        return [f"{what} launched only the course's own kernels ({names}): write the kernel yourself, with @cuda.jit, and "
                "launch it."]
    return []


# ---------------------------------------------------------------------------------------------
# float64 in what is compiled: kernel arguments, ufunc signatures, CuPy kernels' C source

_WIDE_DTYPES = (np.dtype(np.float64), np.dtype(np.complex128))


def _wide_argument(value) -> str | None:
    """What makes an argument a float64 parameter, in words (None if it does not)."""
    if type(value) in (float, np.float64):
        return f"the Python float {float(value)!r}"
    if type(value) in (complex, np.complex128):
        return f"the Python complex {complex(value)!r}"
    dtype = getattr(value, "dtype", None)
    if dtype is not None and np.dtype(dtype) in _WIDE_DTYPES and hasattr(value, "shape"):
        if getattr(value, "ndim", 1):
            return f"an array of {np.dtype(dtype)}"
        return f"the {np.dtype(dtype)} value {np.asarray(value).item()!r} (what a Python number becomes)"
    return None


def kernel_parameter_names(kernel) -> list[str]:
    """The names of a kernel's parameters, in order (empty if its Python function cannot be read)."""
    code = getattr(python_function(kernel), "__code__", None)
    return list(code.co_varnames[:code.co_argcount]) if code is not None else []


@evidence
def float64_argument_problems(launches: Sequence[RecordedLaunch], given: Sequence[object] = ()) -> list[str]:
    """Words for a float64 (or complex128) argument of an answer's kernel launch: Numba compiles that parameter, and the
    arithmetic with it, in float64. Values in `given` (objects the check itself handed over) are the exercise's, not counted."""
    given_ids = {id(value) for value in given}
    for launch in launches:
        if not written_by_answer(launch.kernel):
            continue
        names = kernel_parameter_names(launch.kernel)
        for position, value in enumerate(launch.args):
            wide = None if id(value) in given_ids else _wide_argument(value)
            if wide:
                name = names[position] if position < len(names) else f"argument {position + 1}"
                return [f"{launch.name} was launched with {wide} as `{name}`: Numba compiles that parameter as float64, and "
                        "the arithmetic that uses it in float64 (slow on most GPUs). Pass numpy.float32(value) "
                        "(numpy.complex64 for a complex), or a float32 array."]
    return []


#: A float literal with no f suffix in C (1.0, .5, 2e3): a double, which makes the arithmetic around it double.
_C_DOUBLE_LITERAL = re.compile(r"(?<![\w.])(?:\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?![\w.])")
_C_DOUBLE_TYPE = re.compile(r"\b(?:double|float64|complex128|complex<double>)\b")


def c_float64_problems(source: str, what: str) -> list[str]:
    """Words for double arithmetic in a CUDA C fragment (a CuPy kernel's parameters, operation or code): the type, or a literal."""
    typed = _C_DOUBLE_TYPE.search(source)
    if typed:
        return [f"{what} uses `{typed.group(0)}`: that is float64 arithmetic on the GPU. Use float (float32) throughout."]
    literal = _C_DOUBLE_LITERAL.search(source)
    if literal:
        number = literal.group(0)
        return [f"{what} holds the literal {number}, a double in C: the arithmetic around it is done in float64. Write "
                f"{number.rstrip('.') + ('.0' if number.endswith('.') else '')}f (a float literal)."]
    return []


#: The attributes of CuPy's kernel objects that hold C source (ElementwiseKernel, ReductionKernel, RawKernel, RawModule).
_CUPY_SOURCE_ATTRIBUTES = ("in_params", "out_params", "operation", "map_expr", "reduce_expr", "post_map_expr", "identity",
                           "preamble", "code")


def cupy_kernel_float64_problems(kernel) -> list[str]:
    """Words for double arithmetic in a CuPy kernel object's C source (its parameters, operation, expressions or code)."""
    name = getattr(kernel, "name", None) or type(kernel).__name__
    for attribute in _CUPY_SOURCE_ATTRIBUTES:
        text = getattr(kernel, attribute, None)
        if isinstance(text, str) and text:
            found = c_float64_problems(text, f"the {attribute} of the CuPy kernel {name}")
            if found:
                return found
    return []


_WIDE_SIGNATURE = re.compile(r"\b(?:float64|f8|double|complex128|c16)\b")
_UFUNC_MAKERS = {"vectorize", "guvectorize", "jit"}
_CUPY_MAKERS = {"ElementwiseKernel", "ReductionKernel", "RawKernel", "RawModule"}


def _called_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _strings(node: ast.AST, names: dict) -> Iterator[str]:
    """The string constants an expression holds, with names of module-level strings looked up."""
    for part in ast.walk(node):
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            yield part.value
        elif isinstance(part, ast.Name) and isinstance(names.get(part.id), str):
            yield names[part.id]


@evidence
def maker_float64_problems(*makers) -> list[str]:
    """Words for float64 in the kernels these functions make, read from their source (the same in both modes): a float64
    type in a numba.vectorize / guvectorize / cuda.jit signature, double arithmetic in a CuPy kernel's C source."""
    problems: list[str] = []
    for maker in makers:
        function = python_function(maker)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        except (OSError, TypeError, SyntaxError):  # no source: nothing to read (the GPU run still judges the kernel made)
            continue
        names = dict(getattr(function, "__globals__", {}))
        with contextlib.suppress(TypeError, ValueError):
            names.update(inspect.getclosurevars(function).nonlocals)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            called = _called_name(node)
            parts = [*node.args, *(keyword.value for keyword in node.keywords)]
            if called in _UFUNC_MAKERS:
                for part in parts:
                    typed = next((s for s in _strings(part, names) if _WIDE_SIGNATURE.search(s)), None)
                    typed = typed or next((p.id if isinstance(p, ast.Name) else p.attr for p in ast.walk(part)
                                           if isinstance(p, (ast.Name, ast.Attribute))
                                           and _WIDE_SIGNATURE.fullmatch(p.id if isinstance(p, ast.Name) else p.attr)), None)
                    if typed:
                        problems.append(f"{function.__name__} compiles with the signature {typed!r}: float64. Write the "
                                        "signature in float32, e.g. \"float32(float32, float32)\".")
                        break
            elif called in _CUPY_MAKERS:
                for part in parts:
                    found = next((c_float64_problems(s, f"the C source of the {called} that {function.__name__} makes")
                                  for s in _strings(part, names) if c_float64_problems(s, "")), None)
                    if found:
                        problems += found
                        break
    return list(dict.fromkeys(problems))
