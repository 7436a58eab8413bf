"""Python state mutated in forward (#36, item 8): a list that gets a `.item()` appended on
every call - a break, then a length guard that fails on every call until the recompile
limit. The report says the cause (forward grows the list, line and code), says the resume
frame's repeated recompile once, and its advice, applied, leaves torch's own count with
no recompile."""

from __future__ import annotations

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
