#!/usr/bin/env bash
# #69 point 4 on a GPU (the device tool; torch 2.11, Triton 3.6): the padded classifier's
# request stream (its get_request_stream()) served under mode="reduce-overhead": the CUDA
# graphs the stream records, per plan, and after the chosen plan's warm-up in a fresh
# process; then torch's own count (tests/fixtures/serving/cuda_graphs_side.py: torch's
# CUDAGraph class counted) on the same stream and on the plan's code as pasted.
set -euo pipefail
export PYTHONPATH=. NO_COLOR=1 COLUMNS=100
for dyn in "" "--no-dynamic"; do
    name=classifier_ro${dyn:+_static}
    python3 -m compilediag recompiles sample_models/padded_classifier.py $dyn --device cuda \
        --mode reduce-overhead --format json --no-numerics --no-cold-start > "$OUT/$name.json"
    python3 -m compilediag render "$OUT/$name.json" --format table > "$OUT/$name.txt"
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['serving']['plan']['code'])" \
        "$OUT/$name.json" > "/tmp/${name}_plan.py"
    (cd tests/fixtures/serving && python3 cuda_graphs_side.py plan \
        ../../../sample_models/padded_classifier.py "/tmp/${name}_plan.py" -) > "$OUT/${name}_torch_plan.json"
done
(cd tests/fixtures/serving && python3 cuda_graphs_side.py stream \
    ../../../sample_models/padded_classifier.py - reduce-overhead) > "$OUT/classifier_ro_torch_stream.json"
