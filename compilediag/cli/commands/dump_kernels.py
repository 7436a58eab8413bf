"""`compilediag dump-kernels`: every generated kernel in a file of its own, with an index."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compilediag.cli.commands.common import (
    OutputOptions,
    check_outputs,
    color,
    emit,
    make_spec,
    run_model,
    width,
)
from compilediag.cli.config import load_config
from compilediag.cli.options import RunOptions

if TYPE_CHECKING:
    from compilediag.report.model import Report


@dataclass
class DumpOptions:
    out_dir: str
    force: bool = False
    run: RunOptions = field(default_factory=RunOptions)
    out: OutputOptions = field(default_factory=OutputOptions)


def run(opts: DumpOptions) -> int:
    from compilediag.render.dump import check_out_dir, write_dump

    check_outputs(opts.out)
    out_dir = check_out_dir(opts.out_dir, opts.force)
    opts.run.backend = "inductor"  # kernels are what Inductor generates
    spec = make_spec(opts.run, load_config(), "inductor", timings=False)
    done = run_model(spec, opts.run.timeout)
    files = write_dump(done.report, done.code, out_dir, opts.force)
    if opts.out.format == "table":
        from compilediag.render.table import render_kernels

        sys.stdout.write(title(done.report))
        sys.stdout.write(render_kernels(done.report, width=width(), color=color()))
        sys.stdout.write(f"wrote {len(files)} files to {out_dir}/ (index.md, index.json)\n")
    else:
        emit(done.report, OutputOptions(opts.out.format))
    return done.failed or 0


def title(report: Report) -> str:
    """`compilediag · FILE  inputs: 8x32:float32`, the first line of the table as explain's
    (machine formats have none: stdout is theirs alone)."""
    from rich.text import Text

    from compilediag.render import short_path
    from compilediag.render.table.parts import print_items

    line = Text(f"compilediag · {short_path(report.target.path)}", style="bold")
    if report.target.inputs:
        line.append(f"  inputs: {' | '.join(report.target.inputs)}", style="dim")
    return print_items([line], width(), color())
