"""A compile torch restarts after its backend had the graph (#37: every backend call
counted): a Python float passed to an op that needs a number. torch tries to keep the
float dynamic on the second value, AOTAutograd finds it must be a constant, and the
compile starts over with it baked in: the backend is called one more time than there are
graphs (torch's CompileCounter counts that call), and every later value recompiles - not
"later values reuse this graph". The advice, applied, leaves one graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli, run_json

MODEL = """\
import torch
from torch import nn


class Clip(nn.Module):
    def forward(self, x, limit):
        return x.clamp(max=limit) * 2


def get_model():
    return Clip()


def get_input_sets():
    return [(torch.randn(4, 8), limit) for limit in (2.0, 3.0, 4.0, 5.0)]
"""
# the advice applied: the float passed as a tensor, which clamp takes
FIXED = MODEL.replace("torch.randn(4, 8), limit)", "torch.randn(4, 8), torch.tensor(limit))")


def _torch_count(source: str, path: Path) -> int:
    """torch's own count of backend calls for the file's model and inputs."""
    import torch
    from torch._dynamo.testing import CompileCounterWithBackend

    namespace: dict = {}
    exec(compile(source, str(path), "exec"), namespace)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    model = torch.compile(namespace["get_model"](), backend=counter)
    for args in namespace["get_input_sets"]():
        model(*args)
    torch._dynamo.reset()
    return counter.frame_count


def test_a_graph_discarded_on_a_restart_is_counted_and_said(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "model.py").write_text(MODEL)
    args = ("recompiles", "model.py", "--backend", "aot_eager")
    report, proc = run_json(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    graphs = report["graphs"]
    discarded = sum(g["discarded"] for g in graphs)
    assert discarded >= 1
    assert len(graphs) + discarded == _torch_count(MODEL, tmp_path / "model.py")
    notes = [n for n in report["notes"] if n["kind"] == "discarded_graph"]
    assert (
        notes
        and "a Python float it tried to keep dynamic had to be a constant" in notes[0]["message"]
    )
    calls = len(graphs) + discarded  # (a look: "called 2 times for 1 graphs")
    said = f"The backend was called {calls} times for {len(graphs)} graphs, as torch's"
    assert said in notes[-1]["message"], notes[-1]["message"]
    # every value after the first recompiled: no "later values reuse this graph"
    assert len(report["recompiles"]) == len(graphs) - 1 == 3
    for r in report["recompiles"]:
        assert not r["automatic_dynamic"]
        assert "reuse this graph" not in r["suggestion"]
        assert "baked the value in" in r["suggestion"]
        assert "Pass `limit` as a tensor" in r["suggestion"]
    table = " ".join(run_cli(*args, cwd=tmp_path).stdout.split())
    assert "was compiled 2 times" in table
    # the advice, applied: one graph, no recompile, nothing discarded
    assert _torch_count(FIXED, tmp_path / "fixed.py") == 1
