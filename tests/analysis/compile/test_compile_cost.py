"""Compile time down to the user's function (#52): Dynamo's tracing by function, from torch's
own Dynamo profiler, checked by ablation: the helper taken out, compile time compared."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compilediag.report.words import seconds
from tests.conftest import ROOT, TRACES, run_cli

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

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


@pytest.mark.parametrize(
    "folder", sorted(TRACES.glob("*/graph_order_diverge")), ids=lambda p: p.parent.name
)
def test_a_cache_bypass_is_named_with_the_reason_torch_gave(folder: Path) -> None:
    """Traces recorded by tests/fixtures/jobs (each torch's own): every cache bypass record
    counted by its reason, as the record's payload states it (read here with json alone)."""
    expected: dict[str, dict[str, int]] = {}
    for log in sorted(folder.glob("*.log")):
        lines = log.read_text().splitlines()
        for i, line in enumerate(lines):
            match = re.search(r'"artifact": {"name": "(\w+)_cache_bypass"', line)
            if match and i + 1 < len(lines):
                why = json.loads(lines[i + 1].strip())["cache_bypass_reason"]
                reasons = expected.setdefault(match.group(1), {})
                reasons[why] = reasons.get(why, 0) + 1
    assert expected, "the trace holds no cache bypass"
    proc = run_cli("report", str(folder), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    ct = json.loads(proc.stdout)["compile_time"]
    assert ct["bypasses"] == expected
    table = " ".join(run_cli("report", str(folder)).stdout.split())
    (reason,) = expected["aotautograd"]
    assert f"AOTAutograd: {expected['aotautograd'][reason]} bypass ({reason})" in table


def test_a_frame_with_a_graph_break_compiles_alike_with_the_tracing_table() -> None:
    """torch's own profiler fails on a frame a graph break ends (root_tx None on 2.13-2.15):
    with compilediag's collector the same graphs compile (torch's CompileCounter), and the
    frame's tracing is still timed."""
    import torch
    from torch._dynamo.testing import CompileCounter

    from compilediag.harness.bootstrap._compilediag_runtime.tracing import TracingCost

    if not hasattr(torch._dynamo.config, "dynamo_profiler"):
        pytest.skip("this torch has no Dynamo profiler")

    def broken(x):
        x = x * 2
        print("between", end="\r")
        return x + 1

    counts = []
    for profiled in (False, True):
        torch._dynamo.reset()
        counter = CompileCounter()
        cost = TracingCost(torch)
        if profiled:
            assert cost.start()
        try:
            torch.compile(broken, backend=counter)(torch.ones(3))
        finally:
            cost.stop()
        counts.append((counter.frame_count, counter.op_count))
        if profiled:
            tracing = cost.summary()
            assert tracing is not None and tracing["total_s"] > 0
            named = [f["function"] for f in tracing["functions"]]
            assert named.count("broken") == 1, named
    assert counts[0] == counts[1], counts
    assert not torch._dynamo.config.dynamo_profiler  # put back


def test_regional_compilation_is_tried_and_at_least_halves_the_compile(tmp_path: Path) -> None:
    """explain --try-fixes on the model of twelve blocks: regional compilation (each block
    compiled, the rest eager) measured in a run of its own, the outputs equal."""
    out = tmp_path / "fixes.json"
    proc = run_cli(
        "explain", str(MODEL), "--backend", "aot_eager", "--no-timings", "--try-fixes",
        "--format", "json", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["target"]["repeated"] == {"path": "blocks", "cls": "Block", "count": 12}
    (fix,) = [f for f in report["verified_fixes"] if f["remedy"] == "regional compilation"]
    assert fix["verdict"] == "cuts compile time" and fix["outputs_match"] is True, fix
    assert fix["after"]["compile_s"] <= 0.5 * fix["before"]["compile_s"], fix
    assert fix["before"]["compile_s"] == report["compile_time"]["total_s"]
    assert fix["code"].startswith("for block in model.blocks:")


def test_regional_compilations_compile_is_measured_cold_and_warm(tmp_path: Path) -> None:
    """explain --try-fixes with Inductor on a transformer of twelve blocks: the model as it
    is and compiled block by block, each compiled with empty caches and again warm, in
    cache folders of their own (the user's untouched). Each cold compile is torch's own
    figure (its trace's compile time) and far above the warm one: the caches were empty
    and then used; regional compilation's cold compile is the lower; the words say both
    and where the gain is."""
    model = ROOT / "tests" / "fixtures" / "compile_cost" / "repeated_blocks.py"
    out = tmp_path / "fixes.json"
    proc = run_cli(
        "explain", str(model), "--no-timings", "--try-fixes", "--format", "json", "-o",
        str(out), timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    (fix,) = [f for f in report["verified_fixes"] if f["remedy"] == "regional compilation"]
    b, a = fix["before"], fix["after"]
    for counts in (b, a):
        assert counts["compile_s_warm"] < 0.6 * counts["compile_s_cold"], counts
    assert a["compile_s_cold"] <= 0.8 * b["compile_s_cold"], fix
    assert fix["verdict"] == "cuts compile time" and fix["outputs_match"] is True
    table = " ".join(run_cli("render", str(out)).stdout.split())
    said = (
        f"regional compilation: compile with empty caches {seconds(b['compile_s_cold'])} → "
        f"{seconds(a['compile_s_cold'])}, warm {seconds(b['compile_s_warm'])} → "
        f"{seconds(a['compile_s_warm'])}: the gain is in the"
    )
    assert said in table, table


def test_the_notes_say_what_cuts_the_compile_and_the_cache_advice_works(tmp_path: Path) -> None:
    """The notes of a compile: the helper that holds most of tracing (explain), and, for a
    trace whose kernels were all generated anew (recorded by tests/fixtures/jobs with
    2.14.1 and 2.15.0), the portable cache; then that advice applied, as a new machine would:
    the kernels saved after one process's compile load into another's empty cache, and
    its compile hits the FX graph cache (torch's own counter)."""
    import torch

    if hasattr(torch._dynamo.config, "dynamo_profiler"):
        notes = _explain(tmp_path, "1")["notes"]
        hot = [n["message"] for n in notes if n["kind"] == "compile_cost"]
        assert any("in table (tests/fixtures/compile_cost/helper_blocks.py:" in n for n in hot)
    for log in sorted(TRACES.glob("torch-2.1[45]*/clean_mlp.inductor.log")):
        report = json.loads(run_cli("report", str(log), "--format", "json").stdout)
        said = [n["message"] for n in report["notes"] if n["kind"] == "compile_cost"]
        assert any("torch.compiler.save_cache_artifacts()" in n for n in said), (log, said)
    program = (
        "import os, sys, torch\n"
        "from torch._dynamo.utils import counters\n"
        "saved = sys.argv[1]\n"
        "if os.path.exists(saved):\n"
        "    torch.compiler.load_cache_artifacts(open(saved, 'rb').read())\n"
        "f = torch.compile(lambda x: torch.relu(x) * 2)\n"
        "f(torch.randn(8))\n"
        "if not os.path.exists(saved):\n"
        "    open(saved, 'wb').write(torch.compiler.save_cache_artifacts()[0])\n"
        "print(counters['inductor']['fxgraph_cache_hit'])\n"
    )
    script = tmp_path / "cached.py"
    script.write_text(program)
    saved = tmp_path / "artifacts.bin"
    hits = []
    for machine in ("first", "fresh"):
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / machine)}
        proc = subprocess.run([sys.executable, str(script), str(saved)], env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        hits.append(int(proc.stdout.strip().splitlines()[-1]))
    assert hits == [0, 1], hits


@pytest.mark.parametrize(
    "log", sorted(TRACES.glob("*/clean_mlp.inductor.log")), ids=lambda p: p.parent.name
)
def test_each_graphs_compile_is_split_by_phase_and_they_add_up_to_the_compile(log: Path) -> None:
    """Per graph, the phases torch timed (Dynamo, AOTAutograd, Inductor, codegen, its
    backward's compile): each graph's add up to its own compile time, and every graph's to
    the report's phases (traces of each torch, recorded by tests/fixtures/jobs)."""
    report = json.loads(run_cli("report", str(log), "--format", "json").stdout)
    ct = report["compile_time"]
    parts = ("dynamo_s", "aot_s", "inductor_s", "codegen_s", "backward_s")
    for g in report["graphs"]:
        own = sum(g["phases"].get(p, 0.0) for p in parts) - g["phases"].get("backward_s", 0.0)
        assert own == pytest.approx(g["compile_time_s"], abs=1e-5), g
    for p in parts:
        summed = sum(g["phases"].get(p, 0.0) for g in report["graphs"])
        assert summed == pytest.approx(ct[p], abs=1e-4), p


def test_a_block_that_holds_the_models_compute_is_never_advised_out_of_the_compile(
    tmp_path: Path,
) -> None:
    """A transformer of 48 blocks compiled whole: the blocks' forward holds the most of
    Dynamo's tracing. Before: "keep it out of the graph with @torch.compiler.disable", which
    throws away the compile of the model's compute; now: keep it compiled, with what cuts
    tracing (a block compiled once, the caches). The helper of helper_blocks.py, whose
    code makes no graph node, is still advised out."""
    import torch

    if not hasattr(torch._dynamo.config, "dynamo_profiler"):
        pytest.skip("this torch has no Dynamo profiler")
    model = ROOT / "tests" / "fixtures" / "compile_cost" / "deep_blocks.py"
    out = tmp_path / "deep.json"
    proc = run_cli(
        "explain", str(model), "--backend", "eager", "--no-timings", "--format", "json",
        "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    top = report["compile_time"]["tracing"]["functions"][0]
    lines = model.read_text().splitlines()
    assert (top["function"], top["line"], top["calls"]) == (
        "forward",
        lines.index("    def forward(self, x):") + 1,
        48,
    )
    (hot,) = [
        n["message"]
        for n in report["notes"]
        if n["kind"] == "compile_cost" and "of its tracing" in n["message"]
    ]
    assert "in forward (tests/fixtures/compile_cost/deep_blocks.py:" in hot
    assert "torch.compiler.disable" not in hot and "keep it compiled" in hot, hot
    # (look 29: GAT's two layers of other shapes, each compiled, traced 4 times, not once)
    assert "once for all blocks of the same parameter and input shapes" in " ".join(hot.split())
    helper = _explain(tmp_path, "1")["notes"]
    (said,) = [
        n["message"] for n in helper if n["kind"] == "compile_cost" and "in table (" in n["message"]
    ]
    assert "@torch.compiler.disable" in said
