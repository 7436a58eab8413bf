"""`compilediag report` on traces made elsewhere: a plain TORCH_TRACE run, and every rank
of a real 2-process torchrun job (gloo on CPU)."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, TRACES, run_cli, run_json, trace_sets
from tests.test_paths import _findings
from tests.trace.test_trace_truth import versions_with

FIXTURES = ROOT / "tests" / "fixtures"


def traced(cmd: list[str], trace: Path) -> None:
    env = {**os.environ, "TORCH_TRACE": str(trace)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]


def key_breaks(report: dict) -> list[tuple]:
    return sorted((Path(b["file"]).name, b["line"], b["reason"]) for b in report["graph_breaks"])


@pytest.mark.parametrize("sample", ["graph_breaks.py", "changing_float.py"])
def test_plain_trace_gives_the_same_findings_as_explain(sample: str, tmp_path: Path) -> None:
    traced([sys.executable, str(FIXTURES / "plain_run.py"), f"sample_models/{sample}"], tmp_path)
    from_trace, proc = run_json("report", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    explained, _ = run_json("recompiles", f"sample_models/{sample}", "--backend", "eager")
    assert key_breaks(from_trace) == key_breaks(explained)
    guards = lambda r: [x["failed_guard"] for x in r["recompiles"]]  # noqa: E731
    assert guards(from_trace) == guards(explained)
    assert from_trace["timings"] is None, "absent, not zero"
    assert from_trace["environment"]["source"] == "trace"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_rank_torchrun_divergence_is_found(tmp_path: Path) -> None:
    traced(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
         str(FIXTURES / "diverging_ranks.py")],
        tmp_path,
    )  # fmt: skip
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and all("rank_" in f for f in files), files
    report, proc = run_json("report", str(tmp_path), "--fail-on-divergence")
    assert proc.returncode == 1
    ranks = {r["rank"]: r for r in report["ranks"]}
    assert set(ranks) == {0, 1}
    assert ranks[0]["summary"]["unique_graph_breaks"] == 0
    assert ranks[1]["summary"]["unique_graph_breaks"] == 1
    assert any(
        d["message"].startswith("only rank 1 breaks at diverging_ranks.py:20")
        for d in report["divergence"]
    )
    (b,) = report["graph_breaks"]
    assert (Path(b["file"]).name, b["line"]) == ("diverging_ranks.py", 20)
    table = run_cli("report", str(tmp_path))
    assert table.returncode == 0 and "Ranks diverge" in table.stdout


def test_damaged_traces(tmp_path: Path) -> None:
    good = FIXTURES / "traces" / "torch-2.13.0-cpu" / "graph_breaks.eager.log"
    lines = good.read_text().splitlines(keepends=True)
    (tmp_path / "t.log").write_text(
        "".join(lines[: len(lines) * 2 // 3]) + "\x00garbage\nnot a record\n"
    )
    report, proc = run_json("report", str(tmp_path))
    assert proc.returncode == 0
    assert any(
        n["kind"] == "damaged_trace" and "unreadable lines were skipped" in n["message"]
        for n in report["notes"]
    )
    assert report["graph_breaks"], "what was complete is still reported"
    one = tmp_path / "one"  # (a look: "1 unreadable lines were skipped")
    one.mkdir()
    (one / "t.log").write_text("".join(lines) + "not a record\n")
    report, proc = run_json("report", str(one))
    assert proc.returncode == 0
    said = [n["message"] for n in report["notes"] if n["kind"] == "damaged_trace"]
    assert said and said[0].startswith("1 unreadable line was skipped"), said
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "x.log").write_bytes(os.urandom(5000))
    proc = run_cli("report", str(junk))
    assert proc.returncode == 2 and "not a PyTorch structured trace" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ranks_come_from_file_names_and_empty_files_are_not_ranks(tmp_path: Path) -> None:
    """Two rank files, an empty .log and an unrelated .txt: two ranks, named by the files
    (`rank_5`, `rank_7`), the other two listed as ignored, and no divergence."""
    import shutil

    from tests.conftest import fixture_trace

    src = fixture_trace("graph_breaks.eager")
    shutil.copy(src, tmp_path / "dedicated_log_torch_trace_rank_5_ab.log")
    shutil.copy(src, tmp_path / "dedicated_log_torch_trace_rank_7_cd.log")
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "notes.txt").write_text("run started\nloss 0.3\n")
    report, proc = run_json("report", str(tmp_path), "--fail-on-divergence")
    assert proc.returncode == 0, proc.stdout
    assert [r["rank"] for r in report["ranks"]] == [5, 7]
    assert [r["label"] for r in report["ranks"]] == ["rank 5", "rank 7"]
    assert sorted(report["trace"]["ignored_files"]) == ["empty.log", "notes.txt"]
    assert report["divergence"] == []
    assert report["environment"]["files"] == 2


@pytest.mark.parametrize("version", versions_with("backend_failure"))
def test_a_trace_with_a_failed_compile_fails(version: str) -> None:
    """A job's trace (tests/fixtures/jobs/backend_failure.py) whose backend raised: the
    failure is a finding at the user's frame, the run exits 4, and --fullgraph fails."""
    trace = str(TRACES / version / "backend_failure.log")
    report, proc = run_json("report", trace, "--fullgraph")
    assert proc.returncode == 4
    (f,) = report["compile_failures"]
    assert f["fail_type"] == "BackendCompilerFailed"
    assert "RuntimeError: lowering failed" in f["reason"]
    assert f["file"].endswith("jobs/backend_failure.py")
    assert report["summary"]["graphs"] == 0  # torch installed none (CompileCounter: 0)
    assert report["verdict"]["passed"] is False
    assert proc.stderr.startswith("error: torch.compile failed")


@pytest.mark.parametrize("version", versions_with("explicit_graph_break"))
def test_an_explicit_graph_break_is_a_break_with_its_own_fix(version: str) -> None:
    trace = str(TRACES / version / "explicit_graph_break.log")
    report, proc = run_json("report", trace, "--fullgraph")
    assert proc.returncode == 1
    (b,) = report["graph_breaks"]
    # torch numbers its break types from 2.8 on (graph_break_registry.json)
    gb_id = None if version.startswith("torch-2.6.") else "GB0025"
    assert (b["line"], b["gb_id"], b["cause"]) == (9, gb_id, "explicit_graph_break")
    assert "remove the torch._dynamo.graph_break() call" in b["suggestion"]
    assert report["summary"]["recompiles"] == 2  # two frames, each compiled for batch 2 and 4


@pytest.mark.parametrize(
    "folder", [p / "collectives_diverge" for p in trace_sets() if (p / "collectives_diverge").is_dir()],
    ids=lambda p: p.parent.name,
)  # fmt: skip
def test_ranks_whose_collective_schedules_differ_diverge(folder: Path) -> None:
    """Two gloo ranks (tests/fixtures/jobs/collectives_diverge.py): rank 1 breaks between its
    two all_reduces, so Inductor schedules them over two graphs; named on each side."""
    report, proc = run_json("report", str(folder), "--fail-on-divergence")
    assert proc.returncode == 1
    assert [r["label"] for r in report["ranks"]] == ["rank 0", "rank 1"]
    assert any(
        d["message"].startswith("only rank 1 breaks at collectives_diverge.py:")
        for d in report["divergence"]
    )
    if not any("inductor_collective_schedule" in f.read_text() for f in folder.iterdir()):
        # torch 2.6 logs no collective schedule: the breaks diverge, nothing more is claimed
        assert not any(d["kind"] == "collectives" for d in report["divergence"])
        return
    (coll,) = [d["message"] for d in report["divergence"] if d["kind"] == "collectives"]
    assert "rank 0: ['0/0: all_reduce_, wait_tensor, all_reduce_, wait_tensor']" in coll
    assert "rank 1: ['0/0: all_reduce_, wait_tensor', '1/0: all_reduce_, wait_tensor']" in coll
    assert not any(d["kind"] == "cache_use" for d in report["divergence"])


def test_a_gzipped_trace_is_read_as_the_trace_it_holds(tmp_path: Path) -> None:
    """A rank's file kept gzipped (Mask R-CNN's, recorded with torch 2.14.1) reports as its
    unpacked file does, with torch's counts from the same run; one cut short is a usage
    error that names it, never a traceback or click's bare "Aborted!"."""
    zipped = FIXTURES / "traces" / "torch-2.14.1-cpu" / "maskrcnn.log.gz"
    counts = json.loads((zipped.parent / "manifest.json").read_text())["maskrcnn"]["torch_counts"]
    plain = tmp_path / "maskrcnn.log"
    plain.write_bytes(gzip.decompress(zipped.read_bytes()))
    (a, pa), (b, pb) = run_json("report", str(zipped)), run_json("report", str(plain))
    assert pa.returncode == pb.returncode == 0
    assert a["summary"]["recompiles"] == counts["recompiles_log"]
    assert _findings(a) == _findings(b)
    cut = tmp_path / "cut" / "rank_0.log.gz"
    cut.parent.mkdir()
    cut.write_bytes(zipped.read_bytes()[:20000])
    proc = run_cli("report", str(cut.parent))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {cut} could not be read: ") and "gunzip" in proc.stderr
    assert "Traceback" not in proc.stderr and "Aborted" not in proc.stderr
