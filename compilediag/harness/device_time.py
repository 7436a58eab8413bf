"""The GPU's own time per call (no CPU overhead): back-to-back calls captured in one CUDA
graph and replayed, else the kernels' busy time from torch.profiler. Runs in the worker;
torch is passed in."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from compilediag.report.model import DeviceTime

Step = Callable[[Any, Any], Any]  # (model, call) -> outputs


DEVICE_CALLS = 20  # calls profiled for the device's busy time
GRAPH_MAX_CALLS = 20  # calls captured in one CUDA graph, at most
GRAPH_MS = 2.0  # ... as many as make a replay last about this long
GRAPH_BLOCKS = 15  # replays timed


def device_time(
    torch: Any, step: Step, model: Any, compiled: Any, call: Any,
    args_for: Callable[[int], list[Any]],
) -> DeviceTime:  # fmt: skip
    """The GPU's time per call without the CPU's: back-to-back calls captured in one CUDA
    graph and replayed (as triton's do_bench_cudagraph measures: kernels and the gaps
    between them on the device, no launch overhead, no L2 flush). Where a call can't be
    captured (a host sync, a CPU tensor), the kernels' busy time from torch.profiler."""
    try:
        return DeviceTime(
            eager_ms=graph_replay_ms(torch, lambda: step(model, call)),
            compiled_ms=graph_replay_ms(torch, lambda: step(compiled, call)),
            method=f"CUDA graph of up to {GRAPH_MAX_CALLS} back-to-back calls (~{GRAPH_MS:g} "
            f"ms), replayed; CUDA events, median of {GRAPH_BLOCKS} replays; no L2 flush",
        )
    except Exception as e:  # noqa: BLE001 - any capture failure: measure it another way
        torch.cuda.synchronize()
        return DeviceTime(
            eager_ms=device_busy_ms(torch, lambda a: step(model, a), args_for),
            compiled_ms=device_busy_ms(torch, lambda a: step(compiled, a), args_for),
            method=f"torch.profiler kernel time, union of intervals, {DEVICE_CALLS} calls, no "
            f"L2 flush (the call can't be captured in a CUDA graph: {type(e).__name__})",
        )


def graph_replay_ms(torch: Any, run: Callable[[], Any], calls: int | None = None) -> float:
    """The device's time per call: `calls` calls captured back to back in one CUDA graph
    (by default as many as GRAPH_MS takes), the graph replayed and timed by CUDA events.

    Several calls go in one graph, as triton's do_bench_cudagraph does: a graph of one
    call replayed also times the gap between two replays, which on a call of microseconds
    is a share of it. How many calls: enough for a replay to last GRAPH_MS, judged from
    one call's graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as capture requires
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    def captured(calls: int) -> Any:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                run()  # outputs dropped: the graph's pool reuses their memory
        graph.replay()
        torch.cuda.synchronize()
        return graph

    def replay_ms(graph: Any, replays: int) -> float:
        times = []
        for _ in range(replays):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    if calls is None:
        one = captured(1)
        estimate = replay_ms(one, 3)
        del one
        calls = max(1, min(GRAPH_MAX_CALLS, math.ceil(GRAPH_MS / max(estimate, 1e-3))))
    graph = captured(calls)
    per_call = replay_ms(graph, GRAPH_BLOCKS) / calls
    del graph
    torch.cuda.synchronize()
    return per_call


def device_busy_ms(
    torch: Any, run: Callable[[Any], Any], args_for: Callable[[int], list[Any]]
) -> float:
    """The GPU's busy time per call: the union of the kernels' intervals on the device, from
    torch.profiler (CUPTI), over DEVICE_CALLS back-to-back calls. Unlike wall time it has
    no CPU overhead in it; unlike triton's do_bench it does not flush the L2 cache."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    args = args_for(DEVICE_CALLS)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for a in args:
            run(a)
        torch.cuda.synchronize()
    spans = sorted(
        (e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == DeviceType.CUDA
    )
    busy, until = 0.0, float("-inf")
    for start, end in spans:
        if end > until:
            busy += end - max(start, until)
            until = end
    return busy / 1e3 / DEVICE_CALLS
