"""The compile history: each compile resolved once per build, every finding made from it,
and no other module reading the parsed records themselves."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from compilediag.analysis import history
from compilediag.analysis.build import build_report
from compilediag.analysis.history import build_history
from compilediag.paths import Owner, owner_of
from compilediag.report.model import TargetInfo
from compilediag.trace.parse import parse_path
from tests.conftest import ROOT, fixture_trace, trace_sets


@pytest.mark.parametrize("folder", trace_sets("recompile_limit.eager"), ids=lambda p: p.name)
def test_each_compiles_frame_is_resolved_once_per_build(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recompile limit's trace: one frame compiled 8 times, then a compile torch refused
    (its metrics name no code, which comes from the frame's other compiles). Every finding
    of the report is made from one resolution of each compile."""
    logs = parse_path(fixture_trace("recompile_limit.eager", folder))
    seen: Counter[str] = Counter()
    resolve = history.frame_code

    def counted(c, frame):  # type: ignore[no-untyped-def]
        seen[c.compile_id] += 1
        return resolve(c, frame)

    monkeypatch.setattr(history, "frame_code", counted)
    report = build_report(logs, None, TargetInfo(path="m"))
    compiles = [c.compile_id for log in logs for c in log.ordered()]
    assert len(compiles) > 8 and report.recompiles and report.recompile_limit_hits
    assert seen == Counter(compiles), "each compile resolved exactly once"


@pytest.mark.parametrize("folder", trace_sets("recompile_limit.eager"), ids=lambda p: p.name)
def test_a_refused_compile_takes_its_frames_code(folder: Path) -> None:
    h = build_history(parse_path(fixture_trace("recompile_limit.eager", folder)))
    refused = [e for e in h if not e.metrics.co_name]
    assert refused, "the compile that hit the limit logs no code name"
    for e in refused:
        named = [k for k in h.frame_of(e) if k.metrics.co_name]
        assert named and e.code.name == named[0].metrics.co_name
        assert e.code.file == named[0].metrics.co_filename
    (hit,) = build_report(h, None, TargetInfo(path="m")).recompile_limit_hits
    assert hit.frame and hit.line, "the limit's post-mortem names the frame"


def test_frames_group_a_frames_compiles() -> None:
    """torch's compile ids say which compiles are one frame's: `0/0`, `0/1` ... `1/0`."""
    h = build_history(parse_path(fixture_trace("graph_breaks.eager")))
    for key, entries in h.frames.items():
        assert {e.id.frame for e in entries} == {key[2]}
        assert sorted(e.id.frame_compile for e in entries) == list(range(len(entries)))
    assert sum(map(len, h.frames.values())) == len(h)


def test_whose_code_a_file_is() -> None:
    import copy

    import torch

    assert owner_of(torch.nn.modules.module.__file__) == Owner.TORCH
    assert owner_of(copy.__file__) == Owner.PYTHON
    assert owner_of(history.__file__) == Owner.COMPILEDIAG
    assert owner_of("/venv/lib/python3.11/site-packages/torchvision/ops/boxes.py") == (
        Owner.LIBRARY
    )
    assert owner_of(str(ROOT / "sample_models" / "graph_breaks.py")) == Owner.USER


# What only the history builder (and the parser that makes the records) reads: the trace
# file's own structure.
RAW = re.compile(r"\.ordered\(\)|\blog\.(?:compiles|outside|aot_code|exported)\b|\.outside\.")


def test_no_module_but_the_history_reads_the_parsed_trace() -> None:
    allowed = {"trace/parse.py", "trace/compiles.py", "analysis/history.py"}
    readers = [
        str(p.relative_to(ROOT / "compilediag"))
        for p in (ROOT / "compilediag").rglob("*.py")
        if str(p.relative_to(ROOT / "compilediag")) not in allowed and RAW.search(p.read_text())
    ]
    assert readers == []
