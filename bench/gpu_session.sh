#!/usr/bin/env bash
# Everything the GPU proves, in one device run (the device tool gives 30 minutes a session).
# Run from the repository root on the GPU machine:  bash bench/gpu_session.sh "$OUT"
# Each result lands in OUT as soon as it exists, so a run cut short still returns what it did.
set -uo pipefail
OUT=${1:-/tmp/gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 COLUMNS=110
LOG="$OUT/log.txt"
step() { echo; echo "== $*"; }
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  step "record torch-2.11 CUDA fixtures"
  python3 tests/fixtures/record_traces.py --device cuda graph_breaks.eager transformer_block.inductor batch_sweep.eager
  tar -C tests/fixtures/traces -czf "$OUT/fixtures_cuda.tgz" $(cd tests/fixtures/traces && ls -d torch-*cuda*)
  step "dump-kernels (cuda)"
  python3 -m compilediag dump-kernels sample_models/transformer_block.py --device cuda --out /tmp/kernels
  echo "rc=$?"; ls /tmp/kernels; cp /tmp/kernels/index.md "$OUT/kernels_index.md"
  head -40 /tmp/kernels/*triton_per*.py 2>/dev/null | head -40
  step "timing bench"
  python3 bench/cuda_timing.py --out "$OUT/cuda_timing.json"
  step "explain (cuda, inductor, cross-check)"
  python3 -m compilediag explain sample_models/graph_breaks.py --device cuda --cross-check
  echo "rc=$?"
  step "explain, reduce-overhead (CUDA graphs)"
  python3 -m compilediag explain bench/models/block_fp16.py --device cuda --mode reduce-overhead
  echo "rc=$?"
  step "recompiles (cuda)"
  python3 -m compilediag recompiles sample_models/changing_batch.py --device cuda
  step "tests on this machine: parsers on every recording, GPU tests"
  python3 -m pytest -q -p no:cacheprovider tests/test_trace.py tests/test_breaks.py tests/test_kernels.py 2>&1 | tail -15
} > "$LOG" 2>&1
