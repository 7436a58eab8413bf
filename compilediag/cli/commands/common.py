"""The steps every command composes: make the worker's spec, run it, build the Report,
judge it, write it."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from compilediag.cli.config import Config
from compilediag.cli.options import RunOptions
from compilediag.cli.progress import Live, show_progress, stage_text
from compilediag.errors import COMPILE_FAILED, UsageError
from compilediag.gate import Budgets
from compilediag.harness.target import (
    Target,
    check_target_file,
    parse_input_spec,
    split_target,
)
from compilediag.harness.target_source import built_with_defaults
from compilediag.harness.worker_types import ModelInfo, WorkerResult, WorkerSpec
from compilediag.report.model import Report

if TYPE_CHECKING:  # the analysis is imported only by the commands that run it
    from compilediag.analysis.compile.kernels import GraphCode

__all__ = ["show_progress", "stage_text"]  # (report.py takes them from here)

# torch.compile's modes (torch._inductor.list_mode_options)
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass
class FixOptions:
    try_fixes: bool = False
    jobs: int | None = None  # runs at a time (default: the cores there are)


def verify_fixes(done: ModelRun, spec: WorkerSpec, fixes: FixOptions, timeout: float) -> ModelRun:
    """The run, its report with the remedies measured (a new Report: a built one is not
    changed)."""
    if not fixes.try_fixes or done.failed:
        return done
    from compilediag.cli.commands.fixes import nothing_to_try, try_fixes
    from compilediag.report.vocabulary import Finding, FindingKind

    jobs = fixes.jobs or os.cpu_count() or 1
    with Live(f"measuring each remedy in a run of its own (--try-fixes, {jobs} at a time)"):
        verified = try_fixes(spec, done.report, jobs, timeout, run_model)
    notes = done.report.notes
    if not verified:  # the report says it too (a look found it only among the job's output)
        notes = [*notes, Finding(FindingKind.NOTHING_TO_TRY, nothing_to_try(done.report) + ".")]
    return replace(done, report=replace(done.report, verified_fixes=verified, notes=notes))


@dataclass
class GateOptions:
    limits: dict[str, object] = field(default_factory=dict)  # gate rule key -> its option
    baseline: str | None = None
    speedup_tolerance: float = 0.10
    junit: str | None = None


@dataclass
class OutputOptions:
    format: str = "table"
    output: str | None = None
    html: str | None = None  # also write the self-contained HTML report here


@dataclass
class ModelRun:
    report: Report
    failed: int | None  # COMPILE_FAILED when torch.compile failed, else None
    code: list[GraphCode]  # the kernels' source, per graph
    result: WorkerResult | None = None  # the worker's own (fix reads its output check)


def check_outputs(
    out: OutputOptions, junit: str | None = None, more: dict[str, str | None] | None = None
) -> None:
    """Everything about the output the user asked for, checked before the model runs, so
    a long run never ends with its report lost (`more`: a command's other files, by option)."""
    from compilediag.fsutil import check_output_files
    from compilediag.render import FORMATS

    if out.format not in FORMATS:
        raise UsageError(
            f"unknown --format {out.format!r}.", hint=f"Use one of: {', '.join(FORMATS)}."
        )
    check_output_files(
        {"--output": out.output, "--html": out.html, "--junit": junit, **(more or {})}
    )


def model_path(target: str | None) -> str:
    if target:
        return target
    raise UsageError(
        "no model file given.",
        hint="Pass MODEL.py, or set `model` in [tool.compilediag] of pyproject.toml.",
    )


def make_spec(
    run: RunOptions,
    cfg: Config,
    default_backend: str,
    *,
    shapes: list[list[int]] | None = None,
    sweep: bool = False,
    timings: bool = False,
    cross_check: bool = False,
    repeat: int | None = None,
    warmup: int | None = None,
    repro_dir: str | None = None,
) -> WorkerSpec:
    """Check everything the user typed (and the config file's values for what they did
    not), before a worker starts. `repro_dir`: judge the outputs' numerics, and write a
    repro there where they depart (None: no numerics check)."""
    run = cfg.fill(run)
    path, attr = split_target(model_path(run.target))
    resolved = check_target_file(path)
    inputs = [parse_input_spec(s) for s in (run.inputs or [])]
    device = run.device
    if device and device.split(":")[0] not in ("cpu", "cuda"):
        raise UsageError(f"unknown --device {device!r}.", hint="Use cpu or cuda.")
    if run.timeout <= 0:  # (0 stopped the worker as it imported torch, with its traceback)
        raise UsageError(
            f"--timeout {run.timeout:g} is no time to run in.",
            hint="Give the seconds the run may take, more than 0 (the default is 900).",
        )
    mode = run.mode
    if mode and mode not in MODES:
        raise UsageError(f"unknown --mode {mode!r}.", hint=f"Use one of: {', '.join(MODES)}.")
    return WorkerSpec(
        target=Target(path=str(resolved), attr=attr, inputs=inputs, shapes=shapes or []),
        backend=run.backend or default_backend,
        mode=mode,
        dynamic=run.dynamic,
        device=device,
        train=run.train,
        cold=run.cold,
        sweep=sweep,
        timings=timings,
        cross_check=cross_check,
        repeat=repeat,
        warmup=warmup,
        numerics=repro_dir is not None,
        repro_dir=str(Path(repro_dir).resolve()) if repro_dir else "",
    )


def run_model(spec: WorkerSpec, timeout: float, progress: bool | Live = True) -> ModelRun:
    """Run the worker with a live line on stderr (a terminal's: cli/progress.py; a `Live`
    given is used, under its label), then build the Report from its trace."""
    from compilediag.analysis.build import build_report
    from compilediag.analysis.compile.kernels import all_kernels
    from compilediag.analysis.compile.timings import with_trust
    from compilediag.analysis.history import build_history
    from compilediag.harness.runner import run_worker
    from compilediag.harness.spawn import workdir
    from compilediag.report.model import TargetInfo
    from compilediag.trace.parse import parse_path

    shown = Live() if progress is True else nullcontext(progress)
    with workdir() as work, shown as live:
        started = time.monotonic()
        if live:
            run = run_worker(spec, work, timeout, live.stage)
            live.stage("done")
        else:
            run = run_worker(spec, work, timeout)
        worker = time.monotonic()
        history = build_history(parse_path(run.trace_dir))
        read = time.monotonic()
        code = all_kernels(history)
        kernels = time.monotonic()
        target = TargetInfo(path=spec.target.path, attr=spec.target.attr)
        report = build_report(history, run.result, target, code=code)
        phases = run.result.phases_s
        took = {
            **phases, "worker start and exit": worker - started - sum(phases.values()),
            "trace read": read - worker, "kernels read": kernels - read,
            "report": time.monotonic() - kernels,
        }  # fmt: skip
        report.took_s = {k: round(max(v, 0.0), 3) for k, v in took.items()}
    report = with_trust(report, run.trust)
    report = with_model_note(report, spec, run.result.model)
    return ModelRun(report, COMPILE_FAILED if run.compile_error else None, code, run.result)


def with_model_note(report: Report, spec: WorkerSpec, model: ModelInfo | None) -> Report:
    """The report (a new one), with a note first where the model is the file's one class
    built with its defaults (`target_source.built_with_defaults`): the findings are about that
    model, which may not be the one the user meant."""
    name = model.name if model else ""
    if not name.endswith(".forward"):
        return report  # a function, not a module: the file named it
    said = built_with_defaults(spec.target.path, spec.target.attr, name.removesuffix(".forward"))
    if said is None:
        return report
    from compilediag.paths import portable_path
    from compilediag.report.vocabulary import Finding, FindingKind, Severity

    message, fix, line = said
    note = Finding(
        FindingKind.MODEL_DEFAULTS, message, Severity.WARNING,
        portable_path(spec.target.path, os.getcwd()), line, fix,
    )  # fmt: skip
    return replace(report, notes=[note, *report.notes])


def budgets(gate: GateOptions, cfg: Config, runs: frozenset[str]) -> Budgets:
    """The gate's rules that a run of these kinds can judge (`gate.rules_for`: a trace has
    no timings, a sweep no speed-up), from the options, then from the config file; a
    baseline wherever a model or trace runs."""
    from compilediag.gate import rules_for

    def set_(value: object) -> bool:
        return value is not None and value is not False

    limits = {}
    for rule in rules_for(runs):
        value = gate.limits.get(rule.key)
        limits[rule.key] = value if set_(value) else cfg.limits.get(rule.key)
    path = gate.baseline or (cfg.baseline if runs & {"model", "trace"} else None)
    return Budgets(
        baseline=load_report(str(path), "--baseline") if path else None,
        speedup_tolerance=gate.speedup_tolerance,
        **limits,
    )


def judge(
    report: Report, rules: Budgets, junit: str | None, failed: int | None
) -> tuple[Report, int]:
    """The report with its verdict (a new Report), after writing the CI outputs, and the
    exit code."""
    from compilediag.gate import evaluate, exit_code

    report = replace(report, verdict=evaluate(report, rules))
    if report.compile_failures and not failed:
        failed = COMPILE_FAILED  # a trace that holds a failure: the same code as a run
    if failed:
        # the report (stdout) holds the failure as a finding; stderr says it too, like
        # every other error
        from compilediag.cli.progress import say

        if report.errors:
            say(f"error: {report.errors[0].text}")
        else:
            f = report.compile_failures[0]
            where = f" at {f.file}:{f.line}" if f.file else ""
            say(f"error: {f.by} failed{where}: {f.reason}")
    if junit:
        from compilediag.fsutil import write_output_file
        from compilediag.render import render

        write_output_file(junit, render(report, "junit"), "--junit")
        wrote(junit, "JUnit XML")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from compilediag.render.annotations import github_annotations

        # on stderr, so that stdout stays the report alone (the runner reads both)
        for line in github_annotations(report):
            print(line, file=sys.stderr)
    return report, failed or exit_code(report.verdict)


def color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def write_html(report: Report, out: OutputOptions) -> None:
    if out.html:
        from compilediag.fsutil import write_output_file
        from compilediag.render import render

        write_output_file(out.html, render(report, "html"), "--html")
        wrote(out.html, "the HTML report")


def wrote(path: str, what: str) -> None:
    """A file the run wrote, said on stderr (stdout may be a report piped elsewhere)."""
    sys.stderr.write(f"wrote {path} ({what})\n")


def emit(report: Report, out: OutputOptions) -> None:
    from compilediag.render import render

    write_html(report, out)

    if out.output:
        from compilediag.fsutil import write_output_file

        write_output_file(
            out.output, render(report, out.format, width=100, color=False), "--output"
        )
        wrote(out.output, f"the report, {out.format}")
    else:
        fmt = out.format
        sys.stdout.write(render(report, fmt, width=width(), color=color() and fmt == "table"))
    if out.output or out.format != "table":
        say_verdict(report)


def say_verdict(report: Report) -> None:
    """The gate's verdict on the terminal (stderr), where no table went to it: the report
    went to a file, or stdout holds JSON or Markdown for a program to read."""
    from compilediag.render import verdict_lines

    for line in verdict_lines(report):
        sys.stderr.write(line + "\n")


def load_report(path: str, what: str) -> Report:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{what} {path} does not exist.", hint="Check the path.")
    try:
        return Report.from_dict(json.loads(p.read_text()))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise UsageError(
            f"{path} is not a compilediag JSON report ({e}).",
            hint="Make one with `compilediag explain MODEL --format json > report.json`.",
        ) from None
