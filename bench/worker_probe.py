"""Explain's own figures against torch's and triton's, in explain's own process (GPU).

    PYTHONPATH=. python3 bench/worker_probe.py MODEL... --rounds 1 --out OUT

Runs compilediag's real worker (the spec `explain --device cuda` writes, the environment
spawn.py gives it) and, right after its own measure(), in the same process and on the same
callables and inputs, before the worker profiles: right after its wall timing,
torch.utils.benchmark.Timer (blocked_autorange, 1 s), then ROUNDS rounds of the worker's
steady_state() and Timer in alternating order; right after its device time, triton's
do_bench_cudagraph and do_bench.

Why in one process: a launch-bound model's wall per call drifts by up to 1.8x between
processes on the GPU host, and by 40% between rounds within one (bench/RESULTS.md), so
two figures compare only when taken side by side. Variants (--variants) bisect the
worker's environment: `noskip` drops its listener for CUDA-graph skips, `nolog` runs
without TORCH_TRACE and INDUCTOR_PROVENANCE, `timer` is bench/env_probe.py's bare script.
Writes OUT/worker_probe.json (raw) and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VARIANTS = ("worker", "noskip", "nolog", "timer")


ROUNDS = 5  # alternating rounds of compilediag's loop and Timer, after the worker's own


def worker_role(work: str, variant: str) -> NoReturn:
    """Run as compilediag's worker, with the variant's change, and inside its measure(), on
    the same callables and inputs: right after its wall timing, Timer, then ROUNDS rounds
    of its steady_state() and Timer in alternating order; right after its device time,
    triton's do_bench_cudagraph and do_bench, and its own method once more. All of it
    before the worker profiles: a process that has run torch.profiler reads its later
    calls slower, on the host and (about 10%) on the device."""
    from torch.utils.benchmark import Timer

    from compilediag import measure as m
    from compilediag import worker as w

    steady_state, device_time = m.steady_state, m.device_time
    line: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        line.setdefault(key, []).append(value)

    def steady_state_then_timer(torch, step, model, compiled, args_for, cuda, spec):
        got = steady_state(torch, step, model, compiled, args_for, cuda, spec)
        fns = {"eager": model, "compiled": compiled}
        call = args_for(1)[0]

        def timer() -> None:
            for name, fn in fns.items():
                t = Timer(
                    "step(fn, a)",
                    globals={"step": step, "fn": fn, "a": call},
                    num_threads=torch.get_num_threads(),
                )  # as the loop runs
                taken = t.blocked_autorange(min_run_time=1.0)
                add(f"timer_{name}", taken.median * 1e3)
                add(f"timer_min_{name}", min(taken.times) * 1e3)

        def ours() -> None:
            e, c, *_ = steady_state(torch, step, model, compiled, args_for, cuda, spec)
            add("ours_eager", e.median)
            add("ours_compiled", c.median)
            add("ours_min_eager", e.min)
            add("ours_min_compiled", c.min)

        add("ours_eager", got[0].median)  # round 0: the figure the worker reports
        add("ours_compiled", got[1].median)
        add("ours_min_eager", got[0].min)
        add("ours_min_compiled", got[1].min)
        timer()
        for r in range(ROUNDS):
            for part in (ours, timer) if r % 2 == 0 else (timer, ours):
                part()
        return got

    def device_time_then_triton(torch, step, model, compiled, call, args_for):
        import triton

        got = device_time(torch, step, model, compiled, call, args_for)
        add("device_eager", got.eager_ms)
        add("device_compiled", got.compiled_ms)
        for name, fn in (("eager", model), ("compiled", compiled)):
            run = lambda fn=fn: step(fn, call)  # noqa: E731
            add(f"dbcg_{name}", triton.testing.do_bench_cudagraph(run, return_mode="median"))
            add(f"do_bench_{name}", triton.testing.do_bench(run, return_mode="median"))
            add(f"device_again_{name}", m.graph_replay_ms(torch, run))
        return got

    m.steady_state, m.device_time = steady_state_then_timer, device_time_then_triton
    if variant == "noskip":
        w.watch_cudagraph_skips = lambda torch: None
    code = w.main([work])
    print("PROBE " + json.dumps(line), flush=True)
    w.exit_now(code)


def run_worker(model: str, variant: str, device: str = "cuda") -> dict[str, float]:
    from compilediag.serial import to_json
    from compilediag.target import Target
    from compilediag.worker_types import WorkerSpec

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "trace").mkdir()
        spec = WorkerSpec(target=Target(path=str(Path(model).resolve())), device=device)
        (work / "spec.json").write_text(to_json(spec))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        if variant != "nolog":  # as spawn.py sets them
            env["TORCH_TRACE"] = str(work / "trace")
            env.setdefault("INDUCTOR_PROVENANCE", "1")
        else:
            env.pop("TORCH_TRACE", None)
            env.pop("INDUCTOR_PROVENANCE", None)
        out = subprocess.run(
            [sys.executable, __file__, "--worker", str(work), variant],
            env=env, capture_output=True, text=True, start_new_session=True,
        ).stdout  # fmt: skip
        result = json.loads((work / "result.json").read_text())
        t = result["timings"]
        got: dict = {"reported_eager": t["eager_ms"]["median"],
                     "reported_compiled": t["compiled_ms"]["median"]}  # fmt: skip
        if t.get("device_ms"):
            got["device_method"] = t["device_ms"]["method"]
        probe = [ln for ln in out.splitlines() if ln.startswith("PROBE ")]
        if probe:
            got.update(json.loads(probe[-1][6:]))
        got["log_lines"] = len([ln for ln in out.splitlines() if ln.strip()]) - len(probe)
        return got


def run_timer(model: str) -> dict[str, list[float]]:
    from wall_across_processes import timer  # bench/env_probe.py in a fresh process

    got = timer(model)
    return {"timer_eager": [got["eager"]], "timer_compiled": [got["compiled"]]}


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker_role(sys.argv[2], sys.argv[3])  # ends the process
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default="worker", help=",".join(VARIANTS))
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--device", default="cuda")  # cpu: a smoke test of the probe itself
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for model in args.models:
        for r in range(args.rounds):
            for variant in args.variants.split(","):
                got = (
                    run_timer(model)
                    if variant == "timer"
                    else run_worker(model, variant, args.device)
                )
                rows.append({"model": model, "round": r, "variant": variant, **got})
                print(json.dumps(rows[-1]), flush=True)
                (out / "worker_probe.json").write_text(json.dumps(rows, indent=1))
    (out / "worker_probe.md").write_text(table(rows) + "\n")
    print(table(rows))


def table(rows: list[dict]) -> str:
    """Wall: the worker's reported figure against the Timer taken right after it; over all
    rounds, the medians' ratio (pooled and paired) and the fastest blocks' ratio (the host's
    noise only ever adds time). Device: the worker's figure against triton's, taken next."""
    med = statistics.median
    lines = ["| model | variant | reported ms | Timer after it | ratio | rounds: medians | paired "
             "(range) | fastest | device ms | do_bench_cudagraph | ratio | do_bench | ratio |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for row in rows:
        if "ours_eager" not in row:
            continue
        for v in ("eager", "compiled"):
            ours, timer = row[f"ours_{v}"], row[f"timer_{v}"]
            pairs = [o / t for o, t in zip(ours, timer, strict=True)]
            fastest = min(row[f"ours_min_{v}"]) / min(row[f"timer_min_{v}"])
            cells = [row["model"], f"{row['variant']} {v}",
                     f"{row[f'reported_{v}']:.4f}", f"{timer[0]:.4f}",
                     f"{row[f'reported_{v}'] / timer[0]:.2f}", f"{med(ours) / med(timer):.2f}",
                     f"{med(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f})",
                     f"{fastest:.2f}"]  # fmt: skip
            if f"device_{v}" in row:
                dev, dbcg, db = row[f"device_{v}"][0], row[f"dbcg_{v}"][0], row[f"do_bench_{v}"][0]
                cells += [f"{dev:.4f}", f"{dbcg:.4f}", f"{dev / dbcg:.2f}", f"{db:.4f}",
                          f"{dev / db:.2f}"]  # fmt: skip
            else:
                cells += [""] * 5
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
