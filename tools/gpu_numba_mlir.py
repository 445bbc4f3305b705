#!/usr/bin/env python3
"""Try the course under numba-cuda-mlir on a GPU machine: chapter 1's notebooks and the tests of gpucourse.launch.

First it runs tools/numba_mlir_probe.py (numba-cuda-mlir on its own: compile for sm_75, launch, simulator or not).

numba-cuda-mlir is numba-cuda's successor (its own package, `numba_cuda_mlir.cuda`; no simulator). The course imports
`numba.cuda`, so this script runs everything with `numba.cuda` (and each `numba.cuda.X` it can find) taken from
numba-cuda-mlir, through a sitecustomize.py put first on PYTHONPATH, and writes what worked to OUT/numba_mlir.md:

    python tools/gpu_numba_mlir.py OUT --wheel numba_cuda_mlir-0.6.0-cp311-....whl

It installs the wheel with --no-deps into this Python (numba-cuda[cu13] or [cu12] already brings cuda-bindings,
cuda-core and the toolkit wheels it needs) unless numba_cuda_mlir is importable already. The wheel (71 MB) is larger
than one call to the GPU machine carries: split it (`split -b 40M WHEEL wheel.part.`), carry the parts in two calls
to the same warm machine (copying each to /tmp), and join them there (`cat /tmp/wheel.part.* > /tmp/WHEEL`).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Loaded by every Python started with this folder on PYTHONPATH (pytest, the notebook kernels): numba.cuda is
# numba_cuda_mlir.cuda, and numba.cuda.X is numba_cuda_mlir.cuda.X or numba_cuda_mlir.numba_cuda.X where those exist.
SITECUSTOMIZE = '''
import importlib, importlib.abc, importlib.util, sys
import numba
import numba_cuda_mlir.cuda as _mlir_cuda

class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if not name.startswith("numba.cuda."):
            return None
        for prefix in ("numba_cuda_mlir.cuda.", "numba_cuda_mlir.numba_cuda."):
            other = prefix + name[len("numba.cuda."):]
            try:
                if importlib.util.find_spec(other) is not None:
                    return importlib.util.spec_from_loader(name, self, origin=other)
            except ImportError:
                continue
        return None

    def create_module(self, spec):
        return importlib.import_module(spec.origin)

    def exec_module(self, module):
        pass

sys.modules["numba.cuda"] = _mlir_cuda
numba.cuda = _mlir_cuda
sys.meta_path.insert(0, _Alias())
'''


def run(command: list[str], environment: dict[str, str], log: Path) -> tuple[int, float, str]:
    """Run `command`, its output to `log`; (exit status, seconds, last lines)."""
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=1800)
    log.write_text(result.stdout + "\n--- stderr ---\n" + result.stderr)
    tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
    return result.returncode, time.perf_counter() - start, tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--wheel", type=Path, help="numba-cuda-mlir's wheel, installed with --no-deps if not installed yet")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if importlib.util.find_spec("numba_cuda_mlir") is None:
        if args.wheel is None:
            raise SystemExit("numba_cuda_mlir is not installed: pass --wheel")
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", str(args.wheel)], check=True)
    import os
    from importlib import metadata

    probe = subprocess.run([sys.executable, str(ROOT / "tools" / "numba_mlir_probe.py")], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)  # numba-cuda-mlir on its own, before the course runs on it
    (args.out / "probe.log").write_text(probe.stdout + "\n--- stderr ---\n" + probe.stderr)
    print(probe.stdout)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "sitecustomize.py").write_text(SITECUSTOMIZE)
        path = os.pathsep.join(filter(None, [folder, str(ROOT), os.environ.get("PYTHONPATH", "")]))  # keep the wheel folder
        environment = dict(os.environ, PYTHONPATH=path, GPUCOURSE_MODE="gpu")
        steps = {
            "import": [sys.executable, "-c", "import numba.cuda as c, gpucourse; print(c.__name__, gpucourse.MODE, gpucourse.current_device().name)"],
            "tests of gpucourse.launch": [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
                                          "tests/test_launch.py"],
            "chapter 1": [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "chapters/01_introduction"],
        }
        lines = [f"# The course under numba-cuda-mlir {metadata.version('numba_cuda_mlir')}", "",
                 "numba-cuda-mlir on its own (`tools/numba_mlir_probe.py`):", "", "```", probe.stdout.strip(), "```", "",
                 f"numba-cuda {metadata.version('numba-cuda')} installed beside it; `numba.cuda` aliased to `numba_cuda_mlir.cuda`.", "",
                 "| step | exit status | seconds | last lines |", "| --- | --- | --- | --- |"]
        for name, command in steps.items():
            status, seconds, tail = run(command, environment, args.out / f"{name.replace(' ', '_').replace('.', '_')}.log")
            lines.append(f"| {name} | {status} | {seconds:.0f} | {tail.splitlines()[-1] if tail else ''} |")
            print(f"{name}: exit {status} in {seconds:.0f} s\n{tail}\n")
    (args.out / "numba_mlir.md").write_text("\n".join(lines) + "\n")
    print(f"written: {args.out / 'numba_mlir.md'} and one log per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
