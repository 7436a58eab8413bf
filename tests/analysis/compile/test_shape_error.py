"""A shape error of the program itself, met first by torch.compile (#68): the compiled model
called with a width its Linear does not take. Torch's compile fails as it runs the op on
fake tensors; the same call fails without torch.compile. Before: "torch.compile failed at
linear.py:134: RuntimeError when making fake tensor call", and the recompile's fix was
`mark_dynamic(args[0], 1)`. Now: the op's own error at the user's call, the job run again
without torch.compile to say whose error it is, and no advice to mark a size dynamic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli

JOB = """\
import torch
from torch import nn

model = torch.compile(nn.Sequential(nn.Linear(16, 8), nn.ReLU()), backend="eager")
for width in (16, 16, 24):
    model(torch.randn(4, width))
"""


def test_a_shape_error_eager_shares_is_the_programs_not_torch_compiles(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    # torch's own answer without torch.compile: the same call fails, with this error
    eager = subprocess.run(
        [sys.executable, str(job)], capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "TORCHDYNAMO_DISABLE": "1"},
    )  # fmt: skip
    assert eager.returncode != 0
    raised = next(x for x in eager.stderr.splitlines() if x.startswith("RuntimeError: "))
    proc = run_cli("run", "--format", "json", "--", sys.executable, "job.py", cwd=tmp_path)
    assert proc.returncode == 4, proc.stderr  # a compile failed: the report is still given
    report = json.loads(proc.stdout)
    (failure,) = report["compile_failures"]
    assert (failure["file"], failure["line"]) == ("job.py", 6), failure
    assert "must have same reduction dim" in failure["reason"], failure["reason"]
    assert failure["fix"].startswith("Run again without torch.compile (TORCHDYNAMO_DISABLE=1), "
                                     "the job fails the same way"), failure["fix"]  # fmt: skip
    assert raised in failure["fix"], (raised, failure["fix"])
    (recompile,) = report["recompiles"]
    assert recompile["compile_id"] == failure["compile_id"] == "0/1"
    assert "compile failed" in recompile["suggestion"]
    assert "mark_dynamic" not in recompile["suggestion"] + failure["fix"]
