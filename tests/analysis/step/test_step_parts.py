"""`compilediag run --profile-steps`: a training step in its parts, against the parts the
job times itself (tests/fixtures/run_jobs/step_parts.py: a DataLoader, a compiled model
whose forward breaks once and returns the loss, backward, AdamW; time.perf_counter around
each, synchronous on CPU), and the advice those parts give, applied."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, measured_twice, run_cli

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "step_parts.py"
WINDOW = (4, 10)
PARTS = ("in_graphs_ms", "between_graphs_ms", "in_call_ms", "backward_ms", "optimizer_ms",
         "data_ms", "outside_ms")  # fmt: skip


def run_parts(tmp_path: Path, *options: str, **env: str) -> tuple[dict, dict]:
    facts = tmp_path / "facts.json"
    a, b = WINDOW
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", f"{a}-{b}", *options, "--",
        sys.executable, str(JOB), env={"JOB_FACTS": str(facts), **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), json.loads(facts.read_text())


def own(job: dict, part: str) -> float:
    """The job's own figure for a part, over the window's steps (the mean, as the report's)."""
    a, b = WINDOW
    return statistics.fmean(s[part] for s in job["steps"][a - 1 : b])


def assert_own_median(figure: float, job: dict, part: str) -> None:
    """The report's median for a part (runtime.step_medians: a step the machine's load
    stretched moves a mean, not this) against the job's own clock over the same steps. The
    job's clock holds the report's: each step's part as the job times it contains the
    probe's marks, and the probe's own work after them (at the window's last step, reading
    the window: about a millisecond). So the report's median is at most the job's median,
    and at least the job's fastest step, each within 25% and 0.3 ms. (A clean-clone CI run
    beside another test read the fused optimizer's median as 1.25 ms in the report and as
    2.29 ms in the job's clock.)"""
    a, b = WINDOW
    values = [s[part] for s in job["steps"][a - 1 : b]]
    low, high = fastest(job, part) * 0.75 - 0.3, statistics.median(values) * 1.25 + 0.3
    assert low <= figure <= high, (part, figure, values)


def assert_steps_are_the_jobs(report: dict, job: dict) -> None:
    """The window's step is the job's own (optimizer end to end, its median by the job's
    clock over the same steps), and the step the report gives is set on the job's own pace
    (#74: the steps around the window, no instrument on). Not the job's mean over the
    window: a step the machine's load stalled moves that, and the report sets it apart
    (a clean-clone CI run read the mean as 95 ms with the pace at 75 ms). The probe's
    median is within a step of the job's, not equal to it: the job's clock for the window's
    last step holds the probe's reading of the window (7 ms of a 49 ms step with both cores
    busy: the job's median 47.3, the report's 41.7, the job's next below it 38.8); where the
    machine takes the job's core between the probe's mark and the job's clock, that time
    moves to the next step in one clock and not the other (a clean-clone CI run: the
    report's 44.7 between the job's 40.6 and 50.0); and where GradScaler skipped a step,
    the probe's mark ends it at another point than the job's clock (no optimizer step)."""
    r, bd = report["runtime"], report["timings"]["breakdown"]
    a, b = WINDOW
    mine = sorted(s["step"] for s in job["steps"][a - 1 : b])
    mid = len(mine) // 2
    low, high = mine[mid - 1] * 0.95, mine[mid + 1] * 1.05
    assert low <= r["window_step_ms"] <= high, (r["window_step_ms"], mine)
    paced = r["unprofiled_step_ms"] if r["at_pace"] else r["window_step_ms"]
    assert bd["call_ms"] == pytest.approx(paced, rel=1e-3)


def fastest(job: dict, part: str) -> float:
    """The job's fastest window step for a part, by its own clock: what a fix changed, where
    a median can be the machine's load (beside another test on two cores, a fused
    optimizer's 1.2 ms read 5.3 ms in the median of seven steps)."""
    a, b = WINDOW
    return min(s[part] for s in job["steps"][a - 1 : b])


@pytest.fixture(scope="module")
def as_written(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    return run_parts(tmp_path_factory.mktemp("parts"))


def test_each_part_of_a_step_is_the_jobs_own(as_written) -> None:
    report, job = as_written
    r = report["runtime"]
    assert r["steps_at"] == "optimizer" and r["optimizer"] == "AdamW"
    assert r["steps"] == len(job["steps"])
    assert r["window_steps"] + len(r["window_stalled"]) == WINDOW[1] - WINDOW[0] + 1
    assert report["summary"]["graphs"] == job["backend_graphs"]  # torch's own count
    bd = report["timings"]["breakdown"]
    # the parts add up to the step, and the window's steps are the job's own
    assert sum(bd[p] for p in PARTS) == pytest.approx(bd["call_ms"], rel=0.01)
    assert_steps_are_the_jobs(report, job)
    # each part's share of the step within 25% of its share by the job's own clock (the
    # parts are set on the job's pace, so a share is what the two hold alike: a clean-clone
    # CI run beside another test read forward 2.01 ms, set on the pace, against the job's
    # 2.69 over the window's steps); forward is its graphs, the Python between them and
    # the compiled call's own work outside them (Dynamo's guard checks: a new user's look
    # found them in the rest, forward reading 17-20% of the step where the job's clock
    # read 23-25%)
    assert bd["in_call_ms"] > 0
    forward = bd["in_graphs_ms"] + bd["between_graphs_ms"] + bd["in_call_ms"]
    step, mine = bd["call_ms"], own(job, "step")
    assert forward / step == pytest.approx(own(job, "forward") / mine, rel=0.25)
    for part in ("backward", "optimizer", "data"):
        assert bd[f"{part}_ms"] / step == pytest.approx(own(job, part) / mine, rel=0.25), part
    # backward's compiled graphs, one per forward graph, and the break's eager backward
    graphs = report["graphs"]
    assert len(graphs) == 2 and all(g["backward_ms"] > 0 for g in graphs)
    (brk,) = report["graph_breaks"]
    assert 0 < brk["backward_lost_ms"] < brk["time_lost_ms"]
    in_backward = sum(g["backward_ms"] for g in graphs) + brk["backward_lost_ms"]
    assert in_backward <= bd["backward_ms"] * 1.0001


def test_the_rest_is_named_by_the_ops_the_step_ran_outside_its_graphs(as_written) -> None:
    """The job computes a metric eagerly between forward and backward and reads it with
    .item(): the rest names those ops (torch.profiler's names, over the steps after the
    window), their time within 25% of the job's own clock around the metric in those
    steps, the value
    read once a step; ops inside the graphs, backward, the optimizer or the loader are not
    named there."""
    report, job = as_written
    bd = report["timings"]["breakdown"]
    rest = {r["name"]: r for r in bd["rest"]}
    assert rest, bd
    assert rest["aten::item"]["kind"] == "sync"
    assert rest["aten::item"]["calls"] == pytest.approx(1)  # (the loss read after the loop: not)
    assert rest["aten::matmul"]["calls"] == pytest.approx(12)  # METRIC_ROUNDS, one matmul each
    assert rest["aten::tanh"]["calls"] == pytest.approx(12)
    named = sum(r["ms"] for r in bd["rest"])
    # over the same steps: those after the window the kernel profile kept (one that held a
    # compile is left out, and the step after it taken in its place)
    after = [job["steps"][n - 1] for n in report["runtime"]["kernel_step_numbers"]]
    assert len(after) == report["runtime"]["kernel_steps"]
    assert named == pytest.approx(statistics.fmean(s["metric"] for s in after), rel=0.25)
    assert named < statistics.fmean(s["step"] for s in after)
    # the optimizer's own ops (AdamW's loop: addcdiv_, lerp_...) are the optimizer's
    assert not any(name.startswith(("aten::addcdiv", "aten::lerp")) for name in rest)
    text = run_saved(report, "render")
    assert "the rest" in text and "eager ops outside graphs" in text and "aten::matmul" in text
    # AdamW(foreach=False) reads each parameter's step count in its step: those reads are
    # the optimizer's, and the rest's count says whose it is (#76, a look's nanoGPT)
    said = " ".join(text.split())
    assert (
        "1 value read (.item(), float()) a step, outside the model, backward and the "
        "optimizer" in said
    ), said


def run_saved(report: dict, *args: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        saved = Path(d) / "report.json"
        saved.write_text(json.dumps(report))
        proc = run_cli(*args, str(saved), env={"COLUMNS": "200"})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout


@pytest.mark.quiet
def test_the_optimizer_advice_applied_takes_its_share_away(as_written, tmp_path: Path) -> None:
    """AdamW(foreach=False) loops over the parameters: the report says so with the share
    it measured, and fused=True, applied, leaves a step whose optimizer part is under half
    of what it was (the report's figure the job's own, the fraction by the job's clock) and
    no such advice."""
    report, job = as_written
    advice = " ".join(report["timings"]["notes"])
    assert "the optimizer step takes" in advice and "fused=True" in advice, advice
    assert "foreach=False" in advice

    def check() -> None:
        fixed, job_fixed = run_parts(
            Path(tempfile.mkdtemp(dir=tmp_path)), JOB_OPTIMIZER="fused=True"
        )
        after = fixed["runtime"]["step_medians"]["optimizer"]
        assert_own_median(after, job_fixed, "optimizer")
        assert fastest(job_fixed, "optimizer") < fastest(job, "optimizer") / 2
        assert not any("the optimizer step" in n for n in fixed["timings"]["notes"])

    # (under half: alone, fused=True's fastest step is 3.3-4.6x faster; clean-clone CI runs
    # read 2.65x, quiet, and 1.7x beside another test)
    measured_twice(check)


@pytest.mark.quiet
def test_the_data_advice_applied_takes_its_share_away(as_written, tmp_path: Path) -> None:
    """The loader makes each batch in the main process: the report names num_workers; two
    workers, applied, make batches while the step runs (the report's figure the job's own,
    the wait shorter by the job's clock), and the advice is gone. (Two: one
    worker kept up alone, but not always beside another test on two cores.)"""
    report, job = as_written
    advice = " ".join(report["timings"]["notes"])
    assert "the data loader's next batch takes" in advice and "num_workers" in advice, advice

    def check() -> None:
        fixed, job_fixed = run_parts(Path(tempfile.mkdtemp(dir=tmp_path)), JOB_WORKERS="2")
        after = fixed["runtime"]["step_medians"]["data"]
        assert_own_median(after, job_fixed, "data")
        assert fastest(job_fixed, "data") < fastest(job, "data") / 2
        assert not any("data loader" in n for n in fixed["timings"]["notes"])
        assert fixed["runtime"]["loaders"] == {"workers": 2, "pin_memory": False}

    measured_twice(check)


def test_a_compiled_optimizer_step_is_still_the_step_and_compiles_as_without(
    tmp_path: Path,
) -> None:
    """torch.compile(opt.step): its hooks run only as Dynamo traces them (where they do
    nothing), yet its steps are the job's steps, its time the optimizer's; torch's own
    count of the graphs is what the job counts without compilediag."""
    import os
    import subprocess

    report, job = run_parts(tmp_path, JOB_COMPILE_STEP="1")
    plain_facts = tmp_path / "plain.json"
    env = {**os.environ, "JOB_COMPILE_STEP": "1", "JOB_FACTS": str(plain_facts),
           "PYTHONPATH": str(JOB.parent)}  # fmt: skip
    proc = subprocess.run([sys.executable, str(JOB)], env=env, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    plain = json.loads(plain_facts.read_text())
    assert job["backend_graphs"] == plain["backend_graphs"] == report["summary"]["graphs"]
    assert job["graph_breaks"] == plain["graph_breaks"]
    r = report["runtime"]
    assert r["steps_at"] == "optimizer" and r["steps"] == len(job["steps"])
    assert r["optimizer_options"].get("compiled") is True
    bd = report["timings"]["breakdown"]
    assert bd["optimizer_ms"] == pytest.approx(own(job, "optimizer"), rel=0.25)
    assert all("compile its step" not in n for n in report["timings"]["notes"])


LM = ROOT / "tests" / "fixtures" / "run_jobs" / "lm_train.py"


@pytest.mark.gpu
def test_kernel_device_times_are_torch_profilers(tmp_path: Path) -> None:
    """On CUDA: a small language model's training step (bf16 autocast, AdamW, Inductor)
    under `run --profile-steps 6-15`, against the same job profiling its own steps 6-15
    with torch.profiler in another process: each of the costliest kernels' device time
    within 5%, the same calls; the kernels' sum within the step; the parts add up."""
    import os
    import subprocess

    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    env = {**os.environ, "JOB_PROFILE": "6-15", "JOB_FACTS": str(tmp_path / "own.json")}
    proc = subprocess.run([sys.executable, str(LM)], env=env, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    own_kernels = json.loads((tmp_path / "own.json").read_text())["kernels"]
    facts = tmp_path / "facts.json"
    run = run_cli(
        "run", "--format", "json", "--profile-steps", "6-15", "--", sys.executable, str(LM),
        env={"JOB_FACTS": str(facts)}, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    t = report["timings"]
    bd, steps = t["breakdown"], 10
    assert sum(bd[p] for p in PARTS) == pytest.approx(bd["call_ms"], rel=0.01)
    assert bd["backward_ms"] > 0 and bd["optimizer_ms"] > 0
    # a kernel a library call launched is a row per call's shapes: summed by name here
    mine: dict[str, list[float]] = {}
    for k in t["kernels"]:
        row = mine.setdefault(k["name"], [0.0, 0.0])
        row[0] += k["calls"]
        row[1] += k["ms"]
    top = sorted(own_kernels.items(), key=lambda kv: -kv[1][1])[:10]
    for name, (calls, total_ms) in top:
        assert mine[name][0] * steps == pytest.approx(calls, abs=0.5), name
        assert mine[name][1] * steps == pytest.approx(total_ms, rel=0.05), name
    generated = [k for k in t["kernels"] if k["kind"] == "generated"]
    assert generated and all(k["gb_per_s"] > 0 for k in generated)
    assert sum(ms for _, ms in mine.values()) <= bd["call_ms"]
    # the matmuls' kernels carry the library call a graph made: its shapes and FLOP/s
    library = [k for k in t["kernels"] if k["kind"] == "library"]
    matmuls = [k for k in library if k["op"] in ("aten::mm", "aten::addmm", "aten::bmm")]
    assert matmuls and all(k["shapes"] for k in matmuls), library[:3]
    assert any(k["tflop_per_s"] for k in matmuls)


def test_no_kernels_leaves_the_kernel_profile_out(tmp_path: Path, as_written) -> None:
    with_kernels, _ = as_written
    assert with_kernels["runtime"]["kernel_steps"] > 0  # (aot_eager: no kernel of its own)
    report, job = run_parts(tmp_path, "--no-kernels", JOB_STEPS="14")
    r = report["runtime"]
    assert r["kernels_off"] and r["kernel_steps"] == 0 and report["timings"]["kernels"] == []
    # the steps after the window are plain steps then (with the kernels, they were not)
    assert r["unprofiled_steps"] > with_kernels["runtime"]["unprofiled_steps"]
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    assert "not profiled (--no-kernels)" in run_cli("render", str(saved)).stdout


SCATTER = ROOT / "tests" / "fixtures" / "run_jobs" / "scatter_train.py"


@pytest.mark.gpu
def test_no_kernel_is_advised_where_the_step_waits_on_the_host(tmp_path: Path) -> None:
    """On CUDA: a small embedding model's step is the host's (its kernels a fraction of
    it), and its costliest kernels read at indices (the bytes they are given are a floor):
    their GB/s is shown, but no kernel is called far from its limit."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    run = run_cli(
        "run", "--format", "json", "--profile-steps", "20-30", "--", sys.executable,
        str(SCATTER), timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    t = json.loads(run.stdout)["timings"]
    busy = sum(k["ms"] for k in t["kernels"])
    assert busy < 0.5 * t["breakdown"]["call_ms"]
    assert any(k["gb_per_s"] for k in t["kernels"])
    assert not any("of the device's" in n for n in t["notes"]), t["notes"]


def test_a_step_gradscaler_skipped_is_still_a_step(tmp_path: Path) -> None:
    """GradScaler finds inf gradients at steps 3 and 6 (the loss made infinite there) and
    does not step the optimizer: each is still one of the job's steps, with no optimizer
    part, not half of a step twice as long. The steps, the skipped ones and the window's
    step are the job's own."""
    skip = (3, 6)
    report, job = run_parts(tmp_path, JOB_SKIP=",".join(map(str, skip)))
    skipped = [i + 1 for i, s in enumerate(job["steps"]) if s["skipped"]]
    assert skipped == list(skip)  # GradScaler's own account: it lowered its scale there
    r = report["runtime"]
    assert r["steps_at"] == "optimizer" and r["steps"] == len(job["steps"])
    assert r["skipped_steps"] == len(skipped)
    assert r["window_steps"] + len(r["window_stalled"]) == WINDOW[1] - WINDOW[0] + 1
    assert_steps_are_the_jobs(report, job)
    assert "(1 skipped by GradScaler" not in run_saved(report, "render")
    assert f"({len(skipped)} skipped by GradScaler: inf or NaN gradients)" in run_saved(
        report, "render"
    )


@pytest.mark.gpu
def test_float16_steps_gradscaler_skipped_are_the_jobs_steps_on_cuda(tmp_path: Path) -> None:
    """On CUDA, float16 autocast and torch.amp's GradScaler with a first scale too large
    (tests/fixtures/run_jobs/amp_train.py): the steps it skipped while the scale settled
    are the job's steps, counted as GradScaler counts them, and the window's step is the
    job's own."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    facts = tmp_path / "facts.json"
    run = run_cli(
        "run", "--format", "json", "--profile-steps", "10-20", "--", sys.executable,
        str(JOB.parent / "amp_train.py"), env={"JOB_FACTS": str(facts)}, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    report, job = json.loads(run.stdout), json.loads(facts.read_text())
    skipped = sum(s["skipped"] for s in job["steps"])
    assert skipped > 0
    r = report["runtime"]
    assert r["steps"] == len(job["steps"]) and r["skipped_steps"] == skipped
    own_step = statistics.median(s["step"] for s in job["steps"][9:20])
    assert r["step_medians"]["step"] == pytest.approx(own_step, rel=0.25)
