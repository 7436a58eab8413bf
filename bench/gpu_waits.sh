#!/bin/bash
# Waiting is not work (#58), measured where it happens (#66), on GPUs: the nanoGPT-style DDP
# job (tests/fixtures/run_jobs/gpt_ddp.py) under `compilediag run -- torchrun` over NCCL, one
# rank per GPU, Inductor, window 10-20: (a) rank 0 evaluates at iteration 0 (its evaluation
# graph compiles first) and every 15 iterations, with a checkpoint; (b) no evaluation, rank
# 1's get_batch built token by token in Python (a straggler); (c) neither (the plain job, what
# the straggler's wait is set against); (d) the straggler with TORCH_NCCL_ENABLE_TIMING=1
# (each collective timed on the device). Each report's table, JSON and
# `report --fail-on-divergence` exit; each rank's own clocks (JOB_FACTS); the traces kept.
# Then the cost of NCCL's timing: the plain job alone (no compilediag), timing off and on,
# alternated twice, its own median iteration (costs.txt).
# TREE: the compilediag tree to run (default .); the jobs are always this tree's.
# Run on the device machine's kind of 2 or more GPUs from the repository root: writes under $OUT.
set -u
OUT=${OUT:-bench/results/gpu_waits}
TREE=${TREE:-.}
NAME=${NAME:-after}
JOBS=$PWD/tests/fixtures/run_jobs
mkdir -p "$OUT" /tmp/w/$NAME
N=$(python3 -c "import torch; print(torch.cuda.device_count())")
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/w/$NAME/device.txt
python3 -c "import torch; print(torch.__version__, torch.cuda.nccl.version())" >> /tmp/w/$NAME/device.txt
job() {  # LABEL [ENV=VALUE ...]; $ONLY: that label's run alone
  local label=$1; shift
  [ -n "${ONLY:-}" ] && [ "$ONLY" != "$label" ] && return
  local d=/tmp/w/$NAME/$label
  mkdir -p $d/facts
  (cd "$TREE" && env "$@" JOB_FACTS=$d/facts JOB_BACKEND=inductor JOB_ITERS=32 COLUMNS=130 \
    PYTHONPATH=.:$JOBS python3 -m compilediag run --profile-steps 10-20 --trace-dir $d/trace \
    --format json -o $d/report.json -- python3 -m torch.distributed.run --nproc-per-node "$N" \
    $JOBS/gpt_ddp.py > $d/run.log 2>&1; echo "run exit $?" >> $d/run.log
   cp $JOBS/gpt_ddp.py $d/
   COLUMNS=130 PYTHONPATH=. python3 -m compilediag report $d/trace --fail-on-divergence > $d/report.txt 2>&1
   echo "report --fail-on-divergence exit $?" >> $d/report.txt)
}
plain() {  # LABEL [ENV=VALUE ...]: the job alone, its own clocks
  local label=$1; shift
  local d=/tmp/w/$NAME/cost/$label
  mkdir -p $d
  env "$@" JOB_FACTS=$d JOB_BACKEND=inductor JOB_ITERS=40 JOB_EVAL_RANK=-1 PYTHONPATH=$JOBS \
    python3 -m torch.distributed.run --nproc-per-node "$N" $JOBS/gpt_ddp.py > $d.log 2>&1
  python3 -c "import json,statistics,sys; s=json.load(open('$d/rank0.json'))['step_ms'][10:]; print(sys.argv[1], round(statistics.median(s),3))" "$label" >> /tmp/w/$NAME/costs.txt
}
if [ -z "${COSTS_ONLY:-}" ]; then
  job eval JOB_EVAL_EVERY=15 JOB_CHECKPOINT=1
  # an evaluation and checkpoint at iteration 24, inside the kernel profile's steps
  job kernel_eval JOB_EVAL_EVERY=12 JOB_CHECKPOINT=1
  job straggler JOB_SLOW_RANK=1 JOB_EVAL_RANK=-1
  job plain JOB_EVAL_RANK=-1
  job straggler_timed JOB_SLOW_RANK=1 JOB_EVAL_RANK=-1 TORCH_NCCL_ENABLE_TIMING=1
fi
for i in $([ -n "${NO_COSTS:-}" ] || echo 1 2); do
  plain off$i
  plain on$i TORCH_NCCL_ENABLE_TIMING=1
done
tar czf "$OUT/$NAME.tgz" -C /tmp/w $NAME
for f in /tmp/w/$NAME/*/report.txt; do tail -n 1 $f; done
cat /tmp/w/$NAME/costs.txt 2>/dev/null
