"""What the training loop's own lines spend, over the kernel profile's steps: a thread that
samples the stack of the thread running the steps, giving each moment to the line of the
loop that is under way (the loop: the innermost frame a training call's stack and this
moment's share), with the function that line called. A batch built in Python, a metric,
a log line: named at the user's line, where torch.profiler sees only the ops they make."""

from __future__ import annotations

import linecache
import os
import sys
import threading
import time
from typing import Any

SAMPLE_S = 0.001  # between two samples
# a longer gap gives its moment no more than this: a sampler starved of the GIL by the
# loop's own Python gives that Python the time it held the GIL (capped at 20 ms, a GPU
# job's straggling batch read 31% short)
MAX_GAP_S = 0.5
KEPT = 12  # the lines kept, the costliest first


class LoopWork:
    """Samples the stack of `thread` (its ident) while started; `loop_code`: the codes on
    a training call's stack (OtherWork.training_code), read at each sample."""

    def __init__(self, thread: int, loop_code: Any, evaluating: Any) -> None:
        self.thread = thread
        self.loop_code = loop_code  # a callable: the set of codes, or None while unknown
        self.evaluating = evaluating  # a callable: an evaluation is under way
        self.seconds: dict[tuple[str, int, str, str], float] = {}
        self.sampled_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        torch = sys.modules.get("torch")
        # a callee of torch's or the probe's is the line's own work (the model's call)
        self._skip = tuple(
            os.path.dirname(p) + os.sep for p in (getattr(torch, "__file__", None), __file__) if p
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="compilediag-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(SAMPLE_S):
            now = time.perf_counter()
            took, last = min(now - last, MAX_GAP_S), now
            if self.evaluating():
                continue
            codes = self.loop_code()
            frame = sys._current_frames().get(self.thread)
            if not codes or frame is None:
                continue
            where = _loop_line(frame, codes, self._skip)
            if where is not None:
                self.seconds[where] = self.seconds.get(where, 0.0) + took
                self.sampled_s += took

    def facts(self) -> list[dict[str, Any]]:
        """The loop's lines, costliest first: file, line, the function the loop runs in,
        the function the line called ('' where the line's own Python ran), ms in all."""
        rows = sorted(self.seconds.items(), key=lambda kv: -kv[1])[:KEPT]
        return [
            {"file": f, "line": n, "loop": loop, "calls": callee, "ms": round(s * 1e3, 3),
             "source": linecache.getline(f, n).strip()}
            for (f, n, loop, callee), s in rows
        ]  # fmt: skip


def _loop_line(frame: Any, codes: Any, skip: tuple[str, ...]) -> tuple[str, int, str, str] | None:
    """(the loop's file, its line under way, the loop function, the function it called:
    '' where the line's own Python runs or it called torch) for the innermost frame whose
    code a training call's stack holds."""
    callee = None
    while frame is not None:
        if frame.f_code in codes:
            code = frame.f_code
            name = getattr(code, "co_qualname", code.co_name)
            called = ""
            if callee is not None and not callee.co_filename.startswith(skip):
                called = getattr(callee, "co_qualname", callee.co_name)
            return code.co_filename, frame.f_lineno, name, called
        callee = frame.f_code
        frame = frame.f_back
    return None
