"""compilediag's runtime probe: what a job's compiled code did as it ran, which no trace
holds. Loaded into each process of a `compilediag run` job once it imports torch._dynamo
(sitecustomize.py), and by `compilediag.capture()` in the caller's own process.

It wraps each graph Dynamo compiles, as the backend hands it back, and counts its calls.
With a profiling window (calls A to B of the process's first compiled frame: a training
step, as a rule) it also times each graph call and the gaps between them: per step, the
time in graphs, the eager Python between graphs (a graph break's code, the next frame's
guards) and the rest of the step, outside compiled code. On CUDA it synchronises around
each timed call, inside the window only.

At exit (or SIGTERM) it writes one JSON file per process into COMPILEDIAG_RUNTIME_DIR,
in the shape of compilediag.worker_types.ProcessRuntime. Standard library only.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import sys
import time
from typing import Any

DIR_ENV = "COMPILEDIAG_RUNTIME_DIR"
STEPS_ENV = "COMPILEDIAG_PROFILE_STEPS"


def parse_window(text: str) -> tuple[int, int] | None:
    """`A-B` (or `A`): calls A to B of the first compiled frame, counted from 1."""
    first, _, last = text.strip().partition("-")
    a, b = int(first), int(last or first)
    if a < 1 or b < a:
        raise ValueError(f"{text!r} is not A-B with 1 <= A <= B")
    return a, b


def _compile_id() -> tuple[str, int | None]:
    """The compile under way, as the trace writes it (`0/1`, `!2/0/1`), and its frame."""
    from torch._guards import CompileContext

    cid = CompileContext.current_compile_id()
    if cid is None or cid.frame_id is None:
        return "?", None
    text = f"{cid.frame_id}/{cid.frame_compile_id}"
    ca = getattr(cid, "compiled_autograd_id", None)
    return (f"!{ca}/{text}" if ca is not None else text), cid.frame_id


class Probe:
    def __init__(self, window: tuple[int, int] | None = None) -> None:
        self.window = window
        self.calls: dict[str, int] = {}
        self.first_frame: int | None = None
        self.steps = 0  # calls of the first compiled frame
        self.started = time.perf_counter()
        # the profiling window: totals over complete steps, and the step under way
        self.timing = False
        self.measured_steps = 0
        self.window_s = 0.0
        self.graph_s: dict[str, float] = {}
        self.gap_s: dict[str, float] = {}
        self.outside_s = 0.0
        self._step_start = 0.0
        self._step_graph: dict[str, float] = {}
        self._step_gap: dict[str, float] = {}
        self._last: tuple[str, float] | None = None  # the graph that ran last, when it ended
        self.skip_reasons: list[str] = []  # torch's words for a CUDA-graph skip, as logged

    # -- counting and timing ------------------------------------------------------------

    def wrap(self, fn: Any) -> Any:
        cid, frame = _compile_id()
        if self.first_frame is None and frame is not None and not cid.startswith("!"):
            self.first_frame = frame
        probe = self

        def compiled_graph(*args: Any, **kwargs: Any) -> Any:
            t0 = probe.enter(cid, frame)
            if t0 is None:
                return fn(*args, **kwargs)
            try:
                return fn(*args, **kwargs)
            finally:
                probe.leave(cid, t0)

        return compiled_graph

    def enter(self, cid: str, frame: int | None) -> float | None:
        """Count the call; in the window, the time it starts (one clock reading serves as
        the end of a step, the start of the next and this graph's start, so that a step's
        parts add up to it)."""
        self.calls[cid] = self.calls.get(cid, 0) + 1
        now = None
        if frame == self.first_frame and not cid.startswith("!"):
            self.steps += 1
            if self.window is not None:
                a, b = self.window
                if self.timing or self.steps == a:
                    now = self.clock()
                    if self.timing:
                        self.end_step(now)
                    self.timing = a <= self.steps <= b
                    if self.timing:
                        self._step_start, self._last = now, None
        if not self.timing:
            return None
        t0 = now if now is not None else self.clock()
        if self._last is not None:
            last, ended = self._last
            self._step_gap[last] = self._step_gap.get(last, 0.0) + t0 - ended
        return t0

    def leave(self, cid: str, t0: float) -> None:
        ended = self.clock()
        self._last = (cid, ended)
        self._step_graph[cid] = self._step_graph.get(cid, 0.0) + ended - t0

    def end_step(self, now: float) -> None:
        """A step is complete when the next one starts: its totals count then."""
        self.measured_steps += 1
        self.window_s += now - self._step_start
        for cid, s in self._step_graph.items():
            self.graph_s[cid] = self.graph_s.get(cid, 0.0) + s
        for cid, s in self._step_gap.items():
            self.gap_s[cid] = self.gap_s.get(cid, 0.0) + s
        if self._last is not None:
            self.outside_s += now - self._last[1]
        self._step_graph, self._step_gap = {}, {}

    def clock(self) -> float:
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():
            cuda.synchronize()
        return time.perf_counter()

    # -- the facts --------------------------------------------------------------------

    def facts(self) -> dict[str, Any]:
        """What compilediag reads back (worker_types.ProcessRuntime)."""
        profiled = None
        n = self.measured_steps
        if n:
            per = 1e3 / n
            profiled = {
                "calls": n,
                "call_ms": self.window_s * per,
                "outside_ms": self.outside_s * per,
                "regions": [
                    {"compile_id": c, "graph_ms": s * per, "gap_ms": self.gap_s.get(c, 0.0) * per}
                    for c, s in self.graph_s.items()
                ],
            }
        rank = os.environ.get("RANK")
        skips, rerecords = _cudagraph_counts()
        return {
            "pid": os.getpid(),
            "rank": int(rank) if rank and rank.isdigit() else None,
            "argv": list(sys.argv),
            "calls": dict(self.calls),
            "first_frame": self.first_frame,
            "steps": self.steps,
            "window": list(self.window) if self.window else [],
            "profiled": profiled,
            "wall_s": time.perf_counter() - self.started,
            "cudagraph_skips": skips,
            "cudagraph_skip_reasons": list(dict.fromkeys(self.skip_reasons)),
            "cudagraph_rerecords": rerecords,
        }


def _cudagraph_counts() -> tuple[int, int]:
    """CUDA graphs under mode="reduce-overhead": how many graphs ran without one (torch's
    own counter), and how many were recorded again (its tree managers' counts, where this
    torch keeps them)."""
    utils = sys.modules.get("torch._dynamo.utils")
    skips = int(utils.counters["inductor"].get("cudagraph_skips", 0)) if utils else 0
    rerecords = 0
    trees = sys.modules.get("torch._inductor.cudagraph_trees")
    try:
        containers = getattr(getattr(trees, "local", None), "tree_manager_containers", {})
        for container in containers.values():
            manager = getattr(container, "tree_manager", None)
            for per_function in getattr(manager, "num_rerecord", {}).values():
                rerecords += sum(per_function.values())
    except Exception:  # another torch's layout: the count stays what was found
        pass
    return skips, rerecords


class _SkipListener(logging.Handler):
    """torch says why it ran a graph without a CUDA graph only in a log line, when that
    log is on (2.11 on: the `cudagraphs` artifact, on by default); the worker's
    watch_cudagraph_skips does the same in explain's process."""

    def __init__(self, probe: Probe) -> None:
        super().__init__(logging.WARNING)
        self.probe = probe

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "skipping cudagraphs" in text:
            self.probe.skip_reasons.append(" ".join(text.split()))


CUDAGRAPH_LOGGERS = [
    "torch._inductor.cudagraph_utils" + name for name in ("", ".__perf_hints", ".__cudagraphs")
]


def install(probe: Probe) -> Any:
    """Wrap every graph the backend returns from now on, and listen for CUDA-graph skips;
    returns the undo."""
    from torch._dynamo.output_graph import OutputGraph

    original = OutputGraph.call_user_compiler

    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        return probe.wrap(original(self, gm, example_inputs))

    OutputGraph.call_user_compiler = call_user_compiler  # type: ignore[method-assign]
    listener = _SkipListener(probe)
    for name in CUDAGRAPH_LOGGERS:
        logging.getLogger(name).addHandler(listener)

    def undo() -> None:
        OutputGraph.call_user_compiler = original  # type: ignore[method-assign]
        for name in CUDAGRAPH_LOGGERS:
            logging.getLogger(name).removeHandler(listener)

    return undo


_written = False


def write(probe: Probe, folder: str) -> None:
    global _written
    if _written or not probe.calls:
        return
    _written = True
    facts = probe.facts()
    name = f"runtime-{facts['rank'] if facts['rank'] is not None else 'x'}-{facts['pid']}.json"
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, "." + name)
    with open(tmp, "w") as f:
        json.dump(facts, f)
    os.replace(tmp, os.path.join(folder, name))


def install_from_env() -> None:
    """The probe of a `compilediag run` job's process, from its environment."""
    folder = os.environ.get(DIR_ENV)
    if not folder:
        return
    steps = os.environ.get(STEPS_ENV, "")
    probe = Probe(parse_window(steps) if steps else None)
    install(probe)
    atexit.register(write, probe, folder)
    _write_on_sigterm(probe, folder)


def _write_on_sigterm(probe: Probe, folder: str) -> None:
    """A SIGTERM (torchrun stopping its workers, a scheduler's time limit) ends the process
    without atexit: write first, then end as the signal would have. A handler the job
    installs itself replaces this one."""
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def on_sigterm(signum: int, frame: Any) -> None:
            write(probe, folder)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread
        pass
