"""`compilediag recompiles`: run a sweep and explain every recompilation."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace

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
    run_model,
    verify_fixes,
    width,
    write_html,
)
from compilediag.cli.config import load_config
from compilediag.cli.options import RunOptions
from compilediag.harness.target import parse_shapes


@dataclass
class RecompilesOptions:
    run: RunOptions = field(default_factory=RunOptions)
    shapes: str | None = None
    gate: GateOptions = field(default_factory=GateOptions)
    out: OutputOptions = field(default_factory=OutputOptions)
    fixes: FixOptions = field(default_factory=FixOptions)


def run(opts: RecompilesOptions) -> int:
    check_outputs(opts.out, opts.gate.junit)
    cfg = load_config()
    shapes = opts.shapes if opts.shapes is not None else cfg.shapes
    sweep = parse_shapes(shapes) if shapes is not None else []
    # Guards do not depend on the backend: the fast eager backend unless --backend says
    # otherwise (a backend in the config file is explain's).
    run = replace(opts.run, backend=opts.run.backend or "eager")
    spec = make_spec(run, cfg, "eager", shapes=sweep, sweep=True, timings=False)
    done = run_model(spec, opts.run.timeout)
    done = verify_fixes(done, spec, opts.fixes, opts.run.timeout)
    rules = budgets(opts.gate, cfg, frozenset({"sweep"}))
    report, code = judge(done.report, rules, opts.gate.junit, done.failed)
    if opts.out.format == "table" and not opts.out.output:
        from compilediag.render.table import render_recompiles

        write_html(report, opts.out)
        sys.stdout.write(render_recompiles(report, width=width(), color=color()))
    else:
        emit(report, opts.out)
    return code
