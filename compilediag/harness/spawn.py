"""Starting a worker process: in a private folder, traced, and for a run command possibly
before the CLI has parsed its options (an early worker). Imports nothing but the standard
library, so the CLI can call it first thing."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from compilediag.harness.launch import Child, start

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)

RUN_COMMANDS = frozenset({"explain", "recompiles", "dump-kernels", "fix"})


@dataclass
class _Early:
    """A worker started before the options were parsed, waiting on its stdin for "go"."""

    child: Child
    work: Path
    cold: bool
    claimed: bool = False  # its folder was handed to a run
    used: bool = False  # it was given a spec (or stopped for want of the right one)


_early: _Early | None = None
_lock = threading.Lock()


def start_early(argv: list[str]) -> None:
    """Start the worker of a run command before typer parses the options: its torch import
    (1-2 s) then overlaps the CLI's own start (0.2-0.3 s: typer, pydantic, the option
    checks) instead of following it. It waits for the spec; on a usage error, or when the
    run needs another environment than the one it was started with, it is stopped unused."""
    global _early
    if not argv or argv[0] not in RUN_COMMANDS or {"--help", "-h"} & set(argv):
        return
    cold = "--cold" in argv  # the one option that changes the worker's environment
    work = Path(tempfile.mkdtemp(prefix="compilediag-"))
    try:
        child = spawn(work, cold, early=True)
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
        return
    _early = _Early(child, work, cold)
    atexit.register(_drop_early)


def _drop_early() -> None:
    early = _early
    if early is None:
        return
    if not early.used:
        early.child.kill()
    if not early.claimed:
        shutil.rmtree(early.work, ignore_errors=True)


@contextmanager
def workdir() -> Iterator[Path]:
    """A private folder for one run: the early worker's, the first time one is asked for."""
    with _lock:
        early = _early if _early is not None and not _early.claimed else None
        if early is not None:
            early.claimed = True
    d = early.work if early else Path(tempfile.mkdtemp(prefix="compilediag-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def spawn(work: Path, cold: bool, early: bool = False, cache: str = "") -> Child:
    """Start `python -m compilediag.harness.worker WORK`, traced into WORK/trace, its output going
    to WORK/worker.log. An early worker waits on its stdin for the spec. `cache`: torch's
    caches in that folder (--try-fixes' cold and warm compiles)."""
    (work / "trace").mkdir(exist_ok=True)
    env = dict(os.environ)
    env["TORCH_TRACE"] = str(work / "trace")
    env["PYTHONUNBUFFERED"] = "1"
    # torch's caches, cache keys and temp folder stay as the user has them: the compile is
    # the one they get (Inductor's provenance level and the temp folder both change what
    # torch compiles or finds; kernels are mapped to lines from the trace instead). A cold
    # compile (--cold) gets private, empty caches that go away with the run.
    if cold or cache:
        env.update(private_caches(Path(cache) if cache else work / "cold-cache"))
    env["PYTHONPATH"] = with_package(env)
    argv = [sys.executable, "-m", "compilediag.harness.worker", str(work)]
    with open(work / "worker.log", "wb") as log:
        return start(  # in a session of its own: a timeout stops the model's children too
            argv + ["--early"] if early else argv,
            env,
            stdin=subprocess.PIPE if early else subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def private_caches(folder: Path) -> dict[str, str]:
    """torch's compile caches in `folder`, not the user's: the environment that says so."""
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"),
        "TRITON_CACHE_DIR": str(folder / "triton"),
    }


def with_package(env: dict[str, str]) -> str:
    """PYTHONPATH with compilediag's own folder first: a child imports this compilediag."""
    return os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)


def take_early(work: Path, cold: bool) -> Child | None:
    """The early worker started in `work`, told to go, if it was started for this run."""
    with _lock:
        early = _early if _early is not None and _early.work == work and not _early.used else None
        if early is not None:
            early.used = True
    if early is None:
        return None
    if early.cold != cold:  # started with other caches than this run needs: start afresh
        early.child.kill()
        shutil.rmtree(work / "trace", ignore_errors=True)
        return None
    stdin = early.child.stdin
    assert stdin is not None
    try:
        stdin.write(b"go\n")
        stdin.close()
    except OSError:  # it died importing torch: the runner reports how, from its log
        pass
    return early.child
