#!/usr/bin/env python3
"""Compile every kernel of the course for every GPU class and check each against that class's limits.

Every Numba kernel of gpucourse.kernels.course_kernels() goes through numba-cuda's NVVM to PTX, every CUDA C source of
gpucourse.kernels.cuda_c_sources() through NVRTC (CuPy's binding) to PTX, and ptxas (the nvidia-cuda-nvcc wheel)
assembles each PTX for the architecture and reports its registers and shared memory, which are checked with
gpucourse.architectures.check_launch against the launch shape the course uses. None of this needs a GPU:

    python tools/compile_kernels.py [--arch sm_75 ...] [--json FILE]

It exits 1 when a kernel fails to compile or does not fit. Without a usable GPU it imports gpucourse for compiling
only (see `import_for_compiling`): numba.cuda is loaded for the GPU target and no kernel is ever launched.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

# numba-cuda's typing of a call to a device function asks the current device for its compute capability (to compile
# the device function for it); without a GPU there is none, so the architecture being compiled for answers instead.
_TARGET = {"cc": (7, 5)}


def import_for_compiling():
    """Import gpucourse with numba.cuda's GPU target, on a machine with or without a GPU; returns the package."""
    if "gpucourse" in sys.modules:
        raise RuntimeError("import_for_compiling() must run before gpucourse is imported")
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    os.environ.pop("GPUCOURSE_MODE", None)
    spec_path = Path(__import__("importlib.util").util.find_spec("gpucourse").origin).parent
    # Load gpucourse.environment alone (a bare package object, so that the package's __init__ does not run yet) and ask
    # the driver, as gpucourse.mode will.
    bare = types.ModuleType("gpucourse")
    bare.__path__ = [str(spec_path)]
    sys.modules["gpucourse"] = bare
    import gpucourse.environment as environment

    probe = environment.probe_driver()
    if not probe.usable:
        # No GPU: tell gpucourse.mode that a device is there, so that it loads numba.cuda for the GPU target. Nothing
        # here launches a kernel or asks the device anything but its compute capability, which _TARGET answers.
        environment.probe_driver = lambda: environment.DriverProbe(loaded=True, driver_version=None,
                                                                   devices=({"ordinal": 0, "name": "none: compiling only"},))
        import numba.cuda.dispatcher as dispatcher

        dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=_TARGET["cc"])
    del sys.modules["gpucourse"]
    import gpucourse

    assert gpucourse.MODE == "gpu", gpucourse.MODE
    return gpucourse


def ptxas_path() -> Path:
    """ptxas from the nvidia-cuda-nvcc wheel (CUDA 12) or the cuda-toolkit's nvcc wheel, else the PATH's."""
    with contextlib.suppress(ImportError):
        import nvidia.cuda_nvcc

        for folder in nvidia.cuda_nvcc.__path__:
            if (Path(folder) / "bin" / "ptxas").exists():
                return Path(folder) / "bin" / "ptxas"
    for candidate in Path(sys.prefix).glob("lib/python*/site-packages/nvidia/cu*/bin/ptxas"):
        return candidate
    import shutil

    found = shutil.which("ptxas")
    if found is None:
        raise SystemExit("ptxas not found: install the course's cuda12 or cuda13 extra (nvidia-cuda-nvcc)")
    return Path(found)


_PTXAS_LINE = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")


def ptxas_resources_relocatable(ptx: str, arch, max_registers: int | None = None):
    """ptxas_resources for PTX that calls functions linked in later (ptxas -c)."""
    return ptxas_resources(ptx, arch, max_registers, relocatable=True)


def ptxas_resources(ptx: str, arch, max_registers: int | None = None, relocatable: bool = False):
    """Assemble PTX for `arch` with ptxas -v; the Resources of each entry function, by name."""
    from gpucourse.architectures import Resources

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        command = [str(ptxas_path()), f"-arch={arch.sm}", "-v", str(source), "-o", str(Path(folder) / "kernel.cubin")]
        if max_registers:
            command.insert(1, f"--maxrregcount={max_registers}")
        if relocatable:
            command.insert(1, "-c")
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0 and "Unresolved extern function" in result.stderr and "-c" not in command:
        # a helper numba-cuda links in at load time (array reshape's): assemble as relocatable code, as the linker would
        return ptxas_resources_relocatable(ptx, arch, max_registers)
    if result.returncode != 0:
        raise RuntimeError(f"ptxas {arch.sm}: {result.stderr.strip()[-2000:]}")
    found, name, spill, local = {}, None, 0, 0
    for line in result.stderr.splitlines():
        if "Compiling entry function" in line:
            name = line.split("'")[1]
        elif "bytes stack frame" in line:
            numbers = [int(n) for n in re.findall(r"(\d+) bytes", line)]
            local, spill = numbers[0], numbers[1] + numbers[2]
        elif (match := _PTXAS_LINE.search(line)) and name is not None:
            found[name] = Resources(int(match.group(1)), int(match.group(2) or 0), local, spill)
            name = None
    return found


_LIBRARIES: dict[str, object] = {}


def numba_ptx(case, arch) -> str:
    """PTX of a registered Numba kernel for `arch`, with the kernel's own options: typed and lowered once, NVVM per arch."""
    from numba import cuda
    from numba.cuda import compiler

    options = getattr(case.kernel, "targetoptions", {})
    settings = {"fastmath": bool(options.get("fastmath")), "opt": options.get("opt", True) is not False}
    _TARGET["cc"] = arch.compute_capability
    if not hasattr(compiler, "_compile_pyfunc_with_fixup"):  # another numba-cuda: the public call, all of it per architecture
        ptx, _ = cuda.compile_ptx(case.kernel.py_func, case.signature, cc=arch.compute_capability, **settings)
        return ptx
    # what cuda.compile_ptx does, with the code library kept: its LLVM IR goes through NVVM once for each architecture
    if case.name not in _LIBRARIES:
        _LIBRARIES[case.name], _ = compiler._compile_pyfunc_with_fixup(case.kernel.py_func, case.signature, device=False, abi="numba",
                                                                       cc=arch.compute_capability, **settings)
    (ptx,) = _LIBRARIES[case.name].get_asm_strs(cc=arch.compute_capability)
    return ptx


def nvrtc_ptx(source, arch) -> str:
    """PTX of a registered CUDA C source for `arch`, with every option NVRTC gets when the course builds it."""
    from gpucourse.compilation import nvrtc_compile

    major, minor = arch.compute_capability
    return nvrtc_compile(source.code, source.name, source.nvrtc_options, f"compute_{major}{minor}").decode()


def supported_architectures(wanted):
    """The table's architectures that this toolkit compiles for (NVRTC's list; NVVM and ptxas come from the same release)."""
    from cupy_backends.cuda.libs import nvrtc

    known = set(nvrtc.getSupportedArchs())
    usable = [arch for arch in wanted if arch.compute_capability[0] * 10 + arch.compute_capability[1] in known]
    return usable, [arch.sm for arch in wanted if arch not in usable]


NVVM_12_FLOAT_ATOMICS = ("CUDA 12.9's NVVM rejects the atomicrmw fadd that numba-cuda emits for a float atomic add when compiling for "
                         "compute capability 10.0 or 12.0 (ERROR_INVALID_IR; numba-cuda issue #603: the NVVM verifier of CUDA 12.9, "
                         "fixed in CUDA 13.0). On a Blackwell GPU use a CUDA 13 driver and the cuda13 extra.")


def known_nvvm_limit(case, arch, error: str, versions: dict) -> bool:
    """True for the one failure the CUDA 12.9 compilers are known for: a float atomic add for compute capability 10.0 or 12.0."""
    if "ERROR_INVALID_IR" not in error or arch.compute_capability < (10, 0) or not versions.get("nvidia-cuda-nvcc-cu12"):
        return False
    from gpucourse.architectures import ARCHITECTURES

    hopper = numba_ptx(case, ARCHITECTURES["sm_90"])  # the same kernel, where NVVM takes it: does it add floats atomically?
    return re.search(r"\b(atom|red)\.[a-z.]*add\.f(32|64)\b", hopper) is not None


def run(arch_names: list[str] | None = None) -> dict:
    """Compile and check everything; the report as a dict (also what --json writes)."""
    import gpucourse  # imported by import_for_compiling()
    from gpucourse import architectures
    from gpucourse.kernels import course_kernels, cuda_c_sources

    wanted = [architectures.ARCHITECTURES[name] for name in (arch_names or list(architectures.ARCHITECTURES))]
    usable, missing = supported_architectures(wanted)
    report = {"gpucourse": gpucourse.__file__, "versions": {}, "architectures": [a.sm for a in usable],
              "not_in_this_toolkit": missing, "kernels": [], "failures": [],
              "known_limits": []}
    from importlib import metadata

    for package in ("numba", "numba-cuda", "cupy-cuda12x", "cupy-cuda13x", "nvidia-cuda-nvcc-cu12", "cuda-bindings"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            report["versions"][package] = metadata.version(package)
    start = time.perf_counter()
    import warnings

    from numba.core.errors import NumbaDeprecationWarning, NumbaPendingDeprecationWarning

    seen = warnings.catch_warnings(record=True)
    caught = seen.__enter__()
    warnings.simplefilter("always", NumbaDeprecationWarning)
    warnings.simplefilter("always", NumbaPendingDeprecationWarning)
    jobs = [("numba", case, numba_ptx) for case in course_kernels()] + [("cuda_c", source, nvrtc_ptx) for source in cuda_c_sources()]
    for kind, case, compile_ptx in jobs:
        for arch in usable:
            row = {"kind": kind, "name": case.name, "arch": arch.sm}
            try:
                found = ptxas_resources(compile_ptx(case, arch), arch, getattr(case.kernel, "targetoptions", {}).get("max_registers")
                                        if kind == "numba" else None)
                if kind == "numba":  # one entry, whatever numba-cuda names it
                    (resources,) = found.values()
                    shapes = {case.name: (resources, case.threads_per_block, case.dynamic_shared_bytes)}
                else:
                    shapes = {name: (found[name], threads, 0) for name, threads in case.entries.items()}
                row["entries"] = {}
                for name, (resources, threads, dynamic) in shapes.items():
                    problems = architectures.check_launch(arch, resources, threads, dynamic)
                    row["entries"][name] = {"threads_per_block": threads, "dynamic_shared_bytes": dynamic, **vars(resources)}
                    if problems:
                        report["failures"].append(f"{name} on {arch.sm}: " + "; ".join(problems))
            except Exception as failed:  # noqa: BLE001 - every failure is reported, the rest still compiled
                row["error"] = f"{type(failed).__name__}: {failed}"[:2000]
                if kind == "numba" and known_nvvm_limit(case, arch, row["error"], report["versions"]):
                    row["known_limit"] = NVVM_12_FLOAT_ATOMICS
                    report["known_limits"].append(f"{case.name} on {arch.sm}")
                else:
                    report["failures"].append(f"{case.name} on {arch.sm}: {row['error']}")
            report["kernels"].append(row)
    seen.__exit__(None, None, None)
    report["deprecations"] = sorted({f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught
                                     if issubclass(w.category, (NumbaDeprecationWarning, NumbaPendingDeprecationWarning))})
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", action="append", help="an architecture of gpucourse.architectures (sm_75 ...); default: all")
    parser.add_argument("--json", type=Path, help="write the whole report here")
    args = parser.parse_args(argv)
    import_for_compiling()
    report = run(args.arch)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    cases = {row["name"] for row in report["kernels"]}
    print(f"{len(cases)} kernels and CUDA C sources x {len(report['architectures'])} architectures "
          f"({', '.join(report['architectures'])}) in {report['seconds']} s; not in this toolkit: {report['not_in_this_toolkit'] or 'none'}")
    for line in report["failures"]:
        print("FAIL", line)
    if report["known_limits"]:
        print(f"known limit of this toolkit ({len(report['known_limits'])}): {NVVM_12_FLOAT_ATOMICS}")
        print("  " + "\n  ".join(report["known_limits"]))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
