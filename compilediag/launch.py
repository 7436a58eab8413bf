"""Running a user's command as a child process: its own output passed through live,
Ctrl-C and SIGTERM passed on to everything it started, and how it ended, typed.

The child gets a session of its own, so that a signal reaches the whole job (a launcher
and its workers) through its process group, and compilediag outlives it to write the
report. Standard library only."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType

from compilediag.errors import UsageError

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# after this many Ctrl-C, the job is killed outright (one that ignores SIGINT, or hangs)
KILL_AFTER = 3


@dataclass
class Completion:
    returncode: int | None  # None: ended by a signal
    signal: str  # the signal's name, when one ended it
    interrupted: bool  # compilediag was sent a signal and passed it on
    wall_s: float

    @property
    def failed(self) -> bool:
        return self.returncode != 0

    def how(self) -> str:
        if self.signal:
            return f"was ended by {self.signal}"
        return f"exited with status {self.returncode}"


def launch(
    argv: list[str], env: Mapping[str, str], cwd: str | None = None, stdout: int | None = None
) -> Completion:
    """Run `argv` to its end; signals sent to compilediag meanwhile go to the job. Its
    output goes where compilediag's goes (`stdout`: another file descriptor for it)."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, env=dict(env), cwd=cwd, stdout=stdout, start_new_session=True)
    except FileNotFoundError:
        raise UsageError(
            f"{argv[0]}: command not found.",
            hint="Give the command as you would run it, after `--`: "
            "compilediag run -- python train.py",
        ) from None
    except PermissionError:
        raise UsageError(f"{argv[0]}: permission denied.", hint="Is it executable?") from None
    received: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        sig = signal.SIGKILL if received.count(signal.SIGINT) >= KILL_AFTER else signum
        _signal_group(proc.pid, sig)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        rc = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if received:  # what the job left running when it was told to stop
            _signal_group(proc.pid, signal.SIGKILL)
    name = ""
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
    return Completion(
        returncode=None if rc < 0 else rc,
        signal=name,
        interrupted=bool(received),
        wall_s=time.monotonic() - start,
    )


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
