"""Budgets and summary figures of a multi-rank job, per rank (#37): ranks compile side by
side, so a per-process budget judges the worst rank and names it, and the summary gives
what one rank compiled (the worst rank's figures and their spread), sums only as totals.
Every figure is checked against the truth read independently: each rank's own report,
built from its trace file alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compilediag.analysis.build import build_report
from compilediag.analysis.ranks.fold import report_from_traces
from compilediag.render import render, seconds
from compilediag.report.model import (
    PER_RANK,
    SCHEMA_VERSION,
    Environment,
    Report,
    Summary,
    TargetInfo,
)
from compilediag.report.vocabulary import Source
from compilediag.trace.parse import parse_path
from tests.conftest import ROOT, TRACES, run_cli, run_json

EIGHT = TRACES / "torch-2.13.0-cpu" / "eight_ranks"  # 8 gloo ranks; rank 5 alone breaks
# one rank of it: 6.8 s of compile time, 2 graphs, 1 recompile
ONE = next(EIGHT.glob("*_rank_0_*.log"))
SAVED_V3 = ROOT / "tests" / "fixtures" / "reports" / "schema3_eight_ranks.json"


def alone(path: Path) -> Summary:
    """A rank's own summary: its trace file built into a report by itself."""
    (log,) = parse_path(path)
    env = Environment(source=Source.TRACE)
    return build_report([log], None, TargetInfo(path=str(path)), environment=env).summary


def truth(folder: Path) -> dict[str, Summary]:
    """Each rank's own summary, by its label (`rank N`, from the file name)."""
    return {f"rank {log.rank}": alone(Path(log.path)) for log in parse_path(folder)}


@pytest.fixture(scope="module")
def identical(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,024 ranks that each compiled what rank 0 of the 8-rank recording did (6.8 s):
    the job of issue #37, whose summed compile time failed `--max-compile-time 60`."""
    folder = tmp_path_factory.mktemp("identical")
    for n in range(1024):
        (folder / f"dedicated_log_torch_trace_rank_{n}_x.log").symlink_to(ONE)
    return folder


def test_a_budget_every_rank_meets_passes_however_many_ranks(
    identical: Path, tmp_path: Path
) -> None:
    own = alone(ONE)
    assert own.compile_time_s < 60 < 1024 * own.compile_time_s  # the sum would fail
    assert own.recompiles >= 1 and 1024 * own.recompiles > own.recompiles
    # a one-process baseline: each rank is compared with what one process compiled
    base = tmp_path / "one.json"
    base.write_text(run_cli("report", str(ONE), "--format", "json").stdout)
    out = tmp_path / "job.json"
    proc = run_cli(
        "report", str(identical), "--format", "json", "-o", str(out), "--baseline", str(base),
        "--max-compile-time", "60", "--max-recompiles", str(own.recompiles),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    rules = {r["name"]: r for r in report["verdict"]["rules"]}
    time, recompiles = rules["max-compile-time"], rules["max-recompiles"]
    assert (time["value"], time["passed"]) == (own.compile_time_s, True)
    assert (recompiles["value"], recompiles["passed"]) == (own.recompiles, True)
    assert rules["baseline: graphs"]["value"] == own.graphs  # not 1024 times it
    assert not report["verdict"]["regressions"], report["verdict"]["regressions"]
    # the summary: one rank's figures, the sums named as totals
    s = report["summary"]
    assert s["ranks"] == 1024
    for name in PER_RANK:
        figure = getattr(own, name)
        spread = s["per_rank"][name]
        assert s[name] == spread["min"] == spread["median"] == spread["max"] == figure, name
    assert s["total_graphs"] == 1024 * own.graphs
    assert s["total_compile_time_s"] == pytest.approx(1024 * own.compile_time_s, abs=1e-3)
    # in words: the verdict and the headline say per rank, and what is a total says so
    table = run_cli("render", str(out)).stdout
    assert (
        f"ok   max-compile-time: each of 1024 ranks compiled for {own.compile_time_s:.2f} s"
        in table
    )
    counts = " ".join(table.splitlines()[2:4])
    assert "each of 1024 ranks: 2 graphs" in counts
    assert f"compile {seconds(own.compile_time_s)} a rank" in counts
    assert (
        f"{seconds(1024 * own.compile_time_s)} of compile work over 1024 ranks, side by side"
        in counts
    )


def test_a_budget_one_rank_breaks_fails_naming_that_rank() -> None:
    """The 8-rank recording: the budget set at the worst rank's own figure passes (the sum
    over ranks would fail it); just under it fails, naming that rank and its figure."""
    own = truth(EIGHT)
    assert len(own) == 8
    for option, name, said in (
        ("--max-compile-time", "compile_time_s", lambda v: f"compiled for {v:.2f} s"),
        ("--max-recompiles", "recompiles", lambda v: f"had {v} recompiles"),
        ("--max-graph-breaks", "unique_graph_breaks", lambda v: f"broke at {v} site"),
    ):
        figures = {label: getattr(s, name) for label, s in own.items()}
        worst = max(figures, key=lambda label: figures[label])
        most = figures[worst]
        assert sorted(figures.values())[-2] < most, "one rank is the worst"
        assert sum(figures.values()) > most or name == "unique_graph_breaks"  # 1 site, rank 5
        report, proc = run_json("report", str(EIGHT), option, str(most))
        assert proc.returncode == 0, (option, proc.stderr)
        limit = (most + sorted(figures.values())[-2]) / 2
        limit = round(limit, 3) if isinstance(most, float) else most - 1
        report, proc = run_json("report", str(EIGHT), option, str(limit))
        assert proc.returncode == 1, option
        (rule,) = report["verdict"]["rules"]
        assert (rule["value"], rule["rank"], rule["passed"]) == (most, worst, False), option
        assert rule["message"].startswith(f"{worst} {said(most)}"), rule["message"]
        verdict = render(Report.from_dict(report), "table", width=200)
        assert f"FAIL {rule['name']}: {worst} {said(most)}" in verdict, verdict


@pytest.mark.parametrize(
    "folder",
    sorted(p for p in TRACES.glob("*/*") if p.is_dir()),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_the_summary_of_ranks_is_each_ranks_own_figures(folder: Path) -> None:
    """Every multi-rank recording: each summary figure is the worst rank's, its spread the
    ranks' own least, median and most, with the rank that has the most; the totals are
    the sums, and only they."""
    own = truth(folder)
    assert len(own) > 1
    report = report_from_traces(parse_path(folder), TargetInfo(path=str(folder)))
    s = report.summary
    for name in PER_RANK:
        values = {label: getattr(r, name) for label, r in own.items()}
        ordered = sorted(values.values())
        worst = next(label for label, v in values.items() if v == ordered[-1])  # the first
        assert getattr(s, name) == ordered[-1], name  # the worst rank's, not a sum
        spread = s.per_rank[name]
        assert spread.max == ordered[-1], name
        assert (spread.min, spread.median, spread.max_rank) == (
            ordered[0], ordered[len(ordered) // 2], worst
        ), name  # fmt: skip
    assert s.ranks == len(own)
    assert s.total_graphs == sum(r.graphs for r in own.values())
    assert s.total_compile_time_s == pytest.approx(sum(r.compile_time_s for r in own.values()))
    # the JSON reads back the same
    assert Report.from_dict(json.loads(render(report, "json"))).summary == s


def test_a_saved_schema_3_report_loads_with_per_rank_figures() -> None:
    """`compilediag report` of eight_ranks with --max-compile-time 60 --max-recompiles 1,
    saved as JSON by compilediag at 6863ec3 (schema 3: the summary summed the ranks). It
    loads with the summary made from its ranks' own figures (as it saved them), the counts
    those of each rank's trace alone; its sums become the totals, and its verdict stays what
    was judged then."""
    data = json.loads(SAVED_V3.read_text())
    assert data["schema_version"] == 3
    old = data["summary"]
    saved = [r["summary"] for r in data["ranks"]]
    assert old["graphs"] == sum(r["graphs"] for r in saved)  # a sum
    loaded = Report.from_dict(data)
    s = loaded.summary
    for name in PER_RANK:
        values = [r[name] for r in saved]
        ordered = sorted(values)
        worst = data["ranks"][values.index(ordered[-1])]["label"]
        assert getattr(s, name) == ordered[-1], name  # the worst rank's, not the sum
        spread = s.per_rank[name]
        assert (spread.min, spread.median, spread.max, spread.max_rank) == (
            ordered[0], ordered[len(ordered) // 2], ordered[-1], worst
        ), name  # fmt: skip
    own = truth(EIGHT).values()
    for name in ("graphs", "graph_breaks", "unique_graph_breaks", "recompiles"):
        assert getattr(s, name) == max(getattr(r, name) for r in own), name
    assert (s.ranks, s.total_graphs, s.total_compile_time_s) == (
        8, old["graphs"], old["compile_time_s"]
    )  # fmt: skip
    assert [(r.name, r.value, r.rank) for r in loaded.verdict.rules] == [
        (r["name"], r["value"], "") for r in data["verdict"]["rules"]
    ]
    table = render(loaded, "table", width=200)
    assert f"{seconds(old['compile_time_s'])} of compile work over 8 ranks, side by side" in table
    assert json.loads(render(loaded, "json"))["schema_version"] == SCHEMA_VERSION


def test_one_process_is_judged_and_summed_as_before() -> None:
    """One rank's report (a file, or a folder of one rank) is its own: its figures, no
    spread, no total, and the verdict's words as they were."""
    own = alone(ONE)
    report, proc = run_json("report", str(ONE), "--max-compile-time", "1")
    assert proc.returncode == 1
    s = report["summary"]
    assert (s["compile_time_s"], s["ranks"], s["per_rank"]) == (own.compile_time_s, 0, {})
    assert s["total_compile_time_s"] is None and s["total_graphs"] is None
    (rule,) = report["verdict"]["rules"]
    assert (rule["value"], rule["rank"], rule["message"]) == (own.compile_time_s, "", "")
    assert f"FAIL max-compile-time: {seconds(own.compile_time_s)} (at most 1 s)" in render(
        Report.from_dict(report), "table", width=200
    )
