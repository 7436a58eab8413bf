"""Waiting is not work, and it is measured where it happens: in the window's own steps, from
what torch's process groups record of each collective anyway (the Flight Recorder, read by
the probe's window_reads.py), matched across ranks by process group and sequence number.

- Where torch timed each collective on the device (NCCL with TORCH_NCCL_ENABLE_TIMING=1,
  which `compilediag run` sets), the rank that arrived last took the least time (it waited
  for nobody): that time is the transfer, and each other rank's time beyond it is its wait.
- Else from the arrivals (when each rank's host enqueued the call; one wall clock on one
  host, as gloo's ranks on one machine share): a rank that arrived before the last waited
  for it until the last one came.

A step's wait is the longest at one collective of it: DDP's buckets, each waiting for the
same late rank, overlap (on 2 H200s, the longest came within 4% of what the slow rank cost
the job's step by its own clock, the sum 6-16% over it). It is never longer than the step.
The rank a rank waits for is the one that arrived last where it waited most.

And the loop's lines: each rank's training loop, line by line, by the job's own clock in
the same steps (the probe's line_clock), so the work a slow rank does longer is named at
the user's line."""

from __future__ import annotations

import ast
import linecache
import os
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from compilediag.analysis.source import indexes_item_by_item
from compilediag.analysis.step.other_work import PAUSED, STALL, training_profile
from compilediag.harness.worker_types import ProcessRuntime, WindowLine
from compilediag.paths import Owner, owner_of, portable_path
from compilediag.report.model import LOOP_TORCH, LoopLine

LOOP_LINES = 12  # a rank's costliest lines kept
TIMED_SHARE = 0.8  # the waits are the device's times where torch timed this share of the calls
ARRIVALS = "arrivals"  # how the waits were measured: the ranks' enqueue times
DURATIONS = "durations"  # ... each collective's own time on the device

Key = tuple[str, int, str]  # process group, sequence number, name


@dataclass
class Waits:
    """Each rank's wait for the last rank, a step of its window, and whom it waits for."""

    wait_ms: dict[int, float] = field(default_factory=dict)  # its mean over its kept steps
    waits_for: dict[int, int | None] = field(default_factory=dict)
    last: Counter[int] = field(default_factory=Counter)  # calls each rank arrived last at
    calls: int = 0  # calls set beside each other
    method: str = ""  # ARRIVALS or DURATIONS; '' where nothing was measured


@dataclass
class _Call:
    created_ns: int
    duration_ms: float | None
    step: int


def collective_waits(processes: list[ProcessRuntime], left_out: set[int]) -> Waits:
    """The ranks' waits in their window's training steps (those not `left_out` on any rank,
    and not compiled in). Empty where fewer than two ranks recorded their collectives."""
    ranks: dict[int, dict[Key, _Call]] = {}
    steps: dict[int, dict[int, float]] = {}  # rank -> its kept steps and their length (ms)
    for p in processes:
        if p.rank is None or p.profiled is None or not p.window_collectives:
            continue
        kept = training_profile(p.profiled, left_out)
        lengths = {n: row[0] for n, row in zip(kept.step_numbers, kept.per_step, strict=False)}
        lengths = {n: ms for n, ms in lengths.items() if n not in left_out}
        calls = {}
        for group, seq, name, created, duration, step in p.window_collectives:
            if step in lengths:
                calls[(str(group), int(seq), str(name))] = _Call(int(created), duration, int(step))
        ranks[p.rank], steps[p.rank] = calls, lengths
    out = Waits()
    if len(ranks) < 2:
        return out
    keys = Counter(k for calls in ranks.values() for k in calls)
    shared = [k for k, n in keys.items() if n >= 2]
    # torch timed most of them: the calls it timed on every rank (those still under way when
    # the window's records were read have no time yet)
    timed_keys = [
        k for k in shared if all(c[k].duration_ms is not None for c in ranks.values() if k in c)
    ]
    timed = len(timed_keys) >= TIMED_SHARE * len(shared) > 0
    out.method = DURATIONS if timed else ARRIVALS
    per_step: dict[int, dict[int, float]] = {r: defaultdict(float) for r in ranks}
    behind: dict[int, Counter[int]] = {r: Counter() for r in ranks}
    for key in timed_keys if timed else shared:
        here = {r: calls[key] for r, calls in ranks.items() if key in calls}
        waits, last = _waits(here, timed)
        out.last[last] += 1
        out.calls += 1
        for r, waited in waits.items():
            step = here[r].step
            per_step[r][step] = max(per_step[r][step], waited)
            if r != last:
                behind[r][last] += round(waited * 1e3)
    for r, lengths in steps.items():
        if not lengths:
            continue
        each = [min(per_step[r].get(n, 0.0), length) for n, length in lengths.items()]
        out.wait_ms[r] = round(sum(each) / len(each), 6)
        most = behind[r].most_common(1)
        out.waits_for[r] = most[0][0] if most and most[0][1] > 0 and out.wait_ms[r] else None
    return out


def _waits(here: dict[int, _Call], timed: bool) -> tuple[dict[int, float], int]:
    """One collective on the ranks that made it: each rank's wait (ms) and the rank that
    arrived last."""
    if timed:
        last = min(here, key=lambda r: here[r].duration_ms or 0.0)
        transfer = here[last].duration_ms or 0.0
        return {r: max(0.0, (c.duration_ms or 0.0) - transfer) for r, c in here.items()}, last
    last = max(here, key=lambda r: here[r].created_ns)
    arrived = here[last].created_ns
    return {r: (arrived - c.created_ns) / 1e6 for r, c in here.items()}, last


def loop_lines(p: ProcessRuntime, left_out: set[int]) -> list[LoopLine]:
    """The loop's costliest lines a step, by the job's own clock at each line (the probe's
    line events), over the steps it timed them in (the window's on Python 3.12+, the steps
    after it before; a step torch compiled in was dropped there) that held no other work on
    any rank: the user's lines only (a framework's loop is its step's parts, not the loop's
    own work)."""
    steps = line_steps(p, left_out)
    if not steps:
        return []
    out = [
        _loop_line(x, sum(x.ms.get(str(n), 0.0) for n in steps) / len(steps))
        for x in p.window_lines
        if owner_of(x.file) == Owner.USER
    ]
    return sorted(out, key=lambda x: -x.ms)[:LOOP_LINES]


def _loop_line(x: WindowLine, ms: float) -> LoopLine:
    """A line of the window's, said with `ms` (a step's, or the part of one step's time)."""
    source = _source(x.file, x.line)
    calls = LOOP_TORCH if x.torch else called(source)
    return LoopLine(
        portable_path(x.file, os.getcwd()), x.line, round(ms, 6), x.function, calls, source,
        bool(calls) and calls != LOOP_TORCH and indexes_item_by_item(x.file, calls),
    )  # fmt: skip


def loop_step_ms(p: ProcessRuntime, left_out: set[int]) -> float | None:
    """The step the loop's lines were timed in, by the same clock: the loop's own lines of
    a step add up to it (the loop spans the step), their mean over those steps."""
    steps = line_steps(p, left_out)
    loop = [x for x in p.window_lines if x.loop]
    if not steps or not loop:
        return None
    return round(sum(x.ms.get(str(n), 0.0) for x in loop for n in steps) / len(steps), 6)


def line_steps(p: ProcessRuntime, left_out: set[int]) -> list[int]:
    """The steps the loop's lines were timed in, those that held other work left out."""
    timed = {int(n) for x in p.window_lines for n in x.ms}
    return sorted(timed - left_out)


def line_stalls(p: ProcessRuntime, left_out: set[int]) -> list[int]:
    """The steps whose loop lines together took more than STALL times the median of those
    steps (other_work.STALL; pace.steady judges --try-fixes' runs alike): a step the
    machine held, its pause on whichever line ran then (a look on a loaded machine read
    `opt.zero_grad()` at 1 ms a step, a third of the step, from 3 of 9 steps of 6 ms among
    steps of 1.7: by the job's own clock it took 0.04-0.1 ms). [] where fewer than 3 were
    timed, or as many as half would be: then the steps just differ."""
    steps = line_steps(p, left_out)
    loop = [x for x in p.window_lines if x.loop]
    if len(steps) < 3 or not loop:
        return []
    took = {n: sum(x.ms.get(str(n), 0.0) for x in loop) for n in steps}
    usual = statistics.median(took.values())
    slow = [n for n, t in took.items() if t > STALL * usual]
    return slow if 2 * len(slow) < len(steps) else []


STALL_LINES = 3  # the job's own lines a stalled step's time is named at, at most


def stalled_at(
    p: ProcessRuntime, stalled: set[int], left_out: set[int]
) -> dict[str, list[LoopLine]]:
    """Where a stalled step's time went: the job's own work, where the step's excess over
    the others' median (`left_out` holds the stalled ones) lies PAUSED or more in the rest
    of the step (outside the model, backward, the optimizer and the data loader) and, by the
    loop's line clock, at PAUSED or more of it at most STALL_LINES of the loop's lines (a
    DCGAN's sample images, saved at each epoch's first step: 165 ms among steps of 21, said
    as "a pause"), not the machine's. step -> those lines, each with its time in that step;
    a step whose excess is a part's (a batch the loader had not made) or spread, left out."""
    steps = line_steps(p, left_out)
    loop = [x for x in p.window_lines if x.loop and owner_of(x.file) == Owner.USER]
    prof = p.profiled
    if len(steps) < 3 or not loop or prof is None or len(prof.per_step) != len(prof.step_numbers):
        return {}
    rows = dict(zip(prof.step_numbers, prof.per_step, strict=True))
    usual = [rows[m] for m in steps if m in rows and len(rows[m]) > 5]
    if len(usual) < 3:
        return {}
    step, rest = (statistics.median(r[i] for r in usual) for i in (0, 5))
    usual_lines = statistics.median(sum(x.ms.get(str(m), 0.0) for x in loop) for m in steps)
    out = {}
    for n in sorted(n for n in stalled if len(rows.get(n, [])) > 5):
        if rows[n][5] - rest < PAUSED * (rows[n][0] - step):
            continue  # the excess is a part's (a batch not yet made, a longer backward)
        excess = sum(x.ms.get(str(n), 0.0) for x in loop) - usual_lines
        more = sorted(
            ((x.ms.get(str(n), 0.0) - statistics.median(x.ms.get(str(m), 0.0) for m in steps), x)
             for x in loop),
            key=lambda e: -e[0],
        )  # fmt: skip
        held, took = [], 0.0
        for e, x in more[:STALL_LINES]:
            if excess <= 0 or e <= 0 or took >= PAUSED * excess:
                break
            held.append(_loop_line(x, x.ms.get(str(n), 0.0)))
            took += e
        if held and took >= PAUSED * excess:
            out[str(n)] = held
    return out


def _source(file: str, line: int) -> str:
    return linecache.getline(file, line).strip()


def called(source: str) -> str:
    """The function a line calls (the outermost call: `get_batch` of `x, y =
    get_batch('train')`); '' for a line that calls nothing (its own Python)."""
    text = source.rstrip(":").strip()
    for prefix in ("for ", "while ", "if ", "elif ", "with "):
        if text.startswith(prefix):
            text = text[len(prefix) :].split(" in ", 1)[-1]
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                return f.id
            if isinstance(f, ast.Attribute):
                return f.attr
    return ""


# a line of a waiting rank that holds at least this share of its wait is where it can show
HOLDS_WAIT = 0.8


def longer_line(
    slow: list[LoopLine], others: list[tuple[list[LoopLine], float]]
) -> tuple[LoopLine, float] | None:
    """The slow rank's line that takes longest beyond what the other ranks (each: its lines
    and its wait a step) do at the same line apart from waiting, with their time there (the
    median). A rank that waits shows the wait at one of its lines (where its host blocks:
    backward's last all-reduce on CPU, FSDP's first all-gather in the forward, a batch's
    copy to the device on CUDA): of its lines that hold most of the wait, the one longest
    beyond the slow rank's own, and only that line is taken less their wait (where none
    holds it, each line is). None where no line is longer."""
    mine = {(x.file, x.line): x.ms for x in slow}
    held: list[tuple[dict[tuple[str, int], float], float, tuple[str, int] | None]] = []
    for lines, wait in others:
        times = {(x.file, x.line): x.ms for x in lines}
        fits = [k for k, v in times.items() if wait > 0 and v >= HOLDS_WAIT * wait]
        shows = max(fits, key=lambda k: times[k] - mine.get(k, 0.0), default=None)
        held.append((times, wait, shows))
    best: tuple[LoopLine, float, float] | None = None  # line, theirs, excess
    for line in slow:
        key = (line.file, line.line)
        at = [
            (t.get(key, 0.0), wait if where is None or key == where else 0.0)
            for t, wait, where in held
        ]  # fmt: skip
        theirs = statistics.median(ms for ms, _ in at) if at else 0.0
        working = statistics.median(max(0.0, ms - wait) for ms, wait in at) if at else 0.0
        excess = line.ms - working
        if excess > 0 and (best is None or excess > best[2]):
            best = (line, theirs, excess)
    return (best[0], best[1]) if best is not None else None
