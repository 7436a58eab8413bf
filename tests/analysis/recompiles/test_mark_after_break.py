"""Whether marking the batch reaches the frame after a graph break (#76, an eighth look):
the recompile advice said "marking the batch you pass does not reach (torch recompiles it
all the same)", and under aot_eager torch compiled 2 frames with the batch marked where it
compiled 4 without (no recompile). torch carries the mark through the break under some
backends and not others; the words name them (guard_words.MARK_REACHES), and this checks
them against torch's own count of frames on the torch at hand."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend

from compilediag.analysis.recompiles.guard_words import MARK_REACHES, mark_after_break


class Tower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp, self.mid, self.out = nn.Linear(40, 96), nn.Linear(96, 96), nn.Linear(96, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.inp(x))
        if h.mean() > 10.0:  # a graph break: data-dependent branching
            h = h * 0.1
        return self.out(F.gelu(self.mid(h)))


def frames(backend: str, mark: bool) -> int:
    """torch's count of the frames compiled over batches of 64, 64 and a last one of 4."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    counter = CompileCounterWithBackend(backend)
    model = torch.compile(Tower(), backend=counter)
    for size in (64, 64, 4, 64, 4):
        x = torch.randn(size, 40)
        if mark:
            torch._dynamo.mark_dynamic(x, 0)
        model(x).sum().backward()
    return counter.frame_count


@pytest.mark.parametrize(
    "backend", ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.full)]
)
def test_the_backends_said_to_carry_the_mark_are_torchs(backend: str) -> None:
    assert frames(backend, mark=False) == 4  # both frames recompile for the last batch
    reached = frames(backend, mark=True) == 2  # else the frame after the break recompiles
    assert reached == (backend in MARK_REACHES), (backend, MARK_REACHES)


def test_the_words_name_the_backends() -> None:
    said = mark_after_break("the batch you pass", "them")
    assert said.startswith("marking the batch you pass reaches them only under some backends")
    assert all(b in said for b in MARK_REACHES) and "not Inductor or eager" in said
