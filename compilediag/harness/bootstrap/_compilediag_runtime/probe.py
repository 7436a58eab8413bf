"""The probe: the job's steps, counted and, in the profiling window, split into parts
(what it read, as JSON: facts.py)."""

from __future__ import annotations

import gc
import os
import sys
import time
from typing import Any

from .kernel_window import KERNEL_STEPS, KernelPlan, _KernelWindow
from .other_work import OtherWork
from .parts import BackwardMarks, Mark, Part, StepParts, split_step
from .torch_state import _compile_id, _evaluating, _frames_compiled, _holds, _user_site, load
from .torch_state import say as _say
from .tracing import TracingCost
from .window_reads import WindowReads


def parse_window(text: str) -> tuple[int, int] | None:
    """`A-B` (or `A`): steps A to B, counted from 1."""
    first, _, last = text.strip().partition("-")
    a, b = int(first), int(last or first)
    if a < 1 or b < a:
        raise ValueError(f"{text!r} is not A-B with 1 <= A <= B")
    return a, b


MAX_LOSS_STEPS = 500  # run --try-fixes: the steps whose losses are kept


class Probe:
    def __init__(
        self, window: tuple[int, int] | None = None, kernels: bool = True,
        stop_after: int | None = None, losses: bool = False,
    ) -> None:  # fmt: skip
        self.window = window
        # run --try-fixes: each step's losses (what backward was called on, a scalar), kept
        # as tensors and read at exit (no sync while the job runs), up to MAX_LOSS_STEPS
        self.losses: dict[int, list[Any]] | None = {} if losses else None
        self.stop_after = stop_after  # end the job after its step N (--stop-after)
        self.profile_kernels = kernels  # the kernels, over the steps after the window
        self.calls: dict[str, int] = {}
        self.graphs_made = self.graph_calls = 0  # graphs the backend returned; their calls
        # each outermost call of a compiled entry: hooks._tallied (what the recompile
        # limit's calls ran)
        self.entry_calls: list[list[Any]] = []
        self.first_frame: int | None = None
        self.training_frame: int | None = None  # the first frame a training call ran
        self.steps = 0  # steps started (of the entry or the first frame; by optimizer: + 1)
        self.step_entry: int | None = None  # the first compiled entry called, by id
        self.by_entry = False  # steps are counted at the entry (else at the first frame)
        self.step_optimizer: int | None = None  # the first optimizer stepped, by id
        self.optimizer_name = ""  # its class
        self.optimizer_options: dict[str, Any] = {}  # its foreach / fused settings
        self.optimizer_steps = 0  # its steps done (those GradScaler skipped too)
        self.optimizer_runs = 0  # optimizer steps that ran, of any optimizer
        self.skipped_steps = 0  # its steps GradScaler skipped (inf or NaN gradients)
        self._skipped = False  # the step that just ended was one of them
        self.compiled_optimizers: set[int] = set()  # optimizers whose step torch.compile got
        self._optimizing = 0  # optimizer steps under way (a compiled step's hooks too)
        self._depth = 0  # compiled entries under way (one called inside another: depth 2)
        self.started = time.perf_counter()
        self.window_end_s: float | None = None  # from the install to the window's end
        self.last_step_s: float | None = None  # ... to the last step's end
        self.exit_s: float | None = None  # ... to its facts' writing at exit (writer.py)
        self.wrapper = ""  # the sharding wrapper whose hooks ran (FSDP2)
        self.loaders: dict[str, Any] = {}  # the data loader timed: its workers, pinned memory
        self._cuda: Any = None  # torch.cuda while CUDA is in use
        self.skip_reasons: list[str] = []  # torch's words for a CUDA-graph skip, as logged
        self.compile_calls: dict[int, dict[str, Any]] = {}  # what torch.compile returned, by id
        self.entered: set[int] = set()  # the compiled entries called
        self._compiling = False  # inside a torch.compile call
        self.backends: list[str] = []  # the backends graphs were handed to, by name
        self.devices: list[str] = []  # the devices of the graphs' example inputs
        self.other = OtherWork()  # evaluations between the training steps
        self.tracing: TracingCost | None = None  # Dynamo's tracing by function (hooks.install)
        self._entries: list[str] = []  # the compiled entries under way: Part.ENTRY/EVALUATION
        self.training_modules: set[int] = set()  # the modules training calls ran, by id
        self._switching = 0  # Module.train calls under way (it calls itself on each child)
        self._evaluation_module: int | None = None  # the module whose eval() opened one
        self.backwards = BackwardMarks(self)  # each graph's backward, marked in the window
        self._new_window()

    @property
    def kernels(self) -> _KernelWindow | None:
        return self.plan.kernels

    def _new_window(self) -> None:
        """The profiling window's figures, empty (again where steps turn out to be an
        optimizer's: a window of entry calls opened before then is dropped)."""
        self.timing = False
        self.measured_steps = 0
        self.total = StepParts()  # the measured steps' parts, summed
        # each measured step: its number, its parts (StepParts.row), its graphs' parts
        self.per_step: list[list[float]] = []
        self.step_numbers: list[int] = []
        self.step_regions: list[dict[str, list[float]]] = []
        # the step under way: its start and a mark at each part's start and end: (part,
        # entered, compile id, mark), a mark being a clock reading or, where CUDA is in use,
        # a CUDA event recorded on the current stream, read once the window is over
        self._step_start: Any = 0.0
        self._marks: list[Mark] = []
        self._pending: list[tuple[int, Any, list[Mark], Any]] = []  # (step, start, marks, end)
        self.compiled_steps: list[int] = []  # steps of the window during which torch compiled
        self._compiles_at_start = 0
        self.no_grad_steps = 0  # window steps run with grad mode off
        self.eval_steps = 0  # window steps whose module was in eval mode
        # steps just outside the window, timed start to start without synchronising
        self._plain_start: float | None = None
        self._plain_compiles = 0
        self.plain_step_s: list[float] = []
        self.plain_steps: list[int] = []  # the step each of them timed
        self.plan = KernelPlan()  # torch.profiler over the steps after the window
        self.reads = WindowReads()  # the loop's lines, the collectives of the window's steps
        # Python's garbage collections in each measured step (ms, where any ran), timed by
        # gc.callbacks while the window is open: what a step that stalled spent in them
        self.gc_ms: dict[int, float] = {}
        self._gc_s, self._gc_at = 0.0, 0.0
        # the machine's load as the window ended (the 1-minute average of runnable
        # processes, this job's own among them) and the cores this process may use
        self.load: list[float] = []

    def loss(self, outputs: Any) -> None:
        """backward() was called on `outputs`: a scalar's value is the step's loss."""
        if self.losses is None or self.steps > MAX_LOSS_STEPS:
            return
        tensor = outputs[0] if isinstance(outputs, (tuple, list)) and len(outputs) == 1 else outputs
        numel = getattr(tensor, "numel", None)
        if numel is not None and numel() == 1:
            # before any step is counted (torch.compile off: no entry call counts one) it
            # is the first step's
            self.losses.setdefault(max(self.steps, 1), []).append(tensor.detach())

    def _loss_values(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for step, tensors in (self.losses or {}).items():
            try:
                out[str(step)] = [float(t) for t in tensors]
            except Exception:  # noqa: BLE001 - a tensor that can't be read back: left out
                continue
        return out

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
        self.graphs_made += 1
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
        """A compiled entry is called (`key`: the compiled object's id; `module`: its
        nn.Module, if any): the first one called at the top level is the step's. One under
        no_grad, inference_mode or eval mode is an evaluation's (OtherWork), no step once one
        trained (a look's model, no optimizer: 722 "steps", 622 its evaluation's calls)."""
        self._depth += 1
        self.entered.add(key)
        if self._depth == 1:
            part = Part.EVALUATION if _evaluating(module) else Part.ENTRY
            self.step_entry = key if self.step_entry is None else self.step_entry
            if key == self.step_entry:
                self.by_entry = True
                between = part == Part.EVALUATION and self.other.trained  # (not a step)
                if self.step_optimizer is None and not between:
                    self.step(module)
            self._entries.append(part)
            if part == Part.EVALUATION:
                self.other.work_call("evaluation", self.steps)
                self.plan.other_work(True)
            else:
                self.other.training_call(self.steps)
                if module is not None:
                    self.training_modules.add(id(module))
            self.mark(part, True)

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
        if self._depth == 0 and self._entries:
            part = self._entries.pop()
            self.mark(part, False)
            if part == Part.EVALUATION:
                self.other.work_ended()

    def mode_switched(self, module: Any, was: bool, training: bool) -> None:
        """`module.train(training)` (or eval()) was called, its mode `was` before: outside
        compiled code and the optimizer, a module a training call ran (or one holding it)
        put in eval mode starts an evaluation, however it then runs (compiled or not: a
        Trainer's evaluate() with the uncompiled model, Lightning's validation loop), and
        back in training mode ends it."""
        if self._depth or self._optimizing or was == training:
            return
        opened = self._evaluation_module
        if not training and opened is None and _holds(module, self.training_modules):
            self._evaluation_module = id(module)
            self._evaluation_switch(True)
        elif training and opened is not None and _holds(module, {opened, *self.training_modules}):
            self._evaluation_module = None
            self._evaluation_switch(False)

    def _evaluation_switch(self, starts: bool) -> None:
        if starts:
            self.other.work_call("evaluation", self.steps, call=False)
        else:
            self.other.work_ended()
        self.plan.other_work(starts)
        self.mark(Part.EVALUATION, starts)

    def checkpoint(self, starts: bool) -> bool:
        """torch.save starts or ends: outside compiled code and the optimizer, a checkpoint
        (True: its end is to be told)."""
        if starts and (self._depth or self._optimizing):
            return False
        if starts:
            self.other.work_call("checkpoint", self.steps)
        else:
            self.other.work_ended()
        self.plan.other_work(starts)  # its copies to the host: no step's kernels
        self.mark(Part.CHECKPOINT, starts)
        return True

    def optimizer_enter(self) -> None:
        self._optimizing += 1
        if self._optimizing == 1 and self._evaluation_module is not None:
            # a module trained in eval mode (frozen normalisation): no evaluation after all
            self._evaluation_module = None
            self._evaluation_switch(False)
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
        self._skipped = not ran
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
        self.reads.stop()
        self._new_window()
        self.steps = 1
        self.other.renumber_first_steps()
        if self.window and self.window[0] == 1 and _frames_compiled():
            self.compiled_steps.append(1)

    def step(self, module: Any = None) -> None:
        """A step starts (and the one before it ends); past --stop-after's step, the job
        ends here, its figures written at exit as at any end."""
        self._next_step(module)
        self.last_step_s = time.perf_counter() - self.started
        if self.stop_after is not None and self.steps > self.stop_after:
            self.stop_after = None  # once: the exit's own code may make steps
            if os.environ.get("RANK", "0") == "0":
                sys.stderr.write(
                    f"compilediag: the job ends after its step {self.steps - 1} (--stop-after)\n"
                )
            raise SystemExit(0)

    def _next_step(self, module: Any = None) -> None:
        self.steps += 1
        if self.window is None:
            return
        a, b = self.window
        if self.step_optimizer is not None and a == 1:
            a = 2  # step 1 ended before the steps were known to be the optimizer's
        wall = None
        self.reads.read_collectives(time.perf_counter())
        evaluating = self.other.evaluating or self._evaluation_module is not None
        if self.plan.step(self.steps, evaluating):
            return  # not a plain step: the profiler's cost is in it
        if a - 2 <= self.steps <= a - 1:
            self.reads.step_before(self.other.training_code)
        if self.timing or self.steps == a:
            if self.steps == a:
                self._use_cuda_if_initialised()
                _say(f"timing steps {a}-{b} (--profile-steps)")
            wall, mark, now_ns = time.perf_counter(), self.clock(), time.time_ns()
            if self.timing:
                self.end_step(mark)
            elif not self.reads.learning:  # the step before the window ends
                self.plain_step(wall)
            self.timing = a <= self.steps <= b
            if self.timing:
                self._marks = []
                self.reads.step_started(self.steps, now_ns, self.other.training_code)
                self._gc_s = 0.0
                if self._gc_seen not in gc.callbacks:
                    gc.callbacks.append(self._gc_seen)
                self._compiles_at_start = _frames_compiled()
                torch = sys.modules.get("torch")
                by_entry = self.step_optimizer is None
                if by_entry and torch is not None and not torch.is_grad_enabled():
                    self.no_grad_steps += 1
                if module is not None and not getattr(module, "training", True):
                    self.eval_steps += 1
                self._plain_start = None
                # the step starts once the probe's own work at its boundary is done: that
                # is the tool's cost, not a moment of the job's (its pace line states it)
                self._step_start = self.clock()
                return
            self.reads.step_ended(self.steps - 1, now_ns)
            self.window_end_s = wall - self.started
            self.load = load()
            self.tally()  # the window is over: its marks are read once
            if self._gc_seen in gc.callbacks:
                gc.callbacks.remove(self._gc_seen)
            # then the kernels, over as many steps again (at most KERNEL_STEPS): under
            # torch.profiler, whose cost stays out of the window's parts and plain steps
            if self.profile_kernels:
                steps = min(b - a + 1, KERNEL_STEPS)
                _say(f"steps {a}-{b} timed; profiling the kernels over the next {steps}")
                self.plan.start(self._cuda is not None, steps, self.steps)
            else:
                _say(f"steps {a}-{b} timed; the job goes on as it is")
            self._plain_start = None
            return
        self.plain_step(wall)

    def plain_step(self, now: float | None = None) -> None:
        """A step outside the window: timed start to start, one clock reading each, near
        the window (the 32 steps before it and after it), a step that compiled left out,
        and one GradScaler skipped (no optimizer step: a mixed-precision job's first steps,
        a third faster than its others on an H200, are not its pace)."""
        a, b = self.window or (0, 0)
        if not (a - 33 <= self.steps <= b + 33):
            self._plain_start = None
            return
        now = time.perf_counter() if now is None else now
        compiled = _frames_compiled()
        if self._plain_start is not None and compiled == self._plain_compiles and not self._skipped:
            self.plain_step_s.append(now - self._plain_start)
            self.plain_steps.append(self.steps - 1)
        self._plain_start, self._plain_compiles = now, compiled

    def enter(self, cid: str, frame: int | None) -> bool:
        """Count the call; in the window, mark its start (True: its end is to be marked)."""
        self.calls[cid] = self.calls.get(cid, 0) + 1
        self.graph_calls += 1
        self.other.graph_call(cid)
        if self.training_frame is None and not self.other.evaluating and not cid.startswith("!"):
            self.training_frame = frame
        by_frame = not self.by_entry and self.step_optimizer is None
        if by_frame and frame == self.first_frame and not cid.startswith("!"):
            self.step()
        return self.mark("g", True, cid)

    def mark(self, part: str, entered: bool, cid: str = "") -> bool:
        """In the window, mark where a part of the step starts or ends (a Part): True if
        marked."""
        if not self.timing:
            if not self.reads.learning:
                return False
            self.reads.mark(entered)  # the loop's clock learns where on its lines marks fall
            return True  # (and its end is marked too)
        self.reads.mark(entered)
        self._marks.append((part, entered, cid, self.clock()))
        return True

    def backward_range(self) -> Any:
        """In the kernel profile's steps, a range to hold a backward call's ops; else None."""
        kernels = self.kernels
        return None if kernels is None or kernels.steps_left is None else kernels.backward()

    def time_backward(self, cid: str, out: Any) -> None:
        """In the window, mark the start and end of the backward of each call of a graph
        (parts.BackwardMarks)."""
        if self.timing:
            self.backwards.time(cid, out)

    def end_step(self, end: Any) -> None:
        """A step is complete when the next one starts: it counts then, unless torch
        compiled during it (its time would be the compile's, not the step's). Its marks
        are read after the window (tally), on CPU as on CUDA: reading them costs no step of
        the window, as the job times its steps."""
        if _frames_compiled() != self._compiles_at_start:
            self.compiled_steps.append(self.steps - 1)
        else:
            self._pending.append((self.steps - 1, self._step_start, self._marks, end))
            if self._gc_s:
                self.gc_ms[self.steps - 1] = round(self._gc_s * 1e3, 3)
        self._marks = []

    def _gc_seen(self, phase: str, info: dict) -> None:
        """gc.callbacks: a collection starts or stops (its time added to the step's)."""
        if phase == "start":
            self._gc_at = time.perf_counter()
        elif self._gc_at:
            self._gc_s += time.perf_counter() - self._gc_at
            self._gc_at = 0.0

    def tally(self) -> None:
        """Split each complete step into its parts (parts.split_step) and add it to the
        window's totals, keeping each step's own figures."""
        if not self._pending:
            self.reads.stop()
            return
        if self._cuda is not None:
            self._pending[-1][3].synchronize()  # the last mark done: every one before it is
        self.reads.stop()
        for number, start, marks, end in self._pending:
            parts = split_step(
                start, marks, end, self._seconds, self.by_entry, self.step_optimizer is not None
            )
            self.measured_steps += 1
            self.total.add(parts)
            self.per_step.append(parts.row())
            self.step_numbers.append(number)
            self.step_regions.append(parts.regions())
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
