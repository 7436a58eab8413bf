"""Renderers: Report -> text. None of them imports torch."""

from __future__ import annotations

import os

from compilediag.report import Report

FORMATS = ("table", "json", "markdown", "csv", "junit")


def render(report: Report, fmt: str, width: int | None = None, color: bool = False) -> str:
    if fmt == "json":
        from compilediag.render.json import render_json

        return render_json(report)
    if fmt == "markdown":
        from compilediag.render.markdown import render_markdown

        return render_markdown(report)
    if fmt == "csv":
        from compilediag.render.csv import render_csv

        return render_csv(report)
    if fmt == "junit":
        from compilediag.render.junit import render_junit

        return render_junit(report)
    from compilediag.render.table import render_table

    return render_table(report, width=width, color=color)


def short_path(path: str) -> str:
    """A path relative to the current folder when it lies beneath it."""
    if not path or path.startswith("<"):
        return path
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def where(file: str, line: int) -> str:
    return f"{short_path(file)}:{line}"


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.0f} ms" if value < 1 else f"{value:.2f} s"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def headline(report: Report) -> str:
    e = report.environment
    s = report.summary
    if e.get("source") == "trace":
        parts = [f"torch {e.get('torch', '?')}", f"from {plural(e.get('files', 1), 'trace file')}"]
    else:
        parts = [
            f"torch {e.get('torch', '?')}",
            e.get("device_name") or e.get("device", "?"),
            f"{e.get('backend', '?')}/{e.get('mode', 'default')}"
            + (" +train" if e.get("train") else "")
            + (" dynamic" if e.get("dynamic") else ""),
        ]
    return " · ".join(parts) + "\n" + " · ".join(_counts(s))


def _counts(s) -> list[str]:
    counts = [
        plural(s.graphs, "graph"),
        plural(s.graph_breaks, "graph break")
        + (f" at {plural(s.unique_graph_breaks, 'site')}" if s.graph_breaks else ""),
        plural(s.recompiles, "recompile"),
        f"compile {seconds(s.compile_time_s)}",
    ]
    if s.kernels:
        counts.insert(3, plural(s.kernels, "kernel"))
    if s.speedup:
        counts.append(f"speedup {s.speedup:.2f}x")
    return counts


def verdict_lines(report: Report) -> list[str]:
    v = report.verdict
    if not v.rules:
        return []
    lines = [f"verdict: {'PASS' if v.passed else 'FAIL'}"]
    for r in v.rules:
        mark = "ok  " if r.passed else "FAIL"
        lines.append(f"  {mark} {r.name}: {r.value:g} (limit {r.limit:g})")
    lines += [f"  regression: {x}" for x in v.regressions]
    lines += [f"  improved:   {x}" for x in v.improvements]
    return lines
