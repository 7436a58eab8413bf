"""The training loop's lines, timed in the window's own steps by the job's own clock, at no
cost to them, so that the lines of the loop add up to its steps:

- Python 3.12 and later (LineClock): sys.monitoring's local LINE and PY_RETURN events on
  the loop's code object alone (and the user's functions a training call ran under it:
  Lightning's training_step); what they call runs untouched. A line's time runs from its
  event to the next one of the same code (or its return).
- Before 3.12 (MarkClock) a trace function would cost a Python call at every function
  call on the steps' thread (a 0.5 ms step of a compiled MLP took 2 ms; a Python
  tokenizer's list comprehensions 2.7x), so none is used: the loop frame's current line
  is read at each mark the probe makes anyway (each part's start and end: the model's
  call, backward, the optimizer, a DataLoader's batch) and at each step's start. Time
  between two reads on one line is that line's; time that spans lines goes to the lines run
  between them, and to the end of the line it began on and the start of the one it ended
  on, as the step before the window shared its time among them, else to the one line run
  between them that calls a Python function of the user's or a library's (get_batch), else
  to the line the interval began on. Which lines run between
  two reads is learnt in the step before the window, traced line by line (its cost is in
  that step alone, which no figure takes).

(Before #66, Python's profiler ran on the loop over the kernel profile's steps: it stretched
a Python loop 4-8 times, and torch.profiler's steps are not the window's.)"""

from __future__ import annotations

import ast
import builtins
import linecache
import os
import sys
import sysconfig
import threading
import time
from typing import Any

from .torch_state import _frames_compiled

TOOL_NAME = "compilediag"
MAX_PATH = 100_000  # the loop's lines kept of the step before the window
# a line's end after its last mark (its start before its first) takes at most this many
# times what it took in the step before the window (MarkClock._capped)
EDGE = 3.0


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
        self._compiles = 0  # torch's frame count at the step's start (a compile drops it)
        self._tool: int | None = None

    def start(self, step: int) -> None:
        self.step = step
        self._compiles = _frames_compiled()
        _unseen_by_dynamo(self._moved, self._add, self._line_event, self._return_event)
        now = time.perf_counter()
        for frame in self._running:
            self._at[frame.f_code] = (frame.f_lineno, now)
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        tool = next((i for i in range(5, 0, -1) if monitoring.get_tool(i) is None), None)
        if tool is None:  # every tool id taken (a debugger, coverage, a profiler): none timed
            return
        monitoring.use_tool_id(tool, TOOL_NAME)
        events = monitoring.events
        monitoring.register_callback(tool, events.LINE, self._line_event)
        monitoring.register_callback(tool, events.PY_RETURN, self._return_event)
        for code in self.codes:
            monitoring.set_local_events(tool, code, events.LINE | events.PY_RETURN)
        self._tool = tool

    def stop(self) -> None:
        self.next_step(None)
        if self._tool is not None:
            monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
            for code in self.codes:
                monitoring.set_local_events(self._tool, code, 0)
            monitoring.register_callback(self._tool, monitoring.events.LINE, None)
            monitoring.register_callback(self._tool, monitoring.events.PY_RETURN, None)
            monitoring.free_tool_id(self._tool)
            self._tool = None
        self._running = []

    def next_step(self, step: int | None) -> None:
        """A step ends where the next begins (None: the clock stops): each code's current
        line is cut there, its time so far the ending step's (none, where torch compiled in
        that step)."""
        now = time.perf_counter()
        for code, (line, since) in list(self._at.items()):
            self._add(code, line, now - since)
            self._at[code] = (line, now)
        self._step_over(step)

    def _step_over(self, step: int | None) -> None:
        compiles = _frames_compiled()
        if compiles != self._compiles and self.step is not None:  # torch compiled in it
            self.spent.pop(self.step, None)
        self._compiles = compiles
        self.step = step

    def mark(self, entered: bool) -> None:
        """A part of the step (the model's call, backward, the optimizer, a batch) starts
        (`entered`) or ends: the lines under way where one starts are torch's."""
        if entered:
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


class MarkClock(LineClock):
    """Before Python 3.12: the loop frame's line read at each of the probe's marks."""

    def __init__(self, loop_frame: Any, skip: tuple[str, ...]) -> None:
        super().__init__({loop_frame.f_code}, loop_frame.f_code, [loop_frame])
        self.frame = loop_frame
        self._order = _loop_lines(loop_frame)
        self._calls = _own_calls(loop_frame, self._order, skip)  # line -> function it calls
        self._last: tuple[int, float] | None = None
        self._path: list[int] = []  # the loop's lines in the order the step before ran them
        # what each line took in the step before (its trace: slower, but alike for each)
        self._took: dict[int, float] = {}
        self._learnt_at: tuple[int, float] | None = None  # the line learnt last, since
        # per line, in the step before: the time from its line event to the first of the
        # probe's marks made on it (`heads`) and from the last to the next line (`tails`: a
        # model call's line, after the call returns, frees the step before's autograd graph
        # as it assigns the outputs: 1.6 ms of an LSTM's, which a look found given to the
        # loss's line after it)
        self._heads: dict[int, list[float]] = {}
        self._tails: dict[int, list[float]] = {}
        self._marked: float | None = None  # the last mark on the line under way, learning
        self._learning = False
        # each read: (step, the line it began on, the line now, seconds), given to a line
        # once the window is over (facts), not in the steps the job times
        self._reads: list[tuple[int, int, int, float]] = []
        self._dropped: set[int] = set()  # steps torch compiled in

    def learn(self) -> None:
        """The step before the window: the lines the loop runs, in order (a trace function
        on the loop frame; every other frame declined at its call)."""
        if sys.gettrace() is not None:  # a job that traces itself (a debugger): left alone
            return
        _unseen_by_dynamo(_decline, self._ran)
        self.frame.f_trace_lines = True
        self.frame.f_trace = self._ran
        sys.settrace(_decline)
        self._learning = True
        # the line under way (the step's start, inside the call that starts it): the end of
        # its marks is learnt, its start is not (marked already: no head of its own)
        now = time.perf_counter()
        self._learnt_at, self._marked = (self.frame.f_lineno, now), now
        self._path.append(self.frame.f_lineno)

    @property
    def learning(self) -> bool:
        return self._learning

    def _ran(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line" and len(self._path) < MAX_PATH:
            now, line = time.perf_counter(), frame.f_lineno
            if self._learnt_at is not None:
                was, since = self._learnt_at
                self._took[was] = self._took.get(was, 0.0) + now - since
                if self._marked is not None:
                    self._tails.setdefault(was, []).append(now - self._marked)
            self._learnt_at, self._marked = (line, now), None
            self._path.append(line)
        return self._ran

    def start(self, step: int) -> None:
        if self._learning:
            sys.settrace(None)
            self.frame.f_trace = None
            self._learning = False
        self.step = step
        self._compiles = _frames_compiled()
        self._last = (self.frame.f_lineno, time.perf_counter())

    def stop(self) -> None:
        if self._learning:
            sys.settrace(None)
            self.frame.f_trace = None
            self._learning = False
        self.next_step(None)
        self._running = []

    def next_step(self, step: int | None) -> None:
        self._read()
        if _frames_compiled() != self._compiles and self.step is not None:
            self._dropped.add(self.step)
        self._step_over(step)

    def mark(self, entered: bool) -> None:
        if self._learning:  # the step before the window: where on its line the mark fell
            if self._learnt_at is not None:
                now = time.perf_counter()
                if self._marked is None:
                    on, since = self._learnt_at
                    self._heads.setdefault(on, []).append(now - since)
                self._marked = now
            return
        line = self._read()
        if entered and line is not None:
            self.torch_lines.add((self.loop, line))

    def _read(self) -> int | None:
        """The loop frame's line now; the time since the last read kept with the lines it
        spans."""
        if self._last is None or threading.get_ident() != self._thread:
            return None
        now, line = time.perf_counter(), self.frame.f_lineno
        was, since = self._last
        if self.step is not None:
            self._reads.append((self.step, was, line, now - since))
        self._last = (line, now)
        return line

    def facts(self) -> list[dict[str, Any]]:
        """Each read given to its lines (the one it stayed on, or those that ran between
        two: _between), then the lines as LineClock gives them."""
        to: dict[tuple[int, int], list[tuple[int, float]]] = {}
        for step, was, line, seconds in self._reads:
            if step in self._dropped:
                continue
            if (was, line) not in to:
                to[(was, line)] = [(was, 1.0)] if was == line else self._between(was, line)
            for n, t in self._capped(was, line, seconds, to[(was, line)]):
                self._add(step, n, t)
        self._reads = []
        return super().facts()

    def _capped(
        self, a: int, b: int, seconds: float, shares: list[tuple[int, float]]
    ) -> list[tuple[int, float]]:
        """An interval's seconds by its shares, the end of `a` and the start of `b` each at
        most EDGE times what the step before spent there, the rest the lines' between (a
        step's one-off work on a line the step before did not run, a lookup table built
        on first use, is no part of the model call's line after it)."""
        given = {n: seconds * share for n, share in shares}
        inner = {n: t for n, t in given.items() if n not in (a, b)}
        if a == b or not inner:
            return list(given.items())
        learnt = {a: _mean(self._tails.get(a)), b: _mean(self._heads.get(b))}
        over = 0.0
        for n in (a, b):
            if n in given and given[n] > EDGE * learnt[n]:
                over += given[n] - EDGE * learnt[n]
                given[n] = EDGE * learnt[n]
        total = sum(inner.values())
        for n, t in inner.items():
            given[n] += over * t / total
        return list(given.items())

    def _add(self, step: int, line: int, seconds: float) -> None:
        spent = self.spent.setdefault(step, {})
        spent[(self.loop, line)] = spent.get((self.loop, line), 0.0) + seconds

    def _between(self, a: int, b: int) -> list[tuple[int, float]]:
        """The lines an interval from line `a` to line `b` goes to, with their shares: the
        lines run between them (as the step before the window ran them; else in the loop's
        order, round the loop where b comes first), as they shared the step before's time
        (a loop that calls `clock()` around `make_batch()`; the loss's line and zero_grad's
        between the model's call and backward: a look found their time given to the
        model's line; a parameter update's lines beside `get_batch()`: a look found them
        given to get_batch, 0.09 ms against the job's 0.03), with the end of `a` after its
        last mark and the start of `b` before its first (a model call's line frees the step
        before's autograd graph as it assigns the outputs: a look found an LSTM's 1.6 ms
        given to the loss's line after it); where that step did not run `a` or timed none of
        it, the one line among them that calls a function of the user's or a library's,
        else `a`."""
        ran = self._ran_between(a, b)
        own = sorted({n for n in ran if (self.loop, n) not in self.torch_lines})
        took = {n: self._took.get(n, 0.0) for n in own}
        tail = _mean(self._tails.get(a))
        if a not in self._path or sum(took.values()) + tail <= 0:  # not the step before's way
            calling = [n for n in own if n in self._calls]  # (a GAN's sample images, saved in
            return [(calling[0] if len(calling) == 1 else a, 1.0)]  # an epoch's first step)
        took[a] = took.get(a, 0.0) + tail
        took[b] = took.get(b, 0.0) + _mean(self._heads.get(b))
        total = sum(took.values())
        return [(n, t / total) for n, t in took.items() if t > 0]

    def _ran_between(self, a: int, b: int) -> list[int]:
        path = self._path
        if a in path:
            # the path is one step of the loop, which runs round: b after a, or from the
            # path's start where the step before ran a last (its optimizer's end)
            i = path.index(a)
            j = next((k for k in range(i + 1, len(path)) if path[k] == b), None)
            if j is not None:
                return path[i + 1 : j]
            if b in path[:i]:
                return path[i + 1 :] + path[: path.index(b)]
        order = self._order
        if a not in order or b not in order:
            return []
        i, j = order.index(a), order.index(b)
        return order[i + 1 : j] if i < j else order[i + 1 :] + order[:j]


def _mean(values: list[float] | None) -> float:
    return sum(values) / len(values) if values else 0.0


def _loop_lines(frame: Any) -> list[int]:
    """The lines of the innermost `for` or `while` of the frame's code that holds the line
    the frame is at (the training loop), in order; the code's every line where none is
    found (a loop at module level read from a file that changed). Going round it from one
    read's line to the next never passes the set-up before the loop (a call of the user's
    there, `fsdp1(model)`, is no candidate for the step's time)."""
    lines = sorted({n for _, _, n in frame.f_code.co_lines() if n})
    try:
        source = "".join(linecache.getlines(frame.f_code.co_filename))
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return lines
    at = frame.f_lineno
    loops = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.For, ast.While))
        and node.lineno <= at <= (node.end_lineno or node.lineno)
        and lines
        and node.lineno >= lines[0]
    ]
    if not loops:
        return lines
    loop = max(loops, key=lambda node: node.lineno)  # the innermost
    inside = [n for n in lines if loop.lineno <= n <= (loop.end_lineno or loop.lineno)]
    return inside or lines


def installed(path: str) -> bool:
    """An installed package's code (a framework's, a library's)."""
    return any(f"{os.sep}{d}{os.sep}" in path for d in ("site-packages", "dist-packages"))


def _decline(frame: Any, event: str, arg: Any) -> Any:
    """A trace function for every frame but the loop's: declined at its call."""
    return None


def _own_calls(frame: Any, lines: list[int], skip: tuple[str, ...]) -> dict[int, str]:
    """The loop's lines that call a Python function of the user's or a library's (not
    torch's, not Python's own: contextlib's wrapper of a `with`, not a builtin), by the
    names the frame sees: line -> the function's name."""
    python = sysconfig.get_paths().get("stdlib", "") + os.sep
    out = {}
    for n in lines:
        text = linecache.getline(frame.f_code.co_filename, n).strip().rstrip(":")
        for prefix in ("for ", "while ", "if ", "elif ", "with "):
            if text.startswith(prefix):
                text = text[len(prefix) :].split(" in ", 1)[-1]
        try:
            call = next((c for c in ast.walk(ast.parse(text)) if isinstance(c, ast.Call)), None)
        except SyntaxError:
            continue
        fn = _resolve(call.func, frame) if call is not None else None
        code = getattr(fn, "__code__", None) or getattr(
            getattr(fn, "__func__", None), "__code__", None
        )
        file = code.co_filename if code is not None else ""
        own = file.startswith(python) or file.startswith("<frozen ")  # Python's own modules
        if file and not file.startswith(skip) and (installed(file) or not own):
            out[n] = getattr(code, "co_name", "")
    return out


def _resolve(node: Any, frame: Any) -> Any:
    """The object an expression of names and attributes (`get_batch`, `self.tok.encode`)
    names in the frame, or None; a property is never called, only plain attributes read."""
    if isinstance(node, ast.Name):
        for space in (frame.f_locals, frame.f_globals, vars(builtins)):
            if node.id in space:
                return space[node.id]
        return None
    if not isinstance(node, ast.Attribute):
        return None
    owner = _resolve(node.value, frame)
    if owner is None:
        return None
    plain = getattr(type(owner), node.attr, None)  # a method, a class attribute
    if isinstance(plain, property):
        return None
    if plain is not None:
        return plain
    return (getattr(owner, "__dict__", None) or {}).get(node.attr)  # an instance's own


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
