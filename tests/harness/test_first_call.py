"""explain compiles the model's first call before eager runs it, as the user's job does: a
model that sets something up on its first call (torchvision's poolers find their scales so)
breaks its graph on that path, and the report says the break torch's own first compiled call
of a fresh model has (torch._dynamo.explain). Eager ran first, the set-up was done before
the compile and the report had no break."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.conftest import run_json

MODEL = """\
import math

import torch
from torch import nn


class Pooler(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.scale = None

    def forward(self, x):
        if self.scale is None:  # found on the first call
            self.scale = 2.0 ** -round(math.log2(x.abs().max().item()))
        return self.proj(x) * self.scale


model = Pooler()


def get_inputs():
    return (torch.randn(4, 16),)
"""


def torch_breaks(path: Path) -> list[int]:
    """torch's own: the lines a fresh model's first compiled call breaks at."""
    import torch

    spec = importlib.util.spec_from_file_location("first_call_model", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch._dynamo.reset()
    out = torch._dynamo.explain(module.model)(*module.get_inputs())
    return sorted({r.user_stack[-1].lineno for r in out.break_reasons})


def test_a_break_on_the_first_calls_path_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "pooler.py"
    path.write_text(MODEL)
    lines = torch_breaks(path)
    assert lines == [15]  # the .item() of the set-up
    report, proc = run_json("explain", str(path), "--backend", "eager", "--no-timings")
    assert proc.returncode in (0, 1), proc.stderr
    assert sorted({b["line"] for b in report["graph_breaks"]}) == lines
    assert report["output_check"]["match"] if "output_check" in report else True
