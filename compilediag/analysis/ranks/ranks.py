"""Several ranks of one job: a report per rank, and where ranks diverge.

A rank that breaks, recompiles or compiles differently from the others is a known cause of
distributed hangs (its collectives no longer line up), so a difference is a finding.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compilediag.analysis.recompiles.recompiles import guard_head
from compilediag.report.model import RankSummary
from compilediag.report.ranksets import rank_set
from compilediag.report.vocabulary import Finding, FindingKind, Severity
from compilediag.trace.compiles import id_of, unranked
from compilediag.trace.formats import guard_pattern

if TYPE_CHECKING:
    from compilediag.analysis.history import History
    from compilediag.report.model import Report


def collective_schedule(h: History) -> list[str]:
    """Inductor's `inductor_collective_schedule` of each graph, in compile order."""
    out = []
    for c in (e.compile for e in h):
        for payload in c.artifacts.get("inductor_collective_schedule", []):
            try:
                ops = json.loads(payload)
            except ValueError:
                continue
            names = [str(op).removesuffix(".default").rsplit(".", 1)[-1] for op in ops]
            out.append(f"{c.id.frame}/{c.id.frame_compile}: " + ", ".join(names))
    return out


def graph_order(h: History) -> list[str]:
    """The order the rank ran its graphs in: the last `graph_execution` artifact (torch logs
    it, outside any compile, under torch._inductor.debug.record_and_log_graph_execution_order())."""
    for payload in reversed(h.graph_execution):
        try:
            order = json.loads(payload).get("graph_execution_order", [])
        except (ValueError, AttributeError):
            continue
        return [str(x.get("compile_id", x)) if isinstance(x, dict) else str(x) for x in order]
    return []


def divergence(ranks: list[RankSummary]) -> list[Finding]:
    """Where ranks differ, the odd ranks named first (in few words, however many ranks)."""
    if len(ranks) < 2:
        return []
    return [
        *_counts_differ(ranks),
        *_on_some_ranks(ranks),
        *_orders_differ(ranks),
        *_slow_compiles(ranks),
    ]


def _warning(kind: FindingKind, text: str) -> Finding:
    return Finding(kind, text, Severity.WARNING)


def _counts_differ(ranks: list[RankSummary]) -> list[Finding]:
    """Break sites, recompiles and graphs counted differently on some ranks (recompiles and
    graphs only where the ranks' calls did not change alike)."""
    found: list[Finding] = []
    metrics: list[tuple[str, Callable[[RankSummary], int]]] = [
        ("graph-break sites", lambda r: r.summary.unique_graph_breaks),
    ]
    same_changes = len({frozenset(_changed(r)) for r in ranks}) == 1
    first_graphs = {r.summary.graphs - r.summary.recompiles for r in ranks}
    if not same_changes:
        # the same guards failing as often as the data made them is no divergence
        metrics.append(("recompiles", lambda r: r.summary.recompiles))
    if not same_changes or len(first_graphs) > 1:  # graphs beyond the recompiles' own
        metrics.append(("graphs", lambda r: r.summary.graphs))
    for name, get in metrics:
        values = [get(r) for r in ranks]
        if len(set(values)) > 1:
            common = Counter(values).most_common(1)[0][0]
            odd = "; ".join(
                f"{rank_set(ranks, members)}: {value}"
                for value, members in _by_value(values).items()
                if value != common
            )
            found.append(
                _warning(FindingKind.RANK_COUNTS, f"{name} differ: {odd} (the others: {common})")
            )
    return found


def _on_some_ranks(ranks: list[RankSummary]) -> list[Finding]:
    """A break site or a recompile's guard that only some ranks have."""
    found: list[Finding] = []
    # (one rank, several ranks)
    verbs = {
        "break_sites": (FindingKind.RANK_BREAKS, "breaks at", "break at"),
        "recompile_reasons": (FindingKind.RANK_RECOMPILES, "recompiles for", "recompile for"),
    }
    for attr, (kind, one, many) in verbs.items():
        having: dict[str, list[int]] = {}
        shown: dict[str, str] = {}  # a recompile's guard kind -> one rank's words for it
        for i, r in enumerate(ranks):
            for item in getattr(r, attr):
                key = guard_pattern(item) if attr == "recompile_reasons" else item
                shown.setdefault(key, item)
                if i not in having.setdefault(key, []):
                    having[key].append(i)
        everywhere = set.intersection(*(set(_changed(r)) for r in ranks))
        for key, members in having.items():
            item = shown[key]
            if attr == "recompile_reasons" and changed_key(item) in everywhere:
                continue  # every rank's calls changed it (on some, behind another guard)
            if len(members) < len(ranks):
                who = rank_set(ranks, members)
                verb = one if len(members) == 1 else many
                found.append(
                    _warning(
                        kind, f"{'' if who.startswith('all but') else 'only '}{who} {verb} {item}"
                    )
                )
    return found


def _orders_differ(ranks: list[RankSummary]) -> list[Finding]:
    """The divergences that hang a job: collectives in another order, graphs run in another
    order, a rank that compiled while the others hit the cache (it arrives late)."""
    found: list[Finding] = []
    sequences: list[tuple[FindingKind, str, Callable[[RankSummary], object]]] = [
        (FindingKind.COLLECTIVES, "collective schedules", lambda r: r.collectives),
        (FindingKind.GRAPH_ORDER, "graph execution order", lambda r: r.graph_order),
        # hit on one rank and compiled on another (counts alone differ with the graphs)
        (FindingKind.CACHE_USE, "FX-graph cache use", lambda r: cache_state(r.caches)),
    ]
    for kind, name, seq in sequences:
        groups = _by_value([repr(seq(r)) for r in ranks])
        if len(groups) > 1:
            # the most common value last: the odd ranks first
            ordered = sorted(groups.items(), key=lambda kv: len(kv[1]))
            sides = "; ".join(
                f"{rank_set(ranks, members)}: {_short(value)}" for value, members in ordered
            )
            found.append(_warning(kind, f"{name} differ: {sides}"))
    return found


def _slow_compiles(ranks: list[RankSummary]) -> list[Finding]:
    """Ranks whose compile took far from the median rank's (a late rank holds the others)."""
    found: list[Finding] = []
    times = [r.summary.compile_time_s for r in ranks]
    median = statistics.median(times)
    # a rank that compiled longer holds the others at their first collective; one that
    # compiled less (its cache warm, its evaluation's graphs left out) holds nobody
    slow = [i for i, t in enumerate(times) if median > 0 and t - median > max(0.5 * median, 1.0)]
    if slow:
        span = sorted(times[i] for i in slow)
        took = f"{span[0]:.1f} s" if len(slow) == 1 else f"{span[0]:.1f}-{span[-1]:.1f} s"
        slowest = max(slow, key=lambda i: times[i])
        steady = [i for i in range(len(ranks)) if i not in slow]
        typical = min(steady, key=lambda i: abs(times[i] - median)) if steady else None
        found.append(
            _warning(
                FindingKind.COMPILE_TIME,
                f"{rank_set(ranks, slow)} compiled for {took}, the median rank {median:.1f} s"
                + skew_words(max(span) - median)
                + (
                    _compiled_more(ranks[slowest], ranks[typical], len(slow) > 1)
                    if typical is not None and times[slowest] > median
                    else ""
                ),
            )
        )
    return found


GRAPHS_NAMED = 3  # places of the slow rank's own graphs named; the rest counted


def _compiled_more(slow: RankSummary, typical: RankSummary, several: bool) -> str:
    """What the slow rank compiled that a rank of the median's time did not (graphs, by
    place, the costliest places first: their compile ids may differ), and its FX-graph
    cache misses beside that rank's; '' where neither differs."""
    who, other = _label(slow), _label(typical)
    said = []
    extra = Counter(g.place for g in slow.graphs) - Counter(g.place for g in typical.graphs)
    if extra:
        left = dict(extra)
        by_place: dict[str, list[float]] = {}
        for g in reversed(slow.graphs):  # the last compiles at a place: the other's lacked
            if left.get(g.place, 0) > 0:
                left[g.place] -= 1
                by_place.setdefault(g.place, []).append(g.compile_s)
        count = sum(len(s) for s in by_place.values())
        seconds = sum(sum(s) for s in by_place.values())
        places = sorted(by_place.items(), key=lambda kv: -sum(kv[1]))
        named = ", ".join(
            f"{f'{len(s)}× ' if len(s) > 1 else ''}{place} {sum(s):.1f} s"
            for place, s in places[:GRAPHS_NAMED]
        )
        if len(places) > GRAPHS_NAMED:
            named += f" and {len(places) - GRAPHS_NAMED} places more"
        said.append(
            f"{'the slowest, ' if several else ''}{who} compiled {count} "
            f"graph{'s' if count > 1 else ''} {other} did not ({seconds:.1f} s: {named})"
        )
    misses = slow.caches.get("fx_graph_cache_miss", 0)
    theirs = typical.caches.get("fx_graph_cache_miss", 0)
    if misses > theirs:
        hits = typical.caches.get("fx_graph_cache_hit", 0)
        whose = "its" if said else f"{'the slowest, ' if several else ''}{who}'s"
        # where both compiled the same graphs and the other hit: its cache held what this
        # one's lacked
        why = "" if extra else f": entries its cache had and {who}'s did not"
        said.append(
            f"{whose} FX-graph cache missed {misses} time{'s' if misses > 1 else ''}, "
            f"{other}'s {theirs}" + (f" ({other} hit {hits}{why})" if hits else "")
        )
    return "".join(f"; {s}" for s in said)


def _label(r: RankSummary) -> str:
    return r.label or f"rank {r.rank}"


@dataclass
class EvaluationGraphs:
    """A rank's graphs its evaluation alone called (evaluation_notes words them)."""

    label: str  # the rank
    work: str  # the evaluation's name
    graphs: str  # their compile ids, without the rank
    seconds: float  # their compile time
    recompiled: str  # how the training graph and the evaluation's came to recompile, or ''


def without_evaluation(
    r: RankSummary, own: Report, graphs: set[str], work: str
) -> tuple[RankSummary, EvaluationGraphs | None]:
    """The rank as its training steps compiled it: the graphs its evaluation alone called
    (`graphs`, compile ids), and each recompile of a frame that has one training graph left
    (the training graph recompiled only because evaluation compiled the frame first, or
    the other way round), left out; and a note of what was left out. `work`: the
    evaluation's name."""
    ids = {g.compile_id for g in own.graphs if unranked(g.compile_id) in graphs}
    if not ids:
        return r, None
    training: Counter[int] = Counter()
    for g in own.graphs:
        cid = id_of(g.compile_id)
        if g.compile_id not in ids and cid is not None:
            training[cid.frame] += 1

    def for_evaluation(compile_id: str) -> bool:
        cid = id_of(compile_id)
        return compile_id in ids or (cid is not None and training[cid.frame] <= 1)

    dropped = [x for x in own.recompiles if for_evaluation(x.compile_id)]
    kept = [x for x in own.recompiles if not for_evaluation(x.compile_id)]
    seconds = sum(g.compile_time_s or 0.0 for g in own.graphs if g.compile_id in ids)
    # its compile time as its training steps made it: the evaluation's graphs' seconds
    # are the evaluation's cost (said in the note), not a skew between ranks
    summary = dataclasses.replace(
        r.summary, graphs=r.summary.graphs - len(ids),
        recompiles=max(0, r.summary.recompiles - len(dropped)),
        compile_time_s=max(0.0, r.summary.compile_time_s - seconds),
    )  # fmt: skip
    # its FX-graph cache use as its training graphs made it (the evaluation's graph a miss
    # on the one rank that runs it is no difference between the ranks' training)
    caches = dict(r.caches)
    for rg in r.graphs:
        if rg.compile_id in ids:
            for key, n in (
                ("fx_graph_cache_hit", rg.fx_hits),
                ("fx_graph_cache_miss", rg.fx_misses),
            ):
                if key in caches:
                    caches[key] = max(0, caches[key] - n)
    adjusted = dataclasses.replace(
        r, summary=summary, caches=caches,
        recompile_reasons=sorted({f"{x.frame}: {x.failed_guard}" for x in kept}),
        changed=r.changed if kept else [],
        graphs=[g for g in r.graphs if g.compile_id not in ids],
    )  # fmt: skip
    also = "; ".join(sorted({f"{x.frame}: {x.failed_guard}" for x in dropped}))
    # which came first: an evaluation graph that is its frame's first compile made the
    # training graph the recompile, else the training graph's made the evaluation's
    first = any((cid := id_of(x)) is not None and cid.frame_compile == 0 for x in ids)
    how = "and its training graph recompiled after it" if first else "and recompiled for it"
    said = ", ".join(sorted(unranked(x) for x in ids))
    return adjusted, EvaluationGraphs(
        _label(r), work, said, seconds, f"{how} ({also})" if also else ""
    )


def evaluation_notes(found: list[EvaluationGraphs], ranks: int) -> list[Finding]:
    """Each rank's evaluation graphs in words, said once for the ranks whose evaluation ran
    the same graphs the same way: every rank's (none waits for another's compile), or
    those ranks' (the others wait for them at their first collective after it)."""
    groups: dict[tuple[str, str, str], list[EvaluationGraphs]] = {}
    for e in found:
        groups.setdefault((e.work, e.graphs, e.recompiled), []).append(e)
    notes = []
    for (work, graphs, recompiled), same in groups.items():
        every = len(same) == ranks > 1
        who = f"each of the {ranks} ranks'" if every else " and ".join(
            f"{e.label}'s" for e in same
        )  # fmt: skip
        times = sorted(e.seconds for e in same)
        said = graphs
        if times[-1]:
            took = (
                f"{times[0]:.2f} s"
                if times[0] == times[-1]
                else f"{times[0]:.2f}-{times[-1]:.2f} s"
            )
            said += f" (compiled in {took}" + (
                ")" if every else ", which the other ranks wait for at their first collective after it)"
            )  # fmt: skip
        plural = "s" if "," in graphs else ""
        notes.append(Finding(
            FindingKind.EVALUATION_GRAPHS,
            f"{who} {work} runs graph{plural} {said} that no training step calls"
            + (f", {recompiled}" if recompiled else "")
            + ": left out of the comparison of ranks, their graphs and their compile time (not "
            "a divergence; their training steps compiled alike)",
        ))  # fmt: skip
    return notes


# torch.distributed's default timeout for a collective (NCCL's since 2.2, and gloo's)
COLLECTIVE_TIMEOUT_S = 600


def skew_words(skew_s: float) -> str:
    """What a rank that compiles longer does to the others: they wait for it at their first
    collective; near the process group's timeout, the job dies there."""
    said = f": the other ranks wait {skew_s:.1f} s for it at their first collective"
    if skew_s >= COLLECTIVE_TIMEOUT_S / 4:
        said += (
            f", {skew_s / COLLECTIVE_TIMEOUT_S:.0%} of torch.distributed's default "
            f"{COLLECTIVE_TIMEOUT_S // 60}-minute timeout (init_process_group(timeout=...) "
            "raises it; a warm cache on every rank shortens the compile)"
        )
    return said


def _changed(r: RankSummary) -> set[str]:
    """What a rank's recompiling calls changed, without values; from its recompile reasons
    where the summary predates the field."""
    return set(r.changed) or {changed_key(x) for x in r.recompile_reasons}


def changed_key(reason: str) -> str:
    """`forward: input_ids` of the reason `forward: input_ids dim 1 changed 37 → 35`."""
    frame, _, words = reason.rpartition(": ")
    return f"{frame}: {guard_head(words)}"


def _guard_kinds(r: RankSummary) -> set[str]:
    """A rank's recompiles by frame and failed guard, its values blanked (`dim 1 changed
    37 -> 35` and `40 -> 36` are one kind: the ranks saw other data)."""
    return {guard_pattern(reason) for reason in r.recompile_reasons}


def same_guards_other_values(ranks: list[RankSummary]) -> list[Finding]:
    """Ranks whose recompiles failed the same guards with their own values (each rank saw
    its own batches): one note with each rank's values, not a divergence."""
    if len(ranks) < 2 or len({frozenset(_guard_kinds(r)) for r in ranks}) > 1:
        return []
    notes = []
    for kind in sorted(_guard_kinds(ranks[0])):
        values = _by_value(
            ["; ".join(x for x in r.recompile_reasons if guard_pattern(x) == kind) for r in ranks]
        )
        if len(values) < 2:
            continue
        sides = [f"{rank_set(ranks, members)}: {_short(v)}" for v, members in values.items()]
        listed = "; ".join(sides[:4]) + (f"; and {len(sides) - 4} more" if len(sides) > 4 else "")
        notes.append(
            Finding(
                FindingKind.RANK_VALUES,
                f"every rank recompiled for the same guard, each with the values of its own "
                f"data (not a divergence): {listed}",
            )
        )
    return notes


def _by_value(values: list) -> dict:
    out: dict = {}
    for i, v in enumerate(values):
        out.setdefault(v, []).append(i)
    return out


def cache_state(caches: dict[str, int]) -> str:
    hit, miss = caches.get("fx_graph_cache_hit", 0), caches.get("fx_graph_cache_miss", 0)
    return {(True, False): "all hits", (False, True): "all compiled", (True, True): "mixed"}.get(
        (hit > 0, miss > 0), "no cache"
    )


def _short(value: str, limit: int = 160) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"
