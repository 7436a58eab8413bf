"""The trace parser and the analysis on damaged input (hypothesis): truncated, reordered,
duplicated and corrupted records of a real trace, and random bytes. They never raise,
never hang, and count what they skipped. Reading a trace or a saved report runs nothing."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compilediag.analysis.build import build_report
from compilediag.harness.worker_types import WorkerResult
from compilediag.render import render
from compilediag.report.model import Environment, Report, TargetInfo
from compilediag.trace.parse import parse_lines
from tests.conftest import fixture_trace

LINES = fixture_trace("graph_breaks.eager").read_text().splitlines(keepends=True)
FUZZ = settings(
    max_examples=40, deadline=5000, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def _analyse(lines: list[str]) -> None:
    log = parse_lines(lines, path="fuzz")
    assert log.records >= 0 and log.skipped_lines >= 0
    report = build_report(
        [log], None, TargetInfo(path="fuzz"), environment=Environment(source="trace")
    )
    render(report, "table", width=80)
    Report.from_dict(json.loads(render(report, "json")))


@FUZZ
@given(st.integers(0, len(LINES)), st.integers(0, 200))
def test_truncated_anywhere(cut: int, chars: int) -> None:
    lines = LINES[:cut]
    if lines:
        lines[-1] = lines[-1][: max(0, len(lines[-1]) - chars)]
    _analyse(lines)


@FUZZ
@given(st.randoms(use_true_random=False), st.integers(1, 60))
def test_reordered_and_duplicated_records(rnd: random.Random, moves: int) -> None:
    lines = list(LINES)
    for _ in range(moves):
        i, j = rnd.randrange(len(lines)), rnd.randrange(len(lines))
        if rnd.random() < 0.5:
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(j, lines[i])
    _analyse(lines)


@FUZZ
@given(st.randoms(use_true_random=False), st.integers(1, 200))
def test_corrupted_characters(rnd: random.Random, hits: int) -> None:
    lines = list(LINES)
    for _ in range(hits):
        i = rnd.randrange(len(lines))
        line = lines[i]
        k = rnd.randrange(max(1, len(line)))
        lines[i] = line[:k] + rnd.choice('{}[]":,\\\x00\tZ9 é') + line[k + 1 :]
    _analyse(lines)


@FUZZ
@given(st.binary(max_size=4000))
def test_random_bytes(data: bytes) -> None:
    _analyse(data.decode("utf-8", errors="replace").splitlines(keepends=True))


@FUZZ
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=80),
                min_size=1, max_size=20), st.integers(0, len(LINES)))  # fmt: skip
def test_junk_lines_are_counted(junk: list[str], at: int) -> None:
    # junk between records (not payload lines, which start with a tab) is counted exactly
    while at < len(LINES) and LINES[at].startswith("\t"):
        at += 1
    clean = [j.replace("\n", " ").replace("\r", " ").lstrip("\t") for j in junk]
    clean = ["x" + j + "\n" for j in clean]  # never a header, never blank
    base = parse_lines(LINES)
    log = parse_lines(LINES[:at] + clean + LINES[at:])
    assert log.skipped_lines == base.skipped_lines + len(clean)
    assert log.records == base.records


def test_reading_executes_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    code = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    evil = [
        'V1121 10:00:00.000000 1 x.py:1] {"dynamo_start": {"stack": [{"line": 1, '
        f'"name": "{code}", "filename": 0}}]}}, "frame_id": 0, "frame_compile_id": 0, '
        '"attempt": 0}\n',
        'V1121 10:00:00.000000 1 x.py:1] {"artifact": {"name": "dynamo_graph_break_reason", '
        '"encoding": "string"}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0, '
        '"has_payload": "0"}\n',
        f"\tGraph Break Reason: {code}\n",
        f'\tUser code traceback:\n\t  File "{code}", line 1, in <module>\n\t    {code}\n',
    ]
    log = parse_lines(LINES + evil)
    report = build_report([log], WorkerResult(), TargetInfo(path="x"))
    saved = tmp_path / "report.json"
    saved.write_text(render(report, "json"))
    for fmt in ("table", "markdown", "csv", "junit", "html"):
        render(Report.from_dict(json.loads(saved.read_text())), fmt)
    assert not marker.exists()
