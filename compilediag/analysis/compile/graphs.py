"""Graphs and compile time, from torch's compilation_metrics."""

from __future__ import annotations

from compilediag.analysis.history import Entry, History
from compilediag.report.model import CompileTime, Graph
from compilediag.trace.compiles import Compile


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
            phases={k: round(v, 6) for k, v in phases(e).items() if v}
            if e.compile.has_metrics
            else {},
        )
        for e in h
        if e.graph
    ]


def graphless(h: History) -> list[Graph]:
    """The compiles that ended with no graph and no failure (ops 0): a frame whose first
    line broke, or that returned, before any tensor op (a helper that prints first; the
    rest of it after the print). Their ids have no row in the graphs' table."""
    return [
        Graph(compile_id=e.compile_id, frame=e.code.shown, file=e.place[0], line=e.place[1], ops=0)
        for e in h
        if not e.graph and not e.metrics.fail_type and not e.export
    ]


# a compile's phases, disjoint (CompileTime's fields, by name)
PHASES = ("dynamo_s", "aot_s", "inductor_s", "codegen_s", "backward_s", "kernel_compile_s")


def phases(e: Entry) -> dict[str, float]:
    """One compile's time split into disjoint phases (kernel_compile_s, compiling the
    generated kernels, is within the others): torch's nested timers, entire_frame ⊇
    backend_compile (AOTAutograd + Inductor) ⊇ inductor_compile ⊇ code_gen; its backward's
    compile, where it had one."""
    c, m = e.compile, e.metrics
    entire = m.entire_frame_s
    backend = min(m.backend_s, entire)
    inductor = min(m.inductor_s, backend)
    codegen = min(m.codegen_s, inductor)
    out = {
        "dynamo_s": entire - backend, "aot_s": backend - inductor,
        "inductor_s": inductor - codegen, "codegen_s": codegen, "backward_s": 0.0,
        "kernel_compile_s": m.kernel_compile_s,
    }  # fmt: skip
    if c.bwd_metrics is not None:
        # no Dynamo in a backward compile: Inductor's time is the whole of it; with
        # another backend (aot_eager), which states none, its start to its end
        bwd = c.bwd_metrics
        out["backward_s"] = max(bwd.entire_frame_s, bwd.inductor_s) or bwd.duration_s
        out["kernel_compile_s"] += bwd.kernel_compile_s
    return out


def compile_time(h: History) -> CompileTime:
    """Torch's nested timers, split into disjoint phases that add up to the total (each
    compile's `phases`). A compile with no Dynamo frame (AOTInductor's) states only its
    duration: AOTAutograd and Inductor together, counted as Inductor's."""
    t = CompileTime()
    for m in h.outside_metrics:
        t.inductor_s += m.duration_s
        t.total_s += m.duration_s
    for e in h:
        c = e.compile
        split = phases(e)
        for name in PHASES:
            setattr(t, name, getattr(t, name) + split[name])
        t.total_s += e.metrics.entire_frame_s + split["backward_s"]
        t.cache_saved_s += cache_saved_s(c)
        for name in c.artifacts:
            if "_cache_" in name:
                t.caches[name] = t.caches.get(name, 0) + len(c.artifacts[name])
            if name.endswith("_cache_bypass"):
                reasons = t.bypasses.setdefault(name.removesuffix("_cache_bypass"), {})
                for data in c.json_artifacts(name):
                    why = bypass_reason(data)
                    reasons[why] = reasons.get(why, 0) + 1
    return t


def cache_saved_s(c: Compile) -> float:
    """The compile time a compile's cache hits saved, by torch's record of each hit: an
    AOTAutograd cache hit's covers the FX graph it holds, so the larger of the two."""

    def saved(artifact: str, key: str) -> float:
        found = [d.get(key) for d in c.json_artifacts(artifact) if isinstance(d, dict)]
        return sum(float(n) for n in found if isinstance(n, (int, float)))

    return max(
        saved("fx_graph_cache_hit", "time_saved_ns") / 1e9,
        saved("aotautograd_cache_hit", "time_saved_ms") / 1e3,
    )


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
