#!/bin/bash
# Does the runtime probe keep CUDA graphs' gain? The small MLP (mlp_launch.py) by its own
# clock: alone with mode="reduce-overhead"; under `compilediag run --profile-steps` with that
# mode (the window's step beside the job's clock, same run); with only the bootstrap's
# cudagraphs remedy (no window; then with the window). Device machine, repository root.
set -u
OUT=${OUT:-bench/results/gpu_cudagraph_probe}
mkdir -p "$OUT" /tmp/g
export PYTHONPATH=.:tests/fixtures/run_jobs COLUMNS=110
JOBS=tests/fixtures/run_jobs
med() { python3 -c "import json,statistics as s; v=json.load(open('$1'))['step_ms'][20:]; print('$2', 'median step', round(s.median(v),3), 'ms')" >> "$OUT/clock.txt"; }
JOB_FACTS=/tmp/g/alone.json JOB_MODE=reduce-overhead python3 $JOBS/mlp_launch.py > /dev/null 2>&1; med /tmp/g/alone.json "alone reduce-overhead"
JOB_FACTS=/tmp/g/run.json JOB_MODE=reduce-overhead python3 -m compilediag run --profile-steps 20-30 --no-kernels --format json -o "$OUT/run_ro.json" -- python3 $JOBS/mlp_launch.py > "$OUT/run_ro.log" 2>&1
med /tmp/g/run.json "under run --profile-steps, reduce-overhead"
python3 -c "import json; d=json.load(open('$OUT/run_ro.json'))['runtime']; print('  its window: median step', d['step_medians'].get('step'), 'cudagraph skips', d['cudagraph_skips'], d['cudagraph_skip_reasons'])" >> "$OUT/clock.txt"
B=$(python3 -c "import compilediag.harness.bootstrap as b, os; print(os.path.dirname(b.__file__))")
JOB_FACTS=/tmp/g/rem.json PYTHONPATH=$B:$PYTHONPATH COMPILEDIAG_RUNTIME_DIR=/tmp/g/rt1 COMPILEDIAG_REMEDY=cudagraphs python3 $JOBS/mlp_launch.py > "$OUT/rem.log" 2>&1; med /tmp/g/rem.json "bootstrap cudagraphs remedy, no window"
JOB_FACTS=/tmp/g/remw.json PYTHONPATH=$B:$PYTHONPATH COMPILEDIAG_RUNTIME_DIR=/tmp/g/rt2 COMPILEDIAG_REMEDY=cudagraphs COMPILEDIAG_PROFILE_STEPS=20-30 COMPILEDIAG_KERNELS=0 python3 $JOBS/mlp_launch.py > "$OUT/remw.log" 2>&1; med /tmp/g/remw.json "bootstrap cudagraphs remedy, window 20-30"
python3 -c "import json,glob; d=json.load(open(glob.glob('/tmp/g/rt2/*.json')[0])); print('  its window:', d['profiled']['call_ms'] if d.get('profiled') else None, 'skips', d['cudagraph_skips'], d['cudagraph_skip_reasons'], d['remedies'])" >> "$OUT/clock.txt"
JOB_FACTS=/tmp/f.json python3 -m compilediag run --try-fixes --profile-steps 20-30 --format json -o "$OUT/mlp.json" -- python3 $JOBS/mlp_launch.py > "$OUT/mlp.log" 2>&1
python3 -m compilediag render "$OUT/mlp.json" > "$OUT/mlp.txt" 2>&1
cat "$OUT/clock.txt"; grep "compilediag:" "$OUT/mlp.log"
