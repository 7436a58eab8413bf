"""--try-fixes' `cudagraphs_marked` begins a CUDA-graph step (torch.compiler.
cudagraph_mark_step_begin) at each compiled call but one further down the same function as
the call before it. Look 26 (pytorch/examples' DCGAN on an H200, torch 2.11): a mark before
each call began a step at the discriminator's call on the fake batch, after the generator's
forward and before its backward, which then read activations the replays had overwritten
("accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run");
with a mark at each iteration's first call it ran. Gradient accumulation (the remedy's first
case: one call a micro-step, at one line) keeps a mark a call. Here on CPU, in the job's own
process under the probe: torch's own count of the marks (MarkStepBox), each iteration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from compilediag.harness.bootstrap import sitecustomize  # noqa: E402 - after the skip

JOB = """\
import json, sys
import torch
from torch import nn
from torch._inductor import cudagraph_trees

torch.manual_seed(0)
netG, netD = nn.Linear(4, 4), nn.Linear(4, 1)
g, d = torch.compile(netG, backend="eager"), torch.compile(netD, backend="eager")
optD = torch.optim.SGD(netD.parameters(), lr=0.1)
optG = torch.optim.SGD(netG.parameters(), lr=0.1)
box = cudagraph_trees.MarkStepBox
gan, accum = [], []
for _ in range(6):
    before = box.mark_step_counter
    d(torch.randn(8, 4)).mean().backward()
    fake = g(torch.randn(8, 4))
    d(fake.detach()).mean().backward()
    optD.step()
    optD.zero_grad()
    d(fake).mean().backward()
    optG.step()
    optG.zero_grad()
    gan.append(before - box.mark_step_counter)


def accumulate():  # a function of its own: its first call is no later line of the loop's
    before = box.mark_step_counter
    for _ in range(4):
        d(torch.randn(8, 4)).mean().backward()
    optD.step()
    optD.zero_grad()
    accum.append(before - box.mark_step_counter)


for _ in range(3):
    accumulate()
print(json.dumps({"gan": gan, "accum": accum}))
"""


def test_a_step_begins_at_each_iterations_first_call_not_between_a_gans_calls(
    tmp_path: Path,
) -> None:
    job = tmp_path / "gan.py"
    job.write_text(JOB)
    env = {
        **os.environ,
        "PYTHONPATH": os.path.dirname(sitecustomize.__file__),
        "COMPILEDIAG_RUNTIME_DIR": str(tmp_path / "runtime"),
        "COMPILEDIAG_REMEDY": "cudagraphs_marked",
    }
    proc = subprocess.run(
        [sys.executable, str(job)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    marks = json.loads(proc.stdout.strip().splitlines()[-1])
    # one a GAN iteration (its discriminator's call on the real batch), one a micro-step
    assert marks == {"gan": [1] * 6, "accum": [4] * 3}, marks
    # without the remedy, none: the probe marks nothing of its own
    env.pop("COMPILEDIAG_REMEDY")
    plain = subprocess.run(
        [sys.executable, str(job)], capture_output=True, text=True, env=env, timeout=300
    )
    assert json.loads(plain.stdout.strip().splitlines()[-1]) == {"gan": [0] * 6, "accum": [0] * 3}
