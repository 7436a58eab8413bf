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


def own_losses(job_env: dict[str, str], eager: bool) -> list[float]:
    """The job's own printed losses, run plainly (torch.compile off where `eager`)."""
    env = {**os.environ, **job_env}
    if eager:
        env["TORCHDYNAMO_DISABLE"] = "1"
    out = subprocess.run(
        [sys.executable, str(JOB)], capture_output=True, text=True, env=env, timeout=600,
        check=True,
    ).stdout  # fmt: skip
    return [float(x.split()[-1]) for x in out.splitlines() if x.startswith("step ")]


@pytest.mark.full
@pytest.mark.parametrize("bug", ["1", "0", "dropout"])
def test_the_first_step_whose_loss_parts_from_eager_is_named(bug: str) -> None:
    """The job's losses against its own printed ones, compiled and eager; where they part,
    the cause told by a run with Inductor's random numbers as eager's: an undeclared
    in-place change is an op (torch's minifier named, which works on the script), a
    dropout layer is random numbers (and the words never say "losses" twice)."""
    env = {"JOB_BUG": "0" if bug == "dropout" else bug, "JOB_DROPOUT": str(int(bug == "dropout")),
           "JOB_STEPS": str(STEPS)}  # fmt: skip
    proc = run_cli(
        "run", "--check-numerics", "--format", "json", "--", sys.executable, str(JOB),
        env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    check = json.loads(proc.stdout)["runtime"]["numerics"]
    assert check["steps"] == STEPS, check
    compiled, eager = own_losses(env, eager=False), own_losses(env, eager=True)
    parted = [
        i for i, (c, e) in enumerate(zip(compiled, eager, strict=True), 1)
        if abs(c - e) > FLOOR * abs(e)
    ]  # fmt: skip
    assert "losses losses" not in proc.stderr
    if bug == "0":
        assert not parted and check["first_step"] is None and check["cause"] == ""
        assert check["words"].startswith(f"follow eager over {STEPS} steps")
        return
    assert parted, (compiled, eager)  # torch's own runs part
    assert check["first_step"] == parted[0]
    s = parted[0] - 1
    assert check["compiled"] == pytest.approx(compiled[s], rel=1e-6)
    assert check["eager"] == pytest.approx(eager[s], rel=1e-6)
    assert check["words"].startswith(f"part from eager at step {parted[0]}")
    assert "compilediag: losses part from eager" in proc.stderr
    # the cause, against torch's own run with fallback_random
    theirs = own_losses({**env, "JOB_FALLBACK_RANDOM": "1"}, eager=False)
    follows = all(abs(c - e) <= FLOOR * abs(e) for c, e in zip(theirs, eager, strict=True))
    assert check["cause"] == ("random" if follows else "op"), (theirs, eager)
    assert check["cause"] == ("random" if bug == "dropout" else "op")
    said = (
        "Inductor draws other random numbers" if bug == "dropout" else "TORCHDYNAMO_REPRO_AFTER=aot"
    )
    assert said in check["words"]


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


def test_losses_equal_at_every_step_name_no_step_for_a_gap() -> None:
    """A sixteenth look read "widest gap 0.00% at step 1" where every step's losses were
    equal; a gap under 0.01% is said as under it."""
    same = {1: 1.0, 2: 0.9, 3: 0.8}
    equal = parting(_run(same), [_run(same), _run(same)])
    assert "(equal at every step;" in equal.words and "0.00%" not in equal.words, equal.words
    tiny = parting(_run({**same, 2: 0.9 * (1 + 1e-6)}), [_run(same), _run(same)])
    assert "widest gap under 0.01% at step 2" in tiny.words, tiny.words
