"""Does torch.profiler's CUDA activity slow the steps after it stops? One process: the
small language model (tests/fixtures/run_jobs/lm_train.py's LM) trains 40 steps, then 5
steps under torch.profiler (CUDA activity, as compilediag's kernel profile), then 40 more;
the median step before and after. Run as `python3 bench/cupti_after.py` with and without
TEARDOWN_CUPTI=1 (kineto then finalises CUPTI when the profiler stops; pytorch/pytorch
issue 144455 reports 10-20% slower training after the profiler without it)."""

import os
import statistics
import sys
import time

import torch

sys.path.insert(0, "tests/fixtures/run_jobs")
from lm_train import BATCH, LM, SEQ, VOCAB  # noqa: E402


def main() -> None:
    torch.manual_seed(0)
    model = LM().cuda()
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device="cuda")

    def step() -> float:
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = compiled(data[:, :-1], data[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    for _ in range(10):
        step()  # compiles, warms up
    before = [step() for _ in range(40)]
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CUDA])
    prof.start()
    for _ in range(5):
        step()
    prof.stop()
    after = [step() for _ in range(40)]
    b, a = statistics.median(before), statistics.median(after)
    print(f"TEARDOWN_CUPTI={os.environ.get('TEARDOWN_CUPTI', 'unset')}: before {b:.3f} ms, "
          f"after {a:.3f} ms, {a / b:.3f}x")  # fmt: skip


if __name__ == "__main__":
    main()
