"""A request as a call of the model, and what torch did with it: the call built from
get_inputs()'s (its tensors at the request's shapes, their dtype and value range kept), a
plan applied to it (marks, padding), each call timed by the clock around it, and which of
torch's compiled regions ran it (its profiler's "Torch-Compiled Region: 0/3" records, which
torch writes for every run of a compiled frame: none for a call that ran in eager mode)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from compilediag.harness.checks import sync
from compilediag.harness.serving.plans import bucket_of, bucket_sizes
from compilediag.harness.serving.stream import Shapes
from compilediag.report.serving import Latency, Plan

Call = tuple[tuple[Any, ...], dict[str, Any]]
REGION = "Torch-Compiled Region: "
# the modes a server calls its model in; torch's guards tell them apart (a graph compiled
# under one recompiles under the other: the dispatch keys differ), and tell grad on apart
SERVING_MODES = ("inference_mode", "no_grad")


def in_mode(torch: Any, fn: Any, mode: str) -> Any:
    """`fn` called in the serving mode, its inputs made outside it (as a tokenizer's are):
    the plan's serve() does the same, whatever mode its caller is in."""
    enter = torch.inference_mode if mode == "inference_mode" else torch.no_grad

    def served(*args: Any, **kwargs: Any) -> Any:
        with enter():
            return fn(*args, **kwargs)

    return served


def tensor_places(torch: Any, call: Call) -> list[int | str]:
    """Where the call's tensors are: positional indexes, then keyword names, in order."""
    args, kwargs = call
    places: list[int | str] = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    return places + [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]


def base_shapes(torch: Any, call: Call) -> list[list[int]]:
    return [list(_get(call, p).shape) for p in tensor_places(torch, call)]


def build(torch: Any, base: Call, request: Shapes) -> Call:
    """The call for a request: each tensor it gives a shape made afresh, of the same dtype
    and device, integers within the base tensor's range (token ids stay valid ids)."""
    args, kwargs = list(base[0]), dict(base[1])
    for place, shape in zip(tensor_places(torch, base), request, strict=False):
        if shape is None:
            continue
        old = _get(base, place)
        new = _like(torch, old, shape)
        if isinstance(place, int):
            args[place] = new
        else:
            kwargs[place] = new
    return tuple(args), kwargs


def _like(torch: Any, old: Any, shape: list[int]) -> Any:
    if old.dtype.is_floating_point:
        return torch.randn(shape, dtype=old.dtype, device=old.device)
    if old.dtype == torch.bool:
        return torch.ones(shape, dtype=torch.bool, device=old.device)
    high = int(old.max().item()) + 1 if old.numel() else 2
    low = int(old.min().item()) if old.numel() else 0
    return torch.randint(low, max(high, low + 1), shape, dtype=old.dtype, device=old.device)


def _get(call: Call, place: int | str) -> Any:
    return call[0][place] if isinstance(place, int) else call[1][place]


def planned(torch: Any, call: Call, plan: Plan | None) -> Call:
    """The call as the plan hands it to the model: padded (bucket) or marked (mark_dynamic;
    maybe_mark_dynamic, which lets a size of 1 have its own graph where mark_dynamic would
    refuse it); dynamic=True changes the compile, not the call."""
    if plan is None or plan.kind == "dynamic":
        return call
    args, kwargs = list(call[0]), dict(call[1])
    places = tensor_places(torch, call)
    for x in plan.dims:
        place = places[x.input]
        t = _get((tuple(args), kwargs), place)
        if plan.kind == "bucket" and (x.sizes or x.multiple):
            extra = (bucket_of(t.size(x.dim), bucket_sizes(x)) or t.size(x.dim)) - t.size(x.dim)
            if extra:
                pad = [0, 0] * (t.dim() - x.dim - 1) + [0, extra]
                t = torch.nn.functional.pad(t, pad, value=0)
        elif plan.kind == "mark_dynamic":
            torch._dynamo.maybe_mark_dynamic(t, x.dim)
        if isinstance(place, int):
            args[place] = t
        else:
            kwargs[place] = t
    return tuple(args), kwargs


def above_buckets(torch: Any, call: Call, plan: Plan | None) -> bool:
    """A request a bucket plan runs eager: a size above its largest bucket."""
    if plan is None or plan.kind != "bucket":
        return False
    places = tensor_places(torch, call)
    return any(
        (x.sizes or x.multiple) and bucket_of(_get(call, places[x.input]).size(x.dim),
                                              bucket_sizes(x)) is None
        for x in plan.dims
    )  # fmt: skip


def timed(torch: Any, fn: Any, calls: list[Call], device: str) -> list[float]:
    """Each call's milliseconds by the clock around it (the device synchronised after)."""
    out = []
    for args, kwargs in calls:
        start = time.perf_counter()
        fn(*args, **kwargs)
        sync(torch, device)
        out.append((time.perf_counter() - start) * 1e3)
    return out


def timed_beside(
    torch: Any, fn: Any, calls: list[Call], reference: Any, refs: list[Call], device: str
) -> tuple[list[float], list[float]]:
    """Each call timed, and beside it a reference call (the model in eager) timed at the
    same moment: a plan's time over its reference's cancels what the machine did meanwhile
    (another process, a slower core), which a pass measured after another's does not."""
    ms, ref_ms = [], []
    for call, ref in zip(calls, refs, strict=True):
        ms += timed(torch, fn, [call], device)
        ref_ms += timed(torch, reference, [ref], device)
    return ms, ref_ms


def latency(ms: list[float]) -> Latency:
    return Latency(round(statistics.mean(ms), 4), round(statistics.median(ms), 4), len(ms))


def regions(torch: Any, fn: Any, calls: list[Call], device: str) -> list[list[str]]:
    """For each call, the compile ids of the compiled regions torch ran for it, by torch's
    profiler (CPU events only: the regions are host-side records)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    marks = [f"compilediag_request_{i}" for i in range(len(calls))]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for mark, (args, kwargs) in zip(marks, calls, strict=True):
            with record_function(mark):
                fn(*args, **kwargs)
                sync(torch, device)
    spans, found = {}, []
    for e in prof.events():
        if e.name in marks:
            spans[e.name] = (e.time_range.start, e.time_range.end)
        elif e.name.startswith(REGION):
            found.append((e.time_range.start, e.name.removeprefix(REGION)))
    out: list[list[str]] = []
    for mark in marks:
        a, b = spans.get(mark, (0, -1))
        out.append(sorted({cid for t, cid in found if a <= t <= b}))
    return out


def compiles_now(torch: Any) -> tuple[int, int]:
    """torch's counts so far: frames compiled, graphs made."""
    counters = torch._dynamo.utils.counters
    return int(counters["frames"]["ok"]), int(counters["stats"]["unique_graphs"])
