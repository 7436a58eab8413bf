#!/bin/bash
# What each of the window's instruments costs a step on the nanoGPT-style DDP job over NCCL
# (#74): bench/window_instruments.py's gpt_ddp job on 2 GPUs, $ROUNDS (default 8) rounds, in
# one process a rank. Run on the device machine from the repository root: writes under $OUT.
set -u
OUT=${OUT:-bench/results/gpu_instruments}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device.txt"
python3 -c "import torch, sys; print(torch.__version__, sys.version.split()[0])" >> "$OUT/device.txt"
python3 -m torch.distributed.run --nproc-per-node 2 bench/window_instruments.py ${ROUNDS:-8} \
  --job gpt_ddp > "$OUT/gpt_ddp.json" 2> "$OUT/gpt_ddp.err"
cat "$OUT/device.txt" "$OUT/gpt_ddp.json"; tail -5 "$OUT/gpt_ddp.err"
