#!/usr/bin/env bash
# The driver of the final GPU validation (measurements/final.md, call c): bash THIS_FILE OUT DEADLINE_S
set -u
OUT=$1; DEADLINE=$2
P="python3 -m pytest -o addopts= -p no:cacheprovider -v -rfE --tb=short"
left() { echo $((DEADLINE - SECONDS)); }
step() { local name=$1 limit=$2; shift 2; [ "$(left)" -lt "$limit" ] && limit=$(left); [ "$limit" -le 5 ] && { echo "$name: skipped (no time)" | tee -a "$OUT/steps.txt"; return; }
  local s=$SECONDS; timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "$name: rc=$? $((SECONDS - s)) s" | tee -a "$OUT/steps.txt"; }
{ nvidia-smi --query-gpu=name,driver_version,ecc.mode.current --format=csv; python3 -c "from gpucourse.banner import versions; print(versions())"; date -u; } > "$OUT/env.txt" 2>&1
step solutions_nb 150 $P --nbval-lax --nbval-current-env solutions
step report 150 python3 -m gpucourse report --out "$OUT/report"
step transfers 40 $P tests/test_transfers.py
step checks_rerun 60 $P tests/test_checks_ch2.py::test_copy_four_right tests/test_checks_ch3_execution.py::test_branch_by_warp_check tests/test_checks_ch3_execution.py::test_branch_by_warp_float64_is_named
for f in ch4 ch5 ch6 ch7 ch3_memory; do step checks_$f 200 $P tests/test_checks_$f.py --durations=5; done
for f in ch2 ch3_execution; do step checks_$f 200 $P tests/test_checks_$f.py --durations=5; done
step checks_core 200 $P tests/test_checks.py --durations=5
