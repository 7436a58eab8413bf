#!/bin/bash
# What `compilediag run` costs the steps outside its window, part by part: the same GPU job
# (lm_train.py, $JOB_STEPS steps, default 80) as a plain TORCH_TRACE run, under
# `compilediag run` without a window (the probe's hooks alone), and with --profile-steps
# 6-15 (the window, then its kernel profile over steps 16-20); $ROUNDS times each (default
# 2), alternated. The job times its own steps; the median of steps 25 to the end of each
# run is printed, and each kind's ratio to the plain runs (ratio of the medians of the
# per-run medians). JOB_LARGE=1 makes the step the GPU's work (less noise from the host).
# Run on the device machine from the repository root.
set -u
JOB=tests/fixtures/run_jobs/lm_train.py
export PYTHONPATH=. JOB_STEPS=${JOB_STEPS:-80}
ROUNDS=${ROUNDS:-2}
med() { python3 -c "import json,statistics as s; print(round(s.median(json.load(open('$1'))['step_ms'][24:]), 3))"; }
T=$(mktemp -d)
for i in $(seq 1 "$ROUNDS"); do
  TORCH_TRACE=$T/trace$i JOB_FACTS=$T/plain$i.json python3 $JOB > /dev/null 2>&1
  JOB_FACTS=$T/probe$i.json python3 -m compilediag run -o $T/probe$i.txt -- python3 $JOB > /dev/null 2>&1
  JOB_FACTS=$T/window$i.json python3 -m compilediag run --profile-steps 6-15 -o $T/window$i.txt -- python3 $JOB > /dev/null 2>&1
  echo "round $i: plain $(med $T/plain$i.json) ms · probe alone $(med $T/probe$i.json) ms · with the window $(med $T/window$i.json) ms"
done
python3 - "$T" "$ROUNDS" <<'PY'
import json, statistics as s, sys
t, n = sys.argv[1], int(sys.argv[2])
def med(kind):
    return s.median(s.median(json.load(open(f"{t}/{kind}{i}.json"))["step_ms"][24:]) for i in range(1, n + 1))
plain = med("plain")
print(f"ratio to plain (median of {n} runs each): probe alone {med('probe') / plain:.3f}x · with the window {med('window') / plain:.3f}x")
PY
