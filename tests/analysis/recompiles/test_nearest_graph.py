"""A partial last batch beside dropout's `training` flag (#68): evaluation (model.eval()) between
two training steps, then the loader's last, smaller batch. Torch checks the eval graph first,
which fails on the size (and would on the mode): what else the call changed is read against
the nearest cached graph, the training one, where only the size differs. Before: "this call
also changed `fn[2].training` (another value). A fix has to cover each of them", yet
`drop_last=True` alone removes the recompile."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import run_cli

JOB = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 1))
compiled = torch.compile(model, backend="aot_eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(40, 16), torch.randn(40, 1))
train = DataLoader(data, batch_size=16{fix})
for step, (x, y) in enumerate(train):
    model.train()
    loss = nn.functional.mse_loss(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 1:  # evaluate every 2 steps
        model.eval()
        compiled(torch.randn(16, 16))
"""


def test_a_last_batch_after_evaluation_is_one_cause_and_drop_last_removes_it(
    tmp_path: Path,
) -> None:
    def run(fix: str) -> tuple[dict, str]:
        (tmp_path / "job.py").write_text(JOB.format(fix=fix))
        proc = run_cli("run", "--format", "json", "--", sys.executable, "job.py",
                       env={"TORCH_LOGS": "recompiles"}, cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), proc.stderr

    report, log = run("")
    assert len(report["recompiles"]) == log.count("Recompiling function") == 2
    mode, batch = report["recompiles"]
    assert "training" in mode["failed_guard"] and "one graph per mode" in mode["suggestion"]
    assert batch["change"] == {"source": "args[0]", "dim": 0, "old": 16, "new": 8}
    # torch checked the eval graph first: its failed guard is the size, and it differs in
    # the mode too; the training graph differs in the size alone
    assert "0/1: tensor 'args[0]' size mismatch" in log
    assert batch["also_changed"] == [], batch["also_changed"]
    assert "drop_last=True" in batch["suggestion"] and "cover each" not in batch["suggestion"]
    # applied, the advice removes the recompile: the mode's is all torch logs
    fixed, log = run(", drop_last=True")
    assert log.count("Recompiling function") == 1 == len(fixed["recompiles"])
    assert "training" in fixed["recompiles"][0]["failed_guard"]
