"""A recompile for a new mode (issue #36): grad mode, train()/eval(), autocast, inference
mode. One graph per mode is expected, so the report says so, counts the frame's compiles
for its modes, names the lines that called and switched each mode, and says what compiles
fewer - never "always run under no_grad", which a training loop can't do and which would
not remove the recompile. Checked on a training loop in the style of nanoGPT's train.py
(tests/fixtures/run_jobs/gpt_eval.py) run through `compilediag run`, against the counts
torch took in the job itself; the remedy the advice gives is applied and torch's count goes
down, and the one it rules out (a second torch.compile) is applied and torch's count stays."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from compilediag.analysis.recompiles.guard_words import mode_switch, translate
from tests.conftest import ROOT, run_cli

JOBS = ROOT / "tests" / "fixtures" / "run_jobs"
GPT = JOBS / "gpt_eval.py"


def line_of(path: Path, text: str, after: int = 0) -> int:
    """The first line at or after `after` that holds `text`."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if i >= after and text in line)


ESTIMATE = line_of(GPT, "def estimate_loss")
EVAL = line_of(GPT, "    model.eval()")
EVAL_CALL = line_of(GPT, "logits, loss = model(X, Y)", after=line_of(GPT, "else:", ESTIMATE))
TRAIN_CALL = line_of(GPT, "logits, loss = model(X, Y)", after=EVAL_CALL + 1)
ALWAYS_NO_GRAD = re.compile(r"always[^.]*no_grad|same torch state", re.I)


def run_job(folder: Path, job: Path, **env: str) -> tuple[dict, dict, str]:
    """`compilediag run --format json -- python JOB`: the report, the job's own counts
    ($JOB_FACTS) and the report as a saved file."""
    facts, saved = folder / "facts.json", folder / "report.json"
    proc = run_cli(
        "run", "--format", "json", "--", sys.executable, str(job),
        env={"JOB_FACTS": str(facts), **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    saved.write_text(proc.stdout)
    return json.loads(proc.stdout), json.loads(facts.read_text()), str(saved)


@pytest.fixture(scope="module")
def nanogpt(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, str]:
    """The loop as nanoGPT writes it: estimate_loss() calls the compiled model."""
    return run_job(tmp_path_factory.mktemp("nanogpt"), GPT)


def test_an_evaluation_pass_in_a_training_loop_is_one_graph_per_mode(nanogpt) -> None:
    """Before: "Call the compiled model under the same torch state every time (e.g. always
    inside torch.no_grad(), ...)" - no line named, and impossible in a training loop."""
    report, torch_saw, saved = nanogpt
    # torch's own counts: two graphs of forward, one recompile (evaluation at iterations 0,
    # 4 and 8, training between: each switch after the first two reuses a graph)
    assert torch_saw["frames"] == report["summary"]["graphs"] == 2
    assert torch_saw["recompiles_log"] == torch_saw["recompiles"] == 1
    assert report["summary"]["recompiles"] == 1
    (r,) = report["recompiles"]
    assert r["cause"] == "global" and r["failed_guard"] == "global state changed: grad mode"
    fix = r["suggestion"]
    assert fix.startswith("Expected: one graph per mode.")
    assert "2 compiles" in fix
    # each graph's mode, from its own guards, and the lines that called and switched it
    assert (
        f"grad off, eval() (called at gpt_eval.py:{EVAL_CALL} in estimate_loss, switched by "
        f"line {ESTIMATE - 1} `@torch.no_grad()` and line {EVAL} `model.eval()`)"
    ) in fix
    assert f"grad on, train() (called at gpt_eval.py:{TRAIN_CALL})" in fix
    # what compiles fewer, where; and what would not
    assert f"run evaluation uncompiled: at gpt_eval.py:{EVAL_CALL} (in estimate_loss)" in fix
    assert "the module you passed to torch.compile" in fix
    assert 'torch.compiler.set_stance("force_eager")' in fix
    assert "A second torch.compile(model) would not help" in fix
    assert "Evaluating with grad on would not remove it" in fix
    assert not ALWAYS_NO_GRAD.search(fix), fix
    # the table says the same, in the recompile's own block
    table = run_cli("render", saved).stdout
    block = table.split("Recompiles (1)")[1].split("\nGraphs")[0]
    assert "fix Expected: one graph per mode." in block, block
    assert not ALWAYS_NO_GRAD.search(" ".join(block.split())), block


@pytest.mark.parametrize(
    ("eval_with", "compiles"),
    [("raw", 1), ("stance", 1), ("second", 2)],
    ids=["uncompiled-module", "set-stance-force-eager", "second-torch-compile"],
)
def test_the_remedy_the_advice_gives_compiles_less(
    nanogpt, tmp_path: Path, eval_with: str, compiles: int
) -> None:
    """The advice's remedies, applied to the same loop: evaluating with the module given to
    torch.compile, or the compiled one under set_stance("force_eager"), leaves forward one
    compile by torch's own count; a second torch.compile(model), which the advice rules out,
    leaves it two (graphs are cached on forward's code object)."""
    before, torch_before, _ = nanogpt
    (r,) = before["recompiles"]
    remedy = {
        "raw": "call the module you passed to torch.compile",
        "stance": 'torch.compiler.set_stance("force_eager")',
        "second": "A second torch.compile(model) would not help",
    }[eval_with]
    assert remedy in r["suggestion"]
    report, torch_saw, _ = run_job(tmp_path, GPT, JOB_EVAL_WITH=eval_with)
    assert torch_saw["frames"] == report["summary"]["graphs"] == compiles
    assert torch_saw["recompiles_log"] == report["summary"]["recompiles"] == compiles - 1
    assert torch_saw["frames"] < torch_before["frames"] or eval_with == "second"


def test_a_module_compiled_in_place_is_told_what_it_can_do(tmp_path: Path) -> None:
    """model.compile() (in place, as torchtitan compiles each block): there is no other
    module to call, so the advice is set_stance alone, and each graph's call is the line
    that called the model (before: "called at gpt_eval.py:69 in forward", forward's own
    def line, and "call the module you passed to torch.compile"). The remedy applied leaves
    forward one compile by torch's own count."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    report, torch_saw, _ = run_job(tmp_path / "a", GPT, JOB_COMPILE="inplace")
    assert torch_saw["frames"] == report["summary"]["graphs"] == 2
    (r,) = report["recompiles"]
    fix = r["suggestion"]
    assert "the module you passed" not in fix and "compiled in place" in fix, fix
    assert f"called at gpt_eval.py:{EVAL_CALL} in estimate_loss" in fix, fix
    assert f"run evaluation uncompiled: at gpt_eval.py:{EVAL_CALL} (in estimate_loss)" in fix
    assert 'torch.compiler.set_stance("force_eager")' in fix
    fixed, torch_fixed, _ = run_job(
        tmp_path / "b", GPT, JOB_COMPILE="inplace", JOB_EVAL_WITH="stance"
    )
    assert torch_fixed["frames"] == fixed["summary"]["graphs"] == 1
    assert torch_fixed["recompiles_log"] == fixed["summary"]["recompiles"] == 0


MIXED = """
import sys
sys.path.insert(0, {jobs!r})
import torch
from torch import nn
from torch_counts import backend, facts_path, write_facts

m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
c = torch.compile(m, backend=backend, dynamic=False)


def train_step(x):
    c(x).sum().backward()


@torch.inference_mode()
def predict(x):
    m.eval()
    y = c(x)
    m.train()
    return y


def amp_eval(x):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        return c(x)


train_step(torch.randn(2, 4))
predict(torch.randn(2, 4))
train_step(torch.randn(3, 4))  # the inference graph is checked first: it fails on grad mode
amp_eval(torch.randn(2, 4))
predict(torch.randn(2, 4))
write_facts(facts_path())
"""


def test_three_modes_and_a_new_shape_in_one_of_them(tmp_path: Path) -> None:
    """Training, inference under @torch.inference_mode() with eval(), evaluation under
    autocast: three graphs, one per mode; a new batch size in training is a shape
    recompile, though the graph torch checked first (the inference one) failed on grad mode.
    Before: that recompile was "global" and told to run under the same torch state."""
    job = tmp_path / "modes.py"
    job.write_text(MIXED.format(jobs=str(JOBS)))
    report, torch_saw, _ = run_job(tmp_path, job)
    assert torch_saw["recompiles_log"] == torch_saw["recompiles"] == 3
    assert report["summary"]["recompiles"] == 3
    inference, shape, amp = report["recompiles"]
    assert shape["cause"] == "shape" and "dim 0 changed 2 → 3" in shape["failed_guard"]
    assert "mark_dynamic" in shape["suggestion"]
    for r in (inference, amp):
        fix = r["suggestion"]
        assert fix.startswith("Expected: one graph per mode.") and "3 compiles" in fix, fix
        assert not ALWAYS_NO_GRAD.search(fix), fix
    fix = inference["suggestion"]
    assert amp["suggestion"] == fix  # one text for the frame: the table says it once
    call, decorator = line_of(job, "y = c(x)"), line_of(job, "@torch.inference_mode()")
    assert (
        f"called at modes.py:{call} in predict, switched by line {decorator} "
        f"`@torch.inference_mode()` and line {call - 1} `m.eval()`"
    ) in fix
    assert "switched by line " + str(line_of(job, "with torch.no_grad(), torch.autocast")) in fix
    assert "grad off, train(), autocast" in fix and "grad on, train(), no autocast" in fix


@pytest.mark.parametrize(
    ("guard", "mode"),
    [
        ("GLOBAL_STATE changed: grad_mode ", "grad mode"),
        ("GLOBAL_STATE changed: grad_mode autocast(cpu)_enabled ", "grad mode, autocast"),
        ("GLOBAL_STATE changed: autocast(cuda)_enabled", "autocast"),
        ("L['self']._modules['drop'].training == True", "train()/eval()"),
        (
            "tensor 'args[0]' dispatch key set mismatch. expected DispatchKeySet(CPU, "
            "BackendSelect, ADInplaceOrView, AutogradCPU), actual DispatchKeySet(CPU, "
            "BackendSelect)",
            "inference mode",
        ),
        ("GLOBAL_STATE changed: default_dtype", ""),
        ("GLOBAL_STATE changed: grad_mode num_threads", ""),
        (
            "tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, "
            "AutogradCPU), actual DispatchKeySet(CUDA, AutogradCUDA)",
            "",
        ),
        ("tensor 'x' size mismatch at index 0. expected 2, actual 3", ""),
    ],
)
def test_which_failed_guards_are_a_mode(guard: str, mode: str) -> None:
    """torch's texts as the 2.13 and 2.15 recompiles logs give them; a setting (the default
    dtype, the number of threads) or a device is no mode, and is not called expected."""
    assert mode_switch(guard) == mode
    _, _, advice = translate(guard)
    assert advice.startswith("Expected: one graph per mode") == bool(mode)
    assert not ALWAYS_NO_GRAD.search(advice), advice
