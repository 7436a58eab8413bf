"""`--shapes` over a model that takes input_ids and an attention mask (#76, the thirteenth
look: every Hugging Face model failed it, the mask left at its first size). The tensors of
the first one's shape go with it; a mask of ones stays ones; other inputs are kept. The
sweep's recompiles checked against torch's own count of the same calls."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from compilediag.harness.target import Target, find_input_sets, load_module
from tests.conftest import ROOT, run_json

SAMPLE = ROOT / "tests" / "fixtures" / "tagger_mask.py"
SHAPES = [[2, 16], [2, 24], [4, 24]]


def _calls() -> list:
    module = load_module(str(SAMPLE))
    return [a for a, _ in find_input_sets(module, Target(str(SAMPLE), shapes=SHAPES), "", True)]


def test_the_tensors_of_the_first_ones_shape_go_with_it() -> None:
    calls = _calls()
    assert [list(a[0].shape) for a in calls] == SHAPES
    for ids, mask, bias in calls:
        assert mask.shape == ids.shape and bool((mask == 1).all()) and mask.dtype == torch.int64
        assert ids.dtype == torch.int64 and int(ids.max()) < 50
        assert bias.shape == (3,)  # another shape: kept


@pytest.mark.full
def test_the_sweeps_recompiles_are_torchs() -> None:
    report, proc = run_json(
        "recompiles", str(SAMPLE), "--shapes", ",".join("x".join(map(str, s)) for s in SHAPES),
        "--backend", "eager",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    module = load_module(str(SAMPLE))
    model, counter = module.get_model(), CompileCounter()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=counter)
    for args in _calls():
        compiled(*args)
    torch._dynamo.reset()
    assert report["summary"]["graphs"] == counter.frame_count == 3
    assert [c["compiled"] for c in report["calls"]] == [True, True, True]
    said = [r["failed_guard"] for r in report["recompiles"]]
    assert said == ["input_ids dim 1 changed 16 → 24", "input_ids dim 0 changed 2 → 4"], said
