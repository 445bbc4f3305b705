"""CUDA graphs: a sequence of launches recorded once and replayed with a single call.

A time-stepping loop issues one launch per step, and each launch costs the host microseconds that
a short kernel does not cover: the GPU waits between steps. A graph holds the whole sequence
(Numba kernels through the course's plans, CuPy kernels, cuFFT calls: anything queued on the
capturing stream) and the driver launches it as one unit.

`capture(record)` runs `record()` once on a capturing CuPy stream: nothing executes, every launch
is recorded. `graph.launch()` queues the recorded work on CuPy's current stream. What a graph cannot
hold raises `CaptureError` saying what to change: compile and allocate before the capture (make
the plans first), and keep host synchronizations (`.get()`, `float(x)`, `cuda.synchronize()`, a
NumPy array handed to a kernel) out of it. In the simulator a graph simply calls `record()` again
at every launch, so code written for graphs runs unchanged there.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

from . import launch as _launch
from . import mode
from .arrays import require_cupy
from .errors import CaptureError


def _where(exc: BaseException) -> str:
    """The innermost frame of the traceback outside this module: where the capture broke."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.endswith("graphs.py")]
    if not frames:
        return "in the recorded function"
    user = next((f for f in frames if "site-packages" not in f.filename and "/gpucourse/" not in f.filename), frames[0])
    inner = frames[-1]
    text = f"at {user.filename}:{user.lineno} ({user.line})"
    if inner is not user:
        text += f", inside {inner.name} ({inner.filename.rsplit('/', 1)[-1]}:{inner.lineno})"
    return text


class Graph:
    """Launches recorded once into a CUDA graph; `launch()` replays them all with one call."""

    def __init__(self, record: Callable[[], object], name: str = "graph") -> None:
        self.name = name
        self._record = record
        self._plans: list = []
        if mode.is_simulator():
            self._graph = None
            return
        cupy = require_cupy("CUDA graphs")
        # A blocking stream: work on the legacy default stream during the capture (a copy to the host, a
        # synchronize) must wait for it, which a capture forbids, so the mistake is an error, not a silent copy.
        stream = cupy.cuda.Stream(non_blocking=False)
        self._stream = stream  # the graph's nodes were captured on it: keep it alive with the graph
        captured: list = []
        _launch.CAPTURING.append(captured)
        try:
            with stream:
                stream.begin_capture(mode=cupy.cuda.runtime.streamCaptureModeThreadLocal)
                try:
                    record()
                finally:
                    graph = _end_capture(stream)
        except Exception as exc:
            raise CaptureError(
                f"capturing {name!r} failed {_where(exc)}: {type(exc).__name__}: {exc}. A graph holds queued GPU work "
                "only: make the plans (which compile the kernels) and allocate the arrays before capturing, and keep "
                "host synchronizations (.get(), float(x), cuda.synchronize(), a NumPy array handed to a kernel) out of "
                "the recorded function."
            ) from exc
        finally:
            _launch.CAPTURING.pop()
        if graph is None:
            raise CaptureError(f"capturing {name!r} recorded nothing usable: the capture was invalidated")
        self._graph = graph
        self._plans = list(dict.fromkeys(captured))  # each plan once, in order

    @property
    def simulated(self) -> bool:
        """True in the simulator, where launching the graph calls the recorded function again."""
        return self._graph is None

    def launch(self, stream=None) -> None:
        """Queue the whole graph on `stream` (default: CuPy's current stream), ordered after each plan's last launch."""
        if self._graph is None:
            self._record()
            return
        handle = _launch.stream_handle(stream)
        for plan in self._plans:
            if plan._last_stream != handle:
                plan.wait_on(handle)
        self._graph.launch(_launch.STREAMS.cupy(handle))

    def replay(self, times: int, stream=None) -> None:
        """Launch the graph `times` times back to back."""
        if times < 0:
            raise ValueError(f"times must be >= 0; got {times}")
        for _ in range(times):
            self.launch(stream)

    def __repr__(self) -> str:
        kind = "simulated" if self.simulated else f"{len(self._plans)} plan(s)"
        return f"Graph({self.name!r}, {kind})"


def _end_capture(stream):
    """End the capture; None if it was invalidated (the error that did it is already propagating)."""
    try:
        return stream.end_capture()
    except Exception:  # the capture was invalidated by the failure being raised
        return None


def capture(record: Callable[[], object], name: str = "graph") -> Graph:
    """Record every launch `record()` queues into a CUDA graph (GPU) or keep `record` to call again (simulator)."""
    return Graph(record, name)


#: Steps per graph in `alternate`: long enough that one replay call per graph costs nothing next to the steps.
STEPS_PER_GRAPH = 100
#: Below this many steps a loop is not worth a capture (capturing and instantiating cost about a millisecond).
FEWEST_STEPS_FOR_A_GRAPH = 8


def alternate(step: Callable[[int], object], count: int, *, use_graph: bool = True, per_graph: int = STEPS_PER_GRAPH) -> int:
    """Call step(0), step(1), step(0), ... `count` times (step(k) reads buffer k, writes the other); return the result's buffer.

    With `use_graph`, `per_graph` steps (an even number, so the buffers end where they started)
    are captured once and replayed; the steps left over run one by one.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0; got {count}")
    per_graph = min(per_graph, count) // 2 * 2
    done = 0
    if use_graph and count >= FEWEST_STEPS_FOR_A_GRAPH and per_graph >= 2:
        graph = capture(lambda: [step(k % 2) for k in range(per_graph)], f"{per_graph} alternating steps")
        graph.replay(count // per_graph)
        done = count // per_graph * per_graph
    for k in range(done, count):
        step(k % 2)
    return count % 2
