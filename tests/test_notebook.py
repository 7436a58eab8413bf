"""`compilediag.capture()` in a notebook: a cell's code is named as IPython names it
(`In[3]`), the header says the backend and device the block compiled for, the backward
compile is in the compile time, nothing points to a command that needs a model file, and
kernel names wrap only between their words. IPython's own bookkeeping is what is read: a
cell is compiled under ipykernel's file name, its source put in linecache, and the shell's
`compile._filename_map` maps the file to the cell's number, as IPython does."""

from __future__ import annotations

import linecache
import re
import sys
import types

import pytest

CELL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        print("h", h.shape)
        return h.relu()
"""
CELL_FILE = "/tmp/ipykernel_4242/770895317.py"


@pytest.fixture
def cell(monkeypatch: pytest.MonkeyPatch) -> dict:
    linecache.cache[CELL_FILE] = (len(CELL), None, CELL.splitlines(True), CELL_FILE)
    namespace: dict = {}
    exec(compile(CELL, CELL_FILE, "exec"), namespace)
    shell = types.SimpleNamespace(compile=types.SimpleNamespace(_filename_map={CELL_FILE: 3}))
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    yield namespace
    linecache.cache.pop(CELL_FILE, None)


def test_a_capture_in_a_notebook_speaks_the_notebooks_words(cell: dict) -> None:
    torch = pytest.importorskip("torch")
    import compilediag

    model = torch.compile(cell["Net"](), backend="aot_eager")
    with compilediag.capture() as run:
        for _ in range(3):
            model(torch.randn(4, 8)).sum().backward()
    report = run.report()
    (b,) = report.graph_breaks
    assert (b.file, b.line) == ("In[3]", 12)  # before: 770895317.py:12
    assert b.code == 'print("h", h.shape)'
    text, html = str(run), run._repr_html_()
    for shown in (text, html):
        assert "770895317" not in shown and "ipykernel" not in shown
    # the header: torch, the device and the backend the block compiled for (before: "? · ?")
    e = report.environment
    assert (e.backend, e.device) == ("aot_eager", "cpu")
    assert "torch 2" in text and "cpu · aot_eager" in text
    assert "?" not in re.search(r'<p class="env">(.*?)</p>', html, re.S)[1]
    # the backward graphs compiled at the first backward(), inside the block
    assert report.compile_time.backward_s > 0
    assert "backward" in text
    # no pointer to a command that needs a model file, no TORCH_TRACE advice
    assert "dump-kernels" not in text and "TORCH_TRACE" not in text


def test_kernel_names_wrap_only_between_words() -> None:
    from compilediag.render.html import breakable

    shown = str(breakable("cpp_fused_add_mul_relu_0"))
    assert shown == "cpp_<wbr>fused_<wbr>add_<wbr>mul_<wbr>relu_<wbr>0"
    assert str(breakable("a<b")) == "a&lt;b"
