"""A recompile on a tensor's layout (a slice of a longer tensor: nanoGPT's sample.py crops
`idx[:, -block_size:]`): the advice says what changed and how to give the input one
layout; applied, torch's own recompiles log is empty. Before: "See the guard above" for a
dynamic graph's stride guard, and "convert the input first" for a static one's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

JOB = """\
import torch

f = torch.compile(lambda x: (x * 2).sum(-1), backend="eager", dynamic={dynamic})
for n in (8, 9):
    f(torch.randn(2, n))
for n in (12, 13):
    f(torch.randn(2, n)[:, -8:]{fix})
"""


@pytest.mark.parametrize("dynamic", [True, False])
def test_a_slice_of_a_longer_tensor_gets_advice_that_removes_its_recompile(
    tmp_path: Path, dynamic: bool
) -> None:
    def run(fix: str) -> tuple[dict, str]:
        (tmp_path / "job.py").write_text(JOB.format(dynamic=dynamic, fix=fix))
        proc = run_cli("run", "--format", "json", "--", sys.executable, "job.py",
                       env={"TORCH_LOGS": "recompiles"}, cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), proc.stderr

    report, log = run("")
    stride = [r for r in report["recompiles"] if "stride" in r["failed_guard"]]
    assert stride and len(report["recompiles"]) == log.count("Recompiling function")
    for r in stride:
        assert "`x` arrives with another memory layout" in r["suggestion"], r["suggestion"]
        assert ".clone(memory_format=torch.contiguous_format)" in r["suggestion"]
    # the advice, applied where the slice is made
    report, log = run(".clone(memory_format=torch.contiguous_format)")
    assert not [r for r in report["recompiles"] if "stride" in r["failed_guard"]]
    assert len(report["recompiles"]) == log.count("Recompiling function")
