"""--try-fixes: one more worker run for each remedy that applies (and one with all of them
together), each isolated in its own process, under the same inputs and timing method, up
to --jobs at a time. The measured before/after counts go into the Report."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

from compilediag.cli.progress import say
from compilediag.errors import DiagError
from compilediag.fixes.remedies import Remedy, combined, compile_verdict, remedies_for, verdict
from compilediag.harness.worker_types import WorkerSpec
from compilediag.report.model import Counts, Report, VerifiedFix
from compilediag.report.vocabulary import FixOutcome

RunModel = Callable[..., Any]  # (spec, timeout, progress=False) -> a ModelRun


def counts(report: Report) -> Counts:
    s = report.summary
    ct = report.compile_time
    return Counts(
        s.graphs, s.unique_graph_breaks, s.recompiles, s.speedup, ct.total_s if ct else None
    )


def nothing_to_try(report: Report) -> str:
    """Why --try-fixes tried nothing, for the report's findings."""
    found = report.summary.graph_breaks or report.summary.recompiles
    return "--try-fixes: nothing to try: " + (
        "no finding here has a remedy that needs no edit of your code (a setting, a "
        "torch.compile argument, a mark); the advice under each says what to change"
        if found else "no graph break and no recompile to remove"
    )  # fmt: skip


def try_fixes(
    spec: WorkerSpec, report: Report, jobs: int, timeout: float, run_model: RunModel
) -> list[VerifiedFix]:
    """Each remedy for the report's findings, measured by a run of its own (`run_model`:
    how a spec is run, commands/common's), `jobs` at a time."""
    from compilediag.analysis.compile.breaks import drops_reordered

    remedies = remedies_for(report, drops_reordered=drops_reordered)
    together = combined(remedies)
    if together is not None:
        remedies.append(together)
    if not remedies:  # (a look read nothing at all, and took it for --try-fixes ignored)
        say(f"compilediag: {nothing_to_try(report)}")
        return []
    before = counts(report)
    results: dict[str, VerifiedFix] = {}
    n = len(remedies)
    say(f"trying {n} fix{'es' * (n != 1)}, {min(jobs, n)} at a time")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        runs = {pool.submit(_run, spec, r, before, timeout, run_model): r for r in remedies}
        for done in as_completed(runs):
            fix = done.result()
            results[fix.remedy] = fix
            say(f"  {fix.remedy}: {fix.verdict}")
    return [results[r.name] for r in remedies]  # in the order they were tried


def _run(
    spec: WorkerSpec, remedy: Remedy, before: Counts, timeout: float, run_model: RunModel
) -> VerifiedFix:
    fix = VerifiedFix(
        remedy.name, remedy.code, remedy.targets, before, None, None, FixOutcome.FAILED
    )
    try:
        # (its outputs judged as the run's are, no search for a cause: the run's is said)
        done = run_model(replace(spec, remedy=remedy, repro_dir=""), timeout, progress=False)
    except DiagError as e:
        fix.error = e.message
        return fix
    after = counts(done.report)
    t = done.report.timings
    fix.after, fix.outputs_match = after, t.outputs_match if t else None
    if remedy.kind == "compile":
        _cold_and_warm(spec, remedy, fix, timeout, run_model)
        before, after = fix.before, fix.after
        fix.verdict = compile_verdict(
            before.compile_s_cold or before.compile_s or 0.0,
            after.compile_s_cold or after.compile_s or 0.0,
            fix.outputs_match,
        )
        return _failed(fix, done)
    judged = {
        "breaks": (before.graph_breaks, after.graph_breaks),
        "recompiles": (before.recompiles, after.recompiles),
        "all": (
            before.graph_breaks + before.recompiles,
            after.graph_breaks + after.recompiles,
        ),
    }[remedy.kind]
    fix.verdict = verdict(*judged, fix.outputs_match, (before.graphs, after.graphs))
    return _failed(fix, done)


def _cold_and_warm(
    spec: WorkerSpec, remedy: Remedy, fix: VerifiedFix, timeout: float, run_model: RunModel
) -> None:
    """A compile remedy's compile time as a new machine (or a CI runner) has it and as the
    next run on the same one does: the model as it is and with the remedy, each compiled
    twice in a cache folder of its own, empty the first time (the runs' timings left out).
    A run that fails leaves its figures out."""
    assert fix.after is not None
    fix.before = replace(fix.before)  # (the runs' shared counts stay as they were)
    with tempfile.TemporaryDirectory(prefix="compilediag-caches-") as caches:
        for counts, made in ((fix.before, None), (fix.after, remedy)):
            folder = str(Path(caches) / ("after" if made else "before"))
            times = []
            for _ in range(2):
                run = replace(
                    spec, remedy=made, cache=folder, timings=False, cold=False, repro_dir=""
                )
                try:
                    done = run_model(run, timeout, progress=False)
                except DiagError:
                    return
                ct = done.report.compile_time
                times.append(ct.total_s if ct else None)
            counts.compile_s_cold, counts.compile_s_warm = times


def _failed(fix: VerifiedFix, done: Any) -> VerifiedFix:
    if done.failed:
        fix.verdict, fix.error = (
            FixOutcome.FAILED,
            done.report.errors[0].text if done.report.errors else "torch.compile failed",
        )
    return fix
