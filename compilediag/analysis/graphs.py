"""Graphs and compile time, from torch's compilation_metrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from compilediag.compiles import CompilationMetrics, Compile
from compilediag.paths import is_library_file, package_of
from compilediag.report import CompileTime, Graph
from compilediag.torch_formats import frame_name


def frame_metrics(c: Compile, compiles: list[Compile]) -> CompilationMetrics:
    """The compile's metrics; a compile Dynamo refused logs no code name, so take the
    name and place from another compile of the same frame."""
    if c.metrics.co_name:
        return c.metrics
    for k in compiles:
        if k.id.frame_key == c.id.frame_key and k.metrics.co_name:
            km = k.metrics
            return replace(
                c.metrics,
                co_name=km.co_name,
                co_filename=km.co_filename,
                co_firstlineno=km.co_firstlineno,
            )
    return c.metrics


def frame_place(c: Compile, m: CompilationMetrics) -> tuple[str, int]:
    """Where the compiled frame starts: its code object, else the top of its stack. A frame
    of torch's own (its wrapper of a compiled module, Module.__call__) is placed at the
    user's line that called into it, the last of the user's frames in its stack, where
    there is one; a frame of another library (transformers, torchvision) is where it is,
    the library's code."""
    mine = [f for f in c.stack if not is_library_file(f.file)]
    torchs = is_library_file(m.co_filename) and package_of(m.co_filename) in ("torch", "")
    if m.co_filename and (not torchs or not mine):
        return m.co_filename, m.co_firstlineno
    if mine:
        return mine[-1].file, mine[-1].line
    return (c.stack[-1].file, c.stack[-1].line) if c.stack else ("", 0)


def produced_graph(c: Compile) -> bool:
    """A graph was installed: Dynamo traced one and the compile did not fail (a failed
    backend logs the traced graph, but nothing runs it; CompileCounter does not count it)."""
    return (bool(c.output_graph) or c.metrics.graph_op_count > 0) and not c.metrics.fail_type


def collect_graphs(compiles: list[Compile]) -> list[Graph]:
    graphs = []
    for c in compiles:
        if not produced_graph(c):
            continue
        m = c.metrics
        file, line = frame_place(c, m)
        graphs.append(
            Graph(
                compile_id=c.compile_id,
                frame=frame_name(m.co_name, m.co_filename),
                file=file,
                line=line,
                ops=m.graph_op_count,
                compile_time_s=m.entire_frame_s if c.has_metrics else None,
            )
        )
    return graphs


def compile_time(
    compiles: list[Compile], outside: Sequence[CompilationMetrics] = ()
) -> CompileTime:
    """Torch's nested timers, split into disjoint phases that add up to the total.

    entire_frame ⊇ backend_compile (AOTAutograd + Inductor) ⊇ inductor_compile ⊇ code_gen.
    `outside`: the metrics of compiles with no Dynamo frame (AOTInductor's), whose only
    time is their duration: AOTAutograd and Inductor together, counted as Inductor's.
    """
    t = CompileTime()
    for m in outside:
        t.inductor_s += m.duration_s
        t.total_s += m.duration_s
    for c in compiles:
        m = c.metrics
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
            # no Dynamo in a backward compile: Inductor's time is the whole of it
            backward = max(c.bwd_metrics.entire_frame_s, c.bwd_metrics.inductor_s)
            t.backward_s += backward
            t.total_s += backward
            t.kernel_compile_s += c.bwd_metrics.kernel_compile_s
        for name in c.artifacts:
            if "_cache_" in name:
                t.caches[name] = t.caches.get(name, 0) + len(c.artifacts[name])
    return t


def cudagraph_skips(compiles: list[Compile]) -> list[str]:
    reasons = [c.metrics.cudagraph_skip_reason for c in compiles if c.metrics.cudagraph_skip_reason]
    reasons += [p.strip() for c in compiles for p in c.artifacts.get("cudagraph_skip_reason", [])]
    return list(dict.fromkeys(reasons))
