"""Compare the trace-derived break sites with torch._dynamo.explain's, and say whom to believe."""

from __future__ import annotations

import os

from compilediag.harness.worker_types import ExplainBreak, ExplainResult
from compilediag.report.model import CrossCheck, Disagreement, GraphBreak, Site
from compilediag.trace.compiles import CompileId


def _key(file: str | None, line: int | None) -> tuple[str, int]:
    return (os.path.realpath(file) if file and not file.startswith("<") else file or ""), line or 0


def cross_check(
    breaks: list[GraphBreak], explain: ExplainResult, skipped: frozenset[str] = frozenset()
) -> CrossCheck:
    """`skipped`: the compile ids whose frame torch gave up (it runs in eager mode)."""
    if explain.error:
        return CrossCheck(explain_graph_breaks=0, agree=False, error=explain.error)
    explain_sites: dict[tuple[str, int], ExplainBreak] = {}
    for b in explain.breaks:
        explain_sites.setdefault(_key(b.file, b.line), b)
    ours: dict[tuple[str, int], GraphBreak] = {}
    for gb in breaks:
        # explain names the innermost frame; ours is the user's line with the library beneath
        inner = gb.library_frame or Site(gb.file, gb.line)
        ours[_key(inner.file, inner.line)] = gb
        ours.setdefault(_key(gb.file, gb.line), gb)

    out = CrossCheck(
        explain_graph_breaks=explain.graph_break_count,
        explain_sites=[Site(b.file or "", b.line or 0) for b in explain.breaks],
    )
    for gb in breaks:
        inner = gb.library_frame or Site(gb.file, gb.line)
        if _key(inner.file, inner.line) in explain_sites or _key(gb.file, gb.line) in explain_sites:
            continue
        out.disagreements.append(
            Disagreement(gb.file, gb.line, "trace", gb.reason, _why_explain_missed(gb, skipped))
        )
    for key, b in explain_sites.items():
        if key not in ours:
            out.disagreements.append(
                Disagreement(
                    b.file,
                    b.line,
                    "explain",
                    b.reason,
                    "Believe the trace: explain re-ran Dynamo after a reset with its own eager "
                    "backend, so this break was not in the compile your run actually did.",
                )
            )
    out.agree = not out.disagreements
    return out


def _why_explain_missed(gb: GraphBreak, skipped: frozenset[str]) -> str:
    if gb.compile_ids and all(cid in skipped for cid in gb.compile_ids):
        return (
            "Believe the trace: torch gave up the frame this break is in (it runs in eager "
            "mode, not split), and explain lists only the breaks of the graphs it compiled."
        )
    if gb.ops_before == 0:
        return (
            "Believe the trace: no tensor op ran before this break in its frame, so no graph "
            "was cut and explain (which lists the reasons of compiled graphs) never sees it. "
            "It still splits the frame and costs a resume function."
        )
    if not any(CompileId.parse(cid).is_first for cid in gb.compile_ids):
        return (
            "Believe the trace: this break happened only on a recompile for later inputs; "
            "explain ran once, on the first inputs."
        )
    return (
        "Believe the trace: it records the compile your run actually did; explain resets "
        "Dynamo and traces again, with an eager backend, on the model as the run's calls left "
        "it (what a first call sets up, a cache it fills, is set by then)."
    )
