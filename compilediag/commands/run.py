"""`compilediag run -- COMMAND`: run the user's own job (a script, `python -m`, torchrun)
traced, with compilediag's runtime probe in each of its Python processes, then report on
everything it compiled as `report` does, with what it did at run time."""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from compilediag.commands.common import GateOptions, OutputOptions, budgets, check_outputs, emit
from compilediag.config import load_config
from compilediag.errors import COMPILE_FAILED, INTERRUPTED, JOB_FAILED, UsageError

if TYPE_CHECKING:
    from compilediag.gate import Budgets
    from compilediag.launch import Completion


@dataclass
class RunJobOptions:
    command: list[str]
    trace_dir: str | None = None  # keep the trace here (default: a temporary folder)
    profile_steps: str | None = None  # "A-B"
    gate: GateOptions = field(default_factory=GateOptions)
    out: OutputOptions = field(default_factory=OutputOptions)


def run(opts: RunJobOptions) -> int:
    from compilediag.bootstrap._compilediag_runtime import parse_window
    from compilediag.commands.report import TRACE

    if not opts.command:
        raise UsageError(
            "no command given.", hint="Put it after `--`: compilediag run -- python train.py"
        )
    check_outputs(opts.out, opts.gate.junit)
    rules = budgets(opts.gate, load_config(), TRACE)
    if opts.profile_steps:
        try:
            parse_window(opts.profile_steps)
        except ValueError:
            raise UsageError(
                f"--profile-steps {opts.profile_steps!r} is not a range of calls.",
                hint="Give A-B, counted from 1: --profile-steps 3-7 times calls 3 to 7 of "
                "the job's first compiled frame.",
            ) from None
    if shutil.which(opts.command[0]) is None:
        raise UsageError(
            f"{opts.command[0]}: command not found.",
            hint="Give the command as you would run it, after `--`: "
            "compilediag run -- python train.py",
        )
    kept = Path(opts.trace_dir).resolve() if opts.trace_dir else None
    if kept is not None:
        check_trace_dir(kept)
    folder = kept or Path(tempfile.mkdtemp(prefix="compilediag-run-"))
    try:
        return _run_in(opts, rules, folder, kept is not None)
    finally:
        if kept is None:
            shutil.rmtree(folder, ignore_errors=True)


def _run_in(opts: RunJobOptions, rules: Budgets, folder: Path, kept: bool) -> int:
    from compilediag.analysis.ranks import report_from_files
    from compilediag.analysis.runtime import JobRun, read_processes, save_job
    from compilediag.commands.common import judge
    from compilediag.launch import launch
    from compilediag.report import Runtime, TargetInfo
    from compilediag.trace import trace_files

    command = shlex.join(opts.command)
    say(f"compilediag: running `{command}`" + (f", tracing into {folder}" if kept else ""))
    # stdout is the report's: a report for machines (json, csv, ...) printed there gets
    # the job's own stdout moved to stderr, so that it stays parseable
    machine = opts.out.format != "table" and not opts.out.output
    done = launch(
        opts.command,
        job_env(folder, opts.profile_steps),
        stdout=sys.stderr.fileno() if machine else None,
    )
    say(f"compilediag: the command {done.how()} after {done.wall_s:.1f} s")

    job = Runtime(
        command=list(opts.command),
        exit_code=done.returncode,
        signal=done.signal,
        interrupted=done.interrupted,
        wall_s=round(done.wall_s, 3),
    )
    if kept:
        save_job(folder, job)
    files = trace_files(folder)
    run = JobRun(job, read_processes(folder))
    report = report_from_files(files, TargetInfo(path=command), run) if files else None
    if report is None or not report.trace or not report.trace.records:
        raise _compiled_nothing(command, done)
    report, code = judge(report, rules, opts.gate.junit, None)
    emit(report, opts.out)
    if done.interrupted:
        return INTERRUPTED
    if code == COMPILE_FAILED:
        return code
    if done.failed:
        say(f"error: the command {done.how()}: the report covers what it compiled until then.")
        return JOB_FAILED
    return code


def _compiled_nothing(command: str, done: Completion) -> UsageError:
    """A job that wrote no trace record: exit 2, or the job's failure (6), or 130."""
    if done.interrupted:
        error = UsageError(f"`{command}` was interrupted before it compiled anything.")
        error.exit_code = INTERRUPTED
        return error
    error = UsageError(
        f"`{command}` {'failed' if done.failed else 'ran'}, and compiled nothing: no process "
        "of it wrote a trace record.",
        hint="Check that it calls torch.compile (or a compiled function) in a Python "
        "process started from this command.",
    )
    if done.failed:
        error.exit_code = JOB_FAILED
    return error


def job_env(folder: Path, profile_steps: str | None) -> dict[str, str]:
    """The job's environment: the user's, plus the trace folder and the runtime probe's
    bootstrap first on PYTHONPATH (nothing that changes what torch compiles or caches)."""
    import os

    from compilediag import bootstrap
    from compilediag.analysis.runtime import RUNTIME_FOLDER
    from compilediag.bootstrap._compilediag_runtime import DIR_ENV, STEPS_ENV

    env = dict(os.environ)
    env["TORCH_TRACE"] = str(folder)
    env[DIR_ENV] = str(folder / RUNTIME_FOLDER)
    env.pop(STEPS_ENV, None)
    if profile_steps:
        env[STEPS_ENV] = profile_steps
    here = str(Path(bootstrap.__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    return env


def check_trace_dir(path: Path) -> None:
    """A kept trace folder must be new or empty: another run's files would be read as
    more ranks of this one."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"--trace-dir {path} is a file.", hint="Name a folder.")
    if path.is_dir() and any(path.iterdir()):
        raise UsageError(
            f"--trace-dir {path} is not empty.",
            hint="Name a new or empty folder (read an old trace with `compilediag report DIR`).",
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create --trace-dir {path}: {e.strerror}.") from None


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
