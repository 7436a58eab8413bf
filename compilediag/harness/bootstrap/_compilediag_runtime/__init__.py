"""compilediag's runtime probe: what a job's compiled code did as it ran, which no trace
holds. Loaded into each process of a `compilediag run` job once it imports torch._dynamo
(sitecustomize.py), and by `compilediag.capture()` in the caller's own process.

It wraps each graph Dynamo compiles, as the backend hands it back, and counts its calls.
A step is the job's step: an optimizer step once the job has made one (from the end of one
optimizer.step() to the end of the next; the first optimizer stepped is the step's), else a
call of the first compiled entry the process calls (the module or function torch.compile
returned), counted whether it ran compiled code or, past the recompile limit, eagerly;
where the entry can't be seen (a module compiled before capture() began on a torch whose
wrapper is not known), a call of the first compiled frame's graphs.

With a profiling window (steps A to B) it splits each step into parts that add up to it:
each forward graph, the eager Python between two graphs of one compiled call (a graph
break's code, the next frame's guards), the backward (each compiled backward graph, the
eager backward between them, the rest of backward), the optimizer step, the data loader's
next batch, and what remains. A step during which torch compiled is left out of the
window's figures (named instead); in steps of a compiled entry, whether each ran under
grad mode and in training mode is counted; the steps just outside the window are timed at
their starts only (one clock reading a step), which measures what the window's own timing
costs. On CUDA each mark is a CUDA event on the current stream, read once after the window:
the parts are then where the GPU's time went (work the CPU did while the GPU was busy
costs none).

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
KERNELS_ENV = "COMPILEDIAG_KERNELS"  # "0": no kernel profile after the window (--no-kernels)
PROFILE_OUT_ENV = "COMPILEDIAG_PROFILE_OUT"  # "1": the kernel profile kept as a Chrome trace


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
    def __init__(self, window: tuple[int, int] | None = None, kernels: bool = True) -> None:
        self.window = window
        self.profile_kernels = kernels  # the kernels, over the steps after the window
        self.calls: dict[str, int] = {}
        self.first_frame: int | None = None
        self.steps = 0  # steps started (of the entry or the first frame; by optimizer: + 1)
        self.step_entry: int | None = None  # the first compiled entry called, by id
        self.by_entry = False  # steps are counted at the entry (else at the first frame)
        self.step_optimizer: int | None = None  # the first optimizer stepped, by id
        self.optimizer_name = ""  # its class
        self.optimizer_options: dict[str, Any] = {}  # its foreach / fused settings
        self.optimizer_steps = 0  # its steps done (those GradScaler skipped too)
        self.optimizer_runs = 0  # optimizer steps that ran, of any optimizer
        self.skipped_steps = 0  # its steps GradScaler skipped (inf or NaN gradients)
        self.compiled_optimizers: set[int] = set()  # optimizers whose step torch.compile got
        self._optimizing = 0  # optimizer steps under way (a compiled step's hooks too)
        self._depth = 0  # compiled entries under way (one called inside another: depth 2)
        self.started = time.perf_counter()
        self.loaders: dict[str, Any] = {}  # the data loader timed: its workers, pinned memory
        self._cuda: Any = None  # torch.cuda while CUDA is in use
        self.skip_reasons: list[str] = []  # torch's words for a CUDA-graph skip, as logged
        self.compile_calls: dict[int, dict[str, Any]] = {}  # what torch.compile returned, by id
        self.entered: set[int] = set()  # the compiled entries called
        self._compiling = False  # inside a torch.compile call
        self.backends: list[str] = []  # the backends graphs were handed to, by name
        self.devices: list[str] = []  # the devices of the graphs' example inputs
        self._new_window()

    def _new_window(self) -> None:
        """The profiling window's figures, empty (again where steps turn out to be an
        optimizer's: a window of entry calls opened before then is dropped)."""
        self.timing = False
        self.measured_steps = 0
        self.per_step: list[list[float]] = []  # each measured step, its ms: see _parts()
        self.window_s = 0.0
        # seconds per part: forward graphs and their gaps, backward graphs and theirs, by
        # compile id; the rest of backward, the optimizer, data, and what remains
        self.graph_s: dict[str, float] = {}
        self.gap_s: dict[str, float] = {}
        self.bgraph_s: dict[str, float] = {}
        self.bgap_s: dict[str, float] = {}
        self.backward_s = 0.0
        self.optimizer_s = 0.0
        self.data_s = 0.0
        self.outside_s = 0.0
        # the step under way: its start and a mark at each part's start and end: (part,
        # entered, compile id, mark), a mark being a clock reading or, where CUDA is in use,
        # a CUDA event recorded on the current stream, read once the window is over
        self._step_start: Any = 0.0
        self._marks: list[tuple[str, bool, str, Any]] = []
        self._pending: list[tuple[Any, list[tuple[str, bool, str, Any]], Any]] = []
        self.compiled_steps: list[int] = []  # steps of the window during which torch compiled
        self._compiles_at_start = 0
        self.no_grad_steps = 0  # window steps run with grad mode off
        self.eval_steps = 0  # window steps whose module was in eval mode
        # steps just outside the window, timed start to start without synchronising
        self._plain_start: float | None = None
        self._plain_compiles = 0
        self.plain_step_s: list[float] = []
        self.kernels: _KernelWindow | None = None  # torch.profiler over the window

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
                out = fn(*args, **kwargs)
            finally:
                probe.mark("g", False, cid)
            probe.time_backward(cid, out)
            return out

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
                if self.step_optimizer is None:
                    self.step(module)
            self.mark("e", True)

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
        if self._depth == 0:
            self.mark("e", False)

    def optimizer_enter(self) -> None:
        self._optimizing += 1
        if self._optimizing == 1:
            self.mark("o", True)
            if self.kernels is not None and self.kernels.steps_left is not None:
                self.kernels.optimizer()

    def optimizer_exit(self, optimizer: Any) -> None:
        """An optimizer step ends: the first optimizer stepped makes the steps its own
        (from then on), and each of its steps ends a step."""
        self._optimizing -= 1
        if self._optimizing:
            return
        self.optimizer_runs += 1
        self._optimizer_step_ended(optimizer, ran=True)

    def optimizer_skipped(self, optimizer: Any) -> None:
        """GradScaler's step found inf or NaN gradients and did not step the optimizer:
        the job's iteration ends all the same (a step with no optimizer part). Without
        this, a mixed-precision job's skipped iteration (its first ones, while the scale
        settles) ran into the next one as one step."""
        self._optimizer_step_ended(optimizer, ran=False)

    def _optimizer_step_ended(self, optimizer: Any, ran: bool) -> None:
        if self.step_optimizer is None:
            self._by_optimizer(optimizer)
        if id(optimizer) != self.step_optimizer:
            if ran:
                self.mark("o", False)
            return
        self.optimizer_steps += 1
        self.skipped_steps += not ran
        self.step()  # the optimizer's part runs to the step's end

    def _by_optimizer(self, optimizer: Any) -> None:
        """Steps are this optimizer's from now on: its first step has ended, so the next
        step is step 2. A window of entry calls opened before is dropped; step 1 compiled."""
        self.step_optimizer = id(optimizer)
        self.optimizer_name = type(optimizer).__name__
        defaults = getattr(optimizer, "defaults", None) or {}
        self.optimizer_options = {
            k: defaults[k] for k in ("foreach", "fused") if isinstance(defaults.get(k), bool)
        }
        if id(optimizer) in self.compiled_optimizers:
            self.optimizer_options["compiled"] = True
        if self.kernels is not None:
            self.kernels.stop()
        self._new_window()
        self.steps = 1
        if self.window and self.window[0] == 1 and _frames_compiled():
            self.compiled_steps.append(1)

    def step(self, module: Any = None) -> None:
        """A step starts (and the one before it ends)."""
        self.steps += 1
        if self.window is None:
            return
        a, b = self.window
        if self.step_optimizer is not None and a == 1:
            a = 2  # step 1 ended before the steps were known to be the optimizer's
        wall = None
        kernels = self.kernels
        if kernels is not None and kernels.steps_left is not None:
            if kernels.steps_left == 0:  # the kernels' steps are over
                kernels.stop()
            else:
                kernels.step()
                return  # not a plain step: the profiler's cost is in it
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
                by_entry = self.step_optimizer is None
                if by_entry and torch is not None and not torch.is_grad_enabled():
                    self.no_grad_steps += 1
                if module is not None and not getattr(module, "training", True):
                    self.eval_steps += 1
                self._plain_start = None
                return
            self.tally()  # the window is over: its marks are read once
            # then the kernels, over as many steps again (at most KERNEL_STEPS): under
            # torch.profiler, whose cost stays out of the window's parts and plain steps
            if self.profile_kernels:
                steps = min(b - a + 1, KERNEL_STEPS)
                self.kernels = _KernelWindow(self._cuda is not None, steps)
                self.kernels.step()
            self._plain_start = None
            return
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
        by_frame = not self.by_entry and self.step_optimizer is None
        if by_frame and frame == self.first_frame and not cid.startswith("!"):
            self.step()
        return self.mark("g", True, cid)

    def mark(self, part: str, entered: bool, cid: str = "") -> bool:
        """In the window, mark where a part of the step starts or ends (`part`: g a forward
        graph, G a backward graph, e a compiled entry, b backward, o the optimizer, d data):
        True if marked."""
        if not self.timing:
            return False
        self._marks.append((part, entered, cid, self.clock()))
        return True

    def time_backward(self, cid: str, out: Any) -> None:
        """In the window, mark the start and end of the backward of this call of a graph:
        the autograd node AOTAutograd made for it (one per call, `CompiledFunctionBackward`)."""
        if not self.timing:
            return
        seen: set[int] = set()
        for x in out if isinstance(out, (list, tuple)) else (out,):
            node = getattr(x, "grad_fn", None)
            if node is None or id(node) in seen or "CompiledFunction" not in node.name():
                continue
            seen.add(id(node))
            node.register_prehook(lambda grads, c=cid: self.mark("G", True, c) and None)
            node.register_hook(lambda ins, outs, c=cid: self.mark("G", False, c) and None)

    def end_step(self, end: Any) -> None:
        """A step is complete when the next one starts: it counts then, unless torch
        compiled during it (its time would be the compile's, not the step's). Its marks
        are read after the window (tally), on CPU as on CUDA: reading them costs no step of
        the window, as the job times its steps."""
        if _frames_compiled() != self._compiles_at_start:
            self.compiled_steps.append(self.steps - 1)
        else:
            self._pending.append((self._step_start, self._marks, end))
        self._marks = []

    def tally(self) -> None:
        """Add the complete steps to the window's totals, each split into its parts."""
        if not self._pending:
            return
        if self._cuda is not None:
            self._pending[-1][2].synchronize()  # the last mark done: every one before it is
        for start, marks, end in self._pending:
            self.measured_steps += 1
            before = self._parts()
            self.window_s += self._seconds(start, end)
            self.split(start, marks, end)
            after = self._parts()
            self.per_step.append(
                [round((b - a) * 1e3, 6) for a, b in zip(before, after, strict=True)]
            )
        self._pending = []

    def _parts(self) -> list[float]:
        """The window's totals so far: the steps, then their parts as Breakdown.parts()
        names them (forward, backward, optimizer, data, the rest)."""
        forward = sum(self.graph_s.values()) + sum(self.gap_s.values())
        backward = self.backward_s + sum(self.bgraph_s.values()) + sum(self.bgap_s.values())
        return [self.window_s, forward, backward, self.optimizer_s, self.data_s, self.outside_s]

    def split(self, start: Any, marks: list[tuple[str, bool, str, Any]], end: Any) -> None:
        """Give each moment of a step to one part, so that the parts add up to the step.
        Inside backward, the optimizer or the data loader (the outermost of them, where one
        holds another: a closure's forward inside an optimizer step), the moment is that
        part's; else in a forward graph, the graph's; else between the end of a graph and
        the start of the next one in the same compiled call (where calls are not seen: the
        same step), the first graph's gap; else what remains. Inside backward: in a backward
        graph, its; between two backward graphs, the gap of the second (its forward ran
        first: the eager backward of the code after it); else the rest of backward."""
        seconds = self._seconds
        outer: list[str] = []  # the parts open that hold others: b, o, d
        graph = bgraph = None  # the forward graph, the backward graph, under way
        last = blast = None  # the graph that ended last (in the compiled call, the backward)
        held = bheld = 0.0  # the time since then, given once it is known whose it is
        calls = 0 if self.by_entry else 1  # compiled calls under way (unseen: always in one)
        prev = start
        for part, entered, cid, mark in [*marks, ("", False, "", end)]:
            s = seconds(prev, mark)
            prev = mark
            where = outer[0] if outer else ""
            if where == "b":
                if bgraph is not None:
                    _add(self.bgraph_s, bgraph, s)
                else:
                    bheld += s
            elif where == "o":
                self.optimizer_s += s
            elif where == "d":
                self.data_s += s
            elif graph is not None:
                _add(self.graph_s, graph, s)
            elif last is not None:
                held += s
            else:
                self.outside_s += s
            if part == "g":
                if entered:
                    if last is not None:
                        _add(self.gap_s, last, held)
                    graph, last, held = cid, None, 0.0
                else:
                    graph, last = None, (cid if calls and not outer else None)
            elif part == "G":
                if entered:
                    if blast is not None:
                        _add(self.bgap_s, cid, bheld)
                    else:
                        self.backward_s += bheld
                    bgraph, blast, bheld = cid, None, 0.0
                else:
                    bgraph, blast = None, cid
            elif part == "e":
                calls += 1 if entered else -1
                if not entered and calls <= 0:  # after the call's last graph: what remains
                    self.outside_s += held
                    calls, last, held = 0, None, 0.0
            elif entered:
                outer.append(part)
            elif part in outer:
                outer.reverse()
                outer.remove(part)
                outer.reverse()
                if part == "b" and "b" not in outer:
                    self.backward_s += bheld
                    bgraph, blast, bheld = None, None, 0.0
        self.outside_s += held  # after the step's last graph
        self.backward_s += bheld

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
            if self.kernels is not None:
                self.kernels.stop(ended=True)
        except Exception:  # noqa: BLE001 - a CUDA context already gone: those steps unread
            self._pending = []
        profiled = None
        n = self.measured_steps
        if n:
            per = 1e3 / n
            step, _, backward, optimizer, data, outside = self._parts()
            profiled = {
                "calls": n,
                "call_ms": step * per,
                "outside_ms": outside * per,
                "backward_ms": backward * per,
                "optimizer_ms": optimizer * per,
                "data_ms": data * per,
                "per_step": self.per_step,
                "regions": [
                    {
                        "compile_id": c,
                        "graph_ms": self.graph_s.get(c, 0.0) * per,
                        "gap_ms": self.gap_s.get(c, 0.0) * per,
                        "backward_ms": self.bgraph_s.get(c, 0.0) * per,
                        "backward_gap_ms": self.bgap_s.get(c, 0.0) * per,
                    }
                    for c in dict.fromkeys([*self.graph_s, *self.bgraph_s])
                ],
            }  # fmt: skip
        rank = os.environ.get("RANK")
        skips, rerecords = _cudagraph_counts()
        return {
            "pid": os.getpid(),
            "rank": int(rank) if rank and rank.isdigit() else None,
            "argv": list(sys.argv),
            "calls": dict(self.calls),
            "first_frame": self.first_frame,
            "steps": self.optimizer_steps if self.step_optimizer is not None else self.steps,
            "steps_at": (
                "optimizer"
                if self.step_optimizer is not None
                else "entry"
                if self.by_entry
                else "frame"
            ),
            "optimizer": self.optimizer_name,
            "optimizer_options": dict(self.optimizer_options),
            "skipped_steps": self.skipped_steps,
            "loaders": dict(self.loaders),
            "kernels": self.kernels.rows if self.kernels is not None else [],
            "kernel_steps": self.kernels.steps if self.kernels is not None else 0,
            "kernel_device": self.kernels.device if self.kernels is not None else "",
            "collectives_ms": self.kernels.collectives_ms if self.kernels is not None else 0.0,
            "rest": self.kernels.rest if self.kernels is not None else [],
            "kernels_off": not self.profile_kernels,
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


KERNEL_STEPS = 5  # the steps after the window whose kernels are profiled, at most
GRAPH_CALL = "## Call CompiledFxGraph"  # Inductor's record_function around a graph's call
# record_function ranges torch puts on the GPU's timeline too (not kernels)
ANNOTATIONS = ("## ", "Optimizer.", "Torch-Compiled Region", "CompiledFunction", "ProfilerStep")
COLLECTIVE_KERNELS = ("nccl",)  # NCCL's kernels (ncclDevKernel_..., ncclKernel_...)
STEP_MARK = "## compilediag step"  # a step's start in the kernel profile
REGION = "Torch-Compiled Region"  # Dynamo's record_function around a compiled frame's call
OPTIMIZER_MARK = "## compilediag optimizer"  # an optimizer step's start in the kernel profile
# what a step runs outside compiled code that the profiler names: eager aten ops (the loss,
# a metric, .item()) at the top, and the CUDA runtime's waits no op made
# (torch.cuda.synchronize: the runtime's calls are on the thread's system id)
DEVICE_WAITS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")
REST_OPS = 8  # the costliest of them kept


class _KernelWindow:
    """torch.profiler over the window's steps: each kernel's calls and time. On CUDA, the
    kernels' device time (CUPTI), and for a generated (Triton) kernel the bytes of the
    tensors it is given; on CPU, each generated (C++) kernel's own time, by a
    record_function put around it for the window (Inductor's code calls its kernels by
    name, from its module). The library calls a graph makes (aten ops inside Inductor's
    graph call) with their shapes, time and torch's FLOP count. The collectives: NCCL's
    kernels on CUDA, gloo's operations on CPU (each on its own stream or thread, the wait
    for the other ranks in its time)."""

    def __init__(self, cuda: bool, steps: int) -> None:
        from torch.profiler import ProfilerActivity, profile

        self.cuda = cuda
        self.steps_left: int | None = steps  # None once stopped
        self.rows: list[dict[str, Any]] = []
        self.collectives_ms = 0.0  # the time any collective ran (calls that overlap, once)
        self.steps = 0
        self.device = ""  # the GPU's name
        if cuda:
            import torch

            self.device = torch.cuda.get_device_name()
        self._bytes: dict[str, int] = {}
        self._undo: list[Any] = []
        # the ops the step ran at its top, outside any graph (the loss, .item(), a copy)
        self.rest: list[dict[str, Any]] = []
        # the CPU's ops too, on CUDA: they make a step longer (an H100 step of a small
        # language model 1.46x as long), but these steps come after the window; they give a
        # library kernel its call (shapes, FLOPs) and name what a step does outside graphs
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        self._prof: Any = profile(activities=activities, record_shapes=True, with_flops=True)
        self._wrap_generated()
        self._prof.start()

    def step(self) -> None:
        from torch.autograd.profiler import record_function

        with record_function(STEP_MARK):  # where the step begins, in the profile
            self.steps += 1
        if self.steps_left:
            self.steps_left -= 1

    @staticmethod
    def optimizer() -> None:
        """Mark where an optimizer step begins: the profile stops inside the last one (at
        its post-hook), whose range then never closes and whose ops look like the step's
        own top-level ones."""
        from torch.autograd.profiler import record_function

        with record_function(OPTIMIZER_MARK):
            pass

    def _wrap_generated(self) -> None:
        try:
            from torch._inductor.codecache import PyCodeCache
        except ImportError:
            return
        modules = list(getattr(PyCodeCache, "modules", []) or [])
        modules += list((getattr(PyCodeCache, "modules_no_attr", {}) or {}).values())
        for module in dict.fromkeys(modules):
            for name, obj in list(vars(module).items()):
                if name.startswith("cpp_fused") and callable(obj):
                    self._swap(module, name, self._timed(name, obj))
                elif name.startswith("triton_") and callable(getattr(obj, "run", None)):
                    self._count_bytes(name, obj)

    def _swap(self, owner: Any, name: str, new: Any) -> None:
        old = getattr(owner, name)
        setattr(owner, name, new)
        self._undo.append(lambda: setattr(owner, name, old))

    @staticmethod
    def _timed(name: str, kernel: Any) -> Any:
        from torch.autograd.profiler import record_function

        def timed(*args: Any, **kwargs: Any) -> Any:
            with record_function(name):
                return kernel(*args, **kwargs)

        return timed

    def _count_bytes(self, name: str, kernel: Any) -> None:
        """The bytes of the tensors a Triton kernel is given, at its first call in the
        window: each read or written once, an in-place one (in_out_ptr) read and written,
        as Inductor's own benchmark counts them where its estimate was not made."""
        run, seen = kernel.run, self._bytes
        names = list(getattr(getattr(kernel, "fn", None), "arg_names", None) or [])

        def run_counted(*args: Any, **kwargs: Any) -> Any:
            if name not in seen:
                total = 0
                for i, x in enumerate(args):
                    if hasattr(x, "element_size"):
                        twice = i < len(names) and names[i].startswith("in_out_ptr")
                        total += x.numel() * x.element_size() * (2 if twice else 1)
                seen[name] = total
            return run(*args, **kwargs)

        setattr(kernel, "run", run_counted)  # noqa: B010 - the instance's, over the class's
        self._undo.append(lambda: vars(kernel).pop("run", None))

    def stop(self, ended: bool = False) -> None:
        """Stop at a step's start (its steps are over), or where the job `ended`: then the
        step begun last did not end (the code after the loop's last step is in its rows)."""
        if self.steps_left is None:  # stopped already
            return
        self.steps_left = None
        if ended:
            self.steps = max(0, self.steps - 1)
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        self._prof.stop()
        for undo in reversed(self._undo):
            undo()
        self.rows = self._read(self._prof.events(), ended)

    def export(self, path: str) -> None:
        """The kernel steps as torch.profiler's Chrome trace (after stop())."""
        self._prof.export_chrome_trace(path)

    def _read(self, events: Any, ended: bool = False) -> list[dict[str, Any]]:
        """The rows; where the job `ended` the profile, what began after the last step's
        start is left out (the code after the loop: a final evaluation, a print)."""
        from torch.autograd import DeviceType

        marks = [e.time_range.start for e in events if e.name == STEP_MARK]
        cutoff = max(marks) if ended and marks else float("inf")
        # the rest's ops: before the last optimizer step too (its ops have no parent left)
        last_step = max(marks, default=float("-inf"))
        optimizing = [e.time_range.start for e in events if e.name == OPTIMIZER_MARK]
        last_optimizer = max(optimizing, default=float("-inf"))
        rest_cutoff = last_optimizer if last_optimizer > last_step else cutoff

        rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        spans: dict[str, list[tuple[float, float]]] = {}  # a collective's calls, by name
        rest: dict[tuple[str, str, str], dict[str, Any]] = {}
        # the op that launched each kernel: torch lists a kernel under its op (name, time)
        launches: dict[tuple[str, float], list[Any]] = {}
        for op in events:
            if op.device_type == DeviceType.CPU:
                for k in getattr(op, "kernels", None) or []:
                    launches.setdefault((k.name, k.duration), []).append(op)
        counted: set[int] = set()  # the library calls whose FLOPs a kernel of theirs took
        # the threads the step runs on: those that enter compiled code (not a pin-memory
        # thread's, not the autograd engine's)
        steps_threads = {e.thread for e in events if e.name.startswith(REGION)}

        def add(
            name: str, kind: str, us: float, shapes: str = "", flops: int = 0, op: str = "",
            table: dict[tuple[str, str, str], dict[str, Any]] = rows,
        ) -> None:  # fmt: skip
            row = table.setdefault(
                (name, kind, shapes),
                {"name": name, "kind": kind, "calls": 0, "ms": 0.0, "shapes": shapes,
                 "flops": 0, "op": op},
            )  # fmt: skip
            row["calls"] += 1
            row["ms"] += us / 1e3
            row["flops"] += flops

        for e in events:
            launched = e
            if e.device_type == DeviceType.CUDA:
                ops = launches.get((e.name, e.time_range.end - e.time_range.start))
                launched = ops.pop(0) if ops else e
            if launched.time_range.start > cutoff:
                continue
            if e.device_type == DeviceType.CUDA:
                if getattr(e, "is_user_annotation", False) or e.name.startswith(ANNOTATIONS):
                    continue  # a record_function's range on the GPU's timeline, not a kernel
                kind = "generated" if e.name.startswith("triton_") else "device"
                if e.name.startswith(COLLECTIVE_KERNELS):
                    kind = "communication"
                    spans.setdefault(e.name, []).append((e.time_range.start, e.time_range.end))
                call = _library_call(launched if launched is not e else None)
                if call is not None and kind == "device":  # a library call's kernel
                    flops = 0 if call.id in counted else int(getattr(call, "flops", 0) or 0)
                    counted.add(call.id)
                    add(e.name, "library", e.time_range.elapsed_us(), _shapes(call), flops,
                        call.name)  # fmt: skip
                    continue
                add(e.name, kind, e.time_range.elapsed_us())
                continue
            top = e.cpu_parent is None and e.time_range.start < rest_cutoff
            if top and e.thread in steps_threads and e.name.startswith("aten::"):
                add(e.name, "eager", e.cpu_time_total, table=rest)
            elif top and e.name.startswith(DEVICE_WAITS):
                add(e.name, "eager", e.cpu_time_total, table=rest)  # (on its own thread id)
            elif e.name.startswith("gloo:"):  # a collective on gloo's threads, its wait in it
                spans.setdefault(e.name, []).append((e.time_range.start, e.time_range.end))
                add(e.name, "communication", e.cpu_time_total)
            elif e.name.startswith("cpp_fused"):
                add(e.name, "generated", e.cpu_time_total)
            elif not self.cuda and e.name.startswith("aten::") and _in_graph(e):
                # (on CUDA its kernels carry it, above)
                flops = int(getattr(e, "flops", 0) or 0)
                add(e.name, "library", e.cpu_time_total, _shapes(e), flops)
        for row in rows.values():
            row["bytes"] = self._bytes.get(row["name"], 0)
            if row["name"] in spans:  # gloo runs a step's collectives on several threads
                row["ms"] = _covered(spans[row["name"]]) / 1e3
        self.collectives_ms = _covered([x for calls in spans.values() for x in calls]) / 1e3
        self.rest = sorted(rest.values(), key=lambda r: -r["ms"])[:REST_OPS]
        return sorted(rows.values(), key=lambda r: -r["ms"])


def _shapes(e: Any) -> str:
    return ", ".join(str(list(s)) for s in (e.input_shapes or []) if s)


def _library_call(op: Any) -> Any:
    """The aten op a compiled graph called that launched a kernel (from the op that
    launched it, up through the aten ops that called it); None outside a graph."""
    if op is None or not op.name.startswith("aten::"):
        return None
    while op.cpu_parent is not None and op.cpu_parent.name.startswith("aten::"):
        op = op.cpu_parent
    return op if _in_graph(op) else None


def _covered(spans: list[tuple[float, float]]) -> float:
    """The time (us) at least one of the spans covers."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _in_graph(e: Any) -> bool:
    """An aten op called by a compiled graph itself (not by another aten op)."""
    p = e.cpu_parent
    if p is None or p.name.startswith("aten::"):
        return False
    while p is not None:
        if p.name.startswith(GRAPH_CALL):
            return True
        p = p.cpu_parent
    return False


def _add(table: dict[str, float], key: str, seconds: float) -> None:
    table[key] = table.get(key, 0.0) + seconds


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
    undo_parts = _watch_step_parts(probe)
    listener = _SkipListener(probe)
    for name in CUDAGRAPH_LOGGERS:
        logging.getLogger(name).addHandler(listener)

    def undo() -> None:
        OutputGraph.call_user_compiler = original  # type: ignore[method-assign]
        undo_entries()
        undo_parts()
        for name in CUDAGRAPH_LOGGERS:
            logging.getLogger(name).removeHandler(listener)

    return undo


def _watch_step_parts(probe: Probe) -> Any:
    """Mark the parts of a step no graph shows: each optimizer step (torch's global step
    hooks; they do nothing while Dynamo traces them, so a compiled step's graphs are as
    they would be), backward (autograd's engine call, behind backward() and grad()), and
    the data loader's next batch. Returns the undo."""
    import torch

    undo: list[Any] = []
    compiler = getattr(torch, "compiler", None)
    tracing = getattr(compiler, "is_compiling", None) or (lambda: False)
    optim = sys.modules.get("torch.optim.optimizer")
    pre = getattr(optim, "register_optimizer_step_pre_hook", None)
    post = getattr(optim, "register_optimizer_step_post_hook", None)
    if pre is not None and post is not None:

        def before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
            if not tracing():
                probe.optimizer_enter()

        def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
            if not tracing():
                probe.optimizer_exit(optimizer)

        undo += [pre(before_step).remove, post(after_step).remove]
        undo += _watch_skipped_steps(probe, tracing)

    autograd = torch.autograd
    engine_name = (
        "_engine_run_backward" if hasattr(autograd, "_engine_run_backward") else "backward"
    )
    engine = getattr(autograd, engine_name)

    def run_backward(*args: Any, **kwargs: Any) -> Any:
        if not probe.mark("b", True):
            return engine(*args, **kwargs)
        try:
            return engine(*args, **kwargs)
        finally:
            probe.mark("b", False)

    setattr(autograd, engine_name, run_backward)
    undo.append(lambda: setattr(autograd, engine_name, engine))

    try:
        from torch.utils.data import dataloader
    except ImportError:
        return lambda: [u() for u in undo]
    loader_iter = dataloader._BaseDataLoaderIter
    next_batch = loader_iter.__next__

    def timed_next(self: Any) -> Any:
        if not probe.mark("d", True):
            return next_batch(self)
        if not probe.loaders:
            probe.loaders = {
                "workers": int(getattr(self, "_num_workers", 0) or 0),
                "pin_memory": bool(getattr(self, "_pin_memory", False)),
            }
        try:
            return next_batch(self)
        finally:
            probe.mark("d", False)

    setattr(loader_iter, "__next__", timed_next)  # noqa: B010
    undo.append(lambda: setattr(loader_iter, "__next__", next_batch))
    return lambda: [u() for u in undo]


def _watch_skipped_steps(probe: Probe, tracing: Any) -> list[Any]:
    """GradScaler.step (torch.amp's, and torch.cuda.amp's where it is its own class): where
    it did not step the optimizer (inf or NaN gradients), the probe is told. Returns the
    undos."""
    import torch

    undo: list[Any] = []
    classes = [getattr(getattr(torch, "amp", None), "GradScaler", None)]
    cuda_amp = sys.modules.get("torch.cuda.amp")  # imported with torch.cuda where it exists
    classes.append(getattr(cuda_amp, "GradScaler", None))
    for cls in dict.fromkeys(c for c in classes if c is not None and "step" in vars(c)):
        original = vars(cls)["step"]

        def step(self: Any, optimizer: Any, *args: Any, _original: Any = original,
                 **kwargs: Any) -> Any:  # fmt: skip
            runs = probe.optimizer_runs
            out = _original(self, optimizer, *args, **kwargs)
            if probe.optimizer_runs == runs and not tracing():
                probe.optimizer_skipped(optimizer)
            return out

        cls.step = step
        undo.append(lambda cls=cls, original=original: setattr(cls, "step", original))
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
    optim = sys.modules.get("torch.optim")
    optimizer = owner if optim is not None and isinstance(owner, optim.Optimizer) else None

    @functools.wraps(compiled)
    def entry(*args: Any, **kwargs: Any) -> Any:
        probe.entry(id(entry), module)
        if optimizer is not None:  # a compiled optimizer.step: its hooks ran only as traced
            probe.compiled_optimizers.add(id(optimizer))
            probe.optimizer_enter()
        try:
            return compiled(*args, **kwargs)
        finally:
            if optimizer is not None:
                probe.optimizer_exit(optimizer)
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
    kernels = probe.kernels
    if kernels is not None and kernels.steps and os.environ.get(PROFILE_OUT_ENV) == "1":
        try:  # torch.profiler's own Chrome trace of the kernel steps (--profile-out)
            kernels.export(os.path.join(folder, "kernels-" + name.removeprefix("runtime-")))
        except Exception:  # noqa: BLE001 - a profile that can't be written: the report stands
            pass


def install_from_env() -> None:
    """The probe of a `compilediag run` job's process, from its environment."""
    folder = os.environ.get(DIR_ENV)
    if not folder:
        return
    steps = os.environ.get(STEPS_ENV, "")
    probe = Probe(parse_window(steps) if steps else None, os.environ.get(KERNELS_ENV) != "0")
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
