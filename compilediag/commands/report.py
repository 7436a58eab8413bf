"""`compilediag report`: the same report from a structured trace made elsewhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from compilediag.commands.common import (
    GateOptions,
    OutputOptions,
    budgets,
    check_outputs,
    emit,
    judge,
    show_progress,
)
from compilediag.config import load_config
from compilediag.errors import UsageError

if TYPE_CHECKING:
    from compilediag.analysis.runtime import JobRun
    from compilediag.report import Report, TargetInfo

# a trace has no timings and no outputs: only these rules can be judged on one
TRACE_RULES = frozenset({"fullgraph", "max_graph_breaks", "max_recompiles", "baseline"})


@dataclass
class ReportOptions:
    trace: str
    gate: GateOptions = field(default_factory=GateOptions)
    fail_on_divergence: bool = False
    out: OutputOptions = field(default_factory=OutputOptions)


def run(opts: ReportOptions) -> int:
    from compilediag.analysis.runtime import read_job_run
    from compilediag.report import TargetInfo

    check_outputs(opts.out, opts.gate.junit)
    rules = budgets(opts.gate, load_config(), TRACE_RULES)
    rules.fail_on_divergence = opts.fail_on_divergence
    # a folder `compilediag run --trace-dir` kept holds the job's runtime facts too
    job = read_job_run(Path(opts.trace)) if Path(opts.trace).is_dir() else None
    result = read_traces(opts.trace, TargetInfo(path=opts.trace), job)
    code = judge(result, rules, opts.gate.junit, None)
    emit(result, opts.out)
    return code


def trace_files_in(path: str) -> list[Path]:
    from compilediag.trace import trace_files

    p = Path(path)
    if not p.exists():
        raise UsageError(
            f"{path} does not exist.", hint="Pass the TORCH_TRACE folder or a file in it."
        )
    files = trace_files(p)
    if not files:
        raise UsageError(
            f"{path} holds no trace files.", hint=f"Run the job with TORCH_TRACE={path}."
        )
    return files


def read_traces(path: str, target: TargetInfo, job: JobRun | None = None) -> Report:
    """The report on every trace file under `path` (each rank's), with a progress bar for
    big inputs."""
    from compilediag.analysis.ranks import report_from_files

    files = trace_files_in(path)
    total = sum(f.stat().st_size for f in files)
    if total > 20_000_000 and show_progress():
        from rich.progress import Progress

        with Progress(transient=True) as progress:
            task = progress.add_task(f"reading {len(files)} trace file(s)", total=total)
            report = report_from_files(
                files, target, job, lambda f: progress.advance(task, f.stat().st_size)
            )
    else:
        report = report_from_files(files, target, job)
    if not report.trace or not report.trace.records:
        raise UsageError(
            f"{path} is not a PyTorch structured trace (no records found).",
            hint="Point at the folder TORCH_TRACE wrote.",
        )
    return report
