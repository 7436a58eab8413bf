"""How paths are shown to the user (no torch, no rich: every layer may use it).

An installed library's file is shown from its package down (`torchvision/ops/boxes.py`)
wherever its venv is, inside the project folder too; the user's files relative to the folder
the command ran in. Never a machine path for a library."""

from __future__ import annotations

import os
import re

LIBRARY_ROOTS = ("/site-packages/", "/dist-packages/")
# an absolute path up to its site-packages folder, inside free text
_LIBRARY_PREFIX = re.compile(r"(?<![\w.-])/[^\s'\"`()]*?/(?:site|dist)-packages/")


def library_path(path: str) -> str | None:
    """`/venv/lib/python3.11/site-packages/torchvision/ops/boxes.py` ->
    `torchvision/ops/boxes.py`; None for a file not in an installed library."""
    for marker in LIBRARY_ROOTS:
        if marker in path:
            return path.split(marker, 1)[1]
    return None


def short_path(path: str) -> str:
    """A path relative to the current folder when it lies beneath it; a library file from
    its package down."""
    if not path or path.startswith("<"):
        return path
    lib = library_path(path)
    if lib is not None:
        return lib
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def portable_path(path: str, root: str) -> str:
    """How a saved report stores a path: an installed library's file from its package down
    (first: a venv may lie inside `root`), else relative to `root` (the folder the command
    ran in) when it lies beneath it, else as it is - so a report made on a CI runner reads
    the same anywhere."""
    if not path or path.startswith("<"):
        return path
    lib = library_path(path)
    if lib is not None:
        return lib
    prefix = root.rstrip("/") + "/"
    if path.startswith(prefix):
        return path[len(prefix) :]
    return path


def portable_text(text: str, root: str) -> str:
    """The same for paths inside free text (notes, errors)."""
    return _LIBRARY_PREFIX.sub("", text).replace(root.rstrip("/") + "/", "")


def where(file: str, line: int) -> str:
    return f"{short_path(file)}:{line}"
