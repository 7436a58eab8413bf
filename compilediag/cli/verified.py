"""`compilediag fix`'s verifications, kept for the `--apply` that follows a dry run.

A dry run verifies each patch in runs of its own (minutes on a real model); `fix --apply`
of the same file, unchanged, under the same torch and options, applies that verification
instead of running it all again. Kept in compilediag's own folder - never torch's caches
or anything in their keys: `$COMPILEDIAG_CACHE_DIR`, else `$XDG_CACHE_HOME/compilediag`,
else `~/.cache/compilediag` - one file per verification under `fix/`, the oldest dropped
past KEPT. Deleting the folder loses nothing but the time to verify again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compilediag.fixes.patches import FixResult
from compilediag.harness.worker_types import WorkerSpec
from compilediag.report.model import VERSION
from compilediag.report.serial import from_plain, to_plain

KEPT = 20  # verifications kept; a dry run's is used by the --apply soon after it
# the environment that changes what torch compiles or how it runs, part of the key
ENV_PREFIXES = ("TORCH", "PYTORCH", "OMP_", "MKL_", "CUDA_", "INDUCTOR", "TRITON")


def cache_dir() -> Path:
    """compilediag's own folder for what it keeps between runs."""
    if folder := os.environ.get("COMPILEDIAG_CACHE_DIR"):
        return Path(folder)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "compilediag"


def _torch_version() -> str:
    """torch's version as installed, read without importing it (the CLI never does)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return ""


def _beside(path: Path) -> list[list[Any]]:
    """The Python files beside the model (it may import them): name, size, change time."""
    out: list[list[Any]] = []
    try:
        for p in sorted(path.parent.glob("*.py")):
            if p != path:
                st = p.stat()
                out.append([p.name, st.st_size, st.st_mtime_ns])
    except OSError:
        pass
    return out


def key(spec: WorkerSpec, path: Path, digest: str) -> str:
    """What a verification stands on: the file's content, the files beside it, every
    option of the run (the spec), torch, compilediag and Python, and the environment
    torch reads."""
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    facts = {
        "file": str(path.resolve()),
        "sha256": digest,
        "beside": _beside(path),
        "spec": to_plain(spec),
        "torch": _torch_version(),
        "compilediag": VERSION,
        "python": sys.executable,
        "env": env,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]


@dataclass
class Verification:
    result: FixResult
    made: float  # when the dry run ended, epoch seconds
    took_s: float  # how long it ran

    def words(self) -> str:
        """`08:31 (4 min ago, it ran 387 s)`."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.made))
        ago = max(0.0, time.time() - self.made)
        since = f"{ago:.0f} s" if ago < 120 else f"{ago / 60:.0f} min" if ago < 7200 else (
            f"{ago / 3600:.0f} h"
        )  # fmt: skip
        return f"{when} ({since} ago; it ran {self.took_s:.0f} s)"


def save(k: str, result: FixResult, took_s: float) -> None:
    """Keep a verification (never fatal: a folder that can't be written costs a re-run)."""
    from compilediag.fsutil import write_atomic

    folder = cache_dir() / "fix"
    data = {"made": time.time(), "took_s": took_s, "result": to_plain(result)}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / f"{k}.json", json.dumps(data))
        kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def load(k: str) -> Verification | None:
    """The verification kept under `k`, where there is a readable one."""
    try:
        data = json.loads((cache_dir() / "fix" / f"{k}.json").read_text())
        return Verification(from_plain(FixResult, data["result"]), data["made"], data["took_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def drop(k: str) -> None:
    """A verification used: the file it was made for is patched now."""
    try:
        (cache_dir() / "fix" / f"{k}.json").unlink(missing_ok=True)
    except OSError:
        pass
