"""The recompile limit told call by call (#67), on a fine-tuning loop as people write one
(tests/fixtures/run_jobs/limit_padded.py: `torch.compile(model, dynamic=False)`, each batch
padded to its own longest sequence): its 9th length hits the limit, and after it two
batches in three have a length already compiled. The job counts, by its backend's graphs'
own calls, whether each forward ran a graph, and times it by its own clock; torch's own
counter counts its graphs. Before: "later calls of it run in eager mode, unoptimised", and
a fix that never named the dynamic=False that makes each length a graph."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

# the whole suite's (`pytest --full`): end-to-end runs (docs/tests.md)
pytestmark = pytest.mark.full

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "limit_padded.py"
COMPILE_LINE = next(
    i for i, line in enumerate(JOB.read_text().splitlines(), 1) if "dynamic=False)" in line
)


def run_job(tmp: Path, *args: str, **env: str) -> tuple[dict, dict, str]:
    """The job under `compilediag run ARGS`: its report (JSON), the job's own facts, the
    table."""
    facts = tmp / "facts.json"
    out = tmp / "report.json"
    proc = run_cli(
        "run", *args, "--format", "json", "-o", str(out), "--", sys.executable, str(JOB),
        env={"JOB_FACTS": str(facts), **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = run_cli("render", str(out)).stdout
    return json.loads(out.read_text()), json.loads(facts.read_text()), " ".join(table.split())


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, str]:
    return run_job(tmp_path_factory.mktemp("limit"))


def _per_k(job: dict, ran: bool) -> float:
    """The job's own forward time per 1,000 elements of ids, its median over the calls
    after the limit that ran a graph (`ran`) or not."""
    calls = list(zip(job["shapes"], job["graph_ran"], job["forward_ms"], strict=True))
    first = job["graph_ran"].index(False)
    return statistics.median(
        ms / (shape[0] * shape[1]) * 1e3 for shape, r, ms in calls[first:] if r == ran
    )


def test_the_calls_after_the_limit_are_counted_as_the_job_ran_them(limited) -> None:
    report, job, _ = limited
    (hit,) = report["recompile_limit_hits"]
    assert hit["compiles"] == job["frames"] == 8  # torch's own CompileCounter
    first = job["graph_ran"].index(False)
    assert hit["step"] == first + 1  # the job's step, counted from 1
    after = list(zip(job["shapes"], job["graph_ran"], strict=True))[first:]
    assert hit["cached_calls"] == sum(r for _, r in after)
    assert hit["eager_calls"] == sum(not r for _, r in after)
    assert hit["eager_calls"] + hit["cached_calls"] == len(job["shapes"]) - first
    eager = {f"{s[0]}x{s[1]}, {s[0]}" for s, r in after if not r}
    cached = {f"{s[0]}x{s[1]}, {s[0]}" for s, r in after if r}
    assert set(hit["eager_shapes"]) == eager and set(hit["cached_shapes"]) == cached
    # what a call cost per unit of work, against the job's own clock of its forward
    assert hit["eager_ms_per_k"] == pytest.approx(_per_k(job, False), rel=0.35)
    assert hit["cached_ms_per_k"] == pytest.approx(_per_k(job, True), rel=0.35)


def test_the_limit_names_dynamic_false_at_the_compile_call(limited, tmp_path: Path) -> None:
    report, _, text = limited
    (hit,) = report["recompile_limit_hits"]
    assert hit["static_shapes"] and hit["compile_line"] == COMPILE_LINE
    assert f"limit_padded.py:{COMPILE_LINE}" in text and "dynamic=False" in text, text
    assert "Recompile limit hit at step 9:" in text and "16 ran a graph it had" in text, text
    assert "later calls of it run in eager mode" not in text
    assert 'torch.compiler.set_stance("fail_on_recompile")' in text
    (tmp_path / "report.json").write_text(json.dumps(report))
    run_cli(
        "render", str(tmp_path / "report.json"), "--format", "html", "-o", str(tmp_path / "r.html")
    )
    page = (tmp_path / "r.html").read_text()
    assert "16 ran a graph it had" in page and "later calls of it run in eager" not in page


def test_the_fix_removes_the_limit(tmp_path: Path) -> None:
    """The fix applied: without dynamic=False, torch makes the length dynamic at its first
    change; no limit is hit, and every forward runs a graph (the job's own count)."""
    report, job, _ = run_job(tmp_path, JOB_DYNAMIC="default")
    assert report["recompile_limit_hits"] == []
    assert all(job["graph_ran"]) and job["recompiles"] == 1
    assert report["summary"]["recompiles"] == job["recompiles"]


def test_the_fail_loudly_advice_fails_where_torch_would_run_eager() -> None:
    """Torch's own switches the limit's advice names: a new shape after warm-up raises
    under the stance, and the limit raises under the config, instead of running eagerly."""
    import torch

    def double(x):
        return x * 2

    f = torch.compile(double, backend="eager", dynamic=False)
    f(torch.ones(2, 3))
    torch.compiler.set_stance("fail_on_recompile")
    try:
        with pytest.raises(RuntimeError):
            f(torch.ones(2, 5))
    finally:
        torch.compiler.set_stance("default")
    torch._dynamo.reset()
    g = torch.compile(double, backend="eager", dynamic=False)
    limit = torch._dynamo.config.patch(recompile_limit=2, fail_on_recompile_limit_hit=True)
    with limit, pytest.raises(Exception, match="(?i)limit"):
        for n in range(3, 7):
            g(torch.ones(2, n))
    torch._dynamo.reset()


def test_eager_ops_past_the_limit_are_not_sent_into_the_forward(tmp_path: Path) -> None:
    """With a window, the kernel profile's steps (21-25) hold calls that ran the forward in
    eager mode past the limit: its ops show as eager ops outside the graphs. Before, the
    advice was to "compute them in the compiled forward", where they already are."""
    report, job, text = run_job(tmp_path, "--profile-steps", "12-20")
    r = report["runtime"]
    assert r["limit_eager_steps"] == [n for n, ran in enumerate(job["graph_ran"], 1) if not ran]
    assert "compute them in the compiled forward" not in text
    # the window (steps 12-20) held other lengths, and eager calls, than the steps timed
    # around it: its pace is set against them shape by shape, or not at all (before:
    # "the window's own timing +57%", its steps against shorter ones)
    assert r["window_work"] in ("shapes", "unlike")
    assert (
        r["window_work"] == "shapes"
        and "shape by shape" in text
        or "not set against the steps around it, which ran other work" in text
    ), text
    assert "x the job's own" not in text or "shape by shape" in text, text
    if "eager ops outside the compiled graphs" in text:  # where they took a share of the step
        assert "past the recompile limit" in text, text
