"""The plans that bound a stream's graphs, proposed from its shapes alone (no torch): the
dimensions that vary, marked dynamic; the same padded to a multiple (buckets), the multiple
the smallest that keeps the buckets within BUCKETS; or dynamic=True. Each is then applied
and measured (replay.py); nothing here says which one is best."""

from __future__ import annotations

import itertools
import math

from compilediag.harness.serving.stream import Shapes
from compilediag.report.serving import Plan, PlanDim

BUCKETS = 4  # at most this many padded shapes: half the default recompile limit


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
    """A request's shapes once a bucket plan pads them."""
    shapes = full(request, base)
    for x in dims:
        if x.multiple:
            n = shapes[x.input][x.dim]
            shapes[x.input][x.dim] = -(-n // x.multiple) * x.multiple
    return shapes


def propose(stream: list[Shapes], base: list[list[int]]) -> list[Plan]:
    """The plans for this stream, smallest change first; [] where no dimension varies."""
    dims = varying_dims(stream, base)
    if not dims:
        return []
    return [
        Plan("mark_dynamic", dims=[PlanDim(x.input, x.dim, x.low, x.high) for x in dims]),
        _bucket(stream, base, dims),
        Plan("dynamic", dims=[PlanDim(x.input, x.dim, x.low, x.high) for x in dims]),
    ]


def _bucket(stream: list[Shapes], base: list[list[int]], dims: list[PlanDim]) -> Plan:
    """Pad each varying dimension to a power-of-two multiple, doubling the multiple of the
    dimension with the most padded sizes in its range until at most BUCKETS padded shapes
    cover the ranges (a size the stream did not bring, within them, has its graph too)."""
    marks = [PlanDim(x.input, x.dim, x.low, x.high, multiple=1) for x in dims]
    while math.prod(len(bucket_sizes(m)) for m in _by_size(marks)) > BUCKETS:
        growable = [m for m in marks if (m.multiple or 1) < m.high]
        if not growable:
            break
        widest = max(growable, key=lambda m: (len(bucket_sizes(m)), m.high))
        doubled, same = (widest.multiple or 1) * 2, (widest.dim, widest.low, widest.high)
        for m in marks:  # tensors that share the size (ids and their mask) pad alike
            if (m.dim, m.low, m.high) == same:
                m.multiple = doubled
    plan = Plan("bucket", dims=marks, padding_share=_padding(stream, base, marks))
    plan.warmup_shapes = bucket_warmup(base, marks)
    return plan


def bucket_sizes(m: PlanDim) -> list[int]:
    """The padded sizes of a dimension over its range."""
    k = m.multiple or 1
    return list(range(-(-m.low // k) * k, -(-m.high // k) * k + 1, k))


def _by_size(marks: list[PlanDim]) -> list[PlanDim]:
    """One mark for each size the tensors share (ids and their mask vary together)."""
    seen: dict[tuple[int, int, int], PlanDim] = {}
    for m in marks:
        seen.setdefault((m.dim, m.low, m.high), m)
    return list(seen.values())


def bucket_warmup(base: list[list[int]], marks: list[PlanDim]) -> list[list[list[int]]]:
    """A call for each padded shape in the ranges: the tensors that share a size take the
    same padded size."""
    sizes = _by_size(marks)
    out = []
    for combo in itertools.product(*(bucket_sizes(m) for m in sizes)):
        shapes = [list(s) for s in base]
        for m in marks:
            n = combo[
                sizes.index(
                    next(x for x in sizes if (x.dim, x.low, x.high) == (m.dim, m.low, m.high))
                )
            ]
            shapes[m.input][m.dim] = n
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
