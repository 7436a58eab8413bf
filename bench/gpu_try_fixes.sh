#!/bin/bash
# run --try-fixes on a GPU (#51): the small MLP's launch-bound loop (tests/fixtures/run_jobs/
# mlp_launch.py) under `compilediag run --try-fixes`: its verdict, and each remedy measured
# by the job's step; then the same job alone by its own clock with torch.compile's default
# mode, with mode="reduce-overhead", and with TF32, to set the measured remedies against.
# Run on the device machine from the repository root: writes under $OUT (or
# bench/results/gpu_try_fixes/).
set -u
OUT=${OUT:-bench/results/gpu_try_fixes}
mkdir -p "$OUT" /tmp/f
export PYTHONPATH=.:tests/fixtures/run_jobs COLUMNS=110
JOBS=tests/fixtures/run_jobs
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device.txt"
python3 -c "import torch; print(torch.__version__)" >> "$OUT/device.txt"
JOB_FACTS=/tmp/f/mlp.json python3 -m compilediag run --try-fixes --profile-steps 20-30 \
  --format json -o "$OUT/mlp.json" -- python3 $JOBS/mlp_launch.py > "$OUT/mlp.log" 2>&1
python3 -m compilediag render "$OUT/mlp.json" > "$OUT/mlp.txt" 2>&1
for mode in default reduce-overhead tf32; do
  m=$mode; t=0; [ "$m" = default ] && m=""; [ "$m" = tf32 ] && { m=""; t=1; }
  JOB_FACTS=/tmp/f/plain_$mode.json JOB_MODE=$m JOB_TF32=$t python3 $JOBS/mlp_launch.py > /dev/null 2>&1
  python3 -c "import json,statistics as s; v=json.load(open('/tmp/f/plain_$mode.json'))['step_ms'][20:]; print('$mode', 'median step', round(s.median(v),3), 'ms, min', round(min(v),3), 'max', round(max(v),3))" >> "$OUT/mlp_modes.txt"
done
grep "compilediag:" "$OUT/mlp.log"; cat "$OUT/mlp_modes.txt"
