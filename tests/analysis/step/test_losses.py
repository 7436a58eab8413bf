"""run --check-numerics: the job's losses against two eager runs of the same seeded steps,
end to end on a job with an undeclared in-place change in a custom op (and the same job
without it), checked against the job's own printed losses; and the rule on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from compilediag.analysis.step.losses import FLOOR, MARGIN, parting
from compilediag.analysis.step.runtime import JobRun
from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.model import Runtime
from tests.conftest import ROOT, run_cli

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "numerics_train.py"
STEPS = 6


def own_losses(bug: str, eager: bool) -> list[float]:
    """The job's own printed losses, run plainly (torch.compile off where `eager`)."""
    env = {**os.environ, "JOB_BUG": bug, "JOB_STEPS": str(STEPS)}
    if eager:
        env["TORCHDYNAMO_DISABLE"] = "1"
    out = subprocess.run(
        [sys.executable, str(JOB)], capture_output=True, text=True, env=env, timeout=600,
        check=True,
    ).stdout  # fmt: skip
    return [float(x.split()[-1]) for x in out.splitlines() if x.startswith("step ")]


@pytest.mark.full
@pytest.mark.parametrize("bug", ["1", "0"])
def test_the_first_step_whose_loss_parts_from_eager_is_named(bug: str) -> None:
    proc = run_cli(
        "run", "--check-numerics", "--format", "json", "--", sys.executable, str(JOB),
        env={"JOB_BUG": bug, "JOB_STEPS": str(STEPS)}, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    check = json.loads(proc.stdout)["runtime"]["numerics"]
    assert check["steps"] == STEPS, check
    compiled, eager = own_losses(bug, eager=False), own_losses(bug, eager=True)
    parted = [
        i for i, (c, e) in enumerate(zip(compiled, eager, strict=True), 1)
        if abs(c - e) > FLOOR * abs(e)
    ]  # fmt: skip
    if bug == "1":
        assert parted, (compiled, eager)  # torch's own runs part
        assert check["first_step"] == parted[0]
        s = parted[0] - 1
        assert check["compiled"] == pytest.approx(compiled[s], rel=1e-6)
        assert check["eager"] == pytest.approx(eager[s], rel=1e-6)
        assert f"losses part from eager at step {parted[0]}" in check["words"]
        assert "--check-numerics" in proc.stderr and "part from eager" in proc.stderr
    else:
        assert not parted and check["first_step"] is None
        assert check["words"].startswith(f"losses follow eager over {STEPS} steps")


def _run(losses: dict[int, float], seed: int | None = 0) -> JobRun:
    p = ProcessRuntime(pid=1)
    p.losses = {str(k): [v] for k, v in losses.items()}
    p.seed = seed
    return JobRun(Runtime(), [p])


def test_a_gap_within_eagers_own_spread_is_not_a_parting() -> None:
    eager_a = _run({1: 1.0, 2: 0.9, 3: 0.8})
    eager_b = _run({1: 1.0, 2: 0.9 * (1 + 0.01), 3: 0.8})  # eager's own runs: 1% apart
    near = _run({1: 1.0, 2: 0.9 * (1 + MARGIN * 0.01 * 0.9), 3: 0.8})
    far = _run({1: 1.0, 2: 0.9, 3: 0.8 * (1 + MARGIN * 0.01 * 1.5)})
    assert parting(near, [eager_a, eager_b]).first_step is None
    got = parting(far, [eager_a, eager_b])
    assert got.first_step == 3 and got.spread == pytest.approx(0.01)


def test_an_unseeded_job_is_not_compared() -> None:
    runs = [_run({1: 1.0}, seed=s) for s in (1, 2, 3)]
    got = parting(runs[0], runs[1:])
    assert got.steps == 0 and "not seeded" in got.words and "manual_seed" in got.words
