"""The findings of `compilediag run`, for code run in this process (a notebook cell, a
test, a script that can't be started from outside):

    import compilediag

    with compilediag.capture(profile_steps="3-7") as run:
        for x, y in loader:
            train_step(x, y)
    run.report()  # the Report; in Jupyter `run` shows as HTML, in a terminal print(run)

PyTorch's structured trace is captured in memory while the block runs, and the runtime
probe counts (and in the window, times) each graph's calls; torch._dynamo.reset() first, by
default, so that what the block calls compiles inside it.
"""

from __future__ import annotations

import io
import linecache
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compilediag.report.model import Report


@contextmanager
def trace_in_memory() -> Iterator[io.StringIO]:
    """PyTorch's structured trace of the block, as the lines TORCH_TRACE would hold. The
    trace is ours alone meanwhile (pytest hangs its capture handlers on the logger too);
    every handler is put back afterwards, a TORCH_TRACE one included."""
    from torch._logging._internal import TorchLogsFormatter

    trace_log = logging.getLogger("torch.__trace")
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(TorchLogsFormatter(trace=True))
    old_level, old_handlers = trace_log.level, list(trace_log.handlers)
    trace_log.setLevel(logging.DEBUG)
    trace_log.handlers = [handler]
    try:
        yield buffer
    finally:
        trace_log.handlers = old_handlers
        trace_log.setLevel(old_level)


def notebook_cells() -> dict[str, str]:
    """The files IPython compiled this session's cells into (ipykernel's
    `/tmp/ipykernel_<pid>/<hash>.py`), each named as IPython names it in a traceback:
    `In[3]`; none outside IPython."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    numbers = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    return {file: f"In[{n}]" for file, n in numbers.items() if isinstance(n, int)}


class Capture:
    """What a `capture()` block compiled and ran; its Report is built on first use."""

    def __init__(self, probe: Any) -> None:
        self._probe = probe
        self._buffer: io.StringIO | None = None
        self._wall_s = 0.0
        self._report: Report | None = None

    def report(self) -> Report:
        if self._report is None:
            self._report = self._build()
        return self._report

    def _build(self) -> Report:
        import torch

        from compilediag.analysis.build import build_report
        from compilediag.analysis.runtime import JobRun
        from compilediag.harness.worker_types import ProcessRuntime
        from compilediag.report.model import Environment, Runtime, TargetInfo
        from compilediag.report.serial import from_plain
        from compilediag.report.vocabulary import Source
        from compilediag.trace.parse import parse_lines

        text = self._buffer.getvalue() if self._buffer is not None else ""
        for file, cell in notebook_cells().items():  # a cell's code as the notebook names it
            if file in text:
                text = text.replace(file, cell)
                if file in linecache.cache:  # its source, for the lines the report quotes
                    linecache.cache[cell] = linecache.cache[file]
        log = parse_lines(io.StringIO(text), path="<in-process>")
        process = from_plain(ProcessRuntime, self._probe.facts())
        env = Environment(
            source=Source.IN_PROCESS, torch=torch.__version__,
            backend=", ".join(process.backends), device=", ".join(process.devices), mode="",
        )  # fmt: skip
        job = Runtime(exit_code=0, wall_s=round(self._wall_s, 3))
        return build_report(
            [log], None, TargetInfo(path="<in-process>"), environment=env,
            run=JobRun(job, [process]),
        )  # fmt: skip

    def __str__(self) -> str:
        from compilediag.render import render

        return render(self.report(), "table", width=100)

    def _repr_html_(self) -> str:  # Jupyter
        from compilediag.render import render

        return render(self.report(), "html")


@contextmanager
def capture(*, profile_steps: str | None = None, reset: bool = True) -> Iterator[Capture]:
    """Capture what the block compiles and runs. `profile_steps="A-B"` times steps A to B:
    calls of the first compiled model or function the block calls; `reset=False` keeps what was compiled before the block
    (it then shows neither in the trace nor in the calls)."""
    import torch

    from compilediag.harness.bootstrap._compilediag_runtime import Probe, install, parse_window

    probe = Probe(parse_window(profile_steps) if profile_steps else None)
    run = Capture(probe)
    if reset:
        torch._dynamo.reset()
    start = time.perf_counter()
    with trace_in_memory() as buffer:
        undo = install(probe)
        try:
            yield run
        finally:
            undo()
            run._buffer = buffer
            run._wall_s = time.perf_counter() - start
