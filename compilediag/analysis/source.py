"""The user's source lines, read once when the Report is built (never at render time), so
a saved report renders the same on a machine that has none of the user's files."""

from __future__ import annotations

import linecache

from compilediag.report import SourceLine

CONTEXT_LINES = 2  # lines shown above and below a site


def code_at(file: str, line: int) -> str:
    return linecache.getline(file, line).strip() if file and line > 0 else ""


def context_at(file: str, line: int, around: int = CONTEXT_LINES) -> list[SourceLine]:
    """The lines around a site, as written (indentation kept); empty if the file is gone."""
    if not file or line <= 0 or file.startswith("<"):
        return []
    lines = linecache.getlines(file)
    if not lines or line > len(lines):
        return []
    lo, hi = max(1, line - around), min(len(lines), line + around)
    return [SourceLine(n, lines[n - 1].rstrip("\n")) for n in range(lo, hi + 1)]
