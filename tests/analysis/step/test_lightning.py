"""A real PyTorch Lightning job under `compilediag run` (#50), and torch's own internal
errors.

tests/fixtures/run_jobs/lit_train.py is a Lightning job as Lightning's docs teach one: a
LightningModule with self.log in training_step and validation_step, torch.compile(model)
given to trainer.fit, a validation every 6 steps, 1000 samples in batches of 64 (the last
batch 40). Lightning runs training_step inside optimizer.step(closure) and its validation
under no_grad; its hooks time the job's own backward and optimizer update, and torch's own
counts and recompile messages come back in $JOB_FACTS. Each check compares the report with
them: the step's model, its parts, the last batch's recompile, the mode switch's, the
validation.

torch 2.13's Dynamo dies on Lightning's self.log in training_step (InternalTorchDynamoError,
in inspect.getfullargspec); 2.15's traces it. There the job logs the training loss from
on_train_batch_end instead, and another test checks the report calls 2.13's failure torch's
own bug, and that the smaller region it advises trains. A fault injected into Dynamo's own
code gives the same InternalTorchDynamoError on any torch."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli, work_left_out

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "lit_train.py"
WINDOW = (5, 9)


def _torch() -> tuple[int, int]:
    import torch

    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


# the releases whose Dynamo dies tracing Lightning's self.log in training_step (2.13 seen;
# 2.15 traces it; 2.14 not tried)
LOG_IN_STEP_FAILS = _torch() < (2, 15)


def _run(tmp_path: Path, *options: str, **env: str) -> tuple[dict, dict, str]:
    """`compilediag run` on the Lightning job: the report, the job's facts, its stderr."""
    facts = tmp_path / "facts.json"
    facts.unlink(missing_ok=True)
    proc = run_cli(
        "run", "--format", "json", *options, "--", sys.executable, str(JOB),
        env={"JOB_FACTS": str(facts), **env},
    )  # fmt: skip
    assert proc.stdout, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    return report, json.loads(facts.read_text()) if facts.exists() else {}, proc.stderr


def _line(source: str, text: str) -> int:
    [n] = [i for i, ln in enumerate(source.splitlines(), 1) if text in ln]
    return n


def _table(tmp_path: Path, report: dict) -> str:
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    proc = run_cli("render", str(saved))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _grad_mode_recompiles(job: dict) -> set[str]:
    """The recompiles torch logged for a grad mode no cached graph had (each graph it
    checked failed on grad mode), by compile id: the frame's next compile after the graphs
    its message lists (those past the graphs torch counted hit the recompile limit)."""
    out = set()
    for msg in job["recompile_messages"]:
        failed = re.findall(r"^\s*- (\d+)/(\d+): (.*)$", msg, re.M)
        if failed and all("grad_mode" in why for _, _, why in failed):
            frame = failed[0][0]
            n = max(int(k) for f, k, _ in failed if f == frame) + 1
            if n < job["per_frame"][frame]:
                out.add(f"{frame}/{n}")
    return out


@pytest.mark.quiet
def test_a_lightning_jobs_report(tmp_path: Path) -> None:
    """Each point of #50 on a real Lightning job, against torch's counts and the job's own
    clock: the step's model is training_step (not the sanity check's validation_step);
    forward and backward are not the optimizer's; the last batch's recompile is the loader's
    partial batch (drop_last), not a collator's padding; a grad-mode recompile is expected,
    nothing to change, and sends no one to trainer.fit or Lightning's lines; the validation
    is named an evaluation, in the steps it ran."""
    pytest.importorskip("lightning")
    env = {"JOB_LOG_TRAIN": "hook"} if LOG_IN_STEP_FAILS else {}
    report, job, stderr = _run(tmp_path, "--profile-steps", "{}-{}".format(*WINDOW), **env)
    assert report["compile_failures"] == [], report["compile_failures"]
    r = report["runtime"]
    said = _table(tmp_path, report)

    # the steps: Lightning's optimizer steps, the model its training_step
    assert r["steps_at"] == "optimizer" and r["steps"] == job["steps"], (r["steps"], job["steps"])
    assert r["step_frame"] == "training_step", r["step_frame"]
    assert "the model: the compiled training_step" in said, said

    # the parts: forward and backward inside optimizer.step(closure) are not the optimizer's
    a, b = WINDOW
    left_out = set(r["window_compiled"]) | set(r["window_left_out"])
    steps = [n for n in range(a, b + 1) if n not in left_out]
    assert steps, r

    def own(part: str) -> float:
        return statistics.median(job[part][n - 1] for n in steps)

    medians = r["step_medians"]
    # the job's clock: optimizer_step (optimizer.step(closure)) holds the closure's forward
    # (training_step, with Lightning's bookkeeping), its backward (on_before_backward to
    # on_after_backward) and, after the closure, the update (on_before_optimizer_step on)
    closure = statistics.median(
        job["optimizer_step"][n - 1] - job["backward"][n - 1] - job["optimizer"][n - 1]
        for n in steps
    )
    # backward: as the job timed it
    assert 0.25 * own("backward") <= medians["backward"] <= 1.1 * own("backward") + 0.3, (
        medians, own("backward"))  # fmt: skip
    # forward: the compiled training_step inside the closure (before: 0, the optimizer's)
    assert 0.1 * closure <= medians["forward"] <= 1.15 * closure + 0.3, (medians, closure)
    # the three, inside optimizer.step: within the job's optimizer_step
    inside = medians["forward"] + medians["backward"] + medians["optimizer"]
    assert inside <= 1.15 * own("optimizer_step") + 0.5, (medians, own("optimizer_step"))

    # the last batch: torch's own recompile of training_step for it, the loader's partial batch
    assert job["last_batch"] == 40
    recompiles = {x["compile_id"]: x for x in report["recompiles"]}
    batch = [x for x in recompiles.values() if x["frame"] == "training_step"]
    torch_saw = [
        m for m in job["recompile_messages"] if m.startswith("Recompiling function training_step ")
    ]
    assert len(batch) == len(torch_saw), (batch, torch_saw)
    assert len(batch) == 1 and batch[0]["failed_guard"].endswith("dim 0 changed 64 → 40"), batch
    fix = batch[0]["suggestion"]
    assert "the last, partial batch" in fix and "`drop_last=True`" in fix, fix
    assert "collator" not in fix and "ACCELERATE" not in fix and "trainer.fit" not in fix, fix

    # a mode switch: exactly the recompiles torch logged for grad mode; nothing to change
    grad = _grad_mode_recompiles(job)
    ours = {cid for cid, x in recompiles.items() if "grad mode" in x["failed_guard"]}
    assert ours == grad, (ours, grad, job["recompile_messages"])
    for cid in grad:
        fix, frame = recompiles[cid]["suggestion"], recompiles[cid]["frame"]
        assert "Expected: one graph per mode" in fix, fix
        assert "Nothing to change: one graph per mode is expected here." in fix, fix
        assert "trainer.fit" not in fix and JOB.name not in fix, fix
        # Lightning's own lines are named as Lightning's, with their file
        assert not re.search(r"switched (in \w+ )?by line \d+", fix), fix
        assert f"on the code object ({frame}'s)" in fix, fix

    # the validation: an evaluation, after the optimizer steps Lightning had made when it
    # ran (its global_step: the sanity check before the first), in the job's own numbering
    evaluations = [n["message"] for n in report["notes"] if n["kind"] == "other_work"]
    ran = sorted({g + 1 for g in job["val_at"]})
    after = sorted({g for g in job["val_at"] if g})
    assert evaluations == [
        f"evaluation {len(ran)} times (before the first step, after steps "
        f"{', '.join(map(str, after))}): Lightning's "
        "`_EvaluationLoop._evaluation_step` (lightning/pytorch/loops/evaluation_loop.py:"
        + evaluations[0].rsplit("evaluation_loop.py:", 1)[-1]
    ], evaluations
    assert set(work_left_out(r)) == {n for n in ran if a <= n <= b} - set(
        r["window_compiled"]
    ), r  # fmt: skip

    # Lightning's own loop is no loop of the user's (#66): the verdict is a part of the step,
    # and no verdict, advice or loop line names Lightning's `advance` or its loops
    assert r["bound"]["part"] != "loop", r["bound"]
    told = [r["bound"]["why"], *report["timings"]["notes"], *(x["file"] for x in r["loop"])]
    assert not [t for t in told if "lightning/" in t or "advance" in t], told
    assert all(x["file"].endswith(JOB.name) for x in r["loop"]), r["loop"]


def _failure_said(report: dict, version: str) -> dict:
    """The one compile failure, checked to be called torch's own bug with its routes."""
    [failure] = report["compile_failures"]
    assert failure["fail_type"] == "InternalTorchDynamoError", failure
    fix = failure["fix"]
    assert fix.startswith(f"A bug in torch itself (torch {version}), not in your code"), fix
    assert "an internal error of Dynamo" in fix, fix
    assert "compile a smaller region" in fix, fix
    assert "TORCHDYNAMO_VERBOSE=1" in fix and "TORCH_COMPILE_REPLAY_RECORD=1" in fix, fix
    assert "torch._dynamo.replay(file)" in fix and "TORCHDYNAMO_REPRO_AFTER=dynamo" in fix, fix
    assert "TORCHDYNAMO_SUPPRESS_ERRORS=1" in fix, fix
    return failure


def test_a_lightning_job_that_torch_fails_on(tmp_path: Path) -> None:
    """torch 2.13's Dynamo dies inside its own code on Lightning's self.log in training_step:
    the report says torch's bug (torch's own words on the job's stderr:
    InternalTorchDynamoError), at the user's line it was tracing, with the smaller region to
    compile; that region applied (the network compiled, not the LightningModule), the job
    trains every step with no failure."""
    pytest.importorskip("lightning")
    import torch

    if not LOG_IN_STEP_FAILS:
        pytest.skip(f"torch {torch.__version__}'s Dynamo traces Lightning's self.log")
    report, job, stderr = _run(tmp_path)
    assert "torch._dynamo.exc.InternalTorchDynamoError: AttributeError" in stderr, stderr[-2000:]
    assert job == {}  # the job died before writing its facts
    failure = _failure_said(report, torch.__version__)
    line = _line(JOB.read_text(), 'self.log("train_loss", loss)')
    assert failure["frame"] == "training_step" and failure["line"] == line, failure
    assert failure["file"].endswith(JOB.name), failure
    fix = failure["fix"]
    assert f"while tracing line {line} of {JOB.name} (in `training_step`)" in fix, fix
    assert "in torch/_dynamo/" in fix and "Lightning's loop calls `training_step`" in fix, fix

    # the smaller region: the network compiled inside the module, self.log left out
    report, job, stderr = _run(tmp_path, JOB_COMPILE="net")
    assert report["compile_failures"] == [], report["compile_failures"]
    assert job["steps"] == 24 and job["frames"] > 0, job


INJECTED = """\
import torch
from torch._dynamo.variables.builtin import BuiltinVariable

real = BuiltinVariable.call_function


def broken(self, tx, args, kwargs):  # a fault in Dynamo's own code, where it traces divmod
    if self.fn is divmod:
        raise KeyError("injected")
    return real(self, tx, args, kwargs)


BuiltinVariable.call_function = broken
net = torch.nn.Linear(4, 4)


@torch.compile(backend="eager")
def step(x):
    half, _ = divmod(x.shape[0], 2)
    return net(x).sum() * half


step(torch.ones(4, 4))
"""


def test_an_internal_error_of_dynamo_is_torchs_bug(tmp_path: Path) -> None:
    """Any error Dynamo's own code raises while tracing (here a KeyError injected where it
    traces divmod) is torch's InternalTorchDynamoError: the report says torch's bug, of the
    release that ran, at the user's line, the smaller region (the nn.Module, not the step
    function), and torch's routes to report it."""
    import torch

    job = tmp_path / "job.py"
    job.write_text(INJECTED)
    proc = run_cli("run", "--format", "json", "--", sys.executable, job.name, cwd=tmp_path)
    assert "torch._dynamo.exc.InternalTorchDynamoError: KeyError" in proc.stderr, proc.stderr
    failure = _failure_said(json.loads(proc.stdout), torch.__version__)
    assert failure["reason"] == "KeyError: 'injected'", failure
    assert (failure["frame"], failure["line"]) == ("step", _line(INJECTED, "divmod(x.shape")), (
        failure
    )
    assert failure["code"] == "half, _ = divmod(x.shape[0], 2)", failure
    fix = failure["fix"]
    assert "Dynamo's own code raised KeyError in torch/_dynamo/" in fix, fix
    assert "the nn.Module `step` calls" in fix and "rather than `step` whole" in fix, fix


def test_what_torch_wraps_as_internal() -> None:
    """The exceptions torch lets through unwrapped, read from the running torch's own
    source (`_compile` in convert_frame.py): none of them is called torch's bug, and every
    other exception of Python's is."""
    import builtins
    import inspect

    from torch._dynamo import convert_frame

    from compilediag.analysis.compile.torch_bugs import is_internal

    source = inspect.getsource(convert_frame._compile)
    m = re.search(r"if isinstance\(\s*e,\s*\((?P<names>[^)]*)\)", source)
    assert m, "torch's list of exceptions let through is not where it was"
    passed = {n.split(".")[-1] for n in re.findall(r"[\w.]+", m["names"])}
    assert {"Unsupported", "AssertionError", "IndexError"} <= passed, passed
    assert not any(is_internal(n) for n in passed), passed
    python_own = {n for n, v in vars(builtins).items() if isinstance(v, type)
                  and issubclass(v, Exception)}  # fmt: skip
    for name in python_own - passed - {"MemoryError"}:
        assert is_internal(name), name
    assert is_internal("InternalTorchDynamoError") and not is_internal("BackendCompilerFailed")


def test_a_break_inside_lightning_is_lightnings_not_torchs() -> None:
    """Lightning's folder lightning/pytorch/ holds `torch/` in its name: a break in its code
    is the library's, never "inside torch itself"; torch's own files still are torch's."""
    from compilediag.analysis.compile.frameworks import framework_of

    site = "/venv/lib/python3.11/site-packages"
    lightning = f"{site}/lightning/pytorch/core/module.py"
    assert framework_of(lightning) is None  # an installed library of its own
    assert framework_of(f"{site}/torch/nn/modules/module.py")[0] == "torch"
    assert framework_of(lightning, f"{site}/torch/nn/parallel/distributed.py")[0].endswith("(DDP)")
