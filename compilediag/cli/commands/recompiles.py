"""`compilediag recompiles`: run a sweep and explain every recompilation."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from compilediag.cli.commands.common import (
    FixOptions,
    GateOptions,
    OutputOptions,
    budgets,
    check_outputs,
    color,
    emit,
    judge,
    make_spec,
    model_path,
    run_model,
    verify_fixes,
    width,
    write_html,
)
from compilediag.cli.commands.serving import offers_stream, serving_section
from compilediag.cli.config import load_config
from compilediag.cli.options import RunOptions
from compilediag.errors import UsageError
from compilediag.harness.serving.calls import SERVING_MODES
from compilediag.harness.serving.stream import read_requests
from compilediag.harness.target import parse_shape, parse_shapes, split_target


@dataclass
class RecompilesOptions:
    run: RunOptions = field(default_factory=RunOptions)
    shapes: str | None = None
    gate: GateOptions = field(default_factory=GateOptions)
    out: OutputOptions = field(default_factory=OutputOptions)
    fixes: FixOptions = field(default_factory=FixOptions)
    repro_dir: str | None = "compilediag_repro"  # None: no numerics check
    requests: str | None = None  # a stream of requests, one JSON object a line
    cold_start: bool = True  # serving: also time the warm-up with warm caches and artifacts
    serving_mode: str | None = None  # None: the file's SERVING_MODE, else inference_mode
    max_shape: str | None = None  # serving: the largest request served, "8x512"


def check_no_empty_shape(text: str, what: str) -> None:
    """`8x16,,16x16` (or a trailing comma): a shape left out, most likely by a typo, refused
    rather than skipped; `what`: the option, or the config file's key, it came from."""
    items = text.split(",")
    if len(items) < 2 or not any(i.strip() for i in items):
        return  # one shape, or none at all: parse_shapes says what is wrong with it
    for n, item in enumerate(items, 1):
        if not item.strip():
            given = [i.strip() for i in items if i.strip()]
            for shape in given:  # the fix offered is one that parses (a look: '4x' was in it)
                parse_shape(shape, f"{what} entry")
            raise UsageError(
                f"{what} {text!r}: shape {n} of {len(items)} is empty: remove the extra "
                f"comma or put a shape there ({','.join(given)})"
            )


def check_serving(opts: RecompilesOptions, serving: bool, sweep: list[list[int]]) -> None:
    """A request stream and a sweep are two runs; the serving gate needs a stream."""
    if opts.requests and sweep:
        raise UsageError(
            "--shapes and --requests both given: a sweep and a request stream are two runs.",
            hint='Give the shapes as requests: one line each, e.g. {"shapes": [[2, 16]]}.',
        )
    if opts.serving_mode is not None and opts.serving_mode not in SERVING_MODES:
        raise UsageError(
            f"--serving-mode {opts.serving_mode!r} is not a serving mode.",
            hint=f"Pass one of {', '.join(SERVING_MODES)}.",
        )
    if opts.serving_mode is not None and not serving:
        raise UsageError(
            "--serving-mode is the mode a request stream is served in.",
            hint="Pass --requests FILE (one JSON request a line), or add get_request_stream().",
        )
    if opts.max_shape is not None and not serving:
        raise UsageError(
            "--max-shape is the largest request of a request stream.",
            hint="Pass --requests FILE (one JSON request a line), or add get_request_stream().",
        )
    if not serving and opts.gate.limits.get("max_recompiles_after_warmup") is not None:
        raise UsageError(
            "--max-recompiles-after-warmup judges a request stream's plan.",
            hint="Pass --requests FILE (one JSON request a line), or add get_request_stream().",
        )


def run(opts: RecompilesOptions) -> int:
    check_outputs(opts.out, opts.gate.junit)
    cfg = load_config()
    shapes = opts.shapes if opts.shapes is not None else cfg.shapes
    if shapes is not None:
        where = "--shapes" if opts.shapes is not None else "shapes in pyproject.toml"
        check_no_empty_shape(shapes, where)
    sweep = parse_shapes(shapes) if shapes is not None else []
    stream = read_requests(opts.requests) if opts.requests else []
    # a file's get_request_stream() is its serving run, unless --shapes asks for a sweep
    path = split_target(model_path(cfg.fill(opts.run).target))[0]
    serving = bool(stream) or (not sweep and offers_stream(path))
    check_serving(opts, serving, sweep)
    # compiled as the user compiles (Inductor, or the config file's backend): a backend adds
    # guards of its own (Inductor's lowerings make some sizes constants again)
    spec = make_spec(
        opts.run, cfg, "inductor", shapes=sweep, sweep=True, timings=False,
        repro_dir=opts.repro_dir,
    )  # fmt: skip
    spec.target.requests, spec.target.stream = stream, serving
    spec.target.serving_mode = opts.serving_mode or ""
    if opts.max_shape is not None:
        spec.target.serving_max = parse_shape(opts.max_shape, "--max-shape")
    done = run_model(spec, opts.run.timeout)
    done = verify_fixes(done, spec, opts.fixes, opts.run.timeout)
    found = done.report
    if serving and done.result is not None:
        found = serving_section(found, spec, done.result, opts.cold_start, opts.run.timeout)
    rules = budgets(opts.gate, cfg, frozenset({"sweep"}))
    report, code = judge(found, rules, opts.gate.junit, done.failed)
    if opts.out.format == "table" and not opts.out.output:
        from compilediag.render.table import render_recompiles

        write_html(report, opts.out)
        sys.stdout.write(render_recompiles(report, width=width(), color=color()))
    else:
        emit(report, opts.out)
    return code
