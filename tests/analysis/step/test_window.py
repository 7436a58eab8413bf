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

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

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
    assert r["steps"] == len(job["steps"]) == 14 and r["steps_at"] == "optimizer"
    assert report["summary"]["graphs"] == job["frames"]  # torch's own count, as before
    # the window's steps ran eagerly (no graph calls) and torch compiled nothing in them
    assert [s["compiled"] for s in job["steps"][9:12]] == [0, 0, 0]
    assert r["window_steps"] == 3 and r["window_compiled"] == []
    bd = report["timings"]["breakdown"]
    assert bd["in_graphs_ms"] == bd["between_graphs_ms"] == 0  # forward ran eagerly: the rest
    assert bd["backward_ms"] > 0 and bd["optimizer_ms"] > 0


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


def test_evaluation_calls_before_training_are_not_steps(tmp_path: Path) -> None:
    """Three evaluation calls (no_grad, eval()) come first, as nanoGPT's estimate_loss does
    before training: the job's steps are its optimizer's, so a window of steps 2-3 is two
    training steps (before: evaluation calls 2 and 3, their rest said to be "backward,
    optimizer, data"). A job that only evaluates has no optimizer step: its steps are the
    model's calls, and its window says they were evaluation calls."""
    report, job = run_stress(tmp_path, "2-3", [8] * 8, JOB_EVAL="3")
    r = report["runtime"]
    assert r["steps_at"] == "optimizer" and r["optimizer"] == "SGD"
    assert r["steps"] == len(job["steps"]) - 3  # the job's optimizer steps
    assert r["window_steps"] == 2 and r["window_no_grad"] == r["window_eval"] == 0
    bd = report["timings"]["breakdown"]
    assert bd["backward_ms"] > 0 and bd["optimizer_ms"] > 0
    shapes = {"JOB_SHAPES": ",".join(["8"] * 6), "JOB_EVAL": "6"}
    report, _ = run_stress(tmp_path, "2-3", [8] * 6, JOB_EVAL="6")
    r = report["runtime"]
    assert r["steps_at"] == "entry" and r["steps"] == 6
    assert r["window_no_grad"] == r["window_eval"] == r["window_steps"] == 2
    text = run_cli(
        "run", "--profile-steps", "2-3", "--", sys.executable, str(STRESS), env=shapes
    ).stdout
    assert "these steps were evaluation calls" in text and "optimizer" not in text, text


def test_the_windows_own_cost_is_measured_against_the_steps_around_it(tmp_path: Path) -> None:
    """Steps near the window are timed start to start, without per-graph timing; the
    report states the window's step against their median (steps that compiled left out)."""
    report, job = run_stress(tmp_path, "6-8", [8] * 14)
    r = report["runtime"]
    plain = [i + 1 for i, s in enumerate(job["steps"]) if not s["compiled"]]
    # around the window: the steps before it and after it (the optimizer's: each ends at
    # its optimizer step's end, the last one too), but the 3 after it whose kernels
    # torch.profiler recorded, and before Python 3.12 the one before it, in which the
    # loop's lines are learnt (traced: #66)
    learnt = {5} if sys.version_info < (3, 12) else set()
    around = [s for s in plain if (s < 6 or 8 + 3 < s) and s not in learnt]
    assert r["unprofiled_steps"] == len(around)
    assert r["unprofiled_step_ms"] > 0


def test_timings_that_spread_are_measured_again_then_said_unreliable() -> None:
    """Blocks that spread are measured again, up to 3 rounds, keeping the steadiest; a
    round that settles ends it; still spread after 3, the reason says so."""
    from compilediag.harness.measure import NOISY, noise_reason, settled, spread
    from compilediag.report.model import Stat

    noisy, steady = Stat(median=1.0, iqr=0.5, min=0.4), Stat(median=1.0, iqr=0.01, min=0.98)
    made: list[int] = []

    def again(result: tuple[Stat, Stat]):
        def run() -> tuple[Stat, Stat]:
            made.append(1)
            return result

        return run

    e, c, rounds = settled((noisy, steady), again((steady, steady)))
    assert (rounds, len(made), e, c) == (2, 1, steady, steady)  # settled in round 2
    made.clear()
    e, c, rounds = settled((noisy, steady), again((noisy, noisy)))
    assert (rounds, len(made)) == (3, 2) and spread(e, c) > NOISY
    made.clear()
    assert settled((steady, steady), again((noisy, noisy)))[2] == 1 and not made

    class Torch:  # the threads torch runs on, as torch.get_num_threads() gives them
        @staticmethod
        def get_num_threads() -> int:
            return 1

    said = noise_reason(Torch, noisy, steady, 3)
    assert "eager's blocks spread (IQR 50% of the median, the fastest 60% below it)" in said
    assert said.endswith("after 3 rounds")


def test_an_unreliable_speedup_is_printed_as_such(tmp_path: Path) -> None:
    """A report whose timings say why they can't be trusted: the headline and the table
    say the speed-up is not reliable, with the reason."""
    from tests.conftest import SAMPLES, run_json

    report, proc = run_json("explain", str(SAMPLES / "graph_breaks.py"), "--backend", "eager")
    assert proc.returncode == 0, proc.stderr
    report["timings"]["noise"] = "the machine was busy (load 3.1 on 2 cores)"
    report["summary"]["speedup_noisy"] = True
    table = run_cli("render", "--format", "table", str(_saved(tmp_path, report))).stdout
    assert "(unreliable)" in table.splitlines()[2], table
    assert "not reliable: the machine was busy (load 3.1 on 2 cores)" in table, table


def _saved(tmp_path: Path, report: dict) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    return path


def test_no_time_that_is_not_zero_reads_zero() -> None:
    from compilediag.render import ms

    assert ms(0.00042) == "0.00042 ms" and ms(0.214) == "0.214 ms" and ms(12.34) == "12.3 ms"
    assert ms(0) == "0 ms"
    # never an exponent beside plain figures (a look read "IQR 8.8e-05 ms")
    assert ms(8.8e-05) == "0.000088 ms" and ms(3e-7) == "0.0000003 ms"


def test_one_fast_block_is_no_noise_but_a_far_median_is() -> None:
    """The figures the issue and an H100 run gave: explain on a busy CPU, eager "59.2 ms (IQR
    30.4, min 3.37)", is noisy; a launch-bound GPU call whose one fastest block sits 21%
    below a steady median (IQR 4%) is not."""
    from compilediag.harness.measure import NOISY, spread
    from compilediag.report.model import Stat

    assert spread(Stat(median=59.2, iqr=30.4, min=3.37)) > NOISY
    assert spread(Stat(median=0.328, iqr=0.014, min=0.258)) < NOISY
    assert spread(Stat(median=1.0, iqr=0.01, min=0.6)) > NOISY  # the median 1.67x the best
