"""`compilediag report` on the jobs of tests/fixtures/jobs, recorded from real runs with the
oldest torch the package claims (2.6), 2.11 (the GPU machine's, run on its CPU) and the newest
(2.13) by tests/fixtures/record_traces.py:
export and AOTInductor runs, a DDP job that compiled nothing, ranks that run their graphs
in different orders, and an Inductor cache cold then warm. Where torch can answer on the
same inputs in this process without a compile, the test asks it."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, TRACES, compilediag_files, run_cli, run_json

JOBS = ROOT / "tests" / "fixtures" / "jobs"


def trace(version: str, name: str) -> str:
    """A recording's folder, or its file (gzipped where it is big)."""
    path = TRACES / version / name
    if path.is_dir():
        return str(path)
    plain = path.with_name(name + ".log")
    return str(plain if plain.exists() else path.with_name(name + ".log.gz"))


def expected_breaks_in(job: Path) -> int:
    """The one break line a job's docstring names ("... at line 29 ...")."""
    (line,) = re.findall(r"line (\d+)", job.read_text().split('"""')[1])
    return int(line)


def versions_with(name: str) -> list[str]:
    """Every recorded torch version that holds this job's trace."""
    return [p.name for p in sorted(TRACES.iterdir()) if Path(trace(p.name, name)).exists()]


def _release(version: str) -> tuple[int, int]:
    """`torch-2.15.0-cpu` -> (2, 15)"""
    major, minor = version.split("-")[1].split(".")[:2]
    return int(major), int(minor)


def export_error_line_from_torch() -> int:
    """The line torch.export names when it fails on the job's model (this torch)."""
    torch = pytest.importorskip("torch")
    path = JOBS / "export_error.py"
    namespace: dict = {"__name__": "export_error_model"}
    source = path.read_text().split("\ntry:")[0]  # the model, not the job's export call
    exec(compile(source, str(path), "exec"), namespace)
    with pytest.raises(Exception) as err:  # noqa: PT011 - whatever torch raises, it names a line
        torch.export.export(namespace["Branchy"](), (torch.randn(4, 8),))
    lines = re.findall(r'export_error\.py", line (\d+)|export_error\.py:(\d+)', str(err.value))
    return int(next(a or b for a, b in lines))


@pytest.mark.parametrize("version", versions_with("export_error"))
def test_a_failed_export_is_a_failure_at_torchs_line(version: str) -> None:
    report, proc = run_json("report", trace(version, "export_error"))
    assert proc.returncode == 4, proc.stderr
    assert "torch.export" in report["trace"]["produced_by"]
    (f,) = report["compile_failures"]
    assert f["by"] == "torch.export"
    assert Path(f["file"]).name == "export_error.py"
    assert f["line"] == export_error_line_from_torch()
    assert f["code"].strip() == "if h.sum() > 0:"
    assert proc.stderr.startswith("error: torch.export failed at")
    assert any(n["message"].startswith("This trace is from torch.export") for n in report["notes"])
    gated, proc = run_json("report", trace(version, "export_error"), "--fullgraph")
    assert gated["verdict"]["passed"] is False


@pytest.mark.parametrize("version", versions_with("aoti"))
def test_an_aotinductor_trace_lists_its_kernels(version: str) -> None:
    """The job AOT-compiles Linear(16, 32) -> ReLU -> Linear(32, 4): two matmuls that stay
    library calls (addmm) and the ReLU as a generated C++ kernel."""
    report, proc = run_json("report", trace(version, "aoti"))
    assert proc.returncode == 0, proc.stderr
    kinds = set(report["trace"]["produced_by"])
    assert "AOTInductor" in kinds and "torch.compile" not in kinds
    if _release(version) < (2, 15):  # 2.15's export writes nothing of its own to the trace
        assert "torch.export" in kinds
    generated = [k for k in report["kernels"] if k["kind"] != "extern"]
    library = [k for k in report["kernels"] if k["kind"] == "extern"]
    assert [k["ops"] for k in generated] == [["aten.relu"]]
    assert generated[0]["name"].startswith("cpp_fused_relu")
    assert [k["ops"] for k in library] == [["aten.addmm"], ["aten.addmm"]]
    assert report["summary"]["kernels"] == 1
    assert report["compile_failures"] == []
    (note,) = [n["message"] for n in report["notes"] if n["kind"] == "ahead_of_time"]
    assert "AOTInductor compiled 1 kernel ahead of time" in note


@pytest.mark.parametrize("version", versions_with("ddp_zero_graphs"))
def test_a_ddp_job_that_compiled_nothing_says_so_with_ddp_advice(version: str) -> None:
    """torch.compile(DDP(model)) (tests/fixtures/jobs/ddp_zero_graphs.py, 2 gloo ranks):
    Dynamo broke inside DDP's wrapper, so no graph was made on either rank."""
    report, proc = run_json("report", trace(version, "ddp_zero_graphs"), "--fullgraph")
    assert proc.returncode == 1
    assert report["summary"]["graphs"] == 0
    assert [r["summary"]["graphs"] for r in report["ranks"]] == [0, 0]
    assert report["notes"][0]["kind"] == "nothing_compiled"
    assert "DDP(torch.compile(model))" in report["notes"][0]["message"]
    assert report["graph_breaks"]
    for b in report["graph_breaks"]:
        # under the user's call of the compiled DDP module, labelled as DDP's own code
        assert (Path(b["file"]).name, b["line"]) == ("ddp_zero_graphs.py", 15)
        assert b["framework"] == "torch.nn.parallel (DDP)"
        assert "DDP(torch.compile(model))" in b["suggestion"]
        assert "custom op" not in b["suggestion"]
        # torch's own words name its file on the recording machine: as the report names
        # files (a twenty-fourth look: "`/tmp/.../site-packages/torch/_compile.py` should
        # not be traced", where the docs say a report names no machine path)
        assert "site-packages" not in json.dumps(b), b["explanation"]
    assert report["summary"]["unique_graph_breaks"] == 1


@pytest.mark.parametrize("version", versions_with("graph_order_diverge"))
def test_ranks_that_run_their_graphs_in_different_orders_diverge(version: str) -> None:
    """tests/fixtures/jobs/graph_order_diverge.py: the same two graphs on both ranks, run in
    opposite orders (torch logs graph_execution from 2.10)."""
    report, proc = run_json("report", trace(version, "graph_order_diverge"), "--fail-on-divergence")
    assert proc.returncode == 1
    orders = {r["rank"]: r["graph_order"] for r in report["ranks"]}
    assert orders == {0: ["0/0", "1/0", "0/0", "1/0"], 1: ["0/0", "1/0", "1/0", "0/0"]}
    (d,) = [d["message"] for d in report["divergence"] if d["kind"] == "graph_order"]
    assert f"rank 0: {orders[0]}" in d and f"rank 1: {orders[1]}" in d
    assert not any("graph_execution" in k for k in report["trace"]["not_analysed"])


@pytest.mark.parametrize("version", versions_with("graph_order_diverge"))  # 2.10 and later
def test_graph_execution_is_read_where_ranks_agree(version: str) -> None:
    report, _ = run_json("report", trace(version, "collectives_extra"))
    assert [r["graph_order"] for r in report["ranks"]] == [["0/0", "0/0"]] * 3
    assert not any(d["kind"] == "graph_order" for d in report["divergence"])


@pytest.mark.parametrize("version", versions_with("inductor_cache.cold"))
def test_cache_hit_and_miss_are_what_torch_logged(version: str) -> None:
    """tests/fixtures/jobs/inductor_cache.py run twice on one private cache folder."""
    cold, _ = run_json("report", trace(version, "inductor_cache.cold"))
    warm, _ = run_json("report", trace(version, "inductor_cache.warm"))
    caches = lambda r: r["compile_time"]["caches"]  # noqa: E731
    assert caches(cold).get("fx_graph_cache_miss") and not caches(cold).get("fx_graph_cache_hit")
    assert caches(warm).get("fx_graph_cache_hit") and not caches(warm).get("fx_graph_cache_miss")
    # the time the hit saved, by torch's record of it, is what the cold run's compile
    # took past Dynamo (the same program, the same machine, runs apart)
    ct = lambda r: r["compile_time"]  # noqa: E731
    backend = sum(ct(cold)[k] for k in ("aot_s", "inductor_s", "codegen_s", "backward_s"))
    assert ct(cold)["cache_saved_s"] == 0
    assert abs(ct(warm)["cache_saved_s"] - backend) <= 0.1 * backend, (ct(warm), backend)
    names = lambda r: sorted(k["name"] for k in r["kernels"])  # noqa: E731
    if warm["kernels"]:  # 2.11 and 2.13 log the generated code on a hit as well
        assert names(warm) == names(cold)
    else:  # a torch that logs none on a hit: said so, with the way to see them
        assert any(n["kind"] == "cache_gap" for n in warm["notes"])


@pytest.mark.parametrize("version", versions_with("export_error"))
def test_nothing_in_these_traces_is_unknown(version: str) -> None:
    for name in ("export_error", "aoti", "ddp_zero_graphs", "collectives_extra"):
        if not Path(trace(version, name)).exists():  # (2.11's AOTInductor job crashed)
            continue
        report, _ = run_json("report", trace(version, name))
        assert report["trace"]["unknown_records"] == {}, name
        assert report["trace"]["damaged_payloads"] == 0, name


def _job(name: str):
    """A job of tests/fixtures/jobs as a module (its `__main__` block does not run)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, JOBS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", versions_with("train_item"))
def test_a_training_scripts_trace_speaks_the_users_words(version: str) -> None:
    """A plain training loop traced with TORCH_TRACE (no INDUCTOR_PROVENANCE): the float
    `.item()` makes reaches the rest of forward as Dynamo's `___stack0`; the report names
    it as the user wrote it, the fix it gives removes the recompile in torch's own count,
    and the report says how to get kernels' user lines and where the full list is."""
    torch = pytest.importorskip("torch")
    from torch._dynamo.testing import CompileCounter

    report, proc = run_json("report", trace(version, "train_item"))
    assert proc.returncode == 0, proc.stderr
    (r,) = report["recompiles"]
    # (`reasons` keeps torch's own text; what the report says is in the user's words)
    assert "___stack" not in json.dumps([r["failed_guard"], r["failed_guards"], r["suggestion"]])
    assert r["failed_guard"].startswith("`scale` (line 16: `x.abs().max().item()`) changed")
    assert "capture_scalar_outputs = True" in r["suggestion"]
    counts = {}
    for config in ({}, {"capture_scalar_outputs": True}):
        torch._dynamo.reset()
        counter = CompileCounter()
        with torch._dynamo.config.patch(**config):
            step = torch.compile(_job("train_item").Net(), backend=counter)
            for _ in range(4):  # as the job: a new batch each step
                step(torch.randn(8, 16)).pow(2).mean().backward()
        counts[bool(config)] = counter.frame_count
    torch._dynamo.reset()
    assert counts[False] == report["summary"]["graphs"] == 3  # 0/0, 1/0 and its recompile 1/1
    assert counts[True] == 1, "the fix: no break, no recompile"
    assert any(
        n["kind"] == "no_provenance" and "INDUCTOR_PROVENANCE=1" in n["message"]
        for n in report["notes"]
    )
    # every generated kernel says what it computes: ops from its name, else its body
    assert all(k["ops"] and all(o.startswith("aten.") and not o[5:].isdigit() for o in k["ops"])
               for k in report["kernels"])  # fmt: skip
    table = run_cli("report", trace(version, "train_item"), "--format", "table").stdout
    assert "dump-kernels" not in table


@pytest.mark.parametrize("version", versions_with("break_in_loop"))
def test_a_frame_skipped_for_a_break_in_a_loop_names_that_break(version: str) -> None:
    """torch gave up forward (GB7000) because of the print inside its loop: the note names
    that print's line; with the print's fix applied, torch compiles the frame whole."""
    torch = pytest.importorskip("torch")
    from torch._dynamo.testing import CompileCounter

    report, proc = run_json("report", trace(version, "break_in_loop"))
    assert proc.returncode == 0, proc.stderr
    (note,) = [n["message"] for n in report["notes"] if n["kind"] == "skipped_frame"]
    assert "break_in_loop.py:17" in note and 'print("layer done")' in note and "GB7000" in note
    (b,) = report["graph_breaks"]
    assert b["line"] == 17 and "reorderable_logging_functions" in b["suggestion"]
    module = _job("break_in_loop")
    counts = []
    for config in ({}, {"reorderable_logging_functions": {print}}):
        torch._dynamo.reset()
        counter = CompileCounter()
        with torch._dynamo.config.patch(**config), torch.no_grad():
            torch.compile(module.Net(), backend=counter)(torch.randn(4, 16))
        counts.append(counter.frame_count)
    torch._dynamo.reset()
    assert counts == [report["summary"]["graphs"], 1] == [0, 1]


@pytest.mark.parametrize("version", versions_with("fasterrcnn"))
def test_a_library_models_findings_are_the_librarys(version: str) -> None:
    """torchvision's Faster R-CNN (a job that only builds and calls it): every frame torch
    skipped names the break inside it, at torchvision's line; a recompile inside
    torchvision's own calls is not told to mark torchvision's locals; no installed-library
    path is a machine path."""
    report, proc = run_json("report", trace(version, "fasterrcnn"))
    assert proc.returncode == 0, proc.stderr
    loops = [
        n["message"]
        for n in report["notes"]
        if n["kind"] == "skipped_frame" and "GB7000" in n["message"]
    ]
    assert loops and all("the graph break at torchvision/" in n for n in loops), loops
    inner = [r for r in report["recompiles"] if r["cause"] == "shape"]
    assert inner
    for r in inner:
        assert "mark_dynamic" not in r["suggestion"] and "torchvision's own code" in r["suggestion"]
    text = json.dumps(report)
    assert "site-packages" not in text and not compilediag_files(text)
    sites = {(b["library_frame"] or {}).get("file", "") for b in report["graph_breaks"]}
    assert sites and all(s.startswith("torchvision/") for s in sites), sites
    # said as torchvision's lines reached from the job's one, not "N findings at 1 site" (a
    # look); each line one torch's own break records name
    lines = {
        (b["library_frame"]["file"], b["library_frame"]["line"]) for b in report["graph_breaks"]
    }
    own = {(b["file"], b["line"]) for b in report["graph_breaks"]}
    shown = " ".join(run_cli("report", trace(version, "fasterrcnn")).stdout.split())
    assert (
        f"Graph breaks ({len(lines)} lines inside torchvision, reached from "
        f"{len(own)} line{'s' * (len(own) > 1)} of yours"
    ) in shown, shown[:2000]
    # a group of recompiles over several frames says whose a later value is (a look read
    # roi_align's "then boxes dim 0 changed 450 → 600", which was remove_small_boxes')
    (group,) = [r for r in report["recompiles"] if r["frame"] == "roi_align"]
    others = {
        r["frame"] for r in report["recompiles"] if r["failed_guard"].startswith("boxes dim 0")
    }
    block = shown.split("roi_align at torchvision/ops/roi_align.py", 1)[1].split(" fix ", 1)[0]
    then = block.split(" then ", 1)[1].split(" also in ", 1)[0]
    assert "(in " in then and all(f in then for f in others - {"roi_align"}), then
    path = Path(trace(version, "fasterrcnn"))
    recorded = (gzip.open(path, "rt") if path.suffix == ".gz" else path.open()).read()
    assert all(f'{f}", line {n}' in recorded or f"{f}:{n}" in recorded for f, n in lines)


def _records(path: Path, kind: str) -> int:
    """How many records of this kind torch wrote to one rank's trace file (its envelopes,
    read without compilediag)."""
    count = 0
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as fh:
        text = fh.read()
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            envelope = json.loads(line[start:])
        except ValueError:
            continue  # a payload line
        name = envelope.get("artifact", {}).get("name") if "artifact" in envelope else None
        count += kind in envelope or name == kind
    return count


@pytest.mark.parametrize("version", versions_with("compile_skew"))
def test_a_rank_that_compiled_longer_names_what_it_compiled_and_its_cache_misses(
    version: str,
) -> None:
    """tests/fixtures/jobs/compile_skew.py: rank 1 alone breaks at its print and recompiles
    for four more batch sizes, and starts with an empty cache where the others start warm.
    The finding on its compile time names the graphs it compiled that a rank of the
    median's time did not, with their seconds, and its FX-graph cache misses beside that
    rank's hits; the counts are those of torch's own records in each rank's file."""
    folder = Path(trace(version, "compile_skew"))
    files = {int(re.search(r"_rank_(\d+)_", p.name)[1]): p for p in folder.glob("*.log*")}
    graphs = {rank: _records(p, "dynamo_output_graph") for rank, p in files.items()}
    misses = {rank: _records(p, "fx_graph_cache_miss") for rank, p in files.items()}
    assert graphs[0] == graphs[2] and graphs[1] > graphs[0], graphs

    report, _ = run_json("report", str(folder))
    (found,) = [d["message"] for d in report["divergence"] if d["kind"] == "compile_time"]
    ranks = {r["rank"]: r for r in report["ranks"]}
    times = {rank: r["summary"]["compile_time_s"] for rank, r in ranks.items()}
    typical = min((0, 2), key=lambda r: abs(times[r] - sorted(times.values())[1]))
    extra = graphs[1] - graphs[typical]
    assert found.startswith("rank 1 compiled for"), found
    assert f"rank 1 compiled {extra} graphs rank {typical} did not" in found, found
    print_line = expected_breaks_in(JOBS / "compile_skew.py")
    assert f"forward, after line {print_line} (compile_skew.py:" in found, found
    own = ranks[1]["graphs"][-extra:]
    seconds = sum(g["compile_s"] for g in own)
    assert f"({seconds:.1f} s: " in found, found
    hits = _records(files[typical], "fx_graph_cache_hit")
    assert hits and misses[typical] == 0  # the job: ranks 0 and 2 start warm, rank 1 cold
    assert found.endswith(
        f"; its FX-graph cache missed {misses[1]} times, rank {typical}'s 0 "
        f"(rank {typical} hit {hits})"
    ), found
