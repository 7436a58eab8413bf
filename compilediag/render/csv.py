"""CSV: one row per finding (graph break, recompile, kernel), built with pandas."""

from __future__ import annotations

from compilediag.report.model import Report

# `sources`: the other places of a finding - the library frame a break happened in, the
# user lines a kernel came from (`file:line`, space-separated)
COLUMNS = ["kind", "compile_id", "file", "line", "code", "what", "count", "suggestion", "sources"]


def rows(report: Report) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for b in report.graph_breaks:
        lib = b.library_frame
        out.append(
            {"kind": "graph_break", "compile_id": " ".join(b.compile_ids), "file": b.file,
             "line": b.line, "code": b.code, "what": b.reason, "count": b.count,
             "suggestion": b.suggestion, "sources": f"{lib.file}:{lib.line}" if lib else ""}
        )  # fmt: skip
    for r in report.recompiles:
        out.append(
            {"kind": "recompile", "compile_id": r.compile_id, "file": r.file, "line": r.line,
             "code": "", "what": r.failed_guard, "count": 1, "suggestion": r.suggestion,
             "sources": f"{r.guard_file}:{r.guard_line}" if r.guard_file else ""}
        )  # fmt: skip
    for k in report.kernels:
        file, _, line = (k.source_lines[0] if k.source_lines else "").rpartition(":")
        out.append(
            {"kind": f"kernel:{k.kind}", "compile_id": k.compile_id, "file": file, "line": line,
             "code": k.name, "what": " ".join(k.ops), "count": 1, "suggestion": "",
             "sources": " ".join(k.source_lines)}
        )  # fmt: skip
    return out


def render_csv(report: Report) -> str:
    import pandas as pd

    return pd.DataFrame(rows(report), columns=COLUMNS).to_csv(index=False)
