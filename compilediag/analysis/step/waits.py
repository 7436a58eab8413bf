"""Waiting is not work. A collective's time on a rank runs from the moment that rank arrives
until the last rank does, then the transfer: NCCL's kernel spins, gloo's call blocks. Set
beside the same call on every rank, the rank that arrived last took the least (it waited
for nobody): that time is the transfer, and each rank's time beyond it is its wait for the
last rank. The rank a rank waits for is the one that arrived last at most of its calls.

And the loop's lines: what each rank's training loop spent a step at each of its lines
(Python's profiler on the loop over the kernel profile's steps), so that the work a
slow rank does longer is named at the user's line."""

from __future__ import annotations

import linecache
import os
from collections import Counter
from dataclasses import dataclass, field

from compilediag.harness.worker_types import ProcessRuntime
from compilediag.paths import portable_path
from compilediag.report.model import LoopLine

LOOP_LINES = 12  # a rank's costliest lines kept
WAITED = 0.5  # a rank waits for another where its waits are this share of its collectives


@dataclass
class Waits:
    """Each rank's collectives a step split in two, and whom it waits for."""

    wait_share: dict[int, float] = field(default_factory=dict)  # of its collectives' time
    waits_for: dict[int, int | None] = field(default_factory=dict)
    last: Counter[int] = field(default_factory=Counter)  # calls each rank arrived last at
    calls: int = 0  # calls set beside each other


def collective_waits(processes: list[ProcessRuntime]) -> Waits:
    """The ranks' collectives, call by call: the i-th call of each collective on every rank
    is one call (the kernel profile covers the same steps on every rank). Empty where
    fewer than two ranks kept their calls."""
    ranks = {
        p.rank: _by_name(p.collective_calls)
        for p in processes if p.rank is not None and p.collective_calls
    }  # fmt: skip
    out = Waits()
    if len(ranks) < 2:
        return out
    spent: dict[int, float] = dict.fromkeys(ranks, 0.0)  # its time in the calls set side by side
    waited: dict[int, float] = dict.fromkeys(ranks, 0.0)
    behind: dict[int, Counter[int]] = {r: Counter() for r in ranks}  # whom each waited for
    names = set.intersection(*(set(calls) for calls in ranks.values()))
    for name in sorted(names):
        for i in range(min(len(calls[name]) for calls in ranks.values())):
            took = {r: calls[name][i] for r, calls in ranks.items()}
            last = min(took, key=lambda r: took[r])
            out.last[last] += 1
            out.calls += 1
            for r, us in took.items():
                spent[r] += us
                waited[r] += us - took[last]
                if r != last:
                    behind[r][last] += 1
    for r in ranks:
        share = waited[r] / spent[r] if spent[r] else 0.0
        out.wait_share[r] = round(share, 4)
        most = behind[r].most_common(1)
        out.waits_for[r] = most[0][0] if most and share >= WAITED else None
    return out


def _by_name(calls: list[list[str | float]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for name, us in calls:
        out.setdefault(str(name), []).append(float(us))
    return out


def loop_lines(p: ProcessRuntime) -> list[LoopLine]:
    """The loop's costliest lines a step (over the kernel profile's steps), with their
    text."""
    if not p.loop_lines or not p.kernel_steps:
        return []
    out = []
    for x in p.loop_lines:
        per = x.ms / p.kernel_steps
        out.append(
            LoopLine(
                portable_path(x.file, os.getcwd()), x.line, round(per, 3), x.loop, x.calls,
                x.source or linecache.getline(x.file, x.line).strip(),
            )
        )  # fmt: skip
    return out[:LOOP_LINES]


def longer_line(
    slow: list[LoopLine], others: list[list[LoopLine]]
) -> tuple[LoopLine, float] | None:
    """The slow rank's line that takes longest beyond the same line on the other ranks
    (their median), with theirs; None where none is longer."""
    best: tuple[LoopLine, float] | None = None
    for line in slow:
        theirs = sorted(
            next((x.ms for x in lines if (x.file, x.line) == (line.file, line.line)), 0.0)
            for lines in others
        )  # fmt: skip
        median = theirs[len(theirs) // 2] if theirs else 0.0
        if line.ms > median and (best is None or line.ms - median > best[0].ms - best[1]):
            best = (line, median)
    return best
