"""Assemble the Report from parsed traces and the worker's measurements."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from compilediag import __version__
from compilediag.analysis.breaks import DDP, collect_breaks, user_site
from compilediag.analysis.crosscheck import cross_check
from compilediag.analysis.graphs import (
    collect_graphs,
    compile_time,
    cudagraph_skips,
    frame_metrics,
    frame_place,
)
from compilediag.analysis.kernels import GraphCode, all_kernels, generated, relocated
from compilediag.analysis.recompiles import collect_limit_hits, collect_recompiles
from compilediag.analysis.source import code_at
from compilediag.paths import portable_path, portable_text, user_base
from compilediag.report import (
    Breakdown,
    Call,
    CompileFailure,
    Environment,
    Graph,
    GraphBreak,
    LimitHit,
    Recompile,
    Report,
    Summary,
    TargetInfo,
    Timings,
    TraceInfo,
)
from compilediag.torch_formats import (
    EXPORT_DATA_DEPENDENT_FIX,
    EXPORT_PATH,
    GRAPH_FILE_COMMENT,
    NOT_FAILURES,
    PY_FUNCTION,
    RECOMPILE_LIMIT,
    WRAPPER_FRAME,
    compile_failure_fix,
    frame_name,
    is_library_file,
    last_chained_break,
    parse_break_text,
)
from compilediag.torch_releases import untested_notice
from compilediag.trace import Compile, TraceLog
from compilediag.worker_types import ModelInfo, Profiled, WorkerResult

if TYPE_CHECKING:
    from compilediag.analysis.runtime import JobRun


def no_provenance(compiles: list[Compile], code: list[GraphCode]) -> list[str]:
    """Generated kernels with no user line, from a job that ran without Inductor's
    provenance records: say how to get them."""
    generated = [k.kernel for g in code for k in g.kernels if k.kernel.kind != "extern"]
    if not generated or any(k.source_lines for k in generated):
        return []
    if any(name.startswith("inductor_provenance") for c in compiles for name in c.artifacts):
        return []
    return [
        "The generated kernels name no user lines: the job ran without INDUCTOR_PROVENANCE=1. "
        "Set it beside TORCH_TRACE to see which of your lines each kernel came from "
        "(compilediag's own runs set it)."
    ]


def untested_torch(env: Environment) -> list[str]:
    """A notice for each torch outside the tested range that made the findings."""
    return [n for v in env.torch.split(", ") if (n := untested_notice(v))]


def all_compiles(logs: list[TraceLog]) -> list[Compile]:
    return [c for log in logs for c in log.ordered()]


def build_report(
    logs: list[TraceLog],
    worker: WorkerResult,
    target: TargetInfo,
    code: list[GraphCode] | None = None,
    run: JobRun | None = None,
) -> Report:
    """`code` is the kernels' source, when the caller already read it (dump-kernels);
    `run`, a `compilediag run` job's runtime facts."""
    compiles = all_compiles(logs)
    code = all_kernels(logs) if code is None else code
    breaks, total_breaks = collect_breaks(compiles)
    graphs = collect_graphs(compiles)
    attempts = collect_recompiles(compiles)
    # the attempt that hit the recompile limit made no graph: torch's CompileCounter does
    # not count it, and neither do we (the limit has its own finding)
    recompiles = [r for r in attempts if not r.hit_limit]
    ctime = compile_time(compiles, [m for log in logs for m in log.outside.metrics])
    kinds = produced_by(logs, compiles)
    timings = _timings(worker)
    if timings:
        timings.cudagraph_skips = list(
            dict.fromkeys(cudagraph_skips(compiles) + worker.cudagraph_skips)
        )
    env = worker.environment or Environment()
    report = Report(
        tool={"name": "compilediag", "version": __version__},
        environment=env,
        target=TargetInfo(
            path=target.path,
            attr=target.attr,
            inputs=[", ".join(c) for c in worker.inputs],
            params=list(worker.model.params) if worker.model else [],
        ),
        graph_breaks=breaks,
        recompiles=recompiles,
        recompile_limit_hits=collect_limit_hits(compiles, attempts),
        compile_failures=collect_failures(compiles) + export_failures(logs),
        calls=_calls(worker, compiles),
        notes=untested_torch(env)
        + ahead_of_time(logs, kinds, code)
        + nothing_compiled(compiles, graphs, breaks)
        + skipped_frames(compiles, worker.timings.python_ms if worker.timings else {})
        + cache_gaps(compiles)
        + no_provenance(compiles, code),
        graphs=graphs,
        kernels=relocated(generated(code), compiles),
        timings=timings,
        compile_time=ctime if ctime.total_s or compiles else None,
        errors=list(worker.errors),
        trace=TraceInfo(
            # a run's trace lives in a temporary folder that is gone after the run
            files=[log.path for log in logs] if env.source != "run" else [],
            records=sum(log.records for log in logs),
            unknown_records=dict(sum((log.unknown for log in logs), Counter())),
            skipped_lines=sum(log.skipped_lines for log in logs),
            damaged_payloads=sum(log.damaged_payloads for log in logs),
            not_analysed=dict(sorted(sum((log.not_analysed for log in logs), Counter()).items())),
            produced_by=kinds,
        ),
    )
    report.summary = Summary(
        graphs=len(graphs),
        graph_breaks=total_breaks,
        unique_graph_breaks=len({(b.file, b.line) for b in breaks}),
        recompiles=len(recompiles),
        kernels=sum(k.kind != "extern" for k in report.kernels),
        compile_time_s=round(ctime.total_s, 6),
        speedup=timings.speedup if timings else None,
        compile_failures=len(report.compile_failures),
        torch_kernel_count=worker.torch_kernel_count,
    )
    if timings and worker.timings and worker.timings.profiled:
        attribute_time(report, worker.timings.profiled)
    if timings:
        timings.notes = speedup_notes(report)
    failure = _compile_failure(worker, compiles)
    if failure:
        report.errors.insert(0, failure)
    if worker.explain is not None:
        report.cross_check = cross_check(breaks, worker.explain)
    if worker.model is not None:
        in_users_words(report, worker.model)
    if run is not None:
        from compilediag.analysis.runtime import apply_runtime

        apply_runtime(report, run, cudagraph_skips(compiles))
    make_portable(report, os.getcwd())
    return report


def in_users_words(report: Report, model: ModelInfo) -> None:
    """Torch names positional inputs `args[0]` (it compiles its wrapper `inner(*args)`) and
    that wrapper's frame: say `input_ids` and `GPT2LMHeadModel.forward` instead; a kernel's
    submodules get their class (`body.0 (Conv2d)`)."""

    def named(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            i = int(m.group(1))
            return model.params[i] if i < len(model.params) else m.group(0)

        return re.sub(r"\bargs\[(\d+)\]", one, text)

    def place(item: Recompile | Graph | LimitHit) -> None:
        if not model.name:
            return
        entry = item.compile_id.startswith("0/")
        if item.frame == WRAPPER_FRAME:
            item.frame = f"{model.name} (via torch's wrapper)"
        elif entry and is_library_file(item.file):
            # the model's own forward in a library (timm's), or that forward under a
            # library's decorator (transformers' `wrapper`)
            own = model.name.rpartition(".")[2] == item.frame
            via = "" if own else f" (via {item.frame} in {os.path.basename(item.file)})"
            item.frame = model.name + via
        else:
            return
        if model.file:
            item.file, item.line = model.file, model.line

    for r in report.recompiles:
        place(r)
        r.failed_guard = named(r.failed_guard)
        r.failed_guards = [named(g) for g in r.failed_guards]
        r.suggestion = named(r.suggestion)
    for g in report.graphs:
        place(g)
    for h in report.recompile_limit_hits:
        place(h)
        h.distinct_reasons = [named(x) for x in h.distinct_reasons]

    # module paths are relative to the compiled frame's `self`: the model's in its forward
    # (the entry frame, and the frames that resume it after a break), a submodule's elsewhere
    def in_forward(g: Graph) -> bool:
        return g.compile_id.startswith("0/") or (
            g.file == model.file and model.line <= g.line <= model.end_line
        )

    own = {g.compile_id for g in report.graphs if in_forward(g)}
    for k in report.kernels:
        if k.compile_id in own:
            k.modules = [
                f"{p} ({model.modules[p]})" if p in model.modules else p for p in k.modules
            ]


def make_portable(report: Report, root: str) -> None:
    """Store every path the way `portable_path` says, once the analysis that needed the
    real paths is done: relative to `root` (the folder the command ran in), a user file
    outside it relative to the folder of the user's files."""
    files: list[tuple[object, str]] = [(report.target, "path")]
    for b in report.graph_breaks:
        files += [(b, "file")] + ([(b.library_frame, "file")] if b.library_frame else [])
    files += [(r, f) for r in report.recompiles for f in ("file", "guard_file")]
    files += [(x, "file") for x in (*report.recompile_limit_hits, *report.compile_failures)]
    files += [(g, "file") for g in report.graphs]
    if report.runtime:
        files.append((report.runtime, "step_file"))
    if report.cross_check:
        files += [(x, "file") for x in report.cross_check.explain_sites]
        files += [(d, "file") for d in report.cross_check.disagreements if d.file]
    places = [p.rpartition(":")[0] for k in report.kernels for p in k.source_lines]
    base = user_base([*(getattr(o, f) for o, f in files), *places], root)

    def rel(path: str) -> str:
        return portable_path(path, root, base)

    for obj, field_name in files:
        setattr(obj, field_name, rel(getattr(obj, field_name)))
    for k in report.kernels:  # "file:line"
        k.source_lines = [
            rel(f) + sep + line if sep else rel(p)
            for p in k.source_lines
            for f, sep, line in [p.rpartition(":")]
        ]
    report.notes = [portable_text(n, root, base) for n in report.notes]
    if report.timings:
        report.timings.notes = [portable_text(n, root, base) for n in report.timings.notes]
    report.errors = [portable_text(e, root, base) for e in report.errors]


def collect_failures(compiles: list[Compile]) -> list[CompileFailure]:
    """Compiles whose metrics say torch.compile failed (not a frame skipped for a graph
    break, not the recompile limit: those have their own findings)."""
    out = []
    for c in compiles:
        m = c.metrics
        if not m.fail_type or m.fail_type in NOT_FAILURES or RECOMPILE_LIMIT.search(m.fail_reason):
            continue
        fm = frame_metrics(c, compiles)
        file, line = frame_place(c, fm)
        reason = m.fail_reason or next(iter(c.artifacts.get("dynamo_error", [])), "")
        lines = [ln.strip() for ln in reason.strip().splitlines() if ln.strip()]
        # "backend='x' raised:" says who; the next line says what
        reason = " ".join(lines[:2]) if lines and lines[0].endswith(":") else (
            lines[0] if lines else m.fail_type
        )  # fmt: skip
        if m.fail_user_file:
            file, line = m.fail_user_file, m.fail_user_line
        out.append(
            CompileFailure(
                compile_id=c.compile_id,
                frame=frame_name(fm.co_name, fm.co_filename),
                file=file,
                line=line,
                fail_type=m.fail_type,
                reason=reason,
                code=code_at(file, line),
                fix=compile_failure_fix(reason) or compile_failure_fix(m.fail_type),
                by="torch.export" if through_export(c) else "torch.compile",
            )
        )
    return out


def through_export(c: Compile) -> bool:
    """A Dynamo compile that torch.export made (strict export), not torch.compile."""
    return any(EXPORT_PATH.search(f.file) for f in c.stack)


def produced_by(logs: list[TraceLog], compiles: list[Compile]) -> list[str]:
    """What wrote the trace: torch.compile, torch.export, AOTInductor (one or more)."""
    kinds = []
    if any(not through_export(c) for c in compiles):
        kinds.append("torch.compile")
    if any(log.exported or log.outside.exported_programs for log in logs) or any(
        through_export(c) for c in compiles
    ):
        kinds.append("torch.export")
    if any(log.aot_code or log.outside.metrics for log in logs):
        kinds.append("AOTInductor")
    return kinds


def ahead_of_time(logs: list[TraceLog], kinds: list[str], code: list[GraphCode]) -> list[str]:
    """The headline of an export / AOTInductor trace (`kinds`: what wrote it): what it
    holds, and what does not apply."""
    if "torch.compile" in kinds or not kinds:
        return []
    kernels = sum(k.kernel.kind != "extern" for g in code for k in g.kernels)
    seconds = sum(m.duration_s for log in logs for m in log.outside.metrics)
    parts = [f"This trace is from {' and '.join(kinds)}, not torch.compile"]
    if "AOTInductor" in kinds:
        took = f" in {seconds:.1f} s" if seconds else ""
        parts.append(
            f"AOTInductor compiled {kernels} kernel{'s' if kernels != 1 else ''} ahead of "
            f"time{took}"
        )
    parts.append("export makes one whole graph or fails: graph breaks and recompiles don't apply")
    return ["; ".join(parts) + "."]


def export_failures(logs: list[TraceLog]) -> list[CompileFailure]:
    """A (non-strict) export that failed: torch logs the graph it had traced so far
    (make_fx_fail_partial); its last user line is where it stopped, and a run-time-only
    value (`u0` of `.item()`) made there is the usual cause."""
    out = []
    for log in logs:
        for partial in log.outside.export_failures:
            sites = [m for m in map(GRAPH_FILE_COMMENT.match, partial.splitlines()) if m]
            sites = [m for m in sites if not is_library_file(m["file"])] or sites
            file, line = (sites[-1]["file"], int(sites[-1]["line"])) if sites else ("", 0)
            fn = sites[-1]["fn"] if sites else ""
            unbacked = [
                u.symbol for u in log.outside.unbacked
                if any(f.file == file and f.line == line for f in u.stack)
            ]  # fmt: skip
            code = code_at(file, line) or (sites[-1]["code"] if sites else "")
            branch = re.match(r"\s*(if|elif|while|assert)\b", code)
            why = (
                f"a value known only at run time ({', '.join(unbacked)}) "
                + (f"decides the `{branch[1]}`" if branch else "is needed to go on")
                if unbacked
                else "the graph it traced stops at this line"
            )
            out.append(
                CompileFailure(
                    compile_id="export",
                    frame=fn,
                    file=file,
                    line=line,
                    fail_type="ExportFailed",
                    reason=why,
                    code=code,
                    fix=EXPORT_DATA_DEPENDENT_FIX if unbacked else "",
                    by="torch.export",
                )
            )
    return out


def _calls(worker: WorkerResult, compiles: list[Compile]) -> list[Call]:
    """The sweep's timeline: each compile belongs to the call whose wall window holds it."""
    calls = []
    limit_hit = False
    for c in worker.calls:
        mine = [
            k
            for k in compiles
            if k.metrics.start_time is not None and c.start <= k.metrics.start_time <= c.end
        ]
        if mine:
            state = "compiled"
        else:
            # past the limit torch only runs the graphs it has: a call that needs a new
            # one runs in eager mode, with no compile to show for it
            state = "limit" if limit_hit else "hit"
        limit_hit = limit_hit or any(RECOMPILE_LIMIT.search(k.metrics.fail_reason) for k in mine)
        calls.append(
            Call(
                index=c.index,
                inputs=", ".join(c.inputs),
                compiled=bool(mine),
                state=state,
                compile_ids=[k.compile_id for k in mine],
                compile_time_s=sum(k.metrics.entire_frame_s for k in mine),
                wall_s=c.wall_s,
            )
        )
    return calls


def nothing_compiled(
    compiles: list[Compile], graphs: list[Graph], breaks: Sequence[GraphBreak] = ()
) -> list[str]:
    """The headline a job that compiled nothing needs: Dynamo was entered, no graph came
    out, so the whole model ran in eager mode."""
    if graphs or not compiles or collect_failures(compiles):
        return []  # (a failed compile has its own finding)
    skipped = [c for c in compiles if c.metrics.fail_type]
    in_ddp = any(b.framework == DDP for b in breaks) or any(
        "torch/nn/parallel/" in f.file or "DistributedDataParallel" in c.metrics.co_name
        or "torch/nn/parallel/" in c.metrics.co_filename
        for c in compiles for f in c.stack
    )  # fmt: skip
    if in_ddp:
        return [
            "torch.compile produced no graph: the whole model ran in eager mode. Dynamo broke "
            "inside DistributedDataParallel's own code and skipped the wrapped module's frames "
            "as torch-internal. Compile the module, then wrap it (DDP(torch.compile(model))), "
            "or compile each block; see torch's notes on DDP with torch.compile."
        ]
    return [
        f"torch.compile produced no graph: every frame it tried broke before any tensor op "
        f"or was skipped ({len(compiles)} frame{'s' if len(compiles) != 1 else ''}, "
        f"{len(skipped)} skipped), so the "
        "whole model ran in eager mode. The breaks and skipped frames below say why."
    ]


def cache_gaps(compiles: list[Compile]) -> list[str]:
    """A graph served from the FX-graph cache whose generated code the trace leaves out
    (some torch releases log none on a hit): its kernels can't be listed."""
    missing = [
        c.compile_id for c in compiles
        if "fx_graph_cache_hit" in c.artifacts and not c.output_code
    ]  # fmt: skip
    if not missing:
        return []
    return [
        f"graph {', '.join(missing)} came from the FX-graph cache and this torch logged no "
        "generated code for it, so its kernels are not listed: run with --cold to see them."
    ]


def skipped_frames(compiles: list[Compile], python_ms: dict[str, float]) -> list[str]:
    """Frames torch gave up on (they run eager): a break in a loop, the recompile limit;
    with their time per call where the worker measured it (`python_ms`)."""
    notes = []
    for c in compiles:
        reason = c.metrics.fail_reason
        if c.metrics.fail_type != "Unsupported" or RECOMPILE_LIMIT.search(reason):
            continue  # (the recompile limit has its own post-mortem)
        # the last reason torch chained on is the one that made it give up the frame
        parsed = parse_break_text("Graph Break Reason: " + last_chained_break(reason))
        m = frame_metrics(c, compiles)
        # the skipped frame's own code, a library's too (not the user line that called it)
        file, line = (m.co_filename, m.co_firstlineno) if m.co_filename else frame_place(c, m)
        gb = f" ({parsed.gb_id})" if parsed.gb_id else ""
        head = f"{frame_name(m.co_name)} at {file}:{line} was not compiled and runs in eager mode"
        cost = eager_cost(python_ms, m.co_filename, m.co_firstlineno, m.co_name)
        if cost is not None:
            head += f", about {cost:.3f} ms of each call"
        cause = _break_that_skipped(c, parsed.gb_id)
        if cause:  # torch gave up the frame for a break inside it: name that break
            notes.append(
                f"{head}: the graph break at {cause} is inside a loop, and torch cannot resume "
                f"a frame in the middle of a loop{gb}. That break's fix (under Graph breaks) "
                "lets torch compile the frame."
            )
            continue
        notes.append(f"{head}: {parsed.reason}{gb}. {parsed.explanation}".strip())
    return notes


def eager_cost(python_ms: dict[str, float], file: str, line: int, name: str) -> float | None:
    """The time per call of one function, from the profiler's `path(line): name` keys (its
    path from a sys.path folder: a tail of the absolute one)."""
    for key, ms in python_ms.items():
        m = PY_FUNCTION.match(key)
        if m and m["name"] == name and int(m["line"]) == line and file.endswith("/" + m["file"]):
            return ms
    return None


def _break_that_skipped(c: Compile, gb_id: str | None) -> str:
    """For a frame torch skipped for a graph break in a loop (GB7000): the break, as
    `file:line (`code`, reason)`; '' for any other skip."""
    if gb_id != "GB7000" or not c.graph_breaks:
        return ""
    parsed = parse_break_text(c.graph_breaks[-1].text)
    site, inner = user_site(parsed, c.stack)
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
            f"the graph breaks leave {lost:.3f} ms of each {t.compiled_ms.median:.3f} ms "
            f"compiled call to eager Python ({lost / t.compiled_ms.median:.0%}); the costliest, "
            f"at {top.file}:{top.line}, {top.time_lost_ms:.3f} ms."
        )
    elif s.unique_graph_breaks:
        notes.append(
            f"{s.graph_breaks} graph breaks split the model into {s.graphs} graphs, with Python "
            "running between them."
        )
    # (recompiles cost compile time, not steady-state time: they are no reason here)
    if t.eager_ms and t.eager_ms.median < 0.2:
        advice = "Try realistic sizes"
        # (on CUDA with the device's time measured, the CPU-bound note below says it once)
        if env.device.startswith("cuda") and env.mode != "reduce-overhead" and not t.bound:
            advice += ", or mode=reduce-overhead (CUDA graphs cut the per-call launch cost)"
        notes.append(
            f"eager takes only {t.eager_ms.median:.3f} ms a call: compiled code still pays guard "
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
            f"compiled is CPU-bound: the GPU works {t.device_ms.compiled_ms:.3f} ms of each "
            f"{t.compiled_ms.median:.3f} ms call (eager's call: {t.device_ms.eager_ms:.3f} ms of "
            f"GPU time); {overhead:.3f} ms a call is CPU overhead (guards, launches).{advice}"
        )
    if env.mode == "reduce-overhead" and t.cudagraph_skips:
        notes.append(
            "mode=reduce-overhead is in use, but torch skipped CUDA graphs (see above), so "
            "its gain is lost: remove the cause torch names."
        )
    if env.backend == "inductor" and s.kernels <= 1 and not s.unique_graph_breaks:
        notes.append("Inductor generated at most one kernel: there was little to fuse.")
    return notes


def _compile_failure(worker: WorkerResult, compiles: list[Compile]) -> str | None:
    """One line for a failed torch.compile, at the user line torch blamed where it did."""
    err = worker.error
    if err is None or err.kind != "compile":
        return None
    file, line = err.file, err.line
    for c in compiles:
        if c.metrics.fail_user_file:
            file, line = c.metrics.fail_user_file, c.metrics.fail_user_line
    where = f" at {file}:{line}" if file else ""
    fix = compile_failure_fix(err.message)
    return f"torch.compile failed{where}: {err.message}" + (f" Fix: {fix}" if fix else "")


# wall time per call this much above the GPU's busy time: the CPU is what the call waits on
CPU_BOUND_RATIO = 1.5


def bound(wall_ms: float, device_ms: float) -> str:
    return "CPU-bound" if wall_ms > CPU_BOUND_RATIO * device_ms else "GPU-bound"


def attribute_time(report: Report, p: Profiled) -> None:
    """Each graph's time per call, and the eager time around it, given to the graph break
    that ended it (the region of the last graph has no break: its time is overhead); the
    breaks then rank by the time they cost.

    The profiler's own overhead stretches every part a little: the parts are its shares
    of the profiled call, applied to the timed call (the compiled median), so they add up
    to the time the report measured."""
    timed = (
        report.timings.compiled_ms.median if report.timings and report.timings.compiled_ms else None
    )
    scale = timed / p.call_ms if timed and p.call_ms else 1.0
    regions = {r.compile_id: r for r in p.regions}
    for g in report.graphs:
        r = regions.get(g.compile_id)
        if r is not None:
            g.time_ms, g.eager_ms = round(r.graph_ms * scale, 6), round(r.gap_ms * scale, 6)
    given: set[str] = set()  # a region's time goes to one finding (a break chain is one)
    for b in report.graph_breaks:
        mine = [c for c in b.compile_ids if c in regions and c not in given]
        given.update(mine)
        lost = sum(regions[c].gap_ms for c in mine)
        if mine:
            b.time_lost_ms = round(lost * scale, 6)
            b.time_lost_share = round(lost / p.call_ms, 4) if p.call_ms else None
    report.graph_breaks.sort(key=lambda b: -(b.time_lost_ms or 0.0))
    if report.timings is not None:
        report.timings.breakdown = Breakdown(
            call_ms=round(p.call_ms * scale, 6),
            in_graphs_ms=round(sum(r.graph_ms for r in p.regions) * scale, 6),
            between_graphs_ms=round(sum(r.gap_ms for r in p.regions) * scale, 6),
            outside_ms=round(p.outside_ms * scale, 6),
            calls=p.calls,
            profiled_call_ms=round(p.call_ms, 6),
        )


def _timings(worker: WorkerResult) -> Timings | None:
    if worker.first_call_s is None:
        return None
    t = Timings(first_call_s=worker.first_call_s, mutated_inputs=list(worker.mutated_inputs))
    check = worker.output_check
    if check is not None:
        t.max_abs_err = check.max_abs_err
        t.max_rel_err = check.max_rel_err
        t.outputs_match = not check.mismatch
    m = worker.timings
    if m:
        t.eager_ms = m.eager_ms
        t.compiled_ms = m.compiled_ms
        t.device_ms = m.device
        t.bound = bound(m.compiled_ms.median, m.device.compiled_ms) if m.device else ""
        t.speedup = m.speedup
        t.repeat = m.repeat
        t.warmup = m.warmup
        t.calls_per_block = m.calls_per_block
        t.method = m.method
    return t
