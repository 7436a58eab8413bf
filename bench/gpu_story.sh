#!/bin/bash
# One story of a step (#49) on GPUs: the nanoGPT-style DDP job (rank 0 evaluates every 6
# iterations) under `compilediag run -- torchrun` over NCCL, Inductor, window 5-9, its trace
# kept; `report --fail-on-divergence` on it; the table and the HTML; the Trainer-style job on
# one GPU; then the tests marked gpu/gpus of the step's story. Run on the device machine's
# 2-GPU kind from the repository root: writes under $OUT (or bench/results/gpu_story/).
set -u
OUT=${OUT:-bench/results/gpu_story}
mkdir -p "$OUT"
export PYTHONPATH=.:tests/fixtures/run_jobs COLUMNS=110
N=$(python3 -c "import torch; print(torch.cuda.device_count())")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
JOBS=tests/fixtures/run_jobs
mkdir -p /tmp/facts /tmp/facts1
JOB_FACTS=/tmp/facts JOB_BACKEND=inductor python3 -m compilediag run --profile-steps 5-9 \
  --trace-dir /tmp/gpt_trace -- python3 -m torch.distributed.run --nproc-per-node "$N" \
  $JOBS/gpt_ddp.py > "$OUT/gpt_ddp.txt" 2>&1
echo "run exit $?" >> "$OUT/gpt_ddp.txt"
python3 -m compilediag report /tmp/gpt_trace --fail-on-divergence --html "$OUT/gpt_ddp.html" \
  > "$OUT/gpt_report.txt" 2>&1
echo "report --fail-on-divergence exit $?" >> "$OUT/gpt_report.txt"
python3 -m compilediag report /tmp/gpt_trace --format json > /tmp/gpt.json 2>/dev/null
JOB_FACTS=/tmp/facts1/facts.json JOB_BACKEND=inductor python3 -m compilediag run --profile-steps 10-20 \
  -- python3 $JOBS/trainer_eval.py > "$OUT/trainer_eval.txt" 2>&1
python3 -m pytest -q -m "gpu or gpus" -p no:cacheprovider -n 0 tests/analysis/step/test_step_story.py \
  tests/analysis/ranks/test_rank_steps.py tests/analysis/step/test_step_parts.py > "$OUT/pytest_gpu.log" 2>&1
tail -5 "$OUT/pytest_gpu.log"
tar czf "$OUT/facts.tgz" -C /tmp gpt.json facts facts1 && ls -la "$OUT"
