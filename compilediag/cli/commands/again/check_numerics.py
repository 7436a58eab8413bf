"""The job without torch.compile (TORCHDYNAMO_DISABLE=1). run --check-numerics: twice more,
each to the window's end with its losses kept, and the compiled run's losses against
theirs (analysis/step/losses.py); where they part, once more compiled with Inductor drawing
random numbers as eager does, which tells random numbers from an op. A job that failed where
torch.compile could not trace an op on its inputs: once more, to tell the program's own
error from torch.compile's."""

from __future__ import annotations

from collections.abc import Callable

from compilediag.analysis.step.losses import parting, with_cause
from compilediag.analysis.step.runtime import JobRun
from compilediag.cli.commands.again.try_fixes import EnvFor, Job, launch_job
from compilediag.report.model import Report
from compilediag.report.numerics import LossCheck
from compilediag.trace.formats import FAKE_TENSOR_COMPILE_ONLY, FAKE_TENSOR_EAGER, FAKE_TENSOR_FIX

EAGER = {"TORCHDYNAMO_DISABLE": "1"}  # torch.compile hands back the function, unchanged
EAGER_RUNS = 2  # two: their own difference is the yardstick


def check_numerics(
    job: Job, compiled: JobRun, env_for: EnvFor, say: Callable[[str], None]
) -> LossCheck:
    """The compiled run's losses against EAGER_RUNS eager runs of the same steps."""
    eager: list[JobRun] = []
    for i in range(EAGER_RUNS):
        say(
            f"compilediag: --check-numerics: the job eagerly (TORCHDYNAMO_DISABLE=1), run {i + 1} of {EAGER_RUNS}"
        )
        done, interrupted = launch_job(job, None, env_for, extra_env=EAGER)
        if done.failure:
            return LossCheck(words=f"not compared: the job failed eagerly: {done.failure}")
        eager.append(done.run)
        if interrupted:
            return LossCheck(words="not compared: interrupted")
    check = parting(compiled, eager)
    if check.first_step is not None:
        say("compilediag: --check-numerics: the job compiled, fallback_random=True")
        done, interrupted = launch_job(job, "fallback_random", env_for)
        if not done.failure and not interrupted:
            check = with_cause(check, parting(done.run, eager))
    say(f"compilediag: losses {check.words}")
    return check


def eager_or_compile(job: Job, report: Report, env_for: EnvFor, say: Callable[[str], None]) -> None:
    """A failed job whose compile failed as torch ran an op on fake tensors: run once more
    without torch.compile, and the failure's fix says whose error it is by that run (the
    job's own error where it fails the same way)."""
    failures = [
        f for f in report.compile_failures if f.fix == FAKE_TENSOR_FIX.format(error=f.reason)
    ]
    if not failures:
        return
    say("compilediag: the job again without torch.compile (TORCHDYNAMO_DISABLE=1): whose error?")
    done, interrupted = launch_job(job, None, env_for, extra_env=EAGER)
    if interrupted:
        return
    for f in failures:
        if done.failure:
            f.fix = FAKE_TENSOR_EAGER.format(error=done.error or done.failure)
        else:
            f.fix = FAKE_TENSOR_COMPILE_ONLY.format(error=f.reason)
