"""A backend's own guards (#68): Inductor's adaptive_avg_pool2d lowering needs an image's size
as a number, so the size torch made dynamic is a constant again in each graph, and every size
recompiles where the eager backend recompiles once. `recompiles` compiles as the user does
(Inductor by default), and its advice says what torch's rules allow: not mark_dynamic (it
raises), not dynamic=True (as many graphs), but few sizes. Before: the default eager backend
counted 1 recompile where the user's compile makes 3, and the advice read "torch already made
it dynamic…, so later values reuse this graph"."""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from compilediag.trace.parse import parse_path
from tests.conftest import ROOT, TRACES, run_json

FIXTURES = ROOT / "tests" / "fixtures"
MODEL = FIXTURES / "pooled_images.py"
RECORDED = ["torch-2.13.0-cpu", "torch-2.15.0-cpu"]


def graphs_per_frame(backend: str, sizes: list[int], **compile_kwargs) -> Counter:
    """torch's own count: the graphs each frame compiles for images of these sizes."""
    import torch
    from torch._dynamo.testing import CompileCounterWithBackend

    sys.path.insert(0, str(FIXTURES))
    import pooled_images

    per_frame: Counter = Counter()
    inner = CompileCounterWithBackend(backend)

    def counting(gm, example_inputs):
        per_frame[torch._guards.CompileContext.current_compile_id().frame_id] += 1
        return inner(gm, example_inputs)

    torch._dynamo.reset()
    compiled = torch.compile(pooled_images.get_model(), backend=counting, **compile_kwargs)
    with torch.no_grad():
        for s in sizes:
            compiled(torch.randn(2, 3, s, s))
    torch._dynamo.reset()
    return per_frame


@pytest.mark.parametrize("folder", RECORDED)
def test_the_trace_names_the_size_inductor_made_a_constant(folder: str) -> None:
    (log,) = parse_path(TRACES / folder / "pooled_images.log.gz")
    pinned = {c.compile_id: c.specialized for c in log.ordered()}
    assert pinned["0/0"] == []  # static: nothing to make a constant
    for cid, size in (("0/1", "48"), ("0/2", "64"), ("0/3", "80")):
        assert {(s.sources[0][-10:], s.value, s.by, s.op) for s in pinned[cid]} == {
            (f".size()[{d}]", size, "Inductor", "adaptive_avg_pool2d") for d in (2, 3)
        }
    report, proc = run_json("report", str(TRACES / folder / "pooled_images.log.gz"))
    assert proc.returncode == 0, proc.stderr
    assert report["summary"]["recompiles"] == 3
    for r in report["recompiles"]:
        assert r["automatic_dynamic"] is False
        assert "reuse this graph" not in r["suggestion"]
        assert r["suggestion"].startswith(
            "Inductor needs args[0] dim 2 (and dim 3) as a number (its lowering of "
            "adaptive_avg_pool2d)"
        ), r["suggestion"]
    # one cause, told once
    assert len({r["suggestion"] for r in report["recompiles"]}) == 1


@pytest.mark.full  # Inductor compiles
def test_recompiles_counts_as_the_users_inductor_compile_and_its_advice_holds() -> None:
    import torch

    sizes = [32, 48, 64, 80]
    report, proc = run_json("recompiles", str(MODEL), as_typed=True)  # the default backend
    assert proc.returncode == 0, proc.stderr
    assert report["environment"]["backend"] == "inductor"
    inductor = sum(n - 1 for n in graphs_per_frame("inductor", sizes).values())
    eager = sum(n - 1 for n in graphs_per_frame("eager", sizes).values())
    assert report["summary"]["recompiles"] == inductor == 3 and eager == 1
    assert [c["state"] for c in report["calls"]] == ["compiled"] * 4  # no call a hit
    (said,) = {r["suggestion"] for r in report["recompiles"]}
    assert "mark_dynamic raises" in said and "dynamic=True compiles as many graphs" in said
    # what it rules out, by torch's rules: mark_dynamic raises, dynamic=True as many graphs
    sys.path.insert(0, str(FIXTURES))
    import pooled_images

    torch._dynamo.reset()
    compiled = torch.compile(pooled_images.get_model())
    x = torch.randn(2, 3, 32, 32)
    torch._dynamo.mark_dynamic(x, 2)
    with pytest.raises(Exception, match="specialized it to be a constant"), torch.no_grad():
        compiled(x)
    assert sum(graphs_per_frame("inductor", sizes, dynamic=True).values()) == len(sizes)
    # what it advises: few sizes, each called once first, and then no call compiles
    assert sum(graphs_per_frame("inductor", [32, 64, 32, 64, 64]).values()) == 2
