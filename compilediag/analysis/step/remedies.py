"""`compilediag run --try-fixes`: which remedies a job's report calls for (each made with no
edit of the user's code, in runs of its own: harness/bootstrap/_compilediag_runtime/
remedies.py makes it), what each can move given the verdict, and each one's runs measured
against the unchanged runs alternated with them: the step's effect over the pairs with its
95% interval (trials.py), the part the remedy targets over the same window (medians),
breaks and recompiles, and the losses of the window's steps. A remedy is kept only where
the whole interval is at least 5% faster and nothing got worse."""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass

from compilediag.analysis.step import trials
from compilediag.analysis.step.advice import data_remedy, median_share, optimizer_remedies
from compilediag.analysis.step.kernel_times import GEMMS
from compilediag.analysis.step.other_work import training_profile, work_steps
from compilediag.analysis.step.pace import steady
from compilediag.analysis.step.runtime import JobRun, step_medians
from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.model import Report, Tried
from compilediag.report.vocabulary import BreakCause
from compilediag.report.words import ms, plural

# a step this much shorter (and beyond the runs' spread) is an improvement
MIN_GAIN = 0.05
# the largest difference of two runs' losses over the window, as a share of the mean loss,
# that still matches: a remedy that keeps the job's arithmetic (workers, CUDA graphs, a
# value kept in the graph) within LOSS_RTOL; one that rounds otherwise drifts over the
# steps before the window: a fused AdamW's losses moved 0.9% of the mean by steps 20-30
# of a small MLP on an H100, where the unchanged job's own two runs differed by 4e-7
# (bench/results/gpu_try_fixes); TF32's 10-bit mantissa moves them further
LOSS_RTOL = 1e-3
LOSS_RTOL_BY = {"fused": 2e-2, "foreach": 2e-2, "tf32": 5e-2}


@dataclass
class Candidate:
    """A remedy the report calls for: its name (remedies.py's), the part it targets
    (step_medians' name; "" for the whole step), and why, in words."""

    remedy: str
    part: str
    why: str
    expected: str = ""  # what it can move, given the verdict (expected())


def candidates(report: Report, cuda: bool = False) -> list[Candidate]:
    """The remedies this job's report calls for, most promising first (by the share of the
    step their part holds); `cuda`: the job's graphs ran on CUDA (where an optimizer left
    to torch's default already runs foreach)."""
    job = report.runtime
    if job is None or not job.step_medians.get("step"):
        return []
    out: list[tuple[float, Candidate]] = []
    share = functools.partial(median_share, job)
    said = functools.partial(shown_share, report)
    why = f"the optimizer step takes {said('optimizer'):.0%} of a step"
    for i, remedy in enumerate(optimizer_remedies(job, cuda)):  # fused, one kernel, first
        out.append((share("optimizer") - i * 1e-6, Candidate(remedy, "optimizer", why)))
    if data_remedy(job):
        why = (
            f"the data loader's next batch takes {said('data'):.0%} of a step, in the main process"
        )
        out.append((share("data"), Candidate("workers", "data", why)))
    causes = {b.cause for b in report.graph_breaks}
    if BreakCause.ITEM in causes:
        out.append((share("forward"), Candidate(
            "scalars", "forward", "a graph break at .item() splits the forward"
        )))  # fmt: skip
    if BreakCause.DYNAMIC_OUTPUT_SHAPE in causes:
        out.append((share("forward"), Candidate(
            "dynamic_ops", "forward", "a graph break at an op whose output shape depends on data"
        )))  # fmt: skip
    bound = job.bound
    if bound is not None and bound.part == "host":
        out.append((bound.share, Candidate("cudagraphs", "", bound.why)))
    t = report.timings
    if t is not None and any(k.peak_unit == "fp32" and k.op.startswith(GEMMS) for k in t.kernels):
        out.append((0.0, Candidate("tf32", "", "float32 matmuls run without TF32")))
    chosen = [c for _, c in sorted(out, key=lambda x: -x[0])]
    for c in chosen:
        c.expected = expected(c, report)
    return chosen


def shown_share(report: Report, part: str) -> float:
    """A part's share of a step as the report's advice says it (the breakdown's, on the
    job's pace), else the window's medians' (look 28: "the optimizer step takes 22% of the
    step" before the runs, "30% of a step (4.32 ms of 14.3 ms)" in the same report)."""
    b = report.timings.breakdown if report.timings is not None else None
    part_ms = {"optimizer": b.optimizer_ms, "data": b.data_ms}.get(part) if b else None
    if b is not None and part_ms is not None and b.call_ms:
        return part_ms / b.call_ms
    return median_share(report.runtime, part) if report.runtime is not None else 0.0


def expected(c: Candidate, report: Report) -> str:
    """What the remedy can move, given the verdict, in words: the part it targets and its
    share of the step (the most it can take off), or why it cannot shorten this step."""
    job = report.runtime
    bound = job.bound if job is not None else None
    medians = job.step_medians if job is not None else {}
    step = medians.get("step") or 0.0
    if "+" in c.remedy:  # the kept ones together: each has said what it moves
        return "can shorten what each of them shortened alone, at once"
    if c.remedy == "tf32":
        if bound is not None and bound.part != "device":
            return (f"cannot shorten a step bound by {bound.part}: faster float32 matmuls "
                    "shorten the device's work, which this step does not wait on")  # fmt: skip
        return "can shorten the device's float32 matmuls"
    if c.remedy.startswith("cudagraphs"):
        if bound is not None and bound.part == "device":
            return "cannot shorten a device-bound step: CUDA graphs cut the host's launches"
        return "can cut the host's kernel launches, which pace this step"
    share = shown_share(report, c.part) if step else 0.0
    if share < MIN_GAIN:
        return f"cannot shorten the step by {MIN_GAIN:.0%}: its part, {c.part}, holds {share:.0%}"
    return f"can shorten the {c.part}: at most {share:.0%} of the step"


@dataclass
class Runs:
    """A remedy's runs beside the unchanged ones: each pair's (before, after) facts, the
    first run's reports (breaks, recompiles), and the job's error where a run with the
    remedy failed (its error and torch's hint)."""

    pairs: list[tuple[JobRun, JobRun]]
    before: Report
    after: Report | None
    failure: str = ""
    hint: str = ""


def loss_noise(baseline: list[JobRun]) -> float | None:
    """The unchanged job's own run-to-run difference of the window's losses (its first two
    runs; None where not compared)."""
    return _loss_gap(baseline[0], baseline[1])[0] if len(baseline) >= 2 else None


def measured(
    c: Candidate, runs: Runs, noise: float | None = None, pair_s: float | None = None
) -> Tried:
    """One remedy's runs against the unchanged ones beside them, over the same window (its
    later half where the remedy's effect was still settling): the step's effect over the
    pairs with its interval, the part it targets, and breaks, recompiles and losses of the
    first pair; `pair_s`: what a pair of runs took, for what more would decide it."""
    tried = Tried(c.remedy, c.remedy, "", part=c.part, expected=c.expected)
    tried.remedies = c.remedy.split("+")
    tried.graph_breaks = len(runs.before.graph_breaks)
    tried.recompiles = len(runs.before.recompiles)
    before = [_window(b, c.part) for b, _ in runs.pairs]
    _figures(tried, before, after=False)
    made = [m for _, a in runs.pairs[:1] for p in a.processes for m in p.remedies]
    tried.code = "; ".join(dict.fromkeys(m.what for m in made)) or c.remedy
    tried.where = next((f"{m.file}:{m.line}" for m in made if m.file), "")
    if not tried.where and c.remedy.startswith("cudagraphs") and runs.pairs:
        tried.where = _compiled_at(runs.pairs[0][1])  # mode="reduce-overhead" goes there
    if runs.failure:
        tried.error, tried.hint = runs.failure, runs.hint
        tried.why = f"not kept: the job failed with it: {runs.failure}"
        return tried
    if not made:
        tried.why = "not made: the job made no object it applies to (or imported torch otherwise)"
        return tried
    if runs.after is None:
        tried.why = "its run wrote no trace"
        return tried
    tried.graph_breaks_after = len(runs.after.graph_breaks)
    tried.recompiles_after = len(runs.after.recompiles)
    after = [_window(a, c.part) for _, a in runs.pairs]
    tried.settling = _settling(before, after)
    if tried.settling:  # judged on the window's later half
        before = [(s[len(s) // 2 :], p[len(p) // 2 :]) for s, p in before]
        after = [(s[len(s) // 2 :], p[len(p) // 2 :]) for s, p in after]
        _figures(tried, before, after=False)
    _figures(tried, after, after=True)
    tried.loss_match, tried.losses = _losses(runs.pairs[0][0], runs.pairs[0][1], c.remedy, noise)
    tried.kept, tried.why = _judge(tried, [s for s, _ in before], [s for s, _ in after], pair_s)
    return tried


Window = tuple[list[float], list[float]]  # a run's window: each step's time, its part's


def _figures(tried: Tried, runs: list[Window], after: bool) -> None:
    """The step and the part over the runs: each run's window mean, their geometric mean,
    so that the step before and after are as far apart as the pairs' effect says (each
    side's median read "the step 90.8 ms → 8.68 ms" beside 1.98x where runs swung between
    two paces)."""
    step = geomean([m for m in (_mean(s) for s, _ in runs) if m is not None])
    part = geomean([m for m in (_mean(p) for _, p in runs) if m is not None])
    if after:
        tried.step_ms_after, tried.part_ms_after = step, part
    else:
        tried.step_ms, tried.part_ms = step, part


def _settling(before: list[Window], after: list[Window]) -> str:
    """Where the remedy's runs' step still changed across the window (beside the unchanged
    runs' own change), in words; "" where it had settled (or the window is too short)."""
    drift = trials.settling([s for s, _ in before], [s for s, _ in after])
    if drift is None or abs(drift - 1) <= 1 - trials.SETTLING:
        return ""
    late = [h for h in (trials.halves(s) for s, _ in after) if h is not None]
    return (
        f"still settling across the window: its runs' later half ran "
        f"{ms(statistics.median(h[1] for h in late))} a step against "
        f"{ms(statistics.median(h[0] for h in late))} in the earlier; judged on the later "
        "half (a later --profile-steps window measures its steady state)"
    )


def _compiled_at(run: JobRun) -> str:
    """file:line of the job's first torch.compile call whose result was called."""
    p = _first(run)
    called = next((c for c in p.compile_calls if c.called and c.file), None) if p else None
    return f"{called.file}:{called.line}" if called else ""


def _window(run: JobRun, part: str) -> tuple[list[float], list[float]]:
    """The lowest rank's window: each training step's time, and its `part`'s."""
    p = _first(run)
    if p is None or p.profiled is None:
        return [], []
    profiled = training_profile(p.profiled, work_steps(run.processes))
    rows = steady(profiled.per_step)
    column = list(step_medians(profiled)).index(part) if part else 0
    return [row[0] for row in rows], [row[column] if column < len(row) else 0.0 for row in rows]


def window_mean(run: JobRun) -> float | None:
    """The lowest rank's step over the window: its steady steps' total over their count (a
    step that waits for a batch every other step counts at the rate it runs; a median would
    take the faster half; a stall a busy machine made, STALL times the median, is left out
    of the baseline's and each remedy's alike: pace.steady)."""
    return _mean(_window(run, "")[0])


def _first(run: JobRun) -> ProcessRuntime | None:
    return next((p for p in run.processes if p.calls), None)


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 6) if xs else None


def geomean(xs: list[float]) -> float | None:
    if not xs:
        return None
    # (a part some run measured at 0 has no geometric mean: its plain mean)
    return round(statistics.geometric_mean(xs) if min(xs) > 0 else statistics.fmean(xs), 6)


def _loss_gap(a_run: JobRun, b_run: JobRun) -> tuple[float | None, int, str]:
    """The largest difference of two runs' losses over the window's steps, as a share of
    the first run's mean loss there; the steps compared; or why they were not (None)."""
    a, b = _first(a_run), _first(b_run)
    if a is None or b is None or not a.losses or not b.losses:
        return None, 0, "losses not compared (none kept)"
    if a.seed is None or a.seed != b.seed:
        return None, 0, "losses not compared (the job is not seeded: each run draws its own)"
    lo, hi = a.window[:2] if len(a.window) >= 2 else (0, 1 << 30)
    steps = sorted((s for s in set(a.losses) & set(b.losses) if lo <= int(s) <= hi), key=int)
    pairs = [(x, y) for s in steps for x, y in zip(a.losses[s], b.losses[s], strict=False)]
    if not pairs:
        return None, 0, "losses not compared (no window step in both)"
    scale = max(statistics.fmean(abs(x) for x, _ in pairs), 1e-12)
    return max(abs(y - x) for x, y in pairs) / scale, len(steps), ""


def _losses(
    before: JobRun, after: JobRun, remedy: str, noise: float | None
) -> tuple[bool | None, str]:
    """Whether the window's losses matched, and in words: within LOSS_RTOL of the mean loss
    (a remedy that rounds otherwise: LOSS_RTOL_BY), or within three times the unchanged job's own
    run-to-run difference (a GPU's kernels may sum in another order each run). Compared
    only where both runs are seeded alike (torch's initial seed the same in both: an
    unseeded job draws another each run)."""
    gap, steps, why = _loss_gap(before, after)
    if gap is None:
        return None, why
    if gap == 0:
        return True, f"losses match exactly over {plural(steps, 'step')}"
    # each gap a share of the mean loss (a look read "within 2.0e-07 of the mean" as absolute)
    own = f"; the unchanged job's own two runs: {noise:.1e}" if noise else ""
    rtol = LOSS_RTOL_BY.get(remedy, LOSS_RTOL)
    if gap <= max(rtol, 3 * (noise or 0.0)):
        return (
            True,
            f"losses match over {plural(steps, 'step')} (apart by at most {gap:.1e} of the "
            f"mean loss{own})",
        )
    return (
        False,
        f"losses differ over {plural(steps, 'step')} (by up to {gap:.1%} of the mean loss{own})",
    )


def _judge(
    t: Tried, before: list[list[float]], after: list[list[float]], pair_s: float | None = None
) -> tuple[bool, str]:
    """Kept, or why not: no more breaks or recompiles, no loss that differs, and the whole
    95% interval of the step's effect at least 5% faster (trials.KEEP_AT); rejected where
    the whole interval is under it; else undecided, with what would decide it (`pair_s`:
    a pair of runs' seconds)."""
    worse = []
    if t.graph_breaks_after > t.graph_breaks:
        worse.append(f"graph breaks {t.graph_breaks} → {t.graph_breaks_after}")
    if t.recompiles_after > t.recompiles:
        worse.append(f"recompiles {t.recompiles} → {t.recompiles_after}")
    if t.loss_match is False:
        worse.append(
            "the losses differ (where the dataset draws random numbers, an augmentation, "
            "each worker draws from a generator of its own: the batches differ, not the "
            "step's math; seed the draws per sample to compare)"
            if t.remedy == "workers" else "the losses differ"
        )  # fmt: skip
    pairs = [(b, a) for b, a in zip(map(_mean, before), map(_mean, after), strict=True)
             if b is not None and a is not None]  # fmt: skip
    e = trials.effect(pairs)
    if e is None:
        return False, "not kept: no window step measured in one of the runs"
    t.ratio, t.pairs = round(e.ratio, 4), e.pairs
    if e.pairs >= 2:
        t.ratio_low, t.ratio_high = round(e.low, 4), round(e.high, 4)
    if worse:
        return False, f"not kept: {'; '.join(worse)}"
    runs = "on one pair of runs" if e.pairs == 1 else f"over {e.pairs} pairs of runs"
    gain = f"{1 - trials.KEEP_AT:.0%}"
    if e.kept:
        return True, f"kept: {e.words()} {runs}"
    if e.rejected:
        return False, f"not kept: {e.words()} {runs}, under a {gain} gain however read"
    t.undecided, t.more_pairs = True, e.more_pairs()
    said = f"undecided: {e.words()} {runs}"
    if e.pairs >= 2:  # (one pair has no interval to hold anything: a look read it as one)
        said += f", an interval that holds {e.holds(gain)}"
    if e.pairs + t.more_pairs > trials.MAX_PAIRS:
        return False, (
            f"{said}; at this spread, only more pairs than the {trials.MAX_PAIRS} --try-fixes "
            "runs at most would decide it: a longer --profile-steps window narrows each "
            "pair's spread"
        )
    more = plural(t.more_pairs, "more pair")
    if pair_s:
        took = t.more_pairs * pair_s
        more += f", about {took:.0f} s,"
    # one pair's spread is unknown: more give an interval, no promise of a decision (a look
    # saw "2 more pairs would decide it" and 5 pairs decide nothing); past it, the count is
    # the spread's estimate
    will = "would give an interval" if e.pairs < 2 else "would decide it at this spread"
    return False, f"{said}; {more} {will} (a --budget that holds them runs them)"
