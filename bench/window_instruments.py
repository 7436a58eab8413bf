"""What each of the window's instruments costs a step (#74), in one process, so that no
drift between processes (up to 1.8x on a GPU host: RESULTS) reads as a cost:
`python bench/window_instruments.py [ROUNDS] [--device cuda]`, or on 2 ranks
`torchrun --nproc-per-node 2 bench/window_instruments.py [ROUNDS] --job gpt_ddp`.

The probe is installed as `compilediag run`'s bootstrap installs it (hooks.install), on a job
whose loop times its own steps by its clock (time.perf_counter; on CUDA after a synchronize):
- `mlp` (default): a compiled MLP trained with AdamW (the 1 ms CPU step of
  tests/fixtures/run_jobs/one_ms_step.py, Inductor; on CUDA each step ends in a synchronize,
  as mlp_launch.py's do);
- `gpt_ddp`: the nanoGPT-style DDP job of tests/fixtures/run_jobs/gpt_ddp.py (its model and
  get_batch, Inductor, two micro-steps under no_sync, clipping, AdamW), rank 1's get_batch
  slow ($JOB_SLOW_RANK, default 1): NCCL on GPUs, gloo on CPU. Printed by rank 0; the ranks
  switch instruments at the same steps.
Its window is opened again and again (41 steps, the probe's own window logic), and each time
the job's own clock gives the median step inside it against the median of the steps around
it (the 22 before it, the 20 after), one instrument turned off at a time: `full` (every
instrument the window takes), `no lines` (the loop's line clock), `no backward marks` (each
compiled graph's backward timed), `no marks` (no part timed at all: the step's start alone).
Variants alternate within each round; printed per variant: the median over the rounds of
window / around, and each round's."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "compilediag" / "harness" / "bootstrap"))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402,F401
from _compilediag_runtime import window_reads  # noqa: E402
from _compilediag_runtime.hooks import install  # noqa: E402
from _compilediag_runtime.probe import Probe  # noqa: E402
from torch import nn  # noqa: E402

VARIANTS = ["full", "no lines", "no backward marks", "no marks"]


def mlp_steps(device: str) -> Callable[[int], list[float]]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8)
    ).to(device)
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 64, device=device), torch.randn(64, 8, device=device)

    def steps(n: int) -> list[float]:
        out = []
        for _ in range(n):
            start = time.perf_counter()
            loss = (compiled(x) - y).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            if device == "cuda":
                torch.cuda.synchronize()
            out.append((time.perf_counter() - start) * 1e3)
        return out

    return steps


def gpt_ddp_steps() -> Callable[[int], list[float]]:
    """gpt_ddp.py's model, batches and loop (its iteration, evaluation left out)."""
    os.environ.setdefault("JOB_SLOW_RANK", "1")
    sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "run_jobs"))
    import gpt_ddp as job  # its process group, rank and device, its slow rank's batches
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(1337)
    raw = job.GPT().to(job.DEVICE)
    optimizer = torch.optim.AdamW(raw.parameters(), lr=6e-4)
    model = DistributedDataParallel(torch.compile(raw))
    batch = list(job.get_batch("train"))

    def steps(n: int) -> list[float]:
        out = []
        end = job.clock()
        for _ in range(n):
            for micro in range(job.ACCUM):
                if micro < job.ACCUM - 1:
                    with model.no_sync():
                        _, loss = model(*batch)
                        (loss / job.ACCUM).backward()
                else:
                    _, loss = model(*batch)
                    (loss / job.ACCUM).backward()
                batch[:] = job.get_batch("train")
            torch.nn.utils.clip_grad_norm_(raw.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            now = job.clock()
            out.append((now - end) * 1e3)
            end = now
        return out

    return steps


def main() -> None:
    args = sys.argv[1:]
    device = "cuda" if "--device" in args and args[args.index("--device") + 1] == "cuda" else "cpu"
    job = args[args.index("--job") + 1] if "--job" in args else "mlp"
    rounds = int(next((a for a in args if a.isdigit()), "8"))
    probe = Probe(None, False)
    install(probe)
    steps = gpt_ddp_steps() if job == "gpt_ddp" else mlp_steps(device)
    steps(60)
    lines, backward, mark = (
        window_reads._loop_clock, Probe.time_backward, Probe.mark  # the probe's own
    )  # fmt: skip

    def variant(v: str) -> None:
        window_reads._loop_clock = (lambda *a: None) if v in ("no lines", "no marks") else lines
        Probe.time_backward = (  # type: ignore[method-assign]
            (lambda self, cid, out: None) if v in ("no backward marks", "no marks") else backward
        )
        Probe.mark = (lambda self, *a: False) if v == "no marks" else mark  # type: ignore[method-assign]

    ratios: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for v in VARIANTS:
            variant(v)
            s = probe.steps
            probe.window = (s + 25, s + 65)
            ms = steps(100)
            window, around = ms[26:64], ms[:22] + ms[80:]
            ratios[v].append(statistics.median(window) / statistics.median(around))
    variant("full")
    if os.environ.get("RANK", "0") != "0":
        return
    where: Any = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    print(json.dumps({
        "job": job, "device": where, "torch": torch.__version__,
        "window_over_around": {v: round(statistics.median(r), 4) for v, r in ratios.items()},
        "each_round": {v: [round(x, 4) for x in r] for v, r in ratios.items()},
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
