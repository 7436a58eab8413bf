"""Where the time goes on a GPU: compilediag's wall and device time against independent
measurements of the same model and inputs.

    PYTHONPATH=. python3 bench/where_time_goes.py --out OUT_DIR

For each model: `compilediag explain MODEL --device cuda --format json` (wall per call:
median of interleaved blocks of back-to-back calls; device time: the GPU's busy time per
call from torch.profiler), then, in a fresh process on the same model and inputs:
`torch.utils.benchmark.Timer.blocked_autorange` (wall per call), `triton.testing.do_bench`
(median, flushes the L2 cache before every call), and do_bench's own method without the
flush (CUDA events around each call, median) - the flush-free measurement that shows how
much of a gap the flush alone explains. Writes OUT/where_time_goes.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

MODELS = [
    "sample_models/transformer_block.py",
    "bench/models/convnet.py",
    "bench/models/gpt2_tiny.py",
    "bench/models/llama_tiny.py",
    "bench/models/block_fp16.py",  # GPU-bound: busy time and do_bench should agree
]


def reference(path: str) -> dict[str, float]:
    import importlib.util

    import torch
    import triton
    from torch.utils.benchmark import Timer

    spec = importlib.util.spec_from_file_location("m", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(path).parent))
    spec.loader.exec_module(module)
    model = module.get_model().cuda()
    inputs = module.get_inputs()
    args, kwargs = ((), {k: v.cuda() for k, v in inputs.items()}) if isinstance(inputs, dict) else (
        tuple(t.cuda() for t in inputs), {})  # fmt: skip
    torch.set_grad_enabled(False)
    compiled = torch.compile(model)
    out: dict[str, float] = {}
    for name, fn in (("eager", model), ("compiled", compiled)):

        def call(fn=fn):
            return fn(*args, **kwargs)

        for _ in range(50):  # compile, then bring the clocks up
            call()
        torch.cuda.synchronize()
        timer = Timer("call()", globals={"call": call})
        timer.blocked_autorange(min_run_time=0.5)
        out[f"{name}_timer_ms"] = timer.blocked_autorange(min_run_time=1.0).median * 1e3
        out[f"{name}_do_bench_ms"] = triton.testing.do_bench(call, return_mode="median")
        times = []
        for _ in range(200):  # do_bench's method without the L2 flush
            start, end = torch.cuda.Event(True), torch.cuda.Event(True)
            start.record()
            call()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        out[f"{name}_events_noflush_ms"] = statistics.median(times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--reference")
    ap.add_argument("--models", nargs="*", default=MODELS)
    args = ap.parse_args()
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
        if not proc.stdout.strip():
            rows.append({"model": model, "error": proc.stderr[-2000:]})
            continue
        report = json.loads(proc.stdout)
        t = report["timings"]
        ref = subprocess.run(
            [sys.executable, __file__, "--reference", model], capture_output=True, text=True
        )
        row = {
            "model": model,
            "compilediag": {
                "eager_wall_ms": t["eager_ms"]["median"],
                "compiled_wall_ms": t["compiled_ms"]["median"],
                "speedup": t["speedup"],
                "device": t.get("device"),
                "bound": t.get("bound"),
                "notes": t.get("notes"),
            },
            "reference": json.loads(ref.stdout) if ref.stdout.strip() else ref.stderr[-2000:],
        }
        rows.append(row)
        (out / "where_time_goes.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "| model | variant | wall: compilediag | wall: Timer | ratio | device: compilediag "
        "| do_bench (L2 flush) | ratio | events, no flush | ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ref, ours = row.get("reference"), row.get("compilediag")
        if not isinstance(ref, dict) or not ours or not ours.get("device"):
            lines.append(f"| {row['model']} | error | | | | | | | | |")
            continue
        for v in ("eager", "compiled"):
            wall, timer = ours[f"{v}_wall_ms"], ref[f"{v}_timer_ms"]
            dev, db, nf = (
                ours["device"][f"{v}_ms"],
                ref[f"{v}_do_bench_ms"],
                ref[f"{v}_events_noflush_ms"],
            )
            lines.append(
                f"| {row['model']} | {v} | {wall:.4f} | {timer:.4f} | {wall / timer:.2f} | "
                f"{dev:.4f} | {db:.4f} | {dev / db:.2f} | {nf:.4f} | {dev / nf:.2f} |"
            )
    (out / "where_time_goes.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
