#!/bin/bash
# The step's verdict on GPUs (#51, #49): a small MLP's launch-bound loop under `compilediag
# run` (its verdict and advice), the same job alone by its own clock with torch.compile's
# default mode and with mode="reduce-overhead"; the nanoGPT-style DDP job on 2 GPUs; then the
# tests marked gpu/gpus of the verdict and the step's story. Run on the device machine's
# 2-GPU kind from the repository root: writes under $OUT (or bench/results/gpu_verdict/).
set -u
OUT=${OUT:-bench/results/gpu_verdict}
mkdir -p "$OUT" /tmp/f
export PYTHONPATH=.:tests/fixtures/run_jobs COLUMNS=110
JOBS=tests/fixtures/run_jobs
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device.txt"
python3 -c "import torch; print(torch.__version__)" >> "$OUT/device.txt"
JOB_FACTS=/tmp/f/mlp.json python3 -m compilediag run --profile-steps 20-30 -- python3 $JOBS/mlp_launch.py > "$OUT/mlp.txt" 2>&1
for mode in default reduce-overhead; do
  m=$mode; [ "$m" = default ] && m=""
  JOB_FACTS=/tmp/f/plain_$mode.json JOB_MODE=$m python3 $JOBS/mlp_launch.py > /dev/null 2>&1
  python3 -c "import json,statistics as s; v=json.load(open('/tmp/f/plain_$mode.json'))['step_ms'][20:]; print('$mode', 'median step', round(s.median(v),3), 'ms, min', round(min(v),3), 'max', round(max(v),3))" >> "$OUT/mlp_modes.txt"
done
JOB_FACTS=/tmp/f JOB_BACKEND=inductor JOB_CHECKPOINT=1 python3 -m compilediag run --profile-steps 5-9 -- \
  python3 -m torch.distributed.run --nproc-per-node 2 $JOBS/gpt_ddp.py > "$OUT/gpt.txt" 2>&1
python3 -m pytest -q -m "gpu or gpus" -p no:cacheprovider -n 0 tests/analysis/step/test_verdict.py \
  tests/analysis/step/test_step_story.py > "$OUT/pytest_gpu.log" 2>&1
tail -3 "$OUT/pytest_gpu.log"; cat "$OUT/mlp_modes.txt"
