"""The serving section (#69), in words from its fields: the stream's graphs by request, the
limit's eager requests, the plans side by side as measured, the chosen one with its
warm-up, its check and cold start, and its code. The plain lines serve the markdown view
too; `serving_blocks` is the terminal's."""

from __future__ import annotations

from fractions import Fraction

from rich.syntax import Syntax
from rich.text import Text

from compilediag.harness.serving.stream import FEWEST_HELD_OUT
from compilediag.render import plural
from compilediag.report.serving import PLAN_NAMES, Plan, PlanDim, Serving, by_size
from compilediag.report.words import ms, seconds

PLAN_COLUMNS = ["plan", "graphs", "compile", "eager requests", "held out", "a request (median)",
                "padding"]  # fmt: skip
COMPILES_SHOWN = 6  # the stream's compiles named one by one; the rest counted


def _requests(numbers: list[int], most: int = 8) -> str:
    shown = ", ".join(map(str, numbers[:most]))
    more = f" and {len(numbers) - most} more" if len(numbers) > most else ""
    return f"request{'s' * (len(numbers) != 1)} {shown}{more}"


def stream_lines(s: Serving) -> list[str]:
    """The stream as the user compiles it: what it compiled, where, and the limit's cost."""
    out = [
        f"{plural(s.requests, 'request')}, {plural(s.distinct_shapes, 'distinct shape')}, "
        f"served in torch.{s.mode}(): {plural(s.graphs, 'graph')}, "
        f"{plural(s.recompiles, 'recompile')}, {seconds(s.compile_s)} of requests that compiled"
    ]
    out += unseen_lines(s)
    for c in s.compiles[:COMPILES_SHOWN]:
        why = f": {c.reason}" if c.reason else ""
        out.append(
            f"  request {c.request} compiled {c.compile_id} ({c.frame}), {seconds(c.seconds)}{why}"
        )
    if len(s.compiles) > COMPILES_SHOWN:
        rest = s.compiles[COMPILES_SHOWN:]
        out.append(
            f"  {plural(len(rest), 'more request')} compiled, requests {rest[0].request} to "
            f"{rest[-1].request} ({seconds(sum(c.seconds for c in rest))}): the JSON has each"
        )
    for hit in s.limit_hits:
        eager = _requests(hit.eager_requests) if hit.eager_requests else "none"
        out.append(
            f"  {hit.frame} hit the recompile limit ({hit.limit}) at request {hit.request}: "
            f"ran in eager mode after it: {eager}"
        )
    if s.eager_latency and s.compiled_latency:
        out.append(
            f"  a request (the median over the stream, after its compiles): eager "
            f"{ms(s.eager_latency.median_ms)}, compiled {ms(s.compiled_latency.median_ms)}"
        )
    return out + cuda_graph_lines(s) + [f"  {n}" for n in s.notes]


INPUTS_SHOWN = 4  # input sets named in a report's title; more are counted


def inputs_words(inputs: list[str], serving: Serving | None) -> str:
    """A report's inputs for its title: a request stream by its counts, a few input sets by
    their shapes, many by the first few and a count."""
    if serving is not None:
        return (
            f"a stream of {plural(serving.requests, 'request')}, "
            f"{plural(serving.distinct_shapes, 'distinct shape')}"
        )
    if len(inputs) <= INPUTS_SHOWN:
        return " | ".join(inputs)
    return " | ".join(inputs[:INPUTS_SHOWN]) + f" and {len(inputs) - INPUTS_SHOWN} more input sets"


def unseen_lines(s: Serving) -> list[str]:
    """How often a new shape comes (Good-Turing), and the held-out part against it."""
    u = s.unseen
    if u is None or not u.requests:
        return []
    out = [
        f"  new shapes: {u.once} of {u.requests} requests brought a shape that came once: the "
        f"next request brings a shape not seen here with a chance of about {u.chance:.0%} "
        f"({_one_in(u.chance)}; the Good-Turing estimate)"
    ]
    if u.held_out:
        out.append(
            f"  the plans were fitted to the first {u.fit_requests} requests ({u.fit_chance:.0%} "
            f"by the same estimate) and checked on the other {u.held_out}, "
            f"{u.held_out_new} of which brought a shape the first {u.fit_requests} had not "
            f"({u.held_out_new / u.held_out:.0%})"
        )
    else:
        out.append(
            f"  the stream is too short to hold requests out (fewer than {FEWEST_HELD_OUT}): "
            "the plans are checked on the requests they were fitted to"
        )
    return out


def _one_in(chance: float) -> str:
    """`1 request in 3`, `3 requests in 4`."""
    if chance <= 0:
        return "no shape came once"
    share = Fraction(chance).limit_denominator(5)
    if share.numerator == 0:
        return f"under 1 request in {round(1 / chance)}"
    if share.numerator == share.denominator:
        return "about every request"
    return f"{plural(share.numerator, 'request')} in {share.denominator}"


def cuda_graph_lines(s: Serving) -> list[str]:
    """Under CUDA graphs: what the stream recorded, per graph and size, their pool, what
    torch skipped; a size's first call runs without one, its second records it."""
    c = s.cuda_graphs
    if c is None:
        return []
    g = c.stream
    per = ", ".join(f"{cid}: {n}" for cid, n in sorted(g.by_graph.items()))
    out = [
        f"  CUDA graphs (mode {c.mode!r}): {plural(g.recorded, 'graph')} recorded for "
        f"{plural(g.sizes, 'input size')} of the Inductor graphs ({per}), {g.pool_mb:g} MB "
        f"reserved in their private pool; {g.rerecords} re-recorded; torch ran "
        f"{plural(g.skipped, 'graph')} without them"
        + (f" ({'; '.join(c.skip_reasons)})" if c.skip_reasons else ""),
        "  a size's first call runs without a CUDA graph (its warm-up), its second records "
        "one: each size of a dynamic graph is a CUDA graph of its own",
    ]
    r = c.replayed
    if r is not None and (r.recorded, r.rerecords) != (g.recorded, g.rerecords):
        out.append(
            f"  replaying the whole stream recorded {r.recorded - g.recorded} more and "
            f"re-recorded {r.rerecords - g.rerecords}"
        )
    return out


def plan_columns(s: Serving) -> list[str]:
    return PLAN_COLUMNS + (["CUDA graphs"] if s.cuda_graphs is not None else [])


def plan_rows(s: Serving) -> list[list[str]]:
    return [_row(p, p is s.plan, s.cuda_graphs is not None) for p in s.plans]


def _row(p: Plan, chosen: bool, graphs: bool) -> list[str]:
    pad = f"+{p.padding_share:.0%}" if p.padding_share is not None else ""
    cuda = p.cuda_graphs
    return [
        PLAN_NAMES.get(p.kind, p.kind) + (" (chosen)" if chosen else ""),
        str(p.graphs), seconds(p.compile_s), str(p.eager_requests), _held(p),
        ms(p.latency.median_ms) if p.latency else "-", pad,
    ] + ([f"{cuda.recorded} ({cuda.pool_mb:g} MB)" if cuda else "-"] if graphs else [])  # fmt: skip


def _held(p: Plan) -> str:
    """`12 of 12`: the held-out requests its warm-up held; `-`: not checked."""
    h = p.held_out
    if h is None:
        return "-"
    if h.error:
        return "failed"
    return f"{h.requests - h.missed} of {h.requests}"


def serving_view(s: Serving) -> dict:
    """The section's words for the HTML: the same lines, the plans' rows, the card."""
    return {"stream": stream_lines(s), "columns": plan_columns(s), "rows": plan_rows(s),
            "chosen": bucket_lines(s) + chosen_lines(s), "code": s.plan.code if s.plan else "",
            "verified": s.verified, "card": plan_card(s)}  # fmt: skip


def bucket_lines(s: Serving) -> list[str]:
    """The buckets' trade-off: more padded shapes (graphs, CUDA graphs to hold) against the
    padded work, from the fitted part's sizes; the requests above the largest bucket."""
    b = next((p for p in s.plans if p.kind == "bucket"), None)
    if b is None or not b.options:
        return []
    chosen = [x.sizes for x in by_size(b.dims)]
    pool = ""
    if b.cuda_graphs is not None and b.cuda_graphs.recorded:
        pool = f"; their CUDA graphs about {b.cuda_graphs.pool_mb / b.cuda_graphs.recorded:.3g} MB each in the pool"
    rows = " · ".join(
        f"{o.buckets}{' (these)' if o.sizes == chosen else ''}: +{o.padding_share:.0%}"
        for o in b.options
    )
    sizes = "; ".join(
        f"{'/'.join(names_of(s, b, x))} dim {x.dim}: {', '.join(map(str, x.sizes))}"
        for x in by_size(b.dims)
    )
    out = [
        f"buckets: {sizes}; padded work by the count of padded shapes: {rows}{pool}",
    ]
    h = b.held_out
    if h is not None and h.requests:
        out.append(
            f"buckets: a request above the largest runs eager: {len(h.eager)} of the "
            f"{h.requests} held-out requests" + (f" ({_requests(h.eager)})" if h.eager else "")
        )
    return out


def names_of(s: Serving, b: Plan, x: PlanDim) -> list[str]:
    """The tensors that share x's size, by their names where the run read them."""
    same = [d.input for d in b.dims if (d.dim, d.low, d.high) == (x.dim, x.low, x.high)]
    return [s.names[i] if i < len(s.names) else f"input_{i}" for i in same]


def plan_card(s: Serving) -> dict[str, str]:
    """The Summary's card: the plan's name, and what held it."""
    if s.plan is None:
        return {"plan": "no plan", "what": "serving: " + s.why_plan.split(":")[0]}
    h = s.plan.held_out
    held = (
        f"; held {h.requests - h.missed} of {h.requests} held-out requests"
        if h and h.requests
        else ""
    )
    ok = "verified" if s.verified else "NOT verified"
    return {"plan": PLAN_NAMES[s.plan.kind], "what": f"serving plan, {ok}{held}"}


def chosen_lines(s: Serving) -> list[str]:
    """The plan chosen, why, its warm-up, its check in fresh processes and the cold start."""
    if s.plan is None:
        return [f"no plan: {s.why_plan}"] if s.why_plan else []
    shapes = [" ".join("x".join(map(str, t)) for t in r) for r in s.warmup]
    if s.plan.warmup and len(s.plan.warmup) == len(shapes):
        warm = ", ".join(f"request {n} ({x})" for n, x in zip(s.plan.warmup, shapes, strict=True))
    else:
        warm = ", ".join(shapes)
    out = [f"plan: {_why(s)}", f"warm-up, {plural(len(shapes), 'call')}: {warm}"]
    if s.recompiles_after_warmup is not None:
        ok = "verified" if s.verified else "NOT verified"
        h = s.plan.held_out
        of = (
            f"of the {h.requests} held-out requests"
            if h and h.requests
            else f"of the stream's {plural(s.requests, 'request')}"
        )
        out.append(
            f"{ok}: after the warm-up, {s.recompiles_after_warmup} {of} "
            f"would compile under fail_on_recompile ({_processes(len(s.cold_starts))}, "
            f"in torch.{s.mode}())"
        )
    out += cuda_graph_plan(s)
    if s.cold_starts:
        out.append(
            "cold start (the warm-up, fresh process): "
            + " · ".join(
                f"{seconds(c.seconds)} {c.label}{_built(c.build_s, c.seconds)}"
                for c in s.cold_starts
            )
        )
    if s.artifacts:
        out.append(f"cache artifacts: {s.artifacts}")
    return out


def cuda_graph_plan(s: Serving) -> list[str]:
    """The plan under CUDA graphs: its warm-up calls each request twice, and what ran
    without one after it; the sizes it records, against the buckets'."""
    c, p = s.cuda_graphs, s.plan
    if c is None or p is None:
        return []
    out = []
    if c.after_warmup is not None:
        ran = _requests(c.after_warmup) if c.after_warmup else "none"
        recorded = _requests(c.recorded_after_warmup or []) if c.recorded_after_warmup else "none"
        out.append(
            "CUDA graphs: the warm-up holds every size the plan's graphs record, each called "
            "twice (the first warms the size up, the second records its graph); after it, "
            f"ran without one: {ran}; recorded one: {recorded}"
        )
    bucket = next((x for x in s.plans if x.kind == "bucket"), None)
    mine, theirs = p.cuda_graphs, bucket.cuda_graphs if bucket else None
    if bucket is not None and p is not bucket and mine and theirs and mine.sizes > theirs.sizes:
        out.append(
            f"CUDA graphs: this plan records one for each size it meets ({mine.sizes} in this "
            "stream): a size its warm-up did not hold runs its first call without one and "
            f"records another at its second; buckets record {theirs.sizes} whatever the sizes: "
            "pad to them where the model masks the padding, and warm each up twice"
        )
    return out


def _why(s: Serving) -> str:
    """Why the plan (analysis/serving/forecast.py's choice, from its counts), its graphs
    and latency; buckets beside it where they ran faster."""
    p = s.plan
    assert p is not None
    said = (
        f"{s.why_plan}; {plural(p.graphs, 'graph')} for the {s.fit_shapes or s.distinct_shapes} "
        f"distinct shapes it was fitted to, {ms(p.latency.median_ms) if p.latency else '-'} a "
        "request"
    )
    bucket = next((x for x in s.plans if x.kind == "bucket"), None)
    if s.faster_padded and bucket is not None and bucket.latency and p.latency:
        said += (
            f"; buckets ran {ms(bucket.latency.median_ms)} a request, with "
            f"{bucket.padding_share or 0:.0%} more work padded"
            + ("" if bucket.padding and bucket.padding.kept else ": take them only where the "
               "model masks the padding and you slice its outputs back")
        )  # fmt: skip
    return said


def _built(build_s: float | None, whole: float) -> str:
    """The part of a warm-up Inductor spent building C++ kernels, where it built any: its
    timer adds the builds of its parallel workers, which can pass the warm-up's own time."""
    if not build_s:
        return ""
    if build_s > whole:
        return f" (building C++ kernels took {seconds(build_s)} summed over parallel builds)"
    return f" ({seconds(build_s)} of it building C++ kernels)"


def _processes(n: int) -> str:
    return "a fresh process" if n == 1 else f"the most in any of {n} fresh processes"


def serving_blocks(s: Serving | None) -> list:
    if s is None:
        return []
    from compilediag.render.table.parts import details, new_table

    items: list = [Text("\nServing", style="bold")]
    items += [Text(line) for line in stream_lines(s)]
    if s.plans:
        table = new_table()
        for name in plan_columns(s):
            table.add_column(name, justify="left" if name == "plan" else "right")
        for row in plan_rows(s):
            table.add_row(*row)
        title = f"\nPlans, fitted to the first {plural(s.fit_requests or s.requests, 'request')}"
        items += [Text(title, style="bold"), table]
    items += [Text(line) for line in bucket_lines(s) + chosen_lines(s)]
    if s.plan is not None and s.plan.code:
        code = Syntax(
            s.plan.code.rstrip(), "python", theme="ansi_dark", background_color="default",
            word_wrap=True,
        )  # fmt: skip
        items += [Text("the plan as code:"), details([("", code)])]
    return items
