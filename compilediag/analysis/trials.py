"""Alternated runs (`run --try-fixes`): a remedy's effect on the job's step as a ratio of
each run's window (its steps' mean: a step that waits for a batch every other step counts
at its real rate), the remedy's run over the unchanged run beside it, with a 95%
interval by bootstrap over the pairs; when to stop adding pairs; whether the effect was
still settling across the window. No torch, no runs: figures in, figures out."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

# kept only where the whole interval is at least this much faster (after/before at most)
KEEP_AT = 0.95
MIN_PAIRS = 3
MAX_PAIRS = 8
# an interval this narrow (high / low - 1) is settled whatever it says
SETTLED_WIDTH = 0.10
# a remedy whose runs' later half of the window ran this much faster or slower (against its
# earlier half, beside the unchanged runs' own) is still settling
SETTLING = 0.85
BOOTSTRAP = 4000


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
        return self.high <= KEEP_AT

    @property
    def settled(self) -> bool:
        """More pairs would not change the decision: kept, out of reach of KEEP_AT, or
        narrow."""
        return self.kept or self.low > KEEP_AT or self.high / self.low - 1 <= SETTLED_WIDTH

    def words(self) -> str:
        """`1.86× faster [1.70-2.03×]` (`0.98× [0.91-1.06×]` for no effect)."""
        low, high = 1 / self.high, 1 / self.low
        speed = 1 / self.ratio
        how = " faster" if speed >= 1 else " (slower)"
        return f"{speed:.2f}×{how} [{low:.2f}-{high:.2f}×]"

    def plus_minus(self) -> str:
        """The interval's half-width as a share of the step: `±7%`."""
        return f"±{(self.high - self.low) / 2:.0%}"


def effect(pairs: list[tuple[float, float]], seed: int = 0) -> Effect | None:
    """The effect of `pairs` (before, after) of window medians; None without a pair. The
    interval resamples the pairs (the same seed each time: a report made again says the
    same)."""
    logs = [math.log(b / a) for a, b in pairs if a > 0 and b > 0]
    if not logs:
        return None
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(logs, k=len(logs))) for _ in range(BOOTSTRAP))
    low = means[int(0.025 * BOOTSTRAP)]
    high = means[min(BOOTSTRAP - 1, int(0.975 * BOOTSTRAP))]
    return Effect(math.exp(statistics.fmean(logs)), math.exp(low), math.exp(high), len(logs))


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
