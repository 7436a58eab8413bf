"""What every renderer shows alike, computed once from the Report: recompiles by frame,
each frame's runs of one kind of failed guard, and a fix said once ("as for 0/1 above")."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from compilediag.report import Recompile, Report
from compilediag.torch_formats import guard_pattern


@dataclass
class GuardRun:
    """Consecutive recompiles of one frame that failed the same kind of guard: one finding
    (`x == 2`, `x == 3` ... are one run)."""

    items: list[Recompile]
    fix: str = ""  # its fix, where not already given above
    as_for: str = ""  # the compile id whose fix it shares (given above), else ''


@dataclass
class FrameRecompiles:
    """One frame's recompiles, in order."""

    frame: str
    file: str
    line: int
    runs: list[GuardRun] = field(default_factory=list)
    common_fix: str = ""  # one fix for every recompile of the frame, where it has several
    limit_hit: bool = False

    @property
    def items(self) -> list[Recompile]:
        return [r for run in self.runs for r in run.items]


def recompiles_by_frame(report: Report) -> list[FrameRecompiles]:
    """The frames in order of their first recompile."""
    by_frame: dict[tuple[str, str, int], list[Recompile]] = {}
    for r in report.recompiles:
        by_frame.setdefault((r.frame, r.file, r.line), []).append(r)
    frames = [
        FrameRecompiles(*key, runs=[GuardRun(list(g)) for _, g in itertools.groupby(items, _kind)])
        for key, items in by_frame.items()
    ]
    advised: dict[str, str] = {}  # a fix already given -> the recompile it was given for
    hits = {(h.frame, h.file, h.line) for h in report.recompile_limit_hits}
    for f in frames:
        for run in f.runs:
            first = run.items[0]
            if first.suggestion in advised:  # the same fix for each resume frame: said once
                run.as_for = advised[first.suggestion]
            elif first.suggestion:
                run.fix = first.suggestion
                advised[first.suggestion] = first.compile_id
        fixes = {r.suggestion for r in f.items}
        f.common_fix = fixes.pop() if len(fixes) == 1 and len(f.items) > 1 else ""
        f.limit_hit = (f.frame, f.file, f.line) in hits
    return frames


def _kind(r: Recompile) -> tuple[str, str]:
    return (r.cause, guard_pattern(r.failed_guard))
