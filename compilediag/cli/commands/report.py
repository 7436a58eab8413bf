"""`compilediag report`: the same report from a structured trace made elsewhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from compilediag.cli.commands.common import (
    GateOptions,
    OutputOptions,
    budgets,
    check_outputs,
    emit,
    judge,
    show_progress,
    wrote,
)
from compilediag.cli.config import load_config
from compilediag.errors import UsageError

if TYPE_CHECKING:
    from compilediag.analysis.ranks.fold import RankDigest
    from compilediag.analysis.step.runtime import JobRun
    from compilediag.report.model import Report, TargetInfo

# a trace has no timings and no outputs: the gate rules of a trace run (gate.rules_for)
TRACE = frozenset({"trace"})


@dataclass
class ReportOptions:
    trace: list[str]  # trace folders or files, and digest files (--save-digests)
    save_digests: str | None = None
    gate: GateOptions = field(default_factory=GateOptions)
    out: OutputOptions = field(default_factory=OutputOptions)


def run(opts: ReportOptions) -> int:
    from compilediag.analysis.ranks.fold import save_digests
    from compilediag.analysis.step.runtime import read_job_runs
    from compilediag.report.model import TargetInfo

    check_outputs(opts.out, opts.gate.junit, {"--save-digests": opts.save_digests})
    rules = budgets(opts.gate, load_config(), TRACE)
    # a folder `compilediag run --trace-dir` kept holds the job's runtime facts too (one a
    # node, for a job of several nodes)
    job = read_job_runs([Path(t) for t in opts.trace])
    kept: list[RankDigest] | None = [] if opts.save_digests else None
    try:
        result = read_traces(opts.trace, TargetInfo(path=" ".join(opts.trace)), job, kept)
    except ValueError as e:  # a digest file of another version, or edited
        raise UsageError(
            f"a digest file can't be read: {e}.",
            hint="Save it again with this compilediag: compilediag report TRACE_DIR "
            "--save-digests FILE.",
        ) from None
    if opts.save_digests and kept is not None:
        save_digests(kept, opts.save_digests)
        wrote(opts.save_digests, f"digests of {len(kept)} rank(s)")
    result, code = judge(result, rules, opts.gate.junit, None)
    emit(result, opts.out)
    return code


def trace_files_in(path: str) -> list[Path]:
    from compilediag.trace.parse import trace_files

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


def read_traces(
    paths: list[str],
    target: TargetInfo,
    job: JobRun | None = None,
    save: list[RankDigest] | None = None,
) -> Report:
    """The report on every trace file under `paths` (each rank's) and every digest file
    among them, with a progress bar for big inputs."""
    from compilediag.analysis.ranks.fold import report_from_files

    files = [f for path in paths for f in trace_files_in(path)]
    total = sum(f.stat().st_size for f in files)
    if total > 20_000_000 and show_progress():
        from rich.progress import Progress

        with Progress(transient=True) as progress:
            task = progress.add_task(f"reading {len(files)} trace file(s)", total=total)
            report = report_from_files(
                files, target, job, lambda f: progress.advance(task, f.stat().st_size), save
            )
    else:
        report = report_from_files(files, target, job, save=save)
    if not report.trace or not report.trace.records:
        raise UsageError(
            f"{' '.join(paths)} is not a PyTorch structured trace (no records found).",
            hint="Point at the folder TORCH_TRACE wrote.",
        )
    return report
