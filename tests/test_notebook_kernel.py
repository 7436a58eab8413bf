"""`compilediag.capture()` in a real Jupyter kernel (nbclient driving ipykernel), as a
notebook user runs it (#53): a model defined in a cell that breaks at a data-dependent
branch, trained inside `with compilediag.capture() as run:`, then `print(run)`.

The break must read as it does when the same code runs as a script file: its reason, GB
id and torch.where fix, and as many breaks as torch's own graph_breaks log counts. Before:
the cell's break payloads were renamed to `In[2]` after torch had stated their md5, the
parser dropped them as damaged, and the report fell back to "graph break (this trace
records only the function torch resumed after it)", "See the explanation and hints
above", 1 break against torch's 2; `print(run)` came out as 42 HTML fragments (rich's
Consoles wrote to the notebook, not to the text)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# the whole suite's (`pytest --full`): end-to-end runs, tens of seconds each on 2 cores
pytestmark = pytest.mark.full

MODEL = """\
class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if h.sum() > 0:  # a graph break: data-dependent branching
            h = h * 2
        return self.fc2(h)
"""
BREAK_LINE = (
    MODEL.splitlines().index("        if h.sum() > 0:  # a graph break: data-dependent branching")
    + 1
)
IMPORTS = (
    "import json\nimport logging\n\nimport torch\nfrom torch import nn\n\nimport compilediag\n"
)
# batches of 8, then one of 5: forward recompiles, and breaks once in each compile
TRAIN = """\
torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend="aot_eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batches = [torch.randn(8, 16) for _ in range(5)] + [torch.randn(5, 16)]
with compilediag.capture() as run:
    for x in batches:
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
"""
FIELDS = """\
print(json.dumps([
    {"file": b.file, "line": b.line, "reason": b.reason, "gb_id": b.gb_id, "cause": b.cause,
     "suggestion": b.suggestion, "count": b.count}
    for b in run.report().graph_breaks
] + [run.report().summary.graph_breaks]))
"""
# torch's own count of the same code: its graph_breaks log, as torch_counts.py reads it
TORCH_COUNT = """\
class Breaks(logging.Handler):
    count = 0

    def emit(self, record):
        msg = record.getMessage()
        Breaks.count += "Graph break" in msg and "Graph Break Reason" in msg


torch._logging.set_logs(graph_breaks=True)
logging.getLogger("torch._dynamo").addHandler(Breaks())
logging.getLogger("torch._dynamo").propagate = False
torch._dynamo.reset()
torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend="aot_eager")
for x in [torch.randn(8, 16) for _ in range(5)] + [torch.randn(5, 16)]:
    compiled(x).square().mean().backward()
print(json.dumps(Breaks.count))
"""


def _stdout(cell) -> str:
    """What a cell printed (torch's logs go to stderr)."""
    return "".join(
        o.get("text", "") for o in cell.outputs
        if o.output_type == "stream" and o.get("name") == "stdout"
    )  # fmt: skip


@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> list:
    """The notebook's cells, run in a real ipykernel; skipped where none can start."""
    pytest.importorskip("torch")
    nbformat = pytest.importorskip("nbformat", reason="pip install nbformat (the dev extra)")
    nbclient = pytest.importorskip("nbclient", reason="pip install nbclient (the dev extra)")
    pytest.importorskip("ipykernel", reason="pip install ipykernel (the dev extra)")
    cells = [IMPORTS, MODEL, TRAIN, "print(run)", "run", FIELDS, TORCH_COUNT]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    where = tmp_path_factory.mktemp("notebook")
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(where)}}
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError:
        raise  # the kernel ran, a cell failed: a failure of ours, not of the machine
    except Exception as e:  # no kernel: ipykernel can't start here
        pytest.skip(f"no Jupyter kernel starts here: {type(e).__name__}: {e}")
    return nb.cells


@pytest.fixture(scope="module")
def as_script(tmp_path_factory: pytest.TempPathFactory) -> list:
    """The same code as a script file through capture(): the fields a break should have."""
    pytest.importorskip("torch")
    script = tmp_path_factory.mktemp("script") / "train.py"
    script.write_text("\n".join([IMPORTS, MODEL, TRAIN, FIELDS]))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_cells_break_reads_as_the_same_code_as_a_script(notebook: list, as_script: list) -> None:
    *breaks, total = json.loads(_stdout(notebook[5]).strip().splitlines()[-1])
    *script_breaks, script_total = as_script
    (b,) = breaks
    (s,) = script_breaks
    assert (b["file"], b["line"]) == ("In[2]", BREAK_LINE)
    assert Path(s["file"]).name == "train.py"
    # before: "graph break (this trace records only the function torch resumed after it)",
    # no GB id, cause "other", fix "See the explanation and hints above, ..."
    assert b["reason"] == s["reason"] == "Data-dependent branching"
    assert b["gb_id"] == s["gb_id"] == "GB0170"
    assert b["cause"] == s["cause"] == "data_dependent_branch"
    assert b["suggestion"] == s["suggestion"]
    assert "torch.where(cond, a, b)" in b["suggestion"]
    assert "See the explanation and hints above" not in b["suggestion"]
    # as many breaks as torch's own log counts (before: 1 against torch's 2)
    torch_count = json.loads(_stdout(notebook[6]).strip())
    assert torch_count == 2
    assert b["count"] == total == s["count"] == script_total == torch_count


def test_print_run_in_a_notebook_prints_the_table_as_one_text(notebook: list) -> None:
    """Before: 42 display_data outputs of HTML, one for each thing rich printed."""
    printed = notebook[3].outputs
    assert [(o.output_type, o.get("name")) for o in printed] == [("stream", "stdout")]
    text = printed[0]["text"]
    assert "<pre" not in text and "<span" not in text and "\x1b[" not in text
    assert "2 graph breaks at 1 site" in text
    assert f"In[2]:{BREAK_LINE}" in text and "Data-dependent branching" in text
    assert "torch.where(cond, a, b)" in text
    # `run` as a cell's value still shows as the HTML report
    (shown,) = notebook[4].outputs
    assert shown.output_type == "execute_result" and "<" in shown["data"]["text/html"]
