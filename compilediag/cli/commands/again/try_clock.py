"""`run --try-fixes`' time: what a run of the job takes (the job's run under `run` to its
window's end, and the compile its cache saved it, which the runs here make in an empty cache
of their own), said before the rounds, and the rounds a --budget holds."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from compilediag.report.words import plural

if TYPE_CHECKING:
    from compilediag.analysis.step.remedies import Candidate
    from compilediag.analysis.step.runtime import JobRun
    from compilediag.report.model import Report


def after_window_s(run: JobRun, stop_after: int | None) -> float:
    """The time the job's run spent past its window's end, by its processes' own clocks
    (the least of them: the job ends with its last); 0 where --stop-after ended it."""
    past = [p.wall_s - p.window_end_s for p in run.processes if p.window_end_s is not None]
    return max(min(past), 0.0) if past and stop_after is None else 0.0


def cold_compile_s(report: Report) -> float:
    """What each run here compiles past the job's run under `run`: its runs start with an
    empty cache of their own (try_fixes.CACHE_VARS), so the compile time the job's cache
    hits saved, by torch's records, less what the hits took in its place (the compile past
    Dynamo); a rank's (the ranks compile side by side)."""
    ct = report.compile_time
    if ct is None or not ct.cache_saved_s:
        return 0.0
    loaded = ct.total_s - ct.dynamo_s
    return max(ct.cache_saved_s - loaded, 0.0) / max(len(report.ranks), 1)


# a first run this far off the time a run was said to take: the rounds' time is said again
FORECAST_OFF = 0.25


class RoundClock:
    """The rounds' time: without --budget, the fewest rounds that give an interval
    (trials.MIN_PAIRS); with it, a round is started only where its runs, at the time a run
    has taken so far (before any: the job's run under `run` and the compile its cache hits
    saved it), end within it (the first round always runs)."""

    def __init__(
        self, budget_s: float | None, job_s: float, cold_s: float = 0.0, cut_s: float = 0.0
    ) -> None:
        """`job_s`: the job's run to its window's end (`cut_s` past it left out); `cold_s`:
        the compile its cache saved it, which each run here makes."""
        self.budget_s, self.job_s, self.cold_s, self.cut_s = budget_s, job_s + cold_s, cold_s, cut_s
        self.start, self.out, self.rounds, self.runs = time.monotonic(), False, 0, 0
        self.forecast_s = 0.0  # said before the rounds (the job's run under `run`)
        self.revised_s = 0.0  # said after the first round, by its runs' own time

    def run_s(self) -> float:
        spent = time.monotonic() - self.start
        return spent / self.runs if self.runs else self.job_s

    def room_for(self, runs: int, short: bool) -> bool:
        """Another round of `runs` runs; `short`: a remedy has fewer pairs than an interval
        needs."""
        from compilediag.analysis.step import trials as stats

        if self.budget_s is None:
            if not short and self.rounds >= stats.MIN_PAIRS:
                self.out = True  # (more would settle an interval: --budget)
            return short
        if self.rounds and time.monotonic() - self.start + runs * self.run_s() > self.budget_s:
            self.out = True
        return not self.out

    def progress(self, active: int) -> str:
        """After a round: the rounds left at the time a run has taken so far (its first round
        pays for the remedies' own compiles), and the time they will take."""
        from compilediag.analysis.step import trials as stats

        spent = time.monotonic() - self.start
        rounds = stats.MIN_PAIRS
        if self.budget_s is not None:
            fit = int((self.budget_s - spent) // max((1 + active) * self.run_s(), 1e-9))
            rounds = min(stats.MAX_PAIRS, self.rounds + max(fit, 0))
        left = max(rounds - self.rounds, 0) * (1 + active) * self.run_s()
        if self.rounds == 1 and not self.revised_s:  # (the kept ones together: a second set)
            self.revised_s = spent + left
        if rounds <= self.rounds:
            return f"compilediag: round {self.rounds} done, {spent:.0f} s in all"
        return (
            f"compilediag: round {self.rounds} done, {spent:.0f} s so far ({self.run_s():.0f} s "
            f"a run): about {left:.0f} s more for {max(rounds - self.rounds, 0)} more round"
            f"{'s' * (rounds - self.rounds != 1)}"
            + ("" if self.budget_s is None else ", within --budget, unless each settles first")
        )

    def plan(self, chosen: list[Candidate]) -> str:
        """What the rounds will take, said before they start."""
        from compilediag.analysis.step import trials as stats

        runs = 1 + len(chosen)
        names = ", ".join(c.remedy for c in chosen)
        least = stats.MIN_PAIRS * runs * self.job_s
        self.forecast_s = least
        # torch's records of the cache's hits are a floor: an empty cache also builds the
        # kernels that a shared cache held (a look: 3 s said, 17 s taken)
        more = " or more" if self.cold_s >= 0.5 else ""
        text = (
            f"compilediag: --try-fixes: the job as it is and with each remedy ({names}), to the "
            f"window's end, alternated: {stats.MIN_PAIRS} rounds of {runs} runs, about "
            f"{self.job_s:.0f} s a run{more} ({self._why_run_s()}), about {least / 60:.1f} "
            f"min{more}"
        )
        if len(chosen) >= 2:
            together = stats.MIN_PAIRS * 2 * self.job_s
            text += (
                f"; where two or more are kept, {stats.MIN_PAIRS} rounds more of them together "
                f"and the job as it is, about {together / 60:.1f} min"
            )
        if self.budget_s is None:
            return text + "; --budget SECONDS runs more rounds, until each effect settles"
        fit = int(self.budget_s // (runs * self.job_s)) if self.job_s else stats.MAX_PAIRS
        if fit >= stats.MIN_PAIRS:
            return text + f"; more until each effect settles, within --budget {self.budget_s:g} s"
        if fit < 1:
            return text + (
                f"; --budget {self.budget_s:g} s holds less than a round: one runs (the first "
                f"always does, about {runs * self.job_s:.0f} s), its remedies undecided"
            )
        return text + (
            f"; --budget {self.budget_s:g} s holds {plural(fit, 'round')}: the intervals will "
            "be the wider (or none, of one)"
        )

    def first_run(self, runs: int) -> str:
        """After the first run here (the job as it is, in an empty cache of its own): where
        it took more than FORECAST_OFF off the time a run was said to take, the rounds'
        time again by it, and the rounds a --budget holds then ('' where the forecast held;
        a look saw 21 s a run after "about 9 s": the compile an empty cache costs is more
        than torch's records of the job's cache hits say)."""
        from compilediag.analysis.step import trials as stats

        took = self.run_s()
        if self.runs != 1 or not self.job_s or abs(took / self.job_s - 1) <= FORECAST_OFF:
            return ""
        least = stats.MIN_PAIRS * runs * took
        text = (
            f"compilediag: the job as it is took {took:.0f} s here, not about {self.job_s:.0f} "
            f"s: {stats.MIN_PAIRS} rounds of {runs} runs, about {least / 60:.1f} min"
        )
        if self.budget_s is None:
            return text
        fit = max(int(self.budget_s // (runs * took)), 1)
        if fit >= stats.MIN_PAIRS:
            return text + f", within --budget {self.budget_s:g} s"
        return text + (
            f"; --budget {self.budget_s:g} s holds {plural(fit, 'round')}: the intervals will "
            "be the wider (or none, of one)"
        )

    def _why_run_s(self) -> str:
        """Where the time of a run, before any ran here, comes from."""
        said = "the job's run just now" + (" to its window's end" if self.cut_s >= 0.5 else "")
        if self.cold_s < 0.5:
            return said
        return (
            f"{said}, {self.job_s - self.cold_s:.0f} s, and {self.cold_s:.0f} s of compiling "
            "its cache saved it, by torch's records: each run here starts with an empty cache, "
            "which can cost more; said again after the first run where it does"
        )
