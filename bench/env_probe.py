"""Probe (GPU): does the worker's environment slow the timed calls of a launch-bound model?

    PYTHONPATH=. python3 bench/env_probe.py MODEL

Loads the model on CUDA, compiles it, warms both up (50 calls each), then takes
Timer.blocked_autorange (1 s) of eager and compiled three times, with Timer's default of one
intra-op thread and with torch's own count (as the user's loop runs), and prints the
medians as one JSON line. Run it in fresh processes under the environment variables compilediag's
worker sets (TORCH_TRACE, INDUCTOR_PROVENANCE) and without them, alternating: a variable
that slows the calls shows as a ratio well above the spread between plain runs.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

import torch
from cuda_model import load_cuda_model
from torch.utils.benchmark import Timer


def main() -> None:
    model, args, kwargs = load_cuda_model(sys.argv[1])
    torch.set_grad_enabled(False)
    fns = {"eager": model, "compiled": torch.compile(model)}
    for fn in fns.values():
        for _ in range(50):
            fn(*args, **kwargs)
    torch.cuda.synchronize()
    out: dict[str, object] = {
        "env": {k: os.environ[k] for k in ("TORCH_TRACE", "INDUCTOR_PROVENANCE") if k in os.environ}
    }
    threads = torch.get_num_threads()
    out["threads"] = threads
    for name, fn in fns.items():
        # Timer's default runs the statement with one intra-op thread; the user's loop (and
        # compilediag's timing) runs with torch's default, `threads`: both are taken
        for suffix, n in (("", 1), ("_all_threads", threads)):
            timer = Timer("fn(*a, **k)", globals={"fn": fn, "a": args, "k": kwargs}, num_threads=n)
            ms = [timer.blocked_autorange(min_run_time=1.0).median * 1e3 for _ in range(3)]
            out[name + suffix] = round(statistics.median(ms), 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
