"""Python state mutated in forward (#36, item 8): a list that gets a `.item()` appended on
every call - a break, then a length guard that fails on every call until the recompile
limit. The report says the cause (forward grows the list, line and code), says the resume
frame's repeated recompile once, and its advice, applied, leaves torch's own count with
no recompile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_json

MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.stats = []

    def forward(self, x):
        h = self.fc(x)
        self.stats.append(h.abs().mean().item())
        return h.relu()


def get_model():
    return Net()


def get_input_sets():
    return [(torch.randn(4, 8),) for _ in range(6)]
"""
# the advice applied: the statistic kept in a tensor buffer, updated in place
FIXED = MODEL.replace(
    "        self.stats = []\n", '        self.register_buffer("stat", torch.zeros(()))\n'
).replace(
    "        self.stats.append(h.abs().mean().item())\n",
    "        self.stat.copy_(h.abs().mean().detach())\n",
)


def test_a_list_grown_in_forward_is_named_as_the_cause(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch._dynamo.testing import CompileCounter

    (tmp_path / "model.py").write_text(MODEL)
    report, proc = run_json("recompiles", "model.py", "--backend", "eager", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    grown = [r for r in report["recompiles"] if r["cause"] == "length"]
    assert grown and all("forward changes Python state on every call" in r["suggestion"]
                         for r in grown)  # fmt: skip
    assert "line 13: `self.stats.append(h.abs().mean().item())`" in grown[0]["suggestion"]
    resumed = [r for r in report["recompiles"] if r["cause"] == "object"]
    assert resumed and all("Remove the break" in r["suggestion"] for r in resumed)
    assert "create it once and keep it alive" not in str(report["recompiles"])
    # the resume frame failed the same guard each time: said once, with the count
    table = run_cli("recompiles", "model.py", "--backend", "eager", cwd=tmp_path).stdout
    assert f"then the same, {len(resumed) - 1} more times" in " ".join(table.split())
    # the advice, applied: torch's own count has no recompile, and one graph
    namespace: dict = {}
    exec(compile(FIXED, str(tmp_path / "fixed.py"), "exec"), namespace)
    torch._dynamo.reset()
    counter = CompileCounter()
    model = torch.compile(namespace["get_model"](), backend=counter)
    for args in namespace["get_input_sets"]():
        model(*args)
    torch._dynamo.reset()
    assert counter.frame_count == 1


CONFIG_JOB = """\
import os

import torch
from torch import nn


class Config:
    problem_type = None


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()
        self.fc = nn.Linear(8, 3)

    def forward(self, x, labels):
        logits = self.fc(x)
        if self.config.problem_type is None:
            if logits.shape[-1] == 1:
                self.config.problem_type = "regression"
            else:
                self.config.problem_type = "single_label"
        if self.config.problem_type == "single_label":
            return nn.functional.cross_entropy(logits, labels)
        return logits.sum()


model = Classifier()
if os.environ.get("FIX"):
    exec(os.environ["FIX"])
step = torch.compile(model, backend="eager")
for _ in range(3):
    step(torch.randn(4, 8), torch.randint(0, 3, (4,))).backward()
"""


def test_an_attribute_forward_sets_on_its_first_call_names_the_line_and_the_value(
    tmp_path: Path,
) -> None:
    """Forward sets a config field on its first call (the second call recompiles): the
    advice names the line that set it - of two assignments, the one whose value the
    recompiled graph found - and the value to set beforehand; applied, nothing recompiles
    (torch's own recompiles log, under the same run)."""
    import re
    import sys

    (tmp_path / "train.py").write_text(CONFIG_JOB)

    def run(fix: str = "") -> tuple[dict, str]:
        proc = run_cli("run", "--format", "json", "--", sys.executable, "train.py",
                       env={"FIX": fix, "TORCH_LOGS": "recompiles"}, cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), proc.stderr

    report, log = run()
    (r,) = report["recompiles"]
    assert log.count("Recompiling function") == 1
    assert '(train.py:23: `self.config.problem_type = "single_label"`)' in r["suggestion"]
    fix = re.search(r"\(`(model\.config\.problem_type = .+?)`\)", r["suggestion"])
    assert fix and fix[1] == "model.config.problem_type = 'single_label'", r["suggestion"]
    report, log = run(fix[1])
    assert report["recompiles"] == [] and "Recompiling function" not in log
