"""The window a `run` advises after torch compiled in it holds steps the job made and can
time (a twentieth look was advised steps 4-6 of a job of 5 calls: one step timed, and from
it a firm "bound by eager, 85%", where two runs more read 11% and bound by compute). A
verdict over one measured step says so. Steps of two kinds: the optimizer's, and the calls
of the compiled model (a call's step is timed to the next call: the last has no end)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

JOBS = ROOT / "tests" / "fixtures" / "run_jobs"
OPTIMIZER = JOBS / "profiled_recompile.py"  # a short batch at step 5 (and a float at 10)
CALLS = """\
import os
import torch
from torch_counts import backend, facts_path, write_facts

model = torch.compile(torch.nn.Linear(12, 4), backend=backend)
for call in range(1, int(os.environ["JOB_STEPS"]) + 1):
    model(torch.randn(7 if call == 3 else 4, 12))  # call 3: torch compiles again
write_facts(facts_path())
"""

pytestmark = pytest.mark.full  # end-to-end runs of a job


def _job(tmp_path: Path, kind: str) -> tuple[Path, int]:
    """The job and the step torch compiled again in."""
    if kind == "optimizer":
        return OPTIMIZER, 5
    job = tmp_path / "calls.py"
    job.write_text(CALLS)
    return job, 3


def _run(tmp_path: Path, job: Path, steps: int, window: str) -> tuple[dict, str]:
    facts = tmp_path / f"facts_{steps}_{window}.json"
    out = tmp_path / "r.json"
    proc = run_cli(
        "run", "--profile-steps", window, "--no-kernels", "--format", "json", "-o", str(out),
        "--", sys.executable, str(job),
        env={"PYTHONPATH": str(JOBS), "JOB_STEPS": str(steps), "JOB_FACTS": str(facts)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    torch_says = json.loads(facts.read_text())
    assert torch_says["recompiles"] == 1  # by the job's own counter
    report = json.loads(out.read_text())
    assert report["summary"]["recompiles"] == torch_says["recompiles"]
    rendered = run_cli("render", str(out)).stdout
    return report["runtime"], " ".join(rendered.split())


@pytest.mark.parametrize("kind", ["optimizer", "calls"])
def test_the_window_advised_after_a_compile_is_one_the_job_can_time(
    tmp_path: Path, kind: str
) -> None:
    job, compiled = _job(tmp_path, kind)
    window = f"{compiled - 1}-{compiled + 1}"
    runtime, said = _run(tmp_path, job, compiled + 4, window)
    assert runtime["window_compiled"] == [compiled], runtime["window_compiled"]
    advised = re.search(r"--profile-steps (\d+)-(\d+)\)", said)
    assert advised is not None, said
    runtime, said = _run(tmp_path, job, compiled + 4, f"{advised[1]}-{advised[2]}")  # as advised
    assert runtime["window_compiled"] == [] and runtime["window_steps"] >= 2, runtime
    assert "step alone" not in said, said
    # too few steps after the compile: said, and no window past them advised
    _, said = _run(tmp_path, job, compiled + 1 + (kind == "calls"), window)  # one step timeable
    assert "too few steps came after the last compile to time several" in said, said
    assert f"--profile-steps {compiled + 1}-" not in said, said


def test_a_verdict_from_one_step_says_so(tmp_path: Path) -> None:
    job, compiled = _job(tmp_path, "calls")
    runtime, said = _run(tmp_path, job, compiled + 2, f"{compiled + 1}-{compiled + 3}")
    assert runtime["window_steps"] == 1, runtime  # the last call's step has no end
    assert re.search(r"bound by .*from 1 step alone, which a stall would fill", said), said
    # a job that runs no backward and no optimizer is not said to (a look read "backward,
    # optimizer, data" and "forward and backward graphs" of one)
    assert "no backward or optimizer step was seen" in said, said
    assert "backward graphs" not in said and "backward, optimizer" not in said, said
