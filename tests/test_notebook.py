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


# --- capture()'s own surface (#53) ----------------------------------------------------------


@pytest.mark.parametrize("bad", ["x-y", "7-3", "0-2", "", 7, (3, 7)])
def test_a_bad_profile_steps_is_a_diag_error_naming_the_fix(bad: object) -> None:
    """Before: a raw ValueError from int() ('x-y'), an AttributeError (7)."""
    import compilediag
    from compilediag.errors import DiagError, UsageError

    with pytest.raises(DiagError) as caught, compilediag.capture(profile_steps=bad):  # type: ignore[arg-type]
        pass
    assert isinstance(caught.value, UsageError) and caught.value.exit_code == 2
    message = str(caught.value)
    assert message.startswith(f"profile_steps={bad!r} is not a range of steps A-B")
    assert 'e.g. profile_steps="3-7"' in message and "\n" not in message
    with pytest.raises(UsageError, match=r"reset='yes' is not a bool: pass reset=True"):
        with compilediag.capture(reset="yes"):  # type: ignore[arg-type]
            pass


def test_help_shows_captures_real_parameters_and_what_they_do() -> None:
    """Before: `capture(**kwargs)`, a two-line docstring."""
    import inspect

    import compilediag

    params = inspect.signature(compilediag.capture).parameters
    assert list(params) == ["profile_steps", "reset"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    assert (params["profile_steps"].default, params["reset"].default) == (None, True)
    doc = inspect.getdoc(compilediag.capture) or ""
    for said in ('profile_steps: "A-B" times steps A to B', "reset: torch._dynamo.reset()",
                 "inside the `with` block", "DiagError"):  # fmt: skip
        assert said in doc, said


def test_an_empty_block_says_nothing_ran_in_it_and_the_fix() -> None:
    """Before: 'no process of the job loaded compilediag's bootstrap (a Python started with
    -S or -I ...)', of a block run in this very process."""
    torch = pytest.importorskip("torch")
    import compilediag

    model = torch.compile(torch.nn.Linear(4, 4), backend="eager")
    with compilediag.capture() as run:
        x = torch.randn(2, 4)
    model(x)  # after the block: not captured
    text, html = str(run), run._repr_html_()
    for shown in (" ".join(text.split()), re.sub(r"<[^>]+>", "`", html)):
        assert "nothing was compiled or called inside the capture() block" in shown
        assert "Call the compiled model inside the `with` block" in shown
        assert "bootstrap" not in shown and "-S or -I" not in shown
    (note,) = run.report().notes
    assert note.kind == "nothing_compiled"
    # a block that ran the model: its calls, no such note
    with compilediag.capture() as run:
        model(x)
    assert not run.report().notes and "the capture() block ran for" in str(run)


# --- a cell's break, and print(run), as in a real kernel (#53; tests/test_notebook_kernel.py
# runs them in one) ---------------------------------------------------------------------------

BRANCH_CELL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            h = h * 2
        return h.relu()
"""
BRANCH_FILE = "/tmp/ipykernel_4242/1234567.py"


@pytest.fixture
def branch_cell(monkeypatch: pytest.MonkeyPatch) -> dict:
    linecache.cache[BRANCH_FILE] = (
        len(BRANCH_CELL),
        None,
        BRANCH_CELL.splitlines(True),
        BRANCH_FILE,
    )
    namespace: dict = {}
    exec(compile(BRANCH_CELL, BRANCH_FILE, "exec"), namespace)
    shell = types.SimpleNamespace(compile=types.SimpleNamespace(_filename_map={BRANCH_FILE: 2}))
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    yield namespace
    linecache.cache.pop(BRANCH_FILE, None)


def test_a_cells_break_keeps_torchs_reason_gb_id_fix_and_count(branch_cell: dict) -> None:
    """Before: the cell's name went into the break's payload after torch had stated its
    md5; the parser dropped the payload as damaged, and the break read "graph break (this
    trace records only the function torch resumed after it)", fix "See the explanation and
    hints above", one break per resume frame whatever torch counted."""
    torch = pytest.importorskip("torch")
    import compilediag

    model = torch.compile(branch_cell["Net"](), backend="aot_eager")
    with compilediag.capture() as run:
        for n in (4, 4, 4, 3):  # the last batch recompiles forward: it breaks again
            model(torch.randn(n, 8)).sum().backward()
    report = run.report()
    (b,) = report.graph_breaks
    assert (b.file, b.line, b.code) == ("In[2]", 12, "if h.sum() > 0:")
    assert (b.reason, b.gb_id, b.cause) == (
        "Data-dependent branching",
        "GB0170",
        "data_dependent_branch",
    )
    assert "torch.where(cond, a, b)" in b.suggestion
    assert b.count == report.summary.graph_breaks == 2
    assert report.trace is not None and report.trace.damaged_payloads == 0


def test_renaming_a_cell_keeps_an_intact_payload_intact_and_a_damaged_one_damaged() -> None:
    import hashlib

    from compilediag.inprocess import renamed
    from compilediag.trace.parse import iter_records, payload_intact

    def record(payload: str, md5: str) -> str:
        head = ('V1126 08:50:17.096000 1 torch/_dynamo/x.py:1] {"artifact": {"name": '
                '"dynamo_graph_break_reason", "encoding": "string"}, "frame_id": 0, '
                f'"frame_compile_id": 0, "attempt": 0, "has_payload": "{md5}"}}\n')  # fmt: skip
        return head + "".join(f"\t{line}\n" for line in payload.split("\n"))

    good = 'File "/tmp/ipykernel_1/99.py", line 8, in forward'
    text = record(good, hashlib.md5(good.encode()).hexdigest()) + record(good, "0" * 32)
    out = renamed(text, {"/tmp/ipykernel_1/99.py": "In[2]"})
    intact, damaged = list(iter_records(out.splitlines(True)))
    assert intact.payload == 'File "In[2]", line 8, in forward\n' == damaged.payload
    assert payload_intact(intact) and not payload_intact(damaged)
    assert renamed(text, {}) == text


def test_print_run_in_jupyter_prints_text_not_html(
    cell: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a Jupyter kernel rich sends each Console's prints to the notebook as HTML, not to
    its file: before, str(run) was empty there and print(run) showed 42 HTML fragments."""
    import builtins

    torch = pytest.importorskip("torch")
    import compilediag

    ZMQInteractiveShell = type("ZMQInteractiveShell", (), {})  # what rich takes for Jupyter
    shown: list = []
    monkeypatch.setattr(builtins, "get_ipython", ZMQInteractiveShell, raising=False)
    monkeypatch.setitem(
        sys.modules, "IPython.display",
        types.SimpleNamespace(display=lambda *a, **k: shown.append(a), Markdown=object),
    )  # fmt: skip
    model = torch.compile(cell["Net"](), backend="aot_eager")
    with compilediag.capture() as run:
        model(torch.randn(4, 8)).sum().backward()
    text = str(run)
    assert not shown
    assert "1 graph break at 1 site" in text and "In[3]:12" in text
    assert "<pre" not in text and "<span" not in text
    assert '<p class="env">' in run._repr_html_()  # Jupyter's display: still HTML


def test_captures_kernel_window_lists_the_generated_kernels_that_ran() -> None:
    """capture() of an Inductor training loop: the kernel window after its steps lists the
    generated (C++) kernels the trace says Inductor made for it, as torch.profiler timed
    them (compilediag wraps each around its call), beside the library calls."""
    import torch

    import compilediag

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model)
    with compilediag.capture(profile_steps="3-5") as run:
        for _ in range(12):
            loss = (compiled(torch.randn(8, 16)) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
    report = run.report()
    made = {k.name for k in report.kernels if k.kind != "extern"}
    timed = {k.name for k in report.timings.kernels if k.kind == "generated"}
    assert made and timed == made, (made, timed)
    assert all(k.ms > 0 and k.calls >= 1 for k in report.timings.kernels if k.name in made)
    torch._dynamo.reset()
