"""A list whose length changes (#76, a sixteenth look): "stack it into one tensor" alone
still recompiled once (torch: the stacked tensor's size changed 2 → 3); stacked and its dim
marked dynamic, one graph. The advice says both, as torch counts them."""

from __future__ import annotations

import pytest

from compilediag.report.vocabulary import RecompileCause

torch = pytest.importorskip("torch")


def pooled(feats: list) -> torch.Tensor:
    return sum(f.tanh() for f in feats)


def stacked(feats: torch.Tensor) -> torch.Tensor:
    return feats.tanh().sum(0)


def _graphs(fn, calls: list, mark: bool = False) -> int:
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(fn, backend=counter)
    for i, x in enumerate(calls):
        if mark and i == 0:
            torch._dynamo.mark_dynamic(x, 0)
        compiled(x)
    torch._dynamo.reset()
    return counter.frame_count


def test_a_lists_length_is_advised_stacked_and_marked() -> None:
    from compilediag.testing import compile_report

    lists = [[torch.randn(4) for _ in range(n)] for n in (2, 3, 4)]
    report = compile_report(pooled, (lists[0],), calls=[(x,) for x in lists[1:]])
    lengths = [r for r in report.recompiles if r.cause == RecompileCause.LENGTH]
    assert lengths, [(r.cause, r.failed_guard) for r in report.recompiles]
    for r in lengths:
        assert "stack it into one tensor and mark that tensor's dim 0 dynamic" in r.suggestion
        assert "stacked alone, its length is a size" in r.suggestion, r.suggestion
    # torch: stacked alone, the next length recompiles once; stacked and marked, one graph
    tensors = [torch.stack(x) for x in lists]
    assert _graphs(stacked, tensors) == 2
    assert _graphs(stacked, tensors, mark=True) == 1


def mixed(feats: list, temperature: float) -> torch.Tensor:
    return torch.softmax(sum(f.tanh() for f in feats) / temperature, dim=-1)


def test_the_failed_guard_is_the_nearest_graphs_not_the_newest() -> None:
    """A seventeenth look: calls of 2 tensors at 0.7, 3 at 0.7, then 2 at 0.9. torch names
    the newest graph's failed guard first (`len(feats) == 3`), then the first graph's
    (`temperature == 0.7`); the report read "then length of `feats` changed (was 3)" where
    the call had the first graph's length and only the float changed. The guard of the
    cached graph the call came nearest to is the one said."""
    from compilediag.testing import compile_report

    two, three = [torch.randn(4) for _ in range(2)], [torch.randn(4) for _ in range(3)]
    report = compile_report(mixed, (two, 0.7), calls=[(three, 0.7), (two, 0.9)])
    first, second = report.recompiles
    assert first.cause == RecompileCause.LENGTH, first.failed_guard
    # torch's own record of the third call: both graphs' failed guards, the newest first
    assert "len(" in second.reasons[0] and "temperature" in second.reasons[1], second.reasons
    assert second.failed_guard.startswith("temperature changed (was 0.7)"), second.failed_guard


EVAL_AFTER_A_FLOAT = """\
import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, temperature):
        return self.drop(torch.tanh(self.lin(x))) / temperature


MODEL = None


def get_model():
    global MODEL
    torch.manual_seed(0)
    MODEL = Scorer()
    return MODEL


def get_inputs():
    return (torch.randn(2, 8), 0.7)


def get_input_sets():
    x = torch.randn(2, 8)
    yield (x, 0.7)
    yield (x, 0.9)
    MODEL.eval()
    yield (x, 0.9)
"""


@pytest.mark.full
def test_a_switch_to_eval_after_a_float_change_is_the_mode_switch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An eighteenth look: after a float's recompile, `.eval()`'s recompile read as the
    float's (torch names the newest graph's `training == True` first, then the first
    graph's `temperature == 0.7`): no cached graph is of the eval mode, so the call is the
    mode switch, and advised as one."""
    from tests.conftest import run_json

    model = tmp_path / "scorer.py"
    model.write_text(EVAL_AFTER_A_FLOAT)
    report, proc = run_json("recompiles", str(model), "--backend", "eager")
    assert proc.returncode == 0, proc.stderr
    *_, last = report["recompiles"]
    assert "training" in last["reasons"][0] and "temperature" in last["reasons"][1], last
    assert last["cause"] == "training" and "one graph per mode" in last["suggestion"], last
    assert "temperature" not in last["failed_guard"]


@pytest.mark.full
def test_a_call_that_compiled_on_the_inputs_before_is_pointed_to_its_recompile(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An eighteenth look: the Calls table printed calls 3-5 alike, the model's mode or a
    flag changed between them. A call that compiled on inputs shown as the call before's
    says its recompile says what changed; an input that requires grad (torch guards on it,
    a recompile) is shown so."""
    from tests.conftest import run_cli

    model = tmp_path / "scorer.py"
    model.write_text(EVAL_AFTER_A_FLOAT + "    yield (x.clone().requires_grad_(True), 0.9)\n")
    shown = run_cli("recompiles", str(model), "--backend", "eager", env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    calls = shown.stdout.split("\nCalls", 1)[1].split("\nRecompiles", 1)[0]
    rows = [line.split() for line in calls.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["1", "2", "3", "4"] and rows[3][
        1
    ] == "2x8:float32:requires_grad,"
    assert all("compiled" in r for r in rows), rows
    assert "call 3 compiled with inputs shown as the call before's" in " ".join(calls.split())
    assert "its recompile says (0/2)" in calls and "call 4" not in calls, calls


def checked(x: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x)
    if h.mean().item() > 10:
        h = h * 0
    return h + 1


def test_a_branch_on_an_item_is_not_said_kept_whole_by_capture() -> None:
    """An eighteenth look: the recompile of a value `if h.mean().item() > 10:` read
    advised capture_scalar_outputs, "which also keeps the graph whole at line 16"; torch
    still breaks there with it (data-dependent branching)."""
    from compilediag.testing import compile_report

    calls = [(torch.randn(4, 8),) for _ in range(3)]
    report = compile_report(checked, calls[0], calls=calls[1:])
    valued = [r for r in report.recompiles if r.cause in ("float", "int")]
    assert valued, [(r.cause, r.failed_guard) for r in report.recompiles]
    for r in valued:
        assert "keeps the graph whole" not in r.suggestion, r.suggestion
        assert "torch.where" in r.suggestion, r.suggestion
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        explained = torch._dynamo.explain(checked)(calls[0][0])
    assert explained.graph_break_count == 1, explained.break_reasons  # at the branch
    torch._dynamo.reset()
