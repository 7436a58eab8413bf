"""CSV: one row per finding (graph break, recompile, kernel), built with pandas."""

from __future__ import annotations

from compilediag.report import Report

COLUMNS = ["kind", "compile_id", "file", "line", "code", "what", "count", "suggestion"]


def rows(report: Report) -> list[dict]:
    out = []
    for b in report.graph_breaks:
        out.append(
            {"kind": "graph_break", "compile_id": " ".join(b.compile_ids), "file": b.file,
             "line": b.line, "code": b.code, "what": b.reason, "count": b.count,
             "suggestion": b.suggestion}
        )  # fmt: skip
    for r in report.recompiles:
        out.append(
            {"kind": "recompile", "compile_id": r.compile_id, "file": r.file, "line": r.line,
             "code": "", "what": r.failed_guard, "count": 1, "suggestion": r.suggestion}
        )  # fmt: skip
    for k in report.kernels:
        out.append(
            {"kind": f"kernel:{k.kind}", "compile_id": k.compile_id, "file": k.file, "line": "",
             "code": k.name, "what": " ".join(k.ops), "count": 1,
             "suggestion": " ".join(k.source_lines)}
        )  # fmt: skip
    return out


def render_csv(report: Report) -> str:
    import pandas as pd

    return pd.DataFrame(rows(report), columns=COLUMNS).to_csv(index=False)
