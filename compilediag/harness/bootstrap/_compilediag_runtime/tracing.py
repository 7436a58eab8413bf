"""What Dynamo's tracing cost, function by function: torch's own Dynamo profiler
(`torch._dynamo.config.dynamo_profiler`, in torch since 2.12), which times each function
Dynamo traces, inlined ones included, with what it spent in the functions it called.

The profiler writes pstats at the end of each frame's tracing (printed, or a file); here
that is replaced by keeping its timings, and the setting is put back after. The setting
is one torch marks compile_ignored: it is in no cache key, and changes nothing compiled.
Where the installed torch has no such profiler, nothing is measured (`available` False).

Runs in the worker (explain, recompiles) and in each process of a `compilediag run` job
(the probe); torch is passed in. Standard library only: the summary is plain data, read
as compilediag.report.model.Tracing."""

from __future__ import annotations

import os
import time
from typing import Any

# the functions kept: the costliest by their own time, and any above this share of tracing
TOP = 8
MIN_SHARE = 0.02


class TracingCost:
    """Keeps torch's Dynamo profiler's timings while on (`start` ... `stop`)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.available = False
        self._states: dict[int, list[Any]] = {}  # each frame's profiler state: itself, timings
        self._undo: list[Any] = []

    def start(self) -> bool:
        try:
            config = self.torch._dynamo.config
            from torch._dynamo import dynamo_profiler
        except (AttributeError, ImportError):
            return False
        state_cls = getattr(dynamo_profiler, "DynamoProfilerState", None)
        if not hasattr(config, "dynamo_profiler") or state_cls is None:
            return False
        if config.dynamo_profiler:  # the user's own: left as it is, and not read
            return False
        dump = state_cls.dump_stats
        states = self._states

        def keep(state: Any, *args: Any, **kwargs: Any) -> None:
            states[id(state)] = [state, *state.timings]  # (held: its id stays its own)

        output_graph = getattr(self.torch._dynamo, "output_graph", None)
        graph_cls = getattr(output_graph, "OutputGraph", None)
        stop = getattr(graph_cls, "mark_bytecode_tracing_stop", None)
        if stop is None:
            return False

        def tracing_stop(graph: Any) -> Any:
            """torch's own stop fails where a graph break left no root frame (root_tx None:
            AttributeError on 2.13-2.15): its root timing is recorded here, and torch's
            stop runs with the profiler off."""
            state = getattr(graph, "profiler_state", None)
            if getattr(graph, "root_tx", True) is not None or state is None:
                return stop(graph)
            _record_root(dynamo_profiler, state)
            keep(state)
            config.dynamo_profiler = False
            try:
                return stop(graph)
            finally:
                config.dynamo_profiler = True

        state_cls.dump_stats = keep
        setattr(graph_cls, "mark_bytecode_tracing_stop", tracing_stop)  # noqa: B010
        config.dynamo_profiler = True
        self._undo = [
            lambda: setattr(state_cls, "dump_stats", dump),
            lambda: setattr(graph_cls, "mark_bytecode_tracing_stop", stop),
            lambda: setattr(config, "dynamo_profiler", False),
        ]
        self.available = True
        return True

    def stop(self) -> None:
        for undo in self._undo:
            undo()
        self._undo = []

    def summary(self) -> dict[str, Any] | None:
        """{total_s, functions: [{function, file, line, calls, own_s, total_s, share}]}: the
        functions outside torch, costliest (own time) first; None where unmeasured."""
        if not self.available:
            return None
        timings = [t for ts in self._states.values() for t in ts[1:]]
        total = sum(t.cumtime_ns for t in timings if t.inline_depth == 0) / 1e9
        if not timings or total <= 0:
            return {"total_s": 0.0, "functions": []}
        # torch's own functions, and this package's (the probe's wrappers), are not the user's
        skip = (os.path.dirname(self.torch.__file__) + os.sep, os.path.dirname(__file__), "<")
        by: dict[tuple[str, int, str], list[float]] = {}
        for t in timings:
            if t.filename.startswith(skip):
                continue
            figures = by.setdefault((t.filename, t.firstlineno, t.func_name), [0, 0.0, 0.0, 1])
            figures[0] += 1
            figures[1] += t.tottime_ns / 1e9
            if t.is_primitive_call:  # a recursive call's time is in its outer call's
                figures[2] += t.cumtime_ns / 1e9
            if t.inline_depth == 0:  # a frame Dynamo compiled, not one it inlined
                figures[3] = 0
        costs = [
            {"function": name, "file": file, "line": line, "calls": int(n),
             "own_s": round(own, 6), "total_s": round(cum, 6), "share": round(own / total, 4),
             "inlined": bool(inlined)}
            for (file, line, name), (n, own, cum, inlined) in by.items()
        ]  # fmt: skip
        costs.sort(key=lambda c: -c["own_s"])
        kept = [c for i, c in enumerate(costs) if i < TOP or c["share"] >= MIN_SHARE]
        return {"total_s": round(total, 6), "functions": kept}


def _record_root(dynamo_profiler: Any, state: Any) -> None:
    """The root frame's timing, as torch's stop records it, for a frame whose tracing ended
    with no root translator left."""
    entry = state.pop()
    if entry is None:
        return
    cumtime = time.time_ns() - entry.start_time_ns
    state.record_timing(
        dynamo_profiler.FunctionTraceTiming(
            func_name=entry.func_name, filename=entry.filename, firstlineno=entry.firstlineno,
            cumtime_ns=cumtime, tottime_ns=cumtime - entry.child_time_ns, bytecode_count=0,
            inline_depth=0, is_primitive_call=entry.is_primitive_call,
        )
    )  # fmt: skip
