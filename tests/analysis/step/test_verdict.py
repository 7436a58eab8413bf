"""The step's verdict (#51): what bounds a `compilediag run` step, named from the window's
measured parts, checked against the job's own clock over the same steps
(tests/fixtures/run_jobs/bounded.py times its data wait, its model and its optimizer)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.analysis.step.test_run_try_fixes import job_runs, own_median
from tests.conftest import ROOT, busy_every_core, compilediag_cmd, run_cli

# the whole suite's (`pytest --full`): end-to-end runs, tens of seconds each on 2 cores
pytestmark = pytest.mark.full

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "bounded.py"


@pytest.mark.parametrize(
    ("bound", "own"), [("data", "data"), ("optimizer", "optimizer"), ("eager", "model")]
)
def test_the_verdict_names_the_part_the_jobs_clock_finds_largest(
    tmp_path: Path, bound: str, own: str
) -> None:
    """`eager`: a torch.compiler.disable'd helper's loop, forward and backward (aot_eager:
    its backward graphs are compiled, so the eager backward between them is told apart);
    the job's clock times the model's forward and backward together. The helper's 200 ops
    (60 before: beside other tests' work the job's clock once read its optimizer's 5 steps
    larger than the model's)."""
    facts = tmp_path / "facts.json"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "4-8", "--", sys.executable, str(JOB),
        env={"JOB_FACTS": str(facts), "JOB_BOUND": bound, "JOB_BACKEND": "aot_eager"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (run,) = job_runs(facts)
    medians = {k: own_median(run, k) for k in ("data", "model", "optimizer")}
    assert max(medians, key=medians.__getitem__) == own, medians  # the job's own clock
    verdict = report["runtime"]["bound"]
    import torch

    # (torch 2.15 pauses one step of the window some 200 ms: left out as stalled, else its
    # mean read the graphs' part as 89% of the step, and the verdict said compute)
    assert verdict["part"] == bound, (verdict, report["runtime"]["window_stalled"])
    # the job's compile by function: its model's forward, traced in the job's own process
    if hasattr(torch._dynamo.config, "dynamo_profiler"):
        tracing = report["compile_time"]["tracing"]
        forward = JOB.read_text().splitlines().index("    def forward(self, x, y):") + 1
        assert any(f["line"] == forward and f["function"] == "forward"
                   for f in tracing["functions"]), tracing  # fmt: skip
        assert 0 < tracing["total_s"] <= report["compile_time"]["dynamo_s"], tracing
    step = own_median(run, "step")
    if bound == "eager":  # a part of the model's time by the job's clock, and most of it
        assert 0.4 * medians["model"] <= verdict["ms"] <= 1.1 * medians["model"], verdict
        assert "ms of its backward" in verdict["why"], verdict
    else:
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
    # a baseline holds the step and its verdict: the same run passes against itself; one
    # whose step is 1.5x and bound by another part fails, saying both
    from compilediag.gate import Budgets, evaluate
    from compilediag.report.model import Report

    base = Report.from_dict(json.loads(proc.stdout))
    assert evaluate(Report.from_dict(json.loads(proc.stdout)), Budgets(baseline=base)).passed
    slower = json.loads(proc.stdout)
    slower["runtime"]["step_medians"]["step"] *= 1.5
    slower["runtime"]["bound"]["part"] = "host"
    judged = evaluate(Report.from_dict(slower), Budgets(baseline=base))
    assert not judged.passed
    (said,) = [r for r in judged.regressions if r.startswith("a step")]
    assert f"bound by {bound} → host" in said and "(tolerance 20%)" in said, said
    # diff names a verdict that moved (B: the same run, bound by another part)
    other = json.loads(proc.stdout)
    other["runtime"]["bound"].update(part="host", share=0.9)
    b = tmp_path / "b.json"
    b.write_text(json.dumps(other))
    said = json.loads(run_cli("diff", str(path), str(b), "--format", "json").stdout)
    share = f"{report['runtime']['bound']['share']:.0%}"
    assert f"bound by {bound} ({share} of the step) → host (90%)" in [
        t["text"] for t in said["timings"]
    ], said["timings"]


# a CPU job whose matmuls fill the step, its own clock a step (OMP_NUM_THREADS: as given)
MATMULS = """
import json, os, statistics, sys, time
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
compiled = torch.compile(model, backend="aot_eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))
took = []
for step in range(20):
    t0 = time.perf_counter()
    nn.functional.cross_entropy(compiled(x), y).backward()
    opt.step()
    opt.zero_grad()
    took.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"threads": torch.get_num_threads(), "step_ms": statistics.median(took[5:])}))
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: torch runs one thread")
def test_a_step_beside_busy_cores_is_said_to_wait_for_them(tmp_path: Path) -> None:
    """A busy process on every core while the job's threads run its matmuls: the run
    measures what they kept busy beside the job, and its verdict says the step's figures
    hold waits for a core and the thread count the free cores take (#76, the thirteenth
    look's U3: "bound by compute" at 92 ms a step that took 3.3-5 ms on quiet cores)."""
    job = tmp_path / "matmuls.py"
    job.write_text(MATMULS)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    with busy_every_core():
        proc = subprocess.run(
            [*compilediag_cmd(), "run", "--format", "json", "--profile-steps", "6-12", "--",
             sys.executable, str(job)],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    runtime = report["runtime"]
    # the job's own line (its stdout goes to stderr where the report takes stdout)
    own = json.loads(next(x for x in proc.stderr.splitlines() if x.startswith('{"threads"')))
    cores = os.cpu_count() or 1
    assert runtime["window_load"][1:] == [float(len(os.sched_getaffinity(0))), own["threads"], 0.0]
    # the spinners held what the job's threads left of the cores: half of them, or more
    assert runtime["beside_cores"] >= 0.4 * cores, runtime["beside_cores"]
    why = runtime["bound"]["why"]
    assert "the cores were busy (load " in why and f"for {own['threads']} threads" in why, why
    assert "every step wait" in why and "OMP_NUM_THREADS=" in why, why


@pytest.mark.gpu
def test_a_launch_bound_cuda_step_is_the_hosts_and_cuda_graphs_shorten_it(tmp_path: Path) -> None:
    """On CUDA, a small MLP's step (tests/fixtures/run_jobs/mlp_launch.py): the kernels run a
    fraction of it, so the verdict is the host, with CUDA graphs advised; the same job with
    mode="reduce-overhead" takes less time a step by its own clock."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    job = ROOT / "tests" / "fixtures" / "run_jobs" / "mlp_launch.py"
    facts = tmp_path / "facts.json"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "20-30", "--", sys.executable, str(job),
        env={"JOB_FACTS": str(facts)}, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    verdict = report["runtime"]["bound"]
    assert verdict["part"] == "host", verdict
    assert any('mode="reduce-overhead"' in n for n in report["timings"]["notes"])

    def own_median(mode: str) -> float:  # the job alone, by its own clock
        out = tmp_path / f"plain-{mode or 'default'}.json"
        plain = subprocess.run(
            [sys.executable, str(job)],
            env={**os.environ, "JOB_FACTS": str(out), "JOB_MODE": mode},
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert plain.returncode == 0, plain.stderr[-2000:]
        return statistics.median(json.loads(out.read_text())["step_ms"][20:])

    default, replayed = own_median(""), own_median("reduce-overhead")
    assert replayed < default / 1.2, (default, replayed)


@pytest.mark.parametrize(("data", "optimizer"), [(5.0, 8.0), (8.0, 5.0)])
def test_the_parts_advice_comes_larger_part_first(data: float, optimizer: float) -> None:
    """The optimizer's and the data loader's advice, the part that takes longer first."""
    from compilediag.analysis.step.advice import step_advice
    from compilediag.report.model import Breakdown, Runtime

    job = Runtime(optimizer="AdamW", optimizer_options={"foreach": False})
    b = Breakdown(15.0, 1.0, 0.0, 1.0, 5, data_ms=data, optimizer_ms=optimizer)
    said = step_advice(job, b, cuda=False)
    first = "the optimizer step" if optimizer > data else "the data loader"
    assert said[0].startswith(first) and len(said) >= 2, said


def test_a_parts_advice_says_it_is_untried_where_try_fixes_has_its_remedy() -> None:
    """Workers for a data loader in the main process, fused for AdamW: said as untried
    (on 2 cores a TensorDataset's batches came 5x slower from workers: #76 U3), each with
    the way to measure it; a loader with workers already has no remedy to try, and a
    remedy --try-fixes measured is said as measured."""
    from compilediag.analysis.step.advice import UNTRIED, step_advice
    from compilediag.report.model import Breakdown, Runtime, Tried

    b = Breakdown(15.0, 1.0, 0.0, 1.0, 5, data_ms=5.0, optimizer_ms=8.0)
    medians = {"step": 15.0, "optimizer": 8.0, "data": 5.0}
    optimizer, data = step_advice(Runtime(optimizer="AdamW", step_medians=medians), b, False)[:2]
    assert optimizer.endswith(UNTRIED) and data.endswith(UNTRIED), (optimizer, data)
    # the window's mean raised by slow steps, its median step's optimizer 3%: --try-fixes
    # runs no remedy for it, and the advice does not say it would (#76, the fourteenth look)
    from compilediag.analysis.step.remedies import candidates
    from tests.render.test_render import fixed_report

    def report_of(job: Runtime):
        report = fixed_report()
        report.runtime, report.graph_breaks = job, []
        return report

    slow = Runtime(optimizer="AdamW", step_medians={"step": 5.8, "optimizer": 0.18, "data": 1.0})
    optimizer = step_advice(slow, b, cuda=False)[0]
    assert optimizer.startswith("the optimizer step") and UNTRIED not in optimizer, optimizer
    assert not [c for c in candidates(report_of(slow)) if c.part == "optimizer"]
    assert [c.remedy for c in candidates(report_of(Runtime(
        optimizer="AdamW", step_medians=medians)))][:2] == ["fused", "foreach"]  # fmt: skip
    job = Runtime(optimizer="AdamW", loaders={"workers": 2}, step_medians=medians)
    data = next(s for s in step_advice(job, b, cuda=False) if s.startswith("the data loader"))
    assert UNTRIED not in data, data
    tried = Tried("workers", "workers", "DataLoader(..., num_workers=2)", part="data",
                  ratio=0.2, kept=False, why="5x slower")  # fmt: skip
    job = Runtime(optimizer="AdamW", tried=[tried], step_medians=medians)
    data = next(s for s in step_advice(job, b, cuda=False) if s.startswith("the data loader"))
    assert UNTRIED not in data and "5x slower" in data, data
