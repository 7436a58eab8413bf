"""Assemble the Report from parsed traces and the worker's measurements."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from compilediag.analysis.compile.breaks import classify, collect_breaks
from compilediag.analysis.compile.crosscheck import cross_check
from compilediag.analysis.compile.graphs import (
    collect_graphs,
    compile_time,
    cudagraph_skips,
    graphless,
)
from compilediag.analysis.compile.kernels import GraphCode, all_kernels, generated, relocated
from compilediag.analysis.compile.numerics import numerics_of
from compilediag.analysis.compile.time_advice import compile_notes
from compilediag.analysis.compile.timings import attribute_time, timings_of
from compilediag.analysis.compile.torch_bugs import torch_bug
from compilediag.analysis.history import History, build_history
from compilediag.analysis.notes import (
    ahead_of_time,
    cache_gaps,
    compile_failure_note,
    discarded_graphs,
    no_provenance,
    nothing_compiled,
    skipped_frames,
    speedup_notes,
    untested_torch,
)
from compilediag.analysis.recompiles.recompiles import (
    close_to_limit,
    collect_limit_hits,
    collect_recompiles,
)
from compilediag.analysis.source import code_at
from compilediag.harness.worker_types import ModelInfo, WorkerResult
from compilediag.paths import is_library_file, portable_path, portable_text
from compilediag.report.compile import BREAK_RAISED
from compilediag.report.model import (
    VERSION,
    Call,
    CompileFailure,
    Environment,
    Graph,
    LimitHit,
    Recompile,
    Repeated,
    Report,
    Summary,
    TargetInfo,
)
from compilediag.report.vocabulary import CallState, Finding, FindingKind, Severity
from compilediag.trace.compiles import TraceLog, id_of
from compilediag.trace.formats import (
    EXPORT_DATA_DEPENDENT_FIX,
    FAKE_TENSOR_ERROR,
    FAKE_TENSOR_FIX,
    GRAPH_FILE_COMMENT,
    RECOMPILE_LIMIT,
    WRAPPER_FRAME,
    compile_failure_fix,
    parse_break_text,
)

if TYPE_CHECKING:
    from compilediag.analysis.step.runtime import JobRun

EXPORT_FAILURE_ID = "export"  # the compile id of a failed (non-strict) export: it has none


def build_report(
    source: History | list[TraceLog],
    worker: WorkerResult | None,
    target: TargetInfo,
    *,
    environment: Environment | None = None,
    code: list[GraphCode] | None = None,
    run: JobRun | None = None,
) -> Report:
    """The finished Report of a compile history (or of the parsed traces it is built from)
    and, for a run compilediag made, the worker's measurements (`worker`; None for a trace
    alone, whose `environment` says where it came from). `code` is the kernels' source,
    when the caller already read it (dump-kernels); `run`, a `compilediag run` job's
    runtime facts."""
    h = source if isinstance(source, History) else build_history(source)
    measured = worker or WorkerResult()
    env = environment or measured.environment or Environment()
    code = all_kernels(h) if code is None else code
    report = Report(
        tool={"name": "compilediag", "version": VERSION},
        environment=env,
        target=TargetInfo(
            path=target.path,
            attr=target.attr,
            inputs=[", ".join(c) for c in measured.inputs],
            params=list(measured.model.params) if measured.model else [],
        ),
        # a run's trace lives in a temporary folder that is gone after the run
        trace=replace(h.trace, files=h.trace.files if env.source != "run" else []),
    )
    total_breaks = what_torch_compiled(report, h, code)
    what_the_worker_measured(report, h, measured)
    report.notes = notes_of(report, h, code, measured)
    report.summary = summary_of(report, total_breaks, measured)
    if report.timings:
        report.timings.notes = speedup_notes(report)
    if failure := compile_failure_note(measured, h):
        report.errors.insert(0, failure)
    if measured.model is not None:
        in_users_words(report, measured.model)
        report.target.repeated = repeated_blocks(measured.model.modules)
    report.notes += close_to_limit(h, report.recompiles)  # in the user's words, as they are
    report.notes += compile_notes(report, h)
    if run is not None:
        from compilediag.analysis.step.runtime import apply_runtime

        apply_runtime(report, run, cudagraph_skips(h))
    make_portable(report, os.getcwd())
    return report


def what_torch_compiled(report: Report, h: History, code: list[GraphCode]) -> int:
    """What torch compiled: breaks, recompiles, the limit, failures, graphs, kernels and
    compile time. Returns how many times a graph was broken."""
    report.graph_breaks, total_breaks = collect_breaks(h)
    attempts = collect_recompiles(h)
    # the attempt that hit the recompile limit made no graph: torch's CompileCounter does
    # not count it, and neither do we (the limit has its own finding)
    report.recompiles = [r for r in attempts if not r.hit_limit]
    report.recompile_limit_hits = collect_limit_hits(h, attempts)
    report.compile_failures = collect_failures(h) + export_failures(h)
    report.graphs, report.graphless = collect_graphs(h), graphless(h)
    report.kernels = relocated(generated(code), h)
    ctime = compile_time(h)
    report.compile_time = ctime if ctime.total_s or h else None
    return total_breaks


def what_the_worker_measured(report: Report, h: History, measured: WorkerResult) -> None:
    """What the worker measured: the calls' timeline, timings (where the time goes), the
    cross-check against torch._dynamo.explain, the steps that failed."""
    report.calls = _calls(measured, h)
    if measured.tracing is not None and report.compile_time is not None:
        report.compile_time.tracing = measured.tracing
    report.timings = timings_of(measured)
    if report.timings:
        report.timings.cudagraph_skips = list(
            dict.fromkeys(cudagraph_skips(h) + measured.cudagraph_skips)
        )
        if measured.timings and measured.timings.profiled:
            attribute_time(report, measured.timings.profiled)
    if measured.explain is not None:
        skipped = frozenset(e.compile_id for e in h if e.metrics.fail_type and not e.raised)
        report.cross_check = cross_check(report.graph_breaks, measured.explain, skipped)
    report.numerics = numerics_of(measured.numerics, report.kernels)
    report.errors = [Finding(FindingKind.RUN_ERROR, e, Severity.ERROR) for e in measured.errors]


def notes_of(
    report: Report, h: History, code: list[GraphCode], measured: WorkerResult
) -> list[Finding]:
    """What the report says in words beside its findings (notes.py makes each)."""
    # a compile that failed has its own finding (not a failed export)
    failed = any(f.compile_id != EXPORT_FAILURE_ID for f in report.compile_failures)
    return (
        untested_torch(report.environment)
        + ahead_of_time(h, code)
        + nothing_compiled(h, report.graphs, report.graph_breaks, failed)
        + skipped_frames(h, measured.timings.python_ms if measured.timings else [])
        + cache_gaps(h)
        + discarded_graphs(h)
        + no_provenance(h, code, report.environment.source)
    )


def summary_of(report: Report, total_breaks: int, measured: WorkerResult) -> Summary:
    return Summary(
        graphs=len(report.graphs),
        graph_breaks=total_breaks,
        unique_graph_breaks=len({(b.file, b.line) for b in report.graph_breaks}),
        recompiles=len(report.recompiles),
        kernels=sum(k.kind != "extern" for k in report.kernels),
        compile_time_s=round(report.compile_time.total_s, 6) if report.compile_time else 0.0,
        speedup=report.timings.speedup if report.timings else None,
        speedup_noisy=bool(report.timings and report.timings.noise),
        compile_failures=len(report.compile_failures),
        torch_kernel_count=measured.torch_kernel_count,
    )


# a container of this many children of one class is a run of repeated blocks
MIN_BLOCKS = 4


def repeated_blocks(modules: dict[str, str]) -> Repeated | None:
    """The container with the most children of one build, each child's class and its
    submodules' the same (`blocks.0` ... `blocks.11`, Block): the model's repeated blocks;
    None where there are fewer than MIN_BLOCKS (a look's detection heads, six Sequentials
    of other layers each, read as "6 identical blocks")."""
    children: dict[str, list[tuple[str, ...]]] = {}
    for path, cls in modules.items():
        parent, _, index = path.rpartition(".")
        if index.isdigit():
            inside = tuple(
                f"{p.removeprefix(path)}={c}"
                for p, c in modules.items()
                if p.startswith(path + ".")
            )
            children.setdefault(parent, []).append((cls, *inside))
    runs = [
        Repeated(parent, builds[0][0], len(builds))
        for parent, builds in children.items()
        if parent and len(builds) >= MIN_BLOCKS and len(set(builds)) == 1
    ]
    return max(runs, key=lambda r: r.count) if runs else None


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
        entry = _of_entry_frame(item.compile_id)
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
        if r.change:
            r.change.source = named(r.change.source)
        r.dims = [named(x) for x in r.dims]
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
        return _of_entry_frame(g.compile_id) or (
            g.file == model.file and model.line <= g.line <= model.end_line
        )

    own = {g.compile_id for g in report.graphs if in_forward(g)}
    for k in report.kernels:
        if k.compile_id in own:
            k.modules = [
                f"{p} ({model.modules[p]})" if p in model.modules else p for p in k.modules
            ]


def _of_entry_frame(compile_id: str) -> bool:
    cid = id_of(compile_id)
    return cid is not None and cid.of_entry_frame


def make_portable(report: Report, root: str) -> None:
    """Store every path the way `portable_path` says, once the analysis that needed the
    real paths is done: relative to `root` (the folder the command ran in); a user file
    outside it keeps its path (where the job ran: a trace from another machine names its
    files as they were there)."""
    files: list[tuple[object, str]] = [(report.target, "path")]
    for b in report.graph_breaks:
        files += [(b, "file")] + ([(b.library_frame, "file")] if b.library_frame else [])
    files += [(r, f) for r in report.recompiles for f in ("file", "guard_file")]
    files += [(x, "file") for x in (*report.recompile_limit_hits, *report.compile_failures)]
    files += [(g, "file") for g in report.graphs + report.graphless]
    if report.runtime:
        files.append((report.runtime, "step_file"))
    if report.compile_time and report.compile_time.tracing:
        files += [(f, "file") for f in report.compile_time.tracing.functions]
    if report.cross_check:
        files += [(x, "file") for x in report.cross_check.explain_sites]
        files += [(d, "file") for d in report.cross_check.disagreements if d.file]
    n = report.numerics
    if n is not None:
        sites = (n.first_node, n.first_nonfinite, n.eager_nonfinite, *n.random_ops)
        files += [(x, "file") for x in sites if x is not None and x.file]
        files += [(n, "repro")] if n.repro else []
        n.words = portable_text(n.words, root)

    def rel(path: str) -> str:
        return portable_path(path, root)

    for obj, field_name in files:
        setattr(obj, field_name, rel(getattr(obj, field_name)))
    for b in report.graph_breaks:  # torch's own words name files too (a look: its _compile.py)
        b.reason, b.explanation, b.suggestion = (
            portable_text(t, root) for t in (b.reason, b.explanation, b.suggestion)
        )
        b.hints = [portable_text(t, root) for t in b.hints]
    for x in report.compile_failures:
        x.reason, x.fix = portable_text(x.reason, root), portable_text(x.fix, root)
    for k in report.kernels:  # "file:line"
        k.source_lines = [
            rel(f) + sep + line if sep else rel(p)
            for p in k.source_lines
            for f, sep, line in [p.rpartition(":")]
        ]

    def finding(f: Finding) -> Finding:
        return replace(f, message=portable_text(f.message, root), file=rel(f.file))

    report.notes = [finding(n) for n in report.notes]
    report.errors = [finding(e) for e in report.errors]
    if report.timings:
        report.timings.notes = [portable_text(n, root) for n in report.timings.notes]


def collect_failures(h: History) -> list[CompileFailure]:
    """Compiles whose metrics say torch.compile failed (not a frame skipped for a graph
    break, not the recompile limit: those have their own findings)."""
    out = []
    for e in h:
        m = e.metrics
        if not e.raised:
            continue
        file, line = e.place
        reason = m.fail_reason or next(iter(e.compile.artifacts.get("dynamo_error", [])), "")
        lines = [ln.strip() for ln in reason.strip().splitlines() if ln.strip()]
        # "backend='x' raised:" says who; the next line says what
        reason = " ".join(lines[:2]) if lines and lines[0].endswith(":") else (
            lines[0] if lines else m.fail_type
        )  # fmt: skip
        if m.fail_user_file:
            file, line = m.fail_user_file, m.fail_user_line
        fix = compile_failure_fix(reason) or compile_failure_fix(m.fail_type)
        if fake := FAKE_TENSOR_ERROR.search(m.fail_reason):  # the op's own error, not torch's
            reason = f"{fake['type']}: {fake['message']}"
            fix = FAKE_TENSOR_FIX.format(error=reason)
            if is_library_file(file):  # the user's call, not the library's line inside it
                file, line = e.place
        if e.break_was_error:
            reason, fix = break_as_error(m.fail_reason, code_at(file, line))
        elif GUARD_ON_DATA.search(reason) and BRANCH.match(code_at(file, line)) and not e.export:
            fix = branch_as_error(code_at(file, line))
        failure = CompileFailure(
            compile_id=e.compile_id,
            frame=e.code.shown,
            file=file,
            line=line,
            fail_type=m.fail_type,
            reason=reason,
            code=code_at(file, line),
            fix=fix,
            by="torch.export" if e.export else "torch.compile",
        )
        # an error inside Dynamo's own code: torch's bug (torch_bugs.py)
        errors = e.compile.artifacts.get("dynamo_error", [])
        out.append(torch_bug(failure, e, next(iter(errors), "")) or failure)
    return out


def break_as_error(fail_reason: str, code: str) -> tuple[str, str]:
    """A graph break that raised (fullgraph=True): torch's reason for it, and the break's
    own fix beside the other way out."""
    parsed = parse_break_text("Graph Break Reason: " + fail_reason)
    _, suggestion = classify(
        parsed.reason, parsed.explanation, code, gb_id=parsed.gb_id, hints=parsed.hints
    )
    gb = f" ({parsed.gb_id})" if parsed.gb_id else ""
    return f"{BREAK_RAISED}: {parsed.reason}{gb}", (
        "fullgraph=True (or torch._dynamo.error_on_graph_break) makes a graph break an "
        f"error, so this call raised and nothing of it ran. {suggestion} Or let it break: "
        "without fullgraph=True (and outside error_on_graph_break(True)) torch splits the "
        "graph at this line."
    )


# a value known only at run time (`.item()` under capture_scalar_outputs) that decides a
# branch: without fullgraph=True torch breaks the graph there (Data-dependent branching,
# GB0170: 2.13's graph_breaks log); with it, the guard it cannot make raises a UserError
GUARD_ON_DATA = re.compile(r"Could not guard on data-dependent expression")
BRANCH = re.compile(r"\s*(if|elif|while)\b")
BRANCH_BREAK = "GB0170"


def branch_as_error(code: str) -> str:
    """The fix of a branch on a run-time value that raised under fullgraph=True: the
    branch's own (a data-dependent branch's), beside letting it break."""
    _, suggestion = classify("Data-dependent branching", "", code, gb_id=BRANCH_BREAK)
    return (
        "A value known only at run time decides this branch: torch cannot guard on it, and "
        f"fullgraph=True (or error_on_graph_break) makes that an error. {suggestion} Or let "
        "it break: without fullgraph=True (and outside error_on_graph_break(True)) torch "
        f"splits the graph at this line (Data-dependent branching, {BRANCH_BREAK})."
    )


def export_failures(h: History) -> list[CompileFailure]:
    """A (non-strict) export that failed: torch logs the graph it had traced so far
    (make_fx_fail_partial); its last user line is where it stopped, and a run-time-only
    value (`u0` of `.item()`) made there is the usual cause."""
    out = []
    for partial, unbacked_values in h.export_failures:
        sites = [m for m in map(GRAPH_FILE_COMMENT.match, partial.splitlines()) if m]
        sites = [m for m in sites if not is_library_file(m["file"])] or sites
        file, line = (sites[-1]["file"], int(sites[-1]["line"])) if sites else ("", 0)
        fn = sites[-1]["fn"] if sites else ""
        unbacked = [
            u.symbol for u in unbacked_values
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
                compile_id=EXPORT_FAILURE_ID,
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


def _calls(worker: WorkerResult, h: History) -> list[Call]:
    """The sweep's timeline: each compile belongs to the call whose wall window holds it."""
    calls = []
    limit_hit = False
    for c in worker.calls:
        mine = [
            k
            for k in h
            if k.metrics.start_time is not None and c.start <= k.metrics.start_time <= c.end
        ]
        if mine:
            state = CallState.COMPILED
        else:
            # past the limit torch only runs the graphs it has: a call that needs a new
            # one runs in eager mode, with no compile to show for it
            state = CallState.LIMIT if limit_hit else CallState.HIT
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
