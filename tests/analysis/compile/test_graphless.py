"""Compiles that made no graph: a helper whose first line breaks (a print) gets a compile id
of its own, and so does the rest of it after the break, and neither makes a graph. The
graphs' table has no row for them; the report names them under it, as many as torch's own
counters say (frames it compiled, less the graphs its backend was handed). And a model
file's `model` that is a function taking a tensor is the model itself, not its factory."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path

from tests.conftest import run_cli, run_json

MODEL = """\
import torch


def helper(x):
    print("scaling")
    return x


def forward(x):
    x = x * 2
    x = helper(x)
    return x + x.shape[0]


model = forward


def get_inputs():
    return (torch.randn(4),)
"""


def torch_counts(path: Path) -> tuple[int, int]:
    """torch's own: the frames Dynamo compiled, and the graphs its backend was handed."""
    import torch
    from torch._dynamo.testing import CompileCounter
    from torch._dynamo.utils import counters

    spec = importlib.util.spec_from_file_location("graphless_model", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch._dynamo.reset()
    counters.clear()
    backend = CompileCounter()
    # the print to a file of C's: pytest's capture is Python code, whose frames Dynamo
    # would count beside the model's
    with open(os.devnull, "w") as out, contextlib.redirect_stdout(out):
        torch.compile(module.forward, backend=backend)(*module.get_inputs())
    return counters["frames"]["total"], backend.frame_count


def test_a_compile_that_made_no_graph_is_named_under_the_graphs(tmp_path: Path) -> None:
    path = tmp_path / "printing.py"
    path.write_text(MODEL)
    frames, graphs = torch_counts(path)
    report, proc = run_json("explain", str(path), "--backend", "eager")
    assert proc.returncode == 0, proc.stderr
    assert len(report["graphs"]) == graphs
    assert len(report["graphless"]) == frames - graphs > 0
    shown = {g["compile_id"] for g in report["graphs"]}
    assert not shown & {g["compile_id"] for g in report["graphless"]}
    assert {g["frame"].split(",")[0] for g in report["graphless"]} == {"helper"}
    text = run_cli("explain", str(path), "--backend", "eager").stdout
    listed = text.split("\nGraphs")[1].split("\nTimings")[0]
    for g in report["graphless"]:
        assert f"{g['compile_id']} {g['frame']}" in " ".join(listed.split())
    assert "no graph from" in listed


def test_a_model_that_is_a_function_taking_a_tensor_is_compiled_not_called(
    tmp_path: Path,
) -> None:
    """`model = forward` with `def forward(x)`: explain compiles forward on get_inputs() (it
    read "the model failed without torch.compile: missing 1 required positional argument");
    without inputs, the error says to add them."""
    path = tmp_path / "no_inputs.py"
    path.write_text(MODEL.split("\n\ndef get_inputs")[0] + "\n")
    proc = run_cli("explain", str(path), "--backend", "eager")
    assert proc.returncode == 2
    assert "no inputs found" in proc.stderr and "get_inputs()" in proc.stderr
    assert "Traceback" not in proc.stderr
