"""The step's verdict (#51): what bounds a `compilediag run` step, named from the window's
measured parts, checked against the job's own clock over the same steps
(tests/fixtures/run_jobs/bounded.py times its data wait, its model and its optimizer)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "bounded.py"


@pytest.mark.parametrize(("bound", "own"), [("data", "data"), ("optimizer", "optimizer")])
def test_the_verdict_names_the_part_the_jobs_clock_finds_largest(
    tmp_path: Path, bound: str, own: str
) -> None:
    facts = tmp_path / "facts.json"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "4-8", "--", sys.executable, str(JOB),
        env={"JOB_FACTS": str(facts), "JOB_BOUND": bound},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    steps = json.loads(facts.read_text())["steps"][3:8]
    medians = {k: statistics.median(s[k] for s in steps) for k in ("data", "model", "optimizer")}
    assert max(medians, key=medians.__getitem__) == own, medians  # the job's own clock
    verdict = report["runtime"]["bound"]
    assert verdict["part"] == bound, verdict
    step = statistics.median(s["step"] for s in steps)
    assert verdict["share"] == pytest.approx(medians[own] / step, abs=0.2), (verdict, medians)
    path = tmp_path / "report.json"
    path.write_text(proc.stdout)
    table = " ".join(run_cli("render", str(path)).stdout.split())
    assert f"bound by {bound}, " in table
    markdown = run_cli("render", str(path), "--format", "markdown").stdout
    assert f"**bound by** {bound}, " in markdown
    page = tmp_path / "report.html"
    run_cli("render", str(path), "--format", "html", "-o", str(page))
    assert f"<dt>bound by</dt><dd><strong>{bound}, " in page.read_text()
