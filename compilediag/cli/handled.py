"""How a command ends: every DiagError as one short paragraph on stderr and its exit
code; Ctrl-C, SIGTERM and SIGHUP with the worker stopped and its temporary files gone."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

from compilediag.errors import INTERRUPTED, DiagError


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a CI job cancelled, a closed terminal): the run ends as Ctrl-C
    ends it, its worker stopped and its temporary files gone (a look found a worker left
    running 10 minutes after a TERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _terminated(signum: int, frame: object) -> None:
    if os.getpid() != _OWNER[0]:  # a child forked before _default_in_child could run
        _default_in_child()
        os.kill(os.getpid(), signum)
        return
    raise Terminated(signum)


def _default_in_child() -> None:
    """A child forked under the handler (`report`'s rank-folding pool, which its pool ends
    with SIGTERM) takes the signals' own ends, as before the handler: a Python handler
    runs only between bytecodes, and a worker that the signal reached just before it
    blocked on its queue's lock slept there, its pool joining it (1 run in 6 of a 1024-rank
    report hung; a CI run's `run` folding its ranks, 3 times)."""
    for s in SIGNALS:
        if signal.getsignal(s) is _terminated:
            signal.signal(s, signal.SIG_DFL)


_OWNER = [0]  # the process that installed the handler
os.register_at_fork(after_in_child=_default_in_child)


@contextmanager
def handled() -> Iterator[None]:
    """Every DiagError ends as one short paragraph on stderr and its exit code; SIGTERM and
    SIGHUP as Ctrl-C does, with the shell's code for the signal (128 + its number)."""
    _OWNER[0] = os.getpid()
    # a signal ignored on entry stays so (`nohup compilediag run ...` outlives its terminal)
    kept = {
        s: signal.signal(s, _terminated)
        for s in SIGNALS
        if signal.getsignal(s) is not signal.SIG_IGN
    }
    try:
        yield
    except DiagError as e:
        from compilediag.cli.progress import say

        for line in e.render().splitlines():  # (each wrapped to a terminal's width)
            say(line)
        raise typer.Exit(e.exit_code) from None
    except Terminated as e:
        typer.echo(f"terminated ({signal.Signals(e.signum).name}).", err=True)
        raise typer.Exit(128 + e.signum) from None
    except KeyboardInterrupt:
        typer.echo("interrupted.", err=True)
        raise typer.Exit(INTERRUPTED) from None
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)


def call(command: Callable[[], int]) -> NoReturn:
    """Run a command: its exit code, or its error's, as typer's exit."""
    with handled():
        code = command()
    raise typer.Exit(code)
