"""What `compilediag run --profile-steps A-B` costs the job's steps outside its window, on
this machine: `python bench/outside_window.py [ROUNDS]`. The CPU training job
tests/fixtures/run_jobs/step_parts.py (a DataLoader, a compiled model that breaks once,
backward, AdamW; aot_eager; 60 steps) times its own steps (time.perf_counter, synchronous
on CPU). Three kinds of run, alternated ROUNDS times (default 4), each a fresh process:
a plain TORCH_TRACE run; `compilediag run --profile-steps 4-10` (the window, then its
kernel profile over steps 11-15); the same with --no-kernels. The median of steps 25-60 of
each run; per kind, the median of its runs, and the ratio to the plain runs'. Prints JSON."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

JOB = "tests/fixtures/run_jobs/step_parts.py"
STEPS = 60
OUTSIDE = slice(24, None)


def run(kind: str, facts: Path) -> float:
    env = {**os.environ, "JOB_FACTS": str(facts), "JOB_STEPS": str(STEPS), "PYTHONPATH": "."}
    cmd = [sys.executable, JOB]
    if kind == "plain":
        env["TORCH_TRACE"] = tempfile.mkdtemp(prefix="bench_trace_")
        env["PYTHONPATH"] = os.path.dirname(JOB)
    else:
        cmd = [sys.executable, "-m", "compilediag", "run", "--profile-steps", "4-10",
               *(["--no-kernels"] if kind == "no-kernels" else []), "-o",
               str(facts.with_suffix(".txt")), "--", *cmd]  # fmt: skip
    subprocess.run(cmd, env=env, capture_output=True, check=True, timeout=600)
    steps = json.loads(facts.read_text())["steps"][OUTSIDE]
    return statistics.median(s["step"] for s in steps)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    out = Path(tempfile.mkdtemp(prefix="bench_outside_"))
    medians: dict[str, list[float]] = {"plain": [], "window": [], "no-kernels": []}
    for i in range(rounds):
        for kind in medians:
            medians[kind].append(run(kind, out / f"{kind}_{i}.json"))
    plain = statistics.median(medians["plain"])
    print(json.dumps({
        "step_ms_medians": medians,
        "ratio": {k: round(statistics.median(v) / plain, 4) for k, v in medians.items()},
        "steps": "25-60",
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
