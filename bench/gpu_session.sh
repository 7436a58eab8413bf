#!/usr/bin/env bash
# What the GPU proves, in one device run (the device tool gives 30 minutes a session).
# Run from the repository root on the GPU machine:  bash bench/gpu_session.sh "$OUT"
# Each result lands in OUT as soon as it exists, so a run cut short still returns what it did.
set -uo pipefail
OUT=${1:-/tmp/gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 COLUMNS=110
LOG="$OUT/log.txt"
step() { echo; echo "== $*"; }
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  step "GPU tests"
  python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_timings.py 2>&1 | tail -15
  step "where the time goes"
  python3 bench/where_time_goes.py --out "$OUT"
  step "explain with a break, cuda"
  python3 -m compilediag explain sample_models/costly_break.py --device cuda
  echo "rc=$?"
} > "$LOG" 2>&1
