"""The plans that bound a stream's graphs, proposed from its shapes alone (no torch): the
dimensions that vary, marked dynamic; the same padded to buckets chosen from the stream's
own sizes (at most BUCKETS padded shapes, the least padded work, the largest bucket the
range's top; a request above it runs eager), with the trade-off of more or fewer; or
dynamic=True. Each is then applied and measured (replay.py); nothing here says which one
is best."""

from __future__ import annotations

import itertools
import math
from collections import Counter

from compilediag.harness.serving.stream import Shapes
from compilediag.report.serving import BucketOption, Plan, PlanDim, by_size

BUCKETS = 4  # at most this many padded shapes: half the default recompile limit
TRADE_OFF = (1, 2, 3, 4, 6, 8)  # the counts of padded shapes the trade-off shows


def varying_dims(stream: list[Shapes], base: list[list[int]]) -> list[PlanDim]:
    """The (tensor, dimension) pairs whose size changes over the stream (`base`: each
    tensor's shape as get_inputs() gives it), with the sizes' range."""
    sizes: dict[tuple[int, int], set[int]] = {}
    for request in stream:
        for t, shape in enumerate(full(request, base)):
            for d, n in enumerate(shape):
                sizes.setdefault((t, d), set()).add(n)
    return [PlanDim(t, d, min(s), max(s)) for (t, d), s in sorted(sizes.items()) if len(s) > 1]


def full(request: Shapes, base: list[list[int]]) -> list[list[int]]:
    """Every tensor's shape in a request: its own, or get_inputs()'s where it keeps one."""
    out = []
    for t, shape in enumerate(base):
        given = request[t] if t < len(request) else None
        out.append(list(given) if given is not None else list(shape))
    return out


def padded(request: Shapes, base: list[list[int]], dims: list[PlanDim]) -> list[list[int]]:
    """A request's shapes once a bucket plan pads them (a size above the largest bucket is
    left: the plan runs that request eager)."""
    shapes = full(request, base)
    for x in dims:
        if x.sizes or x.multiple:
            n = shapes[x.input][x.dim]
            shapes[x.input][x.dim] = bucket_of(n, bucket_sizes(x)) or n
    return shapes


def propose(
    stream: list[Shapes], base: list[list[int]], most: list[int] | None = None
) -> list[Plan]:
    """The plans for this stream, smallest change first; [] where no dimension varies.
    `most`: the largest size the user serves, by dimension (--max-shape): the ranges and the
    largest bucket reach it."""
    dims = varying_dims(stream, base)
    if not dims:
        return []
    for x in dims:
        if most and x.dim < len(most):
            x.high = max(x.high, most[x.dim])
    return [
        Plan("mark_dynamic", dims=[PlanDim(x.input, x.dim, x.low, x.high) for x in dims]),
        _bucket(stream, base, dims),
        Plan("dynamic", dims=[PlanDim(x.input, x.dim, x.low, x.high) for x in dims]),
    ]


def _bucket(stream: list[Shapes], base: list[list[int]], dims: list[PlanDim]) -> Plan:
    """Buckets from the stream's own sizes: the bucket lists with at most BUCKETS padded
    shapes that pad the least work over the stream (each list's largest the range's top),
    and the trade-off of more or fewer buckets against the padded work."""
    options = bucket_options(stream, base, dims)
    chosen = min((o for o in options if o.buckets <= BUCKETS), key=lambda o: o.padding_share)
    marks = [
        PlanDim(x.input, x.dim, x.low, x.high, sizes=list(chosen.sizes[_group(dims, x)]))
        for x in dims
    ]
    plan = Plan("bucket", dims=marks, padding_share=chosen.padding_share, options=options)
    plan.warmup_shapes = bucket_warmup(base, marks)
    return plan


def _group(dims: list[PlanDim], x: PlanDim) -> int:
    """The index of x's size among the sizes the tensors share (ids and their mask)."""
    return [(m.dim, m.low, m.high) for m in by_size(dims)].index((x.dim, x.low, x.high))


def bucket_options(
    stream: list[Shapes], base: list[list[int]], dims: list[PlanDim]
) -> list[BucketOption]:
    """For each count of padded shapes in TRADE_OFF, the bucket lists that pad the least
    work: each shared size's list the best of its length (fewest padded elements over the
    stream), the lengths whose product fits the count tried in turn."""
    groups = by_size(dims)
    lists = [
        [best_sizes([full(r, base)[g.input][g.dim] for r in stream], k, g.high) for k in
         range(1, max(TRADE_OFF) + 1)]
        for g in groups
    ]  # fmt: skip
    out: list[BucketOption] = []
    for most in TRADE_OFF:
        best: BucketOption | None = None
        for ks in itertools.product(*(range(1, most + 1) for _ in groups)):
            if math.prod(ks) > most:
                continue
            sizes = [lists[g][k - 1] for g, k in enumerate(ks)]
            marks = [PlanDim(x.input, x.dim, x.low, x.high, sizes=sizes[_group(dims, x)])
                     for x in dims]  # fmt: skip
            option = BucketOption(
                math.prod(len(x) for x in sizes), sizes, _padding(stream, base, marks)
            )
            if best is None or (option.padding_share, option.buckets) < (
                best.padding_share, best.buckets
            ):  # fmt: skip
                best = option
        if best is not None and all(o.sizes != best.sizes for o in out):
            out.append(best)
    return out


def best_sizes(values: list[int], k: int, top: int) -> list[int]:
    """At most k sizes, the largest `top`, that pad `values` (each up to the next size) the
    least in all: the optimal split of the sorted distinct values (dynamic programming)."""
    counts = sorted(Counter(values).items())
    sizes = [v for v, _ in counts]
    if not sizes or sizes[-1] < top:
        sizes.append(top)
        counts.append((top, 0))
    n = len(sizes)
    k = min(k, n)
    weight = [0] + list(itertools.accumulate(c for _, c in counts))

    def cost(i: int, j: int) -> int:  # values i..j (0-based, inclusive) padded to sizes[j]
        return sizes[j] * (weight[j + 1] - weight[i])

    inf = float("inf")
    best = [[inf] * n for _ in range(k + 1)]  # best[b][j]: values 0..j in b buckets
    back = [[-1] * n for _ in range(k + 1)]
    for j in range(n):
        best[1][j] = cost(0, j)
    for b in range(2, k + 1):
        for j in range(n):
            for i in range(j):
                c = best[b - 1][i] + cost(i + 1, j)
                if c < best[b][j]:
                    best[b][j], back[b][j] = c, i
    b = min(range(1, k + 1), key=lambda b: (best[b][n - 1], b))
    out, j = [], n - 1
    while b >= 1 and j >= 0:
        out.append(sizes[j])
        j, b = back[b][j], b - 1
    return sorted(out)


def bucket_of(n: int, sizes: list[int]) -> int | None:
    """The bucket a size pads to: the smallest at least n; None above the largest."""
    return next((s for s in sorted(sizes) if s >= n), None)


def bucket_sizes(m: PlanDim) -> list[int]:
    """The padded sizes of a dimension over its range (a plan saved with a multiple: its
    multiples)."""
    if m.sizes:
        return list(m.sizes)
    k = m.multiple or 1
    return list(range(-(-m.low // k) * k, -(-m.high // k) * k + 1, k))


def bucket_warmup(base: list[list[int]], marks: list[PlanDim]) -> list[list[list[int]]]:
    """A call for each padded shape: the tensors that share a size take the same bucket."""
    sizes = by_size(marks)
    out = []
    for combo in itertools.product(*(bucket_sizes(m) for m in sizes)):
        shapes = [list(s) for s in base]
        for m in marks:
            shapes[m.input][m.dim] = combo[_group(marks, m)]
        out.append(shapes)
    return out


def _sizes(stream: list[Shapes], base: list[list[int]], m: PlanDim) -> list[int]:
    return [full(r, base)[m.input][m.dim] for r in stream]


def _padding(stream: list[Shapes], base: list[list[int]], marks: list[PlanDim]) -> float:
    """The padded work beyond the real work: padded elements over real ones, less one, of the
    tensors the plan pads, over the whole stream."""
    padded_tensors = {m.input for m in marks}
    real = pad = 0
    for r in stream:
        before, after = full(r, base), padded(r, base, marks)
        for t in padded_tensors:
            real += math.prod(before[t])
            pad += math.prod(after[t])
    return round(pad / real - 1, 4) if real else 0.0
