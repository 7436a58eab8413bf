"""Where the probe marks the parts of a step no graph shows: the optimizer's step, autograd's
backward, the data loader's next batch, a module's switch between training and evaluation,
and GradScaler's skipped steps. Each returns its undo."""

from __future__ import annotations

import contextlib
import functools
import sys
import weakref
from typing import Any

from .probe import Probe


def watch_step_parts(probe: Probe) -> Any:
    """Mark the parts of a step no graph shows: each optimizer step and each backward, from
    the start to the end of what the job calls (`opt.step()`, `loss.backward()`: torch's own
    code around the work included, as the job's line holds it), the data loader's next
    batch, and a module's switch between training and evaluation. Returns the undo."""
    import torch

    undo: list[Any] = []
    compiler = getattr(torch, "compiler", None)
    tracing = getattr(compiler, "is_compiling", None) or (lambda: False)
    undo += _watch_optimizer_steps(probe, tracing)
    undo += _watch_backward(probe, torch)
    undo.append(_watch_modes(probe, torch.nn.Module))

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


MARKED = "_compilediag_marked"  # a step marked here (or a wrapper of one, its attributes copied)


def _watch_optimizer_steps(probe: Probe, tracing: Any) -> list[Any]:
    """Each optimizer step, marked where the job calls it: torch's global step hooks mark
    an optimizer class's first step and wrap the class's step (torch's own wrapper of it,
    which runs the hooks inside a profiler range: some 60 us a step on a CPU, in the job's
    `opt.step()` line and not between the hooks) for the steps after; and an optimizer's
    own `step` where it has one (an LR scheduler's wrapper, made before the first step,
    calls the class's step it found then, not the wrapped one: a look's AdamW under
    StepLR read 0.34 ms where its own clock read 0.45). While Dynamo traces a step,
    neither does anything, so a compiled step's graphs are as they would be. Returns the
    undos."""
    optim = sys.modules.get("torch.optim.optimizer")
    pre = getattr(optim, "register_optimizer_step_pre_hook", None)
    post = getattr(optim, "register_optimizer_step_post_hook", None)
    if pre is None or post is None:
        return []
    outer = [0]  # steps under way that a class's wrapper marks: the hooks leave them be
    wrapped: dict[Any, Any] = {}  # class -> torch's hooked step it had
    own: list[tuple[Any, Any, Any]] = []  # (an optimizer, its own step, ours)

    def before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        if outer[0] or tracing():
            return
        probe.optimizer_enter()
        cls = type(optimizer)
        hooked = vars(cls).get("step")
        if cls not in wrapped and getattr(hooked, "hooked", False):
            wrapped[cls] = hooked
            cls.step = _marked_step(
                probe, hooked, outer, tracing, lambda args: args[0] if args else None
            )
        its = vars(optimizer).get("step")
        if callable(its) and not getattr(its, MARKED, False):  # (one that calls ours: marked)
            held = weakref.ref(optimizer)  # (as the scheduler's wrapper holds it)
            ours = _marked_step(probe, its, outer, tracing, lambda args: held())
            own.append((held, its, ours))
            optimizer.step = ours

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        if not outer[0] and not tracing():
            probe.optimizer_exit(optimizer)

    def undo_classes() -> None:
        for cls, hooked in wrapped.items():
            cls.step = hooked
        wrapped.clear()
        for held, its, ours in own:
            optimizer = held()
            if optimizer is not None and vars(optimizer).get("step") is ours:
                optimizer.step = its
        own.clear()

    return [pre(before_step).remove, post(after_step).remove, undo_classes,
            *_watch_skipped_steps(probe, tracing)]  # fmt: skip


def _marked_step(probe: Probe, hooked: Any, outer: list[int], tracing: Any, whose: Any) -> Any:
    """A `step` (torch's hooked one of an optimizer class, or an optimizer's own), marked
    from its start to its end (its attributes, `hooked` or an LR scheduler's mark among
    them, kept: neither wraps it again); `whose(args)`: the optimizer it steps (None: not
    one to mark)."""

    @functools.wraps(hooked)
    def step(*args: Any, **kwargs: Any) -> Any:
        optimizer = whose(args)
        if outer[0] or optimizer is None or tracing():  # a step inside a step, or traced
            return hooked(*args, **kwargs)
        outer[0] += 1
        probe.optimizer_enter()
        try:
            out = hooked(*args, **kwargs)
        finally:
            outer[0] -= 1
        probe.optimizer_exit(optimizer)
        return out

    setattr(step, MARKED, True)
    return step


def _watch_backward(probe: Probe, torch: Any) -> list[Any]:
    """backward, marked from the start to the end of `Tensor.backward` (autograd's set-up
    of the gradients included: some 30 us on a CPU, in the job's `loss.backward()` line;
    in the kernel profile's steps, a range holds its ops), and where the job calls autograd
    itself (torch.autograd.backward, grad) its engine's call. Dynamo traces or breaks at
    `backward()` by its name, not this attribute. Each backward's outputs are the step's
    loss under --try-fixes. Returns the undos."""
    outer = [0]  # Tensor.backward calls under way, marked
    tensor_backward = torch.Tensor.backward

    @functools.wraps(tensor_backward)
    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if outer[0]:
            return tensor_backward(self, *args, **kwargs)
        marked = probe.mark("b", True)
        held = None if marked else probe.backward_range()  # the kernel profile's steps
        if not marked and held is None:
            return tensor_backward(self, *args, **kwargs)
        outer[0] += 1
        try:
            with held or contextlib.nullcontext():
                return tensor_backward(self, *args, **kwargs)
        finally:
            outer[0] -= 1
            if marked:
                probe.mark("b", False)

    autograd = torch.autograd
    engine_name = (
        "_engine_run_backward" if hasattr(autograd, "_engine_run_backward") else "backward"
    )
    engine = getattr(autograd, engine_name)

    def run_backward(*args: Any, **kwargs: Any) -> Any:
        if probe.losses is not None and args:
            probe.loss(args[0])
        if outer[0] or not probe.mark("b", True):
            return engine(*args, **kwargs)
        try:
            return engine(*args, **kwargs)
        finally:
            probe.mark("b", False)

    torch.Tensor.backward = backward
    setattr(autograd, engine_name, run_backward)
    return [
        lambda: setattr(torch.Tensor, "backward", tensor_backward),
        lambda: setattr(autograd, engine_name, engine),
    ]


def _watch_modes(probe: Probe, module_class: Any) -> Any:
    """Module.train (eval() calls it): a module put in eval mode and back, the span of an
    evaluation however it runs. Returns the undo."""
    train = module_class.train

    def switched_train(self: Any, mode: bool = True) -> Any:
        was = getattr(self, "training", True)
        probe._switching += 1
        try:
            return train(self, mode)
        finally:
            probe._switching -= 1
            if not probe._switching:
                try:
                    probe.mode_switched(self, bool(was), bool(mode))
                except Exception:  # noqa: BLE001 - the probe never breaks the job's train()
                    pass

    module_class.train = switched_train
    return lambda: setattr(module_class, "train", train)


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
