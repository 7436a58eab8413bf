"""`compilediag diff A B`: two runs side by side, and why B's cache missed."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from compilediag.errors import UsageError

if TYPE_CHECKING:
    from compilediag.analysis.diff.model import Side

FORMATS = ("table", "json", "markdown", "html")


@dataclass
class DiffOptions:
    a: str
    b: str
    tolerance: float = 0.2
    format: str = "table"
    output: str | None = None


def run(opts: DiffOptions) -> int:
    from compilediag.analysis.diff.compare import diff
    from compilediag.cli.commands.common import color, width, wrote
    from compilediag.render.diff import render_diff

    if opts.format not in FORMATS:
        raise UsageError(f"--format {opts.format!r} is not one of {', '.join(FORMATS)}.")
    if not 0 <= opts.tolerance < 10:
        raise UsageError(f"--tolerance {opts.tolerance} is not a share such as 0.2 (20%).")
    if opts.output:
        from compilediag.fsutil import check_output_file

        check_output_file(opts.output, "--output")
    d = diff(load_side("A", opts.a), load_side("B", opts.b), tolerance=opts.tolerance)
    if opts.output:
        from compilediag.fsutil import write_output_file

        write_output_file(opts.output, render_diff(d, opts.format, 100, False), "--output")
        wrote(opts.output, f"the diff, {opts.format}")
    else:
        text = render_diff(d, opts.format, width(), color() and opts.format == "table")
        sys.stdout.write(text)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from compilediag.render.diff import github_annotations

        for line in github_annotations(d):  # on stderr: stdout stays the diff alone
            print(line, file=sys.stderr)
    return 1 if d.regressed else 0


def load_side(label: str, path: str) -> Side:
    """A run: a saved report (-o report.json), or a trace (folder or file, every rank's;
    a `run --trace-dir` folder with its job's facts)."""
    from compilediag.analysis.diff.model import Side
    from compilediag.analysis.ranks.fold import fold, read_digests
    from compilediag.analysis.step.runtime import read_job_run
    from compilediag.cli.commands.report import trace_files_in
    from compilediag.report.model import Report, TargetInfo

    p = Path(path)
    if not p.exists():
        raise UsageError(
            f"{label}: {path} does not exist.",
            hint="Give a trace folder (TORCH_TRACE, run --trace-dir), a trace file, or a "
            "saved report (--format json -o report.json).",
        )
    if p.is_file() and p.suffix == ".json":
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError, UnicodeDecodeError) as e:
            raise UsageError(f"{label}: {path} can't be read ({e}).") from None
        if isinstance(data, dict) and "schema_version" in data:
            try:
                return Side(label, path, Report.from_dict(data))
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                raise UsageError(f"{label}: {path} is not a compilediag report ({e}).") from None
    files = trace_files_in(path)
    target = TargetInfo(path=path)
    try:
        digests = list(read_digests(files, target, lambda _: None, keys=True))
    except ValueError as e:  # a digest file of another version
        raise UsageError(f"{label}: a digest file can't be read: {e}.") from None
    if not any(d.records for d in digests):
        raise UsageError(
            f"{label}: {path} holds no torch trace records.",
            hint="Give the folder TORCH_TRACE named, or a file in it.",
        )
    job = read_job_run(p) if p.is_dir() else None
    report = fold(digests, target, job)
    return Side(label, path, report, [k for d in digests for k in d.cache_keys])
