"""The course's GPU CI: tests, notebooks, a leak check on a small card, solution checks, the report; one record.

    python3 tools/gpu_ci.py OUT --commit SHA [--steps S,S,...] [--budget SECONDS] [--chapter N ...] [--stale] [--pack]
    python3 tools/gpu_ci.py merge OUT_OR_ARCHIVE ... --out DIR
    python3 tools/gpu_ci.py file OUT_OR_ARCHIVE ... [--measurements DIR]

Steps (all by default, in this order; `--steps` picks some, so that several calls can share the work):
  tests           every test in gpu mode: the tests that time nothing side by side under pytest-xdist
                  (`--test-workers`), then those that time GPU work (marked `timing`: tests/timing_tests.txt, or
                  seen timing in the first pass) one at a time
  report          `python -m gpucourse report` into OUT/report (HTML, Markdown, JSON)
  solutions       every solution notebook run top to bottom in its own kernel (a cell error fails it, as
                  under nbval), then its check cells that compared speeds run again until each has run
                  `--check-runs` times (`--repeat-all-checks`: every check cell);
                  `--solution-jobs` notebooks at a time, each timing alone (GPUCOURSE_TIMING_LOCK); the lowest
                  speed ratio of each check (gpucourse.checks.speed's log, GPUCOURSE_SPEED_LOG) against its bar
  chapters        every chapter notebook in its own kernel, one after another with nothing beside them (their
                  printed measurements are published): wall time, peak device memory, memory in use at its
                  end; the executed copies (outputs kept, widget state dropped) in OUT/executed/<chapter>/;
                  `--stale`: only those no GPU record of their current code holds (the website's waiting pages)
  leaks           every chapter notebook in ONE kernel as a small card (`--small-card`, 8GiB: sizes follow, a
                  ballast takes the rest of the GPU); after each: its names deleted, pools emptied, memory in
                  use read. Fails on a notebook error or when memory left behind grows by more than
                  `--leak-tolerance` MiB over the notebooks. This is also the small-card run of the chapters.
  solutions-small the solutions step as a small card, one notebook at a time (each holds its own ballast)

Every step records its wall time; notebooks their wall time, peak device memory (device-wide, sampled
every 20 ms through NVML, outside the kernels) and memory in use after. `--budget` is this call's
wall-clock limit: a step that would run past it stops between notebooks (or its pytest is stopped),
says how far it got, and the record and archive are still written.

Writes OUT/gpu_ci.json and OUT/gpu_ci.md (GPU, driver, versions, the course's commit, the command, each
step's status and counts) and OUT/logs/; exits non-zero if a step failed. `--pack` puts everything
into OUT/gpu_ci.tar.gz and leaves gpu_ci.json and gpu_ci.md beside it: three files per call.

The commit is the course's own: `--commit`, else $GPUCOURSE_COMMIT, else the file COMMIT at the course
root (written by whoever sends a copy of the tree), else `git rev-parse` but only when the git top
level is the course root (a copy inside another repository would name that repository's commit).

`merge` joins the records of several calls (same commit) into one; `file` does that and files the
result in the repository: measurements/gpu_ci/<date>_<gpu>/ (gpu_ci.json, gpu_ci.md, logs/, executed/)
and the report in measurements/thenandnow/ (report.md, report.html, report.json).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import ctypes
import datetime
import functools
import gzip
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
PYTEST = [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-p", "gpu_ci_plugin"]
STEPS = ("tests", "report", "solutions", "chapters", "leaks", "solutions-small")
#: What each step is expected to take on an H200 (s): estimates from the earlier runs of its parts (issue 18),
#: for planning calls (printed with --plan); a step with less than a third of this left in the budget is not started.
EXPECTED_SECONDS = {"tests": 330, "report": 90, "solutions": 150, "chapters": 480, "leaks": 270, "solutions-small": 300}
#: Growth of the device memory left behind, over the notebooks of the leak step, that fails it (MiB).
LEAK_TOLERANCE_MIB = 256
#: What the leak table shows of the kernel's own reading: what it still holds.
LIVE = ("cupy_live_bytes", "simulated_bytes", "simulated_arrays", "error")
#: Resolution of the figures in the executed copies of the chapter notebooks (matplotlib's default is 100).
FIGURE_DPI = 72
#: Seconds kept at the end of a call's budget for the record and the archive.
RESERVE_SECONDS = 20
SCHEMA = 1


# -- small helpers ---------------------------------------------------------------------------------------
def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def mib(nbytes: float | None) -> str:
    return "—" if nbytes is None else f"{nbytes / 2**20:.0f}"


def size(nbytes: float | None) -> str:
    """Bytes in words: '3.2 KiB', '812 MiB', '9.5 GiB'."""
    if nbytes is None:
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def summary_line(text: str) -> str:
    lines = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed|errors?)\b", line)]
    return lines[-1].strip("= ") if lines else "no summary"


def notebooks_of(folder: str, chapters: list[int] | None = None) -> list[Path]:
    """The notebooks of chapters/ (in chapter folders) or solutions/, in order; only `chapters` if given."""
    found = []
    for path in sorted((ROOT / folder).glob("**/*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        number = re.match(r"(?:ch)?0?(\d+)", path.parent.name if folder == "chapters" else path.name)
        if chapters and (number is None or int(number.group(1)) not in chapters):
            continue
        found.append(path)
    return found


class Scrubber:
    """Removes the machinery around a run from what is recorded: the paths of this machine become names."""

    def __init__(self, out: Path) -> None:
        pairs = {str(ROOT): ".", str(out.resolve()): "OUT", str(out): "OUT", sys.prefix: "PYTHON", sys.base_prefix: "PYTHON"}
        for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
            if entry and os.path.isabs(entry) and not str(ROOT).startswith(entry):
                pairs[entry] = "SITE"
        for entry in sys.path:
            if entry.endswith(("site-packages", "dist-packages")):
                pairs[entry] = "SITE"
        pairs[tempfile.gettempdir()] = "TMP"
        pairs[str(Path.home())] = "HOME"
        self.pairs = sorted(((k, v) for k, v in pairs.items() if k and k != "/"), key=lambda kv: -len(kv[0]))

    def __call__(self, text: str) -> str:
        for path, name in self.pairs:
            text = text.replace(path, name)
        return text


# -- the course's commit -----------------------------------------------------------------------------------
def course_commit(given: str | None) -> tuple[str | None, str]:
    """(commit, where it came from): --commit, $GPUCOURSE_COMMIT, the file COMMIT, or git when its top level is the course root."""
    if given:
        return given.strip(), "--commit"
    if os.environ.get("GPUCOURSE_COMMIT", "").strip():
        return os.environ["GPUCOURSE_COMMIT"].strip(), "GPUCOURSE_COMMIT"
    marker = ROOT / "COMMIT"
    if marker.exists() and marker.read_text().strip():
        return marker.read_text().split()[0], "COMMIT file"
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, cwd=ROOT, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None, "no --commit, and no git"
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != ROOT:
        return None, "no --commit, and the git repository around this tree is not the course's"
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    return (sha + ("+changes" if dirty else "")) or None, "git"


# -- device memory, sampled from outside the kernels ---------------------------------------------------------
class DeviceMemory:
    """Device memory in use on every GPU, summed (NVML through ctypes: no CUDA context in this process); None without NVML."""

    def __init__(self) -> None:
        self._handles: list = []
        self._lib = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            count = ctypes.c_uint()
            if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                return
            for index in range(count.value):
                handle = ctypes.c_void_p()
                if lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) == 0:
                    self._handles.append(handle)
            self._lib = lib
        except OSError:
            return

    class _Info(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    @property
    def available(self) -> bool:
        return self._lib is not None and bool(self._handles)

    def used(self) -> int | None:
        """Bytes in use on all GPUs now (device-wide: every process), or None."""
        if not self.available:
            return None
        total = 0
        for handle in self._handles:
            info = self._Info()
            if self._lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(info)) != 0:
                return None
            total += info.used
        return total


class PeakSampler:
    """A thread that reads device memory every `interval` s; `window()` gives the peak since it began."""

    def __init__(self, memory: DeviceMemory, interval: float = 0.02) -> None:
        self.memory, self.interval = memory, interval
        self._peak: int | None = None
        self._window = 0  # a reading begun before the current window opened is not the window's
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True) if memory.available else None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            window = self._window
            value = self.memory.used()
            with self._lock:
                if value is not None and window == self._window and (self._peak is None or value > self._peak):
                    self._peak = value

    def __enter__(self) -> PeakSampler:
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @contextlib.contextmanager
    def window(self) -> Iterator[dict]:
        """Yield a dict that gets 'peak_bytes' (the highest reading inside the block, or None) when the block ends."""
        with self._lock:
            self._window += 1
            self._peak = self.memory.used()
        found: dict = {}
        try:
            yield found
        finally:
            last = self.memory.used()
            peak = self._peak if last is None or (self._peak is not None and self._peak > last) else last
            found["peak_bytes"] = peak


# -- kernels ---------------------------------------------------------------------------------------------------
#: What Kernel.run adds to the output of a cell it interrupted after `timeout` seconds (read back by interrupted_after).
INTERRUPTED = "TimeoutError: the cell ran past {:.0f} s and was interrupted"


class Kernel:
    """A Jupyter kernel of this Python (over Unix sockets: parallel kernels cannot be given the same port)."""

    def __init__(self, env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
        from jupyter_client.manager import KernelManager

        self._sockets = tempfile.TemporaryDirectory(prefix="gpu-ci-kernel-")
        self.manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(self._sockets.name) / "kernel"))
        self.manager.start_kernel(env={**os.environ, **(env or {})}, cwd=str(cwd))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=180)

    def run(self, code: str, timeout: float) -> tuple[bool, str, list]:
        """Run `code`; (ok, its text output, its outputs as nbformat dicts)."""
        texts: list[str] = []
        outputs: list = []

        def hook(message) -> None:
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                texts.append(content["text"])
                if outputs and outputs[-1]["output_type"] == "stream" and outputs[-1]["name"] == content["name"]:
                    outputs[-1]["text"] += content["text"]  # one output per run of text, as Jupyter saves it
                else:
                    outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
            elif kind == "error":
                texts.append(f"{content['ename']}: {content['evalue']}")
                outputs.append({"output_type": "error", "ename": content["ename"], "evalue": content["evalue"],
                                "traceback": content["traceback"]})
            elif kind in ("display_data", "execute_result"):
                output = {"output_type": kind, "data": content["data"], "metadata": content.get("metadata", {})}
                if kind == "execute_result":
                    output["execution_count"] = content.get("execution_count")
                outputs.append(output)
            elif kind == "clear_output":
                outputs.clear()

        try:
            reply = self.client.execute_interactive(code, timeout=timeout, output_hook=hook, store_history=True, allow_stdin=False)
        except TimeoutError:
            with contextlib.suppress(Exception):
                self.manager.interrupt_kernel()
                self.client.execute_interactive("pass", timeout=60)  # wait until the interrupted cell has ended
            return False, "".join(texts) + "\n" + INTERRUPTED.format(timeout), outputs
        except RuntimeError as exc:  # the kernel died (out of memory, a crash)
            return False, "".join(texts) + f"\nKernelDied: {exc}", outputs
        return reply["content"]["status"] == "ok", "".join(texts), outputs

    def alive(self) -> bool:
        return self.manager.is_alive()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.stop_channels()
        with contextlib.suppress(Exception):
            self.manager.shutdown_kernel(now=True)
        self._sockets.cleanup()


_UNITS = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def memory_size(text: str) -> int:
    """Bytes in '8GiB', '16GB', '12000MiB' (as GPUCOURSE_DEVICE_MEMORY is written)."""
    found = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b)\s*$", text, re.IGNORECASE)
    if not found:
        raise ValueError(f"not a memory size: {text!r} (write e.g. 8GiB)")
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])


def emulated(reported: int | None, small_card: str | None) -> bool:
    """True if the course saw the card as `small_card` (GPUCOURSE_DEVICE_MEMORY took effect), or none was asked for."""
    return not small_card or (reported is not None and reported == memory_size(small_card))


def first_error(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception|Problem|Mismatch|Feature|Timeout)\b.*:", line)]
    return (errors or lines or ["a cell failed"])[-1][:400]


def code_cells(notebook) -> list:
    return [cell for cell in notebook.cells if cell.cell_type == "code" and cell.source.strip()]


def is_check_cell(cell) -> bool:
    """A solution notebook's check cell: nbgrader metadata with grade true."""
    return cell.cell_type == "code" and bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade"))


MEMORY_PROBE = r"""
get_ipython().run_line_magic("reset", "-f")  # the notebook's names and the output history that keeps results alive
def _gpu_ci_probe():
    import gc, json, sys
    import matplotlib.pyplot
    matplotlib.pyplot.close("all")
    gc.collect()
    found = {}
    from gpucourse import current_device, mode
    found["device_memory_bytes"] = current_device().total_memory_bytes  # what the course takes the card to have
    if mode.is_simulator():  # the simulator's device arrays: NumPy memory in simulated arrays
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        live = [o for o in gc.get_objects() if type(o) is FakeCUDAArray]
        found["simulated_bytes"] = sum(o.nbytes for o in live)
        found["simulated_arrays"] = len(live)
    else:
        from numba import cuda
        from numba.cuda.cudadrv.devicearray import DeviceNDArray
        from gpucourse import emulation
        context = cuda.current_context()
        pending = context.memory_manager.deallocations  # Numba frees device arrays in batches (of 10, or 20 % of the card)
        found["numba_pending_frees"] = len(pending)
        pending.clear()                # ... now
        context.deallocations.clear()  # and its streams, events and modules
        held = sum(record.held_bytes for record in emulation.BALLAST)  # the emulated card's ballast is no leak
        found["numba_live_bytes"] = sum(m.size for m in list(context.memory_manager.allocations.values())) - held
        if found["numba_live_bytes"] > 64 * 2**20:  # who holds the largest Numba arrays still alive
            arrays = sorted((o for o in gc.get_objects() if isinstance(o, DeviceNDArray)), key=lambda o: -o.nbytes)[:3]
            found["largest_numba_arrays"] = [{"shape": list(o.shape), "bytes": int(o.nbytes), "held_by": _holders(o, arrays)}
                                             for o in arrays]
        if "cupy" in sys.modules:
            import cupy
            cupy.fft.config.get_plan_cache().clear()  # CuPy's own FFT plans (a notebook may call cupy.fft)
            pool = cupy.get_default_memory_pool()
            pool.free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()
            found["cupy_live_bytes"] = pool.used_bytes()
            runtime = cupy.cuda.runtime
            found["stack_bytes_per_thread"] = runtime.deviceGetLimit(runtime.cudaLimitStackSize)  # local memory kept for the threads
        free, total = context.get_memory_info()
        found["context_used_bytes"] = total - free
    print("GPU_CI_MEMORY", json.dumps(found))
def _holders(obj, ignore):  # a few words on what refers to obj: dict keys with their owner's type, else the referrer's type
    import gc, types
    words = []
    for referrer in gc.get_referrers(obj):
        if referrer is ignore or isinstance(referrer, types.FrameType):
            continue
        if isinstance(referrer, dict):
            keys = [str(k) for k, v in referrer.items() if v is obj][:2]
            owners = [type(o).__name__ for o in gc.get_referrers(referrer) if o is not ignore and not isinstance(o, types.FrameType)][:2]
            words.append(f"dict{keys} of {owners}")
        else:
            words.append(type(referrer).__name__)
    return words[:6]
_gpu_ci_probe()
del _gpu_ci_probe, _holders
"""

@functools.lru_cache(maxsize=8)
def course_memory_bytes(env_items: tuple[tuple[str, str], ...]) -> int | None:
    """The card's memory as the course sees it under these environment variables, from a Python process of its own.

    Not from a cell of the solution's kernel: the screen of answer cells refuses a cell that is not the notebook's
    own, and refuses the set-up cell after one.
    """
    code = "from gpucourse import current_device; print('GPU_CI_DEVICE', current_device().total_memory_bytes)"
    try:
        course = str(Path(__file__).resolve().parent.parent)
        path = os.pathsep.join(filter(None, [course, os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=course, timeout=300,
                              env={**os.environ, "PYTHONPATH": path, **dict(env_items)})
    except subprocess.TimeoutExpired:
        return None
    found = re.search(r"GPU_CI_DEVICE (\d+)", done.stdout)
    return int(found.group(1)) if found else None


def strip_for_record(notebook) -> None:
    """Drop what an executed copy need not carry: widget state and widget views (their text stays)."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data")
            if data and "application/vnd.jupyter.widget-view+json" in data:
                del data["application/vnd.jupyter.widget-view+json"]
                data.setdefault("text/plain", "(an interactive widget: run the notebook to use it)")


# -- the record ----------------------------------------------------------------------------------------------
class Run:
    """One call of this tool: its options, the record it writes, and the clock of its budget."""

    def __init__(self, args: argparse.Namespace, argv: list[str]) -> None:
        self.args = args
        self.out: Path = args.out
        self.logs = self.out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.scrub = Scrubber(self.out)
        self.started = time.monotonic()
        self.deadline = self.started + args.budget - RESERVE_SECONDS if args.budget else None
        self.memory = DeviceMemory()
        commit, source = course_commit(args.commit)
        self.record = {
            "schema": SCHEMA,
            "commit": commit,
            "commit_source": source,
            "date": datetime.date.today().isoformat(),
            **describe_gpus(),
            "versions": versions(),
            "calls": [{"started": now(), "command": "python3 tools/gpu_ci.py " + " ".join("OUT" if a == str(self.out) else self.scrub(a)
                                                                                           for a in argv),
                       "steps": [], "seconds": None}],
            "steps": {},
        }

    def left(self) -> float | None:
        """Seconds left in this call's budget (None: no budget)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def cell_timeout(self) -> float:
        """How long the next cell may run: --cell-timeout, and no longer than the budget left."""
        left = self.left()
        return self.args.cell_timeout if left is None else max(10.0, min(self.args.cell_timeout, left))

    def log(self, name: str, text: str) -> str:
        path = self.logs / name
        with open(path, "a") as handle:
            handle.write(self.scrub(text))
        return f"logs/{name}"

    def write(self) -> None:
        self.record["calls"][0]["seconds"] = round(time.monotonic() - self.started, 1)
        (self.out / "gpu_ci.json").write_text(json.dumps(self.record, indent=1) + "\n")
        (self.out / "gpu_ci.md").write_text(render_markdown(self.record))


def describe_gpus() -> dict:
    """GPU name, driver, ECC and count from nvidia-smi (top-level keys the website reads); the simulator without one."""
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,ecc.mode.current,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True)
        rows = [[part.strip() for part in line.split(",")] for line in done.stdout.strip().splitlines() if line.strip()]
        if rows:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            seen = len(rows) if visible is None else len([d for d in visible.split(",") if d.strip() and not d.strip().startswith("-")])
            return {"gpu": rows[0][0], "driver": rows[0][1], "gpu_count": len(rows), "gpus_visible": min(seen, len(rows)),
                    "ecc": rows[0][2] if len(rows[0]) > 2 else None, "gpu_memory": rows[0][3] if len(rows[0]) > 3 else None}
    return {"gpu": "none (simulator mode)", "driver": None, "gpu_count": 0, "gpus_visible": 0, "ecc": None, "gpu_memory": None}


def versions_in_words(recorded) -> str:
    """A record's versions as a reader meets them: 'python 3.12.3, numpy 2.4.6' (the website's words, book/build.py)."""
    return site_build().versions_in_words(recorded)


def versions() -> str:
    done = subprocess.run([sys.executable, "-c", "from gpucourse.banner import versions; print(versions())"], capture_output=True,
                          text=True, cwd=ROOT)
    return done.stdout.strip() or done.stderr.strip()[-300:]


def gpu_short_name(record: dict) -> str:
    """'NVIDIA H200' -> 'h200', 'NVIDIA GeForce RTX 4090' -> 'rtx4090', two GPUs -> 'h200x2'; 'simulator' without a GPU."""
    if not record.get("gpu_count"):
        return "simulator"
    name = re.sub(r"\b(nvidia|tesla|geforce)\b", " ", record["gpu"].lower())
    found = re.search(r"\b(rtx|gtx)\s*(\d{3,4})", name) or re.search(r"\b([a-z]{1,2}\d{1,4}[a-z]?)\b", name)
    short = "".join(found.groups()) if found else re.sub(r"[^a-z0-9]+", "", name)[:12]
    return short + (f"x{record['gpu_count']}" if record["gpu_count"] > 1 else "")


# -- steps ------------------------------------------------------------------------------------------------------
def step_tests(run: Run) -> dict:
    """All tests: those that time nothing side by side (pytest-xdist), then the `timing` ones, and any seen timing, alone."""
    import importlib.util

    args, out = run.args, run.out
    workers = args.test_workers if importlib.util.find_spec("xdist") else 1
    timed, again = out / "tests_timed.txt", out / "tests_again.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TOOLS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    if "report" in args.steps and not args.chapter:  # the tests' whole report (run alone) is the report step's too
        env["GPU_CI_REPORT"] = str(out / "report")
        shutil.rmtree(out / "report", ignore_errors=True)
    common = ["-q", "-rfE", "--durations=20"]
    phases = []
    if workers > 1:
        phases.append(("side by side", [*PYTEST, *common, "-n", str(workers), "-m", "not timing", "--gpu-ci-timed", str(timed), *args.tests],
                       {**env, "GPUCOURSE_TIMING_LOCK": str(out / ".timing.lock")}))
        phases.append(("alone", [*PYTEST, *common, "-p", "no:xdist", "-m", "timing", "--gpu-ci-serial", str(again), *args.tests], env))
    else:
        phases.append(("alone", [*PYTEST, *common, "-p", "no:xdist", *args.tests], env))
    seconds: dict[str, float] = {}
    outcomes: dict[str, dict] = {}
    stopped = False
    sys.path.insert(0, str(TOOLS))
    from gpu_ci_plugin import final_outcomes

    for number, (name, command, environment) in enumerate(phases):
        results = out / f"tests_results_{number}.jsonl"
        results.unlink(missing_ok=True)
        if name == "alone" and workers > 1:
            again.write_text(timed.read_text() if timed.exists() else "")
        left = run.left()
        begin = time.monotonic()
        try:
            done = subprocess.run([*command, "--gpu-ci-results", str(results)], capture_output=True, text=True, cwd=ROOT, env=environment,
                                  timeout=left if left and left > 0 else None)
            text = done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            stopped = True
            text = "".join(t.decode(errors="replace") if isinstance(t, bytes) else (t or "") for t in (expired.stdout, expired.stderr))
            text += f"\n[gpu_ci] stopped at the end of this call's budget ({args.budget:.0f} s)\n"
        seconds[name] = round(time.monotonic() - begin, 1)
        run.log("tests.log", f"===== {name}: pytest {' '.join(command[len(PYTEST):])}\n{text}\n")
        lines = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
        outcomes.update(final_outcomes(lines))  # a test run again alone keeps its outcome alone
        if results.exists():  # the per-test log, packed: a record keeps its summary readable and its raw lines small
            with open(results, "rb") as raw, gzip.open(run.logs / f"{results.name}.gz", "wb", compresslevel=9) as packed:
                shutil.copyfileobj(raw, packed)
            results.unlink()
        if stopped:
            break
    counts: dict[str, int] = {}
    for test in outcomes.values():
        counts[test["outcome"]] = counts.get(test["outcome"], 0) + 1
    failures = sorted(nodeid for nodeid, test in outcomes.items() if test["outcome"] in ("failed", "error"))
    ok = not stopped and not failures and counts.get("passed", 0) > 0 and not counts.get("unfinished")
    rerun = sorted(set(again.read_text().split())) if again.exists() else []
    return {"status": "ok" if ok else ("incomplete" if stopped else "failed"), "counts": counts, "phase_seconds": seconds,
            "workers": workers, "failures": [{"test": t, "message": run.scrub(outcomes[t]["message"])} for t in failures],
            "timed_beside_others": rerun, "log": "logs/tests.log"}


def step_report(run: Run) -> dict:
    """The then-and-now report: the one the tests step's whole-report test wrote in this call, else `python -m gpucourse report`."""
    made = run.out / "report" / "report.json"
    if "tests" in run.record["steps"] and made.exists() and not run.args.chapter:
        data = json.loads(made.read_text())
        errors = [f"chapter {c['number']}: {c['error']}" for c in data["chapters"] if c.get("error")]
        rows = sum(len(section["rows"]) for c in data["chapters"] for section in c["sections"])
        run.log("report.log", f"the report of tests/test_thenandnow.py::test_a_whole_run_writes_the_report (run alone), {rows} rows\n"
                              + "".join(f"{e}\n" for e in errors))
        return {"status": "failed" if errors else "ok", "made_by": "tests/test_thenandnow.py (the whole report, run alone)",
                "summary": run.scrub(f"{len(data['chapters'])} chapters, {rows} rows" + (f"; errors: {'; '.join(errors)}" if errors else "")),
                "files": sorted(p.name for p in made.parent.glob("*")), "log": "logs/report.log"}
    command = [sys.executable, "-m", "gpucourse", "report", "--out", str(run.out / "report")]
    for number in run.args.chapter or []:
        command += ["--chapter", str(number)]
    left = run.left()
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=left if left and left > 0 else None)
        text, ok, stopped = done.stdout + done.stderr, done.returncode == 0, False
    except subprocess.TimeoutExpired:
        text, ok, stopped = "[gpu_ci] stopped at the end of this call's budget\n", False, True
    run.log("report.log", text)
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    return {"status": "ok" if ok else ("incomplete" if stopped else "failed"), "summary": run.scrub(tail)[:400],
            "files": sorted(p.name for p in (run.out / "report").glob("*")) if (run.out / "report").exists() else [],
            "log": "logs/report.log"}


def interrupted_after(text: str) -> float | None:
    """The seconds after which Kernel.run interrupted a cell, from its output's INTERRUPTED line (None: not interrupted)."""
    found = re.search(r"TimeoutError: the cell ran past (\d+) s and was interrupted", text or "")
    return float(found.group(1)) if found else None


#: run_notebook_cells' error for a notebook cut off by the end of the call's budget: listed as not run, not as failed.
STOPPED_BY_BUDGET = "stopped: the call's budget ended during this notebook"


def run_notebook_cells(kernel: Kernel, notebook, run: Run, keep_outputs: bool = False) -> tuple[str, int]:
    """Run every code cell in order, stopping at the first error; (the error or '', cells run). Outputs stored if asked."""
    count = 0
    for cell in code_cells(notebook):
        timeout = run.cell_timeout()
        ok, text, outputs = kernel.run(cell.source, timeout)
        count += 1
        if keep_outputs:
            import nbformat

            for output in outputs:
                if output["output_type"] == "execute_result":
                    output["execution_count"] = count
            cell.outputs = [nbformat.from_dict(output) for output in outputs]
            cell.execution_count = count
        if not ok:
            if timeout < run.args.cell_timeout and interrupted_after(text) is not None:
                return STOPPED_BY_BUDGET, count  # the call's budget ended, not the notebook
            return first_error(text), count
    return "", count


def figure_settings(run: Run) -> Path:
    """A matplotlibrc folder for the kernels whose executed copies are kept: figures at FIGURE_DPI, so the records stay small."""
    settings = run.out / ".matplotlib"
    settings.mkdir(exist_ok=True)
    (settings / "matplotlibrc").write_text(f"figure.dpi: {FIGURE_DPI}\n")
    return settings


def scrub_outputs(notebook, scrub: Callable[[str], str]) -> None:
    """Put the text of every output through `scrub` (warnings and tracebacks name the machine's paths)."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = scrub("".join(output["text"]))
            if "traceback" in output:
                output["traceback"] = [scrub(line) for line in output["traceback"]]
            if "evalue" in output:
                output["evalue"] = scrub(output["evalue"])
            for kind in ("text/plain", "text/html", "text/markdown"):
                if kind in output.get("data", {}):
                    output["data"][kind] = scrub("".join(output["data"][kind]))


def save_executed(run: Run, path: Path, notebook) -> None:
    """Keep the executed copy of chapter notebook `path` in OUT/executed/<chapter>/, stamped with its source's hash for the website."""
    import nbformat

    strip_for_record(notebook)
    scrub_outputs(notebook, run.scrub)
    notebook.metadata["gpucourse_site"] = {"source_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    copy = run.out / "executed" / path.parent.name / path.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, copy)


@functools.cache
def site_build():
    """book/build.py as a module: the website's rules (which pages wait for a record, how a record reads)."""
    spec = importlib.util.spec_from_file_location("gpucourse_site_build", ROOT / "book" / "build.py")
    site = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = site  # its dataclasses look their module up
    spec.loader.exec_module(site)
    return site


def stale_notebooks(measurements: Path = ROOT / "measurements") -> list[Path]:
    """The chapter notebooks whose website pages no GPU record of their current code serves (book/build.py's rule: chapter
    4's only from a record of 2 or more GPUs): what `--stale` runs."""
    site = site_build()
    return site.waiting_pages(site.chapters(ROOT), site.gpu_records(measurements))


def step_chapters(run: Run) -> dict:
    """Each chapter notebook in a fresh kernel, nothing beside it; its executed copy kept (`--stale`: only the notebooks
    no GPU record of their current code holds)."""
    import nbformat

    rows, stopped = [], []
    settings = figure_settings(run)
    run.record["executed_as"] = "each chapter notebook in its own kernel, the whole card"
    chosen = notebooks_of("chapters", run.args.chapter)
    if run.args.stale:
        stale = set(stale_notebooks())
        chosen = [path for path in chosen if path in stale]
        run.record["stale_only"] = [str(path.relative_to(ROOT)) for path in chosen]
    with PeakSampler(run.memory) as sampler:
        for path in chosen:
            relative = path.relative_to(ROOT)
            if run.left() is not None and run.left() < 30:
                stopped.append(str(relative))
                continue
            notebook = nbformat.read(path, as_version=4)
            begin = time.monotonic()
            with sampler.window() as memory:
                error, cells, end_bytes = "", 0, None
                try:
                    kernel = Kernel(env={"MATPLOTLIBRC": str(settings)}, cwd=path.parent)
                except Exception as exc:  # noqa: BLE001 - recorded: the next notebook gets its own kernel
                    error = f"the kernel did not start: {type(exc).__name__}: {exc}"
                else:
                    try:
                        error, cells = run_notebook_cells(kernel, notebook, run, keep_outputs=True)
                        end_bytes = run.memory.used()
                    finally:
                        kernel.close()
            seconds = time.monotonic() - begin
            if error == STOPPED_BY_BUDGET:
                stopped.append(str(relative))
                print(f"chapters: {relative} {error}", flush=True)
                continue
            save_executed(run, path, notebook)
            rows.append({"notebook": str(relative), "seconds": round(seconds, 1), "cells": cells, "peak_bytes": memory["peak_bytes"],
                         "end_bytes": end_bytes, "error": run.scrub(error)})
            run.log("chapters.log", f"{relative}: {seconds:.1f} s, {cells} cells, peak {mib(memory['peak_bytes'])} MiB, "
                                    f"at the end {mib(end_bytes)} MiB{', ERROR ' + error if error else ''}\n")
            print(f"chapters: {relative} {seconds:.1f} s {error}", flush=True)
            run.record["steps"]["chapters"] = chapters_result(rows, stopped)
            run.write()
    return chapters_result(rows, stopped)


def chapters_result(rows: list[dict], stopped: list[str]) -> dict:
    failed = [r for r in rows if r["error"]]
    status = "failed" if failed else ("incomplete" if stopped else "ok")
    return {"status": status, "counts": {"notebooks": len(rows), "passed": len(rows) - len(failed), "failed": len(failed),
                                         "not run": len(stopped)},
            "notebooks": rows, "not_run": stopped, "executed": "executed/", "log": "logs/chapters.log"}


def probe_memory(kernel: Kernel) -> dict:
    _, text, _ = kernel.run(MEMORY_PROBE, 300)
    found = re.search(r"GPU_CI_MEMORY (\{.*\})", text)
    return json.loads(found.group(1)) if found else {"error": first_error(text)}


def step_leaks(run: Run) -> dict:
    """Every chapter notebook in one kernel as a small card; memory left after each, and its peak."""
    import nbformat

    args = run.args
    env = {"GPUCOURSE_DEVICE_MEMORY": args.small_card} if args.small_card else {}
    keep = args.leaks_executed
    if keep:
        env["MATPLOTLIBRC"] = str(figure_settings(run))
        run.record["executed_as"] = ("every chapter notebook in turn in one kernel"
                                     + (f", as a card of {args.small_card} (GPUCOURSE_DEVICE_MEMORY)" if args.small_card else ""))
    rows, stopped = [], []
    kernel = Kernel(env=env)
    try:
        with PeakSampler(run.memory) as sampler:
            for path in notebooks_of("chapters", args.chapter):
                relative = path.relative_to(ROOT)
                if run.left() is not None and run.left() < 45:
                    stopped.append(str(relative))
                    continue
                notebook = nbformat.read(path, as_version=4)
                kernel.run(f"import os; os.chdir({str(path.parent)!r})", 60)
                begin = time.monotonic()
                with sampler.window() as memory:
                    error, cells = run_notebook_cells(kernel, notebook, run, keep_outputs=keep)
                    if error == STOPPED_BY_BUDGET:
                        stopped.append(str(relative))
                        break
                    if keep:
                        save_executed(run, path, notebook)
                    if kernel.alive():
                        probe = probe_memory(kernel)
                    else:  # a new kernel for the rest: what this one held is gone with it, so growth counts again from here
                        kernel.close()
                        kernel = Kernel(env=env)
                        probe = {"error": "the kernel died; the next notebooks run in a new one"}
                    left_bytes = run.memory.used()
                rows.append({"notebook": str(relative), "seconds": round(time.monotonic() - begin, 1), "cells": cells,
                             "peak_bytes": memory["peak_bytes"], "left_bytes": left_bytes, "probe": probe, "error": run.scrub(error)})
                run.log("leaks.log", f"{relative}: {rows[-1]['seconds']} s, peak {mib(memory['peak_bytes'])} MiB, left "
                                     f"{mib(left_bytes)} MiB, in the kernel {json.dumps(probe)}{', ERROR ' + error if error else ''}\n")
                print(f"leaks: {relative} {rows[-1]['seconds']} s, left {mib(left_bytes)} MiB {json.dumps(probe)} {error}", flush=True)
                run.record["steps"]["leaks"] = leaks_result(rows, stopped, args)
                run.write()
    finally:
        kernel.close()
    return leaks_result(rows, stopped, args)


def leaks_result(rows: list[dict], stopped: list[str], args) -> dict:
    """Growth of what the notebooks leave behind: device-wide on a GPU, simulated device arrays in the simulator."""
    def reading(row: dict) -> tuple[str, int | None]:
        if row["left_bytes"] is not None:
            return "device memory in use (NVML, every process)", row["left_bytes"]
        if "context_used_bytes" in row["probe"]:
            return "device memory in use (cuMemGetInfo in the kernel)", row["probe"]["context_used_bytes"]
        return "simulated device arrays alive (simulator)", row["probe"].get("simulated_bytes")

    readings = [reading(r) for r in rows]
    kinds = {kind for kind, _ in readings}
    device = not any(kind.startswith("simulated") for kind in kinds)
    values = [value for _, value in readings]
    known = [v for v in values if v is not None]
    growth = max(known) - known[0] if len(known) >= 2 else 0
    worst = None
    for before, row, value in zip(values, rows[1:], values[1:]):
        if before is not None and value is not None and (worst is None or value - before > worst[1]):
            worst = (row["notebook"], value - before)
    tolerance = args.leak_tolerance * 2**20 if device else 0  # the simulator's arrays are tiny: none may stay
    failed = [r for r in rows if r["error"]]
    not_small = [r["notebook"] for r in rows if args.small_card and not emulated(r["probe"].get("device_memory_bytes"), args.small_card)]
    leak = growth > tolerance or len(kinds) > 1 or bool(not_small)  # readings of two kinds cannot be set against each other
    status = "failed" if failed or leak else ("incomplete" if stopped or len(known) < 2 else "ok")
    return {"status": status, "small_card": args.small_card or None,
            "measured": "; ".join(sorted(kinds)) or "nothing",
            "growth_bytes": growth, "tolerance_bytes": tolerance, "largest_step": {"notebook": worst[0], "bytes": worst[1]} if worst else None,
            "peak_bytes": max((r["peak_bytes"] for r in rows if r["peak_bytes"] is not None), default=None),
            "counts": {"notebooks": len(rows), "passed": len(rows) - len(failed), "failed": len(failed), "not run": len(stopped)},
            "not_emulated": not_small, "notebooks": rows, "not_run": stopped, "log": "logs/leaks.log"}


def run_solution(path: Path, run: Run, env: dict[str, str], runs: int, sampler: PeakSampler | None) -> dict | None:
    """One solution notebook: all cells once (as nbval), then its check cells until each ran `runs` times; speeds per check.

    None when the call's budget has no time left for it.
    """
    import nbformat

    if run.left() is not None and run.left() < 45:
        return None
    notebook = nbformat.read(path, as_version=4)
    relative = str(path.relative_to(ROOT))
    # the card as the course sees it, read before the clock and the sampled window start (that process is not the notebook)
    device_memory_bytes = course_memory_bytes(tuple(sorted(env.items())))
    begin = time.monotonic()
    checks: dict[str, dict] = {}
    seen = 0
    memory: dict = {"peak_bytes": None}
    window = sampler.window() if sampler is not None else contextlib.nullcontext(memory)
    error, cells = "", 0
    speed_log = run.out / ".speed" / f"{path.stem}.jsonl"
    speed_log.parent.mkdir(exist_ok=True)
    speed_log.write_text("")
    try:
        kernel = Kernel(env={**env, "GPUCOURSE_SPEED_LOG": str(speed_log)}, cwd=path.parent)
    except Exception as exc:  # noqa: BLE001 - recorded as this notebook's failure
        return {"notebook": relative, "seconds": round(time.monotonic() - begin, 1), "cells": 0, "checks": {}, "peak_bytes": None,
                "error": f"the kernel did not start: {type(exc).__name__}: {exc}", "history_available": False}

    def speeds() -> list[dict] | None:
        """The speed comparisons logged since the last look (gpucourse.checks.speed, GPUCOURSE_SPEED_LOG); None: no log."""
        nonlocal seen
        if not speed_log.exists():
            return None
        entries = [json.loads(line) for line in speed_log.read_text().splitlines() if line.strip()]
        new, seen = entries[seen:], len(entries)
        return new

    try:
        with window as memory:
            for cell in code_cells(notebook):
                ok, text, _ = kernel.run(cell.source, run.cell_timeout())
                cells += 1
                if is_check_cell(cell):
                    name = cell.metadata["nbgrader"].get("grade_id")
                    checks[name] = {"runs": 1, "failures": [] if ok else [first_error(text)], "speeds": speeds() or []}
                if not ok:
                    error = first_error(text)
                    break
            for _ in range(runs - 1):
                if error or (run.left() is not None and run.left() < 30):
                    break
                for cell in (c for c in code_cells(notebook) if is_check_cell(c)):
                    name = cell.metadata["nbgrader"].get("grade_id")
                    if name not in checks or not (checks[name]["speeds"] or run.args.repeat_all_checks):
                        continue  # a check that timed nothing gives the same verdict every time: once is enough
                    ok, text, _ = kernel.run(cell.source, run.cell_timeout())
                    checks[name]["runs"] += 1
                    if not ok:
                        checks[name]["failures"].append(first_error(text))
                    checks[name]["speeds"] += speeds() or []
            history = speeds()
    finally:
        kernel.close()
    return {"notebook": relative, "seconds": round(time.monotonic() - begin, 1), "cells": cells, "error": run.scrub(error),
            "peak_bytes": memory.get("peak_bytes"), "history_available": history is not None,
            "device_memory_bytes": device_memory_bytes,
            "checks": {name: {**check, "failures": [run.scrub(f) for f in check["failures"]]} for name, check in checks.items()}}


def step_solutions(run: Run, small: bool) -> dict:
    """Solution notebooks (nbval) and their check cells `--check-runs` times; normally side by side, as a small card one by one."""
    args = run.args
    env = {"GPUCOURSE_TIMING_LOCK": str(run.out / ".timing.lock")}
    if small:
        env["GPUCOURSE_DEVICE_MEMORY"] = args.small_card
    jobs = 1 if small else max(1, args.solution_jobs)
    paths = notebooks_of("solutions", args.chapter)
    name = "solutions-small" if small else "solutions"
    rows: list[dict] = []
    stopped: list[str] = []
    if jobs == 1:
        with PeakSampler(run.memory) as sampler:
            for path in paths:
                row = run_solution(path, run, env, args.check_runs, sampler)
                if row is None:
                    stopped.append(str(path.relative_to(ROOT)))
                    continue
                rows.append(row)
                log_solution(run, name, row)
                run.record["steps"][name] = solutions_result(rows, stopped, jobs, args, small)
                run.write()
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for path, row in zip(paths, pool.map(lambda p: run_solution(p, run, env, args.check_runs, None), paths)):
                if row is None:
                    stopped.append(str(path.relative_to(ROOT)))
                    continue
                rows.append(row)
                log_solution(run, name, row)
    return solutions_result(rows, stopped, jobs, args, small)


def log_solution(run: Run, name: str, row: dict) -> None:
    lines = [f"{row['notebook']}: {row['seconds']} s, {row['cells']} cells{', ERROR ' + row['error'] if row['error'] else ''}"]
    for check, result in row["checks"].items():
        ratios = ", ".join(f"{s['ratio']:.3f}" for s in result["speeds"])
        lines.append(f"  {check}: {result['runs']} run(s), {len(result['failures'])} failed" + (f"; speed ratios {ratios}" if ratios else ""))
        lines += [f"    {failure}" for failure in result["failures"]]
    run.log(f"{name}.log", "\n".join(lines) + "\n")
    print(lines[0], flush=True)


def solutions_result(rows: list[dict], stopped: list[str], jobs: int, args, small: bool) -> dict:
    checks = []
    for row in rows:
        for name, result in row["checks"].items():
            ratios = [s["ratio"] for s in result["speeds"] if s.get("ratio") is not None]
            bars = {s.get("bar") for s in result["speeds"]} - {None}
            lowest = min(ratios) if ratios else None
            bar = min(bars) if bars else None
            checks.append({"notebook": row["notebook"], "check": name, "runs": result["runs"], "failed_runs": len(result["failures"]),
                           "exercise": next((s.get("exercise") for s in result["speeds"]), None), "speed_comparisons": len(ratios),
                           "lowest_ratio": lowest, "bar": bar,
                           "margin": round(lowest / bar - 1, 4) if lowest is not None and bar else None,
                           "first_failure": result["failures"][0] if result["failures"] else ""})
    failed_notebooks = [r for r in rows if r["error"]]
    failed_checks = [c for c in checks if c["failed_runs"]]
    no_history = [r["notebook"] for r in rows if not r["history_available"]]
    not_small = [r["notebook"] for r in rows if small and not emulated(r.get("device_memory_bytes"), args.small_card)]
    status = "failed" if failed_notebooks or failed_checks or no_history or not_small else ("incomplete" if stopped else "ok")
    return {"status": status, "small_card": args.small_card if small else None, "notebooks_at_a_time": jobs, "check_runs": args.check_runs,
            "counts": {"notebooks": len(rows), "failed notebooks": len(failed_notebooks), "checks": len(checks),
                       "checks that failed a run": len(failed_checks), "not run": len(stopped)},
            "no_speed_history": no_history, "not_emulated": not_small, "notebooks": rows, "checks": checks, "not_run": stopped,
            "log": f"logs/{'solutions-small' if small else 'solutions'}.log"}


# -- the Markdown record ---------------------------------------------------------------------------------------------
def render_markdown(record: dict) -> str:
    lines = [f"# GPU CI record, {record['date']}", "",
             f"- GPU: {record['gpu']}" + (f" (x{record['gpu_count']})" if record.get("gpu_count", 0) > 1 else "")
             + (f", {record['gpu_memory']}" if record.get("gpu_memory") else ""),
             f"- driver: {record.get('driver') or '—'}, ECC: {record.get('ecc') or '—'}",
             f"- versions: {versions_in_words(record.get('versions'))}",
             f"- the course's commit: {record.get('commit') or 'UNKNOWN'} (from {record.get('commit_source')})", ""]
    for number, call in enumerate(record["calls"], 1):
        lines.append(f"- call {number}, {call['started']}, {call['seconds']} s: `{call['command']}`")
    machine = sum(call["seconds"] or 0 for call in record["calls"])
    lines += [f"- in all {machine / 60:.1f} min over {len(record['calls'])} call(s)"]
    if record.get("executed_as"):
        lines.append(f"- the executed copies in executed/: {record['executed_as']}")
    lines.append("")
    steps = record["steps"]
    lines += ["| step | status | counts | seconds |", "| --- | --- | --- | --- |"]
    for name, step in steps.items():
        counts = ", ".join(f"{k} {v}" for k, v in step.get("counts", {}).items())
        lines.append(f"| {name} | {step['status']} | {counts} | {step.get('seconds', '')} |")
    lines += [f"| {name} | not run (no call of this record ran it) |  |  |" for name in STEPS if name not in steps]
    lines.append("")
    if "tests" in steps:
        tests = steps["tests"]
        lines += ["## Tests", "", f"{tests.get('workers')} workers side by side, then the `timing` tests alone; seconds per phase: "
                  f"{tests.get('phase_seconds')}.", ""]
        if tests.get("timed_beside_others"):
            lines += ["Tests that timed GPU work beside others (run again alone; add them to tests/timing_tests.txt): "
                      + ", ".join(f"`{t}`" for t in tests["timed_beside_others"]), ""]
        lines += [f"- FAILED `{f['test']}`: {f['message']}" for f in tests.get("failures", [])] + [""]
    for name in ("chapters", "leaks"):
        if name not in steps:
            continue
        step = steps[name]
        if name == "chapters":
            total = sum(r["seconds"] for r in step["notebooks"])
            slowest = max(step["notebooks"], key=lambda r: r["seconds"], default=None)
            lines += ["## Chapter notebooks (a kernel each, nothing beside them; a cell error fails a notebook, as nbval's)", "",
                      f"{len(step['notebooks'])} notebooks in {total / 60:.1f} min"
                      + (f", the slowest {slowest['notebook']} ({slowest['seconds']} s)" if slowest else "")
                      + "; their executed copies are in executed/.", "",
                      "| notebook | wall time (s) | cells | peak device memory (MiB) | in use at its end (MiB) | error |",
                      "| --- | --- | --- | --- | --- | --- |"]
            lines += [f"| {r['notebook']} | {r['seconds']} | {r['cells']} | {mib(r['peak_bytes'])} | {mib(r['end_bytes'])} | {r['error']} |"
                      for r in step["notebooks"]]
        else:
            card = f"as a card of {step['small_card']}" if step.get("small_card") else "on the whole card"
            lines += [f"## Leaks: every chapter notebook in one kernel, {card}", "",
                      "After each notebook: its names deleted (`%reset -f`), figures closed, garbage collected, CuPy's pools and "
                      "FFT plan cache and Numba's pending frees emptied; then the memory in use is read.", "",
                      "| notebook | wall time (s) | peak device memory (MiB) | left in use after (MiB) | in the kernel | error |",
                      "| --- | --- | --- | --- | --- | --- |"]
            lines += [f"| {r['notebook']} | {r['seconds']} | {mib(r['peak_bytes'])} | {mib(r['left_bytes'])} | "
                      f"{', '.join(f'{k} {size(v)}' if k.endswith('bytes') else f'{k} {v}' for k, v in r['probe'].items() if k in LIVE)} | "
                      f"{r['error']} |"
                      for r in step["notebooks"]]
            largest = step.get("largest_step")
            lines += ["", f"Measured: {step['measured']}. Growth over the notebooks (highest left after any, less the first's): "
                      f"**{size(step['growth_bytes'])}** (fails above {size(step['tolerance_bytes'])})"
                      + (f"; largest step {size(largest['bytes'])} at {largest['notebook']}" if largest and largest["bytes"] > 0 else "")
                      + "."]
        if step.get("not_run"):
            lines += ["", "Not run (the call's budget ended): " + ", ".join(step["not_run"])]
        if step.get("not_emulated"):
            lines += ["", f"The course did not see a card of {step['small_card']} (GPUCOURSE_DEVICE_MEMORY had no effect) in: "
                      + ", ".join(step["not_emulated"])]
        lines.append("")
    for name in ("solutions", "solutions-small"):
        if name not in steps or "notebooks" not in steps[name]:  # not run: the table of steps says why
            continue
        step = steps[name]
        card = f", as a card of {step['small_card']}" if step.get("small_card") else ""
        lines += [f"## Solutions{card}: {step['notebooks_at_a_time']} notebook(s) at a time, each timing alone; check cells run "
                  f"{step['check_runs']} times", "",
                  "| notebook | wall time (s) | cells | error |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['notebook']} | {r['seconds']} | {r['cells']} | {r['error']} |" for r in step["notebooks"]]
        lines += ["", "| check | runs | failed runs | speed comparisons | lowest ratio | bar | margin over the bar |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for check in step["checks"]:
            margin = check["margin"]
            flag = "" if margin is None else (" (within 15 %)" if margin < 0.15 else "")
            lines.append(f"| {check['check']} | {check['runs']} | {check['failed_runs']} | {check['speed_comparisons']} | "
                         f"{'—' if check['lowest_ratio'] is None else check['lowest_ratio']} | {'—' if check['bar'] is None else check['bar']} | "
                         f"{'—' if margin is None else f'{margin:+.0%}'}{flag} |")
        if step.get("not_emulated"):
            lines += ["", f"The course did not see a card of {step['small_card']} in: " + ", ".join(step["not_emulated"])]
        if step.get("no_speed_history"):
            lines += ["", "the speed log (GPUCOURSE_SPEED_LOG) was missing in: " + ", ".join(step["no_speed_history"])]
        lines.append("")
    if "report" in steps:
        lines += ["## Then-and-now report", "", steps["report"].get("summary", ""), ""]
    return "\n".join(lines) + "\n"


# -- packing, merging, filing ---------------------------------------------------------------------------------------------
def pack(out: Path) -> Path:
    """Put everything in `out` into out/gpu_ci.tar.gz (paths relative to out); leave gpu_ci.json and gpu_ci.md beside it."""
    archive = out / "gpu_ci.tar.gz"
    members = sorted(p for p in out.iterdir() if p.name != archive.name and not p.name.startswith("."))
    with tarfile.open(archive, "w:gz") as tar:
        for path in members:
            tar.add(path, arcname=path.name)
    for path in sorted(out.iterdir()):
        if path.name in (archive.name, "gpu_ci.json", "gpu_ci.md"):
            continue
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return archive


@contextlib.contextmanager
def opened(source: Path) -> Iterator[Path]:
    """A call's output folder: `source` itself, or an archive (or a folder holding gpu_ci.tar.gz) unpacked in a temporary one."""
    archive = source if source.is_file() else source / "gpu_ci.tar.gz"
    if source.is_dir() and not archive.exists():
        yield source
        return
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")
        yield Path(folder)


def merge(records: list[dict]) -> dict:
    """One record from those of several calls of one commit: their calls in order, each step from the last call that ran it."""
    commits = {r.get("commit") for r in records}
    if len(commits) != 1 or None in commits:
        raise SystemExit(f"the records name different commits (or none): {sorted(map(str, commits))}; a record joins one commit's calls")
    gpus = {(r.get("gpu"), r.get("driver")) for r in records}
    if len(gpus) != 1:
        raise SystemExit(f"the records come from different GPUs or drivers: {sorted(map(str, gpus))}")
    ordered = sorted(records, key=lambda r: r["calls"][0]["started"])
    merged = {**ordered[0], "calls": [call for r in ordered for call in r["calls"]], "steps": {}}
    for record in ordered:
        for name, step in record["steps"].items():
            merged["steps"][name] = combine(name, merged["steps"][name], step) if name in merged["steps"] else step
    merged["date"] = ordered[0]["date"]
    kept = [r["executed_as"] for r in ordered if r.get("executed_as")]
    if kept:  # the executed copies filed are the last call's that kept any (read_calls copies them in this order)
        merged["executed_as"] = kept[-1]
    return merged


def combine(name: str, earlier: dict, later: dict) -> dict:
    """A step of notebooks that two calls ran (each its own chapters, or one going on where the other stopped): the notebooks
    of both, the later run of each. A record never loses a notebook a call of it ran.

    Other steps (tests, report, leaks) are the later call's alone.
    """
    if name not in ("chapters", "solutions", "solutions-small"):
        return later
    by_notebook = {row["notebook"]: row for row in earlier["notebooks"]} | {row["notebook"]: row for row in later["notebooks"]}
    rows = [by_notebook[n] for n in sorted(by_notebook)]
    stopped = [n for n in dict.fromkeys(earlier["not_run"] + later["not_run"]) if n not in by_notebook]
    if name == "chapters":
        result = chapters_result(rows, stopped)
    else:
        options = argparse.Namespace(check_runs=later["check_runs"], small_card=later["small_card"])
        result = solutions_result(rows, stopped, later["notebooks_at_a_time"], options, small=name == "solutions-small")
    result["seconds"] = round(earlier.get("seconds", 0) + later.get("seconds", 0), 1)
    return result


def budget_stops_as_not_run(record: dict) -> list[str]:
    """Chapter notebooks that a record made before STOPPED_BY_BUDGET lists as failed when the call's budget cut a cell off.

    Such a row's error is the interrupted cell's timeout, shorter than a cell may take: the notebook is moved to the step's
    not-run list (its executed copy is a partial run). Returns the notebooks moved.
    """
    step = record.get("steps", {}).get("chapters")
    if not step or "notebooks" not in step:
        return []
    limit = float(record.get("cell_timeout", 900))
    moved = [row["notebook"] for row in step["notebooks"] if (after := interrupted_after(row.get("error"))) is not None and after < limit]
    if moved:
        rows = [row for row in step["notebooks"] if row["notebook"] not in moved]
        record["steps"]["chapters"] = {**chapters_result(rows, list(dict.fromkeys(step.get("not_run", []) + moved))),
                                       "seconds": step.get("seconds")}
    return moved


def read_calls(sources: list[Path], into: Path | None = None) -> list[dict]:
    """The records of several calls; with `into`, their logs, executed copies and report copied there (logs/ names per call)."""
    records = []
    for number, source in enumerate(sources, 1):
        with opened(source) as folder:
            record = json.loads((folder / "gpu_ci.json").read_text())
            cut_off = budget_stops_as_not_run(record)
            records.append(record)
            if into is None:
                continue
            for log in sorted((folder / "logs").glob("*")) if (folder / "logs").exists() else []:
                target = into / "logs" / log.name
                if target.exists():
                    target = into / "logs" / f"call{number}_{log.name}"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(log, target)
            for sub in ("executed", "report"):
                if (folder / sub).exists():
                    shutil.copytree(folder / sub, into / sub, dirs_exist_ok=True)
            for notebook in cut_off:  # a partial run is no executed copy
                (into / "executed" / Path(notebook).parent.name / Path(notebook).name).unlink(missing_ok=True)
    return records


def command_merge(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gpu_ci.py merge", description="Join the records of several calls of one commit.")
    parser.add_argument("sources", nargs="+", type=Path, help="output folders or gpu_ci.tar.gz archives of the calls")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    merged = merge(read_calls(args.sources, args.out))
    (args.out / "gpu_ci.json").write_text(json.dumps(merged, indent=1) + "\n")
    (args.out / "gpu_ci.md").write_text(render_markdown(merged))
    print(f"merged {len(args.sources)} call(s) into {args.out}: " + ", ".join(f"{k} {v['status']}" for k, v in merged["steps"].items()))
    return 0


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def cuda_wheels(record: dict) -> tuple[str, str] | None:
    """(CUDA major, CuPy version) of a record made on other CUDA wheels than the GPU image's CUDA 13 ones; None for those."""
    found = re.search(r"'cupy-cuda(\d+)x': '([^']+)'", str(record.get("versions", "")))
    return (found.group(1), found.group(2)) if found and found.group(1) != "13" else None


def command_file(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gpu_ci.py file", description="Join the calls' records and file them in measurements/.")
    parser.add_argument("sources", nargs="+", type=Path, help="output folders or gpu_ci.tar.gz archives of the calls")
    parser.add_argument("--measurements", type=Path, default=ROOT / "measurements")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as staging:
        staged = Path(staging)
        merged = merge(read_calls(args.sources, staged))
        stack = cuda_wheels(merged)
        if stack and merged.get("executed_as"):  # the website's note on each page names the stack (book/build.py)
            merged["executed_as"] += f", CuPy and Numba on the CUDA {stack[0]} wheels (cupy-cuda{stack[0]}x {stack[1]})"
        folder = args.measurements / "gpu_ci" / (f"{merged['date']}_{gpu_short_name(merged)}" + (f"_cuda{stack[0]}" if stack else ""))
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / "gpu_ci.json").write_text(json.dumps(merged, indent=1) + "\n")
        (folder / "gpu_ci.md").write_text(render_markdown(merged))
        for sub in ("logs", "executed"):
            if (staged / sub).exists():
                shutil.copytree(staged / sub, folder / sub)
        if (staged / "report" / "report.json").exists():  # merged by chapter: a report of some chapters replaces only those
            sys.path.insert(0, str(ROOT))
            from gpucourse.thenandnow import file_into

            file_into(staged / "report", args.measurements / "thenandnow")
    size = folder_size(folder)
    print(f"filed {folder.relative_to(args.measurements.parent) if folder.is_relative_to(args.measurements.parent) else folder}: "
          f"{size / 2**20:.1f} MiB ({folder_size(folder / 'executed') / 2**20 if (folder / 'executed').exists() else 0:.1f} MiB of "
          "executed notebooks)" + ("; the report in thenandnow/" if (args.measurements / "thenandnow" / "report.md").exists() else ""))
    return 0


# -- the main command ----------------------------------------------------------------------------------------------------------
def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--commit", help="the course's commit this tree is (recorded; see above for the fallbacks)")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, from {','.join(STEPS)}")
    parser.add_argument("--chapter", type=int, action="append", help="notebooks, report and solutions: only this chapter")
    parser.add_argument("--budget", type=float, default=0, help="this call's wall-clock limit in s (0: none)")
    parser.add_argument("--stale", action="store_true", help="chapters step: only the notebooks that no GPU record of their current "
                        "code holds (the website's pages that wait; chapter 4's need a record of 2 or more GPUs)")
    parser.add_argument("--small-card", default="8GiB",
                        help="GPUCOURSE_DEVICE_MEMORY of the leaks and solutions-small steps ('none': the whole card)")
    parser.add_argument("--leak-tolerance", type=float, default=LEAK_TOLERANCE_MIB, help="MiB of growth that fails the leak step")
    parser.add_argument("--tests", default="tests", help="tests step: comma-separated test files or folders (default: tests)")
    parser.add_argument("--test-workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)),
                        help="pytest-xdist workers for the tests that time nothing (1: every test alone)")
    parser.add_argument("--solution-jobs", type=int, default=4, help="solution notebooks at a time in the solutions step")
    parser.add_argument("--check-runs", type=int, default=5, help="times each check cell of a solution runs")
    parser.add_argument("--repeat-all-checks", action="store_true",
                        help="run every check cell --check-runs times (default: only those that compare speeds; the others once)")
    parser.add_argument("--cell-timeout", type=float, default=900, help="s a notebook cell may take")
    parser.add_argument("--leaks-executed", action="store_true",
                        help="leaks: keep the executed copies of the chapter notebooks too (for the website, when no chapters step runs)")
    parser.add_argument("--plan", action="store_true", help="print the steps and what they are expected to take, and stop")
    parser.add_argument("--pack", action="store_true", help="put every output into OUT/gpu_ci.tar.gz beside gpu_ci.json and gpu_ci.md")
    args = parser.parse_args(argv)
    args.steps = [s for s in args.steps.split(",") if s]
    args.tests = [t for t in args.tests.split(",") if t]
    args.small_card = None if args.small_card.strip().lower() in ("", "none", "0") else args.small_card.strip()
    if args.small_card:
        memory_size(args.small_card)  # a clear error now, not after an hour
    unknown = set(args.steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown step(s) {sorted(unknown)}; choose from {', '.join(STEPS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "merge":
        return command_merge(argv[1:])
    if argv and argv[0] == "file":
        return command_file(argv[1:])
    args = parse(argv)
    if args.plan:
        total = sum(EXPECTED_SECONDS[s] for s in args.steps)
        print("\n".join(f"{s}: about {EXPECTED_SECONDS[s]} s on an H200 (an estimate)" for s in args.steps) + f"\nin all about {total} s")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    run = Run(args, argv)
    if not run.record["commit"]:
        print(f"warning: the course's commit is unknown ({run.record['commit_source']}); give --commit SHA", flush=True)
    run.write()
    for step in args.steps:
        left = run.left()
        if left is not None and left < min(60, EXPECTED_SECONDS[step] / 3):
            run.record["steps"][step] = {"status": "not run", "why": f"{left:.0f} s left of the call's budget"}
            run.write()
            continue
        begin = time.monotonic()
        print(f"== {step}", flush=True)
        if step == "tests":
            result = step_tests(run)
        elif step == "report":
            result = step_report(run)
        elif step == "solutions":
            result = step_solutions(run, small=False)
        elif step == "solutions-small":
            result = step_solutions(run, small=True)
        elif step == "chapters":
            result = step_chapters(run)
        else:
            result = step_leaks(run)
        result["seconds"] = round(time.monotonic() - begin, 1)
        run.record["steps"][step] = result
        run.record["calls"][0]["steps"].append(step)
        run.write()
        print(f"== {step}: {result['status']} in {result['seconds']} s", flush=True)
    (run.out / ".timing.lock").unlink(missing_ok=True)
    for leftover in ("tests_timed.txt", "tests_again.txt"):
        if (run.out / leftover).exists():
            shutil.move(run.out / leftover, run.logs / leftover)
    run.write()
    if args.pack:
        pack(run.out)
    statuses = {name: step["status"] for name, step in run.record["steps"].items()}
    print(", ".join(f"{k}: {v}" for k, v in statuses.items()))
    return 0 if all(v == "ok" for v in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
