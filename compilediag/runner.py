"""Start the worker, watch it, and turn how it ended into a result or a DiagError.

The worker is a child process so that a segfault, a hang or Dynamo state leaked by the
user's code never takes down or pollutes the CLI; TORCH_TRACE is set in its environment
before it imports torch.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from compilediag.errors import ModelError, UsageError, WorkerError
from compilediag.serial import from_json, to_json
from compilediag.worker_types import WorkerFailure, WorkerResult, WorkerSpec

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


@dataclass
class WorkerRun:
    result: WorkerResult
    trace_dir: Path

    @property
    def compile_error(self) -> WorkerFailure | None:
        err = self.result.error
        return err if err and err.kind == "compile" else None


@contextmanager
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="compilediag-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_worker(
    spec: WorkerSpec,
    work: Path,
    timeout: float,
    on_stage: Callable[[str], None] = lambda s: None,
) -> WorkerRun:
    (work / "spec.json").write_text(to_json(spec))
    trace_dir = work / "trace"
    trace_dir.mkdir()
    env = dict(os.environ)
    env["TORCH_TRACE"] = str(trace_dir)
    env["PYTHONUNBUFFERED"] = "1"
    # Inductor's provenance records map each generated kernel to the user lines it came
    # from; C++ kernels carry no source comments without them.
    env.setdefault("INDUCTOR_PROVENANCE", "1")
    # torch's caches stay as the user has them: the compile time reported is the one they
    # will see, and on a cache hit torch still logs the generated code (2.11, 2.13). A cold
    # compile (--cold) gets private, empty caches that go away with the run.
    if spec.cold:
        cache = work / "cold-cache"
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "inductor")
        env["TRITON_CACHE_DIR"] = str(cache / "triton")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    log_path = work / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "compilediag.worker", str(work)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # so a timeout can stop the model's own children too
        )
        try:
            rc = _wait(proc, work / "status", timeout, on_stage)
        except BaseException:
            _kill(proc)
            raise
    output = log_path.read_text(errors="replace")
    if rc is None:
        raise WorkerError(
            f"the run did not finish within --timeout {timeout:g}s and was stopped.",
            detail=_tail(output),
            hint="If the model is only slow to compile, raise --timeout; if it hangs, "
            "look for a loop or a wait in forward.",
        )
    result_path = work / "result.json"
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        if -rc == signal.SIGKILL:
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
            f"the worker was killed by signal {name} while running the model.",
            detail=_tail(output),
            hint=hint,
        )
    if not result_path.exists():
        raise WorkerError(
            f"the worker exited with code {rc} without a result.", detail=_tail(output)
        )
    result = from_json(WorkerResult, result_path.read_text())
    _raise_for(result.error, spec)
    return WorkerRun(result=result, trace_dir=trace_dir)


def _wait(
    proc: subprocess.Popen[bytes], status: Path, timeout: float, on_stage: Callable[[str], None]
) -> int | None:
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        rc = proc.poll()
        try:
            stage = status.read_text()
        except OSError:
            stage = ""
        if stage and stage != last:
            on_stage(stage)
            last = stage
        if rc is not None:
            return rc
        if time.monotonic() > deadline:
            _kill(proc)
            return None
        time.sleep(0.05)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


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
