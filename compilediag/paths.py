"""How paths are shown to the user (no torch, no rich: every layer may use it)."""

from __future__ import annotations

import os


def short_path(path: str) -> str:
    """A path relative to the current folder when it lies beneath it; a library file from
    its package down."""
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
