"""The worker's dealings with torch and the model: the environment, moving and stepping
the model, describing it, marking inputs dynamic, watching CUDA-graph skips, the
cross-check with torch._dynamo.explain, and the user's frame of an exception."""

from __future__ import annotations

import inspect
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from compilediag.harness.checks import map_tensors, tensors_of
from compilediag.harness.device_time import Step
from compilediag.harness.profiling import BACKWARD
from compilediag.harness.worker_types import (
    ExplainBreak,
    ExplainResult,
    ModelInfo,
    WorkerSpec,
)
from compilediag.paths import user_frame
from compilediag.report.model import Environment
from compilediag.report.vocabulary import Source


def environment(torch: Any, spec: WorkerSpec) -> Environment:
    device = spec.device or ("cuda" if torch.cuda.is_available() else "cpu")
    env = Environment(
        source=Source.RUN,
        torch=torch.__version__,
        python=sys.version.split()[0],
        device=device,
        backend=spec.backend,
        mode=spec.mode or "default",
        dynamic=spec.dynamic,
        train=spec.train,
        cold=spec.cold,
    )
    if device.startswith("cuda") and torch.cuda.is_available():
        env.device_name = torch.cuda.get_device_name()
    try:
        import triton

        env.triton = triton.__version__
    except Exception:
        pass
    return env


def to_device(obj: Any, device: str) -> Any:
    import torch

    return map_tensors(torch, obj, lambda t: t.to(device), (torch.Tensor, torch.nn.Module))


def make_step(torch: Any, train: bool) -> Step:
    """One call of the model: inference (the worker runs it with grad off, set once), or
    forward + backward with --train."""

    def infer(fn: Any, call: Any) -> Any:
        args, kwargs = call
        return fn(*args, **kwargs)

    from torch.autograd.profiler import record_function

    def train_step(fn: Any, call: Any) -> Any:
        args, kwargs = call
        out = fn(*args, **kwargs)
        loss = sum(t.float().sum() for t in tensors_of(torch, out) if t.requires_grad)
        if isinstance(loss, torch.Tensor):
            with record_function(BACKWARD):  # the backward's part of the step, when profiled
                loss.backward()
        return out

    return train_step if train else infer


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "skipping cudagraphs" in text:
            self.messages.append(" ".join(text.split()))


def watch_cudagraph_skips(torch: Any) -> _Collect:
    """CUDA graphs skipped at run time (a mutated input, a CPU tensor, ...): torch says so
    only as a perf hint, not in the trace, so listen for it (with the user line it names)."""
    torch._logging.set_logs(perf_hints=True)
    handler = _Collect()
    # enabled artifact loggers don't propagate: listen on each (2.11 logs the skip on
    # `cudagraphs`, others on `perf_hints`) and on the module's own logger
    for name in ("", ".__perf_hints", ".__cudagraphs"):
        logging.getLogger("torch._inductor.cudagraph_utils" + name).addHandler(handler)
    logging.getLogger("torch").addHandler(handler)
    return handler


def describe_model(model: Any) -> ModelInfo:
    fn = getattr(model, "forward", model)
    owner = type(model).__name__ if hasattr(model, "forward") else ""
    name = f"{owner}.forward" if owner else getattr(fn, "__qualname__", "")
    try:
        params = [
            p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]  # fmt: skip
    except (TypeError, ValueError):
        params = []
    try:  # where forward is written, under any decorator (transformers' `wrapper`)
        source = inspect.unwrap(getattr(fn, "__func__", fn))
        file = inspect.getsourcefile(source) or ""
        text, line = inspect.getsourcelines(source)
        end_line = line + len(text) - 1
    except (TypeError, OSError, ValueError):
        file, line, end_line = "", 0, 0
    named = getattr(model, "named_modules", None)
    modules = {path: type(m).__name__ for path, m in named() if path} if callable(named) else {}
    return ModelInfo(
        name=name, params=params, file=file, line=line, end_line=end_line, modules=modules
    )


def marked(torch: Any, call: Any, spec: WorkerSpec) -> Any:
    """The call's inputs with the dims a mark_dynamic remedy names marked dynamic."""
    if spec.remedy is not None:
        args, _ = call
        for position, dim in spec.remedy.mark_dynamic:
            if position < len(args) and isinstance(args[position], torch.Tensor):
                torch._dynamo.mark_dynamic(args[position], dim)
    return call


def cross_check(torch: Any, model: Any, call: Any) -> ExplainResult:
    """torch._dynamo.explain on the same inputs; it resets Dynamo and uses its own backend."""
    args, kwargs = call
    torch._dynamo.reset()
    try:
        out = torch._dynamo.explain(model)(*args, **kwargs)  # grad mode as the run set it
    except BaseException as e:
        return ExplainResult(error=f"{type(e).__name__}: {first_line(e)}")
    breaks = []
    for br in out.break_reasons:
        frame = br.user_stack[-1] if br.user_stack else None
        breaks.append(
            ExplainBreak(
                reason=str(br.reason).splitlines()[0] if br.reason else "",
                file=frame.filename if frame else None,
                line=frame.lineno if frame else None,
            )
        )
    return ExplainResult(out.graph_count, out.graph_break_count, breaks)


def stop_trace() -> None:
    import logging

    logging.getLogger("torch.__trace").disabled = True


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def not_installed(e: ModuleNotFoundError, path: str) -> str:
    """The model file at `path` imports a package not installed in this Python: what to do."""
    package = (e.name or "").split(".")[0]
    file, line, _ = user_frame(e, path)
    at = f" (at {file}:{line})" if file else ""
    return (
        f"the model file imports `{e.name}`, which is not installed in this Python "
        f"({sys.executable}){at}. Install it (pip install {package}), or run compilediag "
        "from the environment the model runs in."
    )


def called_from(exc: BaseException, path: str, file: str) -> str:
    """`model.py:23`: the model file's innermost frame, where the exception was raised in
    another `file` of the user's ('' where it was raised in the model file)."""
    target = os.path.realpath(path)
    if not file or os.path.realpath(file) == target:
        return ""
    frames = traceback.extract_tb(exc.__traceback__)
    outer = [f for f in frames if os.path.realpath(f.filename) == target]
    return f"{outer[-1].filename}:{outer[-1].lineno}" if outer else ""


def regional(model: Any, path: str, kwargs: dict[str, Any]) -> Any:
    """--try-fixes' regional compilation: a copy of the model (eager runs the original)
    whose blocks under `path` are each compiled in place, the rest of it eager."""
    import copy

    compiled = copy.deepcopy(model)
    for block in compiled.get_submodule(path):
        block.compile(**kwargs)
    return compiled


def seed(torch: Any, value: int | None) -> None:
    """The same random state in every run (`compilediag fix` compares two runs' outputs)."""
    if value is None:
        return
    import random

    random.seed(value)
    torch.manual_seed(value)
    numpy = sys.modules.get("numpy")  # torch imports it where it is installed
    if numpy is not None:
        numpy.random.seed(value)


def rng_restorer(torch: Any) -> Callable[[], None]:
    """Python's, NumPy's and torch's random states as they are now, and the call that puts
    them back: the compiled call draws what the eager one drew (a model that calls
    random.gauss() picks the same rows in both; before, its outputs read as torch.compile's
    difference)."""
    import random

    numpy = sys.modules.get("numpy")
    python, cpu = random.getstate(), torch.get_rng_state()
    np_state = numpy.random.get_state() if numpy is not None else None
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

    def restore() -> None:
        random.setstate(python)
        torch.set_rng_state(cpu)
        if numpy is not None:
            numpy.random.set_state(np_state)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)

    return restore


def drawn_after(draws: Callable[[], None], step: Callable[[Any, Any], Any]) -> Any:
    """`step`, each of its calls made from the random state `draws` puts back."""

    def call(model: Any, inputs: Any) -> Any:
        draws()
        return step(model, inputs)

    return call
