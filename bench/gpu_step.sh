#!/bin/bash
# The whole step on a GPU (#39): lm_train.py under `compilediag run --profile-steps 6-15`,
# against the same job profiling its own steps 6-15 with torch.profiler, in another process
# on the same machine; then the GPU tests. Run on the device machine from the repository
# root: writes under $OUT (or bench/results/gpu_step/).
set -u
OUT=${OUT:-bench/results/gpu_step}
mkdir -p "$OUT"
JOB=tests/fixtures/run_jobs/lm_train.py
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
JOB_FACTS=$OUT/own_warm.json python3 $JOB > /dev/null 2>&1  # fills Inductor's caches
JOB_PROFILE=6-15 JOB_FACTS=$OUT/own.json python3 $JOB > "$OUT/own.log" 2>&1
JOB_FACTS=$OUT/run_facts.json python3 -m compilediag run --format json --profile-steps 6-15 \
  --html "$OUT/report.html" -- python3 $JOB > "$OUT/report.json" 2> "$OUT/run.log"
JOB_FACTS=$OUT/run_facts2.json python3 -m compilediag run --profile-steps 6-15 -- python3 $JOB \
  > "$OUT/report.txt" 2>&1
python3 -m pytest -q -m gpu -p no:cacheprovider tests/ > "$OUT/pytest_gpu.log" 2>&1
tail -3 "$OUT/pytest_gpu.log"
