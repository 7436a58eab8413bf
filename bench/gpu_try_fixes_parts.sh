#!/bin/bash
# What a --try-fixes run's time is made of on CUDA (bench/try_fixes_parts.py), against its
# forecast: the launch-bound MLP (Inductor, Triton), the job alone with its cache empty and
# warm, then `run --try-fixes --budget 1` with the cache warm and empty. Run on the device
# machine from the repository root (libcst's wheel carried in .whl/); writes under $OUT.
set -u
OUT=${OUT:-bench/results/gpu_try_fixes_parts}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:.:tests/fixtures/run_jobs TORCHINDUCTOR_CACHE_DIR=/tmp/usercache JOB_FACTS=/tmp/facts.json
JOB=tests/fixtures/run_jobs/mlp_launch.py
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device.txt"
for k in cold warm; do /usr/bin/time -f "alone $k WALL %e" python3 $JOB 2>&1 | tail -1; done | tee "$OUT/alone.txt"
for k in warm cold; do
  [ $k = cold ] && rm -rf /tmp/usercache
  python3 bench/try_fixes_parts.py "$OUT/$k.json" -- run --try-fixes --budget 1 --profile-steps 20-30 \
    --format json -o "$OUT/${k}_report.json" -- python3 $JOB > "$OUT/$k.txt" 2> "$OUT/$k.err"
  echo "== $k"; grep -E "^compilediag: (--try-fixes: the job|round 1 done|the job as it is took)" "$OUT/$k.err" | cut -c1-400
  cat "$OUT/$k.txt"
done
