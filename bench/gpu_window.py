"""Two checks of the whole step on a GPU (#39), run on the device machine from the
repository root: `python3 bench/gpu_window.py OUT`.

1. Bandwidth: each generated kernel's GB/s in `compilediag run`'s kernel table, against
   Inductor's own benchmark of the same kernel. The job (tests/fixtures/run_jobs/
   lm_train.py) runs once more with TORCHINDUCTOR_BENCHMARK_KERNEL=1 into a cache folder
   of its own; each kernel file Inductor wrote there benchmarks itself when run as a
   script (its own timing, its own count of the bytes moved) and prints `ms GB GB/s`.
2. Outside the window: the job's own step times (time.perf_counter, synchronised) under
   `compilediag run --profile-steps 6-15` against a plain TORCH_TRACE run of the same job,
   over the steps after the window and its kernel steps (25 to the end), alternated
   (plain, run, plain, run, ... $ROUNDS times, default 2) in one session; the ratio of the
   medians, and each pair's.

Writes OUT/gpu_window.json and prints a summary."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

JOB = "tests/fixtures/run_jobs/lm_train.py"
STEPS = 80
OUTSIDE = slice(24, None)  # steps 25 to the end: after the window (6-15) and its kernels


def sh(cmd: list[str], env: dict[str, str] | None = None, timeout: int = 300) -> str:
    full = {**os.environ, "PYTHONPATH": ".", **(env or {})}
    p = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout)
    return p.stdout + p.stderr


def bandwidth(out: Path) -> dict:
    report = out / "bw_report.json"
    sh([sys.executable, "-m", "compilediag", "run", "--format", "json", "-o", str(report),
        "--profile-steps", "6-15", "--", sys.executable, JOB])  # fmt: skip
    ours = {
        k["name"]: k["gb_per_s"]
        for k in json.loads(report.read_text())["timings"]["kernels"]
        if k["kind"] == "generated" and k.get("gb_per_s")
    }
    cache = Path(tempfile.mkdtemp(prefix="bench_kernels_"))
    sh([sys.executable, JOB], env={"TORCHINDUCTOR_BENCHMARK_KERNEL": "1",
       "TORCHINDUCTOR_CACHE_DIR": str(cache), "JOB_STEPS": "3"})  # fmt: skip
    theirs: dict[str, dict] = {}
    for path in cache.rglob("*.py"):
        text = path.read_text(errors="replace")
        names = re.findall(r"^def (triton_\w+)\(", text, re.M)
        if len(names) != 1 or "GB/s" not in text or names[0] not in ours:
            continue
        printed = sh([sys.executable, str(path)], timeout=120)
        m = re.search(r"([\d.]+)ms\s+([\d.]+)GB\s+([\d.]+)GB/s", printed)
        if m:
            ms, gb, gbps = (float(x) for x in m.groups())
            theirs[names[0]] = {"ms": ms, "gb": gb, "gb_per_s": gbps}
    rows = [
        {"kernel": n, "report_gb_per_s": ours[n], "inductor_gb_per_s": t["gb_per_s"],
         "inductor_gb": t["gb"], "ratio": round(ours[n] / t["gb_per_s"], 3)}
        for n, t in sorted(theirs.items(), key=lambda kv: -ours[kv[0]])
        if t["gb_per_s"]
    ]  # fmt: skip
    return {"kernels_with_bandwidth": len(ours), "compared": rows}


def outside(out: Path) -> dict:
    medians: dict[str, list[float]] = {"plain": [], "run": []}
    for i in range(int(os.environ.get("ROUNDS", "2"))):
        for kind in ("plain", "run"):
            facts = out / f"steps_{kind}_{i}.json"
            env = {"JOB_FACTS": str(facts), "JOB_STEPS": str(STEPS)}
            if kind == "plain":
                env["TORCH_TRACE"] = tempfile.mkdtemp(prefix="bench_trace_")
                sh([sys.executable, JOB], env=env)
            else:
                sh([sys.executable, "-m", "compilediag", "run", "--profile-steps", "6-15",
                    "-o", str(out / f"run_{i}.txt"), "--", sys.executable, JOB], env=env)  # fmt: skip
            steps = json.loads(facts.read_text())["step_ms"][OUTSIDE]
            medians[kind].append(statistics.median(steps))
    plain, run = statistics.median(medians["plain"]), statistics.median(medians["run"])
    pairs = [round(r / p, 4) for p, r in zip(medians["plain"], medians["run"], strict=True)]
    return {
        "step_ms_medians": medians, "ratio": round(run / plain, 4), "pairs": pairs,
        "steps": "25-80",
    }  # fmt: skip


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    result = {"device": sh(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).strip()}
    result["bandwidth"] = bandwidth(out)
    (out / "gpu_window.json").write_text(json.dumps(result, indent=1))
    result["outside_window"] = outside(out)
    (out / "gpu_window.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1)[:6000])


if __name__ == "__main__":
    main()
