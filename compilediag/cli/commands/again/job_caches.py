"""`run --try-fixes`' caches: every run of the job there compiles with torch's caches as the
job's own run under `run` left them, in a copy of its own that the runs share (a remedy's
settings are cache keys of their own: what it compiles is stored in the copy). The user's
caches are read, never written: a small file is copied (torch appends to some of its
sources in place), a large one (a built kernel, never written again once there) linked
where the disk allows it. Before (each run in an empty cache of its own), a run took the
cold compile each time, which no record of the job's warm run could forecast: a look saw
"about 10 s a run" and 22 s taken."""

from __future__ import annotations

import getpass
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# a file this large is linked, not copied (where the disk allows it)
LINK_FROM_BYTES = 1 << 20


def user_caches(env: dict[str, str]) -> dict[str, Path]:
    """The folders of torch's compile caches a job run in `env` uses, by the variable that
    names each (Inductor's default as torch makes it: the temp folder's
    torchinductor_USER; Triton's under it unless TRITON_CACHE_DIR names one)."""
    inductor = env.get("TORCHINDUCTOR_CACHE_DIR")
    if not inductor:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = f"uid_{os.getuid()}"
        user = re.sub(r'[\\/:*?"<>|]', "_", user)
        inductor = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")
    out = {"TORCHINDUCTOR_CACHE_DIR": Path(inductor)}
    if env.get("TRITON_CACHE_DIR"):
        out["TRITON_CACHE_DIR"] = Path(env["TRITON_CACHE_DIR"])
    return out


def _copy(src: str, dst: str) -> object:
    """A file of the user's cache into the copy: linked where large (and the disk allows),
    else copied."""
    if os.path.getsize(src) >= LINK_FROM_BYTES:
        try:
            os.link(src, dst)
            return dst
        except OSError:
            pass
    return shutil.copy2(src, dst)


@contextmanager
def copied_caches(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """The environment that points a job's runs at a copy of the caches the job uses (made
    now, removed after): empty folders where the job has none yet. A file that can't be
    read (another job's, or one being written) is left out: its entry compiles again."""
    folder = Path(tempfile.mkdtemp(prefix="compilediag-caches-"))
    try:
        out = {}
        for var, theirs in user_caches(env).items():
            mine = folder / var.lower()
            if theirs.is_dir():
                try:
                    shutil.copytree(
                        theirs, mine, symlinks=True, copy_function=_copy,
                        ignore=shutil.ignore_patterns("*.lock"), dirs_exist_ok=True,
                    )  # fmt: skip
                except (shutil.Error, OSError):
                    pass  # (what was copied before it stays)
            mine.mkdir(parents=True, exist_ok=True)
            out[var] = str(mine)
        yield out
    finally:
        shutil.rmtree(folder, ignore_errors=True)
