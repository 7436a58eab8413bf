"""A vision model trained with a validation pass, as timm's train.py runs one (train() +
grad, then eval() under torch.no_grad(); the evaluation loader's last batch is partial).
torch compiles one graph per mode, then one more for the smaller last batch. The report's
counts are torch's (its recompiles log); the mode switch is "expected: one graph per mode"
with the lines that switched; the last batch's recompile is advised at the user's call
(the argument the loop passes, not forward's parameter) - drop_last or mark_dynamic - and
each, applied, leaves only the mode's graphs."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

JOB = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn(self.conv(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.Sequential(Block(8), Block(8))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def batches(n, size, drop_last=False):
    for i in range(0, n, size):
        k = min(size, n - i)
        if k < size and drop_last:
            return
        yield torch.randn(k, 3, 16, 16), torch.randint(0, 2, (k,))


def train_one_epoch(model, opt):
    model.train()
    for input, target in batches(16, 4):
        loss = nn.functional.cross_entropy(model(input), target)
        loss.backward()
        opt.step()
        opt.zero_grad()


def validate(model):
    model.eval()
    with torch.no_grad():
        for input, target in batches(10, 4{drop}):  # the last batch holds 2
{mark}            output = model(input)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model = torch.compile(model, backend="eager")
for epoch in range(2):
    train_one_epoch(model, opt)
    validate(model)
"""
MARK = "            torch._dynamo.mark_dynamic(input, 0)\n"


@pytest.mark.parametrize("fix", ["drop_last", "mark_dynamic"])
def test_a_validation_pass_with_a_partial_last_batch(tmp_path: Path, fix: str) -> None:
    def run(drop: str = "", mark: str = "") -> tuple[dict, str]:
        (tmp_path / "train.py").write_text(JOB.format(drop=drop, mark=mark))
        proc = run_cli("run", "--format", "json", "--", sys.executable, "train.py",
                       env={"TORCH_LOGS": "recompiles"}, cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), proc.stderr

    report, log = run()
    lines = (tmp_path / "train.py").read_text().splitlines()
    eval_line = 1 + next(i for i, t in enumerate(lines) if "model.eval()" in t)
    call_line = 1 + next(i for i, t in enumerate(lines) if "output = model(input)" in t)
    assert len(report["recompiles"]) == log.count("Recompiling function") == 2
    mode, batch = report["recompiles"]
    assert mode["suggestion"].startswith("Expected: one graph per mode.")
    assert f"line {eval_line} `model.eval()`" in mode["suggestion"], mode["suggestion"]
    assert batch["failed_guard"] == "x dim 0 changed 4 → 2"
    said = batch["suggestion"]
    # (the job's own generator makes the batches, no DataLoader: dim 0 is not said a batch)
    assert f"(4 → 2) at train.py:{call_line} (in validate)" in said, said
    assert "Dropping or padding that last piece" in said and "mark_dynamic(input, 0)" in said
    assert "mark_dynamic(x, 0)" not in said
    # the advice, applied: the mode's graphs alone
    report, log = run(", drop_last=True") if fix == "drop_last" else run(mark=MARK)
    assert log.count("Recompiling function") == 1
    assert [r["cause"] for r in report["recompiles"]] == ["global"]


HAND_STEPPED = """\
import json
import re
import statistics
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
compiled = torch.compile(model, backend="eager")
data = torch.randn(60, 4, 16)
trained, evaluated = 0, []
for epoch in range(2):
    model.train()
    for i in range(10):  # no optimizer: the update by hand, as word_language_model's
        loss = compiled(data[i]).pow(2).mean()
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.01)
        trained += 1
    model.eval()
    with torch.no_grad():
        calls = 0
        for i in range(10, 60):
            compiled(data[i])
            calls += 1
    evaluated.append([trained, calls])
json.dump({"trained": trained, "evaluated": evaluated}, open("own.json", "w"))
"""


def test_an_evaluation_in_a_job_with_no_optimizer_is_no_step(tmp_path: Path) -> None:
    """Look 27: pytorch/examples' word_language_model (no optimizer: its steps are its
    model's calls) read "722 calls of the compiled forward", 622 of them its evaluation's
    under no_grad. Once a call has trained, an evaluation's calls are no steps: the steps
    are the job's own training count, and the evaluation is named after the steps it
    followed, with the calls the job made in it."""
    (tmp_path / "train.py").write_text(HAND_STEPPED)
    proc = run_cli("run", "--format", "json", "--", sys.executable, "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["runtime"]
    own = json.loads((tmp_path / "own.json").read_text())
    assert job["steps_at"] == "entry" and job["steps"] == own["trained"] == 20, job["steps"]
    (work,) = [w for w in job["other_work"] if w["kind"] == "evaluation"]
    assert work["steps"] == [n for n, _ in own["evaluated"]] == [10, 20], work
    assert work["calls"] == statistics.median(c for _, c in own["evaluated"]) == 50, work
    table = run_cli("run", "--", sys.executable, "train.py", cwd=tmp_path)
    said = " ".join(table.stdout.split())
    assert "steps 20 calls of the compiled" in said and "that trained" in said, said
    assert "its evaluation's calls run between them" in said, said


TWO_SETS = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def predict(x):
    with torch.no_grad():
{mark}        return compiled(x).argmax(1)


train_x, test_x = torch.randn(40, 16), torch.randn(20, 16)  # each passed whole, one batch
for epoch in range(3):
    loss = compiled(train_x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("train", predict(train_x).float().mean().item())
print("test", predict(test_x).float().mean().item())
"""


def test_a_test_set_passed_whole_after_the_training_set_is_no_last_batch(tmp_path: Path) -> None:
    """Look 28 (pytorch/examples' forward-forward): its training set and its test set, each
    one whole batch (1000, then 500), through the same predict(): "A smaller batch (1000 →
    500) ... the last, partial batch ... drop_last=True"; applied, torch recompiled the same.
    The smaller size came from another line of the job's (its test set): not a loop's last
    batch. Marking the dim, torch's count of recompiles for it is gone."""

    def run(mark: str = "") -> tuple[dict, str]:
        (tmp_path / "train.py").write_text(TWO_SETS.format(mark=mark))
        proc = run_cli("run", "--format", "json", "--", sys.executable, "train.py",
                       env={"TORCH_LOGS": "recompiles"}, cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), proc.stderr

    report, log = run()
    assert len(report["recompiles"]) == log.count("Recompiling function") == 2
    size = [r for r in report["recompiles"] if r["failed_guard"].endswith("40 → 20")]
    assert len(size) == 1, [r["failed_guard"] for r in report["recompiles"]]
    said = size[0]["suggestion"]
    assert "partial" not in said and "drop_last" not in said, said
    (mark,) = re.findall(r"`(torch\._dynamo\.mark_dynamic\(x, 0\))`", said)
    assert "at the call, train.py:12 (in predict)" in said, said
    report, log = run(f"        {mark}\n")
    assert log.count("Recompiling function") == 1  # the grad mode's alone
