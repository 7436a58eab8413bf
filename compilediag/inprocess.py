"""The findings of `compilediag run`, for code run in this process (a notebook cell, a
test, a script that can't be started from outside):

    import compilediag

    with compilediag.capture(profile_steps="3-7") as run:
        for x, y in loader:
            train_step(x, y)
    run.report()  # the Report; in Jupyter `run` shows as HTML, in a terminal print(run)

PyTorch's structured trace is captured in memory while the block runs, and the runtime
probe counts (and in the window, times) each graph's calls; torch._dynamo.reset() first, by
default, so that what the block calls compiles inside it.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from compilediag.errors import UsageError

if TYPE_CHECKING:
    from compilediag.report.model import Report
    from compilediag.report.vocabulary import Finding


@contextmanager
def trace_in_memory() -> Iterator[io.StringIO]:
    """PyTorch's structured trace of the block, as the lines TORCH_TRACE would hold. The
    trace is ours alone meanwhile (pytest hangs its capture handlers on the logger too);
    every handler is put back afterwards, a TORCH_TRACE one included."""
    import logging

    from torch._logging._internal import TorchLogsFormatter

    trace_log = logging.getLogger("torch.__trace")
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(TorchLogsFormatter(trace=True))
    old_level, old_handlers = trace_log.level, list(trace_log.handlers)
    trace_log.setLevel(logging.DEBUG)
    trace_log.handlers = [handler]
    try:
        yield buffer
    finally:
        trace_log.handlers = old_handlers
        trace_log.setLevel(old_level)


def notebook_cells() -> dict[str, str]:
    """The files IPython compiled this session's cells into (ipykernel's
    `/tmp/ipykernel_<pid>/<hash>.py`), each named as IPython names it in a traceback:
    `In[3]`; none outside IPython."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    numbers = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    return {file: f"In[{n}]" for file, n in numbers.items() if isinstance(n, int)}


def renamed(text: str, names: dict[str, str]) -> str:
    """The trace `text` with each file of `names` named by its value (a cell's file by the
    cell, `In[3]`). A payload that names one keeps its md5 right: torch states each
    payload's md5 in its record, and the parser drops a payload that doesn't match it (a
    break's reason, its GB id, its frames and its hints with it); a payload that didn't
    match before the renaming still doesn't."""
    import hashlib
    import re

    if not names:
        return text

    def sub(line: str) -> str:
        for file, name in names.items():
            line = line.replace(file, name)
        return line

    def md5(payload: list[str]) -> str:
        joined = "".join(p[1:] for p in payload)  # each payload line: a tab, text, newline
        joined = joined[:-1] if joined.endswith("\n") else joined
        return hashlib.md5(joined.encode("utf-8", "replace")).hexdigest()

    lines, out, i = text.splitlines(keepends=True), [], 0
    while i < len(lines):
        j = i + 1
        while j < len(lines) and lines[j].startswith("\t"):
            j += 1
        head, payload = lines[i], lines[i + 1 : j]
        new_head, new_payload = sub(head), [sub(p) for p in payload]
        stated = re.search(r'"has_payload": "([0-9a-f]{32})"', head)
        if new_payload != payload and stated and md5(payload) == stated[1]:
            new_head = new_head.replace(stated[1], md5(new_payload))
        out += [new_head, *new_payload]
        i = j
    return "".join(out)


class Capture:
    """What a `capture()` block compiled and ran; its Report is built on first use."""

    def __init__(self, probe: Any) -> None:
        self._probe = probe
        self._buffer: io.StringIO | None = None
        self._wall_s = 0.0
        self._report: Report | None = None

    def report(self) -> Report:
        if self._report is None:
            self._report = self._build()
        return self._report

    def _build(self) -> Report:
        import linecache

        import torch

        from compilediag.analysis.build import build_report
        from compilediag.analysis.step.runtime import JobRun
        from compilediag.harness.bootstrap._compilediag_runtime.facts import process_facts
        from compilediag.harness.worker_types import ProcessRuntime
        from compilediag.report.model import Environment, Runtime, TargetInfo
        from compilediag.report.serial import from_plain
        from compilediag.report.vocabulary import Source
        from compilediag.trace.parse import parse_lines

        text = self._buffer.getvalue() if self._buffer is not None else ""
        cells = {file: cell for file, cell in notebook_cells().items() if file in text}
        for file, cell in cells.items():  # a cell's code as the notebook names it
            if file in linecache.cache:  # its source, for the lines the report quotes
                linecache.cache[cell] = linecache.cache[file]
        log = parse_lines(io.StringIO(renamed(text, cells)), path="<in-process>")
        process = from_plain(ProcessRuntime, process_facts(self._probe))
        cells = notebook_cells()  # (a cell Dynamo traced names no file the trace does)
        for f in process.tracing.functions if process.tracing else []:
            f.file = cells.get(f.file, f.file)
        env = Environment(
            source=Source.IN_PROCESS, torch=torch.__version__,
            backend=", ".join(process.backends), device=", ".join(process.devices), mode="",
        )  # fmt: skip
        job = Runtime(exit_code=0, wall_s=round(self._wall_s, 3))
        # the probe ran in this process, so no call counted means no compiled graph ran in
        # the block: no runtime (a `run` job's without counts is one the probe never reached)
        counted = bool(process.calls)
        report = build_report(
            [log], None, TargetInfo(path="<in-process>"), environment=env,
            run=JobRun(job, [process]) if counted else None,
        )  # fmt: skip
        if not counted and not log.records:
            report.notes.insert(0, nothing_ran(self._wall_s))
        return report

    def __str__(self) -> str:
        from compilediag.render import render

        return render(self.report(), "table", width=100)

    def _repr_html_(self) -> str:  # Jupyter
        from compilediag.render import render

        return render(self.report(), "html")


def nothing_ran(wall_s: float) -> Finding:
    """The note of a capture() block in which nothing compiled ran."""
    from compilediag.render import seconds
    from compilediag.report.vocabulary import Finding, FindingKind, Severity

    return Finding(
        FindingKind.NOTHING_COMPILED,
        f"nothing was compiled or called inside the capture() block (it ran for "
        f"{seconds(wall_s)}).",
        Severity.WARNING,
        fix="Call the compiled model inside the `with` block: `with compilediag.capture() as "
        "run: model(x)`, model being what torch.compile returned.",
    )


@contextmanager
def capture(*, profile_steps: str | None = None, reset: bool = True) -> Iterator[Capture]:
    """Capture what the block compiles and runs, as `compilediag run` reports a job:

        with compilediag.capture(profile_steps="3-7") as run:
            for x, y in loader:
                train_step(x, y)
        run.report()  # the Report; in Jupyter `run` shows as HTML, in a terminal print(run)

    profile_steps: "A-B" times steps A to B, counted from 1 (the block's optimizer steps;
        without one, calls of the first compiled model or function it calls): each step in
        parts, then the kernels of the steps after them. None (the default): no timing.
    reset: torch._dynamo.reset() first (the default), so that what the block calls
        compiles inside it; False keeps what was compiled before the block, which then
        shows neither in the trace nor in the calls.

    Call the compiled model inside the `with` block: what runs after it is not captured.
    A bad argument raises compilediag.errors.UsageError (a DiagError) naming the fix.
    Imports torch only when called."""
    probe_window = _window(profile_steps)
    if not isinstance(reset, bool):
        raise UsageError(f"reset={reset!r} is not a bool: pass reset=True or reset=False.")
    import torch

    from compilediag.harness.bootstrap._compilediag_runtime import Probe, install

    probe = Probe(probe_window)
    run = Capture(probe)
    if reset:
        torch._dynamo.reset()
    start = time.perf_counter()
    with trace_in_memory() as buffer:
        undo = install(probe)
        try:
            yield run
        finally:
            undo()
            run._buffer = buffer
            run._wall_s = time.perf_counter() - start


def _window(profile_steps: object) -> tuple[int, int] | None:
    """capture()'s `profile_steps` as steps (A, B), or a UsageError naming the fix."""
    if profile_steps is None:
        return None
    from compilediag.harness.bootstrap._compilediag_runtime import parse_window

    bad = UsageError(
        f"profile_steps={profile_steps!r} is not a range of steps A-B, 1 <= A <= B: e.g. "
        'profile_steps="3-7" (the block\'s optimizer steps; without one, calls of the first '
        "compiled model or function it calls)."
    )
    if not isinstance(profile_steps, str):
        raise bad
    try:
        return parse_window(profile_steps)
    except ValueError:
        raise bad from None
