"""The value a graph break's line makes, and what else a recompiling call changed (a look,
torch 2.14): `n = int(h.abs().max().item() * 10)` breaks at `.item()`, and the frame after
the break is compiled for that float, as for the `scale` the caller passes. Torch names one
failed guard a call (`scale`); the new graph made both dynamic, which torch does only for a
value the call changed. Before: "pass `scale` as a tensor" alone, no word of the other, and
applied, the frame compiled again for the `.item()` value, which the report then called
"`n` changed (was 1.24…)" where n was 12."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

JOB = """\
import torch
from torch import nn
{setting}

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, scale):
        h = self.fc(x)
        n = int(h.abs().max().item() * 10)  # a graph break
        return h * scale + n


torch.manual_seed(0)
f = torch.compile(Net(), backend="eager")
for s in (0.5, 0.7, 0.9):
    f(torch.randn(4, 16), {scale})
"""
LINE = 12  # the breaking line's number in JOB
RESUMED = "Recompiling function torch_dynamo_resume_in_forward_at_12"


def run(tmp_path: Path, scale: str = "s", setting: str = "") -> tuple[dict, str]:
    (tmp_path / "job.py").write_text(JOB.format(scale=scale, setting=setting))
    proc = run_cli("run", "--format", "json", "--", sys.executable, "job.py",
                   env={"TORCH_LOGS": "recompiles"}, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def resumed(report: dict) -> list[dict]:
    return [r for r in report["recompiles"] if "after line" in r["frame"]]


def test_what_else_the_call_changed_is_the_break_value_and_the_advice_covers_both(
    tmp_path: Path,
) -> None:
    report, log = run(tmp_path)
    assert log.count(RESUMED) == len(resumed(report)) == 1
    (first,) = resumed(report)
    assert first["failed_guard"].startswith("scale changed (was 0.5)")
    assert re.search(r"\bscale'?\]? == 0\.5\b", log)  # torch's named guard (2.13: `scale`)
    assert any(
        a.startswith(f"`h.abs().max().item()` (line {LINE}) (was ") and "now dynamic" in a
        for a in first["also_changed"]
    ), first["also_changed"]
    # the guard torch named, fixed alone: the frame compiles again, for the break's value
    report, log = run(tmp_path, scale="torch.tensor(s)")
    assert log.count(RESUMED) == len(resumed(report)) == 1
    (again,) = resumed(report)
    (value,) = re.findall(r"___stack\d+'?\]? == ([\d.]+)", log)
    shown = re.match(rf"`h\.abs\(\)\.max\(\)\.item\(\)` \(line {LINE}\) changed \(was ([\d.]+)…?\)",
                     again["failed_guard"])  # fmt: skip
    assert shown and float(shown[1]) == pytest.approx(float(value), rel=1e-5), again["failed_guard"]
    assert "`n`" not in again["failed_guard"]  # n is its int, times 10
    # and every conversion of the line is named where the advice says drop it
    assert "drop `int(…)` and `.item()`" in again["suggestion"], again["suggestion"]
    # the break's own fix, applied beside it: torch compiles the frame once, no recompile
    setting = "torch._dynamo.config.capture_scalar_outputs = True"
    assert "capture_scalar_outputs = True" in again["suggestion"]
    report, log = run(tmp_path, scale="torch.tensor(s)", setting=setting)
    assert "Recompiling function" not in log and report["recompiles"] == []
