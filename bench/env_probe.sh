#!/usr/bin/env bash
# bash bench/env_probe.sh MODEL [ROUNDS]: bench/env_probe.py in fresh processes, alternating
# plain, TORCH_TRACE, INDUCTOR_PROVENANCE=1 and both, ROUNDS (3) rounds; a JSON line each.
set -u
export PYTHONPATH=bench:.${PYTHONPATH:+:$PYTHONPATH}
model=$1
for _ in $(seq "${2:-3}"); do
  python3 bench/env_probe.py "$model"
  TORCH_TRACE=$(mktemp -d) python3 bench/env_probe.py "$model"
  INDUCTOR_PROVENANCE=1 python3 bench/env_probe.py "$model"
  TORCH_TRACE=$(mktemp -d) INDUCTOR_PROVENANCE=1 python3 bench/env_probe.py "$model"
done
