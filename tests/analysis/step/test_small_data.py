"""A data loader whose batches cost the main process a fraction of a millisecond (a
TensorDataset of small rows, as a look's job had: 13-19% of a 2 ms step): the report said
"load in worker processes: DataLoader(..., num_workers=N)", and applied, the job's step went
from 1.7 ms to 3 ms. Handing a batch over from a worker costs about as much as making it:
no workers are advised, nor tried by --try-fixes; and the job's own clock says workers would
not have saved the part."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from compilediag.analysis.step.advice import WORKERS_MIN_MS
from tests.conftest import run_cli

pytestmark = pytest.mark.full

JOB = """\
import json, os, time
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(64 * 40, 64), torch.randint(0, 10, (64 * 40,)))
loader = DataLoader(data, batch_size=64, shuffle=True, num_workers={workers})
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
compiled = torch.compile(model, backend="eager")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
waits = []
it = iter(loader)
for _ in range(40):
    t = time.perf_counter()
    x, y = next(it)
    waits.append((time.perf_counter() - t) * 1e3)
    loss = nn.functional.cross_entropy(compiled(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
with open(os.environ["JOB_FACTS"], "w") as f:
    json.dump(waits, f)
"""


def run(tmp_path: Path, workers: int, *options: str) -> tuple[dict, list[float]]:
    job, facts = tmp_path / f"job{workers}.py", tmp_path / f"facts{workers}.json"
    job.write_text(JOB.format(workers=workers))
    proc = run_cli("run", "--format", "json", "--profile-steps", "10-30", *options, "--",
                   sys.executable, str(job), env={"JOB_FACTS": str(facts)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), json.loads(facts.read_text())


def test_a_loader_whose_batches_cost_little_is_not_advised_workers(tmp_path: Path) -> None:
    report, waits = run(tmp_path, 0)
    data = report["runtime"]["step_medians"]["data"]
    assert data < WORKERS_MIN_MS, data  # the case: a batch of a fraction of a millisecond
    notes = " ".join(report["timings"]["notes"])
    assert "num_workers" not in notes, notes
    # the job's own clock: the same loader's batch from two workers waits no less
    _, from_workers = run(tmp_path, 2)
    mine, theirs = statistics.median(waits[10:30]), statistics.median(from_workers[10:30])
    assert theirs > mine * 0.9, (mine, theirs)
