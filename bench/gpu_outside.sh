#!/bin/bash
# What `compilediag run` costs the steps outside its window, part by part: the same GPU job
# (lm_train.py, 80 steps) as a plain TORCH_TRACE run, under `compilediag run` without a
# window (the probe's hooks alone), and with --profile-steps 6-15 (the window, then its
# kernel profile over steps 16-20); twice each, alternated. The job times its own steps;
# the median of steps 25-80 of each run is printed. Run on the device machine from the
# repository root.
set -u
JOB=tests/fixtures/run_jobs/lm_train.py
export PYTHONPATH=. JOB_STEPS=80
med() { python3 -c "import json,statistics as s; print(round(s.median(json.load(open('$1'))['step_ms'][24:]), 3))"; }
T=$(mktemp -d)
for i in 1 2; do
  TORCH_TRACE=$T/trace$i JOB_FACTS=$T/plain$i.json python3 $JOB > /dev/null 2>&1
  JOB_FACTS=$T/probe$i.json python3 -m compilediag run -o $T/probe$i.txt -- python3 $JOB > /dev/null 2>&1
  JOB_FACTS=$T/window$i.json python3 -m compilediag run --profile-steps 6-15 -o $T/window$i.txt -- python3 $JOB > /dev/null 2>&1
  echo "round $i: plain $(med $T/plain$i.json) ms · probe alone $(med $T/probe$i.json) ms · with the window $(med $T/window$i.json) ms"
done
