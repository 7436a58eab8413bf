"""`recompiles --requests`: the stream's serving section, after the worker's run (its sweep
of the stream's distinct requests and its serving pass): the forecast and the plans as the
run measured them (fitted to the stream's first part), each that bounds the compiles
checked in a fresh process on the held-out part (warm-up, then those requests under
`fail_on_recompile`), the plan chosen by those counts, its cold start timed again with
warm caches and torch's cache artifacts, and its code."""

from __future__ import annotations

import ast
import tempfile
from dataclasses import replace
from pathlib import Path

from compilediag.cli.progress import Live
from compilediag.harness.serving.verify import VerifyFacts, VerifySpec
from compilediag.harness.worker_types import WorkerResult, WorkerSpec
from compilediag.report.model import Report
from compilediag.report.serving import PLAN_NAMES, HeldOut, Plan


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
    """The report with its serving section (unchanged where the worker made no pass): each
    plan that bounds the compiles serves the stream's held-out part in a fresh process
    (empty caches), the plan is chosen by those counts first, then the chosen one's warm-up
    is timed again with warm caches and with torch's cache artifacts."""
    from compilediag.analysis.serving.code import plan_code
    from compilediag.analysis.serving.forecast import candidates, choose, forecast, verified

    facts = result.serving
    if facts is None:
        return report
    s = forecast(report, facts)
    if s.cuda_graphs is not None:  # torch's reasons, as the worker's run logged them
        s.cuda_graphs.skip_reasons = list(result.cudagraph_skips)
    kwargs = spec.compile_kwargs()
    device = report.environment.device or "cpu"
    holding = facts.fit < len(facts.stream)  # else too short to hold out: checked whole
    held = facts.stream[facts.fit :] if holding else facts.stream
    check = VerifySpec(spec.target, held, [], None, kwargs, device, mode=facts.mode)
    if not holding:  # no held-out counts to choose by: the chosen plan alone is checked
        s = choose(s)
    with tempfile.TemporaryDirectory(prefix="compilediag-serving-") as tmp, Live() as live:
        work, first = Path(tmp), {}
        plans = candidates(s) if holding else [s.plan] if s.plan else []
        which = "held-out requests" if holding else "requests"
        for n, plan in enumerate(plans):
            live.stage(
                f"serving the {len(held)} {which} under the plan {PLAN_NAMES[plan.kind]} in a "
                f"fresh process ({n + 1} of {len(plans)})"
            )
            first[plan.kind] = _check(check, plan, work / f"plan{n}", timeout, "empty caches")
            if holding:
                plan.held_out = held_out(first[plan.kind], facts.fit)
        if holding:
            s = choose(s)
        chosen = s.plan
        if chosen is None:
            return replace(report, serving=s)
        runs = [first[chosen.kind]]
        home = work / f"plan{plans.index(chosen)}"
        for label in ["warm caches", "cache artifacts"] if cold_start else []:
            live.stage(f"timing the plan's warm-up in a fresh process, {label}")
            if label == "cache artifacts" and not (home / ARTIFACTS).exists():
                s.notes.append("torch saved no cache artifacts (save_cache_artifacts() gave none)")
                break
            runs.append(_check(check, chosen, home, timeout, label))
    s = verified(s, runs)
    chosen.code = plan_code(chosen, kwargs, facts.names, facts.dtypes, s.warmup, device, facts.mode)
    return replace(report, serving=s)


ARTIFACTS = "cache_artifacts.bin"


def _check(check: VerifySpec, plan: Plan, home: Path, timeout: float, label: str) -> VerifyFacts:
    """The plan's warm-up, then the held-out requests, in a fresh process: with empty caches
    (under `home`, its cache artifacts saved), the same caches again, or other empty caches
    with those artifacts loaded."""
    from compilediag.harness.serving.verify import verify

    artifacts = str(home / ARTIFACTS)
    one = replace(
        check,
        warmup=[list(w) for w in plan.warmup_shapes],
        plan=None if plan.kind == "as_is" else plan,
        save_artifacts=artifacts if label == "empty caches" else "",
        load_artifacts=artifacts if label == "cache artifacts" else "",
    )
    caches = home / ("caches_b" if label == "cache artifacts" else "caches")
    return verify(one, home / label.replace(" ", "_"), caches, timeout)


def held_out(run: VerifyFacts, offset: int) -> HeldOut:
    """What the fresh process counted, numbered in the whole stream."""
    if run.error:
        return HeldOut(error=run.error)
    return HeldOut(
        requests=len(run.latency_ms) + len(run.recompiles),
        raised=[offset + n for n in run.recompiles],
        eager=[offset + n for n in run.eager],
        without_cuda_graph=[offset + n for n in run.without_cuda_graph],
        recorded_cuda_graph=[offset + n for n in run.recorded_cuda_graph],
    )
