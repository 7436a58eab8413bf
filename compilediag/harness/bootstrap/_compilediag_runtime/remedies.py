"""`compilediag run --try-fixes`: the remedies of a run, made in the job's own process with
no edit of its code. $COMPILEDIAG_REMEDY names them (one, or several joined by "+": the kept
ones measured together):

- `foreach` / `fused`: each optimizer torch.optim makes gets foreach=True (fused=True),
  where the job left it off (a multi-tensor or one-kernel step instead of a loop over the
  parameters);
- `workers`: each DataLoader made with num_workers=0 gets worker processes (one a core,
  up to 4), and pinned memory where CUDA is there (not kept between epochs: a loader with
  persistent_workers draws its seed once, not each epoch, and shuffles epoch 2 otherwise
  than the job: its losses would differ for that alone);
- `scalars`: torch._dynamo.config.capture_scalar_outputs (a `.item()` stays in the graph);
- `dynamic_ops`: torch._dynamo.config.capture_dynamic_output_shape_ops (nonzero(), unique()
  and the like stay in the graph);
- `cudagraphs`: torch._inductor.config.triton.cudagraphs (CUDA graphs, as
  mode="reduce-overhead" turns on);
- `cudagraphs_marked`: the same, with torch.compiler.cudagraph_mark_step_begin() before
  each call of what torch.compile returned but one further down the same function as the
  call before it (a GAN's generator's backward runs after the discriminator's next call,
  at a later line of the loop: a step begun there would overwrite the generator's saved
  activations), its tensor outputs cloned, and its module's parameters given gradients of
  their own (a loop that calls the model several times a step, gradient accumulation,
  keeps an output, or a gradient, that a later replay overwrites);
- `tf32`: torch.set_float32_matmul_precision("high") (float32 matmuls on TF32 tensor cores);
- `fallback_random`: torch._inductor.config.fallback_random (Inductor draws random numbers
  as eager does: `run --check-numerics` tells a difference of random numbers from an op's).

The constructors are patched once torch is imported (sitecustomize.py arms that), the
settings once torch._dynamo is. What was changed, and at which line of the user's the
object was made, is in `applied` (the probe writes it with its facts). Standard library
only; no torch at import."""

from __future__ import annotations

import functools
import inspect
import os
import sys
from typing import Any

from .torch_state import _user_site

REMEDY_ENV = "COMPILEDIAG_REMEDY"
REMEDIES = (
    "foreach", "fused", "workers", "scalars", "dynamic_ops", "cudagraphs", "cudagraphs_marked",
    "tf32", "fallback_random",
)  # fmt: skip
# the remedies of one run, joined
JOIN = "+"
# remedies.py's settings of torch._dynamo.config
DYNAMO_SETTINGS = {
    "scalars": "capture_scalar_outputs",
    "dynamic_ops": "capture_dynamic_output_shape_ops",
}
MAX_WORKERS = 4

# each change made: {"remedy", "what" (the setting, in code), "was", "file", "line"}
applied: list[dict[str, Any]] = []


def chosen() -> list[str]:
    """The remedies this run makes, in the order named (unknown names left out)."""
    names = os.environ.get(REMEDY_ENV, "").split(JOIN)
    return [n for n in names if n in REMEDIES]


def at_torch_import() -> None:
    """The constructors' and torch's own settings: right after `import torch`, before the
    job makes its optimizer or its DataLoader."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    for name in chosen():
        if name in ("foreach", "fused"):
            _optimizers(torch, name)
        elif name == "workers":
            _loaders(torch)
        elif name == "tf32":
            was = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("high")
            _note(name, 'torch.set_float32_matmul_precision("high")', f'"{was}"', ("", 0))


def at_dynamo_import() -> None:
    """Dynamo's and Inductor's settings, once torch._dynamo is imported (before the job's
    first compile)."""
    for name in chosen():
        if name in DYNAMO_SETTINGS:
            from torch._dynamo import config

            setting = DYNAMO_SETTINGS[name]
            was = getattr(config, setting)
            setattr(config, setting, True)
            _note(name, f"torch._dynamo.config.{setting} = True", str(was), ("", 0))
        elif name == "fallback_random":
            from torch._inductor import config as inductor

            was = inductor.fallback_random
            inductor.fallback_random = True
            _note(name, "torch._inductor.config.fallback_random = True", str(was), ("", 0))
        elif name in ("cudagraphs", "cudagraphs_marked"):
            from torch._inductor import config as inductor

            was = inductor.triton.cudagraphs
            inductor.triton.cudagraphs = True
            what = "torch._inductor.config.triton.cudagraphs = True"
            if name == "cudagraphs_marked":
                what += f"; {MARKED}"
            _note(name, what, str(was), ("", 0))


_marked: bool | None = None  # marked(), read once: it is asked at every compiled call
_last_call: list[tuple[Any, int]] = []  # the code and line of the last compiled call
# cudagraphs_marked's changes, in words
MARKED = (
    "torch.compiler.cudagraph_mark_step_begin() before each call of a compiled model but "
    "one further down the same function as the call before it, its outputs cloned, its "
    "parameters' gradients their own"
)


def marked() -> bool:
    """Each call of what torch.compile returned is a step of its own for CUDA graphs
    (hooks.py calls `before_call` and `after_call` around the outermost one)."""
    global _marked
    if _marked is None:
        _marked = "cudagraphs_marked" in chosen()
    return _marked


def before_call(torch: Any, module: Any, at: tuple[Any, int]) -> None:
    """A new CUDA-graph step at a call from `at` (the caller's code and line), unless the
    call before it was from the same code at an earlier line (the loop goes on: a GAN's
    generator, then its discriminator, before the generator's backward); each of the
    module's parameters given a gradient of its own where it has none: autograd otherwise
    keeps a backward's output as the .grad (the CUDA graph's memory, which the next replay
    overwrites before autograd adds to it: gradient accumulation's failure)."""
    last = _last_call[0] if _last_call else None
    if last is None or last[0] is not at[0] or last[1] >= at[1]:
        torch.compiler.cudagraph_mark_step_begin()
    _last_call[:] = [at]
    for p in module.parameters() if hasattr(module, "parameters") else ():
        if p.requires_grad and p.grad is None:
            p.grad = torch.zeros_like(p)


def after_call(torch: Any, out: Any) -> Any:
    """The call's tensor outputs cloned: a later replay overwrites the graph's own."""
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, out)


def _note(remedy: str, what: str, was: str, site: tuple[str, int]) -> None:
    applied.append({"remedy": remedy, "what": what, "was": was, "file": site[0], "line": site[1]})


def _optimizers(torch: Any, name: str) -> None:
    """Each torch.optim class whose constructor takes `foreach` (`fused`): made with it on."""
    for cls in vars(torch.optim).values():
        if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
            continue
        init = vars(cls).get("__init__")
        if init is None or name not in inspect.signature(init).parameters:
            continue
        setattr(cls, "__init__", _with_setting(init, name))  # noqa: B010


def _with_setting(init: Any, name: str) -> Any:
    signature = inspect.signature(init)

    @functools.wraps(init)
    def made(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return init(self, *args, **kwargs)  # torch's own error, as without us
        given = bound.arguments
        if given.get(name) is not True and given.get("fused") is not True:
            was = given.get(name, signature.parameters[name].default)
            given[name] = True
            if name == "fused" and "foreach" in signature.parameters:
                given["foreach"] = None  # fused with foreach=True is refused
            _note(name, f"{type(self).__name__}(..., {name}=True)", repr(was), _user_site())
        return init(*bound.args, **bound.kwargs)

    return made


def _loaders(torch: Any) -> None:
    from torch.utils.data import DataLoader

    init = DataLoader.__init__
    signature = inspect.signature(init)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = max(1, min(MAX_WORKERS, cores or 1))

    @functools.wraps(init)
    def made(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return init(self, *args, **kwargs)
        given = bound.arguments
        if not given.get("num_workers", 0):
            given["num_workers"] = workers
            what = f"DataLoader(..., num_workers={workers}"
            if torch.cuda.is_available() and not given.get("pin_memory"):
                given["pin_memory"] = True
                what += ", pin_memory=True"
            _note("workers", what + ")", "num_workers=0", _user_site())
        return init(*bound.args, **bound.kwargs)

    setattr(DataLoader, "__init__", made)  # noqa: B010
