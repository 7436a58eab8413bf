"""The compile history: every compile of the parsed traces, in order, grouped by rank and
frame, with what every finding needs of it resolved once - the frame's code (a compile
Dynamo refused logs none: it comes from another compile of the same frame), whose that code
is, where the user sees the frame start, whether it installed a graph, whether export made
it, who called it (`callers`: whose its inputs are). The collectors are functions of a
History; this is the one module that reads the parsed records (`TraceLog`) themselves."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from compilediag.analysis.callers import Caller, caller_of
from compilediag.paths import Owner, is_library_file, owner_of, package_of
from compilediag.report.model import TraceInfo
from compilediag.trace.compiles import CompilationMetrics, Compile, CompileId, TraceLog, Unbacked
from compilediag.trace.formats import (
    EXPORT_PATH,
    NOT_FAILURES,
    RECOMPILE_LIMIT,
    TRACER_FILE,
    frame_name,
)
from compilediag.trace.releases import BREAK_RECORDED_ON_SKIP, release


@dataclass(frozen=True)
class FrameCode:
    """The code object a compile is of, on its real (absolute) path."""

    name: str = ""
    file: str = ""
    line: int = 0
    owner: Owner = Owner.USER
    package: str = ""  # the library or Python module it belongs to; '' for the user's

    @property
    def shown(self) -> str:
        """Its name as the report gives it (a resume frame as `f (after the break at 9)`)."""
        return frame_name(self.name, self.file)


@dataclass
class Entry:
    """One compile (every attempt of one compile id) and what was resolved of it."""

    compile: Compile
    code: FrameCode
    place: tuple[str, int]  # where the frame starts, as the user sees it
    graph: bool  # a graph was installed
    export: bool  # made by torch.export (strict), not torch.compile
    # who called the frame (the user's line, the library, a framework's loop), from the
    # whole stack: whose its inputs are
    caller: Caller = field(default_factory=Caller)

    @property
    def id(self) -> CompileId:
        return self.compile.id

    @property
    def compile_id(self) -> str:
        return self.compile.compile_id

    @property
    def metrics(self) -> CompilationMetrics:
        return self.compile.metrics

    @property
    def raised(self) -> bool:
        """The compile raised to the job's call instead of leaving the frame to eager: a
        failure of torch.compile (its backend, Inductor, Dynamo's own error), or a graph
        break made an error (fullgraph=True, error_on_graph_break). Not the recompile
        limit, which has its own finding."""
        m = self.metrics
        if not m.fail_type or RECOMPILE_LIMIT.search(m.fail_reason):
            return False
        return m.fail_type not in NOT_FAILURES or self.break_was_error

    @property
    def break_was_error(self) -> bool:
        """A graph break met while tracing raised (fullgraph=True): from 2.13 torch records
        the break of a frame it will skip (`dynamo_graph_break_reason`, "Skipping the
        function and falling back to eager") unless it raises instead, so an Unsupported
        compile that went through the tracer and recorded no break raised. (A frame torch
        refuses before tracing, a generator, records none either: it never reached the
        tracer.)"""
        r = release(self.metrics.pytorch_version)
        errors = self.compile.artifacts.get("dynamo_error", [])
        return (
            self.metrics.fail_type == "Unsupported"
            and r is not None and r >= BREAK_RECORDED_ON_SKIP
            and not self.compile.graph_breaks
            and any(TRACER_FILE in text for text in errors)
        )  # fmt: skip


@dataclass
class History:
    entries: list[Entry] = field(default_factory=list)  # in trace order, rank by rank
    frames: dict[tuple[int | None, int | None, int], list[Entry]] = field(default_factory=dict)
    by_id: dict[str, Entry] = field(default_factory=dict)
    # outside any compile (torch.export non-strict, AOTInductor)
    outside_metrics: list[CompilationMetrics] = field(default_factory=list)
    export_failures: list[tuple[str, list[Unbacked]]] = field(default_factory=list)
    aot_code: list[tuple[str, str]] = field(default_factory=list)  # (compile id or '', C++)
    exported: bool = False  # a stack ran through torch.export, or an exported program
    graph_execution: list[str] = field(default_factory=list)
    torch_versions: list[str] = field(default_factory=list)
    trace: TraceInfo = field(default_factory=TraceInfo)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def frame_of(self, e: Entry) -> list[Entry]:
        """Every compile of the same Python frame (its first compile and recompiles)."""
        return self.frames[e.id.frame_key]


def frame_code(c: Compile, frame: list[Compile]) -> FrameCode:
    """The compile's code object; a compile Dynamo refused logs none, so the name and place
    come from another compile of the same frame."""
    m = c.metrics
    if not m.co_name:
        m = next((k.metrics for k in frame if k.metrics.co_name), m)
    owner = owner_of(m.co_filename)
    package = package_of(m.co_filename) if owner != Owner.USER else ""
    return FrameCode(m.co_name, m.co_filename, m.co_firstlineno, owner, package)


def frame_place(c: Compile, code: FrameCode) -> tuple[str, int]:
    """Where the compiled frame starts: its code object, else the top of its stack. A frame
    of torch's own (its wrapper of a compiled module, Module.__call__) is placed at the
    user's line that called into it, the last of the user's frames in its stack, where
    there is one; a frame of another library (transformers, torchvision) is where it is,
    the library's code."""
    mine = [f for f in c.stack if not is_library_file(f.file)]
    torchs = code.owner != Owner.USER and code.package in ("torch", "")
    if code.file and (not torchs or not mine):
        return code.file, code.line
    if mine:
        return mine[-1].file, mine[-1].line
    return (c.stack[-1].file, c.stack[-1].line) if c.stack else ("", 0)


def produced_graph(c: Compile) -> bool:
    """A graph was installed: Dynamo traced one and the compile did not fail (a failed
    backend logs the traced graph, but nothing runs it; CompileCounter does not count it)."""
    return (bool(c.output_graph) or c.metrics.graph_op_count > 0) and not c.metrics.fail_type


def through_export(c: Compile) -> bool:
    """A Dynamo compile that torch.export made (strict export), not torch.compile."""
    return any(EXPORT_PATH.search(f.file) for f in c.stack)


def history_of(compiles: list[Compile]) -> History:
    """The history of these compiles (in trace order): each resolved once."""
    h = History()
    by_frame: dict[tuple[int | None, int | None, int], list[Compile]] = {}
    for c in compiles:
        by_frame.setdefault(c.id.frame_key, []).append(c)
    for c in compiles:
        code = frame_code(c, by_frame[c.id.frame_key])
        e = Entry(
            c, code, frame_place(c, code), produced_graph(c), through_export(c),
            caller_of(c.stack, code.name, code.package),
        )  # fmt: skip
        h.entries.append(e)
        h.frames.setdefault(c.id.frame_key, []).append(e)
        h.by_id[c.compile_id] = e
    return h


def build_history(logs: list[TraceLog]) -> History:
    """One pass over the parsed traces."""
    ordered = [log.ordered() for log in logs]
    h = history_of([c for compiles in ordered for c in compiles])
    versions = {e.metrics.pytorch_version for e in h}
    for log, compiles in zip(logs, ordered, strict=True):
        h.outside_metrics += log.outside.metrics
        h.export_failures += [(p, log.outside.unbacked) for p in log.outside.export_failures]
        h.aot_code += [(cid, code) for cid, _name, code in log.aot_code]
        h.exported = h.exported or log.exported or bool(log.outside.exported_programs)
        h.graph_execution += log.outside.graph_execution + [
            p for c in compiles for p in c.artifacts.get("graph_execution", [])
        ]
        versions.add(log.outside.torch_version)
    h.torch_versions = sorted(versions - {""})
    h.trace = TraceInfo(
        files=[log.path for log in logs],
        records=sum(log.records for log in logs),
        unknown_records=dict(sum((log.unknown for log in logs), Counter())),
        skipped_lines=sum(log.skipped_lines for log in logs),
        damaged_payloads=sum(log.damaged_payloads for log in logs),
        not_analysed=dict(sorted(sum((log.not_analysed for log in logs), Counter()).items())),
        produced_by=produced_by(h),
    )
    return h


def produced_by(h: History) -> list[str]:
    """What wrote the trace: torch.compile, torch.export, AOTInductor (one or more)."""
    kinds = []
    if any(not e.export for e in h):
        kinds.append("torch.compile")
    if h.exported or any(e.export for e in h):
        kinds.append("torch.export")
    if h.aot_code or h.outside_metrics:
        kinds.append("AOTInductor")
    return kinds
