"""Wall per call (GPU) across processes: explain's figure against Timer's, both in fresh
processes, alternating, so that the host's drift between processes (bench/env_probe.sh)
falls on both sides alike.

    PYTHONPATH=. python3 bench/wall_across_processes.py --rounds 3 --out OUT MODEL...

Each round runs `compilediag explain MODEL --device cuda --format json` (its eager and
compiled medians) and then `bench/env_probe.py MODEL` (Timer.blocked_autorange, 1 s, median
of three, after 50 warm-up calls each) in a fresh process. The figure is the median over
the rounds of each side, and their ratio. Writes OUT/wall_across_processes.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Timer with its default one thread, and with torch's thread count (the user's loop's)
VARIANTS = ("eager", "compiled", "eager_all_threads", "compiled_all_threads")


def explain(model: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "compilediag", "explain", model, "--device", "cuda",
         "--format", "json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    t = json.loads(out)["timings"]
    return {v: t[f"{v}_ms"]["median"] for v in ("eager", "compiled")}


def timer(model: str) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", ".")]),
    }
    out = subprocess.run([sys.executable, str(HERE / "env_probe.py"), model], env=env,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    line = json.loads(out.strip().splitlines()[-1])
    return {k: line[k] for k in VARIANTS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models:
        runs: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for side, fn in (("explain", explain), ("timer", timer)):
                for v, ms in fn(model).items():
                    runs.setdefault(f"{side}_{v}", []).append(ms)
        rows.append({"model": model, "runs": runs})
        (out / "wall_across_processes.json").write_text(json.dumps(rows, indent=1))
        (out / "wall_across_processes.md").write_text(table(rows, args.rounds))
        print(table(rows, args.rounds), flush=True)


def table(rows: list[dict], rounds: int) -> str:
    lines = [
        f"Wall per call, ms: median over {rounds} alternating rounds of fresh processes "
        "(explain; then Timer, bench/env_probe.py), with each side's range. Timer 1: its "
        "default, one intra-op thread; Timer N: torch's thread count, as explain and the "
        "user's loop run.",
        "",
        "| model | variant | explain | range | Timer 1 | range | Timer N | range "
        "| explain/Timer 1 | explain/Timer N |",
        "|---|---|---:|---|---:|---|---:|---|---:|---:|",
    ]
    for row in rows:
        runs = row["runs"]
        for v in ("eager", "compiled"):
            e, t1 = runs[f"explain_{v}"], runs[f"timer_{v}"]
            tn = runs.get(f"timer_{v}_all_threads", [float("nan")])
            me, m1, mn = (statistics.median(x) for x in (e, t1, tn))
            lines.append(f"| {row['model']} | {v} | {me:.4f} | {min(e):.4f}-{max(e):.4f} | "
                         f"{m1:.4f} | {min(t1):.4f}-{max(t1):.4f} | {mn:.4f} | "
                         f"{min(tn):.4f}-{max(tn):.4f} | {me / m1:.2f} | {me / mn:.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
