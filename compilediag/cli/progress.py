"""The live line on stderr while a command runs a model: the phase it is in (importing
torch, compiling, each timing block, each of fix's verification runs) and the time since
it began. Only where stderr is a terminal (and not under CI): piped, a command writes no
progress at all, so stderr holds what went wrong and nothing else."""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import Any


def show_progress() -> bool:
    """Progress goes to stderr whenever it is a terminal, whatever the format: stdout may
    be a file (`--format json > baseline.json`) while the user watches."""
    return sys.stderr.isatty() and not os.environ.get("CI")


def say(text: str) -> None:
    """A line of what a command found or does, on stderr: on a terminal, wrapped to its
    width (the next lines indented); piped, one line each, as grep and a log read them
    (a --try-fixes plan ran to 554 columns on a new user's terminal)."""
    if sys.stderr.isatty():
        import shutil
        import textwrap

        width = shutil.get_terminal_size((100, 24)).columns
        if len(text) > width:
            text = textwrap.fill(
                text, width, subsequent_indent="  ", break_long_words=False,
                break_on_hyphens=False,
            )  # fmt: skip
    print(text, file=sys.stderr, flush=True)


def stage_text(stage: str) -> str:
    # the worker's last stage is "done"; what the user waits for then is our part
    return "building the report" if stage == "done" else stage


class Live:
    """One live line (rich's spinner, the phase, the time since it began), gone when the
    command ends; `say` keeps a line above it. Off where stderr is no terminal: then every
    call does nothing. `label` goes before each phase (`verifying line 18's patch (1 of
    2)`), set with `phase`."""

    def __init__(self, first: str = "starting the worker") -> None:
        self.on = show_progress()
        self.label = ""
        self._first = first
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Live:
        if self.on:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
            self._bar = Progress(*columns, console=Console(stderr=True), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task(self._first, total=None)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(kind, exc, tb)
            self._bar = None

    def stage(self, text: str) -> None:
        """The worker's stage (or ours), shown at once: a short one is still seen."""
        if self._bar is not None:
            shown = stage_text(text)
            if self.label:
                shown = f"{self.label}: {shown}"
            self._bar.update(self._task, description=shown, refresh=True)

    def phase(self, label: str, first: str = "starting the worker") -> None:
        """A new phase of the command (one of fix's runs): its label, and its first stage."""
        self.label = label
        self.stage(first)

    def say(self, text: str) -> None:
        """A line kept above the live one (what a phase found): on a terminal only."""
        if self._bar is not None:
            self._bar.console.print(text, highlight=False, markup=False)
