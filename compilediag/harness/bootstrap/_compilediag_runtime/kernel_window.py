"""The kernel window: torch.profiler over the steps after the profiling window, each
kernel's calls and time, the collectives, and the eager ops a step runs outside graphs; and
when it runs (KernelPlan): a step that holds an evaluation, a checkpoint or a compile is
left out of its rows, and in a process alone the profile runs a training step more in its
place (_KernelWindow.hold; ranks profile the same steps); the steps it held are named."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from .kernel_events import (
    _covered,
    _dtype,
    _in_graph,
    _launched,
    _library_call,
    _outermost_op,
    _shapes,
    _top_kind,
)
from .torch_state import _frames_compiled, distributed, quiet
from .torch_state import say as _say

PROFILE_OUT_ENV = "COMPILEDIAG_PROFILE_OUT"  # "1": the kernel profile kept as a Chrome trace

KERNEL_STEPS = 5  # the steps after the window whose kernels are profiled, at most
# a step this many times the median of the others, and STALL_MS or more over it, stalled:
# the job's own work outside training (a DCGAN's sample images saved at an epoch's first
# step: their copies and grid ops read as 17% of a step's eager ops, with "compute them in
# the compiled forward") or a pause. The kernel profile leaves such a step out as it does one
# that held other work; the window's figures leave it out too (analysis/step/other_work.py)
STALL = 3.0
STALL_MS = 5.0
# record_function ranges torch puts on the GPU's timeline too (not kernels)
ANNOTATIONS = ("## ", "Optimizer.", "Torch-Compiled Region", "CompiledFunction", "ProfilerStep")
COLLECTIVE_KERNELS = ("nccl",)  # NCCL's kernels (ncclDevKernel_..., ncclKernel_...)
STEP_MARK = "## compilediag step"  # a step's start in the kernel profile
REGION = "Torch-Compiled Region"  # Dynamo's record_function around a compiled frame's call
OPTIMIZER_MARK = "## compilediag optimizer"  # an optimizer step's start in the kernel profile
# a Tensor.backward call in the kernel profile: the ops autograd's set-up of the gradients
# runs (ones_like) are backward's, as the window's parts have them, not the rest's top ops
BACKWARD_MARK = "## compilediag backward"
# what a step runs outside compiled code that the profiler names: eager aten ops (the loss,
# a metric, .item()) at the top, and the CUDA runtime's waits no op made
# (torch.cuda.synchronize: the runtime's calls are on the thread's system id)
DEVICE_WAITS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")
REST_OPS = 8  # the costliest of them kept
MAX_COLLECTIVE_CALLS = 4096  # each collective call's own time, in order, kept up to this


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
        self.exposed_ms = 0.0  # ... of it, the time no compute ran beside a collective
        self.steps = 0
        self.step_numbers: list[int] = []  # the job's steps profiled, complete ones
        self._starts: list[float] = []  # their starts (perf_counter)
        self.step_ms: float | None = None  # their mean, start to start: the same steps
        # the steps it ran through that held other work (an evaluation, a checkpoint, a
        # compile): left out of its rows and its steps, a training step more run for each
        # in a process alone (as many as it was started for, at most; no restart of the
        # profiler)
        self.held: list[int] = []
        self.stalled: list[int] = []  # the steps it ran through that stalled, left out too
        self._more = steps
        # each collective call in the order they started: [name, its time (us)], on this
        # rank; set beside the other ranks' same call, what it waited for them
        self.collective_calls: list[list[Any]] = []
        self.step_collectives: list[list[float]] = []  # each step's: _each_step
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
        with quiet():
            self._prof.start()
        self._pause_while_compiling()

    def step(self, number: int) -> None:
        """The job's step `number` begins."""
        from torch.autograd.profiler import record_function

        with record_function(STEP_MARK):  # where the step begins, in the profile
            self.steps += 1
        self.step_numbers.append(number)
        self._starts.append(time.perf_counter())
        if self.steps_left:
            self.steps_left -= 1

    def hold(self) -> None:
        """The step under way holds other work: none of it goes into the rows (OtherWork
        names the work, with its own time), and the profile takes one training step more
        in its place. (Stopping torch.profiler and starting another in one process crashed
        a Lightning job under load: SIGSEGV, 3 runs in 5, torch 2.13 CPU.)"""
        if self.steps_left is None or not self.step_numbers:
            return
        if self.step_numbers[-1] not in self.held:
            self.held.append(self.step_numbers[-1])
            # not where ranks are several: each profiles the same steps (another rank's
            # profiler, stopping a step before, would be waited for in the step run more)
            if self._more > 0 and not distributed(2):
                self._more -= 1
                self.steps_left += 1

    @staticmethod
    def optimizer() -> None:
        """Mark where an optimizer step begins: the profile stops inside the last one (at
        its post-hook), whose range then never closes and whose ops look like the step's
        own top-level ones."""
        from torch.autograd.profiler import record_function

        with record_function(OPTIMIZER_MARK):
            pass

    @staticmethod
    def backward() -> Any:
        """A range around a backward call (BACKWARD_MARK)."""
        from torch.autograd.profiler import record_function

        return record_function(BACKWARD_MARK)

    def _pause_while_compiling(self) -> None:
        """The profiler's CPU ops off while torch compiles (Dynamo's callbacks, a lazy
        backward's too): with_flops reads each op's sizes as ints, which on a compile's fake
        tensors is a guard that pins a dynamic size (`Eq(s17, 32)`: a look's job recompiled
        once more after its kernel profile). A step that compiled is held out anyway."""
        try:
            from torch._dynamo.callback import callback_handler as calls
            from torch.profiler import ProfilerActivity
        except ImportError:
            return
        if not hasattr(self._prof, "toggle_collection_dynamic"):
            return
        prof = self._prof

        def collect(on: bool) -> Any:
            def toggle(_: Any) -> None:
                with quiet():  # (Kineto's words on toggling CPU with GPU activity on)
                    prof.toggle_collection_dynamic(on, [ProfilerActivity.CPU])

            return toggle

        pause, resume = collect(False), collect(True)
        calls.register_start_callback(pause)
        calls.register_end_callback(resume)
        self._undo += [lambda: calls.remove_start_callback(pause),
                       lambda: calls.remove_end_callback(resume)]  # fmt: skip

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
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        bounds = [*self._starts, time.perf_counter()]
        if ended:
            bounds = bounds[:-1]
            del self.step_numbers[len(bounds) - 1 :]
        numbers = list(self.step_numbers)  # each complete step, held ones too
        self.held = [n for n in self.held if n in numbers]
        spans = zip(bounds, bounds[1:], numbers, strict=False)
        own = [(n, b - a) for a, b, n in spans if n not in self.held]
        self.stalled = _stalled(own)
        lengths = [t for n, t in own if n not in self.stalled]
        self.step_numbers = [n for n in numbers if n not in self.held + self.stalled]
        self.steps = len(self.step_numbers)
        if lengths:
            self.step_ms = round(sum(lengths) * 1e3 / len(lengths), 6)
        with quiet():
            self._prof.stop()
        for undo in reversed(self._undo):
            undo()
        self.rows = self._read(self._prof.events(), numbers, ended)
        if os.environ.get(PROFILE_OUT_ENV) != "1":
            # its events freed here, not after the job's facts at exit: 3.5 s of 5 steps on
            # a 2-core CPU, which a run of --try-fixes (no kernel profile) does not have
            self._prof = None

    def export(self, path: str) -> None:
        """The kernel steps as torch.profiler's Chrome trace (after stop(); --profile-out)."""
        if self._prof is not None:
            self._prof.export_chrome_trace(path)

    def _read(self, events: Any, numbers: list[int], ended: bool = False) -> list[dict[str, Any]]:
        """The rows of the steps `numbers` (each complete step's number, in order) but those
        held; where the job `ended` the profile, what began after the last step's start is
        left out (the code after the loop: a final evaluation, a print)."""
        from torch.autograd import DeviceType

        marks = sorted(e.time_range.start for e in events if e.name == STEP_MARK)
        cutoff, rest_cutoff = _cutoffs(events, marks, ended)
        bounds = _bounds(marks, numbers)
        held = [(a, b) for n, a, b in bounds if n in self.held + self.stalled]

        def held_at(t: float) -> bool:
            return any(a <= t < b for a, b in held)

        rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        spans: dict[str, list[tuple[float, float]]] = {}  # a collective's calls, by name
        calls: list[tuple[float, str, float]] = []  # each collective call: start, name, us
        compute: list[tuple[float, float]] = []  # the kernels' (CUDA) or the step's ops' (CPU)
        at: dict[tuple[float, float], float] = {}  # a kernel's span: its launch (CUDA)
        rest: dict[tuple[str, str, str], dict[str, Any]] = {}
        launched_by, flops_to = _launched(events)
        counted: set[int] = set()  # the library calls whose FLOPs a kernel of theirs took
        # the threads the step runs on: those that enter compiled code (not a pin-memory
        # thread's, not the autograd engine's)
        steps_threads = {e.thread for e in events if e.name.startswith(REGION)}

        def add(name: str, kind: str, us: float, shapes: str = "", flops: int = 0, op: str = "",
                table: dict[tuple[str, str, str], dict[str, Any]] = rows,
                dtype: str = "") -> None:  # fmt: skip
            _add_row(table, name, kind, us, shapes, flops, op, dtype)

        for e in events:
            launched = launched_by.get(id(e), e)
            if launched.time_range.start > cutoff or held_at(launched.time_range.start):
                continue
            if e.device_type == DeviceType.CUDA:
                if getattr(e, "is_user_annotation", False) or e.name.startswith(ANNOTATIONS):
                    continue  # a record_function's range on the GPU's timeline, not a kernel
                kind = "generated" if e.name.startswith("triton_") else "device"
                at[(e.time_range.start, e.time_range.end)] = launched.time_range.start
                if e.name.startswith(COLLECTIVE_KERNELS):
                    kind = "communication"
                    spans.setdefault(e.name, []).append((e.time_range.start, e.time_range.end))
                    calls.append((e.time_range.start, e.name, e.time_range.elapsed_us()))
                call = _library_call(launched if launched is not e else None)
                if call is not None and kind == "device":  # a library call's kernel
                    # its FLOPs to its longest kernel (the GEMM, not a memset or a scaling)
                    mine = flops_to.get(call.id) == id(e) and call.id not in counted
                    flops = int(getattr(call, "flops", 0) or 0) if mine else 0
                    counted.update((call.id,) if mine else ())
                    add(e.name, "library", e.time_range.elapsed_us(), _shapes(call), flops,
                        call.name, dtype=_dtype(call))  # fmt: skip
                    continue
                add(e.name, kind, e.time_range.elapsed_us())
                if kind != "communication":
                    compute.append((e.time_range.start, e.time_range.end))
                continue
            top = e.cpu_parent is None and e.time_range.start < rest_cutoff
            if not self.cuda and e.thread in steps_threads and _outermost_op(e):
                compute.append((e.time_range.start, e.time_range.end))
            if top and e.thread in steps_threads and e.name.startswith("aten::"):
                add(e.name, _top_kind(e, self.cuda), e.cpu_time_total, table=rest)
            elif top and e.name.startswith(DEVICE_WAITS):
                add(e.name, "eager", e.cpu_time_total, table=rest)  # (on its own thread id)
            elif e.name.startswith("gloo:"):  # a collective on gloo's threads, its wait in it
                spans.setdefault(e.name, []).append((e.time_range.start, e.time_range.end))
                calls.append((e.time_range.start, e.name, e.time_range.elapsed_us()))
                add(e.name, "communication", e.cpu_time_total)
            elif e.name.startswith("cpp_fused"):
                add(e.name, "generated", e.cpu_time_total)
            elif not self.cuda and e.name.startswith("aten::") and _in_graph(e):
                # (on CUDA its kernels carry it, above)
                flops = int(getattr(e, "flops", 0) or 0)
                add(e.name, "library", e.cpu_time_total, _shapes(e), flops)
        self._finish(rows, spans)
        self._collectives(spans, calls, compute)
        kept = [x for x in bounds if x[0] not in self.held + self.stalled]
        self.step_collectives = _each_step(kept, spans, compute, at)
        self.rest = sorted(rest.values(), key=lambda r: -r["ms"])[:REST_OPS]
        return sorted(rows.values(), key=lambda r: -r["ms"])

    def _finish(
        self, rows: dict[tuple[str, str, str], dict[str, Any]],
        spans: dict[str, list[tuple[float, float]]],
    ) -> None:  # fmt: skip
        """Each row's bytes (a Triton kernel's), and a collective's time as its calls cover
        it (gloo runs a step's collectives on several threads)."""
        for row in rows.values():
            row["bytes"] = self._bytes.get(row["name"], 0)
            if row["name"] in spans:
                row["ms"] = _covered(spans[row["name"]]) / 1e3

    def _collectives(
        self, spans: dict[str, list[tuple[float, float]]], calls: list[tuple[float, str, float]],
        compute: list[tuple[float, float]],
    ) -> None:  # fmt: skip
        """The collectives' time (calls that overlap, once), the part of it no compute ran
        beside, and each call's own time in the order they started."""
        self.collective_calls = [
            [n, round(us, 3)] for _, n, us in sorted(calls)[:MAX_COLLECTIVE_CALLS]
        ]
        collectives = [x for ranges in spans.values() for x in ranges]
        self.collectives_ms = _covered(collectives) / 1e3
        beside = _covered(collectives) + _covered(compute) - _covered(collectives + compute)
        self.exposed_ms = max(0.0, self.collectives_ms - beside / 1e3)


def _stalled(steps: list[tuple[int, float]]) -> list[int]:
    """The steps (number, seconds) over STALL times the others' median and STALL_MS more;
    none where as many as half would be (then the steps just differ) or fewer than 3 ran."""
    if len(steps) < 3:
        return []
    out = []
    for n, t in steps:
        others = statistics.median(u for m, u in steps if m != n)
        if t > STALL * others and (t - others) * 1e3 >= STALL_MS:
            out.append(n)
    return out if 2 * len(out) < len(steps) else []


def _cutoffs(events: Any, marks: list[float], ended: bool) -> tuple[float, float]:
    """Where the rows end (where the job `ended` the profile: at the last step's start), and
    where the rest's ops end: before the last optimizer step too (where the profile stops
    inside it, its ops have no parent left)."""
    cutoff = max(marks) if ended and marks else float("inf")
    last_step = max(marks, default=float("-inf"))
    optimizing = [e.time_range.start for e in events if e.name == OPTIMIZER_MARK]
    last_optimizer = max(optimizing, default=float("-inf"))
    return cutoff, (last_optimizer if last_optimizer > last_step else cutoff)


def _bounds(marks: list[float], numbers: list[int]) -> list[tuple[int, float, float]]:
    """Each step's number, start and end (the next one's start) in the profile."""
    ends = [*marks[1:], float("inf")]
    return list(zip(numbers, marks, ends, strict=False))


def _each_step(
    bounds: list[tuple[int, float, float]], spans: dict[str, list[tuple[float, float]]],
    compute: list[tuple[float, float]], at: dict[tuple[float, float], float],
) -> list[list[float]]:  # fmt: skip
    """Each step's collectives, [its number, their time (ms; calls that overlap, once), of
    it the time no compute ran beside]: a span is its step's where it was launched (a CUDA
    kernel) or began (else), so a step another rank kept waiting can be left out later."""
    collectives = [x for ranges in spans.values() for x in ranges]
    out = []
    for n, a, b in bounds:
        mine = [x for x in collectives if a <= at.get(x, x[0]) < b]
        work = [x for x in compute if a <= at.get(x, x[0]) < b]
        covered = _covered(mine)
        beside = covered + _covered(work) - _covered(mine + work)
        out.append([n, round(covered / 1e3, 6), round(max(0.0, covered - beside) / 1e3, 6)])
    return out


def _add_row(
    table: dict[tuple[str, str, str], dict[str, Any]], name: str, kind: str, us: float,
    shapes: str, flops: int, op: str, dtype: str = "",
) -> None:  # fmt: skip
    """One more call of a kernel or op into its row (by name, kind and shapes)."""
    row = table.setdefault(
        (name, kind, shapes),
        {"name": name, "kind": kind, "calls": 0, "ms": 0.0, "shapes": shapes, "flops": 0,
         "op": op, "dtype": dtype},
    )  # fmt: skip
    row["calls"] += 1
    row["ms"] += us / 1e3
    row["flops"] += flops


class KernelPlan:
    def __init__(self) -> None:
        self.kernels: _KernelWindow | None = None  # torch.profiler after the window
        self._compiles = 0  # torch's frame count at the step under way's start

    def start(self, cuda: bool, steps: int, step: int) -> None:
        self.kernels = _KernelWindow(cuda, steps)
        self._compiles = _frames_compiled()
        self.kernels.step(step)

    def step(self, step: int, other_work: bool) -> bool:
        """Step `step` starts (`other_work`: an evaluation is under way, so the step holds
        it too): True where the profile took it; where its steps are over it stops. The
        step before, where torch compiled in it, is held."""
        kernels = self.kernels
        if kernels is None or kernels.steps_left is None:
            return False
        compiles = _frames_compiled()
        if compiles != self._compiles:
            self._compiles = compiles
            kernels.hold()
        if kernels.steps_left == 0:  # its steps are over
            kernels.stop()
            held = f" (left out: {_numbers(kernels.held)}, other work)" if kernels.held else ""
            _say(f"kernel profile done{held}; the job goes on as it is")
            return False
        kernels.step(step)
        if other_work:
            kernels.hold()
        return True

    def other_work(self, starts: bool) -> None:
        """An evaluation or a checkpoint starts (or ends): the step under way is held."""
        if starts and self.kernels is not None:
            self.kernels.hold()


def _numbers(steps: list[int]) -> str:
    return ("steps " if len(steps) > 1 else "step ") + ", ".join(map(str, steps))
