"""The serving section, from what the run measured: the sweep of the stream's distinct
requests (the report's calls and recompiles: torch's own trace), the serving pass's
compiled regions and timings, each plan as it was measured, then the chosen plan's
fresh-process checks. Every figure is a measurement of this run; no plan is chosen that
left a request in eager mode or made more graphs than it bounds."""

from __future__ import annotations

import math

from compilediag.analysis.step import trials
from compilediag.harness.serving.calls import latency
from compilediag.harness.serving.facts import ServingFacts
from compilediag.harness.serving.plans import BUCKETS
from compilediag.harness.serving.stream import distinct, key, once_shapes
from compilediag.harness.serving.verify import VerifyFacts
from compilediag.report.model import Report
from compilediag.report.serving import (
    PLAN_NAMES,
    ColdStart,
    CudaGraphs,
    PaddingCheck,
    Plan,
    Serving,
    StreamCompile,
    StreamLimitHit,
    Unseen,
)

# a plan within this share of a smaller change's median latency is no faster (a request of a
# small model: 0.1 ms, whose plans' figures moved 5-10% between two runs on this machine)
SAME_SPEED = 0.2
COLD_LABELS = ("empty caches", "warm caches", "cache artifacts")


def forecast(report: Report, facts: ServingFacts) -> Serving:
    """What the stream compiles as the user compiles it: each graph with the request that
    made it, the limit's hits with the requests that ran eager, the latencies."""
    fitted, rest = facts.stream[: facts.fit], facts.stream[facts.fit :]
    s = Serving(
        requests=len(facts.stream),
        distinct_shapes=len(facts.distinct),
        replayed=len(facts.distinct),
        repeats_compiled=facts.repeats_compiled,
        fit_requests=facts.fit,
        fit_shapes=len(distinct(fitted)),
        mode=facts.mode,
        names=list(facts.names),
        positions=dict(facts.positions),
    )
    seen = {key(r) for r in fitted}
    s.unseen = Unseen(
        once_shapes(facts.stream), len(facts.stream), once_shapes(fitted), len(fitted),
        len(rest), sum(1 for r in rest if key(r) not in seen),
    )  # fmt: skip
    number = {i: facts.distinct[i] + 1 for i in range(len(facts.distinct))}  # call -> request
    reasons = {r.compile_id: r.failed_guard for r in report.recompiles}
    frames = {g.compile_id: g.frame for g in report.graphs}
    for call in report.calls:
        for cid in call.compile_ids:
            if cid not in frames:
                continue  # an attempt that made no graph (the limit's)
            s.compiles.append(
                StreamCompile(number[call.index], cid, frames[cid], round(call.wall_s, 4),
                              cid in reasons, reasons.get(cid, ""))
            )  # fmt: skip
    s.graphs = len(s.compiles)
    s.recompiles = sum(c.recompile for c in s.compiles)
    # each request that compiled once (one that compiled several frames holds them all)
    s.compile_s = round(sum({c.request: c.seconds for c in s.compiles}.values()), 4)
    eager = _eager_requests(facts)
    for hit in report.recompile_limit_hits:
        at = next((c.index for c in report.calls if hit.compile_id in c.compile_ids), None)
        first = number.get(at, 0) if at is not None else 0
        s.limit_hits.append(
            StreamLimitHit(hit.frame, hit.limit, first, [n for n in eager if n >= first])
        )
    s.eager_latency = latency(facts.eager_ms) if facts.eager_ms else None
    s.compiled_latency = latency(facts.compiled_ms) if facts.compiled_ms else None
    s.plans = [as_is(s, facts, eager)] + facts.plans
    s.plans[0].cuda_graphs = facts.cuda_graphs_replayed
    if facts.cuda_graphs is not None:
        s.cuda_graphs = CudaGraphs(
            report.environment.mode, facts.cuda_graphs, facts.cuda_graphs_replayed
        )
    s.notes = _notes(s, facts)
    return s


def _eager_requests(facts: ServingFacts) -> list[int]:
    """The requests (1-based) no compiled region ran: their shape's first request had none."""
    ran = {key(facts.stream[i]): r for i, r in zip(facts.distinct, facts.regions, strict=False)}
    return [n for n, r in enumerate(facts.stream, 1) if not ran.get(key(r), ["?"])]


def as_is(s: Serving, facts: ServingFacts, eager: list[int]) -> Plan:
    """No change: the stream as the user compiles it, measured as the plans are."""
    from compilediag.harness.serving.plans import full

    # under CUDA graphs every size is a graph to record: each distinct request warms up;
    # of the part of the stream the plans are fitted to
    warm = (
        [i + 1 for i in facts.distinct]
        if facts.cuda_graphs is not None
        else sorted({c.request for c in s.compiles})
    )
    warm = [n for n in warm if n <= facts.fit]
    fitted_ms = facts.compiled_ms[: facts.fit]
    return Plan(
        "as_is", graphs=len({c.compile_id for c in s.compiles if c.request <= facts.fit}),
        compile_s=s.compile_s, eager_requests=sum(1 for n in eager if n <= facts.fit),
        latency=latency(fitted_ms) if fitted_ms else None, warmup=warm,
        warmup_shapes=[full(facts.stream[n - 1], facts.base) for n in warm],
        request_ms=[round(x, 4) for x in fitted_ms],
        reference_ms=[round(x, 4) for x in facts.eager_ms[: facts.fit]],
    )  # fmt: skip


def bounded(plan: Plan, distinct: int, plans: int) -> bool:
    """A plan bounds the compiles: no request left in eager mode, and fewer graphs than the
    distinct shapes it was fitted to (new shapes reuse them), at most BUCKETS. The stream as
    the user compiles it only where it compiled once, or no plan applies: automatic dynamic
    shapes make graphs that depend on the order the sizes come in."""
    if plan.kind == "as_is" and plan.graphs > 1 and plans > 1:
        return False
    return plan.eager_requests == 0 and plan.graphs <= min(BUCKETS, max(1, distinct - 1))


def candidates(s: Serving) -> list[Plan]:
    """The plans that bound the compiles over the part of the stream they were fitted to,
    buckets only where padding kept the outputs: those the held-out part then checks."""
    return [
        p
        for p in s.plans
        if p.latency is not None
        and bounded(p, s.fit_shapes, len(s.plans))
        and not (p.padding is not None and not p.padding.kept)  # padding changed the outputs
    ]


def missed(p: Plan) -> float:
    """The held-out requests the plan's warm-up did not hold (raised, or ran without a CUDA
    graph or recorded one); a check that failed holds nothing, behind every count."""
    if p.held_out is None:
        return 0
    return math.inf if p.held_out.error else p.held_out.missed


def choose(s: Serving) -> Serving:
    """The plan: of those that bound the compiles, the ones whose warm-up held the most of
    the held-out requests; of those, the smallest change unless a later one is faster by
    more than SAME_SPEED over the whole interval of the requests' paired latencies (the
    same requests, in the same order). Buckets only where the padding was measured to keep
    the outputs, or no other plan holds as many. `why_plan` says which and why."""
    good = candidates(s)
    bucket = next((p for p in s.plans if p.kind == "bucket"), None)
    if bucket is not None and bucket.padding is not None:
        s.notes.append(padding_words(bucket.padding))
    if not good:
        s.why_plan = (
            "no plan bounded the compiles: each left requests in eager mode or made a graph "
            "for most shapes"
        )
        return s
    fewest = min(missed(p) for p in good)
    held = [p for p in good if missed(p) == fewest]
    unpadded = [p for p in held if p.kind != "bucket" or padding_kept(p)] or held
    best = unpadded[0]
    for p in unpadded[1:]:
        if _faster(p, best):
            best = p
    s.plan = best
    s.bounded = [p.kind for p in good]
    padded = next((p for p in held if p.kind == "bucket" and p is not best), None)
    s.faster_padded = padded is not None and _faster(padded, best)
    s.why_plan = _why(good, best, faster=best is not unpadded[0], alone=len(held) == 1)
    return s


def padding_kept(p: Plan) -> bool:
    """A bucket plan whose padding was measured to keep the outputs (padding_check.py)."""
    return p.padding is not None and p.padding.kept


def padding_words(c: PaddingCheck) -> str:
    """The padding check in words: kept, or what it changed (then buckets are no plan)."""
    if c.error:
        return f"buckets are no plan here: the model refused a padded request ({c.error})"
    if c.kept:
        return (
            f"padding kept the outputs: each of the {c.requests} distinct requests padded to "
            "its bucket with zeros, run eager, its outputs cut back equal the unpadded ones"
        )
    return (
        f"buckets are no plan here: padding with zeros changed the outputs of {c.changed} of "
        f"{c.requests} distinct requests ({c.worst}): the model does not mask its padding "
        "(a mean over the length, say)"
    )


def _why(good: list[Plan], best: Plan, faster: bool, alone: bool) -> str:
    """Why this plan, from the counts that chose it."""
    name = PLAN_NAMES[best.kind]
    h = best.held_out
    if h is None or not h.requests:
        first = f"{name}: the stream is too short to hold requests out"
    else:
        first = f"{name}: its warm-up held {h.requests - missed(best)} of the {h.requests} held-out requests"
    others = [p for p in good if p is not best]
    if not others:
        return first + "; the only plan that bounds the compiles"
    said = ", ".join(
        f"{PLAN_NAMES[p.kind]} {p.held_out.requests - missed(p)}"
        if p.held_out and p.held_out.requests
        else PLAN_NAMES[p.kind]
        for p in others
    )
    counted = h is not None and h.requests > 0  # (else nothing held out: no counts)
    peers = "that held as many" if counted else "that bound the compiles"
    how = (
        "the only one that held as many"
        if alone and counted
        else f"faster by more than {SAME_SPEED:.0%} than a smaller change {peers}, over "
        "the whole interval of the requests' paired times"
        if faster
        else f"the smallest change of those {peers}"
    )
    return f"{first} (the others: {said}); {how}"


def _faster(p: Plan, than: Plan) -> bool:
    """p's requests beat the other's by more than SAME_SPEED over the whole 95% interval of
    their paired ratios (the same requests timed under each, in order), each request's time
    over the model's in eager beside it where both have those (the plans are measured one
    after another: what the machine did meanwhile cancels); a plan without per-request
    times by its medians."""
    if p.request_ms and len(p.request_ms) == len(than.request_ms):
        mine, theirs = _relative(p), _relative(than)
        effect = trials.effect(list(zip(theirs, mine, strict=True)))
        return effect is not None and effect.high < 1 - SAME_SPEED
    if p.latency is None or than.latency is None:
        return False
    return p.latency.median_ms < (1 - SAME_SPEED) * than.latency.median_ms


def _relative(p: Plan) -> list[float]:
    """Each request's time over its eager reference's (its own time where it has none)."""
    if len(p.reference_ms) != len(p.request_ms):
        return p.request_ms
    return [a / b if b > 0 else a for a, b in zip(p.request_ms, p.reference_ms, strict=True)]


def verified(s: Serving, runs: list[VerifyFacts]) -> Serving:
    """The chosen plan's fresh-process checks, each serving the held-out requests after its
    warm-up: the first under empty caches (the cold start), then warm caches, then torch's
    cache artifacts; verified only where each ran clean."""
    s.warmup = s.plan.warmup_shapes if s.plan else []
    for label, run in zip(COLD_LABELS, runs, strict=False):
        if run.error:
            s.notes.append(f"the check with {label} failed: {run.error}")
            continue
        s.cold_starts.append(
            ColdStart(label, run.warmup_s, run.cache, len(run.recompiles),
                      latency(run.latency_ms) if run.latency_ms else None, run.pid,
                      run.build_s)
        )  # fmt: skip
    done = {c.label: c for c in s.cold_starts}
    s.cold_start_s = done["empty caches"].seconds if "empty caches" in done else None
    s.warm_cache_s = done["warm caches"].seconds if "warm caches" in done else None
    s.artifacts_s = done["cache artifacts"].seconds if "cache artifacts" in done else None
    s.recompiles_after_warmup = max(
        (c.recompiles_after_warmup for c in s.cold_starts), default=None
    )
    s.verified = (
        bool(s.cold_starts) and len(s.cold_starts) == len(runs) and s.recompiles_after_warmup == 0
    )
    h = s.plan.held_out if s.plan else None
    if s.cuda_graphs is not None and h is not None and not h.error:
        s.cuda_graphs.after_warmup = list(h.without_cuda_graph)
        s.cuda_graphs.recorded_after_warmup = list(h.recorded_cuda_graph)
        s.verified = s.verified and not h.without_cuda_graph and not h.recorded_cuda_graph
    if runs and runs[0].artifacts:
        held = ", ".join(f"{n} {k}" for k, n in runs[0].artifacts.items())
        s.artifacts = (
            f"{runs[0].artifacts_bytes} bytes ({held}): save them after the warm-up with "
            "`data, _ = torch.compiler.save_cache_artifacts()`, write `data` to a file, and at "
            "start-up call `torch.compiler.load_cache_artifacts(data)` before the first request"
        )
    return s


def _notes(s: Serving, facts: ServingFacts) -> list[str]:
    out = []
    if s.replayed < s.requests:
        repeats = s.requests - s.replayed
        held = (
            "compiled nothing: the guards held"
            if not s.repeats_compiled
            else (f"compiled {s.repeats_compiled} frame{'s' * (s.repeats_compiled != 1)} more")
        )
        out.append(
            f"the {s.replayed} distinct shapes of {s.requests} requests were replayed through "
            f"the compile; the other {repeats} repeat them, and replayed after, {held}"
        )
    longest = max((d for r in facts.stream for t in r if t for d in t[1:]), default=0)
    for name, n in facts.positions.items():
        past = [m for m in facts.most[1:] if m > n]
        out.append(
            f"the model's own bound: {name} holds {n} positions, so a request longer than "
            f"{n} fails whatever the plan (this stream's longest size past the batch: "
            f"{longest})" + (f"; --max-shape asks for {max(past)}, past it" if past else "")
        )
    short = [n for n, r in enumerate(facts.stream, 1) if len(r) < len(facts.base)]
    if short:  # the format fills them; said, so a request that named too few is seen
        kept = ", ".join(
            f"{name} {'x'.join(map(str, shape))}"
            for name, shape in zip(facts.names, facts.base, strict=False)
        )
        shown = ", ".join(map(str, short[:8])) + (
            f" and {len(short) - 8} more" if len(short) > 8 else ""
        )
        out.append(
            f"{len(short)} of {s.requests} requests ({shown}) gave fewer shapes than the call's "
            f"{len(facts.base)} tensors: the rest kept get_inputs()'s shapes ({kept}); give each "
            "tensor's shape, or null to keep it on purpose"
        )
    out += facts.errors
    return out
