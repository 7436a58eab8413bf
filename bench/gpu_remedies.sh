#!/bin/bash
# Remedies you can bet on (#59), on one GPU. $1 picks the part:
# - `launch`: the small MLP's launch-bound loop (tests/fixtures/run_jobs/mlp_launch.py) by
#   its own clock, alternated three times: torch.compile's default mode, then
#   mode="reduce-overhead" (steps 20-30, the median); then `compilediag run --try-fixes`
#   on it, whose CUDA-graph remedy is set against that;
# - `accum`: the same loop with gradient accumulation (JOB_ACCUM=4, each micro-batch's
#   logits kept for the step's accuracy): by hand with mode="reduce-overhead" (torch's
#   error), then under `run --try-fixes` (the failure reported, the remedy tried again
#   with a step marked at each call and the outputs cloned).
# Run on the device machine from the repository root: writes under $OUT (or
# bench/results/gpu_remedies/).
set -u
OUT=${OUT:-bench/results/gpu_remedies}
mkdir -p "$OUT" /tmp/f
export PYTHONPATH=.:tests/fixtures/run_jobs COLUMNS=110
J=tests/fixtures/run_jobs/mlp_launch.py
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device.txt"
python3 -c "import torch; print(torch.__version__)" >> "$OUT/device.txt"
own() {  # the job's own median step over steps 20-30
  python3 -c "import json,statistics as s; v=json.load(open('$1'))['step_ms'][20:31]; print(round(s.median(v),4))"
}
if [ "$1" = launch ]; then
  for i in 1 2 3; do
    JOB_FACTS=/tmp/f/d$i.json python3 $J > /dev/null 2>&1
    JOB_FACTS=/tmp/f/r$i.json JOB_MODE=reduce-overhead python3 $J > /dev/null 2>&1
    echo "pair $i: default $(own /tmp/f/d$i.json) ms, reduce-overhead $(own /tmp/f/r$i.json) ms" >> "$OUT/launch_own_clock.txt"
  done
  cat "$OUT/launch_own_clock.txt"
  JOB_FACTS=/tmp/f/t.json python3 -m compilediag run --try-fixes --budget 240 --profile-steps 20-30 \
    --format json -o "$OUT/launch.json" -- python3 $J > "$OUT/launch.log" 2>&1
  python3 -m compilediag render "$OUT/launch.json" > "$OUT/launch.txt" 2>&1
  grep "compilediag:" "$OUT/launch.log" | tail -20
  grep -A30 "^Job" "$OUT/launch.txt" | head -40
fi
if [ "$1" = accum ]; then
  JOB_ACCUM=4 JOB_STEPS=30 JOB_MODE=reduce-overhead JOB_FACTS=/tmp/f/a.json python3 $J > "$OUT/accum_by_hand.log" 2>&1
  echo "by hand, mode=reduce-overhead: exit $?" >> "$OUT/accum_by_hand.log"
  tail -4 "$OUT/accum_by_hand.log"
  JOB_ACCUM=4 JOB_STEPS=30 JOB_FACTS=/tmp/f/b.json python3 -m compilediag run --try-fixes --budget 240 \
    --profile-steps 12-22 --format json -o "$OUT/accum.json" -- python3 $J > "$OUT/accum.log" 2>&1
  python3 -m compilediag render "$OUT/accum.json" > "$OUT/accum.txt" 2>&1
  grep "compilediag:" "$OUT/accum.log" | tail -20
  grep -A30 "^Job" "$OUT/accum.txt" | head -40
fi
