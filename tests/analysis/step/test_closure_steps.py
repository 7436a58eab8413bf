"""Frameworks that run the step for you (#50): a step whose forward and backward run inside
`optimizer.step(closure)` (Lightning's automatic optimisation, L-BFGS) counts them as
forward and backward, not as the optimizer's; the model the steps line names is the
training step's, not the sanity check's validation_step compiled and run first.

tests/fixtures/run_jobs/closure_loop.py times its own closure's forward and backward with
time.perf_counter; the report's medians are compared with the job's over the same steps."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, measured_twice, run_cli, work_left_out

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "closure_loop.py"
WINDOW = (6, 12)


def run_closure(tmp_path: Path, **env: str) -> tuple[dict, dict]:
    facts = tmp_path / "facts.json"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "{}-{}".format(*WINDOW), "--",
        sys.executable, str(JOB), env={"JOB_FACTS": str(facts), **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), json.loads(facts.read_text())


def own_median(job: dict, left_out: list[int], part: str) -> float:
    a, b = WINDOW
    steps = [n for n in range(a, b + 1) if n not in left_out]
    if part == "step":
        return statistics.median(job["step_ms"][n - 1] for n in steps)
    return statistics.median(job["inner"][n - 1][part] for n in steps)


@pytest.mark.parametrize("optimizer", ["adam", "lbfgs"])
def test_a_closures_forward_and_backward_are_not_the_optimizers(
    tmp_path: Path, optimizer: str
) -> None:
    """Before: "optimizer 380 ms (100%)", forward 0 ms, and advice to make the optimizer
    fused; the model "the compiled validation_step". The job is run again once where a
    median is out of its bounds (conftest.measured_twice): CI's load once put the backward at
    a quarter of the job's own clock."""

    def check() -> None:
        report, job = run_closure(tmp_path, JOB_OPTIMIZER=optimizer)
        r = report["runtime"]
        assert r["steps_at"] == "optimizer" and r["steps"] == len(job["step_ms"])
        assert r["step_frame"] == "training_step", r["step_frame"]
        held = [n for n in job["val_at"] if WINDOW[0] <= n <= WINDOW[1]]
        assert work_left_out(r, job["step_ms"]) == held
        medians = r["step_medians"]
        left_out = r["window_left_out"]
        # the closure's forward and backward, as the job timed them around the same calls (the
        # job's clock holds the report's: its marks are inside the job's, and a compiled call's
        # guards and wrapper before its first graph are the rest's - with L-BFGS's small calls,
        # under a loaded CI, the forward read 2.2 ms of the job's 6.4)
        for part in ("forward", "backward"):
            theirs = own_median(job, left_out, part)
            assert 0.25 * theirs <= medians[part] <= 1.1 * theirs + 0.3, (part, medians, theirs)
        # the optimizer's own work is what the job's step has beside them
        a, b = WINDOW
        beside = statistics.median(
            job["step_ms"][n - 1] - job["inner"][n - 1]["forward"] - job["inner"][n - 1]["backward"]
            for n in range(a, b + 1)
            if n not in left_out
        )
        assert medians["optimizer"] <= 1.15 * beside + 0.5, (medians, beside)

    measured_twice(check)
