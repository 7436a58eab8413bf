"""What the probe reads in the window besides its marks: the loop's lines by the job's own
clock at each (line_clock.py) and, once the window is over, the collectives its steps
enqueued, each step's span on the wall clock the Flight Recorder keeps.

The collectives come from what torch's process groups record anyway: the Flight Recorder,
a ring of each process group's last collectives (on by default: 2,000 entries on gloo and
NCCL), read once after the window. Each entry keeps its process group, its sequence number
on that group (the same call on every rank), its name, when this rank's host enqueued it
(`time_created_ns`, the wall clock: the rank's arrival) and, where torch timed it on the
device (NCCL with TORCH_NCCL_ENABLE_TIMING=1), its duration. Each is given to the window's
step whose span holds its enqueue; set beside the same entry on the other ranks
(analysis/step/waits.py), it tells how long this rank waited for the last one to arrive."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from .line_clock import LineClock, MarkClock, installed
from .torch_state import distributed, job_frames, own_dirs

# the window's collectives are read this long after it (NCCL's watchdog, which gives each its
# device time, looks every 100 ms), or at exit: the Flight Recorder keeps 2,000 at least
FLIGHT_RECORDER_SETTLE_S = 0.3
MONITORING = hasattr(sys, "monitoring")  # Python 3.12+: line events (else MarkClock)


class WindowReads:
    def __init__(self) -> None:
        self.lines: LineClock | None = None  # the loop's lines, timed in the window
        self.line_facts: list[dict[str, Any]] = []
        self.spans: dict[int, tuple[int, int]] = {}  # step -> its start and end (time_ns)
        self.collectives: list[list[Any]] = []
        # the frames under way a step ago, held (an id alone is reused by the next step's
        # call of the same function: a frame that does not span the steps read as the loop)
        self._frames_before: list[Any] = []
        self._step_ns = 0
        self._due: float | None = None  # when the collectives are to be read

    @property
    def learning(self) -> bool:
        """The loop's clock is learning its lines in this step (no figure takes it)."""
        return isinstance(self.lines, MarkClock) and self.lines.learning

    def step_before(self, training_code: set[Any] | None) -> None:
        """A step before the window starts (two before it, then one): the frames under way
        now (the loop's). Before Python 3.12, the step just before it is the one whose
        lines the loop's clock learns (MarkClock): the loop, the frame under way then and a
        step before, is known there."""
        if not MONITORING and self._frames_before and self.lines is None:
            clock = _loop_clock(self._frames_before, training_code)
            if isinstance(clock, MarkClock):
                clock.learn()
                self.lines = clock
        self._frames_before = job_frames()

    def step_started(self, step: int, now_ns: int, training_code: set[Any] | None) -> None:
        """A window step starts (and the one before it, if one was, ends)."""
        if self._step_ns:
            self.spans[step - 1] = (self._step_ns, now_ns)
        self._step_ns = now_ns
        if self.lines is not None and self.lines.step is not None:
            self.lines.next_step(step)
            return
        self.lines = self.lines or _loop_clock(self._frames_before, training_code)
        self._frames_before = []  # held no longer than needed
        if self.lines is not None:
            self.lines.start(step)

    def step_ended(self, step: int, now_ns: int) -> None:
        """The window's last step ends."""
        if self._step_ns:
            self.spans[step] = (self._step_ns, now_ns)
        self._step_ns = 0

    def mark(self, entered: bool) -> None:
        """A part of the step starts (`entered`) or ends."""
        if self.lines is not None:
            self.lines.mark(entered)

    def stop(self) -> None:
        """The window is over (or dropped): the lines' clock stops, and the collectives its
        steps enqueued are to be read once NCCL's watchdog has seen the last of them end (it
        gives each its device time then): at the first step FLIGHT_RECORDER_SETTLE_S on, or
        at exit."""
        if self.lines is not None:
            self.lines.stop()
            self.line_facts = self.lines.facts()
            self.lines = None
        # (read where the window's steps ran in a process group: by the job's exit it may
        # have destroyed it, the recorder's entries kept)
        if self.spans and self._due is None and not self.collectives and distributed():
            self._due = time.perf_counter() + FLIGHT_RECORDER_SETTLE_S

    def read_collectives(self, now: float | None = None) -> None:
        """Read the window's collectives where they are due (`now`: None, at exit)."""
        if self._due is None or (now is not None and now < self._due):
            return
        self._due = None
        self.collectives = window_collectives(self.spans)


def _loop_clock(before: list[Any], training_code: set[Any] | None) -> LineClock | None:
    """The clock of the loop's lines: the loop is the innermost frame under way a step ago
    and now; with it, the functions of the user's a training call ran under it (a
    framework's hook such as training_step; not an installed package's)."""
    frames = job_frames()
    loop = next((f for f in frames if any(f is b for b in before)), None)
    loop = loop or (frames[0] if frames else None)
    if loop is None:
        return None
    outer = {f.f_code for f in frames[frames.index(loop) :]}
    hooks = {
        c for c in training_code or set()
        if c not in outer and not installed(c.co_filename)
    }  # fmt: skip
    if not MONITORING:
        # a framework's loop names no line of the user's: its lines are its step's parts
        if installed(loop.f_code.co_filename):
            return None
        return MarkClock(loop, own_dirs())
    return LineClock({loop.f_code, *hooks}, loop.f_code, [loop])


MAX_ENTRIES = 20000  # kept at most (a window of many steps of a model of many buckets)


def window_collectives(spans: dict[int, tuple[int, int]]) -> list[list[Any]]:
    """The Flight Recorder's collectives enqueued in the window's steps (`spans`: step ->
    its start and end, time.time_ns()): [process group, sequence number, name, enqueued
    (ns), duration (ms) or None, step], in the order they were enqueued. [] where torch has
    no recorder to read or nothing was recorded."""
    if not spans:
        return []
    out: dict[tuple[str, int, str], list[Any]] = {}
    bounds = sorted((a, b, step) for step, (a, b) in spans.items())
    for entry in _entries():
        try:
            if entry.get("is_p2p"):
                continue
            created = int(entry["time_created_ns"])
            group = entry.get("process_group") or [str(entry.get("pg_id", ""))]
            key = (str(group[0]), int(entry["collective_seq_id"]), str(entry["profiling_name"]))
        except (KeyError, TypeError, ValueError):
            continue
        step = next((s for a, b, s in bounds if a <= created < b), None)
        if step is None or key in out:
            continue
        duration = entry.get("duration_ms")
        out[key] = [*key, created, float(duration) if duration is not None else None, step]
    return sorted(out.values(), key=lambda e: e[3])[:MAX_ENTRIES]


def _entries() -> list[dict[str, Any]]:
    """Every recorder's entries: gloo's (and any CPU backend's) and NCCL's."""
    c10d = getattr(sys.modules.get("torch"), "_C", None)
    c10d = getattr(c10d, "_distributed_c10d", None)
    if c10d is None:
        return []
    found: list[dict[str, Any]] = []
    for dump in ("_dump_fr_trace_json", "_dump_nccl_trace_json"):
        fn = getattr(c10d, dump, None)
        if fn is None:
            continue
        try:
            data = json.loads(fn(True, False))
        except Exception:  # noqa: BLE001 - a recorder this build lacks, or off
            continue
        entries = data.get("entries") if isinstance(data, dict) else None
        found += [e for e in entries or [] if isinstance(e, dict)]
    return found
