"""Alternated runs (`run --try-fixes`): a remedy's effect on the job's step as a ratio of
each run's window (its steps' mean: a step that waits for a batch every other step counts
at its real rate), the remedy's run over the unchanged run beside it, with a 95%
interval over the pairs; when to stop adding pairs; whether the effect was still settling
across the window. No torch, no runs: figures in, figures out.

The interval is Student's t over the pairs' log ratios, not a bootstrap: three pairs
resampled can give no wider interval than their smallest and largest ratio, which holds
the true ratio only three times in four (all three fall on one side of it one time in
four), so a remedy with no effect would be kept far more often than one time in twenty
(tests/analysis/step/test_remedies_bet.py counts both)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from compilediag.report.words import times

# kept only where the whole interval is at least this much faster (after/before at most)
KEEP_AT = 0.95
MIN_PAIRS = 3
MAX_PAIRS = 8
# an interval this narrow (high / low - 1) is settled whatever it says
SETTLED_WIDTH = 0.10
# a remedy whose runs' later half of the window ran this much faster or slower (against its
# earlier half, beside the unchanged runs' own) is still settling
SETTLING = 0.85
# an interval wider than this either side is too wide to give as figures
WIDE = 0.5
# Student's t, two-sided 95%, by degrees of freedom (pairs - 1); past the table: 2.0
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}  # fmt: skip


@dataclass
class Effect:
    """After / before over the pairs (the geometric mean of each pair's ratio) and its 95%
    interval."""

    ratio: float
    low: float
    high: float
    pairs: int

    @property
    def kept(self) -> bool:
        """The whole interval at least 5% faster."""
        return self.high <= KEEP_AT

    @property
    def rejected(self) -> bool:
        """The whole interval under a 5% gain (slower too)."""
        return self.low > KEEP_AT

    @property
    def undecided(self) -> bool:
        """The interval holds both a gain of 5% and less than that (one pair: it holds all)."""
        return not self.kept and not self.rejected

    def holds(self, gain: str) -> str:
        """What an undecided interval holds, in words: no gain where it reaches 1x (or has
        no end), else a gain under `gain` ("5%") besides one of it. (A look read "holds
        both no gain and a gain of 5%" beside [1.01-1.12x].)"""
        if self.high >= 1 or self.pairs < 2:
            return f"both no gain and a gain of {gain}"
        return f"both a gain under {gain} and one of {gain} or more"

    @property
    def wide(self) -> bool:
        """An interval past ±50% (or none): said as undecided, never as a percentage."""
        return self.low <= 0 or math.isinf(self.high) or (self.high - self.low) / 2 > WIDE

    def more_pairs(self) -> int:
        """About how many more pairs would decide it: the interval's half-width shrinks as
        one over the square root of the pairs; it has to come within the distance from the
        measured ratio to KEEP_AT (one pair, whose spread is unknown: two more, an
        interval's least)."""
        if not self.undecided:
            return 0
        if self.pairs < 2 or self.low <= 0:
            return MIN_PAIRS - self.pairs
        half = (math.log(self.high) - math.log(self.low)) / 2
        room = abs(math.log(self.ratio) - math.log(KEEP_AT))
        if room <= 0:
            return MAX_PAIRS  # measured at the threshold itself: no count decides it
        return max(1, math.ceil(self.pairs * (half / room) ** 2) - self.pairs)

    @property
    def settled(self) -> bool:
        """More pairs would not change the decision: kept, out of reach of KEEP_AT, or
        narrow."""
        if self.low <= 0:
            return False
        return self.kept or self.low > KEEP_AT or self.high / self.low - 1 <= SETTLED_WIDTH

    def words(self) -> str:
        """`1.86× faster [1.70-2.03×]` (`0.98× (slower) [0.91-1.06×]`); past ±50%, the
        interval is not given as figures (`1.96× faster, its interval past ±50%`)."""
        speed = 1 / self.ratio
        how = " faster" if speed >= 1 else " (slower)"
        if self.low <= 0 or math.isinf(self.high):
            return f"{times(speed)}{how} (no interval)"
        if self.wide:
            return f"{times(speed)}{how}, its interval past ±{WIDE:.0%}"
        return f"{times(speed)}{how} [{times(1 / self.high, unit=False)}-{times(1 / self.low)}]"


def effect(pairs: list[tuple[float, float]]) -> Effect | None:
    """The effect of `pairs` (before, after) of window steps: the geometric mean of the
    pairs' ratios, and its 95% interval (Student's t over their logs; a single pair has
    none: its interval is everything). None without a pair."""
    logs = [math.log(b / a) for a, b in pairs if a > 0 and b > 0]
    if not logs:
        return None
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return Effect(math.exp(mean), 0.0, math.inf, 1)
    df = len(logs) - 1
    t = T95.get(df) or next((v for k, v in sorted(T95.items()) if k >= df), 2.0)
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return Effect(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))


def spread(medians: list[float]) -> float:
    """How far runs' medians spread: (max - min) / their median (0 for fewer than two)."""
    if len(medians) < 2:
        return 0.0
    return (max(medians) - min(medians)) / statistics.median(medians)


def halves(steps: list[float]) -> tuple[float, float] | None:
    """The window's earlier and later halves' means (None under four steps)."""
    if len(steps) < 4:
        return None
    mid = len(steps) // 2
    return statistics.fmean(steps[:mid]), statistics.fmean(steps[mid:])


def settling(before: list[list[float]], after: list[list[float]]) -> float | None:
    """How the remedy's runs' step changed from the window's earlier half to its later,
    beside the unchanged runs' own change (later / earlier, over before's; further from 1
    than 1 - SETTLING: still settling). None where the window is too short to say."""

    def drift(runs: list[list[float]]) -> float | None:
        ratios = [h[1] / h[0] for h in map(halves, runs) if h is not None and h[0] > 0]
        return statistics.median(ratios) if ratios else None

    b, a = drift(before), drift(after)
    return a / b if a is not None and b else None
