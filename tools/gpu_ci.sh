#!/usr/bin/env bash
# GPU CI for a machine with an NVIDIA GPU: set up (CuPy and CUDA wheels for the driver's CUDA version, as
# ./course does), then run tools/gpu_ci.py (tests, report, solutions, chapters, leaks, solutions as a small card).
#   tools/gpu_ci.sh OUT_DIR [gpu_ci.py options, e.g. --steps tests,report --budget 540 --pack]
# The course's commit is taken from git here (this script runs in a checkout); pass --commit to override.
# With GPUCOURSE_PYTHON=/path/to/python the set-up is skipped and that interpreter is used (an offline
# machine whose environment is ready).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: tools/gpu_ci.sh OUT_DIR [options]}
shift
export NCCL_NVLS_ENABLE=0
if [ -n "${GPUCOURSE_PYTHON:-}" ]; then
  python=$GPUCOURSE_PYTHON
else
  ./course test tests/test_project.py -q >/dev/null  # sets up .venv with the CUDA extra, runs a few checks
  python=.venv/bin/python
fi
commit=()
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$PWD" ] && [[ " $* " != *" --commit "* ]]; then
  commit=(--commit "$(git rev-parse HEAD)")
fi
nvidia-smi
exec "$python" tools/gpu_ci.py "$out" ${commit[@]+"${commit[@]}"} "$@"
