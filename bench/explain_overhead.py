"""What does `compilediag explain` cost over compiling the model yourself?

    python bench/explain_overhead.py [--runs 3] [--sample sample_models/transformer_block.py]

Method: a bare script that imports torch, builds the sample model, compiles it with
Inductor and calls it once under no_grad, against `compilediag explain` on the same file
(with --no-timings, and with the default timings). Every variant runs once untimed first,
so Inductor's C++ build cache is warm for all; then the variants run in turn, `--runs`
rounds, interleaved, and the median wall time of each is reported with the ratio to the
bare script. `compilediag --help` is timed the same way against `python -c "import torch"`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BARE = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
model, inputs = m.get_model(), m.get_inputs()
with torch.no_grad():
    torch.compile(model)(*inputs)
"""


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sample", default="sample_models/transformer_block.py")
    args = ap.parse_args()
    cli = shutil.which("compilediag") or sys.exit("install compilediag first")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(BARE)
    variants = {
        "bare compile + one call": [sys.executable, f.name, args.sample],
        "explain --no-timings": [cli, "explain", args.sample, "--no-timings", "--format", "json"],
        "explain (with timings)": [cli, "explain", args.sample, "--format", "json"],
        "compilediag --help": [cli, "--help"],
        "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    }
    for cmd in variants.values():  # warm every cache once
        wall(cmd)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.runs):
        for name, cmd in variants.items():
            times[name].append(wall(cmd))
    med = {k: statistics.median(v) for k, v in times.items()}
    bare = med["bare compile + one call"]
    result = {
        "sample": args.sample,
        "runs": args.runs,
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "ratio_to_bare": {k: round(v / bare, 2) for k, v in med.items()},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
