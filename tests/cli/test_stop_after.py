"""`run --stop-after N` (#51): a real job's diagnosis in its first steps. The job ends after
its step N on every rank, and the report is given as for a job that ended by itself."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, read_terminal, run_cli, run_torchrun

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

JOBS = ROOT / "tests" / "fixtures" / "run_jobs"


def test_a_long_job_ends_after_its_step_n_with_the_report(tmp_path: Path) -> None:
    """100,000 steps asked for; the job ends after step 12, its window measured and its
    kernel profile taken after it (steps 9-12)."""
    start = time.perf_counter()
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "4-8", "--stop-after", "12", "--",
        sys.executable, str(JOBS / "step_parts.py"),
        env={"JOB_STEPS": "100000", "JOB_FACTS": str(tmp_path / "facts.json")}, timeout=300,
    )  # fmt: skip
    took = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    assert "the job ends after its step 12 (--stop-after)" in proc.stderr
    report = json.loads(proc.stdout)
    r = report["runtime"]
    assert r["steps"] == 12 and r["exit_code"] == 0 and r["stop_after"] == 12
    assert r["window_steps"] == 5 and r["kernel_step_numbers"] == [9, 10, 11, 12]
    assert took < 120, took
    path = tmp_path / "report.json"
    path.write_text(proc.stdout)
    assert "12 steps of AdamW (ended after step 12: --stop-after)" in run_cli(
        "render", str(path)
    ).stdout.replace("\n", " ")


def test_every_rank_of_a_torchrun_job_ends_after_step_n(tmp_path: Path) -> None:
    proc = run_torchrun(
        JOBS / "ddp_train.py", tmp_path / "facts", "--stop-after", "6",
        env={"JOB_STEPS": "100000"}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["runtime"]["processes"] == 2 and report["runtime"]["steps"] == 6
    assert report["runtime"]["exit_code"] == 0


def test_a_stop_before_the_window_ends_is_refused_before_the_run() -> None:
    proc = run_cli("run", "--profile-steps", "4-8", "--stop-after", "6", "--", "true")
    assert proc.returncode == 2
    assert "--stop-after 6 ends the job before step 8" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_jobs_window_and_kernel_profile_say_when_they_run_on_a_terminal_only(
    tmp_path: Path,
) -> None:
    """Progress of a run's window (#53): on the job's terminal, a line when the window
    starts, when it is timed, and when the kernel profile is done; nothing when piped."""
    import os
    import pty
    import subprocess
    import sys

    from compilediag.cli.commands.run import job_env

    job = ROOT / "tests" / "fixtures" / "run_jobs" / "bounded.py"
    env = job_env(tmp_path / "trace", "3-5")
    env.update(JOB_BOUND="optimizer", JOB_STEPS="14", PYTHONPATH=os.pathsep.join(
        [env["PYTHONPATH"], str(job.parent)]))  # fmt: skip
    main, secondary = pty.openpty()
    proc = subprocess.run([sys.executable, str(job)], env=env, stderr=secondary,
                          stdout=subprocess.DEVNULL, timeout=300)  # fmt: skip
    os.close(secondary)
    said = read_terminal(main)
    assert proc.returncode == 0
    lines = [x for x in said.splitlines() if x.startswith("compilediag:")]
    assert lines == [
        "compilediag: timing steps 3-5 (--profile-steps)",
        "compilediag: steps 3-5 timed; profiling the kernels over the next 3",
        "compilediag: kernel profile done; the job goes on as it is",
    ], lines
    piped = subprocess.run([sys.executable, str(job)], env=env, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert piped.returncode == 0 and "compilediag: timing" not in piped.stderr
