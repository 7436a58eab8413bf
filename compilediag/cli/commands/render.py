"""`compilediag render`: re-render a saved JSON report; no model run, no torch."""

from __future__ import annotations

from compilediag.cli.commands.common import OutputOptions, check_outputs, emit, load_report


def run(report_file: str, out: OutputOptions) -> int:
    check_outputs(out)
    emit(load_report(report_file, "report"), out)
    return 0
