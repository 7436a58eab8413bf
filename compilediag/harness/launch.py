"""Starting a child process and seeing it to its end: the one launcher of compilediag's
worker and of a user's own command (`run --`).

A child gets a session of its own, so that a signal reaches everything it started (a
launcher and its workers, a model's own subprocesses) through its process group, and
compilediag outlives it to write the report. How it ended comes back typed (`Completion`).
Standard library only."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import IO, Any

from compilediag.errors import UsageError

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# after this many Ctrl-C, the job is killed outright (one that ignores SIGINT, or hangs)
KILL_AFTER = 3
POLL_S = 0.05
KILL_GRACE_S = 2.0  # from SIGINT to SIGKILL when a child is stopped


# every signal compilediag was sent and passed on to a child, in this process
RECEIVED: list[int] = []


def stopped_by() -> int:
    """The shell's exit code for the first signal compilediag passed on to a child (130 for
    Ctrl-C, 143 for SIGTERM), else 0: a command that ran several children (`run
    --try-fixes`' rounds) ends with it, whichever child it reached."""
    return 128 + RECEIVED[0] if RECEIVED else 0


@dataclass
class Completion:
    returncode: int | None  # None: ended by a signal, or stopped at its time limit
    signal: str  # the signal's name, when one ended it
    by: int  # the signal compilediag was sent and passed on (the first), else 0
    wall_s: float
    timed_out: bool = False  # stopped (SIGKILL to its group) at its time limit

    @property
    def interrupted(self) -> bool:
        return bool(self.by)

    @property
    def signal_sent(self) -> str:
        return signal.Signals(self.by).name if self.by else ""

    @property
    def failed(self) -> bool:
        return self.returncode != 0

    def how(self) -> str:
        if self.timed_out:
            return "was stopped at its time limit"
        if self.signal:
            return f"was ended by {self.signal}"
        return f"exited with status {self.returncode}"


# a compiler's driver: the processes it starts are its passes (cc1plus, as, collect2)
DRIVERS = {"gcc", "g++", "c++", "cc", "clang", "clang++"}


def group_members(pgid: int) -> dict[int, tuple[str, str, int]]:
    """The processes of process group `pgid`, from /proc: pid -> (name, state, parent's
    pid); {} where /proc can't say."""
    found = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            # pid (name) state ppid pgrp ...: the name may hold spaces and parentheses
            name = stat[stat.find(b"(") + 1 : stat.rfind(b")")].decode(errors="replace")
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 2 and int(fields[2]) == pgid:
                found[int(entry)] = (name, fields[0].decode(), int(fields[1]))
    return found


def live_members(pgid: int) -> list[int]:
    """The processes of group `pgid` that have not ended (a zombie has), where /proc can
    say; else the group, if any is left, as one."""
    if not os.path.isdir("/proc"):
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    return [pid for pid, (_, state, _) in group_members(pgid).items() if state != "Z"]


def _send(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def drivers(pgid: int) -> list[int]:
    """The compilers' drivers of group `pgid` still running."""
    return [
        p for p, (name, state, _) in group_members(pgid).items()
        if state != "Z" and name in DRIVERS
    ]  # fmt: skip


def compiler_passes(pgid: int) -> list[int]:
    """The processes of group `pgid` a compiler's driver started (cc1plus, as)."""
    members = group_members(pgid)
    return [
        pid for pid, (name, state, parent) in members.items()
        if state != "Z" and name not in DRIVERS and members.get(parent, ("",))[0] in DRIVERS
    ]  # fmt: skip


@dataclass
class Child:
    """A started child process, in a session of its own."""

    proc: subprocess.Popen[bytes]
    started: float

    @property
    def stdin(self) -> IO[bytes] | None:
        return self.proc.stdin

    def signal(self, sig: int) -> None:
        """Send `sig` to the child and everything it started."""
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self, grace: float = KILL_GRACE_S) -> None:
        """Stop the child and everything it started, and reap it: SIGINT first, as a Ctrl-C
        in the user's own run would, so that what it started cleans up after itself (gcc
        removes its temp files, Python its temporary folders, from the user's temp folder),
        then SIGKILL to whatever is left after `grace` seconds. Where a compiler runs (gcc's
        driver and its passes: cc1plus, as), the group is frozen first, so that nothing
        starts another compile; the passes are killed, and the drivers told before the rest:
        each deletes the temp files it named, and no pass can write one again (a pass just
        started, or a compile the job started after its driver ended, left its cc*.s in the
        temp folder in 4 runs of 8 on a loaded machine)."""
        deadline = time.monotonic() + grace
        frozen = bool(drivers(self.proc.pid))
        if frozen:
            self.signal(signal.SIGSTOP)
            for pid in compiler_passes(self.proc.pid):
                _send(pid, signal.SIGKILL)
            compilers = drivers(self.proc.pid)
            for pid in compilers:
                _send(pid, signal.SIGINT)
                _send(pid, signal.SIGCONT)
            while compilers and time.monotonic() < deadline - grace / 2:
                compilers = [p for p in compilers if p in drivers(self.proc.pid)]
                time.sleep(0.01)
        self.signal(signal.SIGINT)
        if frozen:
            self.signal(signal.SIGCONT)
        while time.monotonic() < deadline:
            self.proc.poll()  # reap the child, so that an empty group reads as empty
            if not live_members(self.proc.pid):  # (a zombie no one reaps is gone)
                break
            time.sleep(0.02)
        self.signal(signal.SIGKILL)
        self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()

    def wait(
        self,
        timeout: float | None = None,
        poll: Callable[[], None] | None = None,
        forward_signals: bool = False,
    ) -> Completion:
        """Wait for the child's end. `timeout`: stop it after so many seconds; `poll`:
        called while it runs (every POLL_S); `forward_signals`: signals sent to
        compilediag meanwhile go to the child's group (a third Ctrl-C kills it)."""
        received: list[int] = []

        def forward(signum: int, frame: FrameType | None) -> None:
            received.append(signum)
            RECEIVED.append(signum)
            self.signal(signal.SIGKILL if received.count(signal.SIGINT) >= KILL_AFTER else signum)

        # a signal ignored on entry stays so (a background job of a shell without job
        # control ignores Ctrl-C, and its child did: the job ran on, and its end read
        # "exited with status 0" beside "was interrupted")
        previous = {
            s: signal.signal(s, forward)
            for s in (FORWARDED if forward_signals else ())
            if signal.getsignal(s) is not signal.SIG_IGN
        }
        timed_out = False
        try:
            # blocked in waitpid, a signal another thread takes is handled only once the
            # child ends: a child waiting for that signal would never end. Polled instead
            # wherever signals are forwarded.
            if timeout is None and poll is None and not forward_signals:
                rc: int | None = self.proc.wait()
            else:
                deadline = None if timeout is None else time.monotonic() + timeout
                while (rc := self.proc.poll()) is None:
                    if poll is not None:
                        poll()
                    if deadline is not None and time.monotonic() > deadline:
                        self.kill()
                        timed_out, rc = True, self.proc.returncode
                        break
                    time.sleep(POLL_S)
                if poll is not None:
                    poll()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            if received:  # what the job left running when it was told to stop
                self.signal(signal.SIGKILL)
        assert rc is not None
        name = ""
        if rc < 0 and not timed_out:
            name = (
                signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            )
        return Completion(
            returncode=None if rc < 0 or timed_out else rc,
            signal=name,
            by=received[0] if received else 0,
            wall_s=time.monotonic() - self.started,
            timed_out=timed_out,
        )


def start(argv: list[str], env: Mapping[str, str], cwd: str | None = None, **io: Any) -> Child:
    """Start `argv` in a session of its own (`io`: stdin, stdout, stderr as for Popen)."""
    proc = subprocess.Popen(argv, env=dict(env), cwd=cwd, start_new_session=True, **io)
    return Child(proc, time.monotonic())


def launch(
    argv: list[str], env: Mapping[str, str], cwd: str | None = None, stdout: int | None = None,
    stderr: int | None = None,
) -> Completion:  # fmt: skip
    """Run a user's command to its end; signals sent to compilediag meanwhile go to the
    job. Its output goes where compilediag's goes (`stdout`, `stderr`: other file
    descriptors)."""
    try:
        child = start(argv, env, cwd, stdout=stdout, stderr=stderr)
    except FileNotFoundError:
        raise UsageError(
            f"{argv[0]}: command not found.",
            hint="Give the command as you would run it, after `--`: "
            "compilediag run -- python train.py",
        ) from None
    except PermissionError:
        raise UsageError(f"{argv[0]}: permission denied.", hint="Is it executable?") from None
    return child.wait(forward_signals=True)
