"""Where a part of a step starts and ends (#76): backward and the optimizer run from the
start to the end of what the job calls, `loss.backward()` and `opt.step()`, as the job's own
clock around those lines holds them: torch's code around the work (autograd's set-up of the
gradients, Optimizer.step's wrapper with its profiler range and hooks) is theirs, not the
rest's. A new user's look (torch 2.13, a 3 ms step) read backward 0.719 ms and the optimizer
0.489 ms where the job's lines took 0.870 and 0.654, and the rest 0.368 ms where all the job
ran outside its parts (zero_grad and the loss) took 0.089.

Checked end to end on tests/fixtures/run_jobs/one_ms_step.py, which times its own lines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, measured_twice, run_cli

pytestmark = pytest.mark.full

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "one_ms_step.py"
WINDOW = (20, 40)


def _share(own: dict, part: str, steps: list[int]) -> float:
    """The line's share of the job's steps by its own clock (their means, as the report's
    breakdown takes them)."""
    total = sum(own["step_ms"][n - 1] for n in steps)
    return sum(own["parts_ms"][n - 1][part] for n in steps) / total


@pytest.mark.quiet  # shares of a millisecond's step against the job's own clock
def test_backward_and_the_optimizer_are_the_jobs_lines_that_call_them(tmp_path: Path) -> None:
    def check() -> None:
        facts, saved = tmp_path / "facts.json", tmp_path / "report.json"
        proc = run_cli(
            "run", "--profile-steps", "-".join(map(str, WINDOW)), "--no-kernels", "--format",
            "json", "-o", str(saved), "--", sys.executable, str(JOB),
            env={"JOB_FACTS": str(facts), "JOB_STEPS": "50"}, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        report, own = json.loads(saved.read_text()), json.loads(facts.read_text())
        r, b = report["runtime"], report["timings"]["breakdown"]
        a, z = r["window"]
        # the window's last step by the job's clock holds the probe's close of the window (its
        # marks read, a line to stderr: 1-5 ms, once) in its optimizer line, after the mark
        # that ends the step: the tool's own work, no step's (a slow CI host's mean over it
        # read backward 1.09x and the optimizer 0.87x of the job's shares)
        steps = [n for n in range(a, z) if n not in set(r["window_left_out"])]
        step = b["call_ms"]
        for part in ("backward", "optimizer"):
            # before, these read 14-40% short on this job (torch's wrappers left out)
            mine = _share(own, part, steps) * step
            assert mine * 0.92 - 0.04 <= b[f"{part}_ms"] <= mine * 1.08, (part, b, mine)
        # the job's lines outside backward and the optimizer hold the model's call and the
        # rest (the loss's eager ops, zero_grad, the loop's own lines)
        outside = (1 - _share(own, "backward", steps) - _share(own, "optimizer", steps)) * step
        forward = b["in_graphs_ms"] + b["between_graphs_ms"] + b["in_call_ms"]
        assert forward + b["outside_ms"] == pytest.approx(outside, rel=0.15), (b, outside)

    measured_twice(check)
