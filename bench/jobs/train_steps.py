"""bench/run.py figure 6's and 9's job: a compiled MLP trained for $STEPS steps (default
3000), written as a user's script is; it writes the wall time of its steady-state loop (the
steps after the first 50, which compile and warm up) to $LOOP_TIME, and each step's own wall
time in milliseconds (a JSON list, step 1 first) to $STEP_TIMES. $DEVICE: where it trains
(cpu by default); on CUDA each step ends with the loss's .item(), as a logging loop does,
so that a step's wall time holds its GPU work."""

import json
import os
import time

import torch
from torch import nn

torch.manual_seed(0)
device = os.environ.get("DEVICE", "cpu")
model = nn.Sequential(
    nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 8)
).to(device)
compiled = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64, device=device), torch.randn(32, 8, device=device)
steps = int(os.environ.get("STEPS", "3000"))
step_ms = []
for i in range(steps):
    if i == 50:
        t0 = time.perf_counter()
    s0 = time.perf_counter()
    loss = (compiled(x) - y).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if device != "cpu":
        loss.item()
    step_ms.append((time.perf_counter() - s0) * 1e3)
elapsed = time.perf_counter() - t0
if os.environ.get("STEP_TIMES"):
    with open(os.environ["STEP_TIMES"], "w") as f:
        f.write(json.dumps(step_ms))
if os.environ.get("LOOP_TIME"):
    with open(os.environ["LOOP_TIME"], "w") as f:
        f.write(f"{elapsed}\n")
