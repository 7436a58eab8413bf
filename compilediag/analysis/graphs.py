"""Graphs and compile time, from torch's compilation_metrics."""

from __future__ import annotations

import re

from compilediag.report import CompileTime, Graph
from compilediag.trace import Compile

RESUME = re.compile(r"torch_dynamo_resume_in_(?P<fn>\w+?)_at_(?P<line>\d+)$")


def frame_name(co_name: str, co_filename: str = "") -> str:
    """`torch_dynamo_resume_in_forward_at_9` -> `forward, after line 9` (the code after a break)."""
    if co_name == "inner" and co_filename.endswith("_dynamo/external_utils.py"):
        return "model call (torch's wrapper of the compiled module)"
    m = RESUME.match(co_name or "")
    if m:
        return f"{m['fn']}, after line {m['line']}"
    return co_name or "?"


def frame_metrics(c: Compile, compiles: list[Compile]) -> dict:
    """The compile's metrics; a compile Dynamo refused logs no code name, so take the
    name and place from another compile of the same frame."""
    if c.metrics.get("co_name"):
        return c.metrics
    frame = c.compile_id.split("/")[-2]
    for k in compiles:
        if k.compile_id.split("/")[-2] == frame and k.metrics.get("co_name"):
            return {
                **c.metrics,
                **{f: k.metrics.get(f) for f in ("co_name", "co_filename", "co_firstlineno")},
            }
    return c.metrics


def produced_graph(c: Compile) -> bool:
    return bool(c.output_graph) or int(c.metrics.get("graph_op_count") or 0) > 0


def collect_graphs(compiles: list[Compile]) -> list[Graph]:
    graphs = []
    for c in compiles:
        if not produced_graph(c):
            continue
        m = c.metrics
        graphs.append(
            Graph(
                compile_id=c.compile_id,
                frame=frame_name(m.get("co_name", ""), m.get("co_filename") or ""),
                file=m.get("co_filename") or (c.stack[-1].file if c.stack else ""),
                line=int(m.get("co_firstlineno") or (c.stack[-1].line if c.stack else 0)),
                ops=int(m.get("graph_op_count") or 0),
                compile_time_s=m.get("entire_frame_compile_time_s"),
            )
        )
    return graphs


def compile_time(compiles: list[Compile]) -> CompileTime:
    """Torch's nested timers, split into disjoint phases that add up to the total.

    entire_frame ⊇ backend_compile (AOTAutograd + Inductor) ⊇ inductor_compile ⊇ code_gen.
    """
    t = CompileTime()
    for c in compiles:
        m = c.metrics
        entire = float(m.get("entire_frame_compile_time_s") or 0.0)
        backend = min(float(m.get("backend_compile_time_s") or 0.0), entire)
        inductor = min(float(m.get("inductor_compile_time_s") or 0.0), backend)
        codegen = min(float(m.get("code_gen_time_s") or 0.0), inductor)
        t.dynamo_s += entire - backend
        t.aot_s += backend - inductor
        t.inductor_s += inductor - codegen
        t.codegen_s += codegen
        t.total_s += entire
        t.kernel_compile_s += float(m.get("triton_compile_time_us") or 0) / 1e6
        for name in c.artifacts:
            if "_cache_" in name:
                t.caches[name] = t.caches.get(name, 0) + len(c.artifacts[name])
    return t


def cudagraph_skips(compiles: list[Compile]) -> list[str]:
    reasons = [
        str(c.metrics.get("cudagraph_skip_reason"))
        for c in compiles
        if c.metrics.get("cudagraph_skip_reason")
    ]
    reasons += [p.strip() for c in compiles for p in c.artifacts.get("cudagraph_skip_reason", [])]
    return list(dict.fromkeys(reasons))
