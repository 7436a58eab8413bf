"""The training loop's lines, timed by line events on the loop's own code (in the window
itself on Python 3.12+, else over the steps after it: window_reads.py): each line's time runs from its line event to the next one of the same code (or its
return), so the lines of the loop add up to its steps, by the job's own clock. Only the
loop's code (and the user's functions a training call ran under it: Lightning's
training_step) gets events; what they call runs untouched.

On Python 3.12 and later: sys.monitoring's local LINE and PY_RETURN events on those code
objects alone. Before 3.12: a trace function that declines every other frame at its call
(its only cost there: one Python call per function call, on the steps' thread), and
traces the frames of those code objects line by line.

(Before this, Python's profiler ran on the loop over the kernel profile's steps: it
stretched a Python loop 4-8 times, and torch.profiler's steps are not the window's.)"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from .torch_state import _frames_compiled

TOOL_NAME = "compilediag"


class LineClock:
    """Time spent at each line of `codes` (code objects), per step of the window."""

    def __init__(self, codes: set[Any], loop: Any, running: list[Any]) -> None:
        self.codes = codes
        self.loop = loop  # the loop's code (the frame that spans the steps)
        self._running = running  # frames of those codes already under way (the loop's)
        self.step: int | None = None
        # per step: (code, line) -> seconds; a line at which a part of the step started
        self.spent: dict[int, dict[tuple[Any, int], float]] = {}
        self.torch_lines: set[tuple[Any, int]] = set()  # lines under which a part ran
        self._at: dict[Any, tuple[int, float]] = {}  # per code: its current line and since
        self._thread = threading.get_ident()
        self._compiles = (
            0  # torch's frame count at the step's start: a step it moved in is no step's
        )
        self._tool: int | None = None
        self._on = False

    # -- switching on and off ---------------------------------------------------------

    def start(self, step: int) -> None:
        self.step = step
        self._compiles = _frames_compiled()
        _unseen_by_dynamo(
            self._global, self._local, self._moved, self._add, self._line_event,
            self._return_event,
        )  # fmt: skip
        now = time.perf_counter()
        for frame in self._running:
            self._at[frame.f_code] = (frame.f_lineno, now)
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None:
            self._start_monitoring(monitoring)
        elif sys.gettrace() is None:  # a job that traces itself (a debugger) is left alone
            for frame in self._running:
                frame.f_trace_lines = True
                frame.f_trace = self._local
            sys.settrace(self._global)
            self._on = True

    def _start_monitoring(self, monitoring: Any) -> None:
        tool = next((i for i in range(5, 0, -1) if monitoring.get_tool(i) is None), None)
        if tool is None:
            return
        monitoring.use_tool_id(tool, TOOL_NAME)
        events = monitoring.events
        monitoring.register_callback(tool, events.LINE, self._line_event)
        monitoring.register_callback(tool, events.PY_RETURN, self._return_event)
        for code in self.codes:
            monitoring.set_local_events(tool, code, events.LINE | events.PY_RETURN)
        self._tool = tool
        self._on = True

    def stop(self) -> None:
        if not self._on:
            return
        self._on = False
        self.next_step(None)
        monitoring = getattr(sys, "monitoring", None)
        if self._tool is not None and monitoring is not None:
            for code in self.codes:
                monitoring.set_local_events(self._tool, code, 0)
            monitoring.register_callback(self._tool, monitoring.events.LINE, None)
            monitoring.register_callback(self._tool, monitoring.events.PY_RETURN, None)
            monitoring.free_tool_id(self._tool)
            self._tool = None
        elif sys.gettrace() == self._global:
            sys.settrace(None)
            for frame in self._running:
                frame.f_trace = None
        self._running = []

    # -- the clock --------------------------------------------------------------------

    def next_step(self, step: int | None) -> None:
        """A step ends where the next begins (None: the clock stops): each code's current
        line is cut there, its time so far the ending step's (none, where torch compiled
        in that step)."""
        now = time.perf_counter()
        for code, (line, since) in list(self._at.items()):
            self._add(code, line, now - since)
            self._at[code] = (line, now)
        compiles = _frames_compiled()
        if compiles != self._compiles and self.step is not None:  # torch compiled in it
            self.spent.pop(self.step, None)
        self._compiles = compiles
        self.step = step

    def part_started(self) -> None:
        """A part of the step (the model's call, backward, the optimizer, a batch) starts:
        the lines under way are torch's (where the loop calls the model or the optimizer)."""
        for code, (line, _) in self._at.items():
            self.torch_lines.add((code, line))

    def _add(self, code: Any, line: int, seconds: float) -> None:
        if self.step is None:
            return
        spent = self.spent.setdefault(self.step, {})
        spent[(code, line)] = spent.get((code, line), 0.0) + seconds

    def _moved(self, code: Any, line: int | None) -> None:
        if threading.get_ident() != self._thread:
            return
        now = time.perf_counter()
        was = self._at.pop(code, None)
        if was is not None:
            self._add(code, was[0], now - was[1])
        if line is not None:
            self._at[code] = (line, now)

    def _line_event(self, code: Any, line: int) -> Any:
        self._moved(code, line)

    def _return_event(self, code: Any, offset: int, value: Any) -> Any:
        self._moved(code, None)

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code in self.codes:
            return self._local
        return None

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self._moved(frame.f_code, frame.f_lineno)
        elif event == "return":
            self._moved(frame.f_code, None)
        return self._local

    # -- what it read -----------------------------------------------------------------

    def facts(self) -> list[dict[str, Any]]:
        """Each line timed: its file, line, function, whether it is the loop's, whether a
        part of the step ran under it (torch's: the model, backward, the optimizer, a
        batch), and its ms in each step."""
        lines: dict[tuple[Any, int], dict[str, Any]] = {}
        for step, spent in self.spent.items():
            for (code, line), seconds in spent.items():
                row = lines.setdefault(
                    (code, line),
                    {"file": code.co_filename, "line": line,
                     "function": getattr(code, "co_qualname", code.co_name),
                     "loop": code is self.loop, "torch": (code, line) in self.torch_lines,
                     "ms": {}},
                )  # fmt: skip
                row["ms"][str(step)] = round(seconds * 1e3, 6)
        return list(lines.values())


def _unseen_by_dynamo(*functions: Any) -> None:
    """The clock's own functions, skipped by Dynamo ahead: called while a compiled region
    runs, each would otherwise be a frame Dynamo looks at once and skips, which its frame
    counter counts (and the probe reads as a compile in that step)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    skip_code = getattr(eval_frame, "skip_code", None)
    if skip_code is None:
        return
    for fn in functions:
        try:
            skip_code(fn.__code__)
        except Exception:  # noqa: BLE001 - a torch whose frame strategies differ: counted once
            continue
