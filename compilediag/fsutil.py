"""Atomic writes and output-folder checks, shared by every command that writes files."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from compilediag.errors import UsageError


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def public_dir(path: Path) -> None:
    """Give a folder made by mkdtemp (0700) the rights a plain mkdir would give it, so a CI
    artifact uploader running as another user can read what we wrote."""
    os.chmod(path, 0o777 & ~umask())


def write_atomic(path: Path | str, text: str) -> None:
    """Write to a temp file beside the target, then rename: readers never see half a file.
    The file gets the rights the user's umask gives a new file (mkstemp's are 0600)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_output_file(path: str, what: str) -> None:
    """Refuse, before the model runs, a file the user named that could not be written."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{what} {path} is a folder.", hint="Name a file to write to.")
    parent = p.parent
    # the nearest part of the path that exists: a file there is no folder (a look read
    # "folder /proc/version does not exist" for /proc/version/x.html)
    there = next((a for a in (parent, *parent.parents) if a.exists()), None)
    if there is not None and not there.is_dir():
        raise UsageError(
            f"{what} {path}: {there} is a file, not a folder.", hint="Name a path in a folder."
        )
    if not parent.is_dir():
        raise UsageError(f"{what} {path}: folder {parent} does not exist.", hint="Create it first.")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(
            f"{what} {path} cannot be written (no permission).", hint="Pick a writable path."
        )


def check_output_files(files: dict[str, str | None]) -> None:
    """check_output_file for each option given (`--html`: its path), all at once: one error
    names every path that could not be written, not the first alone."""
    refused: list[UsageError] = []
    for what, path in files.items():
        if path:
            try:
                check_output_file(path, what)
            except UsageError as e:
                refused.append(e)
    if len(refused) == 1:
        raise refused[0]
    if refused:
        raise UsageError(
            " ".join(e.message for e in refused),
            hint=" ".join(dict.fromkeys(e.hint for e in refused)),
        )


def write_output_file(path: str, text: str, what: str = "output") -> None:
    """Write a file the user named (--output, --junit), with a clear error if it can't be."""
    check_output_file(path, what)
    p = Path(path)
    try:
        write_atomic(p, text)
    except OSError as e:
        raise UsageError(
            f"cannot write {path}: {e.strerror}.", hint="Pick a writable path."
        ) from None
