"""Graphs and compile time, from torch's compilation_metrics."""

from __future__ import annotations

from compilediag.analysis.history import History
from compilediag.report.model import CompileTime, Graph


def collect_graphs(h: History) -> list[Graph]:
    return [
        Graph(
            compile_id=e.compile_id,
            frame=e.code.shown,
            file=e.place[0],
            line=e.place[1],
            ops=e.metrics.graph_op_count,
            compile_time_s=e.metrics.entire_frame_s if e.compile.has_metrics else None,
            discarded=e.compile.discarded_graphs,
        )
        for e in h
        if e.graph
    ]


def compile_time(h: History) -> CompileTime:
    """Torch's nested timers, split into disjoint phases that add up to the total.

    entire_frame ⊇ backend_compile (AOTAutograd + Inductor) ⊇ inductor_compile ⊇ code_gen.
    A compile with no Dynamo frame (AOTInductor's) states only its duration: AOTAutograd
    and Inductor together, counted as Inductor's.
    """
    t = CompileTime()
    for m in h.outside_metrics:
        t.inductor_s += m.duration_s
        t.total_s += m.duration_s
    for e in h:
        c, m = e.compile, e.metrics
        entire = m.entire_frame_s
        backend = min(m.backend_s, entire)
        inductor = min(m.inductor_s, backend)
        codegen = min(m.codegen_s, inductor)
        t.dynamo_s += entire - backend
        t.aot_s += backend - inductor
        t.inductor_s += inductor - codegen
        t.codegen_s += codegen
        t.total_s += entire
        t.kernel_compile_s += m.kernel_compile_s
        if c.bwd_metrics is not None:
            # no Dynamo in a backward compile: Inductor's time is the whole of it; with
            # another backend (aot_eager), which states none, its start to its end
            bwd = c.bwd_metrics
            backward = max(bwd.entire_frame_s, bwd.inductor_s) or bwd.duration_s
            t.backward_s += backward
            t.total_s += backward
            t.kernel_compile_s += c.bwd_metrics.kernel_compile_s
        for name in c.artifacts:
            if "_cache_" in name:
                t.caches[name] = t.caches.get(name, 0) + len(c.artifacts[name])
            if name.endswith("_cache_bypass"):
                reasons = t.bypasses.setdefault(name.removesuffix("_cache_bypass"), {})
                for data in c.json_artifacts(name):
                    why = bypass_reason(data)
                    reasons[why] = reasons.get(why, 0) + 1
    return t


def bypass_reason(data: object) -> str:
    """The reason a cache bypass record gives, in torch's words (first line)."""
    why = ""
    if isinstance(data, dict):
        why = str(data.get("cache_bypass_reason") or data.get("reason") or "")
    return why.strip().splitlines()[0][:200] if why.strip() else "no reason given"


def cudagraph_skips(h: History) -> list[str]:
    reasons = [e.metrics.cudagraph_skip_reason for e in h if e.metrics.cudagraph_skip_reason]
    reasons += [p.strip() for e in h for p in e.compile.artifacts.get("cudagraph_skip_reason", [])]
    return list(dict.fromkeys(reasons))
