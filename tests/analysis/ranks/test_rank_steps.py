"""Each rank's step in parts, its collectives beside them, and the straggler the others wait
for (#42), on a real 2-rank DDP job over gloo (tests/fixtures/run_jobs/ddp_train.py): one
rank's samples are slow to read. Each rank times its own data wait, and torch counts its
own breaks; both are compared with the report."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from compilediag.render.views import RANKS_SHOWN, rank_step_rows
from compilediag.report.model import Breakdown, RankStep, Runtime
from tests.conftest import ROOT, run_cli, run_torchrun

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

JOBS = ROOT / "tests" / "fixtures" / "run_jobs"
JOB = JOBS / "ddp_train.py"
WINDOW = (4, 8)


def ddp(tmp_path: Path, job: Path = JOB, **env: str) -> tuple[dict, Path]:
    facts = tmp_path / "facts"
    proc = run_torchrun(
        job, facts, "--profile-steps", "{}-{}".format(*WINDOW), env=env, timeout=600
    )
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    return json.loads(proc.stdout), facts


@pytest.fixture(scope="module")
def straggling(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    return ddp(tmp_path_factory.mktemp("straggler"), JOB_SLOW_RANK="1")


def job_data_ms(facts: Path, rank: int) -> float:
    """The job's own data wait in the window's steps (step n of the optimizer's steps is
    the job's n-th iteration: from the end of one step to the end of the next)."""
    own = json.loads((facts / f"rank{rank}.json").read_text())["data_ms"]
    return statistics.median(own[WINDOW[0] - 1 : WINDOW[1]])


def test_each_rank_has_its_step_in_parts_as_the_job_timed_it(straggling) -> None:
    report, facts = straggling
    steps = {s["rank"]: s["breakdown"] for s in report["runtime"]["rank_steps"]}
    assert sorted(steps) == [0, 1]
    for rank, b in steps.items():
        torch_saw = json.loads((facts / f"rank{rank}.json").read_text())
        (mine,) = [r for r in report["ranks"] if r["rank"] == rank]
        assert mine["summary"]["graph_breaks"] == torch_saw["graph_breaks"]
        assert mine["summary"]["graphs"] == torch_saw["graphs"]
        parts = b["in_graphs_ms"] + b["between_graphs_ms"] + b["backward_ms"]
        parts += b["optimizer_ms"] + b["data_ms"] + b["outside_ms"]
        assert parts == pytest.approx(b["call_ms"], rel=0.01)
    # the slow rank's data wait as it timed it itself (the other's is too short to compare):
    # the mean over the window, and the median step (the job's figure is a median)
    assert steps[1]["data_ms"] == pytest.approx(job_data_ms(facts, 1), rel=0.25)
    (slow,) = [s for s in report["runtime"]["rank_steps"] if s["rank"] == 1]
    assert slow["medians"]["data"] == pytest.approx(job_data_ms(facts, 1), rel=0.1)
    assert steps[0]["data_ms"] < 0.25 * steps[1]["data_ms"]
    # gloo's all_reduce holds rank 0's wait for rank 1: much of rank 1's longer data (gloo
    # reduces on the CPU, so the rest of their collectives' time is work, slower when busy)
    extra = steps[1]["data_ms"] - steps[0]["data_ms"]
    assert steps[0]["communication_ms"] - steps[1]["communication_ms"] > 0.5 * extra


def test_the_straggler_is_named_with_the_part_that_is_longer(straggling) -> None:
    report, _ = straggling
    (found,) = [d for d in report["divergence"] if d["kind"] == "straggler"]
    assert found["message"].startswith("rank 1 is a straggler")
    assert "its data" in found["message"] and "its data longer on rank 1" in found["fix"]
    path = Path(straggling[1]).parent / "report.json"
    path.write_text(json.dumps(report))
    table = run_cli("render", str(path)).stdout
    assert "rank 1 is a straggler" in table
    assert "collectives" in table and "\n       rank 1 " in table, table
    markdown = run_cli("render", str(path), "--format", "markdown").stdout
    assert "<br>rank 1: " in markdown
    page = path.with_suffix(".html")
    run_cli("render", str(path), "--format", "html", "-o", str(page))
    assert "<dt>rank 1</dt>" in page.read_text()


def test_ranks_that_wait_for_nobody_have_no_straggler(tmp_path: Path) -> None:
    report, _ = ddp(tmp_path)
    assert len(report["runtime"]["rank_steps"]) == 2
    assert [d for d in report["divergence"] if d["kind"] == "straggler"] == []


def test_fsdp2_ranks_with_a_compiled_optimizer_step(tmp_path: Path) -> None:
    report, facts = ddp(tmp_path, JOBS / "fsdp_train.py")
    _counts_are_torchs(report, facts)
    job = report["runtime"]
    assert job["optimizer"] == "AdamW" and job["optimizer_options"]["compiled"]
    steps = job["rank_steps"]
    assert len(steps) == 2 and all(s["breakdown"]["communication_ms"] > 0 for s in steps)
    gloo = {k["name"] for k in report["timings"]["kernels"] if k["kind"] == "communication"}
    assert "gloo:all_gather" in gloo  # FSDP2 gathers each block's parameters


def _counts_are_torchs(report: dict, facts: Path) -> None:
    for r in report["ranks"]:
        torch_saw = json.loads((facts / f"rank{r['rank']}.json").read_text())
        assert r["summary"]["graphs"] == torch_saw["graphs"], r["rank"]
        assert r["summary"]["graph_breaks"] == torch_saw["graph_breaks"], r["rank"]


def test_many_ranks_fold_after_the_slowest() -> None:
    def step(rank: int, wait: float) -> RankStep:
        return RankStep(rank, Breakdown(20.0, 1.0, 0.0, 19.0, 5, communication_ms=wait))

    r = Runtime(window=[2, 4], window_rank=0)
    r.rank_steps = [step(i, 10.0 - (i == 7) * 5) for i in range(12)]
    rows = rank_step_rows(r)
    assert rows[0][0] == "rank 7"  # the one the others wait for, first
    assert len(rows) == RANKS_SHOWN + 1 and "3 more ranks" in rows[-1][1]
    assert all(label != "rank 0" for label, _ in rows)  # the step above is rank 0's


# On several GPUs (NCCL, one rank per GPU, Inductor): the device tool's 2-GPU machine runs
# these (bench/gpu_ranks.sh); skipped elsewhere.


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpus
@pytest.mark.parametrize("job", ["ddp_train.py", "fsdp_train.py"])
def test_nccl_ranks_have_their_counts_steps_and_nccl_kernels(tmp_path: Path, job: str) -> None:
    if _gpus() < 2:
        pytest.skip("needs two CUDA devices")
    report, facts = ddp(tmp_path, JOBS / job, JOB_BACKEND="inductor")
    _counts_are_torchs(report, facts)
    steps = report["runtime"]["rank_steps"]
    assert len(steps) == 2 and all(s["breakdown"]["communication_ms"] > 0 for s in steps)
    nccl = [k for k in report["timings"]["kernels"] if k["kind"] == "communication"]
    assert nccl and all(k["name"].startswith("nccl") for k in nccl)
    assert not [d for d in report["divergence"] if d["kind"] == "straggler"]


@pytest.mark.gpus
def test_an_nccl_straggler_and_a_divergent_rank_are_named(tmp_path: Path) -> None:
    if _gpus() < 2:
        pytest.skip("needs two CUDA devices")
    report, facts = ddp(tmp_path, JOB_BACKEND="inductor", JOB_SLOW_RANK="1", JOB_DIVERGE_RANK="1")
    _counts_are_torchs(report, facts)
    kinds = [d["kind"] for d in report["divergence"]]
    assert "straggler" in kinds and "rank_breaks" in kinds
    first = report["divergence"][0]["message"]
    assert "rank 1" in first  # the odd rank first
    (found,) = [d for d in report["divergence"] if d["kind"] == "straggler"]
    assert found["message"].startswith("rank 1 is a straggler") and "its data" in found["message"]
