"""GitHub Actions workflow commands: findings show up on the lines of the pull request."""

from __future__ import annotations

import os

from compilediag.render import rule_text
from compilediag.report.model import Report


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: Report) -> list[str]:
    failed_on_breaks = any(
        r.name in ("fullgraph", "max-graph-breaks") and not r.passed for r in report.verdict.rules
    )
    level = "error" if failed_on_breaks else "warning"
    out = []
    for b in report.graph_breaks:
        path = os.path.relpath(b.file) if os.path.isabs(b.file) else b.file
        msg = f"{b.reason}. {b.suggestion}"
        out.append(
            f"::{level} file={_prop(path)},line={b.line},title={_prop('graph break')}::{_data(msg)}"
        )
    for r in report.recompiles:
        path = os.path.relpath(r.file) if os.path.isabs(r.file) else r.file
        out.append(
            f"::warning file={_prop(path)},line={r.line},title=recompile::{_data(r.failed_guard + '. ' + r.suggestion)}"
        )
    for s in report.runtime.stragglers if report.runtime is not None else []:
        where = f" file={_prop(s.file)},line={s.line}," if s.file else " "
        out.append(f"::warning{where}title=straggler::{_data(s.text)}")
    if not report.verdict.passed:
        why = "; ".join(f"{r.name} {rule_text(r)}" for r in report.verdict.rules if not r.passed)
        out.append(f"::error title=compilediag gate::{_data(why)}")
    return out
