"""An int a line passes to a function of torch's (#76, the nineteenth look: `torch.topk(h,
k)`): "make `k` a tensor or compile with dynamic=True" was half false; with k a tensor,
torch could not compile the rest of forward. The advice keeps it an int, and torch's own
count holds it."""

from __future__ import annotations

import torch


def top_sum(h: torch.Tensor, k: int) -> torch.Tensor:
    top = torch.topk(h, k, dim=-1).values
    return top.sum(-1)


def _frames(dynamic: bool | None = None, as_tensor: bool = False) -> tuple[int, int]:
    """torch's count of frames compiled over k = 2, 3, 4, and of compiles that failed (its
    `unimplemented` counter) and graph breaks, under aot_eager."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(top_sum, backend=counter, dynamic=dynamic)
    h = torch.randn(4, 8)
    for k in (2, 3, 4):
        compiled(h, torch.tensor(k) if as_tensor else k)
    failed = sum(counters["unimplemented"].values()) + sum(counters["graph_break"].values())
    torch._dynamo.reset()
    return counter.frame_count, failed


def test_an_int_torch_takes_as_a_number_is_advised_dynamic_true_not_a_tensor() -> None:
    from compilediag.testing import compile_report

    h = torch.randn(4, 8)
    report = compile_report(top_sum, (h, 2), calls=[(h, 3), (h, 4)])
    (r,) = [r for r in report.recompiles if r.cause == "int"]
    assert "ompile with dynamic=True, and `k` is a symbolic int" in r.suggestion, r.suggestion
    assert "Keep it a Python int: `torch.topk`" in r.suggestion, r.suggestion
    assert "a tensor or compile" not in r.suggestion.lower(), r.suggestion
    assert "no fix on aot_eager or Inductor" in r.suggestion, r.suggestion
    # torch under aot_eager: as-is, 2 frames; dynamic=True, 1; k as a tensor: the compile
    # that reads the number out of it fails
    assert _frames() == (2, 0)
    assert _frames(dynamic=True) == (1, 0)
    assert _frames(as_tensor=True)[1] > 0
