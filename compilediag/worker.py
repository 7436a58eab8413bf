"""The child process: load the model, run eager, compile once, time, compare, write facts.

Run as `python -m compilediag.worker WORKDIR`. The parent sets TORCH_TRACE before this
process imports torch, so the one compile pass is fully traced. The worker writes
WORKDIR/status (the current stage, for the spinner) and WORKDIR/result.json (atomically).
Anything the trace does not carry - timings, output comparison, per-call compile counts,
the cross-check - is measured here.
"""

from __future__ import annotations

import atexit
import difflib
import inspect
import itertools
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from compilediag.errors import COMPILE_FAILED, MODEL_FAILED, USAGE, DiagError, UsageError
from compilediag.fsutil import write_atomic
from compilediag.measure import (
    Step,
    changed_inputs,
    compare_outputs,
    fresh,
    measure,
    sync,
    tensors_of,
)
from compilediag.remedies import apply
from compilediag.report import Environment
from compilediag.serial import from_json, to_json
from compilediag.target import describe_call, find_input_sets, find_model, load_module
from compilediag.torch_formats import is_library_file
from compilediag.worker_types import (
    CallRecord,
    ExplainBreak,
    ExplainResult,
    ModelInfo,
    WorkerFailure,
    WorkerResult,
    WorkerSpec,
)


class Worker:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.spec = from_json(WorkerSpec, (workdir / "spec.json").read_text())
        self.result = WorkerResult()

    def stage(self, text: str) -> None:
        write_atomic(self.workdir / "status", text)

    def finish(self, code: int = 0) -> int:
        write_atomic(self.workdir / "result.json", to_json(self.result))
        return code

    def fail(self, kind: str, code: int, message: str, exc: BaseException | None = None) -> int:
        err = WorkerFailure(kind=kind, message=message)
        if exc is not None:
            err.exception = type(exc).__name__
            err.file, err.line, err.code = user_frame(exc, self.spec.target.path)
        self.result.error = err
        return self.finish(code)

    def run(self) -> int:
        spec = self.spec
        target = spec.target

        self.stage("importing torch")
        import torch

        env = self.result.environment = environment(torch, spec)
        device = env.device
        if device.startswith("cuda") and not torch.cuda.is_available():
            build = f"a CUDA build ({torch.version.cuda})" if torch.version.cuda else "a CPU build"
            return self.fail(
                "usage", USAGE,
                f"--device cuda was asked for, but this torch ({torch.__version__}, {build}) "
                "sees no CUDA device. Run on a machine with an NVIDIA GPU and a CUDA build of "
                "torch, or pass --device cpu.",
            )  # fmt: skip

        self.stage("loading the model")
        try:
            module = load_module(target.path)
            model = find_model(module, target.attr, target.path)
            sets = iter(find_input_sets(module, target, target.path, spec.sweep))
            first = next(sets)
        except DiagError as e:
            return self.fail("usage", USAGE, e.message + (" " + e.hint if e.hint else ""))
        except ModuleNotFoundError as e:
            if e.name:  # a package the model file needs is not installed where we run
                package = e.name.split(".")[0]
                file, line, _ = user_frame(e, target.path)
                at = f" (at {file}:{line})" if file else ""
                return self.fail(
                    "usage", USAGE,
                    f"the model file imports `{e.name}`, which is not installed in this "
                    f"Python ({sys.executable}){at}. Install it (pip install {package}), or "
                    "run compilediag from the environment the model runs in.",
                )  # fmt: skip
            return self.fail("model", MODEL_FAILED, f"{type(e).__name__}: {e}", e)
        except BaseException as e:  # the user's file raised while loading: their bug
            return self.fail("model", MODEL_FAILED, f"{type(e).__name__}: {e}", e)

        backend = spec.backend
        model = to_device(model, device)
        self.result.model = describe_model(model)
        train = spec.train
        # Inference runs with grad off for the whole run - eager, compile, timing - so the
        # compiled graph's grad-mode guard holds and no per-call context manager is timed.
        torch.set_grad_enabled(train)
        step = make_step(torch, train)
        kwargs: dict[str, Any] = {"backend": backend}
        if spec.mode:
            kwargs["mode"] = spec.mode
        if spec.dynamic is not None:
            kwargs["dynamic"] = spec.dynamic
        if spec.remedy is not None:
            apply(torch, spec.remedy)
            kwargs.update(spec.remedy.compile_kwargs)
        try:  # torch checks a backend's name here, before anything runs
            compiled = torch.compile(model, **kwargs)
        except torch._dynamo.exc.InvalidBackend:
            # (listing the backends imports every one: 0.25 s a run asked only on a typo)
            # list_backends() leaves out debug backends; eager and aot_eager are among them
            known = sorted(set(torch._dynamo.list_backends()) | {"eager", "aot_eager"})
            every = set(torch._dynamo.list_backends(exclude_tags=())) | set(known)
            close = difflib.get_close_matches(str(backend), sorted(every), n=1)
            hint = f"Did you mean {close[0]!r}? " if close else ""
            return self.fail(
                "usage", USAGE,
                f"unknown backend {backend!r}. {hint}Backends: {', '.join(known)}.",
            )  # fmt: skip
        skips = watch_cudagraph_skips(torch) if device.startswith("cuda") else None
        eager_out = compiled_out = None
        call0 = None
        # Input sets are taken one at a time: a generator may change the model between calls.
        for i in itertools.count():
            if i and not spec.sweep:
                break  # explain compiles once, on the first inputs
            try:
                call = first if i == 0 else next(sets)
            except StopIteration:
                break
            except DiagError as e:
                return self.fail("usage", USAGE, e.message + (" " + e.hint if e.hint else ""))
            except BaseException as e:
                return self.fail("model", MODEL_FAILED, f"{type(e).__name__}: {e}", e)
            call = to_device(call, device)
            described = describe_call(call)
            self.result.inputs.append(described)
            self.stage(f"running eager, call {i + 1}")
            # Eager and compiled each get their own copy of the inputs: a model that
            # changes them (x.mul_(), a KV cache it appends to) must not hand the compiled
            # run what eager left behind.
            pristine, eager_call = fresh(call), fresh(call)
            try:
                out = step(model, eager_call)
                sync(torch, device)
            except BaseException as e:
                if i == 0 and not target.shapes and not target.inputs:
                    # the file's own get_inputs() does not run: a bug in the model file
                    return self.fail("model", MODEL_FAILED, f"{type(e).__name__}: {e}", e)
                # inputs the user typed (--input, --shapes), or a later input set after the
                # model ran: the inputs are wrong, not the model
                what = (
                    "--input" if target.inputs and not target.shapes
                    else f"--shapes entry {i + 1}" if target.shapes
                    else f"input set {i + 1}"
                )  # fmt: skip
                return self.fail(
                    "usage", USAGE,
                    f"{what} ({', '.join(described)}) does not fit the model: "
                    f"{type(e).__name__}: {first_line(e)}",
                )  # fmt: skip
            if i == 0:
                eager_out, call0 = out, pristine
                self.result.mutated_inputs = changed_inputs(torch, model, pristine, eager_call)
            self.stage(f"compiling and running call {i + 1} with {backend}")
            try:
                start_wall, start = time.time(), time.perf_counter()
                out = step(compiled, marked(torch, fresh(pristine), spec))
                sync(torch, device)
                wall = time.perf_counter() - start
            except BaseException as e:
                inner = getattr(e, "inner_exception", None) or e  # BackendCompilerFailed wraps it
                message = f"{type(inner).__name__}: {first_line(inner)}"
                return self.fail("compile", COMPILE_FAILED, message, e)
            if i == 0:
                compiled_out = out
            self.result.calls.append(CallRecord(i, described, wall, start_wall, time.time()))
        self.result.first_call_s = self.result.calls[0].wall_s
        metrics = sys.modules.get("torch._inductor.metrics")  # loaded when Inductor ran
        if metrics is not None:
            self.result.torch_kernel_count = int(metrics.generated_kernel_count)

        self.result.output_check = compare_outputs(torch, eager_out, compiled_out)
        if skips is not None:
            self.result.cudagraph_skips = list(dict.fromkeys(skips.messages))
            counted = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]
            if counted and not skips.messages:
                self.result.cudagraph_skips = [f"torch skipped CUDA graphs {counted} time(s)"]

        if spec.timings:
            self.stage("timing eager vs compiled")
            try:
                self.result.timings = measure(
                    torch, step, model, compiled, call0, device, spec,
                    fresh_each_call=bool(self.result.mutated_inputs),
                )  # fmt: skip
            except BaseException as e:  # timing must never lose the report
                self.result.errors.append(f"timing failed: {type(e).__name__}: {e}")

        if spec.cross_check:
            self.stage("cross-checking with torch._dynamo.explain")
            stop_trace()  # explain's own compile must not show up as findings of this run
            self.result.explain = cross_check(torch, model, fresh(call0))
        self.stage("done")
        return self.finish(0)


def environment(torch: Any, spec: WorkerSpec) -> Environment:
    device = spec.device or ("cuda" if torch.cuda.is_available() else "cpu")
    env = Environment(
        source="run",
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

    if isinstance(obj, (torch.Tensor, torch.nn.Module)):
        return obj.to(device)
    if isinstance(obj, tuple):
        return tuple(to_device(o, device) for o in obj)
    if isinstance(obj, list):
        return [to_device(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def make_step(torch: Any, train: bool) -> Step:
    """One call of the model: inference (the worker runs it with grad off, set once), or
    forward + backward with --train."""

    def infer(fn: Any, call: Any) -> Any:
        args, kwargs = call
        return fn(*args, **kwargs)

    def train_step(fn: Any, call: Any) -> Any:
        args, kwargs = call
        out = fn(*args, **kwargs)
        loss = sum(t.float().sum() for t in tensors_of(torch, out) if t.requires_grad)
        if isinstance(loss, torch.Tensor):
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


def user_frame(exc: BaseException, path: str) -> tuple[str, int, str]:
    """The innermost frame of the user's own code in an exception's traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    target = os.path.realpath(path)
    mine = [f for f in frames if os.path.realpath(f.filename) == target]
    if not mine:
        mine = [f for f in frames if not is_library_file(f.filename)]
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno or 0, (exc.text or "").strip()
    if not mine:
        return "", 0, ""
    f = mine[-1]
    return f.filename, f.lineno or 0, (f.line or "").strip()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--early" in argv[1:] and not await_spec():
        return 0
    worker = Worker(Path(argv[0]))
    try:
        return worker.run()
    except UsageError as e:
        return worker.fail("usage", USAGE, e.message)
    except BaseException as e:  # a bug of ours: keep the traceback for the parent to show
        worker.result.error = WorkerFailure(
            kind="internal", message=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()
        )
        return worker.finish(70)


def await_spec() -> bool:
    """An early worker (started while the CLI parses its options) imports torch, the slow
    part of its start, then waits for the CLI to write the spec and say "go" on stdin. It
    is told nothing, or stopped, when the options turn out wrong."""
    import torch  # noqa: F401

    go = sys.stdin.readline().strip() == "go"
    devnull = os.open(os.devnull, os.O_RDONLY)  # the model gets no stdin, as a late worker
    os.dup2(devnull, 0)
    os.close(devnull)
    return go


def exit_now(code: int) -> NoReturn:
    """End the worker once its result is written, without the interpreter's teardown.

    Freeing torch's objects one by one at exit takes 1-1.5 s of CPU after a compile
    (measured on 2.13, a bare compile-and-call script pays it too) and produces nothing:
    the result is on disk. The exit handlers still run, so the trace's log handler is
    flushed and closed and torch's compile workers are told to stop.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
