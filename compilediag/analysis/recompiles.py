"""Recompilations: which frame compiled again, and the guard that failed."""

from __future__ import annotations

from compilediag.analysis.graphs import frame_name
from compilediag.report import Recompile
from compilediag.trace import Compile


def collect_recompiles(compiles: list[Compile]) -> list[Recompile]:
    out = []
    for c in compiles:
        reasons = list(c.recompile_reasons)
        if not reasons and c.metrics.get("recompile_reason"):
            reasons = [str(c.metrics["recompile_reason"])]
        if not reasons:
            continue
        m = c.metrics
        out.append(
            Recompile(
                frame=frame_name(m.get("co_name", "")),
                file=m.get("co_filename") or (c.stack[-1].file if c.stack else ""),
                line=int(m.get("co_firstlineno") or (c.stack[-1].line if c.stack else 0)),
                compile_id=c.compile_id,
                reasons=reasons,
                failed_guard=_strip_cid(reasons[0]),
            )
        )
    return out


def _strip_cid(reason: str) -> str:
    """`0/0: tensor 'x' size mismatch ...` -> `tensor 'x' size mismatch ...`."""
    head, sep, rest = reason.partition(": ")
    return rest if sep and "/" in head and " " not in head else reason
