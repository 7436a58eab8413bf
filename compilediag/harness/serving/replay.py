"""The worker's serving pass, after its sweep has compiled the stream's distinct requests
as the user compiles them: which compiled regions ran each distinct request (none: it ran
in eager mode, past the recompile limit), the whole stream replayed compiled and eager
(each request timed; any compile the repeats make counted), then each plan applied to a
fresh compile of the model and measured the same way. The plans' compiles are kept out
of the run's trace: the report's graphs are the stream's own."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from compilediag.harness.checks import tensors_of
from compilediag.harness.serving.calls import (
    SERVING_MODES,
    Call,
    base_shapes,
    build,
    compiles_now,
    in_mode,
    planned,
    regions,
    timed_beside,
)
from compilediag.harness.serving.cudagraphs import graph_state, records_cuda_graphs
from compilediag.harness.serving.cudagraphs import reset as reset_cuda_graphs
from compilediag.harness.serving.facts import ServingFacts
from compilediag.harness.serving.padding import padding_check
from compilediag.harness.serving.plans import propose
from compilediag.harness.serving.stream import Shapes, as_request, distinct, fitted_part, key
from compilediag.report.serving import Plan


def stream_calls(
    torch: Any, module: Any, model: Any, first: Call, requests: list[Shapes], mode: str = "",
    most: list[int] | None = None,
) -> tuple[ServingFacts, Iterator[Call]]:  # fmt: skip
    """The stream (the --requests file's, else the model file's get_request_stream()) and
    the sweep's calls: its distinct requests, in the order they first come; the mode it is
    served in (`mode`, else the file's SERVING_MODE, else inference_mode)."""
    from compilediag.errors import UsageError

    if not mode:
        mode = getattr(module, "SERVING_MODE", None) or SERVING_MODES[0]
        if mode not in SERVING_MODES:
            raise UsageError(
                f"the model file's SERVING_MODE is {mode!r}, not a serving mode: "
                f"set it to one of {', '.join(SERVING_MODES)}."
            )
    if not requests:
        fn = getattr(module, "get_request_stream", None)
        if not callable(fn):
            raise UsageError(
                "no request stream: pass --requests FILE (one JSON request a line), "
                "or add get_request_stream() to the model file."
            )
        requests = [as_request(r, f"get_request_stream() item {n}") for n, r in enumerate(fn(), 1)]
    facts = ServingFacts(
        stream=requests, base=base_shapes(torch, first), distinct=distinct(requests), mode=mode,
        fit=fitted_part(len(requests)), most=list(most or []),
    )  # fmt: skip
    facts.names, facts.dtypes = tensor_names(torch, model, first)
    facts.positions = position_tables(torch, model)
    return facts, (build(torch, first, requests[i]) for i in facts.distinct)


def served_step(torch: Any, step: Callable[[Any, Call], Any], mode: str) -> Any:
    """The worker's step (one call of a model) with the model called in the serving mode."""
    return lambda fn, call: step(in_mode(torch, fn, mode), call)


def serve(
    torch: Any, model: Any, compiled: Any, first: Call, facts: ServingFacts,
    compile_kwargs: dict[str, Any], device: str, stage: Callable[[str], None],
) -> ServingFacts:  # fmt: skip
    """The pass; `compiled` has run the distinct requests once (the sweep)."""
    from compilediag.harness.worker_torch import stop_trace

    calls = [build(torch, first, r) for r in facts.stream]
    compiled, eager = in_mode(torch, compiled, facts.mode), in_mode(torch, model, facts.mode)
    stage(f"replaying {len(calls)} requests, compiled and eager alternated")
    facts.regions = regions(torch, compiled, [calls[i] for i in facts.distinct], device)
    graphs = records_cuda_graphs(compile_kwargs, device)
    if graphs:  # each distinct request has run twice: warmed up, then recorded
        facts.cuda_graphs = graph_state(torch)
    before = compiles_now(torch)[0]
    facts.compiled_ms, facts.eager_ms = timed_beside(torch, compiled, calls, eager, calls, device)
    facts.repeats_compiled = compiles_now(torch)[0] - before
    if graphs:
        facts.cuda_graphs_replayed = graph_state(torch)
    stop_trace()  # the plans' compiles are not the stream's
    for plan in propose(facts.stream[: facts.fit], facts.base, facts.most):  # the first part
        stage(f"measuring the plan {plan.kind}")
        try:
            facts.plans.append(
                measure_plan(torch, model, first, facts, plan, compile_kwargs, device)
            )
            if plan.kind == "bucket":
                stage("padding each request as the buckets do, eager, against its outputs")
                plan.padding = padding_check(torch, eager, first, facts.stream[: facts.fit], plan)
        except Exception as e:  # a plan torch refuses is no plan; the report stays whole
            said = (str(e).strip().splitlines() or [""])[0][:200]
            facts.errors.append(f"the plan {plan.kind} failed: {type(e).__name__}: {said}")
    torch._dynamo.reset()
    return facts


def measure_plan(
    torch: Any, model: Any, first: Call, facts: ServingFacts, plan: Plan,
    compile_kwargs: dict[str, Any], device: str,
) -> Plan:  # fmt: skip
    """A fresh compile of the model under the plan, over the part of the stream it is fitted
    to: its warm-up (buckets: each padded size in the ranges; else the requests that
    compiled, found by replaying the distinct ones), the graphs torch made, the requests
    that still ran eager, its latency. The rest of the stream checks it (verify.py)."""
    from compilediag.harness.serving.calls import latency
    from compilediag.harness.serving.plans import full

    torch._dynamo.reset()
    graphs = records_cuda_graphs(compile_kwargs, device)
    if graphs:
        reset_cuda_graphs(torch)
    fn = in_mode(torch, torch.compile(model, **plan_kwargs(compile_kwargs, plan)), facts.mode)
    fitted = facts.stream[: facts.fit]
    raw = [build(torch, first, r) for r in fitted]  # (the eager reference's calls too)
    calls = [planned(torch, c, plan) for c in raw]
    shapes = [key([list(t.shape) for t in tensors_of(torch, c)]) for c in calls]
    firsts = distinct(shapes)  # type: ignore[arg-type]
    graphs0, start = compiles_now(torch)[1], time.perf_counter()
    for warm in plan.warmup_shapes:  # given (buckets): run first
        args, kwargs = planned(torch, build(torch, first, warm), plan)  # type: ignore[arg-type]
        fn(*args, **kwargs)
    for i in firsts:
        frames = compiles_now(torch)[0]
        fn(*calls[i][0], **calls[i][1])
        # under CUDA graphs each size is a graph to record: every distinct size warms up
        # (a bucket's padded sizes are its warm-up already)
        if compiles_now(torch)[0] > frames or (graphs and plan.kind != "bucket"):
            plan.warmup.append(i + 1)
            plan.warmup_shapes.append(full(fitted[i], facts.base))
    plan.compile_s = round(time.perf_counter() - start, 4)
    plan.graphs = compiles_now(torch)[1] - graphs0
    ran = dict(
        zip(
            (shapes[i] for i in firsts),
            regions(torch, fn, [calls[i] for i in firsts], device),
            strict=True,
        )
    )
    plan.eager_requests = sum(1 for s in shapes if not ran[s])
    # each request beside the model in eager at the same moment: the plans are measured one
    # after another, and their times are compared over their references'
    ms, ref = timed_beside(torch, fn, calls, in_mode(torch, model, facts.mode), raw, device)
    plan.latency = latency(ms)
    plan.request_ms, plan.reference_ms = [round(x, 4) for x in ms], [round(x, 4) for x in ref]
    if graphs:
        plan.cuda_graphs = graph_state(torch)
    return plan


def plan_kwargs(compile_kwargs: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """torch.compile's arguments under the plan: dynamic=True; buckets static (each padded
    size its graph, none made dynamic by automatic dynamic); for marks, no dynamic=False
    (which would keep every size static, marks and all)."""
    if plan.kind == "dynamic":
        return {**compile_kwargs, "dynamic": True}
    if plan.kind == "bucket":
        return {**compile_kwargs, "dynamic": False}
    if plan.kind == "mark_dynamic" and compile_kwargs.get("dynamic") is False:
        return {k: v for k, v in compile_kwargs.items() if k != "dynamic"}
    return dict(compile_kwargs)


# the names models give their table of learnt positions (BERT's position_embeddings, GPT-2's
# wpe, BART's embed_positions, ViT-style pos_embed): a request longer than it fails
POSITION_TABLE = re.compile(r"(?:^|\.)(?:position_embeddings?|wpe|embed_positions|pos_emb\w*)$")


def position_tables(torch: Any, model: Any) -> dict[str, int]:
    """The model's own bound on a request's length: each embedding table of positions, by
    its module's name, and the positions it holds."""
    modules = getattr(model, "named_modules", None)
    if modules is None:
        return {}
    return {
        name: int(m.num_embeddings)
        for name, m in modules()
        if isinstance(m, torch.nn.Embedding) and POSITION_TABLE.search(name)
    }


def tensor_names(torch: Any, model: Any, first: Call) -> tuple[list[str], list[str]]:
    """Each tensor's name (its parameter's in forward, else `input_N`) and dtype."""
    import inspect

    from compilediag.harness.serving.calls import tensor_places

    params: list[str] = []
    try:
        params = list(inspect.signature(getattr(model, "forward", model)).parameters)
    except (TypeError, ValueError):
        pass
    names, dtypes = [], []
    for n, place in enumerate(tensor_places(torch, first)):
        if isinstance(place, str):
            names.append(place)
        else:
            names.append(params[place] if place < len(params) else f"input_{n}")
        t = first[0][place] if isinstance(place, int) else first[1][place]
        dtypes.append(str(t.dtype).removeprefix("torch."))
    return names, dtypes
