"""The findings the Report states in words (its notes, a failed compile): what torch
skipped, what a trace lacks, why a speed-up disappoints. Each a function of the compile
history and the Report's other findings; their English is made here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from compilediag.analysis.compile.breaks import DDP_REORDER, user_site
from compilediag.analysis.compile.frameworks import DDP, FSDP_CODE
from compilediag.analysis.compile.kernel_origins import provenance_lines
from compilediag.analysis.compile.kernels import GraphCode
from compilediag.analysis.history import Entry, History
from compilediag.analysis.source import code_at
from compilediag.harness.worker_types import FrameTime, WorkerResult
from compilediag.report.model import Environment, Graph, GraphBreak, Report, TraceInfo
from compilediag.report.vocabulary import Finding, FindingKind, Severity, Source
from compilediag.report.words import ms, plural
from compilediag.trace.formats import (
    RECOMPILE_LIMIT,
    compile_failure_fix,
    frame_name,
    last_chained_break,
    parse_break_text,
    restart_words,
)
from compilediag.trace.releases import untested_notice


def no_provenance(h: History, code: list[GraphCode], source: Source) -> list[Finding]:
    """Generated kernels with no user line, from a run without Inductor's provenance
    records (compilediag does not turn them on: their level is part of the FX graph cache
    key): say how many, and how to get them."""
    generated = [k.kernel for g in code for k in g.kernels if k.kernel.kind != "extern"]
    unplaced = [k for k in generated if not k.source_lines]
    if not generated:
        return []
    if any(provenance_lines(e.compile) for e in h):  # records there (torch logs empty ones)
        return []
    # lines matched by a kernel's ops are a guess where an op sits on several lines (a look's
    # resnet18: most kernels given another block's line); by the weights a C++ kernel reads
    # and where they flow, none so (kernel_origins.lines_from_inputs)
    guess = (
        "the weights they read, else the ops they hold: a guess where an op sits on several lines"
    )
    if not unplaced:
        whose = (
            "The generated kernel's" if len(generated) == 1
            else f"The {len(generated)} generated kernels'"
        )  # fmt: skip
        some = f"{whose} lines were matched from the graph ({guess}, a model's blocks)"
    elif len(unplaced) < len(generated):
        some = f"{len(unplaced)} of {len(generated)} generated kernels name no user line (the "
        some += f"others' were matched from the graph: {guess})"
    elif len(generated) == 1:
        some = "The generated kernel names no user line"
    else:
        some = f"The {len(generated)} generated kernels name no user line"
    return [
        Finding(
            FindingKind.NO_PROVENANCE,
            f"{some}: the run had no Inductor provenance records. INDUCTOR_PROVENANCE=1 "
            + (
                "in the environment before torch is imported"
                if source == Source.IN_PROCESS
                else "beside TORCH_TRACE"
            )
            + " records them, but changes the FX graph cache key.",
        )
    ]


def untested_torch(env: Environment) -> list[Finding]:
    """A notice for each torch outside the tested range that made the findings."""
    return [
        Finding(FindingKind.UNTESTED_TORCH, n)
        for v in env.torch.split(", ")
        if (n := untested_notice(v))
    ]


def ahead_of_time(h: History, code: list[GraphCode]) -> list[Finding]:
    """The headline of an export / AOTInductor trace: what it holds, and what does not
    apply."""
    kinds = h.trace.produced_by
    if "torch.compile" in kinds or not kinds:
        return []
    kernels = sum(k.kernel.kind != "extern" for g in code for k in g.kernels)
    seconds = sum(m.duration_s for m in h.outside_metrics)
    parts = [f"This trace is from {' and '.join(kinds)}, not torch.compile"]
    if "AOTInductor" in kinds:
        took = f" in {seconds:.1f} s" if seconds else ""
        parts.append(
            f"AOTInductor compiled {kernels} kernel{'s' if kernels != 1 else ''} ahead of "
            f"time{took}"
        )
    parts.append("export makes one whole graph or fails: graph breaks and recompiles don't apply")
    return [Finding(FindingKind.AHEAD_OF_TIME, "; ".join(parts) + ".")]


def nothing_compiled(
    h: History, graphs: list[Graph], breaks: Sequence[GraphBreak], failed: bool
) -> list[Finding]:
    """The headline a job that compiled nothing needs: Dynamo was entered, no graph came
    out, so the whole model ran in eager mode. `failed`: a compile failed (that has its
    own finding)."""
    if graphs or not h or failed:
        return []  # (a failed compile has its own finding)
    skipped = [e for e in h if e.metrics.fail_type]
    in_ddp = any(b.framework == DDP for b in breaks) or any(
        "torch/nn/parallel/" in f.file or "DistributedDataParallel" in e.code.name
        or "torch/nn/parallel/" in e.code.file
        for e in h for f in e.compile.stack
    )  # fmt: skip
    if in_ddp:
        text = (
            "torch.compile produced no graph: the whole model ran in eager mode. Dynamo broke "
            "inside DistributedDataParallel's own code and skipped the wrapped module's frames "
            "as torch-internal. " + DDP_REORDER
        )
    else:
        text = (
            f"torch.compile produced no graph: every frame it tried broke before any tensor op "
            f"or was skipped ({len(h)} frame{'s' if len(h) != 1 else ''}, "
            f"{len(skipped)} skipped), so the "
            "whole model ran in eager mode. The breaks and skipped frames below say why."
        )
    return [Finding(FindingKind.NOTHING_COMPILED, text, Severity.WARNING)]


def cache_gaps(h: History) -> list[Finding]:
    """A graph served from the FX-graph cache whose generated code the trace leaves out
    (some torch releases log none on a hit): its kernels can't be listed."""
    missing = [
        e.compile_id for e in h
        if "fx_graph_cache_hit" in e.compile.artifacts and not e.compile.output_code
    ]  # fmt: skip
    if not missing:
        return []
    return [
        Finding(
            FindingKind.CACHE_GAP,
            f"graph {', '.join(missing)} came from the FX-graph cache and this torch logged no "
            "generated code for it, so its kernels are not listed: run with --cold to see them.",
        )
    ]


def discarded_graphs(h: History) -> list[Finding]:
    """Compiles torch restarted after the backend had their graph: the graph is thrown
    away, the compile starts over, and its time holds both (torch's CompileCounter counts
    every backend call)."""
    hit = [e for e in h if e.compile.discarded_graphs]
    if not hit:
        return []
    thrown = sum(e.compile.discarded_graphs for e in hit)
    graphs = sum(e.graph for e in h)
    out = []
    for e in hit:
        n = e.compile.discarded_graphs
        first = "the first graph" if n == 1 else f"the first {n} graphs"
        out.append(
            Finding(
                FindingKind.DISCARDED_GRAPH,
                f"graph {e.compile_id} ({e.code.shown}) was compiled {n + 1} times: torch "
                f"discarded {first} its backend had and started over "
                f"({restart_words(e.metrics.restart_reasons)}). Its compile time holds all.",
                file=e.place[0],
                line=e.place[1],
            )
        )
    out[-1] = replace(
        out[-1],
        message=out[-1].message + f" The backend was called {plural(graphs + thrown, 'time')} for "
        f"{plural(graphs, 'graph')}, as torch's "
        "CompileCounter counts.",
    )
    return out


def skipped_frames(h: History, python_ms: list[FrameTime]) -> list[Finding]:
    """Frames torch gave up on (they run eager): a break in a loop, the recompile limit;
    with their time per call where the worker measured it (`python_ms`)."""
    notes = []
    for e in h:
        reason = e.metrics.fail_reason
        if e.metrics.fail_type != "Unsupported" or RECOMPILE_LIMIT.search(reason) or e.raised:
            continue  # (the recompile limit has its own post-mortem, a raise its failure)
        # the last reason torch chained on is the one that made it give up the frame
        parsed = parse_break_text("Graph Break Reason: " + last_chained_break(reason))
        m = e.code
        # the skipped frame's own code, a library's too (not the user line that called it)
        file, line = (m.file, m.line) if m.file else e.place
        gb = f" ({parsed.gb_id})" if parsed.gb_id else ""
        head = f"{frame_name(m.name)} at {file}:{line} was not compiled and runs in eager mode"
        cost = eager_cost(python_ms, m.file, m.line, m.name)
        if cost is not None:
            head += f", about {ms(cost)} of each call"
        cause = _break_that_skipped(e, parsed.gb_id)
        if cause:  # torch gave up the frame for a break inside it: name that break
            fix = (
                "That break's fix (under Graph breaks) lets torch compile the frame."
                if FSDP_CODE not in cause
                else "It is FSDP's, on purpose: compile each block instead (under Graph "
                "breaks); this frame then stays in eager mode, as it is now."
            )
            text = (
                f"{head}: the graph break at {cause} is inside a loop, and torch cannot resume "
                f"a frame in the middle of a loop{gb}. {fix}"
            )
        else:
            text = f"{head}: {parsed.reason}{gb}. {parsed.explanation}".strip()
        notes.append(Finding(FindingKind.SKIPPED_FRAME, text, Severity.WARNING, file, line))
    return notes


def eager_cost(python_ms: list[FrameTime], file: str, line: int, name: str) -> float | None:
    """The time per call of one function, where the worker timed it."""
    for f in python_ms:
        if (f.file, f.line, f.name) == (file, line, name):
            return f.ms
    return None


def _break_that_skipped(e: Entry, gb_id: str | None) -> str:
    """For a frame torch skipped for a graph break in a loop (GB7000): the break, as
    `file:line (`code`, reason)`; '' for any other skip."""
    if gb_id != "GB7000" or not e.compile.graph_breaks:
        return ""
    parsed = parse_break_text(e.compile.graph_breaks[-1].text)
    site, inner = user_site(parsed, e.compile.stack)
    site = inner or site  # the line in the loop, inside a library's frame too
    code = (site.code or code_at(site.file, site.line)).strip()
    shown = f"`{code}`, " if code else ""
    return f"{site.file}:{site.line} ({shown}{parsed.reason})"


def speedup_notes(report: Report) -> list[str]:
    """What explains a disappointing speed-up, from what the report already found."""
    t, s, env = report.timings, report.summary, report.environment
    if t is None or t.speedup is None or t.speedup >= 1.2:
        return []
    notes = []
    if env.backend in ("eager", "aot_eager"):
        notes.append(f"backend {env.backend} only captures graphs; it does not optimise them.")
    costed = [b for b in report.graph_breaks if b.time_lost_ms is not None]
    if costed and t.compiled_ms:
        lost = sum(b.time_lost_ms or 0.0 for b in costed)
        top = costed[0]
        notes.append(
            f"the graph breaks leave {ms(lost)} of each {ms(t.compiled_ms.median)} "
            f"compiled call to eager Python ({lost / t.compiled_ms.median:.0%}); the costliest, "
            f"at {top.file}:{top.line}, {ms(top.time_lost_ms or 0.0)}."
        )
    elif s.unique_graph_breaks:
        notes.append(  # (a frame torch skipped after a break runs eagerly: no graph of it)
            f"the model runs as {plural(s.graphs, 'graph')} with eager Python at its "
            f"{plural(s.graph_breaks, 'graph break')}."
        )
    # (recompiles cost compile time, not steady-state time: they are no reason here)
    if t.eager_ms and t.eager_ms.median < 0.2:
        advice = "Try realistic sizes"
        # (on CUDA with the device's time measured, the CPU-bound note below says it once)
        if env.device.startswith("cuda") and env.mode != "reduce-overhead" and not t.bound:
            advice += ", or mode=reduce-overhead (CUDA graphs cut the per-call launch cost)"
        notes.append(
            f"eager takes only {ms(t.eager_ms.median)} a call: compiled code still pays guard "
            f"checks and wrapper overhead per call, so a model this small gains little. {advice}."
        )
    if t.bound == "CPU-bound" and t.device_ms and t.compiled_ms:
        overhead = t.compiled_ms.median - t.device_ms.compiled_ms
        advice = (
            " Try mode=reduce-overhead: CUDA graphs replay the kernels without the per-call "
            "launches."
            if env.mode != "reduce-overhead"
            else ""
        )
        notes.append(
            f"compiled is CPU-bound: the GPU works {ms(t.device_ms.compiled_ms)} of each "
            f"{ms(t.compiled_ms.median)} call (eager's call: {ms(t.device_ms.eager_ms)} of "
            f"GPU time); {ms(overhead)} a call is CPU overhead (guards, launches).{advice}"
        )
    if env.mode == "reduce-overhead" and t.cudagraph_skips:
        notes.append(
            "mode=reduce-overhead is in use, but torch skipped CUDA graphs (see above), so "
            "its gain is lost: remove the cause torch names."
        )
    if env.backend == "inductor" and s.kernels <= 1 and not s.unique_graph_breaks:
        notes.append("Inductor generated at most one kernel: there was little to fuse.")
    return notes


def compile_failure_note(worker: WorkerResult, h: History) -> Finding | None:
    """One line for a failed torch.compile, at the user line torch blamed where it did."""
    err = worker.error
    if err is None or err.kind != "compile":
        return None
    file, line, caller = err.file, err.line, err.called_from
    for e in h:  # torch's own record of a compile that failed (not a frame it skipped)
        m = e.metrics
        if m.fail_user_file and e.raised:
            file, line, caller = m.fail_user_file, m.fail_user_line, ""
    where = f" at {file}:{line}" if file else ""
    where += f" (called from {caller})" if caller else ""
    return Finding(
        FindingKind.COMPILE_FAILED,
        f"torch.compile failed{where}: {err.message}",
        Severity.ERROR,
        file,
        line,
        compile_failure_fix(err.message) or "",
    )


def trace_notes(info: TraceInfo) -> list[Finding]:
    """What a trace report says of the files it read: those passed over, damage."""
    notes = []
    if ignored := info.ignored_files:
        notes.append(
            Finding(
                FindingKind.IGNORED_FILES,
                f"ignored {plural(len(ignored), 'file')} with no trace record: "
                + ", ".join(ignored),
            )
        )
    if info.skipped_lines:
        notes.append(
            Finding(
                FindingKind.DAMAGED_TRACE,
                f"{plural(info.skipped_lines, 'unreadable line')} "
                f"{'was' if info.skipped_lines == 1 else 'were'} skipped (a truncated or damaged "
                "trace?).",
                Severity.WARNING,
            )
        )
    if n := info.damaged_payloads:
        notes.append(
            Finding(
                FindingKind.DAMAGED_TRACE,
                f"{plural(n, 'record')} {'was' if n == 1 else 'were'} skipped because "
                f"{'its' if n == 1 else 'their'} payload is damaged "
                "(its md5 is not the one torch wrote): the trace was cut or altered after it "
                "was written.",
                Severity.WARNING,
            )
        )
    return notes
