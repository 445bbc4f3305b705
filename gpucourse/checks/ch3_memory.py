"""Checks for the chapter 3 memory exercises (solutions/ch03_memory.ipynb).

Right values are checked as everywhere (poisoned outputs, guard cells, a NumPy reference). What
makes these exercises different is *how* memory is touched, which the values do not show. In the
simulator every CUDA thread is a Python thread, so a check can watch which thread touches which
element: `trace_accesses` records them, and the checks count the 32-byte sectors a warp's request
needs (coalescing) or the passes a shared-memory request needs (bank conflicts). On a GPU nothing
can be watched from Python, and timing cannot tell a conflict that other work hides, so
`replayed_accesses` runs the student's code once more, on small data, in a simulator subprocess
(its compiled Python code is sent there with the globals it uses) and traces it there. Overlap
of copies and kernels exists only on a GPU, so exercise 3.4 times it there.
"""

from __future__ import annotations

import contextlib
import json
import marshal
import os
import pickle
import subprocess
import sys
import threading
import types
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from .. import mode
from ..arrays import random_array, to_device, to_host
from ..sizes import problem_size
from ..timing import benchmark
from . import array_problems, fail, passed, run_guarded

# ---------------------------------------------------------------------------------------------
# Watching memory accesses in the simulator.


@dataclass(frozen=True)
class Access:
    """One element access by one simulated thread: which array, which thread, which element, read or write."""

    array: str
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    block_dim: tuple[int, int, int]
    element: int
    write: bool
    sequence: int  # the how-many-th access of this thread to this array


class _AccessLog:
    def __init__(self) -> None:
        self.entries: list[tuple] = []
        self.lock = threading.Lock()

    def add(self, array: str, index, shape, write: bool) -> None:
        thread = threading.current_thread()
        if not hasattr(thread, "threadIdx"):  # host code (filling, copying back) is not a CUDA thread
            return
        if isinstance(index, tuple):
            element = int(np.ravel_multi_index(tuple(int(i) for i in index), shape)) if len(shape) == len(index) else -1
        else:
            element = int(index)
        block_dim = tuple(thread._manager._block_dim) if hasattr(thread, "_manager") else (0, 0, 0)
        with self.lock:
            self.entries.append((array, tuple(thread.blockIdx), tuple(thread.threadIdx), block_dim, element, write))

    def accesses(self) -> list[Access]:
        counters: dict[tuple, int] = defaultdict(int)
        result = []
        for array, block, thread, block_dim, element, write in self.entries:
            key = (array, block, thread, write)
            result.append(Access(array, block, thread, block_dim, element, write, counters[key]))
            counters[key] += 1
        return result


class _Traced(np.ndarray):
    """A NumPy array that logs every element access made from a simulated CUDA thread."""

    _log: _AccessLog | None = None
    _name: str = "array"

    def __getitem__(self, index):
        if _Traced._log is not None and getattr(self, "_traced_shape", None) is not None:
            _Traced._log.add(self._name, index, self._traced_shape, write=False)
        return super().__getitem__(index)

    def __setitem__(self, index, value):
        if _Traced._log is not None and getattr(self, "_traced_shape", None) is not None:
            _Traced._log.add(self._name, index, self._traced_shape, write=True)
        super().__setitem__(index, value)


def traced_device_array(host: np.ndarray, name: str):
    """A simulated device array over a copy of `host` whose element accesses are logged by `trace_accesses` (simulator only)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    traced = np.array(host, copy=True).view(_Traced)
    traced._name = name
    traced._traced_shape = host.shape
    return FakeCUDAArray(traced)


@contextlib.contextmanager
def trace_accesses(shared: bool = True) -> Iterator[_AccessLog]:
    """Log accesses to traced device arrays (and, if `shared`, to every shared array) made inside the block."""
    if not mode.is_simulator():
        raise RuntimeError("memory accesses can only be watched in the simulator")
    from numba.cuda.simulator import kernelapi

    log = _AccessLog()
    original = kernelapi.FakeCUDAShared.array

    def traced_shared(self, shape, dtype, alignment=None):
        array = original(self, shape, dtype, alignment)
        view = array.view(_Traced)
        view._name = "shared"
        view._traced_shape = array.shape
        return view

    _Traced._log = log
    if shared:
        kernelapi.FakeCUDAShared.array = traced_shared
    try:
        yield log
    finally:
        _Traced._log = None
        kernelapi.FakeCUDAShared.array = original


def _warp_requests(accesses: list[Access], array: str, write: bool) -> dict[tuple, list[tuple[int, int]]]:
    """Group accesses into warp requests: (block, warp, sequence) -> [(lane, element), ...]."""
    requests: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for access in accesses:
        if access.array != array or access.write != write or access.element < 0:
            continue
        bx, by, _ = access.block_dim
        tx, ty, tz = access.thread
        linear = tx + bx * (ty + by * tz)
        requests[(access.block, linear // 32, access.sequence)].append((linear % 32, access.element))
    return requests


def sectors_per_request(accesses: list[Access], array: str, itemsize: int, write: bool = False) -> float:
    """Mean number of 32-byte sectors a warp's request to `array` touches."""
    requests = _warp_requests(accesses, array, write)
    if not requests:
        return 0.0
    return sum(len({element * itemsize // 32 for _, element in lanes}) for lanes in requests.values()) / len(requests)


def shared_passes_per_request(accesses: list[Access], itemsize: int = 4) -> float:
    """Mean passes per warp request to shared memory: the most different 32-bit words that share one bank."""
    totals = []
    for lanes in _warp_requests(accesses, "shared", write=False).values():
        per_bank: dict[int, set[int]] = defaultdict(set)
        for _, element in lanes:
            word = element * itemsize // 4
            per_bank[word % 32].add(word)
        totals.append(max(len(words) for words in per_bank.values()))
    return sum(totals) / len(totals) if totals else 0.0


def _first_request_example(accesses: list[Access], array: str, shape: tuple[int, ...]) -> str:
    lanes = sorted(next(iter(_warp_requests(accesses, array, write=False).values()), []))
    if len(lanes) < 2:
        return ""
    (lane0, e0), (lane1, e1) = lanes[0], lanes[1]
    where0, where1 = np.unravel_index(e0, shape), np.unravel_index(e1, shape)
    return (f"lanes {lane0} and {lane1} of the first warp read {array}[{', '.join(map(str, where0))}] and "
            f"{array}[{', '.join(map(str, where1))}], {abs(e1 - e0)} elements apart")


# ---------------------------------------------------------------------------------------------
# Replaying a student's kernels in a simulator subprocess (used on a GPU, where nothing can be traced).


class ReplayError(RuntimeError):
    """The code uses something that cannot be sent to a simulator process (a closure, an open file...)."""


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names(constant)
    return names


def _portable_function(function, table: dict, seen: set) -> None:
    """Describe `function` (a Python function or a Numba kernel) and every global it uses, into `table`."""
    python = getattr(function, "py_func", None) or function
    name = python.__name__
    if name in seen:
        return
    seen.add(name)
    if python.__closure__:
        raise ReplayError(f"{name} uses variables of an enclosing function (a closure); define it at the top level of the notebook")
    is_kernel = hasattr(function, "py_func")
    device = bool(getattr(function, "targetoptions", {}).get("device", False))
    table[name] = ("kernel" if is_kernel else "function", marshal.dumps(python.__code__), device)
    for global_name in _names(python.__code__):
        if global_name in seen or global_name not in python.__globals__:
            continue
        value = python.__globals__[global_name]
        if isinstance(value, types.ModuleType):
            table[global_name] = ("module", value.__name__, False)
            seen.add(global_name)
        elif hasattr(value, "py_func") or isinstance(value, types.FunctionType):
            _portable_function(value, table, seen)
        else:
            try:
                table[global_name] = ("value", pickle.dumps(value), False)
            except Exception as exc:  # anything that cannot travel makes the replay impossible
                raise ReplayError(f"the global {global_name!r} ({type(value).__name__}) cannot be sent to the simulator: {exc}") from exc
            seen.add(global_name)


_REPLAY_SCRIPT = r"""
import importlib, json, marshal, pickle, sys, types
import gpucourse
from numba import cuda
from gpucourse.checks import ch3_memory
payload = pickle.loads(sys.stdin.buffer.read())
namespace = {"__builtins__": __builtins__}
for name, (kind, data, device) in payload["table"].items():
    if kind == "module":
        namespace[name] = importlib.import_module(data)
    elif kind == "value":
        namespace[name] = pickle.loads(data)
for name, (kind, data, device) in payload["table"].items():
    if kind in ("kernel", "function"):
        function = types.FunctionType(marshal.loads(data), namespace, name)
        namespace[name] = cuda.jit(device=device)(function) if kind == "kernel" else function
arguments = []
for kind, name, value in payload["arguments"]:
    arguments.append(ch3_memory.traced_device_array(value, name) if kind == "traced" else value)
with ch3_memory.trace_accesses(shared=payload["shared"]) as log:
    namespace[payload["entry"]](*arguments)
print("ACCESSES" + json.dumps([list(a.__dict__.values()) for a in log.accesses()]))
"""


def replayed_accesses(entry, arguments: list[tuple[str, str, object]], shared: bool) -> list[Access]:
    """Run `entry(*arguments)` in a simulator subprocess and return the accesses traced there.

    `arguments`: ("traced", name, host array) for arrays to watch, ("value", name, value) for the rest.
    """
    table: dict = {}
    _portable_function(entry, table, set())
    payload = {"table": table, "entry": (getattr(entry, "py_func", None) or entry).__name__, "arguments": arguments, "shared": shared}
    environment = {**os.environ, "GPUCOURSE_MODE": "simulator", "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run([sys.executable, "-c", _REPLAY_SCRIPT], input=pickle.dumps(payload), capture_output=True,
                          env=environment, timeout=300)
    output = done.stdout.decode()
    if done.returncode != 0 or "ACCESSES" not in output:
        raise ReplayError(f"the replay in the simulator failed: {done.stderr.decode()[-1500:]}")
    rows = json.loads(output.split("ACCESSES", 1)[1])
    return [Access(row[0], tuple(row[1]), tuple(row[2]), tuple(row[3]), row[4], row[5], row[6]) for row in rows]


def traced_run(entry, arguments: list[tuple[str, str, object]], shared: bool) -> list[Access]:
    """The accesses `entry(*arguments)` makes: traced in this process in the simulator, replayed in one on a GPU."""
    if not mode.is_simulator():
        return replayed_accesses(entry, arguments, shared)
    prepared = [traced_device_array(value, name) if kind == "traced" else value for kind, name, value in arguments]
    with trace_accesses(shared=shared) as log:
        entry(*prepared)
    return log.accesses()


# ---------------------------------------------------------------------------------------------
# Exercise 3.1: fix an uncoalesced kernel.


def check_scale_matrix(scale_matrix: Callable[..., object]) -> None:
    """Exercise 3.1: `scale_matrix(out, a, factor)` writes a * factor with coalesced reads and writes."""
    rows, cols = problem_size("ch3_exercise_2d")
    a = random_array((rows, cols), np.float32, seed=31)
    factor = np.float32(1.5)
    got, problems = run_guarded(scale_matrix, (rows, cols), np.float32, to_device(a), factor)
    problems += array_problems(got, a * factor, what="out", rtol=1e-6,
                               coverage_hint="Does the grid cover the columns with x and the rows with y?")
    fail(problems, "Exercise 3.1")
    small = (40, 40)  # a few warps are enough to see the pattern
    host = random_array(small, np.float32, seed=32)
    try:
        accesses = traced_run(scale_matrix, [("traced", "out", np.zeros(small, np.float32)), ("traced", "a", host), ("value", "factor", factor)],
                              shared=False)
    except ReplayError as exc:
        passed(f"Exercise 3.1: scale_matrix gives the right values (its access pattern could not be replayed: {exc}).")
        return
    sectors = sectors_per_request(accesses, "a", 4)
    if sectors > 8:
        fail([f"the reads of a are not coalesced: a warp's request touches {sectors:.1f} sectors of 32 bytes on average "
              f"(4 when 32 neighbouring floats are read). For example, {_first_request_example(accesses, 'a', small)}. "
              "Let x (the fastest thread index) walk the columns, the last index of a NumPy array."], "Exercise 3.1")
    text = f"Exercise 3.1: scale_matrix is right on a {rows} x {cols} matrix, and each warp request touches {sectors:.1f} sectors of 32 bytes"
    if mode.on_gpu():
        a_device, out = to_device(a), to_device(np.zeros_like(a))
        timing = benchmark(lambda: scale_matrix(out, a_device, factor), repeat=5)
        text += f"; it moves {timing.bandwidth_gbs(2 * a.nbytes):.0f} GB/s here"
    passed(text + ".")


# ---------------------------------------------------------------------------------------------
# Exercise 3.2: count the sectors a warp touches.


def check_sectors_per_warp(sectors_per_warp: Callable[[int, int, int], int]) -> None:
    """Exercise 3.2: `sectors_per_warp(offset, stride, itemsize)` counts the 32-byte sectors warp 0 touches."""
    from ..kernels.coalescing import warp_sectors

    rng = np.random.default_rng(32)
    cases = [(0, 1, 4), (1, 1, 4), (8, 1, 4), (0, 2, 4), (0, 8, 4), (0, 1, 8), (3, 1, 8), (0, 4, 8), (0, 32, 8)]
    cases += [(int(rng.integers(0, 33)), int(rng.integers(1, 33)), int(rng.choice([4, 8]))) for _ in range(40)]
    problems = []
    for offset, stride, itemsize in cases:
        expected = warp_sectors(offset, stride, itemsize)
        try:
            got = sectors_per_warp(offset, stride, itemsize)
        except Exception as exc:  # any exception is a wrong answer, reported in words
            problems.append(f"sectors_per_warp({offset}, {stride}, {itemsize}) raised {type(exc).__name__}: {exc}")
            break
        if got != expected:
            lanes = [(lane * stride + offset) * itemsize for lane in (0, 1, 31)]
            problems.append(f"sectors_per_warp({offset}, {stride}, {itemsize}) returned {got!r}; expected {expected}. "
                            f"Lanes 0, 1 and 31 read bytes {lanes[0]}, {lanes[1]} and {lanes[2]}: count the distinct "
                            "values of byte // 32 over all 32 lanes.")
            break
    fail(problems, "Exercise 3.2")
    passed(f"Exercise 3.2: sectors_per_warp agrees with the model on {len(cases)} offsets, strides and sizes.")


# ---------------------------------------------------------------------------------------------
# Exercise 3.3: remove a bank conflict.

WIDE = 64


def check_wide_row_sums(wide_row_sums: Callable[..., object]) -> None:
    """Exercise 3.3: `wide_row_sums(out, x)` sums each row of x (shape (m, 64)) through shared memory, without bank conflicts."""
    rows = problem_size("ch3_exercise_tiles")
    x = random_array((rows, WIDE), np.float32, seed=33)
    got, problems = run_guarded(wide_row_sums, (rows,), np.float32, to_device(x))
    problems += array_problems(got, x.astype(np.float64).sum(axis=1).astype(np.float32), what="out", rtol=1e-5, atol=1e-5)
    fail(problems, "Exercise 3.3")
    small = random_array((64, WIDE), np.float32, seed=34)
    try:
        accesses = traced_run(wide_row_sums, [("traced", "out", np.zeros(64, np.float32)), ("traced", "x", small)], shared=True)
    except ReplayError as exc:
        passed(f"Exercise 3.3: wide_row_sums gives the right values (its shared-memory pattern could not be replayed: {exc}).")
        return
    passes = shared_passes_per_request(accesses)
    if passes > 2:
        fail([f"the warp's shared-memory reads need {passes:.1f} passes per request on average (1 without conflicts): "
              "the threads of a warp read words that sit in the same bank. A row of 64 floats spans the 32 banks twice, "
              "so row r starts in bank 0 for every r: pad each row by one word."], "Exercise 3.3")
    where = "simulator trace" if mode.is_simulator() else "replayed in the simulator"
    passed(f"Exercise 3.3: wide_row_sums is right and its shared-memory reads need {passes:.1f} pass(es) per warp request ({where}).")


# ---------------------------------------------------------------------------------------------
# Exercise 3.4: overlap transfers with compute.


def check_overlapped(overlapped: Callable[..., object]) -> None:
    """Exercise 3.4: `overlapped(p)` runs the StagedPipeline p chunk by chunk on its streams, and beats the sequential version."""
    from ..kernels import transfers

    n, streams = problem_size("ch3_exercise_async")
    p = transfers.make_pipeline(n, streams, problem_size("ch3_threads_per_block"))
    p.reset()
    p.device.copy_to_device(np.full(n, np.nan, np.float32))  # poison: a chunk never copied in stays NaN
    overlapped(p)
    from numba import cuda

    cuda.synchronize()
    result = to_host(p.host)
    problems = array_problems(result, np.ones(n, np.float32), what="p.host after one run from zeros", rtol=0, atol=4e-7,
                              coverage_hint="Every chunk must be copied in, processed and copied back.")
    if np.all(result == 0):
        problems = ["p.host is still all zeros: copy each chunk back with device_part.copy_to_host(host_part, stream=...)."]
    fail(problems, "Exercise 3.4")
    if mode.is_simulator():
        passed("Exercise 3.4: overlapped gives the right result. (The simulator runs every operation at once, one after "
               "another, so whether copies and kernels overlap can only be checked on a GPU.)")
        return
    sequential = benchmark(lambda: transfers.run_sequential(p), repeat=5)
    mine = benchmark(lambda: overlapped(p), repeat=5)
    speedup = sequential.median_ms / mine.median_ms
    if speedup < 1.15:
        fail([f"overlapped takes {mine.median_ms:.3f} ms against {sequential.median_ms:.3f} ms for the sequential version "
              f"({speedup:.2f}x): the copies and kernels do not overlap. Put each chunk on its own stream (p.streams[k]), "
              "pass stream= to every copy and launch, and do not synchronize inside the function."], "Exercise 3.4")
    passed(f"Exercise 3.4: overlapped is right and {speedup:.2f}x faster than the sequential version "
           f"({mine.median_ms:.3f} ms against {sequential.median_ms:.3f} ms).")
