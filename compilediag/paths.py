"""How paths are shown to the user (no torch, no rich: every layer may use it)."""

from __future__ import annotations

import os


def short_path(path: str) -> str:
    """A path relative to the current folder when it lies beneath it; a library file from
    its package down."""
    if not path or path.startswith("<"):
        return path
    for marker in LIBRARY_ROOTS:
        if marker in path:
            return path.split(marker, 1)[1]
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


LIBRARY_ROOTS = ("/site-packages/", "/dist-packages/")


def portable_path(path: str, root: str) -> str:
    """How a saved report stores a path: relative to `root` (the folder the command ran
    in) when it lies beneath it, from its package down when it is an installed library,
    else as it is - so a report made on a CI runner reads the same anywhere."""
    if not path or path.startswith("<"):
        return path
    prefix = root.rstrip("/") + "/"
    if path.startswith(prefix):
        return path[len(prefix) :]
    for marker in LIBRARY_ROOTS:
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def portable_text(text: str, root: str) -> str:
    """The same for paths inside free text (notes, errors)."""
    return text.replace(root.rstrip("/") + "/", "")


def where(file: str, line: int) -> str:
    return f"{short_path(file)}:{line}"
