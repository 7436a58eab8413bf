"""Two recompiles whose advice torch's count refuted (#76, the fifteenth look): a size the
call that broke the graph returned (its eager result: no mark on the model input reaches
it, under any backend), and a batch of 1 (specialised whatever is marked dynamic). Each
advice checked by torch's own count of the same calls."""

from __future__ import annotations

import torch
from torch._dynamo.testing import CompileCounterWithBackend

from compilediag.testing import compile_report


@torch.compiler.disable
def embed(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def tagger(x: torch.Tensor) -> torch.Tensor:
    h = embed(x)
    return torch.tanh(h).sum(-1)


def _graphs(fn, calls: list[torch.Tensor], mark: int | None = None, backend: str = "eager",
            **kw) -> int:  # fmt: skip
    """The graphs torch compiles for `calls` (the first marked dynamic at dim `mark`)."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(fn, backend=counter, **kw)
    for i, x in enumerate(calls):
        if i == 0 and mark is not None:
            torch._dynamo.mark_dynamic(x, mark)
        compiled(x)
    torch._dynamo.reset()
    return counter.frame_count


def test_a_size_the_breaking_call_returned_is_advised_dynamic_true_not_a_mark() -> None:
    calls = [torch.randn(2, n) for n in (9, 13, 17)]
    report = compile_report(tagger, (calls[0],), calls=[(x,) for x in calls[1:]])
    resumed = [r for r in report.recompiles if "after line" in r.frame]
    assert resumed, [(r.frame, r.failed_guard) for r in report.recompiles]
    line = tagger.__code__.co_firstlineno + 1
    for r in resumed:
        assert (
            f"what the call that broke the graph returned (line {line}: `embed(x)`)" in r.suggestion
        ), r.suggestion
        assert "reaches it only under some backends" not in r.suggestion
    # torch's count (the frame before the break holds no op: no graph): the model input
    # marked, under aot_eager, the frame after the break still compiles twice, as unmarked;
    # with dynamic=True, once
    unmarked = _graphs(tagger, calls, backend="aot_eager")
    assert unmarked == 2 and _graphs(tagger, calls, mark=1, backend="aot_eager") == unmarked
    assert _graphs(tagger, calls, dynamic=True) == 1


def pool(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x).mean(0)


def test_a_batch_of_one_is_said_to_compile_whatever_is_marked() -> None:
    calls = [torch.randn(b, 16) for b in (2, 1, 3)]  # a static batch dim meets a batch of 1
    report = compile_report(pool, (calls[0],), calls=[(x,) for x in calls[1:]])
    (one,) = [r for r in report.recompiles if r.failed_guard.endswith("→ 1")]
    assert "A size of 1 is always specialised" in one.suggestion, one.suggestion
    assert "whatever is marked dynamic, dynamic=True too" in one.suggestion
    assert "mark_dynamic(" not in one.suggestion
    # torch's count: marked from the first call, or dynamic=True, the batch of 1 compiles
    assert _graphs(pool, calls, mark=0) == 2
    assert _graphs(pool, calls, dynamic=True) == 2


def test_a_sweep_from_a_batch_of_one_is_said_to_recompile_whatever_is_marked() -> None:
    """A sixteenth look: a sweep starting at batch 1 (1x8, 2x8, ...): the 1 → 2 recompile
    was advised marks "to skip this recompile too"; with them, or dynamic=True, torch still
    compiles the batch of 1 apart (size mismatch, expected 1, actual 2)."""
    calls = [torch.randn(b, 8) for b in (1, 2, 3)]
    report = compile_report(pool, (calls[0],), calls=[(x,) for x in calls[1:]])
    (first,) = [r for r in report.recompiles if r.failed_guard.endswith("1 → 2")]
    assert "This recompile stays whatever is marked dynamic" in first.suggestion, first.suggestion
    assert "To skip this recompile too" not in first.suggestion
    assert "start at 2 or more (no batch of 1 first) with the dim marked dynamic" in (
        first.suggestion
    ), first.suggestion
    # torch's count: marked from the first call, or dynamic=True, 2 graphs; from a batch of
    # 2, marked, one
    assert _graphs(pool, calls, mark=0) == 2 and _graphs(pool, calls, dynamic=True) == 2
    # (fresh tensors each time: a mark stays on the tensor it was put on)
    assert _graphs(pool, [torch.randn(b, 8) for b in (2, 3)], mark=0) == 1
    assert _graphs(pool, [torch.randn(b, 8) for b in (2, 3)]) == 2  # unmarked: one recompile


def tokens(ids: torch.Tensor) -> torch.Tensor:
    return torch.tanh(ids).sum(-1) * ids.shape[1]


def test_a_size_from_one_an_earlier_graph_had_is_not_said_to_stay() -> None:
    """A twenty-second look (1x16, 2x16, 4x16, 4x1, 4x8): the 4x8 call's recompile was said
    to stay under dynamic=True, as the size 1 → 8 it failed on the 4x1 graph. It had failed
    the 16's graph on 16 → 8 too: dynamic, that graph takes it (torch: one graph fewer)."""
    shapes = [(1, 16), (2, 16), (4, 16), (4, 1), (4, 8)]
    calls = [torch.randn(*s) for s in shapes]
    report = compile_report(tokens, (calls[0],), calls=[(x,) for x in calls[1:]])
    (last,) = [r for r in report.recompiles if r.failed_guard.endswith("1 → 8")]
    assert "stays whatever is marked dynamic" not in last.suggestion, last.suggestion
    assert "dynamic=True" in last.suggestion
    stays = [r for r in report.recompiles if "stays whatever is marked" in r.suggestion
             or "always specialised" in r.suggestion]  # fmt: skip
    # torch's count: dynamic=True leaves the recompiles said to stay, and those alone
    unmarked = _graphs(tokens, [torch.randn(*s) for s in shapes])
    dynamic = _graphs(tokens, [torch.randn(*s) for s in shapes], dynamic=True)
    assert unmarked - 1 == len(report.recompiles) and dynamic - 1 == len(stays) == 2
