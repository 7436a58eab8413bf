"""The kernel profile after the window does not change what torch compiles (a thirteenth
look's F9): torch.profiler's with_flops, active while torch compiled, read a fake tensor's
size as an int and pinned a dynamic batch (a guard `Eq(s, 32)`), and the job recompiled once
more than it does alone, which the report gave as the job's. The profiler's CPU ops are off
while torch compiles (a step that compiles is held out of the profile anyway)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, run_cli

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "profiled_recompile.py"


def test_a_compile_in_the_kernel_profile_compiles_as_the_job_alone_does(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(JOB.parent)}
    alone = tmp_path / "alone.json"
    subprocess.run(
        [sys.executable, str(JOB)], check=True, capture_output=True, timeout=300,
        env={**os.environ, **env, "JOB_FACTS": str(alone)},
    )  # fmt: skip
    torch_says = json.loads(alone.read_text())
    under = tmp_path / "under.json"
    proc = run_cli(
        "run", "--profile-steps", "6-8", "--format", "json", "-o", str(tmp_path / "r.json"),
        "--", sys.executable, str(JOB), env={**env, "JOB_FACTS": str(under)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    # the schedule's recompile (step 10) fell in the kernel profile, which held its step
    assert 10 in report["runtime"]["kernel_steps_held"], report["runtime"]
    assert report["runtime"]["kernel_steps"] >= 1
    assert torch_says["recompiles"] == 2  # the short batch, then the schedule's float
    assert json.loads(under.read_text())["recompiles"] == torch_says["recompiles"]
    assert report["summary"]["recompiles"] == torch_says["recompiles"]
    assert report["summary"]["graphs"] == torch_says["frames"]
