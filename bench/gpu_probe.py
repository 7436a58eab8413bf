"""Probe (GPU): where compilediag's wall per call parts from torch.utils.benchmark.Timer,
and its device time from triton's do_bench_cudagraph. One process per setting.

    PYTHONPATH=. python3 bench/gpu_probe.py MODEL [--trace DIR] [--grad]
"""

from __future__ import annotations

import argparse
import json
import os


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--trace", default="")
    args = ap.parse_args()
    if args.trace:
        os.environ["TORCH_TRACE"] = args.trace
    import torch
    import triton
    from cuda_model import load_cuda_model
    from torch.utils.benchmark import Timer

    from compilediag.measure import device_busy_ms, measure

    model, a, kw = load_cuda_model(args.model)
    call = (a, kw)
    torch.set_grad_enabled(False)
    compiled = torch.compile(model)

    def step(fn, c):
        return fn(*c[0], **c[1])

    for _ in range(30):
        step(compiled, call)
        step(model, call)
    torch.cuda.synchronize()
    out: dict = {"model": args.model, "trace": bool(args.trace)}
    m = measure(torch, step, model, compiled, call, "cuda", _spec())
    out["ours_eager_ms"], out["ours_compiled_ms"] = m.eager_ms.median, m.compiled_ms.median
    out["ours_dev_eager_ms"], out["ours_dev_compiled_ms"] = m.device.eager_ms, m.device.compiled_ms
    for name, fn in (("eager", model), ("compiled", compiled)):
        f = lambda fn=fn: step(fn, call)  # noqa: E731
        t = Timer("f()", globals={"f": f})
        t.blocked_autorange(min_run_time=0.3)
        out[f"timer_{name}_ms"] = t.blocked_autorange(min_run_time=1.0).median * 1e3
        out[f"do_bench_{name}_ms"] = triton.testing.do_bench(f, return_mode="median")
        try:
            out[f"do_bench_cudagraph_{name}_ms"] = triton.testing.do_bench_cudagraph(
                f, return_mode="median"
            )
        except Exception as e:  # noqa: BLE001
            out[f"do_bench_cudagraph_{name}_ms"] = f"{type(e).__name__}: {e}"[:200]
        out[f"busy_again_{name}_ms"] = device_busy_ms(
            torch, lambda _a, f=f: f(), lambda n: [None] * n
        )
    print(json.dumps(out))


def _spec():
    from compilediag.target import Target
    from compilediag.worker_types import WorkerSpec

    return WorkerSpec(target=Target(path="x"))


if __name__ == "__main__":
    main()
