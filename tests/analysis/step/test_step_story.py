"""One story of a step (#49): the figures of a step taken over the steps they name, an
evaluation named (its function, its steps, its cost) and kept out of the training step's
figures, the rank that waited for another's evaluation named, and a profiler reading the
job's clock does not hold never made into advice.

Real jobs, each timing itself with its own clock and counting with torch's own counters:
- tests/fixtures/run_jobs/gpt_ddp.py: nanoGPT's style under torchrun (gloo, 2 ranks): rank 0
  alone runs estimate_loss() under @torch.no_grad() and model.eval() every 6 iterations;
  gradient accumulation with no_sync(); get_batch from a token array;
- tests/fixtures/run_jobs/trainer_eval.py: a Trainer-style loop whose evaluate() runs inside
  the window;
- tests/fixtures/run_jobs/step_parts.py: a loop whose metric is computed eagerly, its kept
  trace read again with the kernel profile's reading of that metric made larger than the
  whole rest the job's clock measured (as torch.profiler makes it on a loaded CPU)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compilediag.analysis.step.advice import SYNCS
from tests.conftest import ROOT, compilediag_cmd, run_cli, run_json, run_torchrun, work_left_out
from tests.render.test_html import browser  # noqa: F401 - the fixture: Debian's chromium

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

JOBS = ROOT / "tests" / "fixtures" / "run_jobs"


def training_median(step_ms: list[float], held: list[int], steps: range | list[int]) -> float:
    """The job's own median step over `steps` (counted from 1), those that held evaluation
    left out."""
    return statistics.median(step_ms[n - 1] for n in steps if n not in held)


@pytest.fixture(scope="module")
def gpt_ddp(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    tmp = tmp_path_factory.mktemp("gpt_ddp")
    facts, trace = tmp / "facts", tmp / "trace"
    proc = run_torchrun(
        JOBS / "gpt_ddp.py", facts, "--profile-steps", "5-9", "--trace-dir", str(trace),
        env={"JOB_CHECKPOINT": "1"}, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    return json.loads(proc.stdout), facts, trace


def test_rank_zeros_evaluation_is_named_not_divergence(gpt_ddp) -> None:
    """Before: "Ranks diverge (3)": graphs and recompiles differ, "only rank 0 recompiles for
    forward: global state changed: grad mode", and `report --fail-on-divergence` exited 1."""
    report, facts, trace = gpt_ddp
    own = {r: json.loads((facts / f"rank{r}.json").read_text()) for r in (0, 1)}
    for r in report["ranks"]:  # the counts stay torch's
        assert r["summary"]["graphs"] == own[r["rank"]]["graphs"]
    assert own[0]["graphs"] == 2 and own[1]["graphs"] == 1
    assert report["divergence"] == []
    (note,) = [n for n in report["notes"] if n["kind"] == "evaluation_graphs"]
    assert "rank 0's evaluation (estimate_loss)" in note["message"]
    assert "grad mode" in note["message"] and "not a divergence" in note["message"]
    gate = run_cli("report", str(trace), "--fail-on-divergence")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    # a rank that really differs in its training steps still fails the gate: rank 0's
    # runtime file says nothing of evaluation, so its extra graph is a divergence again
    changed = trace.parent / "no_eval"
    shutil.copytree(trace, changed)
    for f in (changed / "compilediag_runtime").glob("runtime-0-*.json"):
        data = json.loads(f.read_text())
        data["evaluation_calls"], data["other_work"] = {}, []
        f.write_text(json.dumps(data))
    assert run_cli("report", str(changed), "--fail-on-divergence").returncode == 1


def test_rank_zeros_evaluation_is_told_by_its_graphs_modes_in_the_trace_alone(gpt_ddp) -> None:
    """Look 28 (nanoGPT on 2 gloo ranks, `report` on the TORCH_TRACE it wrote itself): "ranks
    diverge: rank 1 compiled unlike the other 1 rank"; rank 0's 0/0 was its estimate_loss
    graph (grad off, eval()), rank 1's its training graph. Without run's facts, the graphs'
    own guards tell the evaluation's graph: no divergence, the counts still torch's."""
    report, facts, trace = gpt_ddp
    alone = trace.parent / "trace_alone"
    shutil.copytree(trace, alone, ignore=shutil.ignore_patterns("compilediag_runtime"))
    said, proc = run_json("report", str(alone))
    assert proc.returncode == 0, proc.stderr
    own = {r: json.loads((facts / f"rank{r}.json").read_text()) for r in (0, 1)}
    for r in said["ranks"]:
        assert r["summary"]["graphs"] == own[r["rank"]]["graphs"]
    assert said["divergence"] == [], said["divergence"]
    (note,) = [n for n in said["notes"] if n["kind"] == "evaluation_graphs"]
    assert note["message"].startswith("rank 0's evaluation (grad off or eval()"), note
    assert run_cli("report", str(alone), "--fail-on-divergence").returncode == 0


def test_the_evaluation_its_cost_and_the_other_ranks_wait(gpt_ddp) -> None:
    report, facts, _ = gpt_ddp
    own = {r: json.loads((facts / f"rank{r}.json").read_text()) for r in (0, 1)}
    work, saved = report["runtime"]["other_work"]
    assert saved["kind"] == "checkpoint" and saved["function"].endswith("save_checkpoint")
    assert saved["steps"] == [1, 7, 13] and saved["ranks"] == [0] and saved["calls"] == 1
    assert work["kind"] == "evaluation" and work["function"].endswith("estimate_loss")
    assert work["file"].endswith("gpt_ddp.py") and work["ranks"] == [0]
    assert work["steps"] == own[0]["eval_at"] == [1, 7, 13]
    # its cost, by the job's clock: the evaluations that compiled nothing (not the first)
    theirs = statistics.median(own[0]["eval_ms"][1:])
    assert 0.5 * theirs <= work["ms"] <= 1.2 * theirs, (work["ms"], own[0]["eval_ms"])
    # rank 1 waited for it at step 7: its step against its own median training step
    steps = range(5, 10)
    usual = training_median(own[1]["step_ms"], [7], steps)
    waited = own[1]["step_ms"][6] - usual
    # it waited a good part of the evaluation (less than all of it where a busy machine
    # slowed rank 1's own steps too: CI's load once left 70 of 160 ms)
    assert waited > 0.25 * work["ms"], (waited, work["ms"])
    assert work["waited_ms"]["1"] == pytest.approx(waited, rel=0.4), (work, own[1]["step_ms"])
    assert work_left_out(report["runtime"]) == [7]
    (said,) = [n["message"] for n in report["notes"] if n["kind"] == "other_work"]
    # in the job's own numbering: it evaluates at the top of its iterations 0, 6 and 12,
    # after that many optimizer steps (before: "in 3 steps (1, 7, 13", read as off by one)
    assert said.startswith(
        "evaluation and checkpoint 3 times (before the first step, after steps 6, 12, rank 0 alone)"
    ), said
    assert [n - 1 for n in work["steps"]] == [it for it in range(14) if it % 6 == 0]
    assert "estimate_loss" in said and "save_checkpoint" in said and "rank 1 " in said


def test_the_training_step_is_the_jobs_without_evaluation(gpt_ddp) -> None:
    """Before: rank 0's window mean held its evaluation at step 7 (a step 1.3-2x the others),
    and rank 1's its wait for it."""
    report, facts, _ = gpt_ddp
    steps = range(5, 10)
    for rank, figures in [(0, report["timings"]["breakdown"])] + [
        (s["rank"], s["breakdown"]) for s in report["runtime"]["rank_steps"]
    ]:
        job = json.loads((facts / f"rank{rank}.json").read_text())
        usual = training_median(job["step_ms"], [7], steps)
        assert figures["call_ms"] == pytest.approx(usual, rel=0.25), rank
        assert figures["calls"] == 4 - len(report["runtime"]["window_stalled"])
        assert figures["evaluation_ms"] == 0
    medians = report["runtime"]["step_medians"]
    assert medians["step"] == pytest.approx(
        training_median(json.loads((facts / "rank0.json").read_text())["step_ms"], [7], steps),
        rel=0.25,
    )


def test_no_figure_is_larger_than_the_part_that_holds_it(gpt_ddp) -> None:
    """The kernels are set against the kernel profile's own steps, the collectives too, and
    the rest's ops against the rest."""
    report, _, trace = gpt_ddp
    r = report["runtime"]
    # rank 0's evaluation at step 13 is left out of its kernel profile, and no step is run
    # in its place where ranks are several (rank 1 profiles step 13, its wait in it)
    assert r["kernel_step_numbers"] == [10, 11, 12, 14] and r["kernel_steps_held"] == [13]
    assert r["kernel_steps_waited"] == [13]
    kernels = sum(k["ms"] for k in report["timings"]["kernels"])
    assert 0 < kernels <= r["kernel_step_ms"]
    for s in [report["timings"]["breakdown"], *(x["breakdown"] for x in r["rank_steps"])]:
        assert s["communication_ms"] <= r["kernel_step_ms"]
        assert 0 <= s["communication_exposed_ms"] <= s["communication_ms"]
    b = report["timings"]["breakdown"]
    text = " ".join(run_cli("report", str(trace)).stdout.split())
    eager = sum(x["ms"] for x in b["rest"] if x["kind"] != "sync")
    whole = eager <= b["outside_ms"] + b["module_ms"]  # "of it" where it fits the part
    near = not whole and eager <= b["outside_ms"] * 1.25 + 0.05  # over it, within the steps'
    assert ("(of it: eager ops" in text) == whole, text
    assert (
        "(of it, about all, by the shares of torch.profiler's own steps: eager" in text
    ) == near, text
    assert "steps 10-12, 14, under torch.profiler; step 13 left out" in text, text
    assert "step 13 in the profile of a rank that waited in it" in text, text
    assert (
        "left out step 7 held an evaluation (estimate_loss) and a checkpoint's save "
        "(save_checkpoint)" in text
    )


def test_a_wait_for_another_ranks_evaluation_is_out_of_the_collectives(gpt_ddp) -> None:
    """Rank 1 profiles step 13, where it waits for rank 0's evaluation and checkpoint: its
    collectives a step are those of its other profiled steps (before: the wait in their
    mean, 24.1 ms a step of NCCL against 0.02 on rank 0, on 2 H200s). The probe places each
    collective in its step: step 13's are rank 1's longest, as its own clock says."""
    report, facts, trace = gpt_ddp
    own = json.loads((facts / "rank1.json").read_text())
    (probe,) = [
        json.loads(f.read_text()) for f in (trace / "compilediag_runtime").glob("runtime-1-*")
    ]
    each = {int(n): ms for n, ms, _ in probe["step_collectives"]}
    assert sorted(each) == [10, 11, 12, 13, 14] and max(each, key=each.get) == 13, each
    # its own clock says so too (its step 14 ends after the probe stopped the profiler, which
    # reads its events there: not a step of the profile)
    assert max(range(10, 14), key=lambda n: own["step_ms"][n - 1]) == 13, own["step_ms"]
    (rank1,) = [s for s in report["runtime"]["rank_steps"] if s["rank"] == 1]
    kept = [ms for n, ms in each.items() if n != 13]
    assert rank1["breakdown"]["communication_ms"] == pytest.approx(statistics.fmean(kept))


@pytest.mark.quiet
def test_a_trainer_window_that_holds_its_evaluation(tmp_path: Path) -> None:
    """Steps 10-20 hold evaluate() twice (after steps 12 and 18): before, the window's mean
    step held them, and the evaluation was unnamed. The kernel profile's steps after it (21-25)
    hold one at step 25: left out, and a training step more profiled in its place (#66:
    before, its steps held it, or its profile was stopped and another started)."""
    facts = tmp_path / "facts.json"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "10-20", "--", sys.executable,
        str(JOBS / "trainer_eval.py"), env={"JOB_FACTS": str(facts), "JOB_STEPS": "30"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report, job = json.loads(proc.stdout), json.loads(facts.read_text())
    r = report["runtime"]
    (work,) = r["other_work"]
    assert work["function"] == "Trainer.evaluate" and work["steps"] == job["eval_at"]
    assert work_left_out(r, job["step_ms"]) == [n for n in job["eval_at"] if 10 <= n <= 20]
    assert [n for n in job["eval_at"] if 10 <= n <= 20] == [13, 19]
    # the step is the job's pace: the steps around the window that ran with no instrument
    # (not the first, which compiled, nor the kernel profile's, nor an evaluation's), by
    # the job's own clock (over the window's own steps instead, it read 1.26x in 2 runs of
    # 4: the steps after an evaluation run 2-4x the others, and more of them are around it)
    around = [n for n in range(2, 31) if not 10 <= n <= 20 and n not in r["kernel_step_numbers"]]
    assert r["at_pace"] and 5 <= r["unprofiled_steps"] <= len(set(around) - set(job["eval_at"]))
    usual = training_median(job["step_ms"], job["eval_at"], around)
    assert r["step_medians"]["step"] == pytest.approx(usual, rel=0.25)
    assert report["timings"]["breakdown"]["calls"] == 11 - 2 - len(r["window_stalled"])
    assert work["ms"] == pytest.approx(statistics.median(job["eval_ms"][1:]), rel=0.35)
    assert r["kernel_steps_held"] == [25] and r["kernel_step_numbers"] == [21, 22, 23, 24, 26]
    assert r["window_work"] == ""  # its training steps, one shape: compared as they are
    # its steps' mean is training steps' under the profiler, not an evaluation's (each
    # evaluation step is 4-8x a training step by the job's clock)
    assert r["kernel_step_ms"] < statistics.median(
        job["step_ms"][n - 1] for n in job["eval_at"][1:-1]
    )


@pytest.fixture(scope="module")
def step_parts_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("step_parts")
    trace = tmp / "trace"
    proc = run_cli(
        "run", "--profile-steps", "4-8", "--trace-dir", str(trace), "--", sys.executable,
        str(JOBS / "step_parts.py"), env={"JOB_FACTS": str(tmp / "facts.json")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return trace


def test_a_profiler_reading_the_clock_does_not_hold_is_no_advice(
    step_parts_trace: Path, tmp_path: Path
) -> None:
    """The kept run, read again with the kernel profile's eager ops made 10 times the
    window's whole rest (the loaded-CPU case: torch.profiler read aten::_log_softmax at
    5.04 ms a step where the job's clock timed the whole cross_entropy at 0.02-0.035 ms): no
    "of it", no advice to move them into the compiled forward; as read, they are."""
    changed = tmp_path / "trace"
    shutil.copytree(step_parts_trace, changed)
    (path,) = (changed / "compilediag_runtime").glob("runtime-*.json")
    data = json.loads(path.read_text())
    rest = data["profiled"]["outside_ms"]
    eager = [row for row in data["rest"] if not row["name"].startswith(SYNCS)]
    assert eager, data["rest"]
    for row in eager:
        row["ms"] = 0.0
    eager[0]["ms"] = 10 * rest * data["kernel_steps"]
    path.write_text(json.dumps(data))
    report = json.loads(run_cli("report", str(changed), "--format", "json").stdout)
    assert not any("compute them in the compiled forward" in n for n in report["timings"]["notes"])
    text = run_cli("report", str(changed)).stdout.replace("\n", " ")
    assert "(of it: eager ops" not in text
    assert "more than the job's clock gives the whole rest" in " ".join(text.split())
    # the same figure at a tenth of the rest: a sub-part, as before
    eager[0]["ms"] = 0.1 * rest * data["kernel_steps"]
    path.write_text(json.dumps(data))
    assert "(of it: eager ops" in run_cli("report", str(changed)).stdout


def test_two_nodes_fold_into_one_report_with_both_windows(tmp_path: Path) -> None:
    """Two torchrun "nodes" on one host (a c10d rendezvous on localhost, one rank each, gloo),
    each under its own `compilediag run --trace-dir`: `report NODE_A NODE_B` folds the ranks
    and keeps each rank's runtime facts (before: only with one folder; two dropped them)."""
    from tests.report.test_report import free_port

    port, facts = free_port(), tmp_path / "facts"
    facts.mkdir()
    nodes = [tmp_path / f"node{i}" for i in (0, 1)]
    env = {**os.environ, "JOB_FACTS": str(facts), "NO_COLOR": "1"}
    procs = [
        subprocess.Popen(
            [
                *compilediag_cmd(),
                "run",
                "--profile-steps",
                "5-9",
                "--trace-dir",
                str(node),
                "--",
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes",
                "2",
                "--nproc-per-node",
                "1",
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                f"127.0.0.1:{port}",
                "--rdzv-id",
                "two-nodes",
                str(JOBS / "gpt_ddp.py"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )  # fmt: skip
        for node in nodes
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    proc = run_cli("report", *map(str, nodes), "--format", "json", "--fail-on-divergence")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    report = json.loads(proc.stdout)
    r = report["runtime"]
    assert r["processes"] == 2 and r["window_rank"] == 0
    assert sorted(s["rank"] for s in r["rank_steps"]) == [0, 1]
    kept = 4 - len(r["window_stalled"])  # step 7 left out (and a step a loaded CI stalled)
    assert all(s["breakdown"]["calls"] == kept for s in r["rank_steps"])
    (work,) = r["other_work"]
    assert work["ranks"] == [0] and set(work["waited_ms"]) == {"1"}
    for rank in (0, 1):
        own = json.loads((facts / f"rank{rank}.json").read_text())
        (mine,) = [x for x in report["ranks"] if x["rank"] == rank]
        assert mine["summary"]["graphs"] == own["graphs"]


def test_the_html_draws_each_ranks_step_as_the_json_gives_it(gpt_ddp, browser) -> None:  # noqa: F811
    """Each rank's step as one stacked bar of its parts, the collectives under it, the
    evaluation on a row of its own, one scale: in Debian's chromium, each bar's drawn width
    is its figure in the JSON; the collectives' their share of the kernel profile's step
    they were measured over, drawn as that share of the step (#58: before, their
    milliseconds of the profiler's longer steps ran past the step's bars)."""
    report, _, trace = gpt_ddp
    page_file = trace.parent / "report.html"
    assert run_cli("report", str(trace), "--html", str(page_file)).returncode == 0
    r = report["runtime"]
    b0 = report["timings"]["breakdown"]
    expected = {("rank 0", n): v for n, v in parts_of(b0, r["kernel_step_ms"])}
    for s in r["rank_steps"]:
        if s["rank"] != r["window_rank"]:
            own = parts_of(s["breakdown"], s["kernel_step_ms"] or r["kernel_step_ms"])
            expected.update({(f"rank {s['rank']}", n): v for n, v in own})
    for work in r["other_work"]:
        expected[(f"{work['kind']}, rank 0", work["kind"])] = work["ms"]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto(page_file.as_uri())
        svg = page.query_selector("svg.steps")
        assert svg is not None
        px_per_ms = float(svg.get_attribute("data-px")) / float(svg.get_attribute("data-scale-ms"))
        drawn = {}
        for rect in svg.query_selector_all("rect[data-part]"):
            key = (rect.get_attribute("data-row"), rect.get_attribute("data-part"))
            drawn[key] = rect.bounding_box()["width"]
        assert set(drawn) == {k for k, v in expected.items() if v > 0}
        full = float(svg.get_attribute("data-px"))  # one-off work past it: cut (#68)
        for key, width in drawn.items():
            assert width == pytest.approx(min(expected[key] * px_per_ms, full), abs=0.6), key
        for row in {k[0] for k in drawn if k[1] == "collectives"}:
            step = sum(
                w for (name, part), w in drawn.items() if name == row and part != "collectives"
            )
            assert drawn[(row, "collectives")] <= step + 0.6, row
    finally:
        context.close()


def parts_of(b: dict, kernel_step_ms: float | None) -> list[tuple[str, float]]:
    """A breakdown's parts as Breakdown.parts() names them, and its collectives as drawn:
    their share of the kernel profile's step (`kernel_step_ms`), of the window's step."""
    comm = b["communication_ms"] or 0.0
    drawn = min(1.0, comm / kernel_step_ms) * b["call_ms"] if kernel_step_ms else comm
    parts = [
        ("forward", b["in_graphs_ms"] + b["between_graphs_ms"] + b["in_call_ms"]),
        ("backward", b["backward_ms"]),
        ("optimizer", b["optimizer_ms"]), ("data", b["data_ms"]),
        ("evaluation", b["evaluation_ms"]), ("the rest", b["outside_ms"]),
        ("collectives", drawn),
    ]  # fmt: skip
    return parts


def test_a_rank_that_compiles_longer_is_named_with_the_others_wait(gpt_ddp) -> None:
    """The job's rank summaries, with one more rank whose compile took 400 s (a cache the
    others hit and it missed): the others wait for it at their first collective, and that
    is near torch.distributed's 10-minute timeout."""
    from compilediag.analysis.ranks.ranks import divergence
    from compilediag.report.model import RankSummary
    from compilediag.report.serial import from_plain

    report, _, _ = gpt_ddp
    ranks = [from_plain(RankSummary, r) for r in report["ranks"]]
    slow = from_plain(RankSummary, report["ranks"][1])
    slow.rank, slow.label = 2, "rank 2"
    slow.summary.compile_time_s = ranks[1].summary.compile_time_s + 400
    found = [f.message for f in divergence([*ranks[1:], ranks[1], slow]) if "compiled" in f.message]
    assert len(found) == 1 and found[0].startswith("rank 2 compiled for"), found
    assert "the other ranks wait 400.0 s for it at their first collective" in found[0]
    assert "67% of torch.distributed's default 10-minute timeout" in found[0]
    assert "graphs rank 1 did not" not in found[0]  # it compiled the same graphs

    # the same graphs, the others' FX-graph cache hit every one and its missed: the cache
    # it lacked is named
    n = len(slow.graphs)
    assert n and [g.place for g in slow.graphs] == [g.place for g in ranks[1].graphs]
    for r in ranks:
        r.caches = {"fx_graph_cache_hit": n}
    slow.caches = {"fx_graph_cache_miss": n}
    (found,) = [
        f.message for f in divergence([*ranks[1:], ranks[1], slow]) if f.kind == "compile_time"
    ]
    assert found.endswith(
        f"; rank 2's FX-graph cache missed {n} time{'s' if n > 1 else ''}, rank 1's 0 "
        f"(rank 1 hit {n}: entries its cache had and rank 2's did not)"
    ), found


@pytest.mark.gpus
def test_the_ddp_story_on_two_gpus(tmp_path: Path) -> None:
    """The nanoGPT-style job on two GPUs (NCCL, Inductor): rank 0's evaluation named and no
    divergence; the training step within 25% of each rank's own median step without
    evaluation (its clock synchronises); get_batch's copy to the device named as the data's
    copy, not as an op to compile."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    facts = tmp_path / "facts"
    proc = run_torchrun(
        JOBS / "gpt_ddp.py", facts, "--profile-steps", "5-9", env={"JOB_BACKEND": "inductor"},
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["divergence"] == []
    (work,) = report["runtime"]["other_work"]
    assert work["function"].endswith("estimate_loss") and work["ranks"] == [0]
    for s in report["runtime"]["rank_steps"]:
        job = json.loads((facts / f"rank{s['rank']}.json").read_text())
        usual = training_median(job["step_ms"], job["eval_at"] or [7], range(5, 10))
        assert s["breakdown"]["call_ms"] == pytest.approx(usual, rel=0.25), s["rank"]
    rest = report["timings"]["breakdown"]["rest"]
    assert any(r["kind"] == "to_device" for r in rest), rest
    assert not any("compute them in the compiled forward" in n for n in report["timings"]["notes"])


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_on_a_loaded_cpu_no_figure_is_larger_than_its_part(tmp_path: Path) -> None:
    """A newcomer's training loop on a loaded CPU (a busy loop on the other core): before,
    "the rest 0.686 ms (of it: eager ops outside graphs 6.91 ms)" and "Kernels in the window
    (25 kernels, 64 ms a step of 49.3 ms)". The report's step lies among the job's own
    steps; the kernels fit in their own steps; the rest's ops are its sub-part only where
    the rest holds them, and advised on only then."""
    busy = multiprocessing.get_context("spawn").Process(target=_spin, args=(120.0,))
    busy.start()
    try:
        facts = tmp_path / "facts.json"
        proc = run_cli(
            "run", "--format", "json", "--profile-steps", "4-8", "--", sys.executable,
            str(JOBS / "step_parts.py"), env={"JOB_FACTS": str(facts)},
        )  # fmt: skip
    finally:
        busy.terminate()
        busy.join()
    assert proc.returncode == 0, proc.stderr
    report, job = json.loads(proc.stdout), json.loads(facts.read_text())
    r, b = report["runtime"], report["timings"]["breakdown"]
    own = [s["step"] for s in job["steps"][3:8]]
    assert 0.85 * min(own) <= r["step_medians"]["step"] <= 1.15 * max(own), (r, own)
    kernels = sum(k["ms"] for k in report["timings"]["kernels"])
    assert kernels <= r["kernel_step_ms"], (kernels, r["kernel_step_ms"])
    rest_ops = sum(x["ms"] for x in b["rest"] if x["kind"] != "sync")
    held = rest_ops <= b["outside_ms"] * 1.25 + 0.05
    path = tmp_path / "report.json"
    path.write_text(proc.stdout)
    text = " ".join(run_cli("render", str(path)).stdout.split())
    whole = rest_ops <= b["outside_ms"] + b["module_ms"]
    assert ("(of it: eager ops" in text) == whole, text
    assert ("(of it, about all, by the shares of torch.profiler's own" in text) == (
        held and not whole
    ), text
    advised = any("compute them in the compiled forward" in n for n in report["timings"]["notes"])
    assert held or not advised


@pytest.mark.parametrize("by", ["table", "gc"])
def test_a_step_that_stalled_is_named_and_left_out_of_the_steps_figures(
    tmp_path: Path, by: str
) -> None:
    """A pause in one step of the window (bounded.py, step 6: a lookup table built on first
    use, or a full garbage collection over the samples' index the job holds; a few hundred
    ms among steps of ~20) is said with its ms by the job's clock, and left out: the step's
    figures are the other steps' (before, their mean held it and the verdict named the
    part the pause fell in; torch 2.15 on CPU collects so by itself). The collector's
    share is said, by the job's own timing of gc.collect(), with what keeps it short."""
    from tests.analysis.step.test_run_try_fixes import job_runs

    facts = tmp_path / "facts.jsonl"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "4-8", "--", sys.executable,
        str(JOBS / "bounded.py"),
        env={"JOB_FACTS": str(facts), "JOB_BOUND": "optimizer", "JOB_STALL": "6",
             "JOB_STALL_BY": by},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (run,) = job_runs(facts)
    steps = {n: s["step"] for n, s in run["steps"].items() if 4 <= n <= 8}
    usual = statistics.median(t for n, t in steps.items() if n != 6)
    assert steps[6] > 5 * usual  # the job's own clock: step 6 stalled
    r = report["runtime"]
    # (on a loaded machine another step may stall too, and is said alike)
    assert "6" in r["window_stalled"] and r["window_left_out"] == sorted(
        map(int, r["window_stalled"])
    )
    assert r["window_stalled"]["6"] == pytest.approx(steps[6], rel=0.3), (r, steps)
    b = report["timings"]["breakdown"]
    assert b["calls"] == 5 - len(r["window_stalled"]) and b["call_ms"] == pytest.approx(
        usual, rel=0.3
    ), (b, steps)
    assert statistics.mean(steps.values()) > 2 * b["call_ms"]  # what a mean of all five held
    assert r["bound"]["part"] == "optimizer"
    path = tmp_path / "report.json"
    path.write_text(proc.stdout)
    text = " ".join(run_cli("render", str(path)).stdout.split())
    assert "stalled step" in text and "step 6 took " in text, text
    assert "left out of these figures" in text, text
    collected = run["steps"][6]["gc"]
    if by == "gc":
        assert r["window_stalled_gc"]["6"] == pytest.approx(collected, rel=0.2), (r, collected)
        assert "of it in Python's garbage collector" in text and "gc.freeze()" in text, text
    elif run["steps"][6]["collected"] < 0.5 * (steps[6] - usual):
        # (a CI run's Python collected in step 6 by itself, most of its pause by the job's
        # own gc.callbacks: the collector's words were then true)
        assert "garbage collector" not in text and "a pause (a library's lazy start" in text


def test_a_step_whose_forward_and_backward_both_grew_is_a_training_step() -> None:
    """What makes a long step a pause: its excess is the collector's, or lies in one part.
    A step of a batch four times as long (forward and backward each about 4x, as a bucket
    of long samples makes them) stays in the figures; the same excess in the data part
    alone (a lazy start), or spread but taken by the collector, is left out; two such
    steps of five are both left out; a step 3 ms over steps of 1 ms is no pause (steps
    of microseconds vary 3x by themselves)."""
    from compilediag.analysis.step.other_work import stalled_steps
    from compilediag.harness.worker_types import ProcessRuntime, Profiled

    def job(step6: list[float], gc_ms: float = 0.0, also: int | None = None) -> dict:
        usual = [20.0, 6.0, 12.0, 1.0, 0.5, 0.5, 0.0]  # step, forward, backward, optimizer...
        rows = {n: list(usual) for n in (4, 5, 7, 8)}
        rows[6] = step6
        if also is not None:
            rows[also] = step6
        profiled = Profiled(calls=5, call_ms=0.0, outside_ms=0.0,
                            per_step=[rows[n] for n in sorted(rows)], step_numbers=sorted(rows))  # fmt: skip
        gc = {"6": gc_ms} if gc_ms else {}
        return stalled_steps([ProcessRuntime(profiled=profiled, gc_ms=gc)], set())

    longer = [80.0, 24.0, 54.0, 1.0, 0.5, 0.5, 0.0]
    assert job(longer) == {}
    lazy = [80.0, 6.0, 12.0, 1.0, 60.5, 0.5, 0.0]
    assert job(lazy) == {6: (80.0, 0.0)}
    assert job(longer, gc_ms=50.0) == {6: (80.0, 50.0)}
    assert job(lazy, also=7) == {6: (80.0, 0.0), 7: (80.0, 0.0)}  # two of five
    small = [x / 20 for x in lazy]  # the same, in steps of 1 ms: 3 ms over is no pause
    assert job(small) == {}
