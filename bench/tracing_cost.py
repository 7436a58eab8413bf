"""What the tracing-by-function table costs a compile (#52): torch's Dynamo profiler on (as
explain and recompiles run it, timings kept, no pstats written) against off, on the same
models in one process, alternating (each first in every other round), each compile after torch._dynamo.reset().

Models: tests/fixtures/compile_cost/helper_blocks.py (a traced Python loop, twelve blocks)
and a 6-block transformer encoder (torch.nn.TransformerEncoder). Backend eager: Dynamo's
tracing is what the profiler times. Writes bench/results/tracing_cost_cpu.json.

    python bench/tracing_cost.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compilediag.harness.bootstrap._compilediag_runtime.tracing import TracingCost  # noqa: E402


def helper_blocks():
    spec = importlib.util.spec_from_file_location(
        "helper_blocks", ROOT / "tests/fixtures/compile_cost/helper_blocks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_model(), module.get_inputs()


def encoder():
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False), (
        torch.randn(2, 16, 64),
    )


def compile_s(model, inputs, profiled: bool) -> float:
    torch._dynamo.reset()
    cost = TracingCost(torch)
    if profiled:
        cost.start()
    try:
        start = time.perf_counter()
        torch.compile(model, backend="eager")(*inputs)
        return time.perf_counter() - start
    finally:
        cost.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    out = {"torch": torch.__version__, "rounds": args.rounds, "models": {}}
    for name, make in (("helper_blocks", helper_blocks), ("transformer_encoder", encoder)):
        model, inputs = make()
        compile_s(model, inputs, False)  # warm: imports, first-call costs
        off, on = [], []
        for i in range(args.rounds):  # each first in every other round
            for profiled in (False, True) if i % 2 == 0 else (True, False):
                (on if profiled else off).append(compile_s(model, inputs, profiled))
        ratio = statistics.median(on) / statistics.median(off)
        out["models"][name] = {
            "off_s": round(statistics.median(off), 4), "on_s": round(statistics.median(on), 4),
            "ratio": round(ratio, 3),
        }  # fmt: skip
        print(f"{name}: off {statistics.median(off):.3f} s, on {statistics.median(on):.3f} s, "
              f"{ratio:.3f}x")  # fmt: skip
    path = ROOT / "bench" / "results" / "tracing_cost_cpu.json"
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
