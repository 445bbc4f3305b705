#!/usr/bin/env python3
"""What numba-cuda-mlir gives a learner on this machine, on its own (without the course): one line per step.

    python tools/numba_mlir_probe.py        # in an environment with numba_cuda_mlir installed

The steps a course built on it would need: importing it, a simulator for machines without a GPU (the course's
laptop, Binder and CI mode), compiling a kernel to PTX for a chosen architecture, and launching it. On a machine
with no GPU this shows which of them need one; tools/gpu_numba_mlir.py runs it first on a GPU machine.
Exit status 0 whatever the steps give: the lines are the result.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from collections.abc import Callable
from importlib import metadata

SIGNATURE = "void(float32[::1], float32[::1])"


def step(name: str, action: Callable[[], object]) -> bool:
    """Run one step; print '[ok] name: value' or '[fails] name: the error's first line'."""
    try:
        value = action()
    except Exception as failed:  # noqa: BLE001 - every failure is the finding
        text = " ".join(line.strip() for line in str(failed).splitlines() if line.strip())[:300]  # the message on one line
        print(f"[fails] {name}: {type(failed).__name__}" + (f": {text}" if text else ""))
        return False
    print(f"[ok] {name}: {value}")
    return True


def main() -> int:
    print(f"Python {sys.version.split()[0]}")
    for package in ("numba-cuda-mlir", "numba", "numba-cuda", "numpy", "cuda-bindings", "cuda-core"):
        try:
            print(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            print(f"{package} not installed")
    if not step("import numba_cuda_mlir.cuda", lambda: importlib.import_module("numba_cuda_mlir.cuda").__name__):
        return 0
    import numpy as np
    from numba_cuda_mlir import cuda

    folder = os.path.dirname(cuda.__file__)
    step("cuda.is_available()", cuda.is_available)
    step("a simulator (numba_cuda_mlir.cuda.simulator)", lambda: importlib.util.find_spec("numba_cuda_mlir.cuda.simulator") is not None)
    step("its sources read NUMBA_ENABLE_CUDASIM", lambda: any("CUDASIM" in open(path, errors="ignore").read()
                                                              for path in glob.glob(os.path.join(folder, "**", "*.py"), recursive=True)))

    def double(a, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 2 * a[i]

    step("cuda.jit (lazy, nothing compiled yet)", lambda: type(cuda.jit(double)).__name__)
    step("compile_ptx for sm_75 (characters of PTX)", lambda: len(cuda.compile_ptx(double, SIGNATURE, cc=(7, 5))[0]))

    def launch() -> list[float]:
        kernel = cuda.jit(double)
        a = cuda.to_device(np.arange(64, dtype=np.float32))
        out = cuda.device_array(64, np.float32)
        kernel[2, 32](a, out)
        got = out.copy_to_host()
        assert np.array_equal(got, 2 * np.arange(64, dtype=np.float32)), got
        return got[:4].tolist()

    step("launch on device arrays, result checked", launch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
