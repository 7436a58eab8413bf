"""Compile time down to the user's function (#52): Dynamo's tracing by function, from torch's
own Dynamo profiler, checked by ablation: the helper taken out, compile time compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

MODEL = ROOT / "tests" / "fixtures" / "compile_cost" / "helper_blocks.py"


def _explain(tmp_path: Path, helper: str) -> dict:
    out = tmp_path / f"helper{helper}.json"
    proc = run_cli(
        "explain", str(MODEL), "--backend", "eager", "--no-timings", "--format", "json",
        "-o", str(out), env={"HELPER": helper},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_the_helper_is_named_as_the_top_tracing_cost_and_its_ablation_agrees(
    tmp_path: Path,
) -> None:
    import torch

    if not hasattr(torch._dynamo.config, "dynamo_profiler"):
        pytest.skip("this torch has no Dynamo profiler")
    with_helper = _explain(tmp_path, "1")
    tracing = with_helper["compile_time"]["tracing"]
    top = tracing["functions"][0]
    lines = MODEL.read_text().splitlines()
    assert (top["function"], top["line"]) == ("table", lines.index("def table(n):") + 1), top
    assert top["file"].endswith("helper_blocks.py") and top["share"] >= 0.5, top
    # the blocks' forward is traced once for each of the twelve
    block = lines.index("    def forward(self, x):") + 1
    assert any(f["line"] == block and f["calls"] == 12 for f in tracing["functions"]), tracing
    # tracing is Dynamo's phase: no more than it, and most of it here
    dynamo = with_helper["compile_time"]["dynamo_s"]
    assert 0.5 * dynamo <= tracing["total_s"] <= dynamo, (tracing["total_s"], dynamo)
    # the ablation: without the helper, Dynamo's time falls by about what it was said to cost
    without = _explain(tmp_path, "0")
    saved = dynamo - without["compile_time"]["dynamo_s"]
    assert 0.5 * top["total_s"] <= saved <= 1.5 * top["total_s"], (saved, top)
    assert all(f["function"] != "table" for f in without["compile_time"]["tracing"]["functions"])
    # the table names it under the compile line
    table = " ".join(run_cli("render", str(tmp_path / "helper1.json")).stdout.split())
    assert "tracing " in table and "table (tests/fixtures/compile_cost/helper_blocks.py:" in table
