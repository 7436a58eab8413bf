"""`compilediag report` against `tlparse` on the same large trace: wall time and peak memory.

    python bench/make_big_trace.py /tmp/bigtrace --frames 70     # about 50 MB, Inductor
    python bench/report_vs_tlparse.py /tmp/bigtrace [--runs 3]

Method: both tools read the same trace file; each run is a fresh process under
/usr/bin/time (wall seconds, peak RSS). One untimed run of each first (file cache warm
for both), then `--runs` rounds, the two tools alternating; medians are reported.
compilediag writes its JSON report to /dev/null; tlparse writes its HTML site to a temp
folder (that is its job). Both are given the trace file itself.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path


def timed(cmd: list[str]) -> tuple[float, float]:
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", *cmd], capture_output=True, text=True, check=False
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr[-500:]}")
    wall, kb = proc.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kb) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    files = sorted(p for p in Path(args.trace).iterdir() if p.is_file())
    (trace,) = files
    out = tempfile.mkdtemp()
    tools = {
        "compilediag report": [
            shutil.which("compilediag"),
            "report",
            str(trace),
            "--format",
            "json",
            "-o",
            "/dev/null",
        ],
        "tlparse": [shutil.which("tlparse"), str(trace), "-o", out, "--overwrite", "--no-browser"],
    }
    for cmd in tools.values():
        timed(cmd)
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in tools}
    for _ in range(args.runs):
        for name, cmd in tools.items():
            results[name].append(timed(cmd))
    summary = {
        name: {
            "wall_s": statistics.median(w for w, _ in runs),
            "peak_mb": statistics.median(m for _, m in runs),
        }
        for name, runs in results.items()
    }
    ours, theirs = summary["compilediag report"], summary["tlparse"]
    print(
        json.dumps(
            {
                "trace_mb": round(trace.stat().st_size / 1e6, 1),
                "runs": args.runs,
                **summary,
                "wall_ratio": round(ours["wall_s"] / theirs["wall_s"], 3),
                "memory_ratio": round(ours["peak_mb"] / theirs["peak_mb"], 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
