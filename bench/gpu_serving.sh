#!/usr/bin/env bash
# #69 on a GPU (the device tool; torch 2.11, Triton 3.6): a request stream's serving
# section for the padded classifier (dynamic=False, its get_request_stream()) and the
# small decoder (the skewed stream), with the cold start in fresh processes: empty caches,
# warm caches, torch's cache artifacts. Writes the JSON and the table under $OUT.
set -euo pipefail
export PYTHONPATH=. NO_COLOR=1 COLUMNS=100
python3 -m compilediag recompiles sample_models/padded_classifier.py --no-dynamic --device cuda \
    --format json --no-numerics > "$OUT/classifier.json"
python3 -m compilediag render "$OUT/classifier.json" --format table > "$OUT/classifier.txt"
python3 -m compilediag recompiles tests/fixtures/serving/decoder.py \
    --requests tests/fixtures/serving/decoder_stream.jsonl --device cuda --format json \
    --no-numerics > "$OUT/decoder.json"
python3 -m compilediag render "$OUT/decoder.json" --format table > "$OUT/decoder.txt"
# a model we did not write: transformers' BertForSequenceClassification from a config, as
# the user compiles it and with dynamic=False
python3 -m compilediag recompiles bench/models/bert_serving.py --device cuda --format json \
    --no-numerics > "$OUT/bert.json"
python3 -m compilediag render "$OUT/bert.json" --format table > "$OUT/bert.txt"
python3 -m compilediag recompiles bench/models/bert_serving.py --device cuda --no-dynamic \
    --no-cold-start --format json --no-numerics > "$OUT/bert_static.json"
python3 -m compilediag render "$OUT/bert_static.json" --format table > "$OUT/bert_static.txt"
