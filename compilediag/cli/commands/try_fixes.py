"""`compilediag run --try-fixes`: the job once more as it is, then once per remedy its report
calls for, one remedy a run (analysis/job_remedies.py picks them; the bootstrap makes each
in the job's process, no edit of its code), each to the end of the window. Each remedy's
run is measured against the unchanged one's over the same steps; the unchanged one against
the job's first run gives the job's own run-to-run spread (its step, its losses)."""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compilediag.analysis.runtime import JobRun
    from compilediag.report.model import Report, Tried

# each remedy's run keeps torch's caches in a folder of its own: the user's stay as their
# own run left them (a remedy's settings are cache keys of their own)
CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


# run.py's job environment: (folder, window, kernels, stop after) -> the job's environment
EnvFor = Callable[..., dict[str, str]]


@dataclass
class Job:
    """The job as `run` was given it: its command, --profile-steps' window, --stop-after."""

    command: list[str]
    window: str
    stop_after: int | None = None


def try_fixes(
    opts: Job, report: Report, run: JobRun, env_for: EnvFor, say: Callable[[str], None]
) -> list[Tried]:
    """Each remedy's run, measured; [] where the report calls for none (said by `say`)."""
    from compilediag.analysis.job_remedies import candidates, measured, noise_of

    chosen = candidates(report, cuda=any("cuda" in p.devices for p in run.processes))
    if not chosen:
        say("compilediag: --try-fixes: nothing to try (no part of the step a remedy without "
             "an edit of your code targets: the optimizer, the data loader, .item() breaks, "
             "a host-bound CUDA step, float32 matmuls without TF32)")  # fmt: skip
        return []
    names = ", ".join(c.remedy for c in chosen)
    say(f"compilediag: --try-fixes: {len(chosen) + 1} runs of the job to the window's end: "
        f"as it is (the baseline, and its run-to-run spread), then one remedy each: {names}")  # fmt: skip
    n = len(chosen)
    say(f"compilediag: [0/{n}] the job as it is")
    control, interrupted = _launch(opts, None, env_for)
    if interrupted:
        return []
    if control.failure or control.report is None:
        say(f"compilediag: --try-fixes: the job as it is did not run to the window's end again "
            f"({control.failure or 'no trace'}): nothing measured")  # fmt: skip
        return []
    noise = noise_of(run, control.run)
    out = []
    for i, c in enumerate(chosen, 1):
        say(f"compilediag: [{i}/{n}] {c.remedy}: {c.why}")
        after, interrupted = _launch(opts, c.remedy, env_for)
        if interrupted:
            say("compilediag: --try-fixes interrupted: the remedies measured so far are reported")
            break
        tried = measured(
            c, control.report, control.run, after.report, after.run, after.failure, noise
        )
        say(f"compilediag: [{i}/{n}] {c.remedy}: {tried.why}")
        out.append(tried)
    return out


@dataclass
class Launched:
    """One run of the job for --try-fixes: its report and facts, or why it failed."""

    report: Report | None
    run: JobRun
    failure: str = ""


def _launch(opts: Job, remedy: str | None, env_for: EnvFor) -> tuple[Launched, bool]:
    """The job to the window's end with `remedy` made (None: as it is), its output kept
    aside; and whether it was interrupted."""
    from compilediag.analysis.fold import report_from_files
    from compilediag.analysis.runtime import JobRun, read_processes
    from compilediag.harness.bootstrap._compilediag_runtime import LOSSES_ENV
    from compilediag.harness.bootstrap._compilediag_runtime.remedies import REMEDY_ENV
    from compilediag.harness.launch import launch
    from compilediag.report.model import Runtime, TargetInfo
    from compilediag.trace.parse import trace_files

    folder = Path(tempfile.mkdtemp(prefix=f"compilediag-try-{remedy or 'unchanged'}-"))
    try:
        window = opts.window
        last = int(window.split("-")[1]) if "-" in window else None
        env = env_for(folder, window, kernels=False, stop_after=opts.stop_after or last)
        if remedy:
            env[REMEDY_ENV] = remedy
        env[LOSSES_ENV] = "1"
        for var in CACHE_VARS:
            env[var] = str(folder / "cache" / var.lower())
        log = folder / "job.log"
        with open(log, "wb") as f:
            done = launch(opts.command, env, stdout=f.fileno(), stderr=f.fileno())
        failure = ""
        if done.failed and not done.interrupted:
            failure = f"the job {done.how()} with it: {_last_line(log)}"
        run = JobRun(Runtime(command=list(opts.command)), read_processes(folder))
        files = trace_files(folder)
        report = (
            report_from_files(files, TargetInfo(path=shlex.join(opts.command)), run)
            if files else None
        )  # fmt: skip
        return Launched(report, run, failure), done.interrupted
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _last_line(log: Path) -> str:
    lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
    return lines[-1].strip()[:200] if lines else "(no output)"
