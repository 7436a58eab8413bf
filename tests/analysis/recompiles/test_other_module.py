"""Two compiled modules, one wrapper (look 26: a GAN's generator and discriminator, each
torch.compile'd). Since torch 2.12 every compiled module's call goes through one function of
torch's (torch.compile's wrapper), whose graphs torch caches together: the second module's
first call is a recompile of that function, torch's failed guard the first input's size. It
read as `noise`'s dim 1 changed, with mark_dynamic(noise, 1) and dynamic=True for the fix.
Checked against torch's own log and counter in the job; the old advice applied, torch
refuses the job (ConstraintViolationError), and the shared recompile limit, raised as the advice says, lets a ninth module
compile (torch's counter)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

JOB = """\
import os, sys
import torch
from torch import nn
sys.path.insert(0, os.environ["JOBS"])
from torch_counts import backend, facts_path, write_facts

netG = torch.compile(nn.Sequential(nn.Linear(16, 64), nn.Tanh()), backend=backend)
netD = torch.compile(nn.Sequential(nn.Linear(64, 1), nn.Sigmoid()), backend=backend)
for step in range(4):
    noise = torch.randn(8, 16)
    MARK
    fake = netG(noise)
    out = netD(fake.detach())
write_facts(facts_path())
"""

MODULES = """\
import torch
from torch import nn
from torch._dynamo.testing import CompileCounter
LIMIT
c = CompileCounter()
mods = [torch.compile(nn.Linear(8, k + 1), backend=c) for k in range(9)]
x = torch.randn(2, 8)
for m in mods:
    m(x)
print(c.frame_count)
"""


def _job(tmp_path: Path) -> tuple[dict, dict]:
    job, facts = tmp_path / "gan.py", tmp_path / "facts.json"
    job.write_text(JOB.replace("MARK", "pass"))
    proc = run_cli(
        "run", "--format", "json", "--", sys.executable, str(job),
        env={"JOB_FACTS": str(facts), "JOBS": str(ROOT / "tests/fixtures/run_jobs")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), json.loads(facts.read_text())


def _graphs(tmp_path: Path, limit: str) -> int:
    script = tmp_path / "modules.py"
    script.write_text(MODULES.replace("LIMIT", limit))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def test_another_compiled_modules_graph_is_not_a_change_of_inputs(tmp_path: Path) -> None:
    report, facts = _job(tmp_path)
    if not report["recompiles"]:
        pytest.skip("this torch compiles each module in a frame of its own (no shared wrapper)")
    (r,) = report["recompiles"]
    assert facts["recompiles"] == facts["recompiles_log"] == 1  # torch's own count and log
    assert r["frame"] == "torch.compile's wrapper" and r["cause"] == "shape"
    said = r["suggestion"]
    # netD's first parameters against netG's cached graph: netG's Linear(16, 64), netD's (64, 1)
    assert re.match(
        r"Another compiled module: its parameters differ from the cached graph's "
        r"\(`fn\[0\]\.(weight` size 64x16 → size 1x64|bias` size 64 → size 1)\)",
        said,
    ), said
    assert "nothing to mark dynamic" in said and "mark_dynamic(" not in said
    assert not r["also_changed"]  # the module's parameters are the advice's, not a fix's
    # the advice it had, applied: torch refuses to compile the job (the dim is 16 in it)
    marked = tmp_path / "marked.py"
    marked.write_text(JOB.replace("MARK", "torch._dynamo.mark_dynamic(noise, 1)"))
    env = {**os.environ, "JOBS": str(ROOT / "tests/fixtures/run_jobs")}
    proc = subprocess.run([sys.executable, str(marked)], capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and "ConstraintViolationError" in proc.stderr
    assert facts["frames"] == 2
    # the shared limit: the ninth module past torch's default of 8 runs eagerly; raised, not
    assert _graphs(tmp_path, "") == 8
    assert _graphs(tmp_path, "torch._dynamo.config.recompile_limit = 16") == 9


LAYERS = """\
import os, sys
import torch
from torch import nn
sys.path.insert(0, os.environ["JOBS"])
from torch_counts import backend, facts_path, write_facts


class Layer(nn.Linear):  # forward-forward's: each layer's forward compiled, one code object
    @torch.compile(backend=backend, dynamic=DYNAMIC)
    def forward(self, x):
        return torch.relu(torch.mm(x / (x.norm(2, 1, keepdim=True) + 1e-4), self.weight.T))


torch.manual_seed(0)
first, second = Layer(12, 6), Layer(6, 6)
x = torch.randn(10, 12)
for _ in range(3):
    second(first(x).detach())
write_facts(facts_path())
"""


def test_another_module_of_the_same_code_is_not_a_change_of_inputs(tmp_path: Path) -> None:
    """Look 29 (pytorch/examples' forward-forward: two layers of one class, its forward
    compiled): "x dim 1 changed 784 → 500 ... mark_dynamic(x, 1) ... or compile with
    dynamic=True"; with dynamic=True torch recompiled all the same (the second layer's
    weight, a parameter, keeps its shape static). Said as another module's graph, and
    torch's count with dynamic=True is the same."""
    env = {"JOBS": str(ROOT / "tests/fixtures/run_jobs")}
    counts = {}
    for dynamic in ("None", "True"):
        job, facts = tmp_path / f"layers_{dynamic}.py", tmp_path / f"facts_{dynamic}.json"
        job.write_text(LAYERS.replace("DYNAMIC", dynamic))
        proc = run_cli("run", "--format", "json", "--", sys.executable, str(job),
                       env={"JOB_FACTS": str(facts), **env})  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        counts[dynamic] = json.loads(facts.read_text())["recompiles"]
        report = json.loads(proc.stdout)
        if dynamic == "None":
            (r,) = report["recompiles"]
            said = r["suggestion"]
    assert counts == {"None": 1, "True": 1}, counts  # dynamic=True does not remove it
    assert said.startswith(
        "Another module that runs this code: its parameters differ from the cached graph's "
        "(`self.weight` size 6x12 → size 6x6)"
    ), said
    assert "nothing to mark dynamic" in said and "mark_dynamic(" not in said, said
