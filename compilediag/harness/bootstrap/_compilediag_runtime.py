"""compilediag's runtime probe: what a job's compiled code did as it ran, which no trace
holds. Loaded into each process of a `compilediag run` job once it imports torch._dynamo
(sitecustomize.py), and by `compilediag.capture()` in the caller's own process.

It wraps each graph Dynamo compiles, as the backend hands it back, and counts its calls.
A step is a call of the first compiled entry the process calls (the module or function
torch.compile returned), counted whether it ran compiled code or, past the recompile limit,
eagerly; where the entry can't be seen (a module compiled before capture() began on a
torch whose wrapper is not known), a call of the first compiled frame's graphs. With a
profiling window (steps A to B) it also times each graph call and the gaps between them:
per step, the time in graphs, the eager Python between graphs (a graph break's code, the
next frame's guards) and the rest of the step, outside compiled code. A step during which
torch compiled is left out of the window's figures (named instead); whether each step ran
under grad mode and in training mode is counted; the steps just outside the window are
timed at their starts only (one clock reading a step), which measures what the window's
own timing costs. On CUDA it synchronises around each timed call, inside the window only.

At exit (or SIGTERM) it writes one JSON file per process into COMPILEDIAG_RUNTIME_DIR,
in the shape of compilediag.harness.worker_types.ProcessRuntime. Standard library only.
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
    """`A-B` (or `A`): steps A to B, counted from 1."""
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
        self.steps = 0  # calls of the step entry (or of the first compiled frame's graphs)
        self.step_entry: int | None = None  # the first compiled entry called, by id
        self.by_entry = False  # steps are counted at the entry (else at the first frame)
        self._depth = 0  # compiled entries under way (one called inside another: depth 2)
        self.started = time.perf_counter()
        # the profiling window: totals over complete steps, and the step under way
        self.timing = False
        self.measured_steps = 0
        self.window_s = 0.0
        self.graph_s: dict[str, float] = {}
        self.gap_s: dict[str, float] = {}
        self.outside_s = 0.0
        # the step under way: its start and each graph's entry and exit, as marks (a clock
        # reading; where CUDA is in use, a CUDA event recorded on the current stream, read
        # once the window is over: no synchronisation inside the window)
        self._step_start: Any = 0.0
        self._marks: list[tuple[bool, str, Any]] = []  # (entered, compile id, mark)
        self._pending: list[tuple[Any, list[tuple[bool, str, Any]], Any]] = []
        self._cuda: Any = None  # torch.cuda while CUDA is in use
        self.compiled_steps: list[int] = []  # steps of the window during which torch compiled
        self._compiles_at_start = 0
        self.no_grad_steps = 0  # window steps run with grad mode off
        self.eval_steps = 0  # window steps whose module was in eval mode
        # steps just outside the window, timed start to start without synchronising
        self._plain_start: float | None = None
        self._plain_compiles = 0
        self.plain_step_s: list[float] = []
        self.skip_reasons: list[str] = []  # torch's words for a CUDA-graph skip, as logged
        self.compile_calls: dict[int, dict[str, Any]] = {}  # what torch.compile returned, by id
        self.entered: set[int] = set()  # the compiled entries called
        self._compiling = False  # inside a torch.compile call
        self.backends: list[str] = []  # the backends graphs were handed to, by name
        self.devices: list[str] = []  # the devices of the graphs' example inputs

    def saw_backend(self, compiler: Any, example_inputs: Any) -> None:
        """Which backend a graph goes to (its registered name where torch keeps one:
        `inductor`, `eager`) and on which devices its inputs are."""
        name = ""
        for fn in (compiler, getattr(compiler, "_torchdynamo_orig_backend", None)):
            name = name or getattr(fn, "compiler_name", "") or getattr(fn, "_compiler_name", "")
        name = name or getattr(compiler, "__name__", "")
        if name and name not in self.backends:
            self.backends.append(str(name))
        for x in example_inputs or []:
            device = getattr(getattr(x, "device", None), "type", None)
            if device and device not in self.devices:
                self.devices.append(str(device))

    # -- counting and timing ------------------------------------------------------------

    def wrap(self, fn: Any) -> Any:
        cid, frame = _compile_id()
        if self.first_frame is None and frame is not None and not cid.startswith("!"):
            self.first_frame = frame
        probe = self

        def compiled_graph(*args: Any, **kwargs: Any) -> Any:
            if not probe.enter(cid, frame):
                return fn(*args, **kwargs)
            try:
                return fn(*args, **kwargs)
            finally:
                probe.leave(cid)

        return compiled_graph

    def entry(self, key: int, module: Any = None) -> None:
        """A compiled entry is called (`key`: the compiled object's id; `module`: the
        nn.Module it runs, if any): the first one called at the top level is the step's."""
        self._depth += 1
        self.entered.add(key)
        if self._depth == 1:
            if self.step_entry is None:
                self.step_entry = key
            if key == self.step_entry:
                self.by_entry = True
                self.step(module)

    def compiled_object(self, key: int, what: str) -> None:
        """torch.compile returned an object (`key`, its id) for `what` (a class or function
        name; "" for one torch made inside that call), called from the user's line found
        on the stack."""
        if not what:
            return
        file, line = _user_site()
        self.compile_calls.setdefault(key, {"what": what, "file": file, "line": line})

    def exit_entry(self) -> None:
        self._depth -= 1

    def step(self, module: Any = None) -> None:
        """A step starts (and the one before it ends)."""
        self.steps += 1
        if self.window is None:
            return
        a, b = self.window
        wall = None
        if self.timing or self.steps == a:
            if self.steps == a:
                self._use_cuda_if_initialised()
            wall, mark = time.perf_counter(), self.clock()
            if self.timing:
                self.end_step(mark)
            else:  # the step before the window ends
                self.plain_step(wall)
            self.timing = a <= self.steps <= b
            if self.timing:
                self._step_start, self._marks = mark, []
                self._compiles_at_start = _frames_compiled()
                torch = sys.modules.get("torch")
                if torch is not None and not torch.is_grad_enabled():
                    self.no_grad_steps += 1
                if module is not None and not getattr(module, "training", True):
                    self.eval_steps += 1
                self._plain_start = None
                return
            self.tally()  # the window is over: its marks are read once
            wall = time.perf_counter()  # (after the one wait for the GPU, if it waited)
        self.plain_step(wall)

    def plain_step(self, now: float | None = None) -> None:
        """A step outside the window: timed start to start, one clock reading each, near
        the window (the 32 steps before it and after it), a step that compiled left out."""
        a, b = self.window or (0, 0)
        if not (a - 33 <= self.steps <= b + 33):
            self._plain_start = None
            return
        now = time.perf_counter() if now is None else now
        compiled = _frames_compiled()
        if self._plain_start is not None and compiled == self._plain_compiles:
            self.plain_step_s.append(now - self._plain_start)
        self._plain_start, self._plain_compiles = now, compiled

    def enter(self, cid: str, frame: int | None) -> bool:
        """Count the call; in the window, mark its start (True: its end is to be marked)."""
        self.calls[cid] = self.calls.get(cid, 0) + 1
        if not self.by_entry and frame == self.first_frame and not cid.startswith("!"):
            self.step()
        if not self.timing:
            return False
        self._marks.append((True, cid, self.clock()))
        return True

    def leave(self, cid: str) -> None:
        self._marks.append((False, cid, self.clock()))

    def end_step(self, end: Any) -> None:
        """A step is complete when the next one starts: it counts then, unless torch
        compiled during it (its time would be the compile's, not the step's)."""
        if _frames_compiled() != self._compiles_at_start:
            self.compiled_steps.append(self.steps - 1)
        else:
            self._pending.append((self._step_start, self._marks, end))
        self._marks = []
        if self._cuda is None:
            self.tally()

    def tally(self) -> None:
        """Add the complete steps' marks to the window's totals: each graph's time, the
        time from its end to the next graph's start (its gap), and the time outside
        compiled code (before the step's first graph, after its last)."""
        if not self._pending:
            return
        if self._cuda is not None:
            self._pending[-1][2].synchronize()  # the last mark done: every one before it is
        seconds = self._seconds
        for start, marks, end in self._pending:
            self.measured_steps += 1
            self.window_s += seconds(start, end)
            last: tuple[str, Any] | None = None  # the graph that ran last, and its end
            t0, ran = start, False
            for entered, cid, mark in marks:
                if entered:
                    if last is not None:
                        self.gap_s[last[0]] = self.gap_s.get(last[0], 0.0) + seconds(last[1], mark)
                    elif not ran:  # the step's first graph: what ran before it is outside
                        self.outside_s += seconds(start, mark)
                    t0 = mark
                else:
                    self.graph_s[cid] = self.graph_s.get(cid, 0.0) + seconds(t0, mark)
                    last, ran = (cid, mark), True
            # after the last graph (no graph ran: the whole step) was outside compiled code
            self.outside_s += seconds(last[1], end) if last is not None else seconds(start, end)
        self._pending = []

    def _seconds(self, a: Any, b: Any) -> float:
        if self._cuda is not None:
            return float(a.elapsed_time(b)) / 1e3
        return float(b - a)

    def clock(self) -> Any:
        """A mark: now, or where CUDA is in use a CUDA event recorded now (where the GPU
        will be when it reaches this point of the queued work)."""
        if self._cuda is None:
            return time.perf_counter()
        event = self._cuda.Event(enable_timing=True)
        event.record()
        return event

    def _use_cuda_if_initialised(self) -> None:
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        self._cuda = cuda if cuda is not None and cuda.is_initialized() else None

    # -- the facts --------------------------------------------------------------------

    def facts(self) -> dict[str, Any]:
        """What compilediag reads back (worker_types.ProcessRuntime)."""
        try:  # a window the job ended in: its complete steps
            self.tally()
        except Exception:  # noqa: BLE001 - a CUDA context already gone: those steps unread
            self._pending = []
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
            "steps_at": "entry" if self.by_entry else "frame",
            "window": list(self.window) if self.window else [],
            "profiled": profiled,
            "compiled_steps": list(self.compiled_steps),
            "no_grad_steps": self.no_grad_steps,
            "eval_steps": self.eval_steps,
            "plain_step_ms": [round(x * 1e3, 6) for x in self.plain_step_s],
            "backends": list(self.backends),
            "compile_calls": [
                {**c, "called": key in self.entered} for key, c in self.compile_calls.items()
            ],
            "devices": list(self.devices),
            "wall_s": time.perf_counter() - self.started,
            "cudagraph_skips": skips,
            "cudagraph_skip_reasons": list(dict.fromkeys(self.skip_reasons)),
            "cudagraph_rerecords": rerecords,
        }


_frames: Any = None  # torch._dynamo.utils.counters["frames"], once torch has it


def _frames_compiled() -> int:
    """Frames Dynamo has tried to compile so far in this process (torch's own counter)."""
    global _frames
    if _frames is None:
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is None:
            return 0
        _frames = utils.counters["frames"]
    return int(_frames.get("total", 0))


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
    """Wrap every graph the backend returns from now on, count the calls of compiled
    entries, and listen for CUDA-graph skips; returns the undo."""
    from torch._dynamo.output_graph import OutputGraph

    original = OutputGraph.call_user_compiler

    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        probe.saw_backend(getattr(self, "compiler_fn", None), example_inputs)
        return probe.wrap(original(self, gm, example_inputs))

    OutputGraph.call_user_compiler = call_user_compiler  # type: ignore[method-assign]
    undo_entries = _count_entries(probe)
    listener = _SkipListener(probe)
    for name in CUDAGRAPH_LOGGERS:
        logging.getLogger(name).addHandler(listener)

    def undo() -> None:
        OutputGraph.call_user_compiler = original  # type: ignore[method-assign]
        undo_entries()
        for name in CUDAGRAPH_LOGGERS:
            logging.getLogger(name).removeHandler(listener)

    return undo


def _count_entries(probe: Probe) -> Any:
    """Count the calls of what torch.compile returned: a compiled module's calls (whenever
    it was compiled), and a compiled function's (one compiled from now on). Where this
    torch's wrappers are not where they are looked for, nothing is wrapped: steps are then
    counted at the first compiled frame. Returns the undo."""
    try:
        from torch._dynamo import eval_frame
    except ImportError:
        return lambda: None
    module_class = getattr(eval_frame, "OptimizedModule", None)
    context = getattr(eval_frame, "OptimizeContext", None)
    undo: list[Any] = []
    if module_class is not None and "__call__" in vars(module_class):
        module_call = module_class.__call__

        def optimized_module_call(self: Any, *args: Any, **kwargs: Any) -> Any:
            probe.entry(id(self), getattr(self, "_orig_mod", None))
            try:
                return module_call(self, *args, **kwargs)
            finally:
                probe.exit_entry()

        module_class.__call__ = optimized_module_call
        undo.append(lambda: setattr(module_class, "__call__", module_call))
    if context is not None:
        context_call, own = context.__call__, "__call__" in vars(context)

        def optimize_call(self: Any, fn: Any) -> Any:
            nested = probe._compiling  # torch compiling a module's forward inside the call
            probe._compiling = True
            try:
                compiled = context_call(self, fn)
            finally:
                probe._compiling = nested
            what = "" if nested else type(fn).__name__ if hasattr(fn, "training") else _name_of(fn)
            if (
                not callable(compiled)
                or isinstance(compiled, type)
                or (module_class is not None and isinstance(compiled, module_class))
            ):
                probe.compiled_object(id(compiled), what)
                return compiled
            counted = _counted(probe, compiled, getattr(fn, "__self__", None))
            probe.compiled_object(id(counted), what)
            return counted

        def undo_context() -> None:
            if own:
                context.__call__ = context_call
            else:
                del context.__call__

        context.__call__ = optimize_call
        undo.append(undo_context)
    return lambda: [u() for u in undo]


def _name_of(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return str(name or type(fn).__name__)


def _user_site() -> tuple[str, int]:
    """The innermost frame outside torch and this probe: where the user called
    torch.compile."""
    torch = sys.modules.get("torch")
    paths = (getattr(torch, "__file__", None), __file__)
    skip = tuple(os.path.dirname(p) + os.sep for p in paths if p)
    frame: Any = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("", 0)


def _counted(probe: Probe, compiled: Any, owner: Any) -> Any:
    """A compiled function that tells the probe of each call; torch's own attributes on
    it (what it wraps, its compiler config) kept. `owner`: the object of a compiled bound
    method (a module's `_call_impl` under `module.compile()`)."""
    import functools

    module = owner if hasattr(owner, "training") else None

    @functools.wraps(compiled)
    def entry(*args: Any, **kwargs: Any) -> Any:
        probe.entry(id(entry), module)
        try:
            return compiled(*args, **kwargs)
        finally:
            probe.exit_entry()

    return entry


_written = False


def write(probe: Probe, folder: str) -> None:
    global _written
    if _written or not (probe.calls or probe.compile_calls):
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
