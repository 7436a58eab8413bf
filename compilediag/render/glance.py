"""The first screen of a multi-rank run (#58): each rank's step and whom it waits for in its
collectives, ranks alike folded into one line, the straggler with its loop's line, one-off
costs, what to do first. Shared by the table, the markdown and the HTML."""

from __future__ import annotations

from compilediag.analysis.step.other_work import work_cost
from compilediag.render import ms, seconds
from compilediag.report.model import Report
from compilediag.report.vocabulary import Finding, StepsAt
from compilediag.report.words import short_name, work_when

# how the ranks' waits were measured (runtime.wait_method), and what that cost
WAIT_METHODS = {
    "durations": (
        "each rank's wait in the window's steps, from torch's Flight Recorder: NCCL's own "
        "device time of each collective (TORCH_NCCL_ENABLE_TIMING=1, which compilediag run "
        "sets; no measurable cost: 1.00x the untimed job's step on 2 H200s, 4 alternated "
        "pairs of 0.88-1.14x, bench/results/gpu_waits), read once after the window"
    ),
    "arrivals": (
        "each rank's wait in the window's steps, from torch's Flight Recorder: when each "
        "rank enqueued each collective (one clock on one machine), read once after the "
        "window: nothing added to its steps"
    ),
}

GLANCE_SAME = 0.1  # ranks whose steps and waits are within this share are one line


def rank_glance(report: Report) -> list[str]:
    """The first screen of a multi-rank run: each rank's step and whom it waits for in its
    collectives, ranks alike folded into one line; the rank the others wait for with the
    line of its loop that takes longest; one-off costs (evaluation, checkpoint, the slowest
    compile); what to do first. [] where the run measured fewer than two ranks' steps."""
    r = report.runtime
    if r is None or len(r.rank_steps) < 2:
        return []
    a, z = r.window or [0, 0]
    out = [f"the step on {len(r.rank_steps)} ranks (steps {a}-{z}, each rank's wait in them):"]
    # the straggler (a finding: the others wait for it, and one part of its step is longer)
    found = r.stragglers[0] if r.stragglers else None
    slow = next(
        (s.rank for s in r.rank_steps if found and found.text.startswith(f"rank {s.rank} ")), None
    )  # fmt: skip
    groups: list[list] = []
    for s in sorted(r.rank_steps, key=lambda s: s.rank):
        for g in groups:
            first = g[0]
            if (
                first.waits_for == s.waits_for
                and s.rank != slow
                and first.rank != slow
                and (
                    abs(s.breakdown.call_ms - first.breakdown.call_ms)
                    <= GLANCE_SAME * first.breakdown.call_ms
                )
            ):
                g.append(s)
                break
        else:
            groups.append([s])
    out += [f"  {_glance_row(g, slow, found)}" for g in groups]
    out += _one_off(report)
    fix = next((d.fix for d in r.stragglers if d.fix), "")
    if fix:
        out.append(f"  first: {fix}")
    return out


def _glance_row(group: list, slow: int | None, found: Finding | None) -> str:
    ranks = [s.rank for s in group]
    who = f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
    said = f"{who}: a step of {_span([s.breakdown.call_ms for s in group])}"
    waits = [s.breakdown.communication_wait_ms or 0.0 for s in group]
    if group[0].waits_for is not None:
        said += f"; waits for rank {group[0].waits_for} {_span(waits)} of it"
    elif group[0].breakdown.communication_wait_ms is not None:
        said += "; waits for nobody"
    if group[0].rank == slow and found is not None:  # the straggler's line, as the finding says
        line = next(
            (x for x in group[0].loop if (x.file, x.line) == (found.file, found.line)), None
        )
        if line is not None:
            said += f"; the others wait for it: {line.named} takes {ms(line.ms)} a step"
    return said


def _span(values: list[float]) -> str:
    """`4.76-14.3 ms`, or one figure where they agree to 0.05 ms."""
    lo, hi = min(values), max(values)
    if hi - lo < 0.05:
        return ms(hi)
    a, b = ms(lo), ms(hi)
    return f"{a.removesuffix(' ms')}-{b}" if a.endswith(" ms") and b.endswith(" ms") else f"{a}-{b}"


def _one_off(report: Report) -> list[str]:
    """Costs outside the training step that hold the job: its other work and the slowest
    rank's compile."""
    r = report.runtime
    said = []
    last = r.steps if r is not None and r.steps_at == StepsAt.OPTIMIZER else 0
    for w in r.other_work if r is not None else []:
        where_ = f" on rank {w.ranks[0]}" if len(w.ranks) == 1 else ""
        when = work_when(w.steps, w.between_steps, last).replace(" (", ": ", 1)
        name = short_name(w.function)
        said.append(
            f"{w.kind} {name} ({w.file.rsplit('/', 1)[-1]}:{w.line}){where_}, {when}, "
            f"{work_cost(w)}"
        )
    spread = report.summary.per_rank.get("compile_time_s")
    if spread is not None and spread.max_rank:
        said.append(f"the slowest compile: {spread.max_rank}, {seconds(spread.max)}")
    return [f"  one-off: {'; '.join(said)}"] if said else []
