"""`compilediag run` on a job that compiled nothing says which of three it was (#36): it
never called torch.compile; it called it but never called what it returned (and what it
compiled, where); the job failed first. What the runtime probe saw in the job's own
process: each torch.compile call, its site, and whether its result ran."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import run_cli

# nanoGPT's sample.py, in small: compile the model, then call generate(), which calls the
# module itself
SAMPLE = """\
import torch
from torch import nn


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)

    @torch.no_grad()
    def generate(self, x, steps):
        for _ in range(steps):
            x = self(x).tanh()
        return x


model = GPT()
compiled = torch.compile(model, backend="eager")
print(model.generate(torch.randn(2, 8), 3).shape)
"""
CRASH = """\
import torch

model = torch.compile(torch.nn.Linear(4, 4), backend="eager")
raise RuntimeError("the data folder is missing")
"""


def _error(proc) -> str:
    return proc.stderr[proc.stderr.index("error: ") :]


def test_compiled_but_never_called(tmp_path: Path) -> None:
    (tmp_path / "sample.py").write_text(SAMPLE)
    proc = run_cli("run", "--", sys.executable, "sample.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    said = _error(proc)
    assert "it called torch.compile (GPT at sample.py:21) but never called what" in said, said
    assert "(`model.compile()`)" in said and "unrolls its token loop" in said
    # the advice, applied: the module compiled in place, and generate()'s calls compile
    fixed = SAMPLE.replace(
        'compiled = torch.compile(model, backend="eager")', 'model.compile(backend="eager")'
    )
    assert fixed != SAMPLE
    (tmp_path / "fixed.py").write_text(fixed)
    proc = run_cli("run", "--", sys.executable, "fixed.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 graph" in proc.stdout


def test_a_job_that_failed_before_calling_what_it_compiled(tmp_path: Path) -> None:
    (tmp_path / "crash.py").write_text(CRASH)
    proc = run_cli("run", "--", sys.executable, "crash.py", cwd=tmp_path)
    assert proc.returncode == 6, proc.stderr
    assert "the data folder is missing" in proc.stderr  # the job's own error, passed through
    said = _error(proc)
    assert "failed (exited with status 1)" in said and "Linear at crash.py:3" in said, said
    assert "before it failed" in said and "Fix the job's error first" in said


def test_a_job_that_never_called_torch_compile(tmp_path: Path) -> None:
    proc = run_cli("run", "--", sys.executable, "-c", "import torch; print(torch.ones(1))")
    assert proc.returncode == 2, proc.stderr
    assert "no Python process started from it called torch.compile" in _error(proc)
