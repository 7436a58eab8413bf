"""The structured-trace parser, on traces recorded from real runs (tests/fixtures)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from compilediag.trace.parse import TraceError, parse_lines, parse_path
from tests.conftest import fixture_trace, trace_sets


@pytest.mark.parametrize("folder", trace_sets(), ids=lambda p: p.name)
def test_every_fixture_parses_with_no_unknown_records(folder: Path) -> None:
    for f in sorted(folder.rglob("*.log")):  # rank folders too
        (log,) = parse_path(f, strict=True)  # strict: an unknown record would raise
        assert log.records > 10
        # export and AOTInductor runs (2.7+) write no compile id: what they hold is outside
        assert log.compiles or log.aot_code or log.outside.export_failures, f
        for c in log.compiles.values():
            # torch's text of the id has no rank in it
            assert c.metrics.compile_id in (str(replace(c.id, rank=None)), ""), f


def test_interned_filenames_resolve_to_the_sample_file() -> None:
    (log,) = parse_path(fixture_trace("graph_breaks.eager"))
    first = log.ordered()[0]
    assert first.stack, "dynamo_start stack missing"
    assert first.stack[-1].file.endswith("sample_models/graph_breaks.py")
    assert first.stack[-1].name == "forward"


def test_compile_ids_group_attempts_and_resume_frames() -> None:
    (log,) = parse_path(fixture_trace("graph_breaks.eager"))
    ids = [c.compile_id for c in log.ordered()]
    assert ids[:4] == ["0/0", "1/0", "2/0", "3/0"]
    names = [c.metrics.co_name for c in log.ordered()]
    assert names[0] == "forward" and all(
        n.startswith("torch_dynamo_resume_in_forward") for n in names[1:]
    )
    # Dynamo restarts the analysis after a break (attempt 1); the break text was logged on
    # attempt 0. Both land on the same compile id.
    assert sum(len(c.graph_breaks) for c in log.ordered()) == 3


def test_recompile_reasons_are_read() -> None:
    (log,) = parse_path(fixture_trace("batch_sweep.eager"))
    reasons = [r for c in log.ordered() for r in c.recompile_reasons]
    assert len(reasons) == 1
    assert "size mismatch at index 0. expected 2, actual 4" in reasons[0]


def test_unknown_records_are_counted_not_fatal_and_junk_is_skipped() -> None:
    text = fixture_trace("print_break.aot_eager").read_text().splitlines(keepends=True)
    injected = (
        text[:3]
        + [
            'V1121 10:00:00.000000 1 x.py:1] {"brand_new_record": {}, "frame_id": 0, "frame_compile_id": 0}\n',
            "\tpayload of the new record\n",
            "\x00\x01 binary junk\n",
            "V1121 10:00:00.000000 1 x.py:1] {not json\n",
        ]
        + text[3:]
    )
    log = parse_lines(injected)
    assert log.unknown["brand_new_record"] == 1
    assert log.skipped_lines == 2
    assert sum(len(c.graph_breaks) for c in log.compiles.values()) == 1
    with pytest.raises(TraceError):
        parse_lines(injected, strict=True)


def test_truncated_trace_keeps_what_was_complete() -> None:
    lines = fixture_trace("graph_breaks.eager").read_text().splitlines(keepends=True)
    log = parse_lines(lines[: len(lines) // 2])
    assert 0 < len(log.compiles) <= 4


def test_backward_compile_time_is_counted() -> None:
    """--train: the backward graph compiles at the first backward call, and torch logs it as
    bwd_compilation_metrics, outside the frame's own compile time."""
    import json

    from compilediag.analysis.compile.graphs import compile_time
    from compilediag.analysis.history import build_history

    path = fixture_trace("clean_mlp_train.inductor")
    raw = [json.loads(line[line.index("{"):]) for line in path.read_text().splitlines()
           if '{"bwd_compilation_metrics"' in line or '{"compilation_metrics"' in line]  # fmt: skip
    fwd = sum(r["compilation_metrics"]["entire_frame_compile_time_s"] for r in raw
              if "compilation_metrics" in r)  # fmt: skip
    bwd = sum(r["bwd_compilation_metrics"]["inductor_compile_time_s"] for r in raw
              if "bwd_compilation_metrics" in r)  # fmt: skip
    assert bwd > 0
    (log,) = parse_path(path)
    t = compile_time(build_history([log]))
    assert t.backward_s == pytest.approx(bwd)
    assert t.total_s == pytest.approx(fwd + bwd)


def test_recompile_limit_attempt_is_not_a_recompile() -> None:
    from compilediag.analysis.build import build_report
    from compilediag.harness.worker_types import WorkerResult
    from compilediag.report.model import TargetInfo

    report = build_report(
        parse_path(fixture_trace("recompile_limit.eager")), WorkerResult(), TargetInfo(path="m")
    )
    (hit,) = report.recompile_limit_hits
    assert (hit.limit, hit.compiles) == (8, 8)
    # 8 graphs of Layer.forward: 7 recompiles (the 9th attempt hit the limit, made no graph)
    assert report.summary.recompiles == 7


def test_a_repeated_compile_id_is_its_own_compile() -> None:
    """Two processes' traces in one file (or a torch._dynamo.reset() in one process) repeat
    compile ids: each compile keeps its own metrics and code, none overwrites another."""
    text = fixture_trace("batch_sweep.eager").read_text()
    once = parse_lines(text.splitlines(keepends=True))
    twice = parse_lines((text + text).splitlines(keepends=True))
    assert len(twice.compiles) == 2 * len(once.compiles) == 4
    ids = [c.compile_id for c in twice.ordered()]
    assert ids == ["0/0", "0/1", "0/0#2", "0/1#2"]
    firsts = [c for c in twice.ordered() if c.id.frame_compile == 0]
    assert all(c.has_metrics and c.metrics.co_name for c in firsts)


def test_damaged_payloads_are_counted_and_not_read() -> None:
    lines = fixture_trace("graph_breaks.eager").read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if '"dynamo_graph_break_reason"' in ln)
    damaged = list(lines)
    damaged[at + 2] = damaged[at + 2].replace("e", "E", 1)  # a payload line, altered
    base, log = parse_lines(lines), parse_lines(damaged)
    assert base.damaged_payloads == 0 and log.damaged_payloads == 1
    assert (
        sum(len(c.graph_breaks) for c in log.ordered())
        == sum(len(c.graph_breaks) for c in base.ordered()) - 1
    )


@pytest.mark.parametrize(
    "path",
    sorted(p for folder in trace_sets() for p in folder.rglob("*.log")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_not_analysed_lists_exactly_what_the_parser_read_past(path: Path) -> None:
    """Every record of every fixture is analysed or named, with its count: the kinds the
    analysis never reads are in the report's not-analysed list exactly as often as the
    file holds them."""
    import json

    from compilediag.analysis.build import build_report
    from compilediag.harness.worker_types import WorkerResult
    from compilediag.report.model import TargetInfo
    from compilediag.trace.parse import USED_KINDS

    kinds: dict[str, int] = {}
    for line in path.read_text().splitlines():
        if line.startswith("\t") or "{" not in line:
            continue
        obj = json.loads(line[line.index("{") :])
        kind = next(k for k in obj if k not in ("frame_id", "frame_compile_id", "attempt",
                    "compiled_autograd_id", "has_payload", "rank", "payload_filename"))  # fmt: skip
        if kind not in USED_KINDS:
            kinds[kind] = kinds.get(kind, 0) + 1
    report = build_report(parse_path(path), WorkerResult(), TargetInfo(path="m"))
    named: dict[str, int] = {}
    for k, v in report.trace.not_analysed.items():
        if not k.startswith(("artifact", "graph_dump")) and not k.endswith("(outside any compile)"):
            named[k] = named.get(k, 0) + v
    assert named == kinds
    assert report.trace.unknown_records == {}
