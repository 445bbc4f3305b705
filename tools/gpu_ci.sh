#!/usr/bin/env bash
# GPU CI for a self-hosted runner with an NVIDIA GPU: set up (CuPy and CUDA wheels for the driver's
# CUDA version, as ./course does), then run tools/gpu_ci.py: tests, notebooks, leak check, report.
#   tools/gpu_ci.sh OUT_DIR [gpu_ci.py options]
# With GPUCOURSE_PYTHON=/path/to/python the set-up is skipped and that interpreter is used (an
# offline machine whose environment is ready, as the lent GPUs of this project are).
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
nvidia-smi
exec "$python" tools/gpu_ci.py "$out" "$@"
