"""Several ranks of one job: a report per rank, and where ranks diverge.

A rank that breaks, recompiles or compiles differently from the others is a known cause of
distributed hangs (its collectives no longer line up), so a difference is a finding.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from compilediag.analysis.build import build_report
from compilediag.report import Environment, RankSummary, Report, TargetInfo
from compilediag.trace import TraceLog
from compilediag.worker_types import WorkerResult

if TYPE_CHECKING:
    from compilediag.analysis.runtime import JobRun


def rank_summaries(logs: list[TraceLog], target: TargetInfo) -> list[RankSummary]:
    out = []
    seen = Counter(log.rank for log in logs)
    for log in logs:
        r = build_report([log], WorkerResult(environment=Environment(source="trace")), target)
        name = os.path.basename(log.path)
        # a rank two files claim (or none claims) is told apart by its file
        label = f"rank {log.rank}" if log.rank is not None and seen[log.rank] == 1 else (
            f"rank {log.rank} ({name})" if log.rank is not None else name
        )  # fmt: skip
        out.append(
            RankSummary(
                rank=log.rank,
                label=label,
                file=log.path,
                summary=r.summary,
                break_sites=sorted(
                    f"{os.path.basename(b.file)}:{b.line} {b.code}: {b.reason}"
                    for b in r.graph_breaks
                ),
                recompile_reasons=sorted({f"{x.frame}: {x.failed_guard}" for x in r.recompiles}),
                collectives=collective_schedule(log),
                graph_order=graph_order(log),
                caches=dict(r.compile_time.caches) if r.compile_time else {},
            )
        )
    return out


def collective_schedule(log: TraceLog) -> list[str]:
    """Inductor's `inductor_collective_schedule` of each graph, in compile order."""
    out = []
    for c in log.ordered():
        for payload in c.artifacts.get("inductor_collective_schedule", []):
            try:
                ops = json.loads(payload)
            except ValueError:
                continue
            names = [str(op).removesuffix(".default").rsplit(".", 1)[-1] for op in ops]
            out.append(f"{c.id.frame}/{c.id.frame_compile}: " + ", ".join(names))
    return out


def graph_order(log: TraceLog) -> list[str]:
    """The order the rank ran its graphs in: the last `graph_execution` artifact (torch logs
    it, outside any compile, under torch._inductor.debug.record_and_log_graph_execution_order())."""
    payloads = log.outside.graph_execution + [
        p for c in log.ordered() for p in c.artifacts.get("graph_execution", [])
    ]
    for payload in reversed(payloads):
        try:
            order = json.loads(payload).get("graph_execution_order", [])
        except (ValueError, AttributeError):
            continue
        return [str(x.get("compile_id", x)) if isinstance(x, dict) else str(x) for x in order]
    return []


def divergence(ranks: list[RankSummary]) -> list[str]:
    if len(ranks) < 2:
        return []
    found: list[str] = []
    metrics: list[tuple[str, Callable[[RankSummary], int]]] = [
        ("graph-break sites", lambda r: r.summary.unique_graph_breaks),
        ("recompiles", lambda r: r.summary.recompiles),
        ("graphs", lambda r: r.summary.graphs),
    ]
    for name, get in metrics:
        values = {r.label: get(r) for r in ranks}
        if len(set(values.values())) > 1:
            common = Counter(values.values()).most_common(1)[0][0]
            odd = ", ".join(f"{k}: {v}" for k, v in values.items() if v != common)
            found.append(f"{name} differ: {odd} (the others: {common})")
    for attr, what in (("break_sites", "breaks at"), ("recompile_reasons", "recompiles for")):
        counts = Counter(x for r in ranks for x in getattr(r, attr))
        for item, n in counts.items():
            if n < len(ranks):
                having = [r.label for r in ranks if item in getattr(r, attr)]
                found.append(f"only {', '.join(having)} {what} {item}")
    # the divergences that hang a job: collectives in another order, graphs run in another
    # order, a rank that compiled while the others hit the cache (it arrives late)
    sequences: list[tuple[str, Callable[[RankSummary], object]]] = [
        ("collective schedules", lambda r: r.collectives),
        ("graph execution order", lambda r: r.graph_order),
        # hit on one rank and compiled on another (counts alone differ with the graphs)
        ("FX-graph cache use", lambda r: cache_state(r.caches)),
    ]
    for name, seq in sequences:
        groups: dict[str, list[str]] = {}
        for r in ranks:
            groups.setdefault(repr(seq(r)), []).append(r.label)
        if len(groups) > 1:
            sides = "; ".join(
                f"{', '.join(labels)}: {_short(value)}" for value, labels in groups.items()
            )
            found.append(f"{name} differ: {sides}")
    times = [r.summary.compile_time_s for r in ranks]
    median = statistics.median(times)
    for r in ranks:
        if (
            median > 0
            and abs(r.summary.compile_time_s - median) > 0.5 * median
            and abs(r.summary.compile_time_s - median) > 1.0
        ):
            found.append(
                f"{r.label} compiled for {r.summary.compile_time_s:.1f} s, the median rank {median:.1f} s"
            )
    return found


def cache_state(caches: dict[str, int]) -> str:
    hit, miss = caches.get("fx_graph_cache_hit", 0), caches.get("fx_graph_cache_miss", 0)
    return {(True, False): "all hits", (False, True): "all compiled", (True, True): "mixed"}.get(
        (hit > 0, miss > 0), "no cache"
    )


def _short(value: str, limit: int = 160) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def report_from_traces(
    logs: list[TraceLog], target: TargetInfo, run: JobRun | None = None
) -> Report:
    """The explain report from traces alone: every rank's findings, plus per-rank views.
    Files with no trace record in them (an empty log, an unrelated text file) are not
    ranks: they are listed as ignored."""
    ignored = [log.path for log in logs if not log.records]
    logs = [log for log in logs if log.records]
    versions = {c.metrics.pytorch_version for log in logs for c in log.compiles.values()} | {
        log.outside.torch_version for log in logs
    }
    env = Environment(
        source="trace",
        torch=", ".join(sorted(versions - {""})) or "(version not in the trace)",
        files=len(logs),
    )
    report = build_report(logs, WorkerResult(environment=env), target, run=run)
    if len(logs) > 1:
        report.ranks = rank_summaries(logs, target)
        report.divergence = divergence(report.ranks)
    if report.trace is not None:
        report.trace.ignored_files = [os.path.basename(p) for p in ignored]
    if ignored:
        report.notes.append(
            f"ignored {len(ignored)} file(s) with no trace record: "
            + ", ".join(os.path.basename(p) for p in ignored)
        )
    skipped = sum(log.skipped_lines for log in logs)
    if skipped:
        report.notes.append(
            f"{skipped} unreadable lines were skipped (a truncated or damaged trace?)."
        )
    damaged = sum(log.damaged_payloads for log in logs)
    if damaged:
        report.notes.append(
            f"{damaged} records were skipped because their payload is damaged (its md5 is "
            "not the one torch wrote): the trace was cut or altered after it was written."
        )
    return report
