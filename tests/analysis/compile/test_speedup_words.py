"""Why a compiled model is slow, in words that match torch's count (#76, a ninth look): a
model whose frame after a break torch 2.13 skips (a generator, then `id()`) compiles one graph;
the note said "2 graph breaks split the model into 1 graphs, with Python running between
them". It now says how many graphs torch made and how many breaks the eager Python sits at."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_json

MODEL = """\
import torch
from torch import nn


def pieces(t):
    for part in t.split(2, dim=1):
        yield part.mean(1, keepdim=True)


class Blend(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 3)

    def forward(self, x):
        h = self.a(x)
        print("blend", tuple(h.shape))
        h = h + torch.cat(list(pieces(h)), 1).sum()
        h = h + id(h) % 1
        return self.b(h)


def get_model():
    torch.manual_seed(1)
    return Blend()


def get_inputs():
    return (torch.randn(4, 6),)
"""


def _torch_graphs(path: Path) -> int:
    import torch
    from torch._dynamo.testing import CompileCounter

    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    torch._dynamo.reset()
    counter = CompileCounter()
    model = torch.compile(namespace["get_model"](), backend=counter)
    model(*namespace["get_inputs"]())
    return counter.frame_count


def test_the_slow_speedup_note_counts_torchs_graphs(tmp_path: Path) -> None:
    path = tmp_path / "blend.py"
    path.write_text(MODEL)
    report, proc = run_json("explain", str(path), "--backend", "eager")
    assert proc.returncode == 0, proc.stderr[-2000:]
    graphs, breaks = report["summary"]["graphs"], report["summary"]["graph_breaks"]
    assert graphs == _torch_graphs(path) and breaks >= 1  # (2.13 skips the frame: 1; 2.15: 2)
    said = report["timings"]["notes"]
    assert not any("split the model" in n or "1 graphs" in n for n in said), said
    expected = (
        f"the model runs as {graphs} graph{'s' * (graphs != 1)} with eager Python at its "
        f"{breaks} graph break{'s' * (breaks != 1)}."
    )
    notes = [n for n in said if "eager Python at its" in n]
    if graphs == 1:  # no break's own cost to give (its frame skipped): this note says why
        assert notes == [expected], said
    else:
        assert notes in ([], [expected]), said
