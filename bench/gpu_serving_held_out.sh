#!/usr/bin/env bash
# #75 on a GPU (the device tool; torch 2.11, Triton 3.6): the masked decoder
# (tests/fixtures/serving/decoder.py) served a skewed stream of 120 requests, batch 1-8,
# lengths 8-136, under mode="reduce-overhead". compilediag fits its plans to the first 70%
# and serves the rest in fresh processes; then the chosen plan's code, pasted as a user
# would, serves a second stream of the same distribution (another seed) from a caller under
# no_grad, counted by torch's own CUDAGraph class (tests/fixtures/serving/cuda_graphs_side.py):
# requests without a CUDA graph, raised, captures after the warm-up.
set -uo pipefail
export PYTHONPATH=. NO_COLOR=1 COLUMNS=110
S=tests/fixtures/serving
python3 $S/streams.py 11 120 8 8 30 136 > "$OUT/stream.jsonl"
python3 $S/streams.py 12 120 8 8 30 136 > "$OUT/apart.jsonl"
start=$(date +%s)
timeout 360 python3 -m compilediag recompiles $S/decoder.py --requests "$OUT/stream.jsonl" \
    --device cuda --mode reduce-overhead --no-numerics --no-cold-start --format json \
    -o "$OUT/decoder_ro.json" 2> "$OUT/decoder_ro.err"
echo "compilediag: exit $? in $(( $(date +%s) - start )) s" > "$OUT/times.txt"
python3 -m compilediag render "$OUT/decoder_ro.json" --format table > "$OUT/decoder_ro.txt" 2>&1
python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['serving']['plan']['code'])" \
    "$OUT/decoder_ro.json" > "$OUT/plan.py"
start=$(date +%s)
(cd $S && timeout 120 python3 cuda_graphs_side.py plan decoder.py "$OUT/plan.py" "$OUT/apart.jsonl") \
    > "$OUT/torch_plan_apart.json" 2> "$OUT/torch_plan_apart.err"
echo "torch's side: exit $? in $(( $(date +%s) - start )) s" >> "$OUT/times.txt"
