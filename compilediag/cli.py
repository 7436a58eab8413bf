"""The command line. Thin: parse options, run, render. Imports no torch (fast --help)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from compilediag import __version__
from compilediag.errors import COMPILE_FAILED, EXIT_CODES_HELP, DiagError, UsageError

app = typer.Typer(
    name="compilediag",
    help="Diagnose torch.compile on your model: graph breaks, recompiles, kernels, timings. "
    + EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"compilediag {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    pass


# --- options shared by the commands that run a model ----------------------------------

Target = Annotated[
    str, typer.Argument(help="Model file, PATH.py or PATH.py:ATTR.", show_default=False)
]
OptionalTarget = Annotated[
    str | None,
    typer.Argument(
        help="Model file, PATH.py or PATH.py:ATTR (default: `model` in [tool.compilediag] of pyproject.toml).",
        show_default=False,
    ),
]
Inputs = Annotated[
    list[str] | None,
    typer.Option(
        "--input",
        "-i",
        help="An input tensor SHAPE[:DTYPE[:HIGH]], e.g. 8x16 or 2x128:int64:30522. Repeat for more arguments.",
    ),
]
Backend = Annotated[
    str | None,
    typer.Option(help="torch.compile backend: inductor, aot_eager, eager, ...", show_default=False),
]
MinSpeedup = Annotated[
    float | None, typer.Option(help="Gate: exit 1 if the measured speed-up is below this.")
]
CheckOutputs = Annotated[
    bool,
    typer.Option("--check-outputs", help="Gate: exit 1 if compiled outputs differ from eager."),
]
Baseline = Annotated[
    str | None,
    typer.Option(
        help="Gate: a report saved with --format json; exit 1 only on a regression against it."
    ),
]
SpeedupTolerance = Annotated[
    float, typer.Option(help="With --baseline: how far (fraction) the speed-up may drop.")
]
Junit = Annotated[
    str | None, typer.Option(help="Also write a JUnit XML report (a test case per rule and site).")
]
Mode = Annotated[
    str | None,
    typer.Option(
        help="torch.compile mode: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs."
    ),
]
Dynamic = Annotated[
    bool | None,
    typer.Option(
        "--dynamic/--no-dynamic",
        help="Pass dynamic=True/False to torch.compile (default: torch's automatic dynamic).",
    ),
]
Device = Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if available).")]
Train = Annotated[
    bool,
    typer.Option(
        "--train", help="Compile a forward+backward step instead of inference under no_grad."
    ),
]
Timeout = Annotated[float, typer.Option(help="Stop the run after this many seconds (exit 5).")]
Format = Annotated[str, typer.Option("--format", "-f", help="table, json, markdown, csv or junit.")]
Output = Annotated[
    str | None,
    typer.Option("--output", "-o", help="Write the report to this file instead of stdout."),
]
Fullgraph = Annotated[
    bool,
    typer.Option(
        "--fullgraph", help="Gate: exit 1 if there is any graph break (all are reported)."
    ),
]
MaxBreaks = Annotated[
    int | None, typer.Option(help="Gate: exit 1 if there are more graph-break sites than this.")
]
MaxRecompiles = Annotated[
    int | None, typer.Option(help="Gate: exit 1 if there are more recompiles than this.")
]


@contextmanager
def _handled():
    """Every DiagError ends as one short paragraph on stderr and its exit code."""
    try:
        yield
    except DiagError as e:
        typer.echo(e.render(), err=True)
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("interrupted.", err=True)
        raise typer.Exit(130) from None


def _color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def _check_format(fmt: str) -> None:
    from compilediag.render import FORMATS

    if fmt not in FORMATS:
        raise UsageError(f"unknown --format {fmt!r}.", hint=f"Use one of: {', '.join(FORMATS)}.")


def _spec(
    target: str,
    inputs: list[str] | None,
    backend: str,
    mode: str | None,
    dynamic: bool | None,
    device: str | None,
    train: bool,
    **extra: Any,
) -> dict[str, Any]:
    from compilediag.target import check_target_file, parse_input_spec, split_target

    path, attr = split_target(target)
    resolved = check_target_file(path)
    specs = [parse_input_spec(s) for s in inputs or []]
    if device and device.split(":")[0] not in ("cpu", "cuda"):
        raise UsageError(f"unknown --device {device!r}.", hint="Use cpu or cuda.")
    return {
        "target": {"path": str(resolved), "attr": attr, "inputs": [vars(s) for s in specs],
                   "shapes": extra.pop("shapes", [])},
        "backend": backend, "mode": mode, "dynamic": dynamic, "device": device, "train": train,
        **extra,
    }  # fmt: skip


def _run(spec: dict[str, Any], timeout: float, quiet: bool):
    """Run the worker with a spinner on stderr, then build the Report from its trace.

    Returns the report, the exit code of a compile failure (or None), and the kernels' code.
    """
    from compilediag.analysis.build import all_compiles, build_report
    from compilediag.analysis.kernels import collect_kernels
    from compilediag.runner import run_worker, workdir
    from compilediag.trace import parse_path

    with workdir() as work:
        if sys.stderr.isatty() and not quiet:
            from rich.console import Console

            console = Console(stderr=True)
            with console.status("starting worker") as status:
                run = run_worker(spec, work, timeout, lambda s: status.update(s + " ..."))
        else:
            run = run_worker(spec, work, timeout)
        logs = parse_path(run.trace_dir)
    target = {"path": spec["target"]["path"], "attr": spec["target"]["attr"]}
    code = collect_kernels(all_compiles(logs))
    report = build_report(logs, run.result, target, code)
    return report, (COMPILE_FAILED if run.compile_error else None), code


def _emit(report, fmt: str, output: str | None) -> None:
    from compilediag.render import render

    if output:
        from compilediag.fsutil import write_output_file

        write_output_file(output, render(report, fmt, width=100, color=False))
        return
    sys.stdout.write(render(report, fmt, width=_width(), color=_color() and fmt == "table"))


@app.command()
def explain(
    target: OptionalTarget = None,
    input: Inputs = None,
    backend: Backend = None,
    mode: Mode = None,
    dynamic: Dynamic = None,
    device: Device = None,
    train: Train = False,
    fullgraph: Fullgraph = False,
    max_graph_breaks: MaxBreaks = None,
    max_recompiles: MaxRecompiles = None,
    min_speedup: MinSpeedup = None,
    check_outputs: CheckOutputs = False,
    baseline: Baseline = None,
    speedup_tolerance: SpeedupTolerance = 0.10,
    junit: Junit = None,
    cross_check: Annotated[
        bool,
        typer.Option(
            "--cross-check", help="Also run torch._dynamo.explain and report where it disagrees."
        ),
    ] = False,
    timings: Annotated[
        bool, typer.Option("--timings/--no-timings", help="Time eager vs compiled.")
    ] = True,
    repeat: Annotated[
        int | None, typer.Option(help="Timed blocks per variant (default: about 1 s worth).")
    ] = None,
    warmup: Annotated[
        int | None,
        typer.Option(help="Untimed calls per variant first (default: 0.2 s CPU, 1 s CUDA)."),
    ] = None,
    timeout: Timeout = 900,
    format: Format = "table",
    output: Output = None,
) -> None:
    """Compile the model once and report every graph break at your own file:line, with why
    and how to fix it; the graphs; kernels; compile time; eager vs compiled timings.

    Defaults for the model, inputs and gate can live in [tool.compilediag] of
    pyproject.toml. Under GitHub Actions, findings are also printed as annotations.

    Exit codes: 0 ok; 1 gate failed (--fullgraph, a budget, a regression against
    --baseline); 2 usage error; 3 model failed in eager; 4 torch.compile failed; 5 worker
    crashed or timed out.
    """
    with _handled():
        _check_format(format)
        cfg = _config()
        budgets = _budgets(
            cfg, fullgraph, max_graph_breaks, max_recompiles, min_speedup, check_outputs,
            baseline, speedup_tolerance,
        )  # fmt: skip
        if budgets.min_speedup is not None and not timings:
            raise UsageError("--min-speedup needs timings.", hint="Drop --no-timings.")
        spec = _spec(
            _target(target, cfg), input or cfg.inputs, backend or cfg.backend or "inductor",
            mode or cfg.mode, dynamic, device or cfg.device, train,
            cross_check=cross_check, timings=timings, repeat=repeat, warmup=warmup,
        )  # fmt: skip
        report, failed, _ = _run(spec, timeout, quiet=format != "table")
        code = _gate(report, budgets, junit, failed)
        _emit(report, format, output)
    raise typer.Exit(code)


def _config():
    from compilediag.config import load_config

    return load_config()


def _target(target: str | None, cfg) -> str:
    if target:
        return target
    if cfg.model:
        return cfg.model
    raise UsageError(
        "no model file given.",
        hint="Pass MODEL.py, or set `model` in [tool.compilediag] of pyproject.toml.",
    )


def _budgets(cfg, fullgraph, max_graph_breaks, max_recompiles, min_speedup=None,
             check_outputs=False, baseline=None, speedup_tolerance=0.10):  # fmt: skip
    from compilediag.gate import Budgets

    path = baseline or cfg.baseline
    pick = lambda a, b: a if a is not None else b  # noqa: E731
    return Budgets(
        fullgraph=fullgraph or cfg.fullgraph,
        max_graph_breaks=pick(max_graph_breaks, cfg.max_graph_breaks),
        max_recompiles=pick(max_recompiles, cfg.max_recompiles),
        min_speedup=pick(min_speedup, cfg.min_speedup),
        check_outputs=check_outputs or cfg.check_outputs,
        baseline=_load_report(path, "--baseline") if path else None,
        speedup_tolerance=speedup_tolerance,
    )


def _gate(report, budgets, junit: str | None, failed: int | None) -> int:
    """Judge the report, write the CI outputs, and return the exit code."""
    import os

    from compilediag.gate import evaluate, exit_code

    report.verdict = evaluate(report, budgets)
    if junit:
        from compilediag.fsutil import write_output_file
        from compilediag.render import render

        write_output_file(junit, render(report, "junit"))
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from compilediag.render.annotations import github_annotations

        # on stderr, so that stdout stays the report alone (the runner reads both)
        for line in github_annotations(report):
            typer.echo(line, err=True)
    return failed or exit_code(report.verdict)


def _load_report(path: str, what: str):
    from compilediag.report import Report

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


@app.command()
def recompiles(
    target: OptionalTarget = None,
    shapes: Annotated[
        str | None,
        typer.Option(
            help="Sweep: vary the first tensor input through these shapes, e.g. 2x16,4x16,8x16 (default: the file's get_input_sets())."
        ),
    ] = None,
    input: Inputs = None,
    backend: Backend = None,
    mode: Mode = None,
    dynamic: Dynamic = None,
    device: Device = None,
    train: Train = False,
    max_recompiles: MaxRecompiles = None,
    junit: Junit = None,
    timeout: Timeout = 900,
    format: Format = "table",
    output: Output = None,
) -> None:
    """Run a sweep of inputs through the compiled model and explain every recompilation:
    the frame, the failed guard in words, the user line that installed it, and the fix.
    Shows which calls hit the cache, automatic dynamic, and the recompile-limit post-mortem.

    Guards do not depend on the backend, so the default is the fast `eager` backend; pass
    --backend inductor to time real compiles. Compare with --dynamic.

    Exit codes: 0 ok; 1 more recompiles than --max-recompiles; 2 usage error (bad
    --shapes, inputs that don't fit); 3 model failed in eager; 4 torch.compile failed;
    5 worker crashed or timed out.
    """
    from compilediag.target import parse_shapes

    with _handled():
        _check_format(format)
        cfg = _config()
        shapes = shapes if shapes is not None else cfg.shapes
        sweep = parse_shapes(shapes) if shapes is not None else []
        spec = _spec(
            _target(target, cfg), input or cfg.inputs, backend or "eager", mode or cfg.mode,
            dynamic, device or cfg.device, train, shapes=sweep, timings=False,
        )  # fmt: skip
        report, failed, _ = _run(spec, timeout, quiet=format != "table")
        budgets = _budgets(cfg, False, None, max_recompiles)
        code = _gate(report, budgets, junit, failed)
        if format == "table" and not output:
            from compilediag.render.table import render_recompiles

            sys.stdout.write(render_recompiles(report, width=_width(), color=_color()))
        else:
            _emit(report, format, output)
    raise typer.Exit(code)


@app.command()
def report(
    trace: Annotated[
        str,
        typer.Argument(
            help="A TORCH_TRACE folder (every rank's file) or one trace file.", show_default=False
        ),
    ],
    fullgraph: Fullgraph = False,
    max_graph_breaks: MaxBreaks = None,
    max_recompiles: MaxRecompiles = None,
    baseline: Baseline = None,
    fail_on_divergence: Annotated[
        bool,
        typer.Option(
            "--fail-on-divergence",
            help="Gate: exit 1 if ranks differ in breaks, recompiles, graphs or compile time.",
        ),
    ] = False,
    junit: Junit = None,
    format: Format = "table",
    output: Output = None,
) -> None:
    """Report on a structured trace made elsewhere (TORCH_TRACE=DIR in a training job,
    every rank of a torchrun job): breaks, recompiles, graphs, kernels and compile times,
    a section per rank and where ranks diverge. Timings need a model run: they are absent.

    Exit codes: 0 ok; 1 gate failed; 2 usage error (no such path, no trace in it).
    """
    with _handled():
        _check_format(format)
        from compilediag.analysis.ranks import report_from_traces

        logs = _read_traces(trace, quiet=format != "table")
        result = report_from_traces(logs, {"path": trace, "attr": None})
        budgets = _budgets(
            _config(), fullgraph, max_graph_breaks, max_recompiles, baseline=baseline
        )
        budgets.fail_on_divergence = fail_on_divergence
        code = _gate(result, budgets, junit, None)
        _emit(result, format, output)
    raise typer.Exit(code)


def _read_traces(path: str, quiet: bool):
    """Parse every trace file under `path`, with a progress bar for big inputs."""
    from compilediag.trace import parse_path, trace_files

    p = Path(path)
    if not p.exists():
        raise UsageError(
            f"{path} does not exist.", hint="Pass the TORCH_TRACE folder or a file in it."
        )
    files = trace_files(p)
    if not files:
        raise UsageError(
            f"{path} holds no trace files.", hint="Run the job with TORCH_TRACE={path}."
        )
    total = sum(f.stat().st_size for f in files)
    if total > 20_000_000 and sys.stderr.isatty() and not quiet:
        from rich.progress import Progress

        with Progress(transient=True) as progress:
            task = progress.add_task(f"reading {len(files)} trace file(s)", total=total)
            logs = parse_path(p, on_bytes=lambda n: progress.advance(task, n))
    else:
        logs = parse_path(p)
    if not any(log.records for log in logs):
        raise UsageError(
            f"{path} is not a PyTorch structured trace (no records found).",
            hint="Point at the folder TORCH_TRACE wrote.",
        )
    return logs


@app.command("dump-kernels")
def dump_kernels(
    target: Target,
    out: Annotated[
        str,
        typer.Option("--out", "-o", help="Folder to write the kernels into (created if missing)."),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace a non-empty --out folder.")
    ] = False,
    input: Inputs = None,
    mode: Mode = None,
    dynamic: Dynamic = None,
    device: Device = None,
    train: Train = False,
    timeout: Timeout = 900,
    format: Format = "table",
) -> None:
    """Compile the model once with Inductor and write every generated kernel to a file of
    its own (.cpp on CPU, .py for Triton on CUDA), each graph's wrapper, and index.md /
    index.json: kind, fused ATen ops, the user lines they came from, library calls.

    Exit codes: 0 ok; 2 usage error (bad --out, ...); 3 model failed in eager;
    4 torch.compile failed; 5 worker crashed or timed out.
    """
    from compilediag.dump import check_out_dir, write_dump

    with _handled():
        _check_format(format)
        out_dir = check_out_dir(out, force)
        spec = _spec(target, input, "inductor", mode, dynamic, device, train, timings=False)
        report, failed, code = _run(spec, timeout, quiet=format != "table")
        files = write_dump(report, code, out_dir, force)
        if format == "table":
            from compilediag.render.table import render_kernels

            sys.stdout.write(render_kernels(report, width=_width(), color=_color()))
            sys.stdout.write(f"wrote {len(files)} files to {out_dir}/ (index.md, index.json)\n")
        else:
            _emit(report, format, None)
    raise typer.Exit(failed or 0)


@app.command()
def render(
    report_file: Annotated[
        str, typer.Argument(help="A report saved with --format json.", show_default=False)
    ],
    format: Format = "table",
    output: Output = None,
) -> None:
    """Re-render a saved JSON report without running the model (no torch needed):
    table, json, markdown, csv (one row per finding) or junit.

    Exit codes: 0 ok; 2 the file is missing or not a compilediag report.
    """
    with _handled():
        _check_format(format)
        _emit(_load_report(report_file, "report"), format, output)


def main() -> None:
    app()
