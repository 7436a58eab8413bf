"""`run --try-fixes`' time: what a run of the job takes (the job's run under `run` to its
window's end, less the compile it stored in its cache, which the runs here load from their
copy of it: job_caches), said before the rounds, and the rounds a --budget holds."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from compilediag.report.words import plural

if TYPE_CHECKING:
    from compilediag.analysis.step.remedies import Candidate
    from compilediag.analysis.step.runtime import JobRun
    from compilediag.report.model import Report


def after_window_s(run: JobRun, stop_after: int | None) -> float:
    """The time the job's run spent on its steps past its window's end, which a run here
    (ended there) leaves out, by its processes' own clocks (the least of them: the job ends
    with its last); 0 where --stop-after ended it. Its exit is not in it: a run here pays
    it too (a CUDA job's, on an H200: 5-12 s from its window's end to its exit handler,
    stopped there; bench/results/gpu_try_fixes_parts)."""
    past = [
        p.last_step_s - p.window_end_s + (p.wall_s - p.exit_s)  # (and the probe's at exit)
        for p in run.processes
        if p.window_end_s is not None and p.last_step_s is not None and p.exit_s is not None
    ]
    return max(min(past), 0.0) if past and stop_after is None else 0.0


# what loading a compiled graph from the cache costs, of the compile that stored it (the
# generated code imported again, its kernels loaded): tests/fixtures/run_jobs/bounded.py's
# Inductor job on CPU, 3.3 s warm of 25 s cold past Dynamo (a look's gated MLP: 1.5 of 22.5)
LOAD_SHARE = 0.15


def stored_compile_s(report: Report) -> float:
    """What the job's run under `run` compiled and stored in its cache, which each run here
    loads from its copy (job_caches) instead: its compile past Dynamo, in the share of its
    FX graph cache's lookups that missed (by torch's records), less what loading it costs
    (LOAD_SHARE); a rank's (the ranks compile side by side). 0 where every lookup hit, or
    none was made (no cache, or no Inductor)."""
    ct = report.compile_time
    if ct is None:
        return 0.0
    missed = ct.caches.get("fx_graph_cache_miss", 0)
    looked = missed + ct.caches.get("fx_graph_cache_hit", 0)
    if not missed or not looked:
        return 0.0
    past_dynamo = max(ct.total_s - ct.dynamo_s, 0.0)
    return past_dynamo * (1 - LOAD_SHARE) * missed / looked / max(len(report.ranks), 1)


# a first run this far off the time a run was said to take: the rounds' time is said again
FORECAST_OFF = 0.25


class RoundClock:
    """The rounds' time: without --budget, the fewest rounds that give an interval
    (trials.MIN_PAIRS); with it, a round is started only where its runs, at the time a run
    has taken so far (before any: the job's run under `run`, less the compile it stored in
    its cache), end within it (the first round always runs)."""

    def __init__(
        self, budget_s: float | None, job_s: float, stored_s: float = 0.0, cut_s: float = 0.0
    ) -> None:
        """`job_s`: the job's run to its window's end (`cut_s` past it left out);
        `stored_s`: the compile it stored in its cache, which each run here loads instead
        (a remedy whose settings change the graphs compiles them on its first run, its
        kernels mostly found in the copy: 3.6 s more in a 12 s run, a round of 5 runs 60 s
        as said, on tests/fixtures/run_jobs/bounded.py's Inductor job)."""
        stored_s = min(stored_s, job_s)
        self.budget_s, self.job_s, self.stored_s, self.cut_s = (
            budget_s, job_s - stored_s, stored_s, cut_s
        )  # fmt: skip
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

    def fits(self, runs: int) -> bool:
        """Whether --budget holds another round of `runs` runs (room_for, unmarked)."""
        spent = time.monotonic() - self.start
        return self.budget_s is not None and spent + runs * self.run_s() <= self.budget_s

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
        text = (
            f"compilediag: --try-fixes: the job as it is and with each remedy ({names}), to the "
            f"window's end, alternated: {stats.MIN_PAIRS} rounds of {runs} runs, about "
            f"{self.job_s:.0f} s a run ({self._why_run_s()}), about {least / 60:.1f} min"
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
        """After the first run here (the job as it is): where it took more than FORECAST_OFF
        off the time a run was said to take, the rounds' time again by it, and the rounds a
        --budget holds then ('' where the forecast held; a look saw 21 s a run after "about
        9 s", when each run here compiled in an empty cache)."""
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
        if self.stored_s >= 0.5:
            said += f", less {self.stored_s:.0f} s of the compile it stored in its cache"
        return said + ("; each run here compiles with a copy of the job's caches as its run "
                       "left them")  # fmt: skip
