"""The rank the others wait for: a performance finding, never divergence (its ranks compile
alike). Each figure is the window's own: the others' wait from torch's records of each
collective in those steps (waits.py), the parts of each rank's step and its loop's lines
by the job's own clock in them, so no figure is set beside a step it was not taken in."""

from __future__ import annotations

import statistics
from collections import defaultdict

from compilediag.analysis.step.waits import longer_line
from compilediag.report.model import LoopLine, RankStep
from compilediag.report.vocabulary import Finding, FindingKind, Severity
from compilediag.report.words import ms

# a straggler: the others wait for it at least this share of their step, and one part of its
# step is longer than theirs by as much (ranks of a loaded machine wait for each other by
# turns: a 2-core machine's gloo job whose ranks wait for nobody showed up to 30% in one)
STRAGGLER_SHARE = 0.2


def stragglers(steps: list[RankStep]) -> list[Finding]:
    """The rank the others wait for, with the part of its step and the line of its loop
    that take longer than theirs; [] where no rank is waited for a fifth of a step."""
    waited: dict[int, float] = defaultdict(float)  # each rank by the others' wait for it
    for s in steps:  # (two ranks of a loaded machine may each wait for the other a while)
        if s.waits_for is not None:
            waited[s.waits_for] += s.breakdown.communication_wait_ms or 0.0
    if not waited:
        return []
    rank = max(waited, key=lambda r: waited[r])
    slow = next((s for s in steps if s.rank == rank), None)
    others = [s for s in steps if s.waits_for == rank]
    if slow is None or not others:
        return []
    wait = statistics.median(s.breakdown.communication_wait_ms or 0.0 for s in others)
    step = statistics.median(s.breakdown.call_ms for s in others)
    mine = _typical(slow)
    theirs = {n: statistics.median(_typical(s).get(n, 0.0) for s in others) for n in mine}
    longer = max(mine, key=lambda n: mine[n] - theirs[n])
    if wait < STRAGGLER_SHARE * step or mine[longer] - theirs[longer] < STRAGGLER_SHARE * step:
        return []
    who = _ranks_words([s.rank for s in others], len(steps) - 1)
    one = len(others) == 1
    its = "the rest of its step" if longer == "the rest" else f"its {longer}"
    text = (
        f"rank {rank} is a straggler: {who} wait{'s' if one else ''} for it "
        f"{ms(wait)} of {'its' if one else 'their'} {ms(step)} step (median), in the "
        f"collectives; {its} takes {ms(mine[longer])}, "
        f"{'rank ' + str(others[0].rank) + chr(39) + 's' if one else 'theirs'} {ms(theirs[longer])}"
    )  # fmt: skip
    fix = f"find what makes {its} longer on rank {rank}"
    x, theirs_line = _slow_line(slow, others)
    if x is not None:
        code = f" `{x.source}`" if x.source else ""
        on = "the other" if one else "the others (median)"
        held = (theirs_line or 0.0) > 0.5 * wait  # their wait shows at the same line
        text += (
            f"; of it, {x.named}{code} takes {ms(x.ms)} a step on rank {rank}, "
            f"{ms(theirs_line or 0.0)} on {on}"
            + (f", where {'its' if one else 'their'} wait for rank {rank} shows" if held else "")
            + "."
        )
        fix = (
            f"make {x.named} on rank {rank} as fast as on the others" if x.own_work and x.calls
            else f"{fix} (at {x.file}:{x.line})"
        )  # fmt: skip
    return [
        Finding(
            FindingKind.STRAGGLER, text, Severity.WARNING,
            file=x.file if x is not None else "", line=x.line if x is not None else 0,
            fix=fix + " (its own input files or data path, a branch on the rank, logging or "
            "checkpointing on one rank): the others wait for it at every collective",
        )
    ]  # fmt: skip


def _slow_line(slow: RankStep, others: list[RankStep]) -> tuple[LoopLine | None, float | None]:
    """The slow rank's line that takes longest beyond what the others do at the same line
    apart from their wait for it (each rank's own clock at its lines, in the window's
    steps), and their time there."""
    found = longer_line(
        slow.loop, [(s.loop, s.breakdown.communication_wait_ms or 0.0) for s in others]
    )
    return (found[0], found[1]) if found is not None else (None, None)


def _ranks_words(ranks: list[int], of: int) -> str:
    if len(ranks) == of and of > 1:
        return "the other ranks"
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}"


def _typical(s: RankStep) -> dict[str, float]:
    """A rank's parts in a typical step: their medians, else their means."""
    parts = dict(s.breakdown.parts())
    if s.medians:
        return {n: s.medians.get(n, 0.0) for n in parts}
    return parts
