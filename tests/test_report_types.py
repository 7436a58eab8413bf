"""The Report's typed fields: closed vocabularies as StrEnums (their text in JSON), compile
ids read as torch's ids."""

from __future__ import annotations

import json

from compilediag.analysis.build import build_report
from compilediag.compiles import CompileId, id_of, unranked
from compilediag.render import render
from compilediag.report import CallState, FixSource, KernelKind, RecompileCause, Report, TargetInfo
from compilediag.trace import parse_path
from tests.conftest import fixture_trace


def test_vocabularies_are_saved_as_their_text_and_read_back_typed() -> None:
    report = build_report(
        parse_path(fixture_trace("graph_breaks.eager")) + parse_path(fixture_trace("recompile")),
        None,
        TargetInfo(path="m"),
    )
    data = json.loads(render(report, "json"))
    causes = {r["cause"] for r in data["recompiles"]}
    assert causes and causes <= {c.value for c in RecompileCause}
    assert {b["fix_source"] for b in data["graph_breaks"]} <= {s.value for s in FixSource}
    back = Report.from_dict(data)
    assert all(isinstance(r.cause, RecompileCause) for r in back.recompiles)
    assert all(isinstance(b.fix_source, FixSource) for b in back.graph_breaks)
    assert back.to_dict() == report.to_dict()


def test_a_value_this_release_does_not_know_keeps_its_text() -> None:
    data = json.loads(
        render(build_report(parse_path(fixture_trace("recompile")), None, TargetInfo("m")), "json")
    )
    data["recompiles"][0]["cause"] = "a cause of a newer release"
    (r,) = Report.from_dict(data).recompiles
    assert r.cause == "a cause of a newer release"
    assert "a cause of a newer release" in render(Report.from_dict(data), "json")


def test_enum_values_compare_as_text() -> None:
    assert CallState.LIMIT == "limit" and f"{KernelKind.EXTERN}" == "extern"


def test_compile_ids_are_read_as_torchs() -> None:
    """The entry frame is frame 0 of its process, on any rank; not compiled autograd's."""
    assert id_of("0/0").of_entry_frame and id_of("r1:0/2").of_entry_frame
    assert not id_of("1/0").of_entry_frame and not id_of("r10:1/0").of_entry_frame
    assert not id_of("!0/0/0").of_entry_frame
    assert id_of("r3:2/1_1") == CompileId(2, 1, attempt=1, rank=3)
    assert id_of("export") is None and id_of("aot") is None
    assert unranked("r12:0/1#2") == "0/1#2" and unranked("0/1") == "0/1"
