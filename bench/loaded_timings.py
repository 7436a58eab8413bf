"""Explain's timings on a loaded machine, beside a quiet one-thread measurement (issue #53).

    python bench/loaded_timings.py [MODEL.py] [--backend inductor] [--runs 1] [--threads N]

For the model (default sample_models/clean_mlp.py):
1. quiet: eager and compiled (the same backend) timed in a fresh process with
   OMP_NUM_THREADS=1 and torch.set_num_threads(1), a perf_counter loop of 50 ms blocks,
   the fastest and the median block per call;
2. loaded: a busy loop on every core (one process each, `while True`), then
   `compilediag explain MODEL --format json` without OMP_NUM_THREADS (as a user runs it;
   --threads N: with the user's own OMP_NUM_THREADS=N), its eager and compiled medians,
   their one-thread cost (the cross-check), its thread decision and its notes;
3. quiet again, after the busy loops are stopped.

Writes one JSON line per run to stdout. The busy loops are bounded by a deadline and
killed at the end.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

QUIET = r"""
import importlib.util, json, statistics, sys, time, torch
torch.set_num_threads(1)
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
model = m.get_model() if hasattr(m, "get_model") else m.model
args = m.get_inputs()
torch.set_grad_enabled(False)
compiled = torch.compile(model, backend=sys.argv[2])
compiled(*args)
def blocks(fn, n=15):
    for _ in range(20): fn(*args)
    t0 = time.perf_counter(); fn(*args); one = time.perf_counter() - t0
    per = max(1, int(0.05 / max(one, 1e-6)))
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        for _ in range(per): fn(*args)
        out.append((time.perf_counter() - t0) * 1e3 / per)
    return out
e, c = blocks(model), blocks(compiled)
print(json.dumps({"eager_ms": [min(e), statistics.median(e)],
                  "compiled_ms": [min(c), statistics.median(c)]}))
"""


def quiet(model: str, backend: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", QUIET, model, backend], capture_output=True, text=True,
        env=env, timeout=600, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def spin(deadline: float) -> None:
    while time.time() < deadline:
        pass


def loaded(model: str, backend: str, extra: list[str], threads: str | None, python: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if threads:
        env["OMP_NUM_THREADS"] = threads  # as a user who set it
    env["NO_COLOR"] = "1"
    deadline = time.time() + 600
    ctx = multiprocessing.get_context("spawn")
    busy = [ctx.Process(target=spin, args=(deadline,), daemon=True)
            for _ in range(os.cpu_count() or 1)]  # fmt: skip
    for p in busy:
        p.start()
    try:
        time.sleep(2)  # the load beside us is there before the run starts
        t0 = time.perf_counter()
        cmd = [python, "-m", "compilediag", "explain", model, "--backend", backend,
               "--format", "json", *extra]  # fmt: skip
        # (from /tmp: `-m` puts the folder it runs in first on sys.path)
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900,
                             cwd="/tmp")  # fmt: skip
        wall = time.perf_counter() - t0
    finally:
        for p in busy:
            p.kill()
            p.join()
    report = json.loads(out.stdout)
    t = report["timings"]
    e, c = t["eager_ms"] or {}, t["compiled_ms"] or {}
    return {
        "wall_s": round(wall, 1),
        "eager_ms": e.get("median"),
        "compiled_ms": c.get("median"),
        "one_thread_ms": [e.get("one_thread_ms"), c.get("one_thread_ms")],
        "speedup": t["speedup"],
        "noise": t.get("noise", ""),
        "threads": [t.get("threads"), t.get("threads_default"), t.get("threads_set_by")],
        "load": t.get("load"),
        "notes": [n["message"] for n in report.get("notes", [])],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=str(ROOT / "sample_models/clean_mlp.py"))
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--threads", help="OMP_NUM_THREADS for the loaded run (a user's own)")
    ap.add_argument("--python", action="append",
                    help="the Python whose compilediag runs (repeatable: each in turn, the "
                    "same load; default: this one)")  # fmt: skip
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    for _ in range(a.runs):
        row = {"model": Path(a.model).name, "backend": a.backend, "cores": os.cpu_count(),
               "load_before": os.getloadavg()[0]}  # fmt: skip
        row["quiet_before"] = quiet(a.model, a.backend)
        row["omp_num_threads"] = a.threads
        for py in a.python or [sys.executable]:
            row[f"loaded[{py}]"] = loaded(a.model, a.backend, a.extra, a.threads, py)
        row["quiet_after"] = quiet(a.model, a.backend)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
