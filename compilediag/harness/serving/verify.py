"""A plan verified where it will run: a fresh process that loads the model, applies the
plan, runs its warm-up requests only (timed: the cold start), then serves the requests it
was not fitted to (the stream's held-out part; a stream too short to hold out: all of it)
under torch's `fail_on_recompile` stance, in the serving mode, counting each request that
would have compiled, ran eager (above the largest bucket), or ran without a CUDA graph.
Run three times for the cold start (the CLI decides): private empty caches; the same caches
again (warm on disk); other empty caches with torch's cache artifacts of the first loaded
at start-up (`torch.compiler.load_cache_artifacts`). The user's own caches are never
touched: each run's caches are in a folder of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilediag.harness.serving.cudagraphs import graph_state, records_cuda_graphs
from compilediag.harness.spawn import private_caches, with_package
from compilediag.harness.target import Target
from compilediag.report.serial import from_json, to_json
from compilediag.report.serving import GraphState, Plan

CACHE_COUNTERS = {  # torch's counters of its caches: (group, key) -> what the report says
    ("inductor", "fxgraph_cache_hit"): "graph cache hits",
    ("inductor", "fxgraph_cache_miss"): "graph cache misses",
    ("inductor", "fxgraph_cache_bypass"): "graph cache bypasses",
    ("aot_autograd", "autograd_cache_hit"): "AOTAutograd cache hits",
    ("aot_autograd", "autograd_cache_miss"): "AOTAutograd cache misses",
    ("aot_autograd", "autograd_cache_bypass"): "AOTAutograd cache bypasses",
}


@dataclass
class VerifySpec:
    target: Target
    stream: list[list[list[int] | None]]
    warmup: list[list[list[int] | None]]  # each warm-up call's tensors' shapes
    plan: Plan | None  # None: as the user compiles it
    compile_kwargs: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    load_artifacts: str = ""  # a file of torch's cache artifacts to load first
    save_artifacts: str = ""  # where to save them after the warm-up
    mode: str = "inference_mode"  # the serving mode: the warm-up and the stream run in it


@dataclass
class VerifyFacts:
    warmup_s: float = 0.0  # from before the first warm-up request (and the artifacts' load)
    cache: dict[str, int] = field(default_factory=dict)
    recompiles: list[int] = field(default_factory=list)  # requests that would have compiled
    eager: list[int] = field(default_factory=list)  # above the largest bucket: run eager
    latency_ms: list[float] = field(default_factory=list)
    artifacts: dict[str, int] = field(default_factory=dict)  # what the saved artifacts hold
    artifacts_bytes: int = 0
    error: str = ""
    pid: int = 0  # the process that ran it
    # of the warm-up, Inductor's build of its C++ kernels (torch's "compile_file" timer;
    # None where this torch times no such phase)
    build_s: float | None = None
    # under CUDA graphs, the requests after the warm-up: those that ran without one (a size's
    # first call, its warm-up), those that recorded one (its second), by torch's CUDA graph
    # trees; and their state at the end
    without_cuda_graph: list[int] = field(default_factory=list)
    recorded_cuda_graph: list[int] = field(default_factory=list)
    cuda_graphs: GraphState | None = None


def verify(spec: VerifySpec, work: Path, cache: Path, timeout: float) -> VerifyFacts:
    """Run the check in a fresh process whose torch caches are under `cache`."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "spec.json").write_text(to_json(spec))
    env = {**os.environ, **private_caches(cache)}
    env["PYTHONPATH"] = with_package(env)
    env.pop("TORCH_TRACE", None)
    argv = [sys.executable, "-m", "compilediag.harness.serving.verify", str(work)]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return VerifyFacts(error=f"did not finish within {timeout:g} s")
    out = work / "facts.json"
    if not out.exists():
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        return VerifyFacts(error=f"exited with status {done.returncode}: {tail[-400:]}")
    return from_json(VerifyFacts, out.read_text())


def _run(work: Path) -> VerifyFacts:
    import torch

    from compilediag.harness.serving.calls import above_buckets, build, in_mode, planned, timed
    from compilediag.harness.serving.replay import plan_kwargs
    from compilediag.harness.target import find_input_sets, find_model, load_module
    from compilediag.harness.worker_torch import to_device

    spec = from_json(VerifySpec, (work / "spec.json").read_text())
    module = load_module(spec.target.path)
    model = to_device(find_model(module, spec.target.attr, spec.target.path), spec.device)
    first = to_device(
        next(iter(find_input_sets(module, spec.target, spec.target.path, False))), spec.device
    )
    requests = [build(torch, first, r) for r in spec.stream]
    facts = VerifyFacts(pid=os.getpid())
    start = time.perf_counter()
    if spec.load_artifacts:
        torch.compiler.load_cache_artifacts(Path(spec.load_artifacts).read_bytes())
    kwargs = plan_kwargs(spec.compile_kwargs, spec.plan) if spec.plan else spec.compile_kwargs
    fn = in_mode(torch, torch.compile(model, **kwargs), spec.mode)  # as the plan's serve()
    graphs = records_cuda_graphs(spec.compile_kwargs, spec.device)
    # under CUDA graphs a size's first call warms up and its second records: twice each
    warm = [planned(torch, build(torch, first, w), spec.plan) for w in spec.warmup]
    timed(torch, fn, [c for c in warm for _ in range(2 if graphs else 1)], spec.device)
    facts.warmup_s = round(time.perf_counter() - start, 4)
    counters = torch._dynamo.utils.counters
    built = torch._dynamo.utils.compilation_time_metrics.get("compile_file")
    facts.build_s = round(sum(built), 4) if built else None
    facts.cache = {
        said: int(counters[g][k]) for (g, k), said in CACHE_COUNTERS.items() if counters[g][k]
    }
    if spec.save_artifacts:
        _save(torch, spec.save_artifacts, facts)
    torch.compiler.set_stance("fail_on_recompile")
    eager = in_mode(torch, model, spec.mode)
    for n, request in enumerate(requests, 1):
        if above_buckets(torch, request, spec.plan):  # the plan's serve() runs it eager
            facts.eager.append(n)
            facts.latency_ms += timed(torch, eager, [request], spec.device)
            continue
        call = planned(torch, request, spec.plan)
        was = graph_state(torch, memory=False) if graphs else None
        try:
            facts.latency_ms += timed(torch, fn, [call], spec.device)
        except RuntimeError as e:
            if "recompile" not in str(e):
                raise
            facts.recompiles.append(n)
        now = graph_state(torch, memory=False) if graphs else None
        if was and now and now.warmed > was.warmed:
            facts.without_cuda_graph.append(n)
        if was and now and now.recorded > was.recorded:
            facts.recorded_cuda_graph.append(n)
    torch.compiler.set_stance("default")
    facts.cuda_graphs = graph_state(torch) if graphs else None
    return facts


def _save(torch: Any, path: str, facts: VerifyFacts) -> None:
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return
    data, info = saved
    Path(path).write_bytes(data)
    facts.artifacts_bytes = len(data)
    for name in dir(info):
        value = getattr(info, name)
        if name.endswith("_artifacts") and isinstance(value, list) and value:
            facts.artifacts[name.removesuffix("_artifacts")] = len(value)


def main(argv: list[str]) -> int:
    work = Path(argv[0])
    try:
        facts = _run(work)
    except Exception as e:
        facts = VerifyFacts(error=f"{type(e).__name__}: {str(e)[:400]}")
    (work / "facts.json").write_text(to_json(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
