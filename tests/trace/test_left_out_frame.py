"""A break inside torch's nn.TransformerEncoder (its causal-mask check's `.item()`) under a
compiled forward: torch 2.13's traceback of it leaves the compiled frame out (the caller's
line, then torch's), and the report put the break at `def forward` (explain) or at the
script's line that called the model (a trace), "reached from 2 lines of yours". The site is
the forward's line torch resumed after, the line torch's own explain names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli

MODEL = """\
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 8)

    def forward(self, src):
        mask = torch.log(torch.tril(torch.ones(len(src), len(src))))
        out = self.encoder(src, mask=mask)
        return self.head(out)


def get_model():
    torch.manual_seed(0)
    return Encoder()


def get_inputs():
    return (torch.randn(12, 4, 32),)
"""
JOB = """\
import torch
from model import get_model, get_inputs

compiled = torch.compile(get_model(), backend="eager")
compiled(*get_inputs())
compiled(*get_inputs())
"""
TORCH_SAYS = """\
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from model import get_model, get_inputs
ex = torch._dynamo.explain(get_model())(*get_inputs())
mine = [(f.filename, f.lineno) for b in ex.break_reasons for f in b.user_stack
        if f.filename.endswith("model.py")]
print(json.dumps(sorted(set((f.rsplit("/", 1)[1], n) for f, n in mine))))
"""


def test_a_break_whose_traceback_leaves_the_frame_out_is_at_the_frames_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    line = 1 + MODEL.splitlines().index("        out = self.encoder(src, mask=mask)")
    said = subprocess.run(
        [sys.executable, "-c", TORCH_SAYS, str(tmp_path)], capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert json.loads(said.stdout.splitlines()[-1]) == [["model.py", line]]
    proc = run_cli("explain", "model.py", "--no-timings", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    sites = [(b["file"], b["line"]) for b in json.loads(proc.stdout)["graph_breaks"]]
    assert sites == [("model.py", line)], sites
    # the same from a job's own trace, the model called from two lines of a script
    (tmp_path / "job.py").write_text(JOB)
    subprocess.run(
        [sys.executable, "job.py"], cwd=tmp_path, check=True, capture_output=True,
        env={"TORCH_TRACE": str(tmp_path / "trace"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    proc = run_cli("report", str(tmp_path / "trace"), "--format", "json", cwd=tmp_path)
    breaks = json.loads(proc.stdout)["graph_breaks"]
    assert [(b["file"], b["line"]) for b in breaks] == [("model.py", line)], breaks


def test_the_causal_check_is_fixed_in_the_call(tmp_path: Path) -> None:
    """Its fix: the capture_scalar_outputs setting said "the break is gone", but torch then
    breaks at the check's bool() (torch's explain: 1 break, "Could not guard on
    data-dependent expression"). The call says the mask is causal instead: applied, torch
    compiles forward whole."""
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    proc = run_cli("explain", "model.py", "--no-timings", "--format", "json", cwd=tmp_path)
    (brk,) = json.loads(proc.stdout)["graph_breaks"]
    assert "`is_causal=True` with a causal mask" in brk["suggestion"], brk["suggestion"]
    assert "capture_scalar_outputs = True" not in brk["suggestion"]
    model.write_text(MODEL.replace("mask=mask)", "mask=mask, is_causal=True)"))
    proc = run_cli("explain", "model.py", "--no-timings", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["graph_breaks"] == []
