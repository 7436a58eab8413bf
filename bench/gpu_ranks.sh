#!/bin/bash
# Several GPUs (#42): DDP and FSDP2 jobs under `compilediag run -- torchrun` over NCCL, one
# rank per GPU, Inductor, window 4-8; each rank writes torch's own counts. Then the same
# DDP job without compilediag (its wall time against the run's), and the tests marked gpus.
# Run on the device machine's 2-GPU kind from the repository root: writes under $OUT (or
# bench/results/gpu_ranks/).
set -u
OUT=${OUT:-bench/results/gpu_ranks}
mkdir -p "$OUT"
export PYTHONPATH=.
N=$(python3 -c "import torch; print(torch.cuda.device_count())")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
nvidia-smi topo -m >> "$OUT/device.txt" 2>&1
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.nccl.version())" >> "$OUT/device.txt"
JOBS=tests/fixtures/run_jobs
run() {  # NAME JOB [ENV=VALUE ...]: compilediag run over torchrun, table and JSON
  local name=$1 job=$2; shift 2
  mkdir -p "$OUT/$name"
  local start=$(date +%s.%N)
  env "$@" JOB_FACTS="$OUT/$name" JOB_BACKEND=inductor COLUMNS=100 python3 -m compilediag run \
    --profile-steps 4-8 --format json -o "$OUT/$name/report.json" -- \
    python3 -m torch.distributed.run --nproc-per-node "$N" $JOBS/$job > "$OUT/$name/run.log" 2>&1
  echo "$name compilediag run: $(python3 -c "import time; print(round(time.time() - $start, 1))") s" >> "$OUT/wall.txt"
  COLUMNS=100 python3 -m compilediag render "$OUT/$name/report.json" > "$OUT/$name/report.txt"
}
plain() {  # NAME JOB: the same job without compilediag, its wall time
  local name=$1 job=$2
  mkdir -p "$OUT/$name"
  local start=$(date +%s.%N)
  JOB_FACTS="$OUT/$name" JOB_BACKEND=inductor python3 -m torch.distributed.run \
    --nproc-per-node "$N" $JOBS/$job > "$OUT/$name/run.log" 2>&1
  echo "$name plain torchrun: $(python3 -c "import time; print(round(time.time() - $start, 1))") s" >> "$OUT/wall.txt"
}
: > "$OUT/wall.txt"
plain ddp_plain_cold ddp_train.py   # fills Inductor's caches
run ddp ddp_train.py
plain ddp_plain ddp_train.py
run ddp_straggler ddp_train.py JOB_SLOW_RANK=1
run ddp_diverge ddp_train.py JOB_DIVERGE_RANK=1
run fsdp fsdp_train.py
cat "$OUT/wall.txt"
python3 -m pytest -q -m gpus -p no:cacheprovider --basetemp "$OUT/pytest" tests/analysis/ranks/test_rank_steps.py > "$OUT/pytest_gpus.log" 2>&1
for d in "$OUT"/*/; do (cd "$d" && tar czf ../"$(basename "$d")".tgz . && cd .. && rm -rf "$d"); done
tail -3 "$OUT/pytest_gpus.log"
