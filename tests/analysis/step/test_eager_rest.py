"""A break torch could not resume after (an LSTM in forward, GB0014: "Encountered graph
break that we cannot resume from"): the rest of forward runs in eager mode inside the
compiled call, its backward outside the compiled graphs. pytorch/examples' word language
model under `run` (a twenty-fifth look) read 51 ms of its 143 ms step as "Dynamo's guard
checks and its code around the graphs", and "bound by no one part ... compute 3%". The
step's parts say now whose that time is, the verdict is the eager code's, and the break's
own fix (allow_rnn, torch's experimental support), applied, leaves no eager rest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import run_cli

JOB = """\
import torch
from torch import nn
{allow}


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.drop = nn.Dropout(0.2)
        self.rnn = nn.LSTM(32, 128, 2)
        self.out = nn.Linear(128, 100)

    def forward(self, x, hidden):
        h = self.drop(self.emb(x))
        o, hidden = self.rnn(h, hidden)
        return self.out(self.drop(o)), hidden


torch.manual_seed(0)
model = LM()
compiled = torch.compile(model, backend="aot_eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(24):
    x = torch.randint(0, 100, (35, 16))
    hidden = (torch.zeros(2, 16, 128), torch.zeros(2, 16, 128))
    out, hidden = compiled(x, hidden)
    loss = nn.functional.cross_entropy(out.view(-1, 100), x.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
ALLOW = "torch._dynamo.config.allow_rnn = True"


def _run(tmp_path: Path, allow: str) -> dict:
    job = tmp_path / "lm.py"
    job.write_text(JOB.format(allow=allow))
    proc = run_cli(
        "run", "--profile-steps", "8-16", "--no-kernels", "--format", "json", "--",
        sys.executable, job.name, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_rest_a_break_leaves_eager_is_the_eager_codes_time(tmp_path: Path) -> None:
    report = _run(tmp_path, "")
    (brk,) = report["graph_breaks"]
    rnn_line = 1 + JOB.splitlines().index("        o, hidden = self.rnn(h, hidden)")
    assert brk["line"] == rnn_line, brk
    b = report["timings"]["breakdown"]
    if not brk["skipped_rest"]:  # torch 2.15 resumes after it: the rest is a graph of its own
        assert b["eager_rest"] == "" and report["runtime"]["bound"]["part"] != "none"
        assert any(g["frame"] == f"forward, after line {rnn_line}" for g in report["graphs"])
        return
    assert brk["skipped_rest"] == "forward", brk  # torch 2.13: "cannot resume from"
    assert b["eager_rest"] == f"forward after lm.py:{rnn_line}", b
    # the LSTM ran in the calls: far more than the graph before it, and backward's most
    assert b["in_call_ms"] > 5 * b["in_graphs_ms"], b
    assert b["eager_backward_ms"] > 0.5 * b["backward_ms"], b
    bound = report["runtime"]["bound"]
    assert bound["part"] == "eager" and "rest of forward after lm.py" in bound["why"], bound
    assert brk["time_lost_ms"] == round(b["in_call_ms"] + b["eager_backward_ms"], 6)
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    text = run_cli("render", str(saved)).stdout
    said = " ".join(text.split())
    assert "(the rest of forward after lm.py:" in said and "Dynamo's guard checks and" not in said
    # the break's fix applied: no break, nothing left eager in the calls
    fixed = _run(tmp_path, ALLOW)
    assert fixed["graph_breaks"] == [] and fixed["timings"]["breakdown"]["eager_rest"] == ""
