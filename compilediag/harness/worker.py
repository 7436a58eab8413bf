"""The child process: load the model, compile once, run eager, time, compare, write facts.

Run as `python -m compilediag.harness.worker WORKDIR`. The parent sets TORCH_TRACE before this
process imports torch, so the one compile pass is fully traced. The worker writes
WORKDIR/status (the current stage, for the progress line), WORKDIR/result.json
(atomically) and, where it timed, WORKDIR/threads.json (the threads the timing ran with
and the one-thread cross-check: harness/threads.py's Trust).
Anything the trace does not carry - timings, output comparison, per-call compile counts,
the cross-check - is measured here.
"""

from __future__ import annotations

import atexit
import difflib
import itertools
import os
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from compilediag.errors import COMPILE_FAILED, MODEL_FAILED, USAGE, DiagError, UsageError
from compilediag.fixes.remedies import apply
from compilediag.fsutil import write_atomic
from compilediag.harness.bootstrap._compilediag_runtime.tracing import TracingCost
from compilediag.harness.checks import (
    changed_inputs,
    compare_outputs,
    fresh,
    map_tensors,
    sync,
    tensors_of,
)
from compilediag.harness.measure import measure
from compilediag.harness.numerics.diagnose import custom_op_checks, numerics
from compilediag.harness.phases import PhaseClock
from compilediag.harness.serving.cudagraphs import records_cuda_graphs
from compilediag.harness.serving.replay import serve, served_step, stream_calls
from compilediag.harness.target import (
    describe_call,
    find_input_sets,
    find_model,
    load_module,
    misfit,
)
from compilediag.harness.threads import Trust, Watch, timing_threads
from compilediag.harness.worker_torch import (
    called_from,
    cross_check,
    describe_model,
    drawn_after,
    environment,
    first_line,
    make_step,
    marked,
    not_installed,
    regional,
    rng_restorer,
    seed,
    stop_trace,
    to_device,
    user_frame,
    watch_cudagraph_skips,
)
from compilediag.harness.worker_types import (
    CallRecord,
    WorkerFailure,
    WorkerResult,
    WorkerSpec,
)
from compilediag.report.model import Tracing
from compilediag.report.serial import from_json, from_plain, to_json


class Worker:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.spec = from_json(WorkerSpec, (workdir / "spec.json").read_text())
        self.result = WorkerResult()
        self._grads: list[list[Any]] = []  # fix --train: the first call's, eager and compiled
        self._threads_at_import = 0  # torch's intra-op threads before the model file ran
        self._told = (0.0, "")  # the last progress line written, and when
        self._first: Any = None  # serving: get_inputs()'s call, the requests' base
        self._draws: Any = None  # the random state the first call started from: its restorer
        self.clock = PhaseClock()  # what this run took, phase by phase

    def stage(self, text: str) -> None:
        self.clock.mark(text)
        write_atomic(self.workdir / "status", text)

    def progress(self, text: str) -> None:
        """A stage's progress (a timing block): written at most every PROGRESS_S, a new
        phase at once; between timed blocks, never inside one (no fsync: the line is
        gone with the run)."""
        self.clock.mark(text)
        (last, said), now = self._told, time.monotonic()
        if now - last < PROGRESS_S and text.split(":")[0] == said.split(":")[0]:
            return
        self._told = (now, text)
        tmp = self.workdir / ".status.tmp"
        try:
            tmp.write_text(text)
            os.replace(tmp, self.workdir / "status")
        except OSError:
            pass

    def finish(self, code: int = 0) -> int:
        self.clock.mark("done")
        self.result.phases_s = self.clock.rounded()
        write_atomic(self.workdir / "result.json", to_json(self.result))
        return code

    def fail(self, kind: str, code: int, message: str, exc: BaseException | None = None) -> int:
        err = WorkerFailure(kind=kind, message=message)
        if exc is not None:
            err.exception = type(exc).__name__
            err.file, err.line, err.code = user_frame(exc, self.spec.target.path)
            err.called_from = called_from(exc, self.spec.target.path, err.file)
        self.result.error = err
        return self.finish(code)

    def run(self) -> int:
        """The run, step by step; a step that fails records why (`fail`) and stops it."""
        try:
            torch = self.import_torch()
            seed(torch, self.spec.seed)
            model, sets = self.load_model()
            model = to_device(model, self.result.environment.device)  # type: ignore[union-attr]
            self.result.model = describe_model(model)
            # Inference runs with grad off for the whole run - eager, compile, timing - so
            # the compiled graph's grad-mode guard holds and no per-call context manager is
            # timed.
            torch.set_grad_enabled(self.spec.train)
            step = make_step(torch, self.spec.train)
            if self.result.serving is not None:  # the stream's calls in its serving mode
                step = served_step(torch, step, self.result.serving.mode)
            self.stage("setting up torch.compile")  # (its tracing clock imports Dynamo)
            cost = TracingCost(torch)
            cost.start()
            try:
                compiled = self.compile_model(torch, model)
                skips = self.watch_cudagraphs(torch)
                eager_out, compiled_out, call0 = self.run_calls(torch, step, model, compiled, sets)
            finally:
                cost.stop()
            summary = cost.summary()
            self.result.tracing = from_plain(Tracing, summary) if summary is not None else None
            self.after_calls(torch, eager_out, compiled_out, skips)
            if self.result.serving is not None:
                device = self.result.environment.device  # type: ignore[union-attr]
                self.result.serving = serve(
                    torch, model, compiled, to_device(self._first, device), self.result.serving,
                    self.spec.compile_kwargs(), device, self.stage,
                )  # fmt: skip
            self.keep_outputs(torch, eager_out, compiled_out)
            self.time_calls(torch, step, model, compiled, call0)
            self.run_cross_check(torch, model, call0)
            self.check_numerics(torch, model, call0, eager_out, compiled_out)
        except _Stopped as stopped:
            return stopped.code
        self.stage("done")
        return self.finish(0)

    def stop(
        self, kind: str, code: int, message: str, exc: BaseException | None = None
    ) -> _Stopped:
        """Record why the run failed (`fail`), as the exception that ends it."""
        return _Stopped(self.fail(kind, code, message, exc))

    def import_torch(self) -> Any:
        self.stage("importing torch")
        import torch

        self._threads_at_import = torch.get_num_threads()
        env = self.result.environment = environment(torch, self.spec)
        if env.device.startswith("cuda") and not torch.cuda.is_available():
            build = f"a CUDA build ({torch.version.cuda})" if torch.version.cuda else "a CPU build"
            raise self.stop(
                "usage", USAGE,
                f"--device cuda was asked for, but this torch ({torch.__version__}, {build}) "
                "sees no CUDA device. Run on a machine with an NVIDIA GPU and a CUDA build of "
                "torch, or pass --device cpu.",
            )  # fmt: skip
        return torch

    def load_model(self) -> tuple[Any, Iterator[Any]]:
        """The model and its input sets, the first one taken (a file that can't give one
        fails here, before anything compiles)."""
        target = self.spec.target
        self.stage("loading the model")
        try:
            for folder in reversed(self.spec.search_path):  # behind the file's own folder
                sys.path.insert(0, folder)
            module = load_module(target.path)
            model = find_model(module, target.attr, target.path)
            sets = iter(find_input_sets(module, target, target.path, self.spec.sweep))
            first = next(sets)
            if target.stream:  # serving: the sweep is the stream's distinct requests
                torch = sys.modules["torch"]
                self.result.serving, sets = stream_calls(
                    torch, module, model, first, target.requests, target.serving_mode,
                    target.serving_max,
                )  # fmt: skip
                self._first, first = first, next(sets)
        except DiagError as e:
            raise self.stop("usage", USAGE, e.message + (" " + e.hint if e.hint else "")) from None
        except ModuleNotFoundError as e:
            if e.name:  # a package the model file needs is not installed where we run
                raise self.stop("usage", USAGE, not_installed(e, target.path)) from None
            raise self.stop("model", MODEL_FAILED, f"{type(e).__name__}: {e}", e) from None
        except BaseException as e:  # the user's file raised while loading: their bug
            raise self.stop("model", MODEL_FAILED, f"{type(e).__name__}: {e}", e) from None
        return model, itertools.chain([first], sets)

    def compile_model(self, torch: Any, model: Any) -> Any:
        spec, kwargs = self.spec, self.spec.compile_kwargs()
        if spec.remedy is not None:
            apply(torch, spec.remedy)
            kwargs.update(spec.remedy.compile_kwargs)
        try:  # torch checks a backend's name here, before anything runs
            if spec.remedy is not None and spec.remedy.regional:
                return regional(model, spec.remedy.regional, kwargs)
            return torch.compile(model, **kwargs)
        except torch._dynamo.exc.InvalidBackend:
            # (listing the backends imports every one: 0.25 s a run asked only on a typo)
            # list_backends() leaves out debug backends; eager and aot_eager are among them
            known = sorted(set(torch._dynamo.list_backends()) | {"eager", "aot_eager"})
            every = set(torch._dynamo.list_backends(exclude_tags=())) | set(known)
            close = difflib.get_close_matches(str(spec.backend), sorted(every), n=1)
            hint = f"Did you mean {close[0]!r}? " if close else ""
            raise self.stop(
                "usage", USAGE,
                f"unknown backend {spec.backend!r}. {hint}Backends: {', '.join(known)}.",
            ) from None  # fmt: skip

    def watch_cudagraphs(self, torch: Any) -> Any:
        device = self.result.environment.device  # type: ignore[union-attr]
        return watch_cudagraph_skips(torch) if device.startswith("cuda") else None

    def run_calls(
        self, torch: Any, step: Any, model: Any, compiled: Any, sets: Iterator[Any]
    ) -> tuple[Any, Any, Any]:
        """Each input set through the compiled model, then through eager (explain: the
        first only): the first call's outputs of both, and its inputs as they were."""
        eager_out = compiled_out = call0 = None
        # Input sets are taken one at a time: a generator may change the model between calls.
        for i in itertools.count():
            if i and not self.spec.sweep:
                break  # explain compiles once, on the first inputs
            try:
                call = next(sets)
            except StopIteration:
                break
            except DiagError as e:
                raise self.stop(
                    "usage", USAGE, e.message + (" " + e.hint if e.hint else "")
                ) from None
            except BaseException as e:
                raise self.stop("model", MODEL_FAILED, f"{type(e).__name__}: {e}", e) from None
            eager, compiled_result, pristine = self.one_call(torch, step, model, compiled, call, i)
            if i == 0:
                eager_out, compiled_out, call0 = eager, compiled_result, pristine
        self.result.first_call_s = self.result.calls[0].wall_s
        return eager_out, compiled_out, call0

    def one_call(
        self, torch: Any, step: Any, model: Any, compiled: Any, call: Any, i: int
    ) -> tuple[Any, Any, Any]:
        """Call i through the compiled model, then through eager (its reference). Compiled
        goes first, as in the user's job: a model that keeps something from its first call
        (sizes it sets up, a cache it fills) is compiled on the path a first call takes."""
        device = self.result.environment.device  # type: ignore[union-attr]
        call = to_device(call, device)
        described = describe_call(call)
        self.result.inputs.append(described)
        # Eager and compiled each get their own copy of the inputs: a model that changes
        # them (x.mul_(), a KV cache it appends to) must not hand eager what compiled left.
        pristine, eager_call = fresh(call), fresh(call)
        same_draws = rng_restorer(torch)
        if i == 0:  # (numerics' calls start from it too)
            self._draws = same_draws
        compiled_out, failed = self.compiled_call(torch, step, compiled, pristine, described, i)
        if failed is not None and not isinstance(failed, Exception):  # Ctrl-C, an exit
            raise self.compile_failed(torch, model, pristine, i, failed)
        compiled_grads = self.take_grads(torch, model) if i == 0 else None
        same_draws()
        self.stage(f"running eager, call {i + 1}")
        try:
            eager_out = step(model, eager_call)
            sync(torch, device)
            eager_grads = self.take_grads(torch, model) if i == 0 else None
        except BaseException as e:  # (where the compiled call failed too: the model's fault)
            raise self.eager_failed(i, described, e) from None
        if failed is not None:
            raise self.compile_failed(torch, model, pristine, i, failed)
        if i == 0:
            self.result.mutated_inputs = changed_inputs(torch, model, pristine, eager_call)
            self._grads = [g for g in (eager_grads, compiled_grads) if g is not None]
        return eager_out, compiled_out, pristine

    def compiled_call(
        self, torch: Any, step: Any, compiled: Any, pristine: Any, described: Any, i: int
    ) -> tuple[Any, BaseException | None]:
        """The compiled model on a copy of the inputs, timed and recorded: its output, or
        what it raised (judged once eager has run the same inputs)."""
        spec, device = self.spec, self.result.environment.device  # type: ignore[union-attr]
        self.stage(f"compiling and running call {i + 1} with {spec.backend}")
        try:
            start_wall, start = time.time(), time.perf_counter()
            out = step(compiled, marked(torch, fresh(pristine), spec))
            sync(torch, device)
            wall = time.perf_counter() - start
            if records_cuda_graphs(spec.compile_kwargs(), device):  # a later replay reuses
                out = map_tensors(torch, out, lambda t: t.clone())  # its memory
        except BaseException as e:
            return None, e
        self.result.calls.append(CallRecord(i, described, wall, start_wall, time.time()))
        return out, None

    def eager_failed(self, i: int, described: Any, e: BaseException) -> _Stopped:
        """Eager raised: on the model file's own first inputs, the file's bug; on inputs the
        user typed (--input, --shapes) or a later input set, the inputs'."""
        target = self.spec.target
        if i == 0 and not target.shapes and not target.inputs and not target.stream:
            return self.stop("model", MODEL_FAILED, f"{type(e).__name__}: {e}", e)
        served = self.result.serving.distinct[i] if self.result.serving else None
        said = misfit(target, i, served, described, f"{type(e).__name__}: {first_line(e)}")
        return self.stop("usage", USAGE, said)

    def compile_failed(
        self, torch: Any, model: Any, pristine: Any, i: int, e: BaseException
    ) -> _Stopped:
        """The compiled call raised where eager did not: the compile's failure."""
        inner = getattr(e, "inner_exception", None) or e  # BackendCompilerFailed wraps it
        message = f"{type(inner).__name__}: {first_line(inner)}"
        if self.spec.numerics and i == 0 and isinstance(e, Exception):
            self.stage("the compile failed: torch's opcheck on the custom ops")
            stop_trace()  # its own compiles are no findings of the run
            self.result.numerics = custom_op_checks(torch, model, pristine, make_step(torch, False))
        return self.stop("compile", COMPILE_FAILED, message, e)

    def after_calls(self, torch: Any, eager_out: Any, compiled_out: Any, skips: Any) -> None:
        """What torch counted over the calls, and whether the outputs agree."""
        metrics = sys.modules.get("torch._inductor.metrics")  # loaded when Inductor ran
        if metrics is not None:
            self.result.torch_kernel_count = int(metrics.generated_kernel_count)
        self.result.output_check = compare_outputs(torch, eager_out, compiled_out)
        if skips is not None:
            self.result.cudagraph_skips = list(dict.fromkeys(skips.messages))
            counted = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]
            if counted and not skips.messages:
                self.result.cudagraph_skips = [f"torch skipped CUDA graphs {counted} time(s)"]

    def take_grads(self, torch: Any, model: Any) -> list[Any] | None:
        """`compilediag fix --train`: the parameters' gradients after a first call's
        backward, taken away so the next call's are its own (a parameter that got none: an
        empty tensor)."""
        spec = self.spec
        if not (spec.train and (spec.save_outputs or spec.compare_outputs)):
            return None
        params = list(model.parameters()) if hasattr(model, "parameters") else []
        grads = [torch.empty(0) if p.grad is None else p.grad.detach().cpu() for p in params]
        for p in params:
            p.grad = None
        return grads

    def keep_outputs(self, torch: Any, eager_out: Any, compiled_out: Any) -> None:
        """`compilediag fix`: the first call's output tensors (and with --train the
        parameters' gradients) saved, or compared with a saved run's (eager with eager,
        compiled with compiled)."""
        spec = self.spec
        if not (spec.save_outputs or spec.compare_outputs):
            return
        try:
            ours = {
                "outputs": [
                    [t.detach().cpu() for t in tensors_of(torch, out)]
                    for out in (eager_out, compiled_out)
                ],
                "grads": self._grads,
            }
            if spec.save_outputs:
                torch.save(ours, spec.save_outputs)
            if spec.compare_outputs:
                saved = torch.load(spec.compare_outputs)
                self.result.reference_check, self.result.gradient_check = (
                    [compare_outputs(torch, a, b) for a, b in zip(saved[k], ours[k], strict=True)]
                    for k in ("outputs", "grads")
                )
        except Exception as e:  # the run's own report stays whole
            self.result.errors.append(f"output capture failed: {type(e).__name__}: {e}")

    def time_calls(self, torch: Any, step: Any, model: Any, compiled: Any, call0: Any) -> None:
        if not self.spec.timings:
            return
        trust = Trust()
        try:
            trust.threads = timing_threads(torch, self._threads_at_import)
            cpu = not self.result.environment.device.startswith("cuda")  # type: ignore[union-attr]
            watch = Watch() if cpu else None  # the cores beside the timing, as it runs
            self.stage("timing eager vs compiled")
            self.result.timings = measure(
                torch, step, model, compiled, call0,
                self.result.environment.device, self.spec,  # type: ignore[union-attr]
                fresh_each_call=bool(self.result.mutated_inputs), trust=trust,
                progress=watch.reading(self.progress) if watch else self.progress, watch=watch,
            )  # fmt: skip
        except BaseException as e:  # timing must never lose the report
            self.result.errors.append(f"timing failed: {type(e).__name__}: {e}")
        write_atomic(self.workdir / "threads.json", to_json(trust))

    def run_cross_check(self, torch: Any, model: Any, call0: Any) -> None:
        if not self.spec.cross_check:
            return
        self.stage("cross-checking with torch._dynamo.explain")
        stop_trace()  # explain's own compile must not show up as findings of this run
        self.result.explain = cross_check(torch, model, fresh(call0))

    def check_numerics(
        self, torch: Any, model: Any, call0: Any, eager_out: Any, compiled_out: Any
    ) -> None:
        """The first call's outputs against a float64 reference, and where compiled departs,
        why (after everything else: its compiles are its own, out of the run's trace)."""
        spec = self.spec
        if not spec.numerics or call0 is None:
            return
        self.stage("comparing outputs with eager and float64")
        stop_trace()
        try:  # (each of its calls from the random state the first call started from)
            self.result.numerics = numerics(
                torch, model, call0, eager_out, compiled_out,
                drawn_after(self._draws, make_step(torch, False)),
                spec.backend, self.result.environment.device,  # type: ignore[union-attr]
                spec.target.path, spec.repro_dir, self.stage,
            )  # fmt: skip
        except Exception as e:  # the report stays whole
            self.result.errors.append(f"numerics check failed: {type(e).__name__}: {e}")


PROGRESS_S = 0.5  # a timing block's progress line: at most this often


class _Stopped(Exception):
    """A step of the worker's run failed; `fail` has written the result. `code`: the
    worker's exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


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
    """End the worker once its result is written, without the interpreter's teardown:
    freeing torch's objects one by one takes 1-1.5 s of CPU after a compile (2.13) for
    nothing. The exit handlers still run: the trace's log handler flushed and closed,
    torch's compile workers told to stop."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
