"""What cuts a model's compile time, from what the compile spent (#52): a function of the
user's that holds most of Dynamo's tracing; a model of repeated blocks compiled whole
(regional compilation); kernels generated and compiled from nothing, which a portable
cache carries to the next machine. Each a note with its figures and the change to make."""

from __future__ import annotations

from compilediag.analysis.history import History
from compilediag.paths import where
from compilediag.report.model import Report
from compilediag.report.vocabulary import Finding, FindingKind, Severity
from compilediag.report.words import seconds
from compilediag.trace.formats import GRAPH_FILE_COMMENT

# a function this share of tracing, in a tracing this long, is worth a note
HOT_SHARE = 0.3
HOT_TRACING_S = 0.5
# regional compilation: a compile this long, of a model with repeated blocks (--try-fixes
# measures it from fixes/remedies.REGIONAL_MIN_S on)
REGIONAL_S = 5.0
# a compile this much generating and compiling kernels, all of them missed in the cache
KERNELS_SHARE = 0.5


def compile_notes(report: Report, h: History | None = None) -> list[Finding]:
    ct = report.compile_time
    if ct is None or not ct.total_s:
        return []
    compute = graph_functions(h) if h is not None else set()
    return [
        Finding(FindingKind.COMPILE_COST, text, Severity.NOTE)
        for text in (_hot_function(report, compute), _regional(report), _portable_cache(report))
        if text
    ]


def graph_functions(h: History) -> set[tuple[str, str]]:
    """(file, function name) of every function whose code made a node of a compiled graph
    (the graphs' `# File: ... in forward` comments): where the model's compute is."""
    out = set()
    for e in h:
        for line in e.compile.output_graph.splitlines():
            m = GRAPH_FILE_COMMENT.match(line)
            if m:
                out.add((m["file"], m["fn"].strip()))
    return out


def _hot_function(report: Report, compute: set[tuple[str, str]]) -> str:
    """A function that holds most of the tracing. Its compile is never advised away where
    it makes graph nodes (a transformer block's forward: the model's compute): tracing is
    paid once a process, and regional compilation or the caches cut it."""
    tracing = report.compile_time.tracing if report.compile_time else None
    if tracing is None or tracing.total_s < HOT_TRACING_S or not tracing.functions:
        return ""
    top = tracing.functions[0]
    if top.share < HOT_SHARE or not top.inlined:  # a compiled frame's own code: its graph
        return ""
    times = f", traced {top.calls} times" if top.calls > 1 else ""
    said = (
        f"Dynamo spent {top.share:.0%} of its tracing ({seconds(top.own_s)} of "
        f"{seconds(tracing.total_s)}) in {top.function} ({where(top.file, top.line)}){times}: "
        "it traces Python one bytecode at a time, every iteration of a loop included. "
    )
    if (top.file, top.function.rsplit(".", 1)[-1]) in compute:
        return said + (
            "Its code is in the compiled graphs (the model's compute): keep it compiled. "
            "Tracing is paid once a process: compiling each repeated block instead of the "
            "whole model (`block.compile()` for each) traces one block's code once for all "
            "blocks of the same parameter and input shapes (a block of other shapes compiles "
            "its own), and "  # (look 29: GAT's two layers of other shapes, traced 4 times)
            "torch's caches (on by default; torch.compiler.save_cache_artifacts() carries "
            "them to a new machine) skip the rest of the compile."
        )
    return said + (
        "Where its result does not depend on the inputs, compute it once outside the "
        "compiled code; else keep it out of the graph with @torch.compiler.disable (it "
        "then runs eagerly, a graph break at its call)."
    )


def _regional(report: Report) -> str:
    blocks, ct = report.target.repeated, report.compile_time
    if blocks is None or ct is None or ct.total_s < REGIONAL_S:
        return ""
    return (
        f"The compile took {seconds(ct.total_s)} for a model of {blocks.count} identical "
        f"blocks ({blocks.cls}, in {blocks.path}) compiled as one: compiling each block instead "
        f"(`for block in model.{blocks.path}: block.compile()`, not torch.compile(model)) "
        f"compiles one block's code, which every block of the same parameter shapes reuses; "
        "the code around them runs eagerly. --try-fixes measures it (compile time, speed "
        "and outputs)."
    )


def _portable_cache(report: Report) -> str:
    ct = report.compile_time
    if ct is None:
        return ""
    kernels = ct.codegen_s  # (compiling the kernels is part of it)
    misses = ct.caches.get("fx_graph_cache_miss", 0)
    if kernels < KERNELS_SHARE * ct.total_s or not misses or ct.caches.get("fx_graph_cache_hit"):
        return ""
    return (
        f"{seconds(kernels)} of the {seconds(ct.total_s)} compile generated and compiled "
        f"kernels, and every graph Inductor compiled ({misses}"
        f"{': forward and backward, one each' if ct.backward_s else ''}) missed the FX graph "
        "cache: on a new machine "
        "(CI, a fresh container) that is paid again. torch.compiler.save_cache_artifacts() "
        "after a run, and torch.compiler.load_cache_artifacts() before the next one's "
        "compile, carry the compiled kernels over."
    )
