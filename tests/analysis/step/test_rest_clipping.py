"""The rest's eager ops that are gradient clipping's (look 27: a Trainer's step on an H200
and on CPU read "eager ops outside the compiled graphs take 10% of a step (aten::stack,
aten::_foreach_norm, aten::isinf): compute them in the compiled forward (return the loss or
metric from it)", where they were clip_grad_norm_'s, between backward and the optimizer).
The ops are torch.profiler's own for clip_grad_norm_ on this torch."""

from __future__ import annotations

from collections import Counter

import pytest

from compilediag.analysis.step.advice import _rest_kind, rest_advice
from compilediag.report.model import Breakdown, RestPart

torch = pytest.importorskip("torch")


def _profiled(fn, steps: int = 3) -> list[RestPart]:  # type: ignore[no-untyped-def]
    """torch.profiler's top-level aten ops of `fn`, a step each, as the kernel profile
    gives the rest's."""
    with torch.profiler.profile() as prof:
        for _ in range(steps):
            fn()
    top = [e for e in prof.events() if e.name.startswith("aten::")
           and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]  # fmt: skip
    calls, us = Counter(e.name for e in top), Counter()
    for e in top:
        us[e.name] += e.cpu_time_total
    parts = []
    for name, n in calls.items():
        kind, what = _rest_kind(name)
        parts.append(RestPart(name, kind, what, n / steps, us[name] / 1e3 / steps))
    return sorted(parts, key=lambda r: -r.ms)


def _advice(parts: list[RestPart]) -> str:
    spent = sum(r.ms for r in parts)
    b = Breakdown(call_ms=4 * spent, in_graphs_ms=spent, between_graphs_ms=0.0,
                  outside_ms=2 * spent, calls=10, rest=parts)  # fmt: skip
    (said,) = rest_advice(b)
    return said


def test_clipping_is_named_as_such_not_sent_to_the_forward() -> None:
    model = torch.nn.Sequential(*(torch.nn.Linear(64, 64) for _ in range(8)))
    model(torch.randn(4, 64)).sum().backward()
    said = _advice(_profiled(lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
    assert "gradient clipping's (clip_grad_norm_'s" in said, said
    assert "compute them in the compiled forward" not in said
    # a metric computed eagerly after the step: the forward's to compute
    x, y = torch.randn(256, 64), torch.randint(0, 8, (256,))

    def metric() -> None:
        logits = model[0](x)[:, :8]
        (logits.softmax(-1).argmax(-1) == y).float().mean()

    said = _advice(_profiled(metric))
    assert "compute them in the compiled forward" in said and "clipping" not in said, said
