"""`compilediag report`: the same report from a structured trace made elsewhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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
from compilediag.trace import TraceLog

# a trace has no timings and no outputs: only these rules can be judged on one
TRACE_RULES = frozenset({"fullgraph", "max_graph_breaks", "max_recompiles", "baseline"})


@dataclass
class ReportOptions:
    trace: str
    gate: GateOptions = field(default_factory=GateOptions)
    fail_on_divergence: bool = False
    out: OutputOptions = field(default_factory=OutputOptions)


def run(opts: ReportOptions) -> int:
    from compilediag.analysis.ranks import report_from_traces
    from compilediag.analysis.runtime import read_job_run
    from compilediag.report import TargetInfo

    check_outputs(opts.out, opts.gate.junit)
    rules = budgets(opts.gate, load_config(), TRACE_RULES)
    rules.fail_on_divergence = opts.fail_on_divergence
    logs = read_traces(opts.trace)
    # a folder `compilediag run --trace-dir` kept holds the job's runtime facts too
    job = read_job_run(Path(opts.trace)) if Path(opts.trace).is_dir() else None
    result = report_from_traces(logs, TargetInfo(path=opts.trace), job)
    code = judge(result, rules, opts.gate.junit, None)
    emit(result, opts.out)
    return code


def read_traces(path: str) -> list[TraceLog]:
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
            f"{path} holds no trace files.", hint=f"Run the job with TORCH_TRACE={path}."
        )
    total = sum(f.stat().st_size for f in files)
    if total > 20_000_000 and show_progress():
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
