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


def _run(tmp_path: Path, program: str) -> tuple[dict, str]:
    """`compilediag run` on the program, torch's recompiles log on: the report, the log."""
    (tmp_path / "job.py").write_text(program)
    proc = run_cli("run", "--format", "json", "--", sys.executable, "job.py",
                   env={"TORCH_LOGS": "recompiles"}, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_a_last_batch_after_evaluation_is_one_cause_and_drop_last_removes_it(
    tmp_path: Path,
) -> None:
    def run(fix: str) -> tuple[dict, str]:
        return _run(tmp_path, JOB.format(fix=fix))

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


GAN = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
netG = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
netD = nn.Sequential(nn.Linear(16, 1), nn.Sigmoid())
compiledD = torch.compile(netD, backend="aot_eager")
data = TensorDataset(torch.randn(40, 16))
for (real,) in DataLoader(data, batch_size=16{fix}):
    fake = netG(torch.randn(real.size(0), 4))
    compiledD(real).mean().backward()  # a batch that needs no grad
    compiledD(fake).mean().backward()  # one that does
"""


def test_a_last_batch_beside_a_requires_grad_graph_is_the_batchs(tmp_path: Path) -> None:
    """Look 26 (pytorch/examples' DCGAN): the discriminator has a graph for a batch that
    needs no grad and one for the generator's output, which does; the loader's last, smaller
    real batch failed the newer graph on requires_grad (torch names it first) and the older
    on its size. Both cached graphs differ from the new one in the one input: it read as
    requires_grad, and the requires_grad fix left it. Apart by their fields, the older
    differs in the size alone, so the cause is the batch, and drop_last removes it."""

    def run(fix: str) -> tuple[dict, str]:
        return _run(tmp_path, GAN.format(fix=fix))

    report, log = run("")
    # torch's log for the real batch of 8: the requires_grad graph's guard, then the size's
    assert "requires_grad mismatch. expected requires_grad=1" in log
    assert "size mismatch at index 0. expected 16, actual 8" in log
    batch = [r for r in report["recompiles"] if r["change"]]
    assert {r["change"]["old"] for r in batch} == {16}, report["recompiles"]
    first_real = next(
        r for r in report["recompiles"] if "expected 16, actual 8" in " ".join(r["reasons"])
        and "requires_grad=1" in r["reasons"][0]
    )  # fmt: skip
    assert first_real["failed_guard"] == "args[0] dim 0 changed 16 → 8", first_real
    assert "drop_last=True" in first_real["suggestion"]
    fixed, log = run(", drop_last=True")
    assert all("size mismatch" not in r for x in fixed["recompiles"] for r in x["reasons"])
    assert len(fixed["recompiles"]) < len(report["recompiles"])


TWO_LOADERS = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(4, 2)
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(TensorDataset(torch.randn(40, 4)), batch_size=16{fix})
test = DataLoader(TensorDataset(torch.randn(20, 4)), batch_size=16)
for epoch in range(2):
    for (x,) in train:
        {mark}compiled(x).sum().backward()
        opt.step()
        opt.zero_grad()
    for (x,) in test:
        compiled(x).sum().backward()  # (grad on: the training graph's mode)
        opt.zero_grad()
"""


def test_drop_last_on_one_loader_is_not_said_to_save_a_compile_another_loader_makes(
    tmp_path: Path,
) -> None:
    """Look 27 (pytorch/examples' VAE): "either fix saves this one compile" for its train
    loader's last batch; `drop_last=True` there moved the recompile to the test loader's
    last batch (116), which the dynamic graph had served. The words say what each saves, as
    torch's own log counts them: drop_last on the train loader moves it, marking saves it."""
    report, log = _run(tmp_path, TWO_LOADERS.format(fix="", mark=""))
    (batch,) = report["recompiles"]
    assert log.count("Recompiling function") == 1
    said = batch["suggestion"]
    assert "marking it saves this one compile" in said, said
    assert "dropping the last batch saves it only where no other size reaches" in said, said
    assert "either fix saves" not in said
    _, moved = _run(tmp_path, TWO_LOADERS.format(fix=", drop_last=True", mark=""))
    assert moved.count("Recompiling function") == 1  # the test loader's 4 now
    mark = "torch._dynamo.mark_dynamic(x, 0)\n        "
    _, saved = _run(tmp_path, TWO_LOADERS.format(fix="", mark=mark))
    assert saved.count("Recompiling function") == 0
