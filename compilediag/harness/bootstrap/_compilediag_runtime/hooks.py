"""Where the probe hooks into torch: the backend's compiled graphs, the compiled entries
torch.compile returns (the parts of a step no graph shows: step_hooks), torch.save, FSDP2's
hooks, and torch's CUDA-graph skip log. Each hook returns its undo."""

from __future__ import annotations

import functools
import logging
import sys
import time
from typing import Any

from . import remedies
from .probe import Probe
from .step_hooks import watch_step_parts
from .tracing import TracingCost


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
    import torch

    probe.tracing = TracingCost(torch)  # Dynamo's tracing, by function (torch's profiler)
    probe.tracing.start()
    undo_entries = _count_entries(probe)
    undo_parts = watch_step_parts(probe)
    undo_saves = _watch_checkpoints(probe)
    undo_fsdp = _watch_fsdp(probe)
    listener = _SkipListener(probe)
    for name in CUDAGRAPH_LOGGERS:
        logging.getLogger(name).addHandler(listener)

    def undo() -> None:
        OutputGraph.call_user_compiler = original  # type: ignore[method-assign]
        if probe.tracing is not None:
            probe.tracing.stop()
        undo_entries()
        undo_parts()
        undo_saves()
        undo_fsdp()
        probe.backwards.undo()
        for name in CUDAGRAPH_LOGGERS:
            logging.getLogger(name).removeHandler(listener)

    return undo


def _watch_checkpoints(probe: Probe) -> Any:
    """torch.save outside compiled code: a checkpoint, the job's other work (OtherWork).
    Returns the undo."""
    import torch

    save = torch.save

    def checkpoint_save(*args: Any, **kwargs: Any) -> Any:
        if not probe.checkpoint(True):
            return save(*args, **kwargs)
        try:
            return save(*args, **kwargs)
        finally:
            probe.checkpoint(False)

    torch.save = checkpoint_save
    return lambda: setattr(torch, "save", save)


# FSDP's hooks, where each module defines them (a class's methods, or the module's own
# functions), and what each is (a Part.HOOKS mark's compile-id field): FSDP2's parameter
# group's, called by its module's forward and backward hooks; FSDP1's, called by its
# FullyShardedDataParallel.forward (by the names that module imported) and registered on
# each forward's tensors (by _runtime_utils' names)
FSDP_HOOKS: dict[str, tuple[str, str, dict[str, str]]] = {
    "torch.distributed.fsdp._fully_shard._fsdp_param_group": ("FSDP2", "FSDPParamGroup", {
        "pre_forward": "f+", "post_forward": "f-", "pre_backward": "", "post_backward": "",
    }),
    "torch.distributed.fsdp.fully_sharded_data_parallel": ("FSDP1", "", {
        "_root_pre_forward": "", "_pre_forward": "f+", "_post_forward": "f-",
    }),
    "torch.distributed.fsdp._runtime_utils": ("FSDP1", "", {
        "_pre_backward_hook": "", "_post_backward_hook": "", "_post_backward_final_callback": "",
    }),
}  # fmt: skip


def _watch_fsdp(probe: Probe) -> Any:
    """FSDP's hooks (FSDP2's `fully_shard`, FSDP1's FullyShardedDataParallel): the unshard
    before each module's forward and backward (all-gathers, the waits in them), the reshard
    after its forward and the reduce-scatter after its backward, marked as the wrapper's
    (Part.HOOKS). Patched when the job imports FSDP (importing it here would cost a job that
    doesn't use it a second); where torch traces one (compiled autograd, a traced FSDP1
    forward), it traces torch's own. Returns the undo."""
    import importlib.abc

    done: list[Any] = []

    def patch(module: Any) -> None:
        wrapper, owner_name, hooks = FSDP_HOOKS[module.__name__]
        owner = getattr(module, owner_name, None) if owner_name else module
        for name, kind in hooks.items():
            original = vars(owner).get(name) if owner is not None else None
            if original is None:
                continue
            setattr(owner, name, _timed_hook(probe, original, wrapper, kind))
            done.append(lambda owner=owner, name=name, original=original: setattr(
                owner, name, original))  # fmt: skip

    class Finder(importlib.abc.MetaPathFinder):
        """Patches FSDP's hooks once their module has run."""

        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name not in FSDP_HOOKS:
                return None
            import importlib.machinery

            spec = importlib.machinery.PathFinder.find_spec(name, path)
            loader = getattr(spec, "loader", None)
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            run = loader.exec_module

            def exec_module(module: Any) -> None:
                run(module)
                patch(module)

            loader.exec_module = exec_module
            return spec

    for name in FSDP_HOOKS:
        if name in sys.modules:
            patch(sys.modules[name])
    finder = Finder()
    sys.meta_path.insert(0, finder)

    def undo() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for u in done:
            u()

    return undo


def _timed_hook(probe: Probe, original: Any, wrapper: str, kind: str) -> Any:
    compiler = getattr(sys.modules.get("torch"), "compiler", None)
    compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

    @functools.wraps(original)
    def hook(*args: Any, **kwargs: Any) -> Any:
        if compiling():
            return original(*args, **kwargs)
        probe.wrapper = wrapper
        if not probe.mark("w", True, kind):
            return original(*args, **kwargs)
        try:
            return original(*args, **kwargs)
        finally:
            probe.mark("w", False, kind)

    return hook


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
            outermost = _marked_step(probe, getattr(self, "_orig_mod", None))
            probe.entry(id(self), getattr(self, "_orig_mod", None))
            try:
                out = _tallied(probe, id(self), functools.partial(module_call, self), args, kwargs)
            finally:
                probe.exit_entry()
            return remedies.after_call(sys.modules["torch"], out) if outermost else out

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


def _counted(probe: Probe, compiled: Any, owner: Any) -> Any:
    """A compiled function that tells the probe of each call; torch's own attributes on
    it (what it wraps, its compiler config) kept. `owner`: the object of a compiled bound
    method (a module's `_call_impl` under `module.compile()`)."""

    module = owner if hasattr(owner, "training") else None
    optim = sys.modules.get("torch.optim")
    optimizer = owner if optim is not None and isinstance(owner, optim.Optimizer) else None

    @functools.wraps(compiled)
    def entry(*args: Any, **kwargs: Any) -> Any:
        outermost = optimizer is None and _marked_step(probe, module)
        probe.entry(id(entry), module)
        if optimizer is not None:  # a compiled optimizer.step: its hooks ran only as traced
            probe.compiled_optimizers.add(id(optimizer))
            probe.optimizer_enter()
        try:
            out = _tallied(probe, id(entry), compiled, args, kwargs)
        finally:
            if optimizer is not None:
                probe.optimizer_exit(optimizer)
            probe.exit_entry()
        return remedies.after_call(sys.modules["torch"], out) if outermost else out

    return entry


MAX_ENTRY_CALLS = 4096  # outermost calls of compiled entries tallied, the first ones


def _tallied(probe: Probe, key: int, call: Any, args: Any, kwargs: Any) -> Any:
    """`call(*args, **kwargs)`, a compiled entry's (`key`: its id), tallied where it is
    outermost: [its step, the entry's id, its tensors' shapes (`8x16, 8`), whether a graph
    ran in it, whether one was made, its time (ms, the host's clock: on CUDA the
    launches'), the first tensor's elements]. Past the recompile limit a call that ran no
    graph and made none ran eagerly."""
    if probe._depth != 1 or len(probe.entry_calls) >= MAX_ENTRY_CALLS:
        return call(*args, **kwargs)
    made, ran, start = probe.graphs_made, probe.graph_calls, time.perf_counter()
    try:
        return call(*args, **kwargs)
    finally:
        took = (time.perf_counter() - start) * 1e3
        _tally(probe, key, args, kwargs, [probe.graph_calls > ran, probe.graphs_made > made, took])


def _tally(probe: Probe, key: int, args: Any, kwargs: Any, seen: list[Any]) -> None:
    """Never a fault of the job's: an argument whose shape can't be read is left out."""
    ran, made, took = seen
    tensor = getattr(sys.modules.get("torch"), "Tensor", ())
    try:
        # the shapes as torch keeps them (torch.Size): put in words at exit (facts.py), not
        # at every call of the job's
        shapes = tuple(x.shape for x in (*args, *kwargs.values()) if isinstance(x, tensor))[:4]
    except Exception:  # noqa: BLE001 - a tensor subclass whose shape can't be read
        shapes = ()
    probe.entry_calls.append([probe.steps, key, shapes, ran, made, took])


def _marked_step(probe: Probe, module: Any) -> bool:
    """--try-fixes' `cudagraphs_marked`: a new CUDA-graph step begins at an outermost call
    of a compiled entry but one further down the function of the call before it,
    `module`'s gradients its own (True: this call's outputs are to be cloned)."""
    if probe._depth or not remedies.marked():
        return False
    caller = sys._getframe(2)  # the job's frame that called the entry (its wrapper's caller)
    remedies.before_call(sys.modules["torch"], module, (caller.f_code, caller.f_lineno))
    return True
