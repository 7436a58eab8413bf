#!/bin/bash
# FSDP's hooks timed where they run (#67), on GPUs over NCCL, one rank per GPU: the
# torchtitan-order job (tests/fixtures/run_jobs/fsdp_blocks.py, blocks compiled in place,
# eager backend) under `compilediag run -- torchrun`, window 3-5: FSDP2 (`fully_shard`) and
# FSDP1 (FullyShardedDataParallel, which needs an accelerator: this machine's CPU can't run
# it). Each report's table and JSON, each rank's own clocks (JOB_FACTS).
# Run on the device machine from the repository root: writes under $OUT.
set -u
OUT=${OUT:-bench/results/gpu_fsdp}
JOBS=$PWD/tests/fixtures/run_jobs
mkdir -p "$OUT"
N=$(python3 -c "import torch; print(torch.cuda.device_count())")
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name(), '$N GPUs')" > $OUT/device.txt
for label in fsdp2 fsdp1; do
  d=$OUT/$label
  mkdir -p $d/facts
  fsdp=$([ $label = fsdp1 ] && echo 1 || echo 2)
  JOB_FSDP=$fsdp JOB_STEPS=12 JOB_FACTS=$d/facts COLUMNS=130 PYTHONPATH=.:$JOBS \
    timeout 200 python3 -m compilediag run --profile-steps 3-5 --format json -o $d/report.json \
    -- python3 -m torch.distributed.run --nproc-per-node "$N" $JOBS/fsdp_blocks.py > $d/run.log 2>&1
  echo "run exit $?" >> $d/run.log
  COLUMNS=130 PYTHONPATH=. python3 -m compilediag render $d/report.json > $d/report.txt 2>&1
done
for label in fsdp2 fsdp1; do
  tail -n 1 $OUT/$label/run.log
  grep -A6 "a step " $OUT/$label/report.txt | head -8
  python3 - "$OUT/$label/facts" <<'PY'
import json, pathlib, statistics, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("rank*.json")):
    x = json.loads(f.read_text())
    print(f.stem, {k: round(statistics.median(x[k][2:5]), 2) for k in ("forward_ms", "backward_ms", "step_ms")})
PY
done
