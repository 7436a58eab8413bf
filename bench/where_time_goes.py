"""Where the time goes on a GPU: compilediag's wall and device time against independent
measurements of the same model and inputs.

    PYTHONPATH=. python3 bench/where_time_goes.py --out OUT_DIR

For each model:
1. `compilediag explain MODEL --device cuda --format json`: wall per call (median of
   interleaved blocks of back-to-back calls, CUDA events) and device time (calls unrolled
   in one CUDA graph, replayed, CUDA events), in the worker process.
2. In a fresh process on the same model and inputs, first the wall: ROUNDS rounds, each
   of compilediag's steady_state() (the worker's timing code) and
   torch.utils.benchmark.Timer.blocked_autorange back to back, so both see the machine
   alike; the ratio is the median of the rounds' ratios. Then, after all wall figures
   (profiling or capturing first slows a process's later calls, bench/wall_probe.py):
   triton.testing.do_bench (median; flushes the L2 cache before every call, and its two
   events bracket the CPU's launches too), do_bench_cudagraph (the call as a CUDA graph:
   the device's time, no launch overhead) and N calls unrolled in one graph; then
   compilediag's measure() (its device time, then its profile); torch.profiler's busy time
   last. (Until 2026-11-23 triton's figures came after measure() had profiled, which
   reads them up to 10% long: bench/results/where_time_goes_h100.md was taken so.)
   A launch-bound model's wall per call differs by up to 2x between two processes on one
   GPU machine (bench/wall_probe.py), so the like-for-like comparison of the methods is
   within one process; explain/Timer sets the worker's figure beside another process's.
Writes OUT/where_time_goes.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

MODELS = [
    "sample_models/transformer_block.py",
    "bench/models/convnet.py",
    "bench/models/gpt2_tiny.py",
    "bench/models/llama_tiny.py",
    "bench/models/resnet18.py",  # GPU-bound, torchvision
    "bench/models/block_fp16.py",
    "bench/models/gpt2_small.py",  # GPU-bound, transformers
]
ROUNDS = 5
UNROLLED = (1, 20, 200)  # calls captured in one graph (do_bench_cudagraph: ~20 ms of them)


def reference(path: str) -> dict[str, float]:

    import torch
    import triton
    from cuda_model import load_cuda_model
    from torch.utils.benchmark import Timer

    from compilediag.measure import device_busy_ms, graph_replay_ms, measure, steady_state
    from compilediag.target import Target
    from compilediag.worker_types import WorkerSpec

    model, args, kwargs = load_cuda_model(path)
    torch.set_grad_enabled(False)
    compiled = torch.compile(model)
    fns = {"eager": model, "compiled": compiled}
    for fn in fns.values():
        for _ in range(50):  # compile, then bring the clocks up
            fn(*args, **kwargs)
    torch.cuda.synchronize()
    rounds: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        rounds.setdefault(key, []).append(value)

    def call_of(fn):
        def call(fn=fn):
            return fn(*args, **kwargs)

        return call

    def synced_loop_ms(call, calls: int = 200) -> float:
        # the plainest wall figure: sync, N back-to-back calls, sync, on the host's clock
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / calls

    # Wall first, before anything that profiles or captures: a process that has run
    # torch.profiler times its later calls 1.3-1.8x slower (bench/wall_probe.py), so the
    # worker too times before it profiles. Each round takes compilediag's steady-state
    # timing (the worker's code) and Timer's back to back, so both see the machine alike.
    spec = WorkerSpec(target=Target(path=path))
    step = lambda fn, c: fn(*c[0], **c[1])  # noqa: E731
    for _ in range(ROUNDS):
        e, c, *_ = steady_state(torch, step, model, compiled, lambda n: [(args, kwargs)] * n,
                                True, spec)  # fmt: skip
        add("eager_ours_ms", e.median)
        add("compiled_ours_ms", c.median)
        for name, fn in fns.items():
            call = call_of(fn)
            timer = Timer("call()", globals={"call": call})  # Timer's default: one thread
            add(f"{name}_timer_ms", timer.blocked_autorange(min_run_time=1.0).median * 1e3)
            add(f"{name}_loop_ms", synced_loop_ms(call))
        add("ratio_eager", rounds["eager_ours_ms"][-1] / rounds["eager_timer_ms"][-1])
        add("ratio_compiled", rounds["compiled_ours_ms"][-1] / rounds["compiled_timer_ms"][-1])
    # Then triton's and the unrolled graphs, before anything profiles: a process that has
    # run torch.profiler reads device times up to 10% longer too (bench/worker_probe.py).
    # measure() takes its device time, then profiles; CUPTI's busy time comes last.
    for name, fn in fns.items():
        call = call_of(fn)
        add(f"{name}_do_bench_ms", triton.testing.do_bench(call, return_mode="median"))
        add(f"{name}_do_bench_cudagraph_ms",
            triton.testing.do_bench_cudagraph(call, return_mode="median"))  # fmt: skip
        for n in UNROLLED:
            add(f"{name}_unrolled_{n}_ms", graph_replay_ms(torch, call, n))
    m = measure(torch, step, model, compiled, (args, kwargs), "cuda", spec)
    add("eager_ours_device_ms", m.device.eager_ms)
    add("compiled_ours_device_ms", m.device.compiled_ms)
    for name, fn in fns.items():
        call = call_of(fn)
        # torch.profiler's (CUPTI's) busy time of the kernels in the user's own loop: plain
        # calls, the caching allocator handing each the same buffers, no graph
        add(
            f"{name}_cupti_busy_ms",
            device_busy_ms(torch, lambda _, c=call: c(), lambda n: [None] * n),
        )
    out: dict = {k: statistics.median(v) for k, v in rounds.items()}
    out["rounds"] = rounds
    out["device_method"] = m.device.method
    return out


def main() -> None:
    global ROUNDS
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--reference")
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    args = ap.parse_args()
    ROUNDS = args.rounds
    if args.reference:
        print(json.dumps(reference(args.reference)))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models:
        proc = subprocess.run(
            [sys.executable, "-m", "compilediag", "explain", model, "--device", "cuda",
             "--format", "json"],
            capture_output=True, text=True,
        )  # fmt: skip
        report = json.loads(proc.stdout) if proc.stdout.strip() else None
        ref = subprocess.run(
            [sys.executable, __file__, "--reference", model, "--rounds", str(ROUNDS)],
            capture_output=True, text=True,
        )  # fmt: skip
        row = {
            "model": model,
            "explain": report["timings"] if report else proc.stderr[-2000:],
            "reference": json.loads(ref.stdout) if ref.stdout.strip() else ref.stderr[-3000:],
        }
        rows.append(row)
        (out / "where_time_goes.json").write_text(json.dumps(rows, indent=1))
        print(tables(rows), flush=True)  # each model's figures as soon as they exist
        (out / "where_time_goes.md").write_text(tables(rows))


def tables(rows: list[dict]) -> str:
    lines = [
        "Wall per call, ms. `explain`: the worker's figure (its own process); `ours`: the "
        "worker's timing code, steady_state(), in the reference process; Timer: "
        "torch.utils.benchmark there, taken right after ours in each of "
        f"{ROUNDS} rounds; loop: sync, 200 calls, sync. Spread: the range of Timer over the "
        "rounds, as a share of its median; ours/Timer: the median of the rounds' ratios.",
        "",
        "| model | variant | explain | ours | Timer | loop | Timer spread | ours/Timer "
        "| explain/Timer |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    dev = [
        "",
        "Device time per call, ms. Ours: calls unrolled in one CUDA graph, replayed (in explain's worker, "
        "and measure() in the reference process); CUPTI busy: torch.profiler's union of the "
        "kernels' intervals over plain back-to-back calls, the user's own loop; unrolled N: N "
        "calls captured in one graph, as do_bench_cudagraph does with ~20 ms of calls; "
        "do_bench_cudagraph and do_bench: triton's, median (do_bench flushes the L2 cache "
        "before each call and its events bracket the CPU's launches too).",
        "",
        "| model | variant | ours (explain) | ours (measure()) | CUPTI busy | ours/busy "
        "| unrolled 1 | unrolled 20 | unrolled 200 | do_bench_cudagraph | ours/dbcg | do_bench "
        "| ours/do_bench |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ref, t = row["reference"], row["explain"]
        if not isinstance(ref, dict) or not isinstance(t, dict):
            lines.append(f"| {row['model']} | error | | | | | | | |")
            continue
        for v in ("eager", "compiled"):
            ex, me, tm = t[f"{v}_ms"]["median"], ref[f"{v}_ours_ms"], ref[f"{v}_timer_ms"]
            lp, ratio = ref[f"{v}_loop_ms"], ref[f"ratio_{v}"]
            r = ref["rounds"][f"{v}_timer_ms"]
            spread = (max(r) - min(r)) / tm
            lines.append(f"| {row['model']} | {v} | {ex:.4f} | {me:.4f} | {tm:.4f} | {lp:.4f} | "
                         f"{spread:.0%} | {ratio:.2f} | {ex / tm:.2f} |")  # fmt: skip
            dex = (t.get("device_ms") or {}).get(f"{v}_ms", float("nan"))
            dme, busy, cg, db = (ref[f"{v}_ours_device_ms"], ref[f"{v}_cupti_busy_ms"],
                                 ref[f"{v}_do_bench_cudagraph_ms"], ref[f"{v}_do_bench_ms"])  # fmt: skip
            un = " | ".join(f"{ref[f'{v}_unrolled_{n}_ms']:.4f}" for n in UNROLLED)
            dev.append(f"| {row['model']} | {v} | {dex:.4f} | {dme:.4f} | {busy:.4f} | "
                       f"{dme / busy:.2f} | {un} | {cg:.4f} | {dme / cg:.2f} | {db:.4f} | "
                       f"{dme / db:.2f} |")  # fmt: skip
    return "\n".join(lines + dev) + "\n"


if __name__ == "__main__":
    main()
