#!/usr/bin/env python3
"""Which CUDA stack does this Python really use? Versions, one Numba and one CuPy kernel, the libraries they loaded.

    python3 tools/cuda_stack_probe.py [--expect-major 12]

Run on a GPU machine before a run that claims a stack (for example the CUDA 12 wheels of the `cuda12` extra on a
machine whose image has CUDA 13): it compiles and launches a course kernel (Numba) and a CuPy kernel (NVRTC), sorts with CuPy,
then lists every NVIDIA library mapped into the process (/proc/self/maps) with its path. With --expect-major it exits
non-zero when a toolkit library of another CUDA major version was loaded (the driver, libcuda, is not counted: one
driver serves every toolkit up to its own version). Prints Markdown.
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

DISTRIBUTIONS = ("numpy", "numba", "numba-cuda", "cuda-bindings", "cuda-core", "cuda-pathfinder", "cupy-cuda12x", "cupy-cuda13x",
                 "nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime-cu12", "nvidia-nvjitlink-cu12",
                 "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-nvjitlink", "nvidia-cuda-nvcc")
TOOLKIT_LIBRARY = re.compile(r"lib(cudart|nvrtc|nvrtc-builtins|nvvm|nvJitLink|cublas|cublasLt|cufft|curand|cusparse|cusolver)[.-]")


def loaded_libraries() -> list[str]:
    """Paths of the NVIDIA libraries mapped into this process, driver included."""
    found = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if TOOLKIT_LIBRARY.search(Path(path).name) or Path(path).name.startswith("libcuda.so"):
            found.add(path)
    return sorted(found)


def major_of(path: str) -> int | None:
    """The CUDA major version a toolkit library's file name or folder names (libnvrtc.so.12, .../cu13/...), if any."""
    name = Path(path).name
    if name.startswith("libnvvm"):  # libnvvm.so carries no major: its folder does (cuda_nvcc is CUDA 12's wheel)
        found = re.search(r"/cu(\d{2})/", path) or re.search(r"cuda-(\d{2})", path)
        return int(found.group(1)) if found else (12 if "/cuda_nvcc/" in path else None)
    found = re.search(r"\.so\.(\d+)", name) or re.search(r"(?:builtins|cu)(\d{2})", path)
    return int(found.group(1)) if found else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expect-major", type=int, help="fail if a toolkit library of another CUDA major was loaded")
    args = parser.parse_args()
    lines = ["| distribution | version | where |", "| --- | --- | --- |"]
    for name in DISTRIBUTIONS:
        try:
            found = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        lines.append(f"| {name} | {found.version} | {Path(str(found.locate_file(''))).as_posix()} |")
    print("\n".join(lines) + "\n")

    import numpy as np
    from numba import cuda

    import gpucourse
    from gpucourse.kernels import intro

    values = gpucourse.to_device(np.arange(1000, dtype=np.float32))
    intro.increment(values, np.float32(1.0))  # one of the course's Numba kernels, compiled by this stack's NVVM
    assert np.array_equal(gpucourse.to_host(values), np.arange(1000, dtype=np.float32) + 1), "the Numba kernel gave a wrong result"
    from numba.cuda.cudadrv import nvvm

    print(f"Numba: a course kernel compiled and ran; NVVM {'.'.join(map(str, nvvm.NVVM().get_version()))}, "
          f"driver CUDA {cuda.cudadrv.driver.driver.get_version()}")

    import cupy as cp

    squares = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * x", "probe_square")  # compiled by NVRTC
    data = cp.asarray(np.random.default_rng(1).random(1 << 16, dtype=np.float32))
    assert float(abs(squares(data).sum() - (data * data).sum())) < 1e-2 * float((data * data).sum()), "CuPy's kernels disagree"
    ordered = cp.sort(data)
    assert bool((ordered[1:] >= ordered[:-1]).all()), "cupy.sort did not sort"
    runtime = cp.cuda.runtime
    print(f"CuPy {cp.__version__}: an NVRTC kernel, a reduction and a sort ran; runtime {runtime.runtimeGetVersion()}, "
          f"NVRTC {'.'.join(map(str, cp.cuda.nvrtc.getVersion()))}, driver {runtime.driverGetVersion()}\n")

    others = []
    print("Libraries mapped into this process:\n")
    for path in loaded_libraries():
        major = None if Path(path).name.startswith("libcuda.so") else major_of(path)
        if args.expect_major and major is not None and major != args.expect_major:
            others.append(path)
        print(f"- `{path}`" + ("" if major is None else f" (CUDA {major})"))
    if args.expect_major:
        print(f"\nToolkit libraries of another CUDA major than {args.expect_major}: " + (", ".join(others) if others else "none"))
    return 1 if others else 0


if __name__ == "__main__":
    sys.exit(main())
