"""The command line. Thin: it declares the options and calls the command's module in
compilediag/cli/commands/ (the options in options.py, typer adjusted in typer_patches.py).
Imports no torch, and nothing heavy at module level (fast --help)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer

from compilediag.cli.handled import call
from compilediag.cli.options import (
    ApplyKept,
    Baseline,
    Budget,
    CheckNumerics,
    ColdStart,
    Format,
    Html,
    JobCommand,
    Jobs,
    Junit,
    KernelProfile,
    MaxShape,
    Numerics,
    Output,
    ProfileOut,
    ProfileSteps,
    Repeat,
    ReproDir,
    Requests,
    RunOptions,
    ServingMode,
    SpeedupTolerance,
    StopAfter,
    Target,
    TraceDir,
    TryFixes,
    TryJobFixes,
    Warmup,
    gate_rules,
    run_options,
)
from compilediag.cli.typer_patches import plain_help, plain_strings, plain_usage_errors
from compilediag.errors import EXIT_CODES_HELP
from compilediag.report.model import VERSION

if TYPE_CHECKING:
    from compilediag.cli.commands.common import FixOptions, GateOptions, OutputOptions

# What `compilediag --help` says first: which command to run for what the user has (`\b`:
# click keeps the lines as they are)
START_HERE = """Diagnose torch.compile: graph breaks, recompiles, kernels, timings.

Start here:

\b
  compilediag explain model.py         a model file: get_model(), get_inputs()
  compilediag run -- python train.py   your own training job, run as it is"""

app = typer.Typer(
    name="compilediag",
    help=START_HERE + "\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


plain_help()
plain_strings()
plain_usage_errors()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"compilediag {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    pass


def _out(format: str, output: str | None = None, html: str | None = None) -> OutputOptions:
    from compilediag.cli.commands.common import OutputOptions

    return OutputOptions(format, output, html)


def _fixes(try_fixes: bool, jobs: int | None) -> FixOptions:
    from compilediag.cli.commands.common import FixOptions

    return FixOptions(try_fixes, jobs)


def _gate(**kw: object) -> GateOptions:
    from compilediag.cli.commands.common import GateOptions

    return GateOptions(**kw)  # type: ignore[arg-type]


@app.command()
@gate_rules("model", "timings")
@run_options()
def explain(
    run: RunOptions | None = None,
    limits: dict[str, object] | None = None,
    baseline: Baseline = None,
    speedup_tolerance: SpeedupTolerance = 0.10,
    junit: Junit = None,
    try_fixes: TryFixes = False,
    jobs: Jobs = None,
    cross_check: Annotated[
        bool,
        typer.Option(
            "--cross-check", help="Also run torch._dynamo.explain and report where it disagrees."
        ),
    ] = False,
    timings: Annotated[
        bool, typer.Option("--timings/--no-timings", help="Time eager vs compiled.")
    ] = True,
    repeat: Repeat = None,
    warmup: Warmup = None,
    numerics: Numerics = True,
    repro_dir: ReproDir = "compilediag_repro",
    format: Format = "table",
    output: Output = None,
    html: Html = None,
) -> None:
    """Diagnose a model file: breaks, graphs, kernels, timings.

    Compile the model once and report every graph break at your own file:line, with why
    and how to fix it; the graphs; kernels; compile time; eager vs compiled timings.

    The model file provides get_model(), returning the model (an nn.Module or any
    callable), and get_inputs(), returning the arguments of the call to compile. Without
    get_model(), explain takes the file's `model`, else its one nn.Module class built
    with its defaults (the report says so); MODEL.py:ATTR names another. Without
    get_inputs(), pass --input SHAPE for each argument. A training script is no model
    file: run it as it is with `compilediag run -- python train.py`.

    Defaults for the model, inputs and gate can live in [tool.compilediag] of
    pyproject.toml. Under GitHub Actions, findings are also printed as annotations.

    Exit codes: 0 ok; 1 gate failed (--fullgraph, a budget, a regression against
    --baseline); 2 usage error; 3 model failed in eager; 4 torch.compile failed; 5 worker
    crashed or timed out.
    """
    from compilediag.cli.commands import explain as command

    opts = command.ExplainOptions(
        run=run or RunOptions(),
        gate=_gate(
            limits=limits, baseline=baseline, speedup_tolerance=speedup_tolerance, junit=junit
        ),
        out=_out(format, output, html),
        fixes=_fixes(try_fixes, jobs),
        cross_check=cross_check, timings=timings, repeat=repeat, warmup=warmup,
        repro_dir=repro_dir if numerics else None,
    )  # fmt: skip
    call(lambda: command.run(opts))


@app.command()
@gate_rules("sweep")
@run_options()
def recompiles(
    run: RunOptions | None = None,
    shapes: Annotated[
        str | None,
        typer.Option(
            "--shapes",
            help="Sweep: vary the first tensor input through these shapes, e.g. 2x16,4x16,8x16, and every tensor input of its shape with it (an attention mask beside input_ids) (default: the file's get_input_sets()).",
            metavar="SHAPES",
        ),
    ] = None,
    requests: Requests = None,
    cold_start: ColdStart = True,
    serving_mode: ServingMode = None,
    max_shape: MaxShape = None,
    limits: dict[str, object] | None = None,
    junit: Junit = None,
    try_fixes: TryFixes = False,
    jobs: Jobs = None,
    numerics: Numerics = True,
    repro_dir: ReproDir = "compilediag_repro",
    format: Format = "table",
    output: Output = None,
    html: Html = None,
) -> None:
    """Explain every recompile; plan for a request stream.

    Run a sweep of inputs through the compiled model and explain every recompilation: the
    frame, the failed guard in words, the user line that installed it, and the fix.
    Shows which calls hit the cache, automatic dynamic, and the recompile-limit post-mortem.

    Compiled as you compile it (Inductor, whose guards are its own); --backend eager is
    faster, for Dynamo's guards alone. Compare with --dynamic.

    With a request stream (--requests FILE, or get_request_stream()), the stream is
    replayed as compiled: the graphs it makes and the request
    that makes each, the requests the recompile limit sends to eager, then the plans that
    bound the graphs (marks, buckets, dynamic=True), measured; the chosen plan's warm-up
    checked in fresh processes under fail_on_recompile, its cold start timed with empty
    caches, warm caches and torch's cache artifacts; and the plan as code to paste.

    Exit codes: 0 ok; 1 more recompiles than --max-recompiles, or than
    --max-recompiles-after-warmup after the plan's warm-up; 2 usage error (bad --shapes
    or --requests, inputs that don't fit); 3 model failed in eager; 4 torch.compile
    failed; 5 worker crashed or timed out.
    """
    from compilediag.cli.commands import recompiles as command

    opts = command.RecompilesOptions(
        run=run or RunOptions(),
        shapes=shapes, gate=_gate(limits=limits, junit=junit), out=_out(format, output, html),
        fixes=_fixes(try_fixes, jobs), repro_dir=repro_dir if numerics else None,
        requests=requests, cold_start=cold_start, serving_mode=serving_mode, max_shape=max_shape,
    )  # fmt: skip
    call(lambda: command.run(opts))


@app.command()
@gate_rules("trace")
def report(
    trace: Annotated[
        list[str],
        typer.Argument(
            help="A TORCH_TRACE folder (every rank's file), a trace file (gzipped or not), "
            "or digests saved with --save-digests (on other machines); several fold into "
            "one report.",
            show_default=False,
            metavar="TRACE",
        ),
    ],
    limits: dict[str, object] | None = None,
    baseline: Baseline = None,
    junit: Junit = None,
    save_digests: Annotated[
        str | None,
        typer.Option(
            "--save-digests",
            help="Also save each rank's findings to this file, to be folded with other "
            "machines' by `compilediag report A.json B.json`.",
            metavar="FILE",
        ),
    ] = None,
    format: Format = "table",
    output: Output = None,
    html: Html = None,
) -> None:
    """Report on a trace made elsewhere (TORCH_TRACE=DIR).

    A structured trace from a training job (TORCH_TRACE=DIR), every rank of a torchrun
    job: breaks, recompiles, graphs, kernels and compile times, a section per rank and
    where ranks diverge. Timings need a model run: they are absent.

    Exit codes: 0 ok; 1 gate failed; 2 usage error (no such path, no trace in it).
    """
    from compilediag.cli.commands import report as command

    opts = command.ReportOptions(
        trace=trace, save_digests=save_digests,
        gate=_gate(limits=limits, baseline=baseline, junit=junit),
        out=_out(format, output, html),
    )  # fmt: skip
    call(lambda: command.run(opts))


@app.command(context_settings={"allow_interspersed_args": False})
@gate_rules("trace")
def run(
    command: JobCommand = None,
    trace_dir: TraceDir = None,
    profile_steps: ProfileSteps = None,
    kernels: KernelProfile = True,
    stop_after: StopAfter = None,
    try_fixes: TryJobFixes = False,
    budget: Budget = None,
    apply: ApplyKept = False,
    check_numerics: CheckNumerics = False,
    profile_out: ProfileOut = None,
    limits: dict[str, object] | None = None,
    baseline: Baseline = None,
    junit: Junit = None,
    format: Format = "table",
    output: Output = None,
    html: Html = None,
) -> None:
    """Run your own job (python train.py, torchrun) and report.

    Run your own job - a training script, `python -m ...`, a torchrun job - as it is,
    traced, and report on everything each of its processes compiled, as `report` does,
    with what it did at run time: how often each graph ran and, with --profile-steps, where
    a step's time goes. The job's output passes through; Ctrl-C stops the job, and the
    report still covers what it compiled.

    Example: compilediag run --profile-steps 3-7 -- python train.py --epochs 1

    Exit codes: 0 ok; 1 gate failed; 2 usage error; 4 the trace holds a torch.compile
    failure; 6 the command itself failed (its report is still given); 130 interrupted, 143
    terminated.
    """
    from compilediag.cli.commands import run as command_module

    opts = command_module.RunJobOptions(
        command=list(command or []), trace_dir=trace_dir, profile_steps=profile_steps,
        kernels=kernels, profile_out=profile_out, stop_after=stop_after, try_fixes=try_fixes,
        budget_s=budget, apply=apply, check_numerics=check_numerics,
        gate=_gate(limits=limits, baseline=baseline, junit=junit),
        out=_out(format, output, html),
    )  # fmt: skip
    call(lambda: command_module.run(opts))


@app.command()
@run_options()
def fix(
    run: RunOptions | None = None,
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Write the verified patches into the file (the original kept as FILE.orig).",
        ),
    ] = False,
    repeat: Repeat = None,
    warmup: Warmup = None,
    format: Annotated[
        str, typer.Option("--format", help="table or json.", metavar="FORMAT")
    ] = "table",
    output: Output = None,
) -> None:
    """Patch the graph breaks it knows, each patch verified.

    For each break whose construct compilediag knows (print, logging, warnings, .item(),
    .tolist(), a data-dependent if, NumPy on tensors, nonzero().shape[0], ...), make a
    minimal source edit, run a scratch copy as explain does, and keep it only when torch's
    count shows the break gone with no new one and the eager and compiled outputs equal
    the original's on the same inputs (with --train, the gradients too). Prints each
    patch as a unified diff with its evidence; --apply writes them (refused when the file
    changed since the run).

    Given REPORT.json, a report `run --try-fixes --format json` saved, it shows the
    remedies that run kept as edits of your code; --apply writes them (each file's
    original kept as FILE.orig) and runs the edited job to verify them.
    """
    from compilediag.cli.commands import fix as command

    opts = command.FixOptions(
        run=run or RunOptions(), out=_out(format, output), apply=apply, repeat=repeat, warmup=warmup
    )
    call(lambda: command.run(opts))


@app.command("dump-kernels")
@run_options(without=("backend",), target=Target)
def dump_kernels(
    out: Annotated[
        str,
        typer.Option(
            "--out", help="Folder to write the kernels into (created if missing).", metavar="DIR"
        ),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace a non-empty --out folder.")
    ] = False,
    run: RunOptions | None = None,
    format: Format = "table",
) -> None:
    """Write every kernel Inductor generates to files.

    Compile the model once with Inductor and write every generated kernel to a file of
    its own (.cpp on CPU, .py for Triton on CUDA), each graph's wrapper, and index.md /
    index.json: kind, fused ATen ops, the user lines they came from, library calls.

    Exit codes: 0 ok; 2 usage error (bad --out, ...); 3 model failed in eager;
    4 torch.compile failed; 5 worker crashed or timed out.
    """
    from compilediag.cli.commands import dump_kernels as command

    opts = command.DumpOptions(
        out_dir=out, force=force,
        run=replace(run or RunOptions(), backend="inductor"),
        out=_out(format),
    )  # fmt: skip
    call(lambda: command.run(opts))


@app.command()
def render(
    report_file: Annotated[
        str,
        typer.Argument(
            help="A report saved with --format json.", show_default=False, metavar="REPORT"
        ),
    ],
    format: Format = "table",
    output: Output = None,
) -> None:
    """Re-render a saved JSON report (no torch needed).

    Any format, without running the model: table, json, markdown, csv (one row per
    finding), junit or html.

    Exit codes: 0 ok; 2 the file is missing or not a compilediag report.
    """
    from compilediag.cli.commands import render as command

    call(lambda: command.run(report_file, _out(format, output)))


@app.command()
def diff(
    a: Annotated[
        str,
        typer.Argument(
            help="The run before: a trace folder or file (every rank's), or a saved report.",
            show_default=False,
            metavar="A",
        ),
    ],
    b: Annotated[
        str,
        typer.Argument(help="The run after, as A.", show_default=False, metavar="B"),
    ],
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            help="Compile time or step time worse by more than this share is a regression (and a change within it is the same).",
        ),
    ] = 0.2,
    format: Annotated[
        str, typer.Option("--format", "-f", help="table, json, markdown or html (one page).")
    ] = "table",
    output: Output = None,
) -> None:
    """Compare two runs: what changed, and why the cache missed.

    Two runs side by side: a torch upgrade, a fix, a config change. Breaks (new, gone,
    moved, reason changed), recompiles, graphs and kernels, compile time by phase, FX-graph
    cache hits and misses, timings. For each cache miss in B of a graph A compiled too, the
    key's components that differ, in words ("Inductor config
    `fallback_random`: False → True", "input 0: shape [8, 16] → [16, 16]"): give both
    traces for these (a saved report has no cache records).

    Example: compilediag diff traces/before traces/after

    Under GitHub Actions, each regression is also an error annotation (on B's line where it
    has one).

    Exit codes: 0 B did not regress; 1 B regressed (a new break, recompile or compile
    failure; compile time or step time worse beyond --tolerance); 2 usage error.
    """
    from compilediag.cli.commands import diff as command

    opts = command.DiffOptions(a, b, tolerance, format, output)
    call(lambda: command.run(opts))


def main() -> None:
    app()
