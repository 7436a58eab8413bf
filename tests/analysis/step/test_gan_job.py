"""A GAN's job under `compilediag run` (tests/fixtures/run_jobs/gan_train.py, the DCGAN
example's loop: two compiled models, two Adams, the discriminator called three times a
step in two graphs, sample text written at each epoch's first step, a checkpoint at its
end), against the job's own count and clock (look 26: pytorch/examples' DCGAN on an H200
read "its 2 calls of the model a step (gradient accumulation)", its sample images' step
"a pause", and its last checkpoint "step 97" of a 96-step job)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.full

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "gan_train.py"


def test_a_gans_calls_a_step_and_its_sample_step(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "10-24", "--no-kernels", "--",
        sys.executable, str(JOB),
        env={"JOB_FACTS": str(facts), "JOB_SAMPLES_OUT": str(tmp_path)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report, job = json.loads(proc.stdout), json.loads(facts.read_text())
    r = report["runtime"]
    # the discriminator's calls a step, as the job counts them in its loop (3: the real
    # batch, the fake one detached, the fake one for the generator), where one graph's
    # calls over the steps read 2 (two of the three ran in one graph)
    assert r["steps"] == len(job["step_ms"]) and r["steps_at"] == "optimizer"
    assert r["model_calls"] == statistics.median(job["calls_a_step"]) == 3
    assert len(report["graphs"]) == job["frames"]
    one_graph = max(g["calls"] for g in report["graphs"] if g["calls"]) / r["steps"]
    assert round(one_graph) == 2
    from compilediag.analysis.step.verdict import _calls_a_step
    from compilediag.report.model import Report

    saved = Report.from_dict(report)
    assert saved.runtime is not None and _calls_a_step(saved, saved.runtime) == 3
    # the checkpoint after the last epoch ran after the last step (no step 65 of 64)
    (note,) = [n["message"] for n in report["notes"] if n["message"].startswith("checkpoint ")]
    assert f"after the last step, {r['steps']})" in note, note
    # the step that wrote the samples in the window (18): where the job's own clock has it
    # stalled (over 3x the window's other steps: a quiet machine), the report has it, and
    # at the job's line, not as a pause
    (step,) = [n for n in job["samples_at"] if 10 <= n <= 24]
    own = job["step_ms"][step - 1]
    others = statistics.median(
        t for n, t in enumerate(job["step_ms"], 1) if 10 <= n <= 24 and n != step
    )
    if own > 4 * others and str(step) in r["window_stalled"]:
        (line,) = r["window_stalled_at"][str(step)]
        assert line["source"].startswith("save_samples("), line
    if str(step) in r["window_stalled"]:
        assert str(step) in r["window_stalled_at"], r["window_stalled"]


def test_a_gans_sample_step_in_the_kernel_profile(tmp_path: Path) -> None:
    """The window ends at step 14, so the kernel profile runs over steps 15-19: 17 holds the
    checkpoint (held, one step more profiled), 18 the samples. Where the job's own clock has
    18 over 4x the others, the profile leaves it out (its ops are not a training step's)."""
    facts = tmp_path / "facts.json"
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "10-14", "--",
        sys.executable, str(JOB),
        env={"JOB_FACTS": str(facts), "JOB_SAMPLES_OUT": str(tmp_path)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    r, job = json.loads(proc.stdout)["runtime"], json.loads(facts.read_text())
    assert r["kernel_steps_held"] == [17]
    profiled = set(r["kernel_step_numbers"]) | set(r["kernel_steps_stalled"])
    assert profiled == {15, 16, 18, 19, 20}, r
    own = job["step_ms"]
    others = statistics.median(own[n - 1] for n in (15, 16, 19, 20))
    if own[18 - 1] > 4 * others:
        assert r["kernel_steps_stalled"] == [18], r
    assert r["kernel_steps_stalled"] in ([], [18])


SCRIPT_EVALUATES = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y, test = torch.randn(16, 8), torch.randn(16, 1), torch.randn(4, 8)
for step in range(12):
    loss = nn.functional.mse_loss(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 4 == 3:
        with torch.no_grad():
            pred = compiled(test)  # the evaluation
"""


def test_an_evaluation_in_the_scripts_own_lines_is_at_its_line(tmp_path: Path) -> None:
    """Look 26 (time_sequence_prediction, whose loop is the script's own code): its
    evaluation read "<module> (train.py:1)", the script's first line, where it runs at its
    lines 71-73. A script's own evaluation is at the line that ran it."""
    job = tmp_path / "train.py"
    job.write_text(SCRIPT_EVALUATES)
    proc = run_cli("run", "--format", "json", "--", sys.executable, str(job), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (work,) = [w for w in json.loads(proc.stdout)["runtime"]["other_work"]
               if w["kind"] == "evaluation"]  # fmt: skip
    line = (
        SCRIPT_EVALUATES.splitlines().index("            pred = compiled(test)  # the evaluation")
        + 1
    )
    assert (work["function"], work["line"]) == ("<module>", line), work


STOPPED_IN_EVALUATION = """\
import os
import signal
import time

import torch
from torch import nn


@torch.compiler.disable
def stop_here(x):
    if not torch.is_grad_enabled():  # the job is stopped while its evaluation's call runs
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return stop_here(self.fc(x))


model = Net()
cmodel = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def evaluate():
    with torch.no_grad():
        cmodel(torch.randn(4, 8))


for step in range(1, 30):
    cmodel(torch.randn(4, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
    if step == 20:
        evaluate()
"""


def test_an_evaluation_under_way_when_the_job_is_stopped_says_its_time_so_far(
    tmp_path: Path,
) -> None:
    """Look 26 (time_sequence_prediction, SIGTERM after 14 minutes): "evaluation 1 time
    (after step 1) ... 0 ms each" for a call that had been compiling for 8 minutes: its
    time ran to its call's end, which never came. Here the job is stopped 0.3 s into its
    evaluation's call: said under way, with its time so far."""
    job = tmp_path / "train.py"
    job.write_text(STOPPED_IN_EVALUATION)
    saved = tmp_path / "report.json"
    proc = run_cli(
        "run", "--format", "json", "-o", str(saved), "--", sys.executable, str(job), cwd=tmp_path
    )
    assert "ended by SIGTERM" in proc.stderr, proc.stderr
    (work,) = json.loads(saved.read_text())["runtime"]["other_work"]
    assert work["kind"] == "evaluation" and work["unfinished"], work
    assert 300 <= work["ms"] < 5000, work
    said = " ".join(run_cli("render", str(saved)).stdout.split())
    line = STOPPED_IN_EVALUATION.splitlines().index("def evaluate():") + 1
    assert f"evaluate (train.py:{line}), under way when the job stopped, " in said, said
    assert " each" not in said.split("under way", 1)[1].split("model", 1)[0], said


ENDS_IN_EVALUATION = """\
import json
import time

import torch
from torch import nn

model = nn.Linear(8, 2)
cmodel = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def test():
    model.eval()  # and never train() again: the job ends here
    started = time.perf_counter()
    with torch.no_grad():
        for _ in range(5):
            cmodel(torch.randn(4, 8))
            time.sleep(0.02)
    return (time.perf_counter() - started) * 1e3


for epoch in range(1):  # (siamese's --epochs 1: its one test() the job's last work)
    model.train()
    for step in range(10):
        cmodel(torch.randn(4, 8)).sum().backward()
        opt.step()
        opt.zero_grad()
    took = test()
time.sleep(0.5)  # the job's own end, after its evaluation
json.dump({"test_ms": took}, open("own.json", "w"))
"""


def test_an_evaluation_left_in_eval_mode_at_the_jobs_end_ran_to_its_last_call(
    tmp_path: Path,
) -> None:
    """Look 28 (pytorch/examples' siamese network): "test (main.py:218), under way when the
    job stopped" for a test() that ran to its end; the job put the model in eval() and
    exited 0 without train(). An evaluation is under way at the end only where a signal
    stopped the job (above); here it ran from eval() to its last call, by the job's clock."""
    job = tmp_path / "train.py"
    job.write_text(ENDS_IN_EVALUATION)
    saved = tmp_path / "report.json"
    proc = run_cli(
        "run", "--format", "json", "-o", str(saved), "--", sys.executable, str(job), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    own = json.loads((tmp_path / "own.json").read_text())
    (work,) = json.loads(saved.read_text())["runtime"]["other_work"]
    assert work["kind"] == "evaluation" and not work["unfinished"], work
    assert work["steps"] == [11] and work["calls"] == 5, work  # (held by the step after)
    # its time runs to its last call's end, not to the job's exit half a second later
    assert work["ms"] < own["test_ms"] + 200, (work, own)
    said = " ".join(run_cli("render", str(saved)).stdout.split())
    assert "under way" not in said, said


def test_steps_around_the_window_well_over_their_median_are_said_beside_the_pace(
    tmp_path: Path,
) -> None:
    """Every 4th batch waits 40 ms (a loader that falls behind): the steps around the window
    (those after it: no kernel profile) average well over their median. Where the job's own
    clock has them so, the report says their mean and how many took over 2x the median."""
    facts, saved = tmp_path / "facts.json", tmp_path / "report.json"
    proc = run_cli(
        "run", "--format", "json", "-o", str(saved), "--profile-steps", "10-14",
        "--no-kernels", "--", sys.executable, str(JOB),
        env={"JOB_FACTS": str(facts), "JOB_SAMPLES_OUT": str(tmp_path), "JOB_SLOW_EVERY": "4"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    r, job = json.loads(saved.read_text())["runtime"], json.loads(facts.read_text())
    # the steps the pace is taken from: those after the window but the checkpoints' (other
    # work), as many as the report took
    left_out = {17, 33, 49, 65}
    after = [t for n, t in enumerate(job["step_ms"], 1) if n > 14 and n not in left_out]
    around = after[: r["unprofiled_steps"]]
    mean, median = statistics.fmean(around), statistics.median(around)
    if r["at_pace"] and mean >= 1.2 * median and sum(t > 2.5 * median for t in around) >= 3:
        assert r["unprofiled_mean_ms"] == pytest.approx(mean, rel=0.25), (r, mean)
        assert r["unprofiled_slow"] >= 1
        text = " ".join(run_cli("render", str(saved)).stdout.split())
        assert "of them took over 2x the median, a cost the figures below leave out" in text
    if r["unprofiled_mean_ms"]:
        assert r["unprofiled_mean_ms"] >= 1.1 * r["unprofiled_step_ms"]


EVALUATES_AND_COMPILES = """\
import json
import sys
import time

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8))
cmodel = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
own = []


def evaluate():
    with torch.no_grad():
        for _ in range(20):
            cmodel(x)


for step in range(1, 31):
    cmodel(x).sum().backward()
    opt.step()
    opt.zero_grad()
    if step % 6 == 0:
        t = time.perf_counter()
        evaluate()
        own.append((time.perf_counter() - t) * 1e3)
json.dump(own, open(sys.argv[1], "w"))
"""


def test_an_evaluation_that_compiled_once_says_that_times_cost_beside_the_others(
    tmp_path: Path,
) -> None:
    """Look 27 (pytorch/examples' VAE): "evaluation 2 times ...: test (main.py:112), 198 ms
    each" where the job's clock read 352 and 191 ms: the first compiled the evaluation's
    graph, a cost left out of the median unsaid. Its time is said beside the others'."""
    job, facts = tmp_path / "train.py", tmp_path / "own.json"
    job.write_text(EVALUATES_AND_COMPILES)
    saved = tmp_path / "report.json"
    proc = run_cli(
        "run", "--format", "json", "-o", str(saved), "--", sys.executable, str(job), str(facts),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (work,) = json.loads(saved.read_text())["runtime"]["other_work"]
    own = json.loads(facts.read_text())
    assert len(own) == 5 and work["compiled_times"] == 1, (work, own)
    assert own[0] > 2 * statistics.median(own[1:])  # the job's clock: the first compiled
    assert work["compiled_ms"] == pytest.approx(own[0], rel=0.3), (work, own)
    assert work["ms"] == pytest.approx(statistics.median(own[1:]), rel=0.5, abs=0.5), (work, own)
    said = " ".join(run_cli("render", str(saved)).stdout.split())
    assert " each (" in said and " the time torch compiled in it)" in said, said
