"""Assemble the Report from parsed traces and the worker's measurements."""

from __future__ import annotations

from collections import Counter
from typing import Any

from compilediag import __version__
from compilediag.analysis.breaks import collect_breaks, parse_break_text
from compilediag.analysis.crosscheck import cross_check
from compilediag.analysis.graphs import collect_graphs, compile_time, cudagraph_skips, frame_name
from compilediag.analysis.kernels import GraphCode, collect_kernels, generated
from compilediag.analysis.recompiles import LIMIT, collect_limit_hits, collect_recompiles
from compilediag.report import Call, Report, Stat, Summary, Timings
from compilediag.trace import Compile, TraceLog


def all_compiles(logs: list[TraceLog]) -> list[Compile]:
    return [c for log in logs for c in log.ordered()]


def build_report(
    logs: list[TraceLog],
    worker: dict[str, Any],
    target: dict[str, Any],
    code: list[GraphCode] | None = None,
) -> Report:
    """`code` is the kernels' source, when the caller already read it (dump-kernels)."""
    compiles = all_compiles(logs)
    code = collect_kernels(compiles) if code is None else code
    breaks, total_breaks = collect_breaks(compiles)
    graphs = collect_graphs(compiles)
    recompiles = collect_recompiles(compiles)
    ctime = compile_time(compiles)
    timings = _timings(worker)
    if timings:
        timings.cudagraph_skips = cudagraph_skips(compiles)
    report = Report(
        tool={"name": "compilediag", "version": __version__},
        environment=worker.get("environment", {}),
        target={**target, "inputs": [", ".join(c) for c in worker.get("inputs", [])]},
        graph_breaks=breaks,
        recompiles=recompiles,
        recompile_limit_hits=collect_limit_hits(compiles, recompiles),
        calls=_calls(worker, compiles),
        notes=skipped_frames(compiles),
        graphs=graphs,
        kernels=generated(code),
        timings=timings,
        compile_time=ctime if compiles else None,
        errors=list(worker.get("errors", [])),
        trace={
            "files": [log.path for log in logs],
            "records": sum(log.records for log in logs),
            "unknown_records": dict(sum((log.unknown for log in logs), Counter())),
            "skipped_lines": sum(log.skipped_lines for log in logs),
        },
    )
    report.summary = Summary(
        graphs=len(graphs),
        graph_breaks=total_breaks,
        unique_graph_breaks=len(breaks),
        recompiles=len(recompiles),
        kernels=sum(k.kind != "extern" for k in report.kernels),
        compile_time_s=round(ctime.total_s, 6),
        speedup=timings.speedup if timings else None,
    )
    if timings:
        timings.notes = speedup_notes(report)
    failure = _compile_failure(worker, compiles)
    if failure:
        report.errors.insert(0, failure)
    if "explain" in worker:
        report.cross_check = cross_check(breaks, worker["explain"])
    return report


def _calls(worker: dict[str, Any], compiles: list[Compile]) -> list[Call]:
    """The sweep's timeline: each compile belongs to the call whose wall window holds it."""
    calls = []
    for c in worker.get("calls", []):
        mine = [
            k for k in compiles
            if c["start"] <= float(k.metrics.get("start_time") or -1) <= c["end"]
        ]  # fmt: skip
        calls.append(
            Call(
                index=c["index"],
                inputs=", ".join(c["inputs"]),
                compiled=bool(mine),
                compile_ids=[k.compile_id for k in mine],
                compile_time_s=sum(
                    float(k.metrics.get("entire_frame_compile_time_s") or 0) for k in mine
                ),
                wall_s=c["wall_s"],
            )
        )
    return calls


def skipped_frames(compiles: list[Compile]) -> list[str]:
    """Frames torch gave up on (they run eager): a break in a loop, the recompile limit."""
    notes = []
    for c in compiles:
        reason = str(c.metrics.get("fail_reason") or "")
        if c.metrics.get("fail_type") != "Unsupported" or LIMIT.search(reason):
            continue  # (the recompile limit has its own post-mortem)
        # the last reason torch chained on is the one that made it give up the frame
        last = reason.split(
            "*** While handling this graph break, another graph break occurred: ***"
        )[-1]
        parsed = parse_break_text("Graph Break Reason: " + last.strip())
        m = c.metrics
        where = f"{m.get('co_filename')}:{m.get('co_firstlineno')}"
        gb = f" ({parsed.gb_id})" if parsed.gb_id else ""
        notes.append(
            f"{frame_name(m.get('co_name', ''))} at {where} was not compiled and runs in eager "
            f"mode: {parsed.reason}{gb}. {parsed.explanation}".strip()
        )
    return notes


def speedup_notes(report: Report) -> list[str]:
    """What explains a disappointing speed-up, from what the report already found."""
    t, s, env = report.timings, report.summary, report.environment
    if t is None or t.speedup is None or t.speedup >= 1.2:
        return []
    notes = []
    if env.get("backend") in ("eager", "aot_eager"):
        notes.append(f"backend {env['backend']} only captures graphs; it does not optimise them.")
    if s.unique_graph_breaks:
        notes.append(
            f"{s.graph_breaks} graph breaks split the model into {s.graphs} graphs, with Python "
            "running between them."
        )
    if s.recompiles:
        notes.append(f"{s.recompiles} recompiles: each is a full compile of its frame.")
    if t.eager_ms and t.eager_ms.median < 0.2:
        notes.append(
            f"eager takes only {t.eager_ms.median:.3f} ms a call: compiled code still pays guard "
            "checks and wrapper overhead per call, so a model this small gains little. Try "
            "realistic sizes, or mode=reduce-overhead (CUDA graphs) on GPU."
        )
    if env.get("backend") == "inductor" and s.kernels <= 1 and not s.unique_graph_breaks:
        notes.append("Inductor generated at most one kernel: there was little to fuse.")
    return notes


def _compile_failure(worker: dict[str, Any], compiles: list[Compile]) -> str | None:
    """One line for a failed torch.compile, at the user line torch blamed where it did."""
    err = worker.get("error") or {}
    if err.get("kind") != "compile":
        return None
    file, line = err.get("file"), err.get("line")
    for c in compiles:
        if c.metrics.get("fail_user_frame_filename"):
            file = c.metrics["fail_user_frame_filename"]
            line = c.metrics.get("fail_user_frame_lineno")
    where = f" at {file}:{line}" if file else ""
    return f"torch.compile failed{where}: {err['message']}"


def _timings(worker: dict[str, Any]) -> Timings | None:
    if "first_call_s" not in worker:
        return None
    t = Timings(first_call_s=worker["first_call_s"])
    check = worker.get("output_check") or {}
    t.max_abs_err = check.get("max_abs_err")
    t.max_rel_err = check.get("max_rel_err")
    if "mismatch" in check:
        t.outputs_match = not check["mismatch"]
    m = worker.get("timings")
    if m:
        t.eager_ms = Stat(**m["eager_ms"])
        t.compiled_ms = Stat(**m["compiled_ms"])
        t.speedup = m["speedup"]
        t.repeat = m["repeat"]
        t.warmup = m.get("warmup", 0)
        t.calls_per_block = m.get("calls_per_block", 1)
        t.method = m["method"]
    return t
