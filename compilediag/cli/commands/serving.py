"""`recompiles --requests`: the stream's serving section, after the worker's run (its sweep
of the stream's distinct requests and its serving pass): the forecast and the plans as the
run measured them, the chosen plan checked in fresh processes (warm-up, then the stream
under `fail_on_recompile`) under empty caches, warm caches and torch's cache artifacts, and
its code."""

from __future__ import annotations

import ast
import tempfile
from dataclasses import replace
from pathlib import Path

from compilediag.cli.progress import Live
from compilediag.harness.worker_types import WorkerResult, WorkerSpec
from compilediag.report.model import Report


def offers_stream(path: str) -> bool:
    """The model file defines get_request_stream() (read, not run)."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == "get_request_stream" for n in tree.body)


def serving_section(
    report: Report, spec: WorkerSpec, result: WorkerResult, cold_start: bool, timeout: float
) -> Report:
    """The report with its serving section (unchanged where the worker made no pass)."""
    from compilediag.analysis.serving.code import plan_code
    from compilediag.analysis.serving.forecast import choose, forecast, verified
    from compilediag.harness.serving.verify import VerifySpec, verify

    facts = result.serving
    if facts is None:
        return report
    s = choose(forecast(report, facts))
    if s.cuda_graphs is not None:  # torch's reasons, as the worker's run logged them
        s.cuda_graphs.skip_reasons = list(result.cudagraph_skips)
    chosen = s.plan
    if chosen is None:
        return replace(report, serving=s)
    kwargs = spec.compile_kwargs()
    plan = None if chosen.kind == "as_is" else chosen
    device = report.environment.device or "cpu"
    warmup: list[list[list[int] | None]] = [list(w) for w in chosen.warmup_shapes]
    check = VerifySpec(spec.target, facts.stream, warmup, plan, kwargs, device)
    labels = ["empty caches"] + (["warm caches", "cache artifacts"] if cold_start else [])
    runs = []
    with tempfile.TemporaryDirectory(prefix="compilediag-serving-") as tmp, Live() as live:
        work = Path(tmp)
        artifacts = str(work / "cache_artifacts.bin")
        for n, label in enumerate(labels):
            live.stage(f"checking the plan in a fresh process, {label} ({n + 1} of {len(labels)})")
            caches = work / ("b" if label == "cache artifacts" else "a")
            one = replace(
                check,
                save_artifacts=artifacts if label == "empty caches" else "",
                load_artifacts=artifacts
                if label == "cache artifacts" and Path(artifacts).exists()
                else "",
            )
            if label == "cache artifacts" and not one.load_artifacts:
                s.notes.append("torch saved no cache artifacts (save_cache_artifacts() gave none)")
                break
            runs.append(verify(one, work / f"run{n}", caches, timeout))
    s = verified(s, runs)
    chosen.code = plan_code(chosen, kwargs, facts.names, facts.dtypes, s.warmup, device)
    return replace(report, serving=s)
