"""Ready to serve under CUDA graphs (#69, point 4): the padded classifier's stream served
with mode="reduce-overhead" on a GPU. Each figure against torch's own count in a fresh
process without compilediag (tests/fixtures/serving/cuda_graphs_side.py: torch's CUDAGraph
class counted, each capture and each replay):

- the CUDA graphs the stream records, called as the serving pass calls it;
- the chosen plan's warm-up (every size it records, each twice), then the stream through the
  plan's code as pasted: no request runs without a CUDA graph;
- what the plan's words say of a size its warm-up did not hold: its first call runs
  without one.

The plan's code and words are checked on the CPU too, from the report an H200 made."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compilediag.analysis.serving.code import plan_code
from compilediag.render import render
from compilediag.report.model import Report
from compilediag.report.serving import Plan, PlanDim
from tests.conftest import ROOT, run_json

SERVING = ROOT / "tests" / "fixtures" / "serving"
CLASSIFIER = ROOT / "sample_models" / "padded_classifier.py"
SAVED = ROOT / "tests" / "fixtures" / "reports" / "serving_cudagraphs_h200_torch2.11.json"


def _torch(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "cuda_graphs_side.py", *args], capture_output=True, text=True,
        timeout=600, cwd=SERVING,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
@pytest.mark.full
def test_the_streams_cuda_graphs_and_the_plans_warm_up_are_torchs_count(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    report, proc = run_json(
        "recompiles", str(CLASSIFIER), "--device", "cuda", "--mode", "reduce-overhead",
        "--no-numerics", "--no-cold-start", timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = report["serving"]
    c = s["cuda_graphs"]
    side = _torch("stream", str(CLASSIFIER), "-", "reduce-overhead")
    assert c["stream"]["recorded"] == side["recorded"] > 0
    assert c["replayed"]["recorded"] == side["recorded_replayed"]
    assert side["captures"] == side["recorded_replayed"] + 1  # the manager's own, never replayed
    # the plan's warm-up holds every size it records: after it, none runs without one
    code = tmp_path / "plan.py"
    code.write_text(s["plan"]["code"])
    assert c["after_warmup"] == [] and c["recorded_after_warmup"] == []
    pasted = _torch("plan", str(CLASSIFIER), str(code), "-")
    assert pasted["without"] == [] and pasted["raised"] == []
    # a size the warm-up did not hold (7): its first call runs without a CUDA graph, as the
    # plan's words say of a plan that records one per size
    new = _torch("plan", str(CLASSIFIER), str(code), str(SERVING / "classifier_new_sizes.jsonl"))
    assert new["without"] == [2], new
    if s["plan"]["kind"] != "bucket":
        assert any("a size its warm-up did not hold" in x for x in _chosen(report))


@pytest.mark.gpu
@pytest.mark.full
def test_a_graph_torch_runs_without_cuda_graphs_is_said_with_torchs_reason() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    report, proc = run_json(
        "recompiles", str(SERVING / "mutated_input.py"), "--device", "cuda", "--mode",
        "reduce-overhead", "--no-numerics", "--no-cold-start", timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    c = report["serving"]["cuda_graphs"]
    assert c["stream"]["skipped"] >= 1 and c["stream"]["recorded"] == 0, c
    assert any("mutated" in why for why in c["skip_reasons"]), c["skip_reasons"]


def _chosen(report: dict) -> list[str]:
    from compilediag.render.table.serving import chosen_lines

    return chosen_lines(Report.from_dict(report).serving)  # type: ignore[arg-type]


def test_the_plans_warm_up_calls_each_size_twice_under_cuda_graphs() -> None:
    """A size's first call under CUDA graphs warms up, its second records: the pasted
    warm-up calls each twice there, once elsewhere."""
    plan = Plan("mark_dynamic", dims=[PlanDim(0, 1, 5, 45)])
    warm = [[[4, 5]], [[4, 9]]]
    graphs = plan_code(plan, {"mode": "reduce-overhead"}, ["ids"], ["int64"], warm, "cuda")
    assert "    for _ in range(2):" in graphs and "a call for each size its CUDA graphs" in graphs
    for kwargs, device in (({"mode": "reduce-overhead"}, "cpu"), ({}, "cuda")):
        once = plan_code(plan, kwargs, ["ids"], ["int64"], warm, device)
        assert "range(2)" not in once
    compile(graphs, "plan.py", "exec")  # it parses


def test_the_cuda_graph_section_reads_from_its_fields() -> None:
    """The H200's report (bench/gpu_cudagraphs.sh): the stream's CUDA graphs per Inductor
    graph, the plans' column, the warm-up's check; every figure from the JSON."""
    data = json.loads(SAVED.read_text())
    report = Report.from_dict(data)
    assert json.loads(json.dumps(report.to_dict())) == data  # it round-trips
    c = data["serving"]["cuda_graphs"]
    table = " ".join(render(report, "table", width=100).split())
    g = c["stream"]
    assert (
        f"CUDA graphs (mode 'reduce-overhead'): {g['recorded']} graphs recorded for "
        f"{g['sizes']} input sizes" in table
    )
    assert f"{g['pool_mb']:g} MB reserved in their private pool" in table
    for p in data["serving"]["plans"]:
        assert f"{p['cuda_graphs']['recorded']} ({p['cuda_graphs']['pool_mb']:g} MB)" in table
    assert "after it, ran without one: none; recorded one: none" in table
    markdown = render(report, "markdown")
    assert "| CUDA graphs |" in markdown and "CUDA graphs (mode 'reduce-overhead')" in markdown
    assert "CUDA graphs (mode &#39;reduce-overhead&#39;)" in render(report, "html") or (
        "CUDA graphs (mode 'reduce-overhead')" in render(report, "html")
    )


HELD_OUT = ROOT / "tests" / "fixtures" / "reports" / "serving_held_out_h200_torch2.11.json"
DECODER = SERVING / "decoder.py"


def _decoder_streams(tmp_path: Path) -> tuple[Path, Path]:
    """bench/gpu_serving_held_out.sh's streams: 120 requests, batch 1-8, lengths 8-136."""
    sys.path.insert(0, str(SERVING))
    try:
        import streams  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(SERVING))
    return tuple(  # type: ignore[return-value]
        streams.write(
            tmp_path / f"{seed}.jsonl", streams.skewed(seed, 120, tuple(range(1, 9)), 8, 30, 136)
        )
        for seed in (11, 12)
    )


@pytest.mark.gpu
@pytest.mark.full
def test_the_decoders_plan_holds_a_stream_it_was_not_fitted_to_under_cuda_graphs(
    tmp_path: Path,
) -> None:
    """#75's done-when on a GPU: the masked decoder under reduce-overhead; the plan's code,
    pasted, serves a second stream of the same distribution from a caller under no_grad:
    at most 2% of its requests without a CUDA graph, no capture after the warm-up, none
    raised (torch's CUDAGraph class counted); its padding kept the outputs."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    stream, apart = _decoder_streams(tmp_path)
    report, proc = run_json(
        "recompiles", str(DECODER), "--requests", str(stream), "--device", "cuda", "--mode",
        "reduce-overhead", "--no-numerics", "--no-cold-start", timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = report["serving"]
    code = tmp_path / "plan.py"
    code.write_text(s["plan"]["code"])
    side = _torch("plan", str(DECODER), str(code), str(apart))
    assert len(side["without"]) <= 0.02 * 120 and side["raised"] == [], side
    assert side["captured_after_warmup"] == 0
    bucket = next(p for p in s["plans"] if p["kind"] == "bucket")
    assert bucket["padding"]["changed"] == 0


def test_the_h200s_held_out_counts_chose_buckets_over_marks() -> None:
    """The H200's report (bench/gpu_serving_held_out.sh; torch 2.11): under CUDA graphs a
    size the marks' warm-up did not hold ran without one, so the marks held 6 of the 36
    held-out requests and buckets all 36; buckets were chosen by that count, their padding
    measured to keep the outputs, their trade-off said, and the words are the fields'."""
    data = json.loads(HELD_OUT.read_text())
    s = data["serving"]
    plans = {p["kind"]: p for p in s["plans"]}
    marks, buckets = plans["mark_dynamic"], plans["bucket"]
    h = marks["held_out"]
    missed = set(h["raised"]) | set(h["without_cuda_graph"]) | set(h["recorded_cuda_graph"])
    assert h["requests"] == 36 and len(missed) == 30
    assert buckets["held_out"]["requests"] == 36 and not buckets["held_out"]["without_cuda_graph"]
    assert s["plan"]["kind"] == "bucket" and buckets["padding"]["changed"] == 0
    assert s["why_plan"].startswith("buckets: its warm-up held 36 of the 36 held-out requests")
    assert "mark_dynamic 6" in s["why_plan"]
    text = render(Report.from_dict(data), "table", width=200)
    assert "mark_dynamic            2   1.86 s               0   6 of 36" in text
    sizes = [o["buckets"] for o in buckets["options"]]
    assert sizes == sorted(sizes) and 4 in sizes
    assert "4 (these): +196%" in text and "a request above the largest runs eager: 0 of" in text
