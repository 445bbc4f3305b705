"""Running a student's launcher on a framed output: guard bands sized from the launch, compile errors in words, and the
invariants every kernel exercise has (inputs left as they were, the work done by a kernel the answer wrote, no float64
argument).

`run_checked` first calls the launcher with every launch skipped, to learn its grid and block; sizes
the guard band around the output from them (at least a few blocks: an unchecked tail lands in it on
a GPU as in the simulator); reads the kernels' shared-array declarations (a computed shape compiles
in the simulator but not on a GPU: both modes say so before launching); then runs it for real with
poisoned shared memory (simulator), as many times as asked, and compares the runs bit for bit. Every array
and list input is copied before the call and compared after it (`input_changes`), on the device and the host; an answer
that launched no kernel of its own, or one with a float64 argument, is named (`kernel_launch_problems`,
`float64_argument_problems`). For a speed comparison, `host_round_trip_problems` names a copy to the host inside the call
to be timed (`gpucourse.checks.speed.skipped_work` says whether an answer still writes its output after the timing loop).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import mode
from ..arrays import poison_value, poisoned, to_device, to_host, unwritten_mask
from . import guard_value
from .guard import wait_for_gpu
from .launches import (
    RecordedLaunch,
    closure_values,
    compile_problem,
    dynamic_shared_problems,
    float64_argument_problems,
    float64_problem,
    guard_for,
    index_problem,
    kernel_launch_problems,
    kernel_parameter_names,
    kernels_of,
    python_function,
    recorded_launches,
    shared_declaration_problems,
    written_by_answer,
    written_outside_package,
)
from .remote import evidence
from .trace import poisoned_shared_memory


def race_repeats() -> int:
    """How many times a shared-memory exercise runs: 3 on a GPU, 2 in the simulator (its threads interleave differently each run)."""
    return 3 if mode.on_gpu() else 2


@dataclass
class Run:
    """What `run_checked` saw: the output (interior), the problems in words, the launches, the guard used, the inputs changed."""

    got: np.ndarray
    problems: list[str]
    launches: list[RecordedLaunch] = field(default_factory=list)
    guard: int = 0
    changed: list[str] = field(default_factory=list)  # the words for inputs changed in place (then also the only problems)

    @property
    def kernels(self) -> list[object]:
        """The distinct kernels launched."""
        return kernels_of(self.launches)


# ---------------------------------------------------------------------------------------------
# Inputs left as they were


@dataclass
class KeptInput:
    """An input an answer is given, and a copy of it taken before the call (a host array, or a deep copy of a list)."""

    name: str
    value: object
    before: object
    position: int = 0


def host_copy(value) -> np.ndarray | None:
    """A host copy of an array input (NumPy, Numba device, CuPy), or None for anything that is not an array."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if hasattr(value, "copy_to_host") or (hasattr(value, "__cuda_array_interface__") and hasattr(value, "get")):
        return np.array(to_host(value), copy=True)
    return None


def keep_inputs(names: Sequence[str], values: Sequence[object]) -> list[KeptInput]:
    """Copies of the array and list inputs among `values` (named `names`), to compare with after the call (`input_changes`)."""
    kept = []
    for position, (name, value) in enumerate(zip(names, values)):
        host = host_copy(value)
        if host is not None:
            if host.dtype.kind in "fiu" and host.size and unwritten_mask(host).all():
                continue  # poisoned all through: an output the check hands over to be written (the course's convention)
            kept.append(KeptInput(name, value, host, position))
        elif isinstance(value, (list, dict, set, bytearray)):
            kept.append(KeptInput(name, value, copy.deepcopy(value), position))
    return kept


def _changed_elements(before: np.ndarray, after: np.ndarray) -> int:
    if before.shape != after.shape or before.dtype != after.dtype:
        return max(before.size, 1)
    same = before == after
    if before.dtype.kind in "fc":
        same |= np.isnan(before) & np.isnan(after)
    return int(np.size(same) - np.count_nonzero(same))


def _same_item(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and _changed_elements(a, b) == 0
    try:
        return bool(a is b or a == b)
    except Exception:  # noqa: BLE001 - an item that cannot be compared: count it as changed
        return False


def input_changes(kept: Sequence[KeptInput], who: str, output: str = "out") -> list[str]:
    """Words for each input changed since `keep_inputs`: which one, and how many of its elements."""
    problems = []
    for item in kept:
        if isinstance(item.before, np.ndarray):
            after = host_copy(item.value)
            changed = _changed_elements(item.before, after)
            if changed:
                problems.append(f"{who} changed {item.name} in place at {changed} of {item.before.size} element(s): an input "
                                f"must be left as it was. Write the result to {output} only.")
        elif isinstance(item.before, list) and isinstance(item.value, list):
            before, after = item.before, item.value
            changed = sum(not _same_item(a, b) for a, b in zip(before, after)) + abs(len(before) - len(after))
            if changed:
                sizes = f" (it had {len(before)} items, now {len(after)})" if len(before) != len(after) else ""
                problems.append(f"{who} changed the list {item.name} it was given at {changed} item(s){sizes}: an input must be "
                                "left as it was. Work on a copy (list(...)) if you need to change one.")
        elif not _same_item(item.before, item.value):
            problems.append(f"{who} changed the {type(item.value).__name__} {item.name} it was given: an input must be left as "
                            "it was. Work on a copy if you need to change one.")
    return problems


@evidence
def _who(function: Callable[..., object]) -> str:
    """The answer's function by name: the launcher's own, or the answer's function a check's wrapper (a lambda) calls."""
    name = getattr(function, "__name__", "")
    if name and name.isidentifier():
        return name
    for value in _given_values(function):
        if callable(value) and written_by_answer(value):
            return getattr(python_function(value), "__name__", "your function")
    return "your function"


@evidence
def _parameters(function: Callable[..., object]) -> list[str]:
    try:
        return [p.name for p in inspect.signature(function).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def call_keeping_inputs(function: Callable[..., object], *args, names: Sequence[str] | None = None, output: str = "its result",
                        **kwargs) -> tuple[object, list[str]]:
    """Call `function(*args, **kwargs)` with the caller's own objects and say which inputs it changed: (result, problems).

    Pass the real object (not a copy) so that an answer that empties or rewrites what it was given is seen doing it.
    """
    names = list(names) if names is not None else _parameters(function)
    names += [f"argument {number + 1}" for number in range(len(names), len(args))]
    kept = keep_inputs(names, args)
    result = function(*args, **kwargs)
    return result, input_changes(kept, _who(function), output)


@evidence
def _input_names(launch: Callable[..., object], inputs: Sequence[object], launches: Sequence[RecordedLaunch]) -> list[str]:
    """Names for the inputs a check handed over: the launcher's parameter, else the kernel parameter it was passed as."""
    own = _parameters(launch)[1:]
    named_by_launcher = getattr(launch, "__name__", "<lambda>") != "<lambda>"
    names = []
    for position, value in enumerate(inputs):
        name = own[position] if named_by_launcher and position < len(own) else None
        for recorded in launches:
            if name:
                break
            parameters = kernel_parameter_names(recorded.kernel)
            for index, argument in enumerate(recorded.args):
                if argument is value and index < len(parameters):
                    name = parameters[index]
                    break
        names.append(name or (own[position] if position < len(own) else f"input {position + 1}"))
    return names


def _given_values(launch: Callable[..., object]) -> list[object]:
    """The values a check's own wrapper (a lambda written in the course's package) carries: its defaults and closure."""
    code = getattr(launch, "__code__", None)
    if code is None or written_outside_package(code):
        return []
    values = list(launch.__defaults__ or ()) + list((launch.__kwdefaults__ or {}).values()) + closure_values(launch)
    return values + [item for value in values if isinstance(value, tuple) for item in value]


@evidence
def _wide_launch_arguments(launches: Sequence[RecordedLaunch], inputs: Sequence[object], launch: Callable[..., object]) -> list[str]:
    """`float64_argument_problems` of a run, the values the check handed over (its inputs, its launcher's own) excepted."""
    return float64_argument_problems(launches, given=(*inputs, *_given_values(launch)))


# ---------------------------------------------------------------------------------------------
# Copies to the host inside a timed call


@contextlib.contextmanager
def counted_host_copies() -> Iterator[list[tuple[int, ...]]]:
    """Record the shape of every Numba device array (simulated or real) copied to the host inside the block."""
    if mode.is_simulator():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as DeviceArray
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase as DeviceArray
    copies: list[tuple[int, ...]] = []
    original = DeviceArray.copy_to_host

    def copy_to_host(self, *args, **kwargs):
        copies.append(tuple(self.shape))
        return original(self, *args, **kwargs)

    DeviceArray.copy_to_host = copy_to_host
    try:
        yield copies
    finally:
        DeviceArray.copy_to_host = original


def host_round_trip_problems(call: Callable[[], object], what: str) -> list[str]:
    """Run `call()` once, as a timing loop would, and name any device array it copies to the host (a round trip is timed
    instead of the kernel). Call it before timing `call`."""
    with counted_host_copies() as copies:
        call()
    if mode.on_gpu():
        wait_for_gpu(f"{what}, called once before its timing")
    if not copies:
        return []
    shapes = ", ".join(str(shape[0] if len(shape) == 1 else shape) for shape in copies[:3])
    return [f"{what} copies {len(copies)} device array(s) to the host on every call (of {shapes} elements): the time measured "
            "is then mostly the trip over the bus, not the kernel. Keep the data on the device between the kernels."]


#: float64 arguments seen by `run_checked` since the check began: judged with the trace's float64 evidence
#: (`gpucourse.checks.evidence.float64_problems`), after it, so that a line of float64 arithmetic is named first.
_FLOAT64_ARGUMENTS: list[str] = []


def float64_arguments_seen(clear: bool = False) -> list[str]:
    """Words for the float64 arguments of the answer's kernels launched by `run_checked` since the check began (or `clear`)."""
    seen = list(_FLOAT64_ARGUMENTS)
    if clear:
        _FLOAT64_ARGUMENTS.clear()
    return seen


BOUNDS_HINT = "Threads past the end must not write: add a bounds check such as `if i < out.size:`."


def _launched(launches: list[RecordedLaunch]) -> str:
    """The launches made, as a student wrote them: `kernel[blocks, threads]`."""
    def dims(values: tuple[int, ...]) -> str:
        values = tuple(values)
        while len(values) > 1 and values[-1] == 1:
            values = values[:-1]
        return str(values[0]) if len(values) == 1 else str(values)

    named = [f"{launch.name}[{dims(launch.blocks)}, {dims(launch.threads)}]" for launch in launches[-2:]]
    return ("the kernel " + " then ".join(named)) if named else "your launcher's work"


def _framed(out_shape, dtype, guard: int, initial):
    padded_shape = tuple(n + 2 * guard for n in out_shape)
    host = np.full(padded_shape, guard_value(dtype), dtype=dtype)
    interior = tuple(slice(guard, guard + n) for n in out_shape)
    host[interior] = poison_value(dtype) if initial is None else initial
    return to_device(host), interior, padded_shape


def run_checked(launch: Callable[..., object], out_shape: tuple[int, ...], dtype, *inputs, guard: int | None = None,
                initial: np.ndarray | None = None, repeats: int = 1, float32_kernel: bool | None = None,
                kernel_required: bool = True, input_names: Sequence[str] | None = None) -> Run:
    """Run `launch(out, *inputs)` on a device output framed by guard cells sized from its launch; say what went wrong.

    The output handed to the student is a view into a larger buffer whose frame holds a guard value:
    a write past its end lands there (on a GPU) or raises IndexError (in the simulator); both are
    reported. The interior starts poisoned, or as `initial` for kernels that update in place. With
    `repeats` > 1 the launch runs again on a fresh output and the results must agree bit for bit. On a
    GPU, float64 arithmetic in a float32 kernel's compiled code is printed as advice, not counted as a
    problem (`float32_kernel`: default, dtype is float32): the verdict's float64 evidence is the trace's,
    the same in both modes.

    The invariants of every kernel exercise come with it: each array or list in `inputs` must be unchanged after the
    call (named `input_names`, else after the launcher's or the kernel's parameters); unless `kernel_required` is False
    (an exercise that may use library calls), a kernel written by the answer must have been launched. A float64 argument
    of the answer's kernels, when the output is float32 or complex64 (values the check passed excepted), is kept for the
    check's float64 verdict (`float64_arguments_seen`, judged by `evidence.float64_problems` after the trace's evidence).
    """
    dtype = np.dtype(dtype)
    out_shape = tuple(out_shape)
    float32_kernel = dtype == np.float32 if float32_kernel is None else float32_kernel
    launches: list[RecordedLaunch] = []
    kept = keep_inputs([f"input {number + 1}" for number in range(len(inputs))], inputs)
    if guard is None:
        probe = to_device(poisoned(out_shape, dtype))
        try:
            with recorded_launches(dry=True) as launches:
                launch(probe, *inputs)
        except NotImplementedError:
            raise  # an unfinished exercise: its hint is the message
        except Exception:  # noqa: BLE001 - the real run below reports it in words
            launches = []
        guard = guard_for(launches, out_shape)
        declared = shared_declaration_problems(kernels_of(launches)) + dynamic_shared_problems(launches)
        if declared:  # on a GPU the kernel would not even compile: say why before launching it
            return Run(poisoned(out_shape, dtype), declared, launches, guard)
    results = []
    problems: list[str] = []
    for _ in range(max(1, repeats)):
        buffer, interior, padded_shape = _framed(out_shape, dtype, guard, initial)
        out = buffer[interior]
        try:
            with recorded_launches() as launches, poisoned_shared_memory():
                launch(out, *inputs)
            if mode.on_gpu():  # poll, not a blocking synchronize: a kernel that never ends gets a message, not a hang
                wait_for_gpu(_launched(launches))
        except IndexError as exc:
            return Run(poisoned(out_shape, dtype), [index_problem(exc, BOUNDS_HINT)], launches, guard)
        except Exception as exc:
            message = compile_problem(exc)
            if message is None:
                raise
            return Run(poisoned(out_shape, dtype), [message], launches, guard)
        host = to_host(buffer)
        if kept:  # an input changed in place: that is the cause, whatever the output holds (a second run would differ)
            names = list(input_names) if input_names is not None else _input_names(launch, inputs, launches)
            for item in kept:
                item.name = names[item.position]
            changed = input_changes(kept, _who(launch))
            if changed:
                return Run(host[interior], changed, launches, guard, changed)
        frame = np.ones(padded_shape, dtype=bool)
        frame[interior] = False
        touched = frame & (host != guard_value(dtype))
        if touched.any() and not problems:
            problems.append(f"the kernel wrote {int(touched.sum())} element(s) outside the output array. {BOUNDS_HINT}")
        results.append(host[interior])
    got = results[0]
    for number, other in enumerate(results[1:], start=2):
        same = (got == other) | (np.isnan(got) & np.isnan(other)) if got.dtype.kind in "fc" else got == other
        differ = ~same
        if differ.any():
            first = tuple(int(i) for i in np.argwhere(differ)[0])
            problems.append(
                f"run {number} gave other values than run 1 at {int(differ.sum())} element(s) (first at {first[0] if len(first) == 1 else first}): "
                "the same kernel on the same data must give the same result. Threads that read shared memory another thread "
                "writes need a cuda.syncthreads() between the write and the read.")
            break
    if kernel_required and not problems:
        problems += kernel_launch_problems(launches, _who(launch))
    if not problems and dtype in (np.dtype(np.float32), np.dtype(np.complex64)):
        for message in _wide_launch_arguments(launches, inputs, launch):
            if message not in _FLOAT64_ARGUMENTS:
                _FLOAT64_ARGUMENTS.append(message)
    if float32_kernel and mode.on_gpu() and not problems:
        message = float64_problem(launches)
        if message:  # advice, not a verdict: the simulator cannot read compiled code, and both modes must agree
            print(f"\u26a0 {message}")
    return Run(got, problems, launches, guard)
