"""A str and a bool argument (#76, the thirteenth look): the Calls table gave `str` with no
value, so two calls that compiled apart read alike, and a bool's failed guard had no words.
Checked against torch's own count (CompileCounter) and its recompile reasons, and the bool's
advice applied."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from tests.conftest import ROOT, shared_json

pytestmark = pytest.mark.full

SAMPLE = ROOT / "tests" / "fixtures" / "mode_and_flag.py"


def _torch_run() -> tuple[int, list[str]]:
    """The sample's calls under torch's CompileCounter, and its recompile log's messages."""
    import logging

    from tests.conftest import load_sample

    model, sets = load_sample(str(SAMPLE))
    said: list[str] = []

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    kept, logger = Kept(), logging.getLogger("torch._dynamo")
    torch._dynamo.reset()
    torch._logging.set_logs(recompiles=True)
    logger.addHandler(kept)
    try:
        counter = CompileCounter()
        compiled = torch.compile(model, backend=counter)
        for args in sets:
            compiled(*args)
    finally:
        logger.removeHandler(kept)
        torch._logging.set_logs()
        torch._dynamo.reset()
    return counter.frame_count, [m for m in said if m.startswith("Recompiling")]


def test_each_call_shows_its_str_and_bool_and_the_bool_guard_is_worded() -> None:
    from tests.conftest import load_sample

    report, proc = shared_json("recompiles", str(SAMPLE), "--backend", "eager")
    assert proc.returncode == 0, proc.stderr
    graphs, recompiling = _torch_run()
    assert report["summary"]["graphs"] == graphs == 3
    assert len(report["recompiles"]) == len(recompiling) == 2
    _, sets = load_sample(str(SAMPLE))
    shown = [c["inputs"] for c in report["calls"]]
    for (_, mode, flag), said in zip(sets, shown, strict=True):
        assert f"str={mode!r}" in said and f"bool={flag}" in said, said
    assert len(set(shown)) == len({(m, f) for _, m, f in sets})  # calls that differ read apart
    # torch's second recompile: the newest graph's guard `normalize == False` failed first
    assert "- 0/1: normalize == False" in recompiling[1], recompiling[1]
    flagged = report["recompiles"][1]
    assert flagged["cause"] == "bool", flagged
    assert flagged["failed_guard"].startswith("normalize changed (was False)"), flagged
    assert "two at most" in flagged["suggestion"] and "torch.where" in flagged["suggestion"]


def test_the_bools_advice_holds_by_torchs_count() -> None:
    """Two graphs at most for a bool, dynamic=True or not; a 0-d bool tensor picked with
    torch.where: one graph for both values, the outputs the same."""
    from torch import nn

    class Flagged(nn.Module):
        def forward(self, x, normalize):
            out = x.mean(1)
            return out / out.norm(dim=-1, keepdim=True) if normalize else out

    class Picked(nn.Module):
        def forward(self, x, normalize):
            out = x.mean(1)
            return torch.where(normalize, out / out.norm(dim=-1, keepdim=True), out)

    x = torch.randn(2, 5, 8)
    flags = [False, True, False, True, True]
    for dynamic in (None, True):
        torch._dynamo.reset()
        counter = CompileCounter()
        compiled = torch.compile(Flagged(), backend=counter, dynamic=dynamic)
        for f in flags:
            compiled(x, f)
        assert counter.frame_count == 2, dynamic
    torch._dynamo.reset()
    counter = CompileCounter()
    picked = torch.compile(Picked(), backend=counter)
    for f in flags:
        assert torch.equal(picked(x, torch.tensor(f)), Flagged()(x, f))
    assert counter.frame_count == 1
    torch._dynamo.reset()
