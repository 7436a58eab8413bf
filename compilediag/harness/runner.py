"""Run the worker, watch it, and turn how it ended into a result or a DiagError.

The worker is a child process (started by spawn.py) so that a segfault, a hang or Dynamo
state leaked by the user's code never takes down or pollutes the CLI; TORCH_TRACE is set
in its environment before it imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from compilediag.errors import ModelError, UsageError, WorkerError
from compilediag.harness.spawn import spawn, take_early
from compilediag.harness.threads import Trust
from compilediag.harness.worker_types import WorkerFailure, WorkerResult, WorkerSpec
from compilediag.report.serial import from_json, to_json


@dataclass
class WorkerRun:
    result: WorkerResult
    trace_dir: Path
    trust: Trust | None = None  # the threads the timing ran with, the one-thread cross-check

    @property
    def compile_error(self) -> WorkerFailure | None:
        err = self.result.error
        return err if err and err.kind == "compile" else None


# the worker's stages before it runs the model's code (worker.py's stage names)
OUTSIDE_THE_MODEL = ("importing torch", "setting up torch.compile")


def run_worker(
    spec: WorkerSpec,
    work: Path,
    timeout: float,
    on_stage: Callable[[str], None] = lambda s: None,
) -> WorkerRun:
    (work / "spec.json").write_text(to_json(spec))
    early = take_early(work, spec.cold) if not spec.cache else None
    child = early or spawn(work, spec.cold, cache=spec.cache)
    seen = [""]  # the last stage it wrote (a worker stopped writes "done" on its way out)

    def stage(text: str) -> None:
        seen[0] = text
        on_stage(text)

    try:
        done = child.wait(timeout, poll=_stages(work / "status", stage))
    except BaseException:
        child.kill()
        raise
    output = (work / "worker.log").read_text(errors="replace")
    trace_dir = work / "trace"
    if done.timed_out:
        # where it was (a look's was still importing torch, and was told to look in forward)
        where = {"": "as it started (importing torch)", "done": "after its work, as it exited"}
        model = seen[0] not in where and seen[0] not in OUTSIDE_THE_MODEL
        raise WorkerError(
            f"the run did not finish within --timeout {timeout:g}s and was stopped "
            f"{where.get(seen[0], 'while ' + seen[0])}.",
            detail=_tail(output),
            hint="If the model is only slow to compile, raise --timeout; if it hangs, "
            "look for a loop or a wait in forward."
            if model
            else "Raise --timeout: the model's own work was not what ran out of time.",
        )
    result_path = work / "result.json"
    if done.signal:
        if done.signal == "SIGKILL":
            hint = (
                "SIGKILL from outside is most often the kernel's out-of-memory killer: check "
                "`dmesg` or the job's memory limit, and try smaller inputs."
            )
        else:
            hint = (
                "A native crash (a C extension, generated code) ended the process; run the "
                "model without compilediag to see whether eager crashes too."
            )
        raise WorkerError(
            f"the worker was killed by signal {done.signal} while running the model.",
            detail=_tail(output),
            hint=hint,
        )
    if not result_path.exists():
        raise WorkerError(
            f"the worker exited with code {done.returncode} without a result.",
            detail=_tail(output),
        )
    result = from_json(WorkerResult, result_path.read_text())
    _raise_for(result.error, spec)
    trust_path = work / "threads.json"
    trust = from_json(Trust, trust_path.read_text()) if trust_path.exists() else None
    return WorkerRun(result=result, trace_dir=trace_dir, trust=trust)


def _stages(status: Path, on_stage: Callable[[str], None]) -> Callable[[], None]:
    """A poll that reports each new stage the worker writes to `status`."""
    last = [""]

    def poll() -> None:
        stage = _read(status)
        if stage and stage != last[0]:
            on_stage(stage)
            last[0] = stage

    return poll


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _tail(output: str, lines: int = 8) -> str:
    kept = [ln for ln in output.strip().splitlines() if ln.strip()][-lines:]
    return "\n".join("  | " + ln for ln in kept)


def _where(err: WorkerFailure) -> str:
    if not err.file:
        return ""
    where = f"  at {err.file}:{err.line}"
    return where + (f"\n    {err.code}" if err.code else "")


def _raise_for(err: WorkerFailure | None, spec: WorkerSpec) -> None:
    if not err:
        return
    if err.kind == "usage":
        raise UsageError(err.message)
    if err.kind == "model":
        raise ModelError(
            f"the model failed without torch.compile: {err.message}",
            detail=_where(err),
            hint="This is a bug in the model or its inputs, not in torch.compile: make "
            f"`{spec.target.path}` run in eager mode first.",
        )
    if err.kind == "internal":
        raise WorkerError(
            f"compilediag's worker failed: {err.message}",
            detail=_tail(err.traceback, 4),
            hint="This is a compilediag bug; please report it with the lines above.",
        )
