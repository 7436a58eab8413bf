#!/usr/bin/env bash
# `compilediag run` on a reduce-overhead job with a CUDA-graph skip (device tool); under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=.
JOB_FACTS="$OUT/facts.json" python3 -m compilediag run -f json -- \
    python3 tests/fixtures/run_jobs/cudagraph_skip.py > "$OUT/skip.json" 2> "$OUT/skip.err"
echo "exit $?"
python3 -m compilediag run -- python3 tests/fixtures/run_jobs/cudagraph_skip.py 2>&1 | sed -n '/^Job/,$p'
python3 -m pytest --version 2>&1 | head -1
