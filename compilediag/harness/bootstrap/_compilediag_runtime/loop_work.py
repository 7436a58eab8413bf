"""What the training loop's own lines spend, over the kernel profile's steps: Python's own
profiler (cProfile, in C) on the thread that runs the steps, read as the time of each
function the loop calls (the loop: the innermost frame of a training call's stack), at the
loop's line that calls it, and the loop's own Python. A batch built in Python, a metric,
a log line: named at the user's line, where torch.profiler sees only the ops they make.

(A sampler of the thread's stack was tried first: on a 2-core machine it could not look
while the loop's Python held the GIL or the cores were busy, and gave the end of each call
to the next line: a 6.3 ms augmentation read 2.4 ms. Under Dynamo on 3.11 the frames it
saw below the loop's were at times those of a function that had returned.)"""

from __future__ import annotations

import cProfile
import linecache
import os
import sys
from typing import Any

KEPT = 12  # the lines kept, the costliest first
TORCH = "<torch>"  # what a line calls where it calls torch (or the probe's wrappers of it)
OWN = ""  # the loop's own Python (its lines between the calls)
DISABLE = "<method 'disable' of '_lsprof.Profiler' objects>"  # the profile's own end


class LoopWork:
    """cProfile on the thread that calls start() (the steps' thread), paused while an
    evaluation runs; `loop_code`: a callable giving the codes on a training call's stack
    (OtherWork.training_code), read at the end."""

    def __init__(self, loop_code: Any) -> None:
        self.loop_code = loop_code
        self._profile: Any = None
        self._paused = 0
        self._via_torch: set[tuple[str, int, str]] = set()
        self._outer: list[Any] = []  # the frames under way at start, innermost first
        torch = sys.modules.get("torch")
        # a callee of torch's or the probe's is the model's call, backward, the optimizer
        self._skip = tuple(
            os.path.dirname(p) + os.sep for p in (getattr(torch, "__file__", None), __file__) if p
        )

    def start(self) -> None:
        if sys.getprofile() is not None:  # the job profiles itself: left alone
            return
        # the frames under way (the loop's among them), innermost first: a call they make
        # from now on is a top-level entry of the profile, with no caller in it
        frame: Any = sys._getframe(1)
        while frame is not None:
            if not frame.f_code.co_filename.startswith(self._skip):
                self._outer.append(frame.f_code)
            frame = frame.f_back
        self._profile = cProfile.Profile()
        self._profile.enable()

    def pause(self, paused: bool) -> None:
        """An evaluation starts (True) or ends: its calls are not the training loop's."""
        if self._profile is None:
            return
        self._paused = max(0, self._paused + (1 if paused else -1))
        if paused and self._paused == 1:
            self._profile.disable()
        elif not paused and not self._paused:
            self._profile.enable()

    def stop(self) -> None:
        if self._profile is not None and not self._paused:
            self._profile.disable()
        self._paused = 1  # no enable after this

    def facts(self) -> list[dict[str, Any]]:
        """The loop's lines, costliest first: file, line (where it calls the function; the
        function's own for one called where no line of the loop names it), the function the
        loop runs in, the function called (OWN: the loop's own Python; TORCH: torch's), ms
        in all."""
        codes = self.loop_code() or set()
        if self._profile is None or not codes:
            return []
        self._profile.create_stats()
        loops = {(c.co_filename, c.co_firstlineno, c.co_name): c for c in codes}
        stats = self._profile.stats
        # a builtin that calls torch's Python (next() of a DataLoader): torch's
        self._via_torch = {
            caller for callee, (*_, callers) in stats.items()
            if callee[0].startswith(self._skip) for caller in callers if caller[0] == "~"
        }  # fmt: skip
        spent: dict[tuple[str, int, str, str], float] = {}
        for callee, (_, _, own_s, cum_s, callers) in stats.items():
            if callee in loops:  # the loop function's own time (callees' not in it)
                code = loops[callee]
                key = (code.co_filename, code.co_firstlineno, _name(code), OWN)
                spent[key] = spent.get(key, 0.0) + own_s
            if not callers and callee[2] != DISABLE:  # called by a frame under way at start
                top = self._top_caller(callee, codes)
                if top is not None:
                    key = self._line(top, callee)
                    spent[key] = spent.get(key, 0.0) + cum_s
            for caller, (_, _, _, cum_s) in callers.items():
                code = loops.get(caller)
                if code is not None:
                    key = self._line(code, callee)
                    spent[key] = spent.get(key, 0.0) + cum_s
        rows = sorted(spent.items(), key=lambda kv: -kv[1])[:KEPT]
        return [
            {"file": f, "line": n, "loop": loop, "calls": callee, "ms": round(s * 1e3, 3),
             "source": linecache.getline(f, n).strip()}
            for (f, n, loop, callee), s in rows
        ]  # fmt: skip

    def _top_caller(self, callee: tuple[str, int, str], codes: Any) -> Any:
        """Which loop frame under way at start made a top-level call: the innermost that
        names it on one of its lines, else, for a function of the loop's own file, the
        innermost of the loop's; None for others (the interpreter's own at exit)."""
        loops = [c for c in self._outer if c in codes]
        name = _short(callee[2])
        named = next((c for c in loops if _calling_line(c, name)), None)
        if named is not None or not loops:
            return named
        return loops[0] if callee[0] == loops[0].co_filename else None

    def _line(self, loop: Any, callee: tuple[str, int, str]) -> tuple[str, int, str, str]:
        """(the loop's file, the line of it that calls `callee`, the loop, the callee's
        name or TORCH)."""
        file, first, name = callee
        if file.startswith(self._skip) or callee in self._via_torch:
            return loop.co_filename, _calling_line(loop, _short(name)), _name(loop), TORCH
        line = _calling_line(loop, _short(name)) or (first if file == loop.co_filename else 0)
        return loop.co_filename, line, _name(loop), _short(name)


def _name(code: Any) -> str:
    return getattr(code, "co_qualname", code.co_name)


def _short(name: str) -> str:
    """`get_batch` of cProfile's `get_batch`, `<method 'item' of ...>`: the name called."""
    if name.startswith("<built-in method ") or name.startswith("<method "):
        return name.split()[2].strip("'>").rsplit(".", 1)[-1]
    return name


def _calling_line(loop: Any, name: str) -> int:
    """The last line of the loop function that calls `name` (`name(` in its text: the
    loop's own, where a first call before it reads the same); 0 where none does (a
    callable object's __call__, a builtin called by another name)."""
    lines = sorted({n for _, _, n in loop.co_lines() if n}, reverse=True)
    for n in lines:
        text = linecache.getline(loop.co_filename, n)
        if f"{name}(" in text and not text.lstrip().startswith(("def ", "#")):
            return n
    return 0
