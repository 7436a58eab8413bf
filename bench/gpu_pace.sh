#!/bin/bash
# The window's pace against the job's own on GPUs (#74): bench/pace.py's jobs $PACE_JOBS
# (default `mlp_cuda`, a launch-bound MLP, its steps ending in a synchronize; `gpt_nccl`, the
# nanoGPT-style DDP job with a slow rank, needs 2 GPUs), $ROUNDS (default 3) alternated rounds, with this
# tree's compilediag ("after") and, where .before/ holds an older tree's compilediag package
# (git archive OLD compilediag | tar -x -C .before), with that one ("before") in the same rounds.
# $PACE_ARGS: more of pace.py's options (--window A-B --iters N).
# Run on the device machine from the repository root: writes under $OUT.
set -u
OUT=${OUT:-bench/results/gpu_pace}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device.txt"
python3 -c "import torch; print(torch.__version__)" >> "$OUT/device.txt"
before=()
[ -d .before/compilediag ] && before=(--before .before)
python3 bench/pace.py ${ROUNDS:-3} --jobs ${PACE_JOBS:-mlp_cuda} ${PACE_ARGS:-} "${before[@]}" > "$OUT/pace.json" 2> "$OUT/pace.err"
cat "$OUT"/*.json
