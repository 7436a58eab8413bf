"""`compilediag run --profile-steps A-B --profile-out FILE` (#39): the kernel profile as a
Chrome trace, each generated kernel's events given its graph and the user's lines, on a
real training job (tests/fixtures/run_jobs/lm_train.py, small, Inductor on CPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "lm_train.py"


@pytest.mark.slow
def test_the_kernel_profile_is_written_with_the_users_lines(tmp_path: Path) -> None:
    out = tmp_path / "kernels.json"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "5-8", "--profile-out", str(out), "--",
        sys.executable, str(JOB),
        env={"JOB_SMALL": "1", "JOB_DEVICE": "cpu", "JOB_STEPS": "12",
             "JOB_FACTS": str(tmp_path / "facts.json")},
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    trace = json.loads(out.read_text())
    events = [e for e in trace["traceEvents"] if e.get("name", "").startswith("cpp_fused")]
    assert events, "no generated kernel in the trace"
    kernels = {k["name"]: k for k in report["kernels"]}
    timed = {k["name"] for k in report["timings"]["kernels"] if k["kind"] == "generated"}
    named = set()
    for e in events:
        args = e["args"]
        k = kernels[e["name"]]
        assert args["compilediag graph"] == k["compile_id"]
        assert args["compilediag lines"] == k["source_lines"]
        if k["source_lines"]:
            named.add(e["name"])
            assert all("lm_train.py:" in line for line in args["compilediag lines"])
    assert timed <= {e["name"] for e in events}  # every kernel the table times is in it
    assert named, "no kernel names a line of the job's"
    assert f"wrote {out}" in proc.stderr


def test_profile_out_without_the_window_is_refused_before_the_run(tmp_path: Path) -> None:
    out = tmp_path / "kernels.json"
    marker = tmp_path / "ran"
    for options in ([], ["--profile-steps", "2-3", "--no-kernels"]):
        proc = run_cli("run", *options, "--profile-out", str(out), "--", sys.executable,
                       "-c", f"open({str(marker)!r}, 'w')")  # fmt: skip
        assert proc.returncode == 2 and "--profile-steps" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert not marker.exists() and not out.exists()
