#!/bin/bash
# The window's pace against the job's own on one GPU (#74): bench/pace.py's `mlp_cuda` job
# (a launch-bound MLP, its steps ending in a synchronize), 3 alternated rounds, with this
# tree's compilediag ("after") and, where .before/ holds an older tree's compilediag package
# (git archive OLD compilediag | tar -x -C .before), with that one ("before").
# Run on the device machine from the repository root: writes under $OUT.
set -u
OUT=${OUT:-bench/results/gpu_pace}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device.txt"
python3 -c "import torch; print(torch.__version__)" >> "$OUT/device.txt"
python3 bench/pace.py 3 --jobs mlp_cuda > "$OUT/after.json" 2> "$OUT/after.err"
if [ -d .before/compilediag ]; then
  python3 bench/pace.py 3 --jobs mlp_cuda --root .before > "$OUT/before.json" 2> "$OUT/before.err"
fi
cat "$OUT"/*.json
