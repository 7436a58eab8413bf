#!/usr/bin/env bash
# `compilediag run` on the GPU machine (device tool): examples/train.py on CUDA with a
# profiling window, its JSON and table; and the step time the job measures itself beside
# run's. Writes under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=.
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt"
python3 -c 'import torch; print(torch.__version__)' >> "$OUT/gpu.txt"
python3 -m compilediag run --profile-steps 3-12 -f json -- python3 examples/train.py --epochs 2 \
    > "$OUT/run_cuda.json" 2> "$OUT/run_cuda.err"
echo "json exit $?" >> "$OUT/gpu.txt"
python3 -m compilediag run --profile-steps 3-12 -- python3 examples/train.py --epochs 2 \
    > "$OUT/run_cuda.txt" 2>&1
echo "table exit $?" >> "$OUT/gpu.txt"
# the probe's own figures against a job that times its steps: the test job, on CUDA
JOB_FACTS="$OUT/facts.json" python3 -m compilediag run --profile-steps 3-7 -f json -- \
    python3 tests/fixtures/run_jobs/train_loop.py > "$OUT/train_loop.json" 2> "$OUT/train_loop.err"
echo "train_loop exit $?" >> "$OUT/gpu.txt"
JOB_FACTS="$OUT/hf_facts.json" python3 -m compilediag run --profile-steps 2-3 -f json -- \
    python3 tests/fixtures/run_jobs/hf_train.py > "$OUT/hf.json" 2> "$OUT/hf.err"
echo "hf exit $?" >> "$OUT/gpu.txt"
