"""The job's own pace (#74). The window's steps run with the probe's instruments on (each
part's marks, the loop's line clock, the backward graphs' marks); the steps around it, on
the same rank, run with none of them (one clock reading a step). A figure of the window is
therefore given as a share of a step, set on the job's own pace: the median of the steps
around it where they did the window's work (same shapes: entry_calls.window_work), else the
window's own median step. A step is a median, never a mean a few stalls dominate: the
window's parts are their means over its training steps, stalls left out (other_work.
stalled_steps), set on that median."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from compilediag.analysis.step.other_work import STALL, plain_training_ms, training_profile
from compilediag.harness.worker_types import ProcessRuntime, Profiled, RegionTime

MIN_AROUND = 5  # steps around the window, at least, to set its figures on their pace
MIN_BEFORE = 3  # steps just before the window, at least, to see whether the pace moved
# the steps just before the window and those after it further apart than this (the slower's
# median over the faster's): the job's pace moved during the run (a machine shared with other
# work, a host's clock speed), and what the window's instruments cost is not told apart from
# that. On 2 H200s the slow rank's Python batch took 29 ms a step, then 17 ms from step 24 on,
# alike with and without compilediag (bench/README.md)
MOVED = 1.25
# the window's median step further than this from the steps around it, either way: far more
# than its instruments cost a step (1.006-1.06x measured, bench/README.md), so the machine's
# pace moved between them (another's work on it), and a figure set on the steps around it
# would be neither's (a new user's window ran 2.82x the steps around it, and its sleep-bound
# data part was set at a third of what it took, under the sleep's own floor). Not nearer:
# a job's own steps vary that much by where they fall (a Trainer's window read 1.26x the
# steps around it by the job's own clock, the steps after an evaluation slower)
APART = 1.5
# the steps around the window: their mean this far over their median, and the steps over
# SLOW times the median that make it, are said beside the pace (a DCGAN's data loader fell
# behind in each epoch's second half: a quarter of its steps took 3x the median, its steps
# 22.6 ms on average by its own clock where the pace read 18.2 ms). The window's figures
# stay set on the median (a step as most steps run it): those steps' cost is not in them
MEAN_OVER = 1.1
SLOW = 2.0


@dataclass
class Pace:
    """One process's window against its own pace."""

    window_ms: float | None = None  # the window's median step (its training steps)
    around_ms: float | None = None  # the median of the steps around it
    around: int = 0  # how many
    before_ms: float | None = None  # the median of the steps just before it (MIN_BEFORE+)
    spread: tuple[float, float] | None = None  # the window's steps' quartiles (4 or more)
    around_mean_ms: float | None = None  # the steps around it: their mean
    around_slow: int = 0  # ... how many took over SLOW times their median

    @property
    def varies(self) -> bool:
        """Whether the window's own steps vary more than APART between their quartiles (a
        job whose steps alternate 1.8 and 6 ms): a median of a few steps around it falls
        on either level by chance (a look read 0.361x the job's own 6 ms, "the steps around
        it were held up", while the window itself ran half its steps at 6 ms), so neither
        what its instruments cost nor a moved pace is told apart from that."""
        return self.spread is not None and self.spread[1] > APART * self.spread[0]

    @property
    def moved(self) -> bool:
        """Whether the job's pace moved between the steps before the window and after it:
        they differ by more than MOVED, and the window ran nearer the steps before it (where
        it ran nearer those after it, the few before it were the odd ones: a compile's
        warm-up, a stall, and the steps after it are the job's pace)."""
        b, a, w = self.before_ms, self.around_ms, self.window_ms
        if b is None or self.around < MIN_AROUND or not a or not w or b <= 0 or self.varies:
            return False
        return max(b, a) / min(b, a) > MOVED and abs(math.log(w / b)) < abs(math.log(w / a))

    @property
    def apart(self) -> bool:
        """Whether the window ran further than APART from the steps around it (the pace not
        seen to move before and after it)."""
        a, w = self.around_ms, self.window_ms
        if self.around < MIN_AROUND or not a or not w or self.moved or self.varies:
            return False
        return max(a, w) / min(a, w) > APART

    @property
    def at_pace(self) -> bool:
        """Whether the window's figures are set on the steps around it."""
        return self.around >= MIN_AROUND and not (self.moved or self.apart or self.varies)

    @property
    def step_ms(self) -> float | None:
        """The step the window's figures are set on: the job's own pace where measured."""
        return self.around_ms if self.at_pace else self.window_ms

    @property
    def cost(self) -> float | None:
        """What the window's instruments added to a step, against the steps around it."""
        if self.window_ms is None or not self.at_pace or not self.around_ms:
            return None
        return round(self.window_ms / self.around_ms - 1, 4)


def pace_of(p: ProcessRuntime, left_out: set[int], alike: bool) -> Pace:
    """The window's median step, and the steps around it where they did its work (`alike`)."""
    if p.profiled is None:
        return Pace()
    kept = training_profile(p.profiled, left_out)
    steps = [row[0] for row in kept.per_step] or ([kept.call_ms] if kept.calls else [])
    if not steps:
        return Pace()
    around = _around(p, left_out) if alike else []
    before = _before(p, left_out) if alike else []
    middle = statistics.median(around) if around else None
    return Pace(
        window_ms=round(statistics.median(steps), 6),
        around_ms=round(middle, 6) if middle is not None else None,
        around=len(around),
        around_mean_ms=round(statistics.fmean(around), 6) if around else None,
        around_slow=sum(t > SLOW * middle for t in around) if middle is not None else 0,
        before_ms=round(statistics.median(before), 6) if len(before) >= MIN_BEFORE else None,
        spread=_quartiles(steps) if alike else None,  # (other shapes: compared shape by shape)
    )


def _quartiles(steps: list[float]) -> tuple[float, float] | None:
    """The first and third quartiles of the window's steps, where 4 or more ran."""
    if len(steps) < 4:
        return None
    q1, _, q3 = statistics.quantiles(steps, n=4, method="inclusive")
    return round(q1, 6), round(q3, 6)


def _before(p: ProcessRuntime, left_out: set[int]) -> list[float]:
    """The last MIN_AROUND steps timed before the window (a compile's steps left out)."""
    if len(p.plain_steps) != len(p.plain_step_ms) or not p.window:
        return []
    timed = zip(p.plain_steps, p.plain_step_ms, strict=True)
    return [t for n, t in timed if n < p.window[0] and n not in left_out][-MIN_AROUND:]


def _around(p: ProcessRuntime, left_out: set[int]) -> list[float]:
    """The steps around the window the job's pace is taken from: those after it, where
    MIN_AROUND or more ran (the steps just after a compile run slower for a while: the
    allocator's and the caches' warm-up), else the last MIN_AROUND before it; fewer on
    either side, none, and the window's own figures stand (a pace over every step timed
    took in the step just after the compile and those just after the kernel profile: a
    short 2-rank job's 23.5 ms step read 24.8-27.2 ms). Where the kernel profile ran after
    the window, the steps after it run slower for a while (torch.profiler's after-effect:
    33.8 ms a step against the job's own 17.8 in a new user's run): only those before the
    window are taken. A process file of an older release (no step numbers): every step
    timed."""
    if len(p.plain_steps) != len(p.plain_step_ms) or not p.window:
        return plain_training_ms(p, left_out)
    before = _before(p, left_out)
    before = before if len(before) >= MIN_AROUND else []
    if p.kernel_step_numbers and min(p.kernel_step_numbers) > p.window[-1]:
        return before
    after = [
        t for n, t in zip(p.plain_steps, p.plain_step_ms, strict=True)
        if n > p.window[-1] and n not in left_out
    ]  # fmt: skip
    return after if len(after) >= MIN_AROUND else before


def at_pace(p: ProcessRuntime, left_out: set[int], pace: Pace) -> tuple[Profiled, float]:
    """The window's figures over its training steps, each part a share of the step, set on
    `pace`'s step (the job's own where measured, else the window's median: never a mean a
    few stalls make); and the factor they were set on it by (a figure measured beside them
    in the window's steps, a wait, takes the same)."""
    assert p.profiled is not None
    kept = training_profile(p.profiled, left_out)
    if not kept.per_step or pace.step_ms is None:
        return kept, 1.0
    mean = statistics.fmean(r[0] for r in kept.per_step)
    by = pace.step_ms / mean if mean > 0 else 1.0
    return scaled(kept, by), by


def medians_on(medians: dict[str, float], step_ms: float | None) -> dict[str, float]:
    """The window's median step and median parts (runtime.step_medians) set on `step_ms`:
    the step the report gives is that median, each part's median in proportion."""
    step = medians.get("step")
    if not step or step_ms is None:
        return medians
    return {name: round(v * step_ms / step, 6) for name, v in medians.items()}


def steady(rows: list[list[float]]) -> list[list[float]]:
    """The window's step rows ([the step, its parts...]) under STALL times their median step:
    a stall a busy machine made left out, as each run is judged (--try-fixes compares the
    runs' windows by the same rows)."""
    if not rows:
        return []
    median = statistics.median(r[0] for r in rows)
    return [r for r in rows if r[0] <= STALL * median]


def scaled(p: Profiled, by: float) -> Profiled:
    """Every figure of `p` multiplied `by` (a share of the step kept)."""

    def x(v: float) -> float:
        return round(v * by, 6)

    return replace(
        p,
        call_ms=x(p.call_ms), outside_ms=x(p.outside_ms), backward_ms=x(p.backward_ms),
        optimizer_ms=x(p.optimizer_ms), data_ms=x(p.data_ms), evaluation_ms=x(p.evaluation_ms),
        hooks_ms=x(p.hooks_ms), module_ms=x(p.module_ms), in_call_ms=x(p.in_call_ms),
        backward_hooks_ms=x(p.backward_hooks_ms),
        regions=[
            RegionTime(r.compile_id, x(r.graph_ms), x(r.gap_ms), x(r.backward_ms),
                       x(r.backward_gap_ms))
            for r in p.regions
        ],
        per_step=[[x(v) for v in row] for row in p.per_step],
        step_regions=[
            {cid: [x(v) for v in figures] for cid, figures in step.items()}
            for step in p.step_regions
        ],
    )  # fmt: skip
