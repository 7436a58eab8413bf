"""`compilediag run -- COMMAND`: run the user's own job (a script, `python -m`, torchrun)
traced, with compilediag's runtime probe in each of its Python processes, then report on
everything it compiled as `report` does, with what it did at run time."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from compilediag.cli.commands.common import (
    GateOptions,
    OutputOptions,
    budgets,
    check_outputs,
    emit,
    wrote,
)
from compilediag.cli.config import load_config
from compilediag.cli.progress import say
from compilediag.errors import COMPILE_FAILED, JOB_FAILED, UsageError

if TYPE_CHECKING:
    from compilediag.analysis.step.runtime import JobRun
    from compilediag.cli.commands.again.try_fixes import Job
    from compilediag.gate import Budgets
    from compilediag.harness.launch import Completion
    from compilediag.harness.worker_types import CompileCall, ProcessRuntime
    from compilediag.report.model import Report


@dataclass
class RunJobOptions:
    command: list[str]
    trace_dir: str | None = None  # keep the trace here (default: a temporary folder)
    profile_steps: str | None = None  # "A-B"
    kernels: bool = True  # the kernel profile after the window
    profile_out: str | None = None  # the kernel profile as a Chrome trace, here
    stop_after: int | None = None  # end the job after its step N
    try_fixes: bool = False  # the job again per remedy, alternated, measured over the window
    # --try-fixes' alternated runs: the seconds they may take (None: the 3 rounds an interval needs)
    budget_s: float | None = None
    apply: bool = False  # --try-fixes: write the kept remedies into the job's code
    check_numerics: bool = False  # the losses against two eager runs of the same steps
    gate: GateOptions = field(default_factory=GateOptions)
    out: OutputOptions = field(default_factory=OutputOptions)


def run(opts: RunJobOptions) -> int:
    from compilediag.cli.commands.report import TRACE
    from compilediag.harness.bootstrap._compilediag_runtime import parse_window

    if not opts.command:
        raise UsageError(
            "no command given.", hint="Put it after `--`: compilediag run -- python train.py"
        )
    check_outputs(opts.out, opts.gate.junit, {"--profile-out": opts.profile_out})
    rules = budgets(opts.gate, load_config(), TRACE)
    if opts.profile_steps:
        try:
            parse_window(opts.profile_steps)
        except ValueError:
            raise UsageError(
                bad_window(f"--profile-steps {opts.profile_steps}", "--profile-steps 3-7")
            ) from None
    if opts.stop_after and opts.profile_steps:
        last = parse_window(opts.profile_steps)[1]  # type: ignore[index]
        if opts.stop_after < last:
            raise UsageError(
                f"--stop-after {opts.stop_after} ends the job before step {last}, the last of "
                f"--profile-steps {opts.profile_steps}.",
                hint=f"Stop after the window: --stop-after {last + min(5, last)} keeps the "
                "kernel profile's steps after it too.",
            )
    window = f"--profile-steps {opts.profile_steps or '5-10'}"
    job = shlex.join(opts.command)  # the hints give the user's own command back
    if opts.try_fixes and not opts.profile_steps:
        # (the user's --budget and --apply kept: a look's hint dropped --budget 90)
        given = (f" --budget {opts.budget_s:g}" if opts.budget_s is not None else "") + (
            " --apply" if opts.apply else ""
        )
        raise UsageError(
            "--try-fixes measures each remedy by the job's steps in the window of "
            "--profile-steps, and none was given.",
            hint=f"Add a window of steps after the compile: compilediag run --try-fixes{given} "
            f"{window} -- {job}",
        )
    if opts.budget_s is not None and not opts.try_fixes:
        raise UsageError(
            "--budget is the seconds --try-fixes' alternated runs may take, and --try-fixes "
            "was not given.",
            hint=f"compilediag run --try-fixes --budget {opts.budget_s:g} {window} -- {job} (or "
            "leave --budget out)",
        )
    if opts.apply and not opts.try_fixes:
        raise UsageError(
            "--apply writes the remedies --try-fixes kept, and --try-fixes was not given.",
            hint=f"compilediag run --try-fixes --apply {window} -- {job} (or compilediag fix "
            "--apply REPORT.json with a report saved by --try-fixes)",
        )
    if opts.profile_out and (not opts.profile_steps or not opts.kernels):
        raise UsageError(
            "--profile-out writes the kernel profile, which runs after the window of "
            "--profile-steps.",
            hint="Add --profile-steps A-B (and leave out --no-kernels): compilediag run "
            "--profile-steps 5-10 --profile-out kernels.json -- python train.py",
        )
    if shutil.which(opts.command[0]) is None:
        raise UsageError(
            f"{opts.command[0]}: command not found.",
            hint="Give the command as you would run it, after `--`: "
            "compilediag run -- python train.py",
        )
    check_script(opts.command)
    kept = Path(opts.trace_dir).resolve() if opts.trace_dir else None
    if kept is not None:
        check_trace_dir(kept)
    folder = kept or Path(tempfile.mkdtemp(prefix="compilediag-run-"))
    try:
        return _run_in(opts, rules, folder, kept is not None)
    finally:
        if kept is None:
            shutil.rmtree(folder, ignore_errors=True)


def bad_window(given: str, example: str) -> str:
    """The one line a window that is not A-B gets (`given`: as the user wrote it; `example`:
    a good one, written the same way), the fix with it; steps in --profile-steps' words."""
    from compilediag.cli.options import STEPS_ARE

    return f"{given} is not a range of steps A-B, 1 <= A <= B: e.g. {example} ({STEPS_ARE})."


def _run_in(opts: RunJobOptions, rules: Budgets, folder: Path, kept: bool) -> int:
    from compilediag.analysis.ranks.fold import report_from_files
    from compilediag.analysis.step.runtime import JobRun, read_processes, save_job
    from compilediag.cli.commands.common import judge
    from compilediag.harness.launch import launch, stopped_by
    from compilediag.harness.threads import Beside
    from compilediag.render.views import window_missed
    from compilediag.report.model import Runtime, TargetInfo
    from compilediag.trace.parse import trace_files

    command = shlex.join(opts.command)
    say(f"compilediag: running `{command}`" + (f", tracing into {folder}" if kept else ""))
    # stdout is the report's: a report for machines (json, csv, ...) printed there gets
    # the job's own stdout moved to stderr, so that it stays parseable
    machine = opts.out.format != "table" and not opts.out.output
    beside = Beside()  # what other processes keep busy on the job's cores while it runs
    beside.start()
    done = launch(
        opts.command,
        job_env(
            folder,
            opts.profile_steps,
            opts.kernels,
            bool(opts.profile_out),
            opts.stop_after,
            losses=opts.try_fixes or opts.check_numerics,
        ),
        stdout=sys.stderr.fileno() if machine else None,
    )
    say(f"compilediag: the command {done.how()} after {done.wall_s:.1f} s")

    job = Runtime(
        command=list(opts.command),
        exit_code=done.returncode,
        signal=done.signal,
        interrupted=done.interrupted,
        wall_s=round(done.wall_s, 3),
        stop_after=opts.stop_after,
        beside_cores=None if (busy := beside.cores()) is None else round(busy, 2),
    )
    if kept:
        save_job(folder, job)
    files = trace_files(folder)
    run = JobRun(job, read_processes(folder))
    report = report_from_files(files, TargetInfo(path=command), run) if files else None
    if report is None or not report.trace or not report.trace.records:
        raise _compiled_nothing(command, done, opts.command, run.processes)
    from compilediag.cli.commands.again.try_clock import after_window_s
    from compilediag.cli.commands.again.try_fixes import Job

    # the job as given, for the runs after this one (--try-fixes, --check-numerics)
    again = Job(
        list(opts.command), opts.profile_steps or "", opts.stop_after, opts.budget_s,
        done.wall_s, after_window_s(run, opts.stop_after),
    )  # fmt: skip
    if done.failed and not done.interrupted:  # the program's own error, or torch.compile's
        from compilediag.cli.commands.again.check_numerics import eager_or_compile

        eager_or_compile(again, report, job_env, say)
    if opts.try_fixes and report.runtime is not None and not done.interrupted:
        _try_fixes(again, report, run, opts.apply)
    if opts.check_numerics and report.runtime is not None and not done.interrupted:
        from compilediag.cli.commands.again.check_numerics import check_numerics

        report.runtime.numerics = check_numerics(again, run, job_env, say)
    report, code = judge(report, rules, opts.gate.junit, None)
    emit(report, opts.out)
    if opts.profile_out:
        write_profile(folder, report, opts.profile_out)
    if report.runtime is not None and (missed := window_missed(report.runtime)):
        say(f"compilediag: warning: {missed}")  # else only the report's Job section says it
    if stopped := stopped_by():  # the job, or a --try-fixes round (a look read 130 for TERM)
        return stopped
    if code == COMPILE_FAILED:
        return code
    if done.failed:
        say(f"error: the command {done.how()}: the report covers what it compiled until then.")
        return JOB_FAILED
    return code


def _try_fixes(again: Job, report: Report, run: JobRun, apply: bool) -> None:
    """--try-fixes: the remedies measured, the step's advice said past what they measured;
    --apply: the kept ones written into the code, verified."""
    from compilediag.analysis.step.runtime import timing_notes
    from compilediag.cli.commands.again.try_fixes import try_fixes

    assert report.runtime is not None
    report.runtime.tried, report.runtime.try_baseline = try_fixes(again, report, run, job_env, say)
    if report.timings is not None:
        cuda = any("cuda" in p.devices for p in run.processes)
        report.timings.notes = timing_notes(report, report.runtime, cuda)
    if apply:
        from compilediag.cli.commands.again.apply_kept import applied_text, apply_kept

        say(applied_text(apply_kept(report, job_env, say)))


def _compiled_nothing(
    command: str, done: Completion, argv: list[str], processes: list[ProcessRuntime]
) -> UsageError:
    """A job that wrote no trace record: exit 2, or the job's failure (6), or 128 + the
    signal compilediag was sent (130 for Ctrl-C). Why, by
    what the runtime probe saw (`processes`: the files of those that imported torch._dynamo):
    its Python has no torch; it never called torch.compile (or failed first); it called
    torch.compile but never called what it returned."""
    if done.interrupted:
        how = "interrupted" if done.by == signal.SIGINT else f"stopped by {done.signal_sent}"
        error = UsageError(f"`{command}` was {how} before it compiled anything.")
        error.exit_code = 128 + done.by  # 130 for Ctrl-C, 143 for SIGTERM
        return error
    calls = [c for p in processes for c in p.compile_calls]
    without = None if processes else python_without_torch(argv)
    ended = f"failed ({done.how()})" if done.failed else "ran"
    if without is not None:
        what = "failed before compiling anything" if done.failed else "ran, and compiled nothing"
        error = UsageError(
            f"`{command}` {what}: its Python ({without}) has no torch.",
            hint=_with_torch_hint(argv, without),
        )
    elif calls and not any(c.called for c in calls):
        sites = "; ".join(f"{c.what} at {_site(c)}" for c in calls[:3])
        error = UsageError(
            f"`{command}` {ended}, and compiled nothing: it called torch.compile ({sites}) "
            "but never called what torch.compile returned"
            + (" before it failed (any error it printed is above)." if done.failed else "."),
            hint="Fix the job's error first: compilediag reports what it compiles."
            if done.failed
            else "Call the object torch.compile returned (`model = torch.compile(model)`, "
            "then `model(x)`); a method other than forward runs uncompiled "
            "(`model.generate` calls the module, not the compiled wrapper): compile the "
            "module in place (`model.compile()`), so that every call of it, generate()'s "
            "included, runs compiled (compiling generate itself unrolls its token loop "
            "into one huge graph).",
        )
    elif not calls and done.failed:
        error = UsageError(
            f"`{command}` {ended} before it called torch.compile (any error it printed is above).",
            hint="Fix the job's error first; compilediag reports what it compiles.",
        )
    else:
        error = UsageError(
            f"`{command}` {ended}, and compiled nothing: "
            + (
                "what torch.compile returned was called, but no graph was compiled."
                if calls
                else "no Python process started from it called torch.compile."
            ),
            hint="Check that it calls torch.compile (or a compiled function) in a Python "
            "process started from this command, and that compiling is not turned off "
            "(TORCH_COMPILE_DISABLE, torch.compiler.set_stance).",
        )
    if done.failed:
        error.exit_code = JOB_FAILED
    return error


def _site(c: CompileCall) -> str:
    from compilediag.paths import portable_path

    return f"{portable_path(c.file, os.getcwd())}:{c.line}" if c.file else "?"


# `python`, `python3`, `python3.12`: the commands that run a script (or -m, -c) themselves
PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
# python's own options that take a value (`-W ignore`, `-X dev`); -c and -m end them
PYTHON_VALUE_OPTIONS = ("W", "X")
PYTHON_LONG_VALUE_OPTIONS = ("--check-hash-based-pycs",)


def is_python(program: str) -> bool:
    return bool(PYTHON.fullmatch(os.path.basename(program)))


def script_of(argv: list[str]) -> str | None:
    """The script a `python [OPTIONS] SCRIPT ...` command runs; None for anything else
    (`python -m MODULE`, `python -c CODE`, `python -` and stdin, another program)."""
    if not argv or not is_python(argv[0]):
        return None
    args = iter(argv[1:])
    for arg in args:
        if arg == "--":
            return next(args, None)
        if arg.startswith("--"):
            if arg in PYTHON_LONG_VALUE_OPTIONS:
                next(args, None)
                continue
            return None  # --help, --version: no script
        if arg == "-":
            return None  # the script comes from stdin
        if not arg.startswith("-"):
            return arg
        for i, flag in enumerate(arg[1:]):
            if flag in "cmhV?":
                return None
            if flag in PYTHON_VALUE_OPTIONS:
                if i == len(arg) - 2:  # the value is the next argument
                    next(args, None)
                break
    return None


def check_script(argv: list[str]) -> None:
    """`python SCRIPT` with no such SCRIPT fails at once, having compiled nothing: said
    before the job starts, with the folder it is looked for in."""
    script = script_of(argv)
    if script is not None and not Path(script).exists():
        raise UsageError(
            f"the script {script} does not exist (looked for from {Path.cwd()}).",
            hint="Check its path, or run compilediag from the folder your job runs from.",
        )


def job_python(argv: list[str]) -> str | None:
    """The Python a command starts first, as a program to run: `python...` itself, or the
    interpreter of a script's `#!` line (torchrun, `./train.py`, `#!/usr/bin/env python3`);
    None when it is not one (a shell script, a binary)."""
    program = shutil.which(argv[0]) if argv else None
    if program is None:
        return None
    if is_python(program) or is_python(argv[0]):
        return program
    try:
        with open(program, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not words or not is_python(words[0]):
        return None
    return shutil.which(words[0])


def python_without_torch(argv: list[str]) -> str | None:
    """The job's Python by its sys.executable, when it cannot import torch: why a job that
    wrote no trace record compiled nothing, asked of the interpreter itself rather than
    read from the job's output (which passes through to the user, untouched). Asked only
    of a job whose processes never imported torch._dynamo (the runtime probe wrote no
    file), and only where the command's first program is a Python (see `job_python`);
    None when it has torch, or when that can't be told."""
    python = job_python(argv)
    if python is None:
        return None
    ask = (
        "import sys, importlib.util as u; print(sys.executable); print(bool(u.find_spec('torch')))"
    )
    try:
        said = subprocess.run(
            [python, "-c", ask], capture_output=True, text=True, timeout=60
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    if len(said) != 2 or said[1] != "False":
        return None
    return said[0] or python


def _with_torch_hint(argv: list[str], without: str) -> str:
    """Run the job with a Python that has torch (compilediag's own, where it has one and
    the command starts with `python`), or install torch in the one it used."""
    import importlib.util

    here = sys.executable
    if is_python(argv[0]) and here != without and importlib.util.find_spec("torch"):
        ours = shlex.join([here, *argv[1:]])
        return (
            f"Run it with a Python that has torch (compilediag run -- {ours}), or install "
            f"torch for {without}."
        )
    return f"Install torch for {without}, or run the job with a Python that has it."


NCCL_TIMING_ENV = "TORCH_NCCL_ENABLE_TIMING"


def job_env(
    folder: Path, profile_steps: str | None, kernels: bool = True, profile_out: bool = False,
    stop_after: int | None = None, losses: bool = False,
) -> dict[str, str]:  # fmt: skip
    """The job's environment: the user's, plus the trace folder and the runtime probe's
    bootstrap first on PYTHONPATH (nothing that changes what torch compiles or caches)."""
    from compilediag.analysis.step.runtime import RUNTIME_FOLDER
    from compilediag.harness import bootstrap
    from compilediag.harness.bootstrap._compilediag_runtime import (
        DIR_ENV,
        KERNELS_ENV,
        LOSSES_ENV,
        PROFILE_OUT_ENV,
        STEPS_ENV,
        STOP_ENV,
    )
    from compilediag.harness.bootstrap._compilediag_runtime.remedies import REMEDY_ENV

    env = dict(os.environ)
    env["TORCH_TRACE"] = str(folder)
    env[DIR_ENV] = str(folder / RUNTIME_FOLDER)
    env.pop(STEPS_ENV, None)
    env.pop(KERNELS_ENV, None)
    env.pop(PROFILE_OUT_ENV, None)
    env.pop(STOP_ENV, None)
    env.pop(REMEDY_ENV, None)
    env.pop(LOSSES_ENV, None)
    if losses:  # --try-fixes: each step's loss kept, to compare with each remedy's run
        env[LOSSES_ENV] = "1"
    if stop_after:
        env[STOP_ENV] = str(stop_after)
    if profile_steps:
        env[STEPS_ENV] = profile_steps
        # NCCL times each collective on the device (two CUDA events a call: under 2% of a
        # 2-GPU nanoGPT step, bench/RESULTS.md): the ranks' waits in the window's steps are
        # read from those times (analysis/step/waits.py); the user's own setting is kept
        env.setdefault(NCCL_TIMING_ENV, "1")
        if not kernels:
            env[KERNELS_ENV] = "0"
        if profile_out:
            env[PROFILE_OUT_ENV] = "1"
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


def write_profile(folder: Path, report: Report, path: str) -> None:
    """--profile-out: the kernel profile as one Chrome trace, kernels given their lines."""
    import json

    from compilediag.analysis.step.runtime import kernel_trace
    from compilediag.fsutil import write_output_file

    trace = kernel_trace(folder, report)
    if trace is None:
        say(
            f"compilediag: {path} not written: no process profiled its kernels (the job "
            "ended before the steps after the window)"
        )
        return
    write_output_file(path, json.dumps(trace), "--profile-out")
    wrote(path, "the kernel profile, a Chrome trace: open it in https://ui.perfetto.dev")
