"""`compilediag run --try-fixes`: the job again as it is and once per remedy its report
calls for (analysis/step/remedies.py picks them; the bootstrap makes each in the job's
process, no edit of its code), each to the end of the window, alternated round by round
(the unchanged job, then each remedy; the next round the other way round), at least
trials.MIN_PAIRS rounds and more until each remedy's interval settles or --budget runs
out (without --budget: the 3 rounds an interval needs, their time said before they start;
with it, a round starts only where it fits). The remedies kept are then measured together,
alternated with the job as it is again. A remedy whose run fails is reported with the job's
error and torch's hint; CUDA graphs that fail on an overwritten output are tried again with
a step marked at each call, the outputs cloned and the gradients the parameters' own."""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from compilediag.cli.commands.again.job_caches import copied_caches
from compilediag.cli.commands.again.try_clock import RoundClock, stored_compile_s
from compilediag.report.vocabulary import Finding, FindingKind
from compilediag.report.words import plural

if TYPE_CHECKING:
    from compilediag.analysis.step.remedies import Candidate, Runs
    from compilediag.analysis.step.runtime import JobRun
    from compilediag.report.model import Report, Tried, TryBaseline

# a run of the job with no caches given (Job.caches) keeps torch's in a folder of its own:
# the user's stay as their own run left them
CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
# others kept this many of the job's cores busy during its runs: said, and every pair run
LOADED = 0.5
# torch's words when a CUDA graph's output was overwritten by a later replay
OVERWRITTEN = "overwritten by a subsequent run"

# run.py's job environment: (folder, window, kernels, stop after) -> the job's environment
EnvFor = Callable[..., dict[str, str]]
Say = Callable[[str], None]


@dataclass
class Job:
    """The job as `run` was given it: its command, --profile-steps' window, --stop-after,
    --budget (seconds the alternated runs may take; None: the fewest rounds that give an
    interval), how long its run under `run` took (a run's time, before any is timed), and
    of it, the time past the window's end (the kernel profile, the steps after it), which the
    runs here do not run."""

    command: list[str]
    window: str
    stop_after: int | None = None
    budget_s: float | None = None
    job_s: float = 0.0
    after_window_s: float = 0.0
    # the environment that gives its runs torch's caches (job_caches.copied_caches); None:
    # each run in empty ones of its own
    caches: dict[str, str] | None = None


@dataclass
class Launched:
    """One run of the job for --try-fixes: its report and facts, or why it failed (the
    job's error and torch's hint, from its output), and what ran beside it (cores)."""

    report: Report | None
    run: JobRun
    failure: str = ""
    hint: str = ""
    error: str = ""  # the job's own error, from its output (job_error)
    beside: float | None = None
    overwritten: bool = False  # a CUDA graph's output read after a later replay


@dataclass
class Trial:
    """A remedy (one, or the kept ones joined by "+") and its runs so far, each paired
    with the unchanged run of the same round."""

    candidate: Candidate
    pairs: list[tuple[Launched, Launched]]
    failed: Launched | None = None
    settled: bool = False


def try_fixes(
    opts: Job, report: Report, run: JobRun, env_for: EnvFor, say: Say
) -> tuple[list[Tried], TryBaseline | None]:
    """Each remedy's runs, measured, and the unchanged runs they were measured against;
    ([], None) where the report calls for none (said by `say`)."""
    from compilediag.analysis.step.remedies import candidates

    chosen = candidates(report, cuda=any("cuda" in p.devices for p in run.processes))
    if not chosen:
        said = f"--try-fixes: nothing to try: {nothing_words(report)}"
        say(f"compilediag: {said}")
        # the report says it too (a look found it only amid the job's output)
        report.notes.append(Finding(FindingKind.NOTHING_TO_TRY, said + "."))
        return [], None
    clock = RoundClock(opts.budget_s, opts.job_s - opts.after_window_s, stored_compile_s(report),
                       opts.after_window_s)  # fmt: skip
    say(clock.plan(chosen))
    for c in chosen:
        say(f"compilediag:   {c.remedy}: {c.why}; it {c.expected}")
    with copied_caches(dict(os.environ)) as caches:
        out, baseline = _rounds(replace(opts, caches=caches), report, chosen, env_for, say, clock)
    if not baseline:
        return [], None
    say("compilediag: --try-fixes: " + "; ".join(f"{t.remedy} {t.why}" for t in out))
    return out, _baseline(baseline, opts.budget_s, clock, out)


def _rounds(
    opts: Job,
    report: Report,
    chosen: list[Candidate],
    env_for: EnvFor,
    say: Say,
    clock: RoundClock,
) -> tuple[list[Tried], list[Launched]]:
    """The remedies' rounds, then the kept ones' together: each measured, and the unchanged
    runs they were measured against ([] where the job as it is did not run)."""
    trials, baseline = _alternate(opts, [Trial(c, []) for c in chosen], env_for, say, clock)
    if not baseline:
        return [], []
    out = [_measured(t, baseline, 2 * clock.run_s()) for t in trials]
    kept = [t for t in out if t.kept]
    if len(kept) >= 2:
        together = _together(report, kept)
        say(f"compilediag: --try-fixes: the {len(kept)} kept remedies together, alternated "
            "with the job as it is again")  # fmt: skip
        clock.rounds = 0
        more, again = _alternate(opts, [Trial(together, [])], env_for, say, clock)
        if again:
            out.insert(0, _measured(more[0], again, 2 * clock.run_s()))
            baseline += again
    return out, baseline


def _alternate(
    opts: Job, trials: list[Trial], env_for: EnvFor, say: Say, clock: RoundClock
) -> tuple[list[Trial], list[Launched]]:
    """Rounds of the unchanged job and each unsettled remedy, in alternating order, until
    every remedy settles (trials.py), has trials.MAX_PAIRS pairs, or the budget runs out
    (each remedy gets trials.MIN_PAIRS pairs whatever it says: one tried again after a
    failure too); ([], []) where the job as it is did not run to the window's end."""
    from compilediag.analysis.step import trials as stats

    baseline: list[Launched] = []
    n = 0
    while True:
        active = [
            t for t in trials
            if not t.settled and t.failed is None and len(t.pairs) < stats.MAX_PAIRS
        ]  # fmt: skip
        short = any(len(t.pairs) < stats.MIN_PAIRS for t in active)
        if not active or not clock.room_for(1 + len(active), short):
            break
        order: list[Trial | None] = [None, *active] if n % 2 == 0 else [*active[::-1], None]
        made: dict[int, Launched] = {}
        for t in order:
            name = t.candidate.remedy if t else "the job as it is"
            say(f"compilediag: round {n + 1}: {name}")
            launched, interrupted = launch_job(opts, t.candidate.remedy if t else None, env_for)
            clock.runs += 1
            if t is None and (again := clock.first_run(len(order))):
                say(again)
            if interrupted:
                say("compilediag: --try-fixes interrupted: the rounds run so far are reported")
                return trials, baseline if n else []
            made[id(t)] = launched
        control = made[id(None)]
        if control.failure or control.report is None:
            say(f"compilediag: --try-fixes: the job as it is did not run to the window's end "
                f"again ({control.failure or 'no trace'}): nothing measured")  # fmt: skip
            return trials, []
        baseline.append(control)
        for t in active:
            _add(t, control, made[id(t)], trials, say)
        n += 1
        clock.rounds += 1
        say(clock.progress(len(active)))
        # (without --budget, MIN_PAIRS rounds and no more: said after them)
        budget = clock.budget_s is not None
        more = budget and clock.fits(1 + len(active))
        done = [t for t in active if len(t.pairs) >= stats.MIN_PAIRS]
        _settle(done, baseline, say, more, budget)
    return trials, baseline


def _add(t: Trial, control: Launched, after: Launched, trials: list[Trial], say: Say) -> None:
    """A remedy's run of this round: paired with the unchanged one, or its failure kept
    (CUDA graphs failing on an overwritten output: tried again, marked and cloned)."""
    from compilediag.analysis.step.remedies import Candidate
    from compilediag.harness.bootstrap._compilediag_runtime.remedies import MARKED

    if not (after.failure or after.report is None):
        t.pairs.append((control, after))
        return
    t.failed = after
    say(f"compilediag:   {t.candidate.remedy} failed: {after.failure or 'no trace'}")
    if t.candidate.remedy == "cudagraphs" and after.overwritten:
        c = t.candidate
        marked = Candidate("cudagraphs_marked", c.part, c.why, c.expected)
        trials.append(Trial(marked, []))
        say(f"compilediag:   trying it again with {MARKED}")


def _settle(
    active: list[Trial], baseline: list[Launched], say: Say, more: bool, budget: bool
) -> None:
    """Each remedy whose interval will not change its decision is done; where others kept
    the job's cores busy, every pair is run (up to trials.MAX_PAIRS). `more`: --budget
    holds another round; `budget`: there is one."""
    from compilediag.analysis.step.remedies import measured
    from compilediag.analysis.step.trials import MAX_PAIRS

    loaded = any((x.beside or 0.0) >= LOADED for x in baseline)
    for t in active:
        if not t.pairs or t.failed is not None:
            continue
        tried = measured(t.candidate, _runs(t), None)
        if tried.ratio is None:
            t.settled = True
            continue
        from compilediag.analysis.step.trials import Effect

        e = Effect(tried.ratio, tried.ratio_low or 0.0, tried.ratio_high or math.inf, tried.pairs)
        t.settled = e.settled and not (loaded and not e.kept)
        said = f"compilediag:   {t.candidate.remedy}: {e.words()} after {plural(e.pairs, 'round')}"
        if not t.settled:  # (a look read "another round" where the budget ran none)
            said += (
                ", not settled: another round" if more and len(t.pairs) < MAX_PAIRS
                else f", not settled after the {MAX_PAIRS} rounds --try-fixes runs at most"
                if len(t.pairs) >= MAX_PAIRS
                else ", not settled; the budget holds no more rounds" if budget
                else ", not settled"
            )  # fmt: skip
        say(said)


def _runs(t: Trial) -> Runs:
    from compilediag.analysis.step.remedies import Runs

    failed = t.failed
    first = t.pairs[0] if t.pairs else None
    before = first[0].report if first else None
    return Runs(
        [(b.run, a.run) for b, a in t.pairs],
        before,  # type: ignore[arg-type]
        first[1].report if first else None,
        failed.failure if failed else "",
        failed.hint if failed else "",
    )


def _measured(t: Trial, baseline: list[Launched], pair_s: float | None = None) -> Tried:
    from compilediag.analysis.step.remedies import Runs, loss_noise, measured

    runs = _runs(t)
    if not t.pairs:  # failed at its first run: its facts beside the first unchanged run
        made = t.failed.run if t.failed else baseline[0].run
        runs = Runs([(baseline[0].run, made)], baseline[0].report, None,  # type: ignore[arg-type]
                    runs.failure, runs.hint)  # fmt: skip
    return measured(t.candidate, runs, loss_noise([x.run for x in baseline]), pair_s)


def nothing_words(report: Report) -> str:
    """Why no remedy was tried, by the figures candidates() chose on: the optimizer's and
    the data loader's shares of the window's median step (a re-check read "nothing to try
    ... the optimizer" beside the step's mean, optimizer 17%, that slow steps had raised)."""
    from compilediag.analysis.step.advice import MIN_SHARE, median_share

    job = report.runtime
    shares = ""
    if job is not None and job.step_medians.get("step"):
        shares = (
            f"in the window's median step the optimizer holds "
            f"{median_share(job, 'optimizer'):.0%} and the data loader "
            f"{median_share(job, 'data'):.0%}, a remedy runs for {MIN_SHARE:.0%} or more; "
        )
    return (
        f"{shares}no .item() break, no host-bound CUDA step, no float32 matmul without TF32 "
        "(a part an optimizer already fused, or a loader with workers, has none to try)"
    )


def _together(report: Report, kept: list[Tried]) -> Candidate:
    from compilediag.analysis.step.remedies import Candidate, expected

    names = [t.remedy for t in kept]
    c = Candidate("+".join(names), "", "the kept remedies, together")
    c.expected = expected(c, report)
    return c


def _baseline(
    runs: list[Launched], budget_s: float | None, clock: RoundClock, tried: list[Tried]
) -> TryBaseline:
    from compilediag.analysis.step import trials
    from compilediag.analysis.step.remedies import geomean, window_mean
    from compilediag.report.model import TryBaseline

    means = [m for m in (window_mean(x.run) for x in runs) if m is not None]
    beside = [x.beside for x in runs if x.beside is not None]
    load = ""
    if beside and max(beside) >= LOADED:
        load = (f"other processes kept up to {max(beside):.1f} of the job's cores busy: "
                "every remedy ran each round, its interval the wider for it")  # fmt: skip
    stopped = ""
    if clock.out:
        stopped = (
            "the budget ran out: more rounds would narrow the intervals" if budget_s is not None
            else f"{trials.MIN_PAIRS} rounds, without --budget: more rounds would narrow the "
            "intervals (--budget SECONDS)"
        )  # fmt: skip
    return TryBaseline(
        step_ms=geomean(means) or 0.0,  # as each remedy's step before it
        runs=len(runs),
        spread=round(trials.spread(means), 4),
        load=load,
        budget_s=budget_s,
        stopped=stopped,
        resolution=resolution(tried),
        forecast_s=round(clock.forecast_s, 1),
        revised_s=round(clock.revised_s, 1),
        took_s=round(time.monotonic() - clock.start, 1),
    )


def resolution(tried: list[Tried]) -> str:
    """Where an interval not kept is wider than ±5% (the gain kept): the window can't tell
    that gain from nothing, and what narrows it."""
    from compilediag.analysis.step import trials

    gain = 1 - trials.KEEP_AT
    wide = [
        (t.ratio_high - t.ratio_low) / 2 for t in tried
        if not t.kept and t.ratio_low is not None and t.ratio_high is not None
    ]  # fmt: skip
    if not wide or max(wide) <= gain:
        return ""
    spans = f"±{max(wide):.0%}" if max(wide) <= trials.WIDE else f"past ±{trials.WIDE:.0%}"
    return (
        f"the window is too short to resolve {gain:.0%} (an interval spans {spans}): a "
        "longer --profile-steps window, or more rounds (--budget), narrows it"
    )


def launch_job(
    opts: Job, remedy: str | None, env_for: EnvFor, extra_env: dict[str, str] | None = None
) -> tuple[Launched, bool]:
    """The job to the window's end with `remedy` made (None: as it is), its output kept
    aside; and whether it was interrupted. `extra_env`: more of its environment."""
    from compilediag.analysis.ranks.fold import report_from_files
    from compilediag.analysis.step.runtime import JobRun, read_processes
    from compilediag.harness.bootstrap._compilediag_runtime import LOSSES_ENV
    from compilediag.harness.bootstrap._compilediag_runtime.remedies import REMEDY_ENV
    from compilediag.harness.launch import launch
    from compilediag.harness.threads import Beside
    from compilediag.report.model import Runtime, TargetInfo
    from compilediag.trace.parse import trace_files

    folder = Path(tempfile.mkdtemp(prefix="compilediag-try-"))
    try:
        window = opts.window
        last = int(window.split("-")[1]) if "-" in window else None
        env = env_for(folder, window, kernels=False, stop_after=opts.stop_after or last)
        if remedy:
            env[REMEDY_ENV] = remedy
        env[LOSSES_ENV] = "1"
        env.update(extra_env or {})
        if opts.caches is None:
            env.update({var: str(folder / "cache" / var.lower()) for var in CACHE_VARS})
        else:
            env.update(opts.caches)
        log = folder / "job.log"
        beside = Beside()
        beside.start()
        with open(log, "wb") as f:
            done = launch(opts.command, env, stdout=f.fileno(), stderr=f.fileno())
        out = Launched(None, JobRun(Runtime(command=list(opts.command)), []), beside=beside.cores())
        if done.failed and not done.interrupted:
            text = log.read_text(errors="replace")
            out.error, out.hint = job_error(text)
            out.failure = f"the job {done.how()}: {out.error}"
            out.overwritten = OVERWRITTEN in text
        out.run = JobRun(Runtime(command=list(opts.command)), read_processes(folder))
        files = trace_files(folder)
        if files:
            out.report = report_from_files(
                files, TargetInfo(path=shlex.join(opts.command)), out.run
            )
        return out, done.interrupted
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# where torch's message turns to what to do about it
_HINT = re.compile(r"(?:^|(?<=\s))(To prevent|Hint:|HINT:|Consider)\s")
# an exception's line: its (dotted) name, a colon, its message
_RAISED = re.compile(r"^[A-Za-z_][\w.]*: \S")


def job_error(text: str) -> tuple[str, str]:
    """The job's own error from its output, and torch's hint in it: the exception line
    after the last traceback (`RuntimeError: ...`, continued up to the next blank line),
    cut before the hint, its stack trace left out; else the last line of output. Under
    torchrun: the failing rank's (its lines' `[rank1]:` prefix dropped; the launcher's own
    ChildFailedError and its banner passed over), with the rank torchrun found failing
    first."""
    lines = [_RANK_PREFIX.sub("", x) for x in text.splitlines()]
    for start in reversed([i for i, x in enumerate(lines) if x.startswith("Traceback")]):
        at = next((i for i in range(start + 1, len(lines)) if _RAISED.match(lines[i])), None)
        if at is None or _LAUNCHER in lines[at]:
            continue
        end = next(
            (
                i
                for i in range(at + 1, len(lines))
                if not lines[i].strip() or _OTHER.match(lines[i])
            ),
            len(lines),
        )
        message = " ".join(x.strip() for x in lines[at:end])
        hint = ""
        m = _HINT.search(message)
        if m:
            hint, message = message[m.start() :].strip(), message[: m.start()].strip()
        message = re.sub(r"\s*Stack trace:.*", "", message)[:300]
        root = _ROOT_RANK.search(text)
        return (f"{message} (rank {root[1]}, the first to fail)" if root else message), hint[:300]
    last = [x for x in lines if x.strip() and not _BANNER.match(x)]
    return (last[-1].strip()[:300] if last else "(no output)"), ""


# torchrun's prefix of a rank's lines (with --tee, or its log_line_prefix_template)
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")
_LAUNCHER = "ChildFailedError"  # torchrun's own exception, when a rank failed
_ROOT_RANK = re.compile(
    r"Root Cause \(first observed failure\):\s*\n.*?\n\s*rank\s*:\s*(\d+)", re.S
)
# a line that ends an error's message: torch's log line (`W1129 00:18:52.296000 13033 …`), its
# C++ one (`[W730 15:32:17.8412 ProcessGroupNCCL.cpp:1479] Warning: …`, a date of 3 or 4
# digits: a shutdown warning printed as the rank exits), a traceback
_OTHER = re.compile(r"^(?:\[?[WEIDV]\d{3,4} \d\d:|Traceback )")
_BANNER = re.compile(r"^\s*[=*-]{8,}\s*$")
