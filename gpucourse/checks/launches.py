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
from dataclasses import dataclass

from .. import mode
from .remote import remote_facts


@dataclass(frozen=True)
class RecordedLaunch:
    """One launch seen by `recorded_launches`: the kernel object, its grid and its block (3 dimensions each)."""

    kernel: object
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]

    @property
    def name(self) -> str:
        """The kernel's Python name."""
        function = getattr(self.kernel, "py_func", None) or getattr(self.kernel, "fn", None) or self.kernel
        return getattr(function, "__name__", "kernel")

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
            launches.append(RecordedLaunch(self, _dims3(grid), _dims3(block)))
            return None if dry else original(self, *args)

        simulated.FakeCUDAKernel.__call__ = call
        restore.append(lambda: setattr(simulated.FakeCUDAKernel, "__call__", original))
    else:
        from numba.cuda import dispatcher

        original = dispatcher._LaunchConfiguration.__call__

        def call(self, *args):
            launches.append(RecordedLaunch(self.dispatcher, _dims3(self.griddim), _dims3(self.blockdim)))
            return None if dry else original(self, *args)

        original_bound = BoundKernel.launch

        def bound(self, handle: int = 0):
            launches.append(RecordedLaunch(self.kernel, self.blocks, self.threads))
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


def shared_array_declarations(kernel) -> list[tuple[tuple[int, ...], bool]]:
    """Each shared array a kernel declares: (shape, computed) read from its source; `computed` if the shape is arithmetic."""
    facts = remote_facts(kernel)
    if facts is not None:  # a kernel of the grading run, known to the grader by what that run read of it
        return [(tuple(shape), computed) for shape, computed in facts["shared"]]
    function = python_function(kernel)
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as exc:
        raise ValueError(f"cannot read the source of {function!r}: {exc}") from None
    names = dict(function.__globals__)
    names.update(inspect.getclosurevars(function).nonlocals)
    shapes = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "array"):
            continue
        owner = node.func.value
        if not (isinstance(owner, ast.Attribute) and owner.attr == "shared"):
            continue
        shape_node = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "shape"), None)
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
