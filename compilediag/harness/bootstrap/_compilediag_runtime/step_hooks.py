"""Where the probe marks the parts of a step no graph shows: the optimizer's step, autograd's
backward, the data loader's next batch, a module's switch between training and evaluation,
and GradScaler's skipped steps. Each returns its undo."""

from __future__ import annotations

import sys
from typing import Any

from .probe import Probe


def watch_step_parts(probe: Probe) -> Any:
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
        if probe.losses is not None and args:
            probe.loss(args[0])
        if not probe.mark("b", True):
            return engine(*args, **kwargs)
        try:
            return engine(*args, **kwargs)
        finally:
            probe.mark("b", False)

    setattr(autograd, engine_name, run_backward)
    undo.append(lambda: setattr(autograd, engine_name, engine))
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
