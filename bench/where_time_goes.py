"""Where the time goes on a GPU: compilediag's wall and device time against independent
measurements of the same model and inputs.

    PYTHONPATH=. python3 bench/where_time_goes.py --out OUT_DIR

For each model:
1. `compilediag explain MODEL --device cuda --format json`: wall per call (median of
   interleaved blocks of back-to-back calls, CUDA events) and device time (a CUDA-graph
   replay of one call, CUDA events), in the worker process.
2. In a fresh process on the same model and inputs, three rounds of: compilediag's own
   measure() (the code the worker runs), torch.utils.benchmark.Timer.blocked_autorange
   (wall per call), triton.testing.do_bench (median; flushes the L2 cache before every call
   and includes the CPU's launch time) and do_bench_cudagraph (the call as a CUDA graph:
   the device's time, no launch overhead). Medians over the rounds. Two processes on one
   GPU machine differ by up to 40% on these launch-bound models (seen in bench/gpu_probe),
   so the like-for-like comparison of the methods is within one process.
Writes OUT/where_time_goes.json and .md.
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
    "bench/models/block_fp16.py",  # GPU-bound
]
ROUNDS = 3


def reference(path: str) -> dict[str, float]:
    import importlib.util

    import torch
    import triton
    from torch.utils.benchmark import Timer

    from compilediag.measure import measure
    from compilediag.target import Target
    from compilediag.worker_types import WorkerSpec

    spec = importlib.util.spec_from_file_location("m", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(path).parent))
    spec.loader.exec_module(module)
    model = module.get_model().cuda().eval()
    inputs = module.get_inputs()
    args, kwargs = ((), {k: v.cuda() for k, v in inputs.items()}) if isinstance(inputs, dict) else (
        tuple(t.cuda() for t in inputs), {})  # fmt: skip
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

    for _ in range(ROUNDS):
        m = measure(torch, lambda fn, c: fn(*c[0], **c[1]), model, compiled, (args, kwargs),
                    "cuda", WorkerSpec(target=Target(path=path)))  # fmt: skip
        add("eager_ours_ms", m.eager_ms.median)
        add("compiled_ours_ms", m.compiled_ms.median)
        add("eager_ours_device_ms", m.device.eager_ms)
        add("compiled_ours_device_ms", m.device.compiled_ms)
        for name, fn in fns.items():

            def call(fn=fn):
                return fn(*args, **kwargs)

            timer = Timer("call()", globals={"call": call})
            add(f"{name}_timer_ms", timer.blocked_autorange(min_run_time=1.0).median * 1e3)
            add(f"{name}_do_bench_ms", triton.testing.do_bench(call, return_mode="median"))
            add(f"{name}_do_bench_cudagraph_ms",
                triton.testing.do_bench_cudagraph(call, return_mode="median"))  # fmt: skip
    out = {k: statistics.median(v) for k, v in rounds.items()}
    out["device_method"] = m.device.method
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
        report = json.loads(proc.stdout) if proc.stdout.strip() else None
        ref = subprocess.run(
            [sys.executable, __file__, "--reference", model], capture_output=True, text=True
        )
        row = {
            "model": model,
            "explain": report["timings"] if report else proc.stderr[-2000:],
            "reference": json.loads(ref.stdout) if ref.stdout.strip() else ref.stderr[-3000:],
        }
        rows.append(row)
        (out / "where_time_goes.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "Wall per call, ms. `explain`: the worker's figure; `measure()`: the same code in the "
        "reference process; Timer: torch.utils.benchmark in that process.",
        "",
        "| model | variant | explain | measure() | Timer | measure()/Timer | explain/Timer |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    dev = [
        "",
        "Device time per call, ms. Ours: a CUDA-graph replay of one call; do_bench_cudagraph: "
        "triton's, same process; do_bench: triton's default (L2 flush, CPU launch included).",
        "",
        "| model | variant | ours (explain) | ours (measure()) | do_bench_cudagraph | ratio | do_bench |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ref, t = row["reference"], row["explain"]
        if not isinstance(ref, dict) or not isinstance(t, dict):
            lines.append(f"| {row['model']} | error | | | | | |")
            continue
        for v in ("eager", "compiled"):
            ex, me, tm = t[f"{v}_ms"]["median"], ref[f"{v}_ours_ms"], ref[f"{v}_timer_ms"]
            lines.append(f"| {row['model']} | {v} | {ex:.4f} | {me:.4f} | {tm:.4f} | "
                         f"{me / tm:.2f} | {ex / tm:.2f} |")  # fmt: skip
            dex = (t.get("device") or {}).get(f"{v}_ms", float("nan"))
            dme, cg, db = (ref[f"{v}_ours_device_ms"], ref[f"{v}_do_bench_cudagraph_ms"],
                           ref[f"{v}_do_bench_ms"])  # fmt: skip
            dev.append(f"| {row['model']} | {v} | {dex:.4f} | {dme:.4f} | {cg:.4f} | "
                       f"{dme / cg:.2f} | {db:.4f} |")  # fmt: skip
    text = "\n".join(lines + dev) + "\n"
    (out / "where_time_goes.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
