"""Probe (GPU): what moves a launch-bound model's wall time per call, within one process.

    PYTHONPATH=. python3 bench/wall_probe.py MODEL [--out FILE]

The same wall measurements (Timer with one thread, Timer with torch's threads, compilediag's
block of back-to-back calls between CUDA events, sync + loop + sync on the host's clock)
are taken again after each thing compilediag's worker does besides timing: its own
measure(), a CPU-only torch.profiler run, a CUDA-graph capture and replay, a CUDA-activity
profiler run. A figure that rises after one of them and stays up names what perturbs the
later timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--out")
    ap.add_argument(
        "--profiler-effect",
        choices=["profiler", "none"],
        help="only: 20 alternating rounds of 50 ms blocks, then a CPU profiler "
        "run of 20 calls (or nothing, the control), then 20 rounds again",
    )
    args = ap.parse_args()
    import torch
    from cuda_model import load_cuda_model
    from torch.utils.benchmark import Timer

    from compilediag.measure import device_busy_ms, graph_replay_ms, measure
    from compilediag.target import Target
    from compilediag.worker_types import WorkerSpec

    model, a, kw = load_cuda_model(args.model)
    torch.set_grad_enabled(False)
    compiled = torch.compile(model)
    fns = {"eager": model, "compiled": compiled}
    for _ in range(50):
        for fn in fns.values():
            fn(*a, **kw)
    torch.cuda.synchronize()

    def events_block(fn, calls):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn(*a, **kw)
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / calls

    def loop(fn, calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*a, **kw)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / calls

    def figures() -> dict:
        out = {}
        for name, fn in fns.items():
            f = lambda fn=fn: fn(*a, **kw)  # noqa: E731
            out[f"{name}_timer1"] = Timer("f()", globals={"f": f}).blocked_autorange(
                min_run_time=0.5).median * 1e3  # fmt: skip
            out[f"{name}_timerN"] = (
                Timer("f()", globals={"f": f}, num_threads=torch.get_num_threads())
                .blocked_autorange(min_run_time=0.5)
                .median
                * 1e3
            )
            probe = events_block(fn, 5)
            n = max(1, int(50 / probe))
            out[f"{name}_events"] = statistics.median(events_block(fn, n) for _ in range(7))
            out[f"{name}_loop"] = statistics.median(loop(fn, n) for _ in range(7))
        return out

    if args.profiler_effect:
        from torch.profiler import ProfilerActivity, profile

        def rounds() -> dict:
            got: dict[str, list[float]] = {name: [] for name in fns}
            n = {name: max(1, int(50 / events_block(fn, 5))) for name, fn in fns.items()}
            for _ in range(20):
                for name, fn in fns.items():
                    got[name].append(events_block(fn, n[name]))
            return {name: statistics.median(v) for name, v in got.items()}

        before = rounds()
        if args.profiler_effect == "profiler":
            with profile(activities=[ProfilerActivity.CPU]):
                for _ in range(20):
                    compiled(*a, **kw)
                torch.cuda.synchronize()
        after = rounds()
        again = rounds()
        print(
            json.dumps(
                {
                    "model": args.model,
                    "between": args.profiler_effect,
                    "before": before,
                    "after": after,
                    "again": again,
                }
            )
        )
        return

    steps: list[tuple[str, dict]] = []
    steps.append(("start", figures()))
    steps.append(("again", figures()))
    m = measure(torch, lambda fn, c: fn(*c[0], **c[1]), model, compiled, (a, kw), "cuda",
                WorkerSpec(target=Target(path=args.model)))  # fmt: skip
    ours = {"eager_measure": m.eager_ms.median, "compiled_measure": m.compiled_ms.median}
    steps.append(("after measure()", figures()))
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        for _ in range(20):
            compiled(*a, **kw)
        torch.cuda.synchronize()
    steps.append(("after CPU profiler", figures()))
    graph_replay_ms(torch, lambda: model(*a, **kw))
    graph_replay_ms(torch, lambda: compiled(*a, **kw))
    steps.append(("after CUDA-graph replay", figures()))
    device_busy_ms(torch, lambda c: compiled(*a, **kw), lambda n: [None] * n)
    steps.append(("after CUDA profiler", figures()))
    result = {"model": args.model, "threads": torch.get_num_threads(), "measure": ours,
              "steps": steps}  # fmt: skip
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    keys = list(steps[0][1])
    print(args.model, "threads", torch.get_num_threads(), "measure()", ours)
    print(f"{'step':26}" + "".join(f"{k:>18}" for k in keys))
    for name, fig in steps:
        print(f"{name:26}" + "".join(f"{fig[k]:18.4f}" for k in keys))


if __name__ == "__main__":
    main()
