"""The Report's timings from the worker's measurements, and where a compiled call's time
goes (each graph, the eager code around it, the break that caused it)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from compilediag.harness.worker_types import Profiled, WorkerResult
from compilediag.paths import where
from compilediag.report.model import Breakdown, Report, Timings
from compilediag.report.numerics import PASSING
from compilediag.report.vocabulary import Bound, Finding, FindingKind, Severity

if TYPE_CHECKING:
    from compilediag.harness.threads import Trust


# wall time per call this much above the GPU's busy time: the CPU is what the call waits on
CPU_BOUND_RATIO = 1.5


def bound(wall_ms: float, device_ms: float) -> Bound:
    return Bound.CPU if wall_ms > CPU_BOUND_RATIO * device_ms else Bound.GPU


def attribute_time(report: Report, p: Profiled) -> None:
    """Each graph's time per call, and the eager time around it, given to the graph break
    that ended it (the region of the last graph has no break: its time is the call's own);
    the breaks then rank by the time they cost.

    The profiler's own overhead stretches every part a little: the parts are its shares
    of the profiled call, applied to the timed call (the compiled median), so they add up
    to the time the report measured."""
    timed = (
        report.timings.compiled_ms.median if report.timings and report.timings.compiled_ms else None
    )
    scale = timed / p.call_ms if timed and p.call_ms else 1.0
    regions = {r.compile_id: r for r in p.regions}
    # run's window times each backward graph; explain --train times the backward whole
    per_graph = any(r.backward_ms or r.backward_gap_ms for r in p.regions)
    for g in report.graphs:
        r = regions.get(g.compile_id)
        if r is not None:
            g.time_ms, g.eager_ms = round(r.graph_ms * scale, 6), round(r.gap_ms * scale, 6)
            if per_graph:
                g.backward_ms = round(r.backward_ms * scale, 6)
                g.backward_eager_ms = round(r.backward_gap_ms * scale, 6)
    given: set[str] = set()  # a region's time goes to one finding (a break chain is one)
    for b in report.graph_breaks:
        mine = [c for c in b.compile_ids if c in regions and c not in given]
        given.update(mine)
        # the eager code after the graph, and in training its backward
        backward = sum(regions[c].backward_gap_ms for c in mine)
        lost = sum(regions[c].gap_ms for c in mine) + backward
        if mine:
            b.time_lost_ms = round(lost * scale, 6)
            b.backward_lost_ms = round(backward * scale, 6) if per_graph else None
            b.time_lost_share = round(lost / p.call_ms, 4) if p.call_ms else None
    report.graph_breaks.sort(key=lambda b: -(b.time_lost_ms or 0.0))
    if report.timings is not None:
        parts = breakdown_of(p, scale)
        # a region no break ended (the last graph's, one with no break): its time outside
        # its graph is the call's own (the runtime wrapper, the code to the return), not
        # Python between two graphs; "between them" is then the breaks' time, as they say
        own = sum(r.gap_ms for r in p.regions if r.compile_id not in given) * scale
        parts.between_graphs_ms = round(parts.between_graphs_ms - own, 6)
        parts.in_call_ms = round(parts.in_call_ms + own, 6)
        _eager_rest(report, parts, set(regions), per_graph)
        report.timings.breakdown = parts


def _eager_rest(report: Report, parts: Breakdown, ran: set[str], per_graph: bool) -> None:
    """A break torch could not resume after, in a graph the window ran: the rest of its
    function ran in eager mode inside the compiled calls (their own time, where Dynamo's
    guard checks are too: a look's LSTM, 51 ms of a 143 ms step, read as "Dynamo's guard
    checks and its code around the graphs"), and its backward outside the graphs."""
    rest = next(
        (b for b in report.graph_breaks if b.skipped_rest and ran & set(b.compile_ids)), None
    )
    if rest is None or not parts.in_call_ms:
        return
    parts.eager_rest = f"{rest.skipped_rest} after {where(rest.file, rest.line)}"
    if per_graph and parts.backward_ms:
        graphs = sum(g.backward_ms or 0.0 for g in report.graphs)
        outside = parts.backward_ms - graphs - parts.backward_hooks_ms
        parts.eager_backward_ms = round(max(0.0, outside), 6)
    lost = parts.in_call_ms + (parts.eager_backward_ms or 0.0)  # the break's cost, ranked by
    rest.time_lost_ms = round(lost, 6)
    rest.backward_lost_ms = parts.eager_backward_ms
    rest.time_lost_share = round(lost / parts.call_ms, 4) if parts.call_ms else None
    report.graph_breaks.sort(key=lambda b: -(b.time_lost_ms or 0.0))


def breakdown_of(p: Profiled, scale: float = 1.0) -> Breakdown:
    """The profiled step's parts, scaled to the timed call (1: as profiled)."""
    return Breakdown(
        call_ms=round(p.call_ms * scale, 6),
        in_graphs_ms=round(sum(r.graph_ms for r in p.regions) * scale, 6),
        between_graphs_ms=round(sum(r.gap_ms for r in p.regions) * scale, 6),
        outside_ms=round(p.outside_ms * scale, 6),
        calls=p.calls,
        profiled_call_ms=round(p.call_ms, 6),
        backward_ms=round(p.backward_ms * scale, 6),
        optimizer_ms=round(p.optimizer_ms * scale, 6),
        data_ms=round(p.data_ms * scale, 6),
        evaluation_ms=round(p.evaluation_ms * scale, 6),
        wrapper=p.wrapper,
        hooks_ms=round(p.hooks_ms * scale, 6),
        module_ms=round(p.module_ms * scale, 6),
        backward_hooks_ms=round(p.backward_hooks_ms * scale, 6),
        in_call_ms=round(p.in_call_ms * scale, 6),
    )


def timings_of(worker: WorkerResult) -> Timings | None:
    if worker.first_call_s is None:
        return None
    t = Timings(first_call_s=worker.first_call_s, mutated_inputs=list(worker.mutated_inputs))
    check = worker.output_check
    if check is not None:
        t.max_abs_err = check.max_abs_err
        t.max_rel_err = check.max_rel_err
        # judged against float64 where the run did (random numbers and eager's rounding
        # pass), else within the dtype's tolerance
        n = worker.numerics
        t.outputs_match = n.verdict in PASSING if n is not None else not check.mismatch
    m = worker.timings
    if m:
        t.eager_ms = m.eager_ms
        t.compiled_ms = m.compiled_ms
        t.device_ms = m.device
        t.bound = bound(m.compiled_ms.median, m.device.compiled_ms) if m.device else None
        t.speedup = m.speedup
        t.repeat = m.repeat
        t.warmup = m.warmup
        t.calls_per_block = m.calls_per_block
        t.method = m.method
        t.noise = m.noise
    return t


def with_trust(report: Report, trust: Trust | None) -> Report:
    """The report (a new one) with what stands behind its timings: the threads they ran
    with, who chose them and the load beside the run (Timings), and a note where
    compilediag changed the count or the one-thread cross-check flags a figure
    (timing_notes)."""

    t = report.timings
    if trust is None or trust.threads is None or t is None or t.eager_ms is None:
        return report
    th, load = trust.threads, trust.threads.load
    timings = replace(
        t,
        threads=th.used,
        threads_default=th.default,
        threads_set_by=th.set_by,
        cores=load.cores if load else 0,
        load=round(load.beside, 2) if load else None,
    )
    return replace(report, timings=timings, notes=[*report.notes, *timing_notes(trust)])


def trusted_speedup(report: Report) -> tuple[float | None, str]:
    """The speed-up where the timings can be trusted, else None and why not (their noise:
    blocks that spread, a figure far off its one-thread cost)."""
    t = report.timings
    if t is not None and t.noise:
        return None, t.noise
    return report.summary.speedup, ""


UNRELIABLE = "timings not reliable: "  # a figure's flag, said once (render's noise_once)


def timing_notes(trust: Trust) -> list[Finding]:
    """What compilediag changed for the timing (fewer threads for busy cores), and each
    figure the one-thread cross-check flags (its cause and fix)."""
    notes = []
    th = trust.threads
    if th is not None and th.set_by == "compilediag":
        seen = f" ({th.load.words()})" if th.load else ""
        notes.append(
            Finding(
                FindingKind.TIMING_THREADS,
                f"timed with {th.used} thread{'s' * (th.used != 1)}, not torch's "
                f"{th.default}: the cores were busy{seen}, and a thread that waits on a busy "
                "core makes every call wait. The compile was torch's own, with its threads.",
                fix="set OMP_NUM_THREADS=N to time with N threads: compilediag never "
                "changes a count you set.",
            )
        )
    for flag in trust.flags:
        notes.append(
            Finding(FindingKind.UNRELIABLE_TIMING, f"{UNRELIABLE}{flag}.", Severity.WARNING)
        )
    return notes
