"""Nsight Compute from a notebook: profile a few kernels of a piece of code run as a script, and show speed of light.

Nsight Compute (`ncu`) profiles a program, not a notebook cell. `profile(code, kernels)` writes
`code` to a script, runs it under ncu in a fresh process (`--clock-control none`: the GPU keeps its
own clocks, as when you time it yourself), and collects, for each kernel named in `kernels`, the
figures that say what bounds it:

* **DRAM %**: bytes moved to and from device memory, as a share of the peak rate;
* **SM %**: the busiest of the multiprocessors' units (issue, arithmetic pipes, load/store), as a
  share of its peak: a kernel near 100 % here and far from it in DRAM is bound by instructions;
* **DRAM bytes**: bytes read from and written to device memory, for the book's *actual throughput*
  (§2.3.3) beside the effective bandwidth a kernel's own byte count gives;
* **achieved occupancy**: warps resident on a multiprocessor, as a share of the most it can hold;
* **top stall**: what the warps wait for most (share of the cycles a warp is resident):
  `long_scoreboard` is a load from memory, `barrier` a `syncthreads`, `mio_throttle` and
  `short_scoreboard` shared memory or shuffles, `math_pipe_throttle` arithmetic, `wait` fixed
  latencies of dependent instructions, `not_selected` a warp ready but another one issued.

Without a GPU (the simulator), without ncu, or without permission to read the GPU's performance
counters, `profile` returns a `ProfileRun` whose `refusal` says which, in one line.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import mode
from .report import Table
from .scripts import run_python

#: Where the CUDA toolkit puts ncu when it is not on the PATH.
NCU_FALLBACKS = ("/usr/local/cuda/bin/ncu",)

#: The metrics collected, by the name this module gives them.
METRICS = {
    "duration_us": "gpu__time_duration.sum",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
}
#: ncu's byte units, in bytes.
BYTE_UNITS = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "KB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1.0}
#: Every stall reason: smsp__warp_issue_stalled_<reason>_per_warp_active.pct.
STALLS = re.compile(r"smsp__warp_issue_stalled_(\w+?)_per_warp_active\.pct")
#: "selected" is the state of a warp that issues: not a stall.
NOT_STALLS = ("selected",)

PERMISSION = "ERR_NVGPUCTRPERM"


@dataclass(frozen=True)
class KernelProfile:
    """One profiled launch: its name, time and speed-of-light figures (percentages of peak)."""

    label: str
    kernel: str
    duration_us: float
    dram_pct: float
    memory_pct: float
    sm_pct: float
    occupancy_pct: float
    registers: int | None
    stalls: dict[str, float] = field(default_factory=dict)
    dram_bytes: float | None = None

    @property
    def actual_throughput_gbs(self) -> float | None:
        """The book's actual throughput (§2.3.3): bytes DRAM read and wrote over the kernel's time, in GB/s; None if not counted."""
        if self.dram_bytes is None or self.duration_us <= 0:
            return None
        return self.dram_bytes / (self.duration_us * 1e3)

    @property
    def top_stall(self) -> tuple[str, float] | None:
        """(reason, % of a warp's resident cycles) of the most common stall, or None when ncu gave none."""
        if not self.stalls:
            return None
        reason = max(self.stalls, key=self.stalls.get)
        return reason, self.stalls[reason]

    @property
    def bound(self) -> str:
        """'memory' when DRAM is the busier of the two, else 'instructions' (the SM's units)."""
        return "memory" if self.dram_pct >= self.sm_pct else "instructions"


@dataclass(frozen=True, repr=False)
class ProfileRun:
    """The kernels one ncu run profiled, or the one-line reason it profiled nothing."""

    profiles: tuple[KernelProfile, ...] = ()
    refusal: str | None = None
    command: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.profiles)

    def __getitem__(self, label: str) -> KernelProfile:
        for profiled in self.profiles:
            if profiled.label == label:
                return profiled
        raise KeyError(f"no kernel labelled {label!r} was profiled; labels: {[p.label for p in self.profiles]}")

    def table(self, title: str = "Nsight Compute: speed of light") -> Table:
        """The profiles as a small table (one row per kernel)."""
        table = Table(["kernel", "time (us)", "DRAM %", "SM %", "achieved occupancy %", "registers", "top stall (% of cycles)"], title=title)
        for p in self.profiles:
            top = p.top_stall
            table.rows.append([p.label, round(p.duration_us, 1), round(p.dram_pct, 1), round(p.sm_pct, 1), round(p.occupancy_pct, 1),
                               p.registers, f"{top[0]} ({top[1]:.0f} %)" if top else None])
        table.notes.append("ncu --clock-control none: the GPU's own clocks; times under the profiler (caches flushed before each "
                           "kernel), not the course's timings.")
        return table

    def __str__(self) -> str:
        return self.refusal if self.refusal else str(self.table())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        if self.refusal:
            import html

            return f"<p>{html.escape(self.refusal)}</p>"
        return self.table()._repr_html_()


def find_ncu(ncu: str | None = None) -> str | None:
    """The ncu executable: `ncu` if given, else on the PATH, else in the CUDA toolkit's usual place; None if none."""
    for candidate in ([ncu] if ncu else ["ncu", *NCU_FALLBACKS]):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def refusal_in(text: str) -> str | None:
    """The one-line reason ncu's output says it could not profile, or None."""
    if PERMISSION in text:
        return (f"Nsight Compute may not read this GPU's performance counters ({PERMISSION}): an administrator must allow it "
                "(the driver option NVreg_RestrictProfilingToAdminUsers=0, or running as root).")
    for line in text.splitlines():
        if line.startswith("==ERROR=="):
            return f"Nsight Compute failed: {line.removeprefix('==ERROR==').strip()}"
    return None


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if not text or text in ("n/a", "N/A"):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def kernel_function(name: str) -> str:
    """The function name in ncu's kernel name: 'module::kernel[abi...](args)' or 'kernel(args)' -> 'kernel'."""
    name = re.split(r"[\[(<]", name, maxsplit=1)[0]
    return name.rsplit("::", 1)[-1].strip()


def parse_raw_csv(text: str, labels: Mapping[str, str] | None = None) -> tuple[KernelProfile, ...]:
    """The profiles in ncu's `--csv --page raw` output: one per kernel row, labelled by the first unused regex of `labels` it matches.

    Lines that are not part of the table (ncu's ==PROF== messages, the program's own output) are skipped.
    Durations are converted to microseconds whatever unit ncu printed.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return ()
    rows = list(csv.reader(io.StringIO("\n".join(line for line in lines[start:] if line.startswith('"')))))
    header, units, data = rows[0], rows[1], rows[2:]
    column = {name: i for i, name in enumerate(header)}
    duration_scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
    profiles = []
    unused = list((labels or {}).items())  # labels are taken in order: two labels may name the same kernel, launched twice
    for row in data:
        if len(row) != len(header):
            continue
        name = row[column["Kernel Name"]]
        function = kernel_function(name)
        matching = [item for item in unused if re.search(item[1], name)]
        if matching:
            label = matching[0][0]
            unused.remove(matching[0])
        else:
            label = next((text for text, pattern in (labels or {}).items() if re.search(pattern, name)), function)
        values = {key: _number(row[column[metric]]) if metric in column else None for key, metric in METRICS.items()}
        scale = duration_scale.get(units[column[METRICS["duration_us"]]].strip(), 1.0) if METRICS["duration_us"] in column else 1.0
        dram = [values[key] * BYTE_UNITS.get(units[column[METRICS[key]]].strip(), 1.0)
                for key in ("dram_read_bytes", "dram_write_bytes") if values[key] is not None]
        stalls = {}
        for metric, index in column.items():
            match = STALLS.fullmatch(metric)
            value = _number(row[index])
            if match and match.group(1) not in NOT_STALLS and value is not None:
                stalls[match.group(1)] = value
        profiles.append(KernelProfile(label, function, (values["duration_us"] or 0.0) * scale, values["dram_pct"] or 0.0,
                                      values["memory_pct"] or 0.0, values["sm_pct"] or 0.0, values["occupancy_pct"] or 0.0,
                                      int(values["registers"]) if values["registers"] is not None else None, stalls,
                                      sum(dram) if len(dram) == 2 else None))
    return tuple(profiles)


def ncu_command(ncu: str, kernels: Sequence[str], log: str | Path, launches: int) -> list[str]:
    """The ncu command line (before the program) that profiles the first `launches` launches of kernels matching `kernels`."""
    metrics = ",".join([*METRICS.values(), "regex:" + STALLS.pattern])
    return [ncu, "--clock-control", "none", "--kernel-name", "regex:" + "|".join(kernels), "--launch-count", str(launches),
            "--metrics", metrics, "--csv", "--page", "raw", "--log-file", str(log)]


def profile(code: str, kernels: Mapping[str, str], *, launches: int | None = None, timeout_s: float = 300.0,
            ncu: str | None = None, keep_log: str | Path | None = None) -> ProfileRun:
    """Run `code` as a script under Nsight Compute and profile the kernels `kernels` names (label -> regex of the kernel name).

    `code` should launch each kernel once (compiling first is fine: ncu profiles kernels, not the
    compiler), in the order of `kernels`; the first `launches` matching launches are profiled (default:
    one per label). Two labels may give the same regex: the kernel's first launch takes the first label.
    `keep_log` copies ncu's raw output there (for the record).
    """
    if mode.is_simulator():
        return ProfileRun(refusal="Nsight Compute reads a GPU's hardware counters: this is Numba's CUDA simulator, so there is nothing "
                                  "to profile (run the notebook on a GPU).")
    executable = find_ncu(ncu)
    if executable is None:
        return ProfileRun(refusal="Nsight Compute (ncu) is not installed here: it comes with the CUDA toolkit (not with the pip "
                                  "wheels); looked on the PATH and in " + ", ".join(NCU_FALLBACKS) + ".")
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "ncu.csv"
        command = ncu_command(executable, list(kernels.values()), log, launches or len(kernels))
        try:
            result = run_python(code, tool=command, timeout_s=timeout_s, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except subprocess.TimeoutExpired:
            return ProfileRun(refusal=f"Nsight Compute took longer than {timeout_s:.0f} s; run the profile from a terminal instead.",
                              command=tuple(command))
        text = log.read_text() if log.exists() else ""
        if keep_log:
            Path(keep_log).write_text(text)
    refusal = refusal_in(text + "\n" + result.stdout + "\n" + result.stderr)
    profiles = parse_raw_csv(text, kernels) or parse_raw_csv(result.stdout, kernels)
    if not profiles:
        tail = " ".join((result.stderr or result.stdout).strip().splitlines()[-2:])
        return ProfileRun(refusal=refusal or f"Nsight Compute profiled no kernel (exit status {result.returncode}): {tail}",
                          command=tuple(command))
    if not any(p.duration_us > 0 for p in profiles):  # the kernels were found, their counters not read
        return ProfileRun(refusal=refusal or (
            f"Nsight Compute found {', '.join(p.kernel for p in profiles)} but printed no value for its counters (nan or n/a): "
            "profile again with nothing else running on the GPU (another program using or profiling it at the same time "
            "can keep the counters from it)."), command=tuple(command))
    return ProfileRun(profiles, None, tuple(command))
