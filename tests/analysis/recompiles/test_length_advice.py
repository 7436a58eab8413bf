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
