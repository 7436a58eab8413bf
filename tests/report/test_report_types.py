"""The Report's typed fields: closed vocabularies as StrEnums (their text in JSON), compile
ids read as torch's ids."""

from __future__ import annotations

import json

from compilediag.analysis.build import build_report
from compilediag.render import render
from compilediag.report.model import SCHEMA_VERSION, Report, TargetInfo
from compilediag.report.vocabulary import (
    BreakCause,
    CallState,
    FindingKind,
    FixSource,
    KernelKind,
    RecompileCause,
)
from compilediag.trace.compiles import CompileId, id_of, unranked
from compilediag.trace.parse import parse_path
from tests.conftest import ROOT, fixture_trace


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
    breaks = {b["cause"] for b in data["graph_breaks"]}
    assert {"print", "data_dependent_branch"} <= breaks <= {c.value for c in BreakCause}
    back = Report.from_dict(data)
    assert all(isinstance(r.cause, RecompileCause) for r in back.recompiles)
    assert all(isinstance(b.cause, BreakCause) for b in back.graph_breaks)
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


def test_every_break_cause_is_given_by_a_rule_of_the_fixes() -> None:
    """A cause no rule gives is a name nothing can reach (a patch or a remedy keyed on it
    never runs): each member of BreakCause is named in compilediag/fixes' rules."""
    fixes = ROOT / "compilediag" / "fixes"
    rules = "".join(p.read_text() for p in fixes.glob("*.py") if p.name not in ("remedies.py",))
    unused = [c.name for c in BreakCause if f"BreakCause.{c.name}" not in rules]
    assert unused == []


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


def test_a_saved_schema_2_report_loads_its_notes_and_divergence_as_findings() -> None:
    """`compilediag report` of collectives_diverge (torch 2.13 trace), saved as JSON by
    compilediag at db36776 (schema 2: notes and divergence were text)."""
    saved = ROOT / "tests" / "fixtures/reports/schema2_collectives_diverge.json"
    data = json.loads(saved.read_text())
    assert data["schema_version"] == 2 and isinstance(data["divergence"][0], str)
    report = Report.from_dict(data)
    assert [d.message for d in report.divergence] == data["divergence"]
    assert all(d.kind == FindingKind.OTHER and d.severity == "warning" for d in report.divergence)
    assert [n.message for n in report.notes] == data["notes"]
    table = render(report, "table", width=200)
    assert data["divergence"][0] in table and data["notes"][0] in table
    assert json.loads(render(report, "json"))["schema_version"] == SCHEMA_VERSION


def test_findings_say_what_they_are_about() -> None:
    """The same trace now: each divergence and note typed by what it is about."""
    from compilediag.analysis.ranks.fold import report_from_traces

    folder = fixture_trace("collectives_diverge").with_suffix("")
    logs = [log for f in sorted(folder.iterdir()) for log in parse_path(f)]
    report = report_from_traces(logs, TargetInfo(path=str(folder)))
    kinds = {d.kind for d in report.divergence}
    assert {FindingKind.RANK_COUNTS, FindingKind.RANK_BREAKS} <= kinds
    # every generated kernel's line was matched from its ops, none left unplaced (no
    # provenance records: said a guess); its compile was kernels generated anew: the
    # portable cache's note
    assert all(k.source_lines for k in report.kernels if k.kind != "extern")
    kinds = [n.kind for n in report.notes]
    assert kinds == [FindingKind.NO_PROVENANCE, FindingKind.COMPILE_COST], kinds
    assert "else the ops they hold: a guess" in report.notes[0].message
    assert "save_cache_artifacts" in report.notes[1].message


def test_every_saved_report_round_trips_through_the_types_by_section() -> None:
    """The Report's types live in sections (report/compile.py, step.py, ranks.py) and
    report.model re-exports them: each saved report of this schema reads back and writes
    the same JSON, key for key; older ones still read."""
    import json

    from compilediag.report.model import SCHEMA_VERSION, Report

    saved = sorted((ROOT / "tests" / "fixtures" / "reports").glob("*.json"))
    current = 0
    for path in saved:
        data = json.loads(path.read_text())
        report = Report.from_dict(json.loads(path.read_text()))
        if data["schema_version"] == SCHEMA_VERSION:
            current += 1
            assert json.dumps(report.to_dict(), sort_keys=True) == json.dumps(
                data, sort_keys=True
            ), path
    assert current >= 2 and len(saved) > current


def test_a_schema5_straggler_is_read_as_the_runtimes_not_divergence() -> None:
    """Schema 6 (#66): a straggler is `runtime.stragglers`, no longer divergence (which
    --fail-on-divergence gates on); a saved schema-5 report reads so."""
    import json

    from compilediag.report.model import Report

    path = ROOT / "tests" / "fixtures" / "reports" / "try_fixes_launch_h200_torch2.11.json"
    data = json.loads(path.read_text())
    assert data["schema_version"] == 5
    slow = {"kind": "straggler", "message": "rank 1 is a straggler", "severity": "warning"}
    odd = {"kind": "rank_breaks", "message": "only rank 1 breaks", "severity": "warning"}
    data["divergence"] = [odd, slow]
    report = Report.from_dict(data)
    assert [d.kind for d in report.divergence] == ["rank_breaks"]
    assert report.runtime is not None and [d.text for d in report.runtime.stragglers] == [
        "rank 1 is a straggler"
    ]
