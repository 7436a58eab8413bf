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


def test_keyword_tensors_are_named_where_shapes_finds_no_positional_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A nineteenth look: get_inputs() gave input_ids and attention_mask as keywords, and
    --shapes said "the model's inputs have none"."""
    from compilediag.errors import UsageError

    model = tmp_path / "kw.py"
    model.write_text(
        "import torch\n"
        "def get_model():\n    return lambda input_ids, attention_mask: input_ids * attention_mask\n"
        "def get_inputs():\n"
        "    return {'input_ids': torch.ones(2, 8), 'attention_mask': torch.ones(2, 8)}\n"
    )
    module = load_module(str(model))
    with pytest.raises(UsageError) as e:
        list(find_input_sets(module, Target(str(model), shapes=[[2, 16]]), "", True))
    assert "keyword arguments (input_ids, attention_mask)" in str(e.value), e.value


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


@pytest.mark.full
def test_the_mark_dynamic_advice_marks_every_input_torch_made_dynamic() -> None:
    """The mask's size is tied to the ids' in the graph: torch names the ids' failed guard
    alone, and `mark_dynamic(input_ids, 1)` alone raises ConstraintViolationError (#76, the
    thirteenth look's GPT-2). The advice marks each dim torch's later graph made dynamic;
    applied before the first call, the sweep compiles once."""
    import re

    report, proc = run_json(
        "recompiles", str(SAMPLE), "--shapes", "2x16,2x24,2x32", "--backend", "eager"
    )
    assert proc.returncode == 0, proc.stderr
    (r,) = report["recompiles"]
    marks = re.findall(r"torch\._dynamo\.mark_dynamic\((\w+), (\d+)\)", r["suggestion"])
    assert marks == [("input_ids", "1"), ("attention_mask", "1")], r["suggestion"]
    module = load_module(str(SAMPLE))
    names = ("input_ids", "attention_mask", "bias")

    def sweep(marked: list[tuple[str, str]]) -> int:
        model, counter = module.get_model(), CompileCounter()
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=counter)
        for n in (16, 24, 32):
            args = (torch.randint(0, 50, (2, n)), torch.ones(2, n, dtype=torch.int64),
                    torch.zeros(3))  # fmt: skip
            if n == 16:
                for name, dim in marked:
                    torch._dynamo.mark_dynamic(args[names.index(name)], int(dim))
            compiled(*args)
        torch._dynamo.reset()
        return counter.frame_count

    assert sweep(marks) == 1
    with pytest.raises(Exception, match="ConstraintViolation|Constraints violated"):
        sweep(marks[:1])
    # --try-fixes marks what the advice marks (a sixteenth look's remedy marked input_ids
    # alone, and read "mark_dynamic failed: ConstraintViolationError" under that advice)
    from compilediag.fixes.remedies import remedies_for
    from compilediag.report.model import Report

    (remedy,) = [x for x in remedies_for(Report.from_dict(report)) if x.name == "mark_dynamic"]
    assert remedy.mark_dynamic == [(names.index(n), int(d)) for n, d in marks], remedy


def test_an_image_size_that_changes_both_dims_is_marked_in_both() -> None:
    """Batches, then the image's height and width together (#76, the fourteenth look's timm
    model): torch names one failed guard a call (dim 0, then dim 2), and the advice marked
    those two; dim 3 changed with dim 2 and still recompiled. It marks each dim torch's
    later graphs made dynamic; applied before the first call, torch compiles once."""
    import re

    from compilediag.testing import compile_report

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1))
    sizes = [(2, 16), (4, 16), (4, 24), (4, 32)]

    def image(b: int, s: int) -> torch.Tensor:
        return torch.randn(b, 3, s, s)

    report = compile_report(model, (image(*sizes[0]),), calls=[(image(*s),) for s in sizes[1:]])
    said = {r.suggestion for r in report.recompiles}
    marks = {m for s in said for m in re.findall(r"mark_dynamic\(\w+(?:\[0\])?, (\d)\)", s)}
    assert marks == {"0", "2", "3"}, said
    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(model, backend=counter)
    for i, s in enumerate(sizes):
        x = image(*s)
        if i == 0:
            for dim in sorted(marks):
                torch._dynamo.mark_dynamic(x, int(dim))
        compiled(x)
    torch._dynamo.reset()
    assert counter.frame_count == 1
