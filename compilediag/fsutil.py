"""Atomic writes and output-folder checks, shared by every command that writes files."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from compilediag.errors import UsageError


def write_atomic(path: Path | str, text: str) -> None:
    """Write to a temp file beside the target, then rename: readers never see half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_output_file(path: str, text: str) -> None:
    """Write a file the user named (--output, --junit), with a clear error if it can't be."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{path} is a folder.", hint="Name a file to write to.")
    if not p.parent.exists():
        raise UsageError(f"folder {p.parent} does not exist.", hint="Create it first.")
    try:
        write_atomic(p, text)
    except OSError as e:
        raise UsageError(
            f"cannot write {path}: {e.strerror}.", hint="Pick a writable path."
        ) from None
