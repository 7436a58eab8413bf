"""`compilediag run --profile-steps`: the window's figures under ordinary stress, each
checked against what torch did in the job's own process (tests/fixtures/run_jobs/
stress_loop.py records, per step, the frames Dynamo tried to compile - torch's own
counter - its grad mode and its wall time)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

STRESS = ROOT / "tests" / "fixtures" / "run_jobs" / "stress_loop.py"


def run_stress(tmp_path: Path, window: str, shapes: list[int], **env: str) -> tuple[dict, dict]:
    facts = tmp_path / "facts.json"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", window, "--",
        sys.executable, str(STRESS),
        env={"JOB_FACTS": str(facts), "JOB_SHAPES": ",".join(map(str, shapes)), **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), json.loads(facts.read_text())


def test_steps_past_the_recompile_limit_are_steps(tmp_path: Path) -> None:
    """A new batch size each step and a recompile limit of 4: after the limit torch runs
    forward eagerly. Before: steps were calls of the first frame's graphs ("steps 8" for a
    job of 14), and a window past them was refused."""
    shapes = [8, 8, *range(9, 21)]
    report, job = run_stress(tmp_path, "10-12", shapes, JOB_LIMIT="4")
    r = report["runtime"]
    assert r["steps"] == len(job["steps"]) == 14 and r["steps_at"] == "entry"
    assert report["summary"]["graphs"] == job["frames"]  # torch's own count, as before
    # the window's steps ran eagerly (no graph calls) and torch compiled nothing in them
    assert [s["compiled"] for s in job["steps"][9:12]] == [0, 0, 0]
    assert r["window_steps"] == 3 and r["window_compiled"] == []
    bd = report["timings"]["breakdown"]
    assert bd["in_graphs_ms"] == 0 and bd["outside_ms"] == pytest.approx(bd["call_ms"])


def test_a_window_that_holds_a_compile_names_it_and_charges_no_break(tmp_path: Path) -> None:
    """Steps 3 and 4 bring new batch sizes, so torch compiles during them; a window of
    steps 2-5 leaves them out (before: the compile was the break's cost, "a step 1.22e+03
    ms") and says which steps to profile instead."""
    shapes = [8, 8, 9, 10, 10, 10, 10, 10]
    report, job = run_stress(tmp_path, "2-5", shapes)
    compiled_by_torch = [i + 1 for i, s in enumerate(job["steps"]) if s["compiled"]]
    r = report["runtime"]
    assert r["window_compiled"] == [s for s in compiled_by_torch if 2 <= s <= 5] == [3, 4]
    assert r["window_steps"] == 2  # steps 2 and 5
    own = [job["steps"][i]["ms"] for i in (1, 4)]  # the job's own times of those steps
    bd = report["timings"]["breakdown"]
    assert bd["call_ms"] < 3 * max(own)  # no compile (tens of ms) in the step
    (b,) = report["graph_breaks"]
    assert b["time_lost_ms"] is None or b["time_lost_ms"] <= bd["call_ms"]
    text = run_cli(
        "run", "--profile-steps", "2-5", "--", sys.executable, str(STRESS),
        env={"JOB_SHAPES": ",".join(map(str, shapes))},
    ).stdout  # fmt: skip
    assert "steps 3, 4 compiled" in text and "--profile-steps 5-8" in text, text


def test_a_window_of_evaluation_calls_says_so(tmp_path: Path) -> None:
    """Three evaluation calls (no_grad, eval()) come first: a window on them is not told
    its rest is "backward, optimizer, data"."""
    report, job = run_stress(tmp_path, "2-3", [8] * 8, JOB_EVAL="3")
    r = report["runtime"]
    assert r["window_no_grad"] == r["window_eval"] == r["window_steps"] == 2
    text = run_cli(
        "run", "--profile-steps", "2-3", "--", sys.executable, str(STRESS),
        env={"JOB_SHAPES": ",".join(["8"] * 8), "JOB_EVAL": "3"},
    ).stdout  # fmt: skip
    assert "these steps were evaluation calls" in text and "optimizer" not in text, text
    # a window on training steps keeps the words
    report, _ = run_stress(tmp_path, "5-7", [8] * 8, JOB_EVAL="3")
    assert report["runtime"]["window_no_grad"] == 0 and report["runtime"]["window_steps"] == 3


def test_the_windows_own_cost_is_measured_against_the_steps_around_it(tmp_path: Path) -> None:
    """Steps near the window are timed start to start, without per-graph timing; the
    report states the window's step against their median (steps that compiled left out)."""
    report, job = run_stress(tmp_path, "6-8", [8] * 14)
    r = report["runtime"]
    plain = [i + 1 for i, s in enumerate(job["steps"]) if not s["compiled"]]
    # around the window: the steps before it and after it, but the last (a step's time
    # ends at the next step's start)
    assert r["unprofiled_steps"] == len([s for s in plain if s < 6 or 8 < s < 14])
    assert r["unprofiled_step_ms"] > 0


SAWTOOTH = """\
import time

import torch


@torch.compiler.disable
def _stall(x):
    # every call of a run of 300 sleeps 1 ms, then 300 calls don't: blocks of calls
    # alternate between fast and slow, whatever the machine
    _stall.n = getattr(_stall, "n", 0) + 1
    if (_stall.n // 300) % 2:
        time.sleep(0.001)
    return x


class M(torch.nn.Module):
    def forward(self, x):
        return _stall(x * 2).relu()


def get_inputs():
    return (torch.randn(4, 8),)
"""


def test_timings_that_spread_are_measured_again_and_said_unreliable(tmp_path: Path) -> None:
    """A model whose calls alternate between fast and slow runs of calls: the blocks'
    spread is detected, measured again (3 rounds), and the speed-up is printed as not
    reliable with the reason, never as a fact."""
    from tests.conftest import run_json

    model = tmp_path / "model.py"
    model.write_text(SAWTOOTH)
    report, proc = run_json("explain", str(model), "--backend", "eager")
    assert proc.returncode == 0, proc.stderr
    t = report["timings"]
    assert "after 3 rounds" in t["noise"], t
    # what the report says, from its own figures: an IQR over a quarter of the median, or
    # a median 1.5x the fastest block
    assert any(
        s["iqr"] / s["median"] > 0.25 or s["median"] > 1.5 * s["min"]
        for s in (t["eager_ms"], t["compiled_ms"])
    )
    assert report["summary"]["speedup_noisy"] is True
    table = run_cli("render", "--format", "table", str(_saved(tmp_path, report))).stdout
    assert "(unreliable)" in table and "not reliable:" in table, table


def _saved(tmp_path: Path, report: dict) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    return path


def test_no_time_that_is_not_zero_reads_zero() -> None:
    from compilediag.render import ms

    assert ms(0.00042) == "0.00042 ms" and ms(0.214) == "0.214 ms" and ms(12.34) == "12.3 ms"
    assert ms(0) == "0 ms"


def test_one_fast_block_is_no_noise_but_a_far_median_is() -> None:
    """The figures the issue and an H100 run gave: explain on a busy CPU, eager "59.2 ms (IQR
    30.4, min 3.37)", is noisy; a launch-bound GPU call whose one fastest block sits 21%
    below a steady median (IQR 4%) is not."""
    from compilediag.measure import NOISY, spread
    from compilediag.report import Stat

    assert spread(Stat(median=59.2, iqr=30.4, min=3.37)) > NOISY
    assert spread(Stat(median=0.328, iqr=0.014, min=0.258)) < NOISY
    assert spread(Stat(median=1.0, iqr=0.01, min=0.6)) > NOISY  # the median 1.67x the best
