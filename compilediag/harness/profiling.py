"""Where a compiled call's time goes, in the worker: torch.profiler's compiled regions (each
frame's graph and the time around it, the step's backward) and the Python frames left to
eager mode, timed by a profile hook. torch is passed in, never imported at module level."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from types import CodeType
from typing import Any

from compilediag.harness.checks import sync
from compilediag.harness.worker_types import (
    FrameTime,
    Profiled,
    RegionTime,
)
from compilediag.paths import in_torch

REGION = "Torch-Compiled Region: "
GRAPH_CALL = "## Call CompiledFxGraph"
AOT_FORWARD = "CompiledFunction"  # AOTAutograd's forward of a graph that needs a backward
BACKWARD = "## compilediag backward"  # --train: the step's backward (worker_torch.make_step)
PROFILE_S = 0.15  # profiled calls: about this long, within [PROFILE_MIN_CALLS, PROFILE_MAX_CALLS]
PROFILE_MIN_CALLS = 5
# torch.profiler's events() costs about a millisecond per profiled call of a small model:
# 2,500 calls of a 0.1 ms model took 11 s to read back, ten times the timing itself
PROFILE_MAX_CALLS = 50
# backends whose graphs torch.profiler does not show (no `## Call CompiledFxGraph`: only
# Inductor's do): no pass is made for them, whose breakdown would be none
NO_GRAPH_EVENTS = ("eager", "aot_eager")


def profile_regions(
    torch: Any, run: Callable[[Any], Any], args_for: Callable[[int], list[Any]],
    call_ms: float, cuda: bool,
) -> Profiled | None:  # fmt: skip
    """Where a compiled call's time goes, from torch.profiler (CPU activity): each compiled
    frame's region (`Torch-Compiled Region: 0/0`, nested: the code after a graph break runs
    as a frame of its own, called from the region before it), its graph, and the time in
    the region outside its graph and nested regions; with --train, the step's backward
    (BACKWARD's range: autograd's engine and the backward graphs in it). None where no
    graph event shows (backends other than Inductor)."""
    from torch.profiler import ProfilerActivity, profile

    calls = math.ceil(PROFILE_S * 1e3 / max(call_ms, 1e-3))
    calls = min(PROFILE_MAX_CALLS, max(PROFILE_MIN_CALLS, calls))
    args = args_for(calls)
    sync(torch, "cuda" if cuda else "cpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for a in args:
            run(a)
        sync(torch, "cuda" if cuda else "cpu")
        wall_ms = (time.perf_counter() - t0) * 1e3
    graph: dict[str, float] = {}
    gap: dict[str, float] = {}
    inside = backward = 0.0
    found_graph = False
    for e in prof.events():
        if e.name == BACKWARD:
            backward += e.cpu_time_total
        if not e.name.startswith(REGION):
            continue
        cid = e.name[len(REGION) :].strip()
        total = e.cpu_time_total
        children = e.cpu_children
        g = _graph_time(e)
        nested = sum(ch.cpu_time_total for ch in children if ch.name.startswith(REGION))
        found_graph |= g > 0
        graph[cid] = graph.get(cid, 0.0) + g
        gap[cid] = gap.get(cid, 0.0) + max(0.0, total - g - nested)
        if e.cpu_parent is None or not _inside_region(e):
            inside += total
    if not found_graph:
        return None
    per = 1e3 * calls  # profiler times are in microseconds
    return Profiled(
        calls=calls,
        call_ms=wall_ms / calls,
        outside_ms=max(0.0, wall_ms / calls - inside / per - backward / per),
        regions=[RegionTime(cid, graph[cid] / per, gap[cid] / per) for cid in graph],
        backward_ms=backward / per,
    )


def _graph_time(region: Any) -> float:
    """The time (us) a region spent in its graphs: Inductor's graph calls, or AOTAutograd's
    CompiledFunction around one (its runtime wrapper is the graph's, as the backend returned
    it), found below the region but not in a region nested in it."""
    total, todo = 0.0, list(region.cpu_children)
    while todo:
        e = todo.pop()
        if e.name.startswith(REGION):
            continue
        if e.name.startswith(GRAPH_CALL) or e.name == AOT_FORWARD:
            total += e.cpu_time_total
        else:
            todo += e.cpu_children
    return total


PY_FRAMES_KEPT = 200


def python_frames(
    run: Callable[[Any], Any], args_for: Callable[[int], list[Any]], call_ms: float
) -> list[FrameTime]:
    """Each Python function's time per compiled call, a call of it inside itself counted
    once, timed by a profile hook (sys.setprofile: torch.profiler's Python tracer records
    nothing under Python 3.12 on some builds): what a frame torch left to eager mode costs.
    torch's own functions are left out, the costliest kept. The hook costs each Python call
    it sees: the figures are scaled by the call's own time (`call_ms`, no hook) over its
    time under the hook, so that a frame is never more than the whole call (a look's frame
    of logging and random calls read 0.488 ms of a 0.283 ms call)."""
    calls = min(PROFILE_MIN_CALLS, max(1, math.ceil(PROFILE_S * 1e3 / max(call_ms, 1e-3))))
    args = args_for(calls)
    total: dict[CodeType, float] = {}
    depth: dict[CodeType, int] = {}
    started: list[tuple[CodeType, float]] = []
    clock = time.perf_counter

    def hook(frame: Any, event: str, _: Any) -> None:
        if event == "call":
            code = frame.f_code
            n = depth.get(code, 0)
            depth[code] = n + 1
            started.append((code, clock() if n == 0 else -1.0))
        elif event == "return" and started:
            code, t0 = started.pop()
            depth[code] -= 1
            if t0 >= 0:
                total[code] = total.get(code, 0.0) + clock() - t0

    hooked = clock()
    sys.setprofile(hook)
    try:
        for a in args:
            run(a)
    finally:
        sys.setprofile(None)
    hooked = (clock() - hooked) * 1e3 / calls
    scale = min(1.0, call_ms / hooked) if hooked > 0 else 1.0
    mine = [(c, t) for c, t in total.items() if not in_torch(c.co_filename)]
    mine.sort(key=lambda ct: -ct[1])
    return [
        FrameTime(c.co_filename, c.co_firstlineno, c.co_name, round(t * 1e3 / calls * scale, 6))
        for c, t in mine[:PY_FRAMES_KEPT]
    ]


def _inside_region(e: Any) -> bool:
    p = e.cpu_parent
    while p is not None:
        if p.name.startswith(REGION):
            return True
        p = p.cpu_parent
    return False
