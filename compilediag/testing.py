"""A helper for a project's own tests:

    from compilediag.testing import assert_compiles

    def test_model_compiles_without_breaks():
        assert_compiles(MyModel(), (torch.randn(8, 16),), max_graph_breaks=0)

It compiles the model in the test's own process (no worker), captures PyTorch's
structured trace in memory, and builds the same Report as `compilediag explain`; on a
failed rule the assertion message is the report's table view, with every graph break at
its line and the fix. Dynamo's caches are reset before and after.
"""

from __future__ import annotations

import dataclasses
import io
from typing import Any

from compilediag.analysis.build import build_report
from compilediag.gate import Budgets, evaluate
from compilediag.render import render
from compilediag.report.model import Environment, Report, TargetInfo
from compilediag.report.vocabulary import Source
from compilediag.trace.parse import parse_lines


def compile_report(
    model: Any,
    inputs: tuple | dict,
    *,
    backend: str = "eager",
    calls: list[tuple | dict] | None = None,
    **compile_kwargs: Any,
) -> Report:
    """Compile `model`, call it on `inputs` (then on each of `calls`), return the Report."""
    import torch

    from compilediag.inprocess import trace_in_memory

    torch._dynamo.reset()
    try:
        with trace_in_memory() as buffer, torch.no_grad():
            compiled = torch.compile(model, backend=backend, **compile_kwargs)
            for args in [inputs, *(calls or [])]:
                if isinstance(args, dict):
                    compiled(**args)
                else:
                    compiled(*args)
    finally:
        torch._dynamo.reset()
    log = parse_lines(io.StringIO(buffer.getvalue()), path="<in-process>")
    env = Environment(source=Source.IN_PROCESS, torch=torch.__version__, backend=backend)
    return build_report([log], None, TargetInfo(path=type(model).__name__), environment=env)


def assert_compiles(
    model: Any,
    inputs: tuple | dict,
    *,
    max_graph_breaks: int | None = 0,
    max_recompiles: int | None = None,
    backend: str = "eager",
    calls: list[tuple | dict] | None = None,
    **compile_kwargs: Any,
) -> Report:
    """Fail the test, with compilediag's findings as the message, if a budget is exceeded."""
    report = compile_report(model, inputs, backend=backend, calls=calls, **compile_kwargs)
    budgets = Budgets(max_graph_breaks=max_graph_breaks, max_recompiles=max_recompiles)
    report = dataclasses.replace(report, verdict=evaluate(report, budgets))
    if not report.verdict.passed:
        raise AssertionError(
            "torch.compile budget exceeded:\n" + render(report, "table", width=100)
        )
    return report
