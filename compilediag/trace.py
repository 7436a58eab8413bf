"""A tolerant parser of PyTorch's structured trace (TORCH_TRACE).

Each record is one glog-style header line whose message is a JSON object, optionally
followed by a payload: lines that each start with a tab. The JSON's first key that is
not envelope metadata names the record (`dynamo_start`, `compilation_metrics`,
`artifact`, ...). File names in stacks are interned through `str` records.

The parser is pure: it reads, never writes, streams line by line, and keeps payloads only
for the records the analysis uses. Records it does not know are counted, never fatal;
`strict=True` turns them into errors (for our own tests, like tlparse's --strict).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compilediag.torch_formats import (
    AOT_CODE_DUMP,
    EXPORT_FAILED_PARTIAL,
    EXPORT_PATH,
    split_recompile_reasons,
)

HEADER = re.compile(r"^[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ [^\]]*\] (?P<json>\{.*\})\s*$")
ENVELOPE = {
    "frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "has_payload",
    "rank", "payload_filename",
}  # fmt: skip

# Records whose payload the analysis reads.
PAYLOAD_KINDS = {
    "dynamo_output_graph", "inductor_output_code", "dynamo_cpp_guards_str",
    "aot_inference_graph", "aot_forward_graph",
}  # fmt: skip
PAYLOAD_ARTIFACTS = {
    "dynamo_graph_break_reason", "recompile_reasons", "dynamo_error",
    "inductor_collective_schedule", "graph_execution",
    "fx_graph_cache_hit", "fx_graph_cache_miss", "fx_graph_cache_bypass",
    "aotautograd_cache_hit", "aotautograd_cache_miss", "aotautograd_cache_bypass",
    "cudagraph_skip_reason", "inductor_provenance_tracking_kernel_stack_traces",
    "inductor_provenance_tracking_node_mappings",
    EXPORT_FAILED_PARTIAL, "torch_version",
}  # fmt: skip

# Records we know and deliberately skip: anything else is counted as unknown.
KNOWN_KINDS = PAYLOAD_KINDS | {
    "str", "dynamo_start", "compilation_metrics", "compilation_metrics_runtime", "artifact",
    "chromium_event", "describe_storage", "describe_tensor", "describe_source",
    "create_symbol", "guard_added", "guard_added_fast", "propagate_real_tensors",
    "aot_backward_graph", "aot_joint_graph",
    "optimize_ddp_split_graph", "optimize_ddp_split_child", "compiled_autograd_graph",
    "bwd_compilation_metrics", "inductor_post_grad_graph", "inductor_pre_grad_graph",
    "dynamo_guards", "symbolic_shape_specialization", "unbacked_symbol", "expression_created",
    "missing_fake_kernel", "mismatched_fake_kernel", "dump_file", "link", "graph_dump",
    "sym_expr_node", "freeze_runtime_asserts", "stack_trace",
    "inductor_post_to_pre_grad_nodes", "exported_program", "create_unbacked_symbol",
}  # fmt: skip


# Records the analysis reads; every other known kind is counted without parsing its JSON
# (most of a trace is chromium_event and describe_* records: skipping them keeps a 50 MB
# trace fast).
USED_KINDS = PAYLOAD_KINDS | {
    "str", "dynamo_start", "compilation_metrics", "bwd_compilation_metrics", "artifact",
    "graph_dump", "create_unbacked_symbol", "exported_program",
}  # fmt: skip
KIND = re.compile(r'\] \{"(\w+)"')


class TraceError(Exception):
    """Raised only in strict mode, or when nothing readable was found."""


@dataclass
class Frame:
    file: str
    line: int
    name: str = ""
    code: str = ""


@dataclass
class Record:
    kind: str
    meta: dict[str, Any]  # the JSON value under `kind`
    envelope: dict[str, Any]
    payload: str = ""
    read: bool = True  # False: a kind the analysis skips, counted without parsing its JSON


@dataclass(frozen=True, order=True)
class CompileId:
    """Torch's id of one compilation: `[!ca/]frame/frame_compile[_attempt]`, plus the rank
    of the trace it came from (ids restart on every rank)."""

    frame: int
    frame_compile: int = 0
    attempt: int = 0
    compiled_autograd: int | None = None
    rank: int | None = None

    @classmethod
    def from_envelope(cls, e: dict[str, Any], rank: int | None = None) -> CompileId | None:
        if not isinstance(e.get("frame_id"), int):
            return None
        ca = e.get("compiled_autograd_id")
        return cls(
            frame=e["frame_id"],
            frame_compile=_int(e.get("frame_compile_id")),
            attempt=_int(e.get("attempt")),
            compiled_autograd=ca if isinstance(ca, int) else None,
            rank=rank,
        )

    @classmethod
    def parse(cls, text: str) -> CompileId:
        """The inverse of str(): `0/1`, `!2/0/1`, `0/1_2`, `r3:0/1`, `[0/1]` (and a
        Compile's `0/1#2`, the second compile under a repeated id)."""
        m = _CID.fullmatch(text.strip().strip("[]"))
        if not m:
            raise ValueError(f"not a compile id: {text!r}")
        return cls(
            frame=int(m["frame"]),
            frame_compile=int(m["compile"]),
            attempt=int(m["attempt"] or 0),
            compiled_autograd=int(m["ca"]) if m["ca"] is not None else None,
            rank=int(m["rank"]) if m["rank"] is not None else None,
        )

    def __str__(self) -> str:
        text = f"{self.frame}/{self.frame_compile}"
        if self.attempt:
            text += f"_{self.attempt}"
        if self.compiled_autograd is not None:
            text = f"!{self.compiled_autograd}/{text}"
        if self.rank is not None:
            text = f"r{self.rank}:{text}"
        return text

    @property
    def compile(self) -> CompileId:
        """This compilation, whatever the attempt (a restart is part of the same compile)."""
        return replace(self, attempt=0)

    @property
    def frame_key(self) -> tuple[int | None, int | None, int]:
        """Every compile of one Python frame (its first compile and its recompiles) shares it."""
        return (self.rank, self.compiled_autograd, self.frame)

    @property
    def is_first(self) -> bool:
        return self.frame_compile == 0


_CID = re.compile(
    r"(?:r(?P<rank>\d+):)?(?:!(?P<ca>\d+)/)?(?P<frame>\d+)/(?P<compile>\d+)(?:_(?P<attempt>\d+))?(?:#\d+)?"
)


def _int(v: Any) -> int:
    return v if isinstance(v, int) else 0


def _float(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


@dataclass
class CompilationMetrics:
    """One `compilation_metrics` record, typed, for every layout from torch 2.6 to 2.13.

    Compile times: 2.7+ write `*_time_s`; older layouts only the cumulative `*_us`
    counters, which hold the same timers (equal to the microsecond where both exist).
    """

    compile_id: str = ""  # torch's own text of the id, as the metric states it
    co_name: str = ""
    co_filename: str = ""
    co_firstlineno: int = 0
    graph_op_count: int = 0
    shape_env_guard_count: int = 0
    start_time: float | None = None  # epoch seconds
    entire_frame_s: float = 0.0  # Dynamo + backend: the whole compile of the frame
    backend_s: float = 0.0  # AOTAutograd + Inductor
    inductor_s: float = 0.0
    codegen_s: float = 0.0
    kernel_compile_s: float = 0.0  # compiling generated kernels (Triton, C++), inside the above
    fail_type: str = ""
    fail_reason: str = ""
    fail_user_file: str = ""
    fail_user_line: int = 0
    restart_reasons: list[str] = field(default_factory=list)
    recompile_reason: str = ""
    cudagraph_skip_reason: str = ""
    pytorch_version: str = ""
    fx_cache_hits: int = 0
    fx_cache_misses: int = 0
    aot_cache_hits: int = 0
    aot_cache_misses: int = 0
    times_from: str = "seconds"  # or "cumulative_us": the layout the times were read from
    # end - start, where torch states both (2.8+): the whole of a compile with no Dynamo in
    # it (an AOTInductor compile writes no other time)
    duration_s: float = 0.0

    @classmethod
    def parse(cls, m: dict[str, Any]) -> CompilationMetrics:
        def seconds(new: str, old: str) -> float:
            if isinstance(m.get(new), (int, float)):
                return _float(m[new])
            return _float(m.get(old)) / 1e6

        restarts = m.get("restart_reasons")
        return cls(
            compile_id=_str(m.get("compile_id")),
            co_name=_str(m.get("co_name")),
            co_filename=_str(m.get("co_filename")),
            co_firstlineno=_int(m.get("co_firstlineno")),
            graph_op_count=_int(m.get("graph_op_count")),
            shape_env_guard_count=_int(m.get("shape_env_guard_count")),
            start_time=_float(m["start_time"]) if m.get("start_time") is not None else None,
            entire_frame_s=seconds(
                "entire_frame_compile_time_s", "dynamo_cumulative_compile_time_us"
            ),
            backend_s=seconds("backend_compile_time_s", "aot_autograd_cumulative_compile_time_us"),
            inductor_s=seconds("inductor_compile_time_s", "inductor_cumulative_compile_time_us"),
            codegen_s=seconds("code_gen_time_s", "inductor_code_gen_cumulative_compile_time_us"),
            kernel_compile_s=_float(m.get("triton_compile_time_us")) / 1e6,
            fail_type=_str(m.get("fail_type")),
            fail_reason=_str(m.get("fail_reason")),
            fail_user_file=_str(m.get("fail_user_frame_filename")),
            fail_user_line=_int(m.get("fail_user_frame_lineno")),
            restart_reasons=[str(r) for r in restarts] if isinstance(restarts, list) else [],
            recompile_reason=_str(m.get("recompile_reason")),
            cudagraph_skip_reason=_str(m.get("cudagraph_skip_reason")),
            pytorch_version=_str(m.get("pytorch_version")),
            fx_cache_hits=_int(m.get("inductor_fx_local_cache_hit_count"))
            + _int(m.get("inductor_fx_remote_cache_hit_count")),
            fx_cache_misses=_int(m.get("inductor_fx_local_cache_miss_count"))
            + _int(m.get("inductor_fx_remote_cache_miss_count")),
            aot_cache_hits=_int(m.get("aotautograd_local_cache_hit_count"))
            + _int(m.get("aotautograd_remote_cache_hit_count")),
            aot_cache_misses=_int(m.get("aotautograd_local_cache_miss_count"))
            + _int(m.get("aotautograd_remote_cache_miss_count")),
            times_from="seconds" if "entire_frame_compile_time_s" in m else "cumulative_us",
            duration_s=max(0.0, _float(m.get("end_time_us")) - _float(m.get("start_time_us")))
            / 1e6,
        )


@dataclass
class LoggedBreak:
    """One `dynamo_graph_break_reason` artifact, and the attempt that logged it."""

    text: str
    attempt: int = 0


@dataclass
class Compile:
    """Everything the trace says about one compilation (one frame, one compile id, all of
    its attempts). A trace can hold the same id more than once (several processes
    appending to one file, or a `torch._dynamo.reset()`): each is its own Compile, told
    apart by `seq`."""

    id: CompileId
    seq: int = 0
    stack: list[Frame] = field(default_factory=list)
    metrics: CompilationMetrics = field(default_factory=CompilationMetrics)
    has_metrics: bool = False
    # the backward graph, compiled at the first backward call (--train): outside the
    # frame's own compile time
    bwd_metrics: CompilationMetrics | None = None
    graph_breaks: list[LoggedBreak] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    output_graph: str = ""
    output_code: list[str] = field(default_factory=list)
    aot_graph: str = ""
    guards: str = ""
    artifacts: dict[str, list[str]] = field(default_factory=dict)
    attempts: list[int] = field(default_factory=list)  # every attempt the trace shows
    order: int = 0  # position of its first record in the trace

    @property
    def compile_id(self) -> str:
        """The id as shown to the user: `0/1`, `r1:0/1`, and `0/1#2` for a repeated id."""
        return str(self.id) + (f"#{self.seq + 1}" if self.seq else "")


@dataclass
class Unbacked:
    """A `create_unbacked_symbol` record: a value only known at run time (`u0` of `.item()`,
    of `nonzero`'s size), with the stack that made it."""

    symbol: str
    stack: list[Frame]


@dataclass
class Outside:
    """What a trace holds outside any torch.compile frame: torch.export (non-strict, 2.7+) and
    AOTInductor write their records with no compile id."""

    metrics: list[CompilationMetrics] = field(default_factory=list)  # compile_id null
    export_failures: list[str] = field(default_factory=list)  # make_fx_fail_partial graphs
    unbacked: list[Unbacked] = field(default_factory=list)
    exported_programs: int = 0
    torch_version: str = ""  # the `torch_version` artifact of 2.8+ (once, at the start)
    # `graph_execution` artifacts (2.10+, under
    # torch._inductor.debug.record_and_log_graph_execution_order()): the order graphs ran
    graph_execution: list[str] = field(default_factory=list)


@dataclass
class TraceLog:
    path: str = ""
    compiles: dict[tuple[CompileId, int], Compile] = field(default_factory=dict)
    records: int = 0
    unknown: Counter[str] = field(default_factory=Counter)
    skipped_lines: int = 0
    damaged_payloads: int = 0  # payloads whose md5 is not the one the record states
    not_analysed: Counter[str] = field(default_factory=Counter)  # known kinds read past
    rank: int | None = None
    rank_from: str = ""  # "file name" or "envelope"
    outside: Outside = field(default_factory=Outside)
    # AOTInductor's generated C++: (compile id or "" outside a compile, dump name, code)
    aot_code: list[tuple[str, str, str]] = field(default_factory=list)
    exported: bool = False  # a stack in the trace ran through torch.export
    _latest: dict[CompileId, Compile] = field(default_factory=dict, repr=False)

    def compile_for(self, cid: CompileId, kind: str) -> Compile:
        """The Compile a record belongs to; a new one where the id starts over."""
        key = cid.compile
        c = self._latest.get(key)
        starts_over = c is not None and (
            (kind == "dynamo_start" and cid.attempt in c.attempts and bool(c.stack))
            or (kind == "compilation_metrics" and c.has_metrics)
        )
        if c is None or starts_over:
            seq = 0 if c is None else c.seq + 1
            c = Compile(key, seq=seq, order=len(self.compiles))
            self.compiles[(key, seq)] = c
            self._latest[key] = c
        if cid.attempt not in c.attempts:
            c.attempts.append(cid.attempt)
        return c

    def ordered(self) -> list[Compile]:
        return sorted(self.compiles.values(), key=lambda c: c.order)


def iter_records(lines: Iterable[str], log: TraceLog | None = None) -> Iterator[Record]:
    """Split a trace into records; lines that are neither header nor payload are skipped."""
    pending: Record | None = None
    payload: list[str] = []
    want_payload = False
    for raw in lines:
        if raw.startswith("\t"):
            if pending is not None and want_payload:
                payload.append(raw[1:])
            continue
        if pending is not None:
            pending.payload = "".join(payload)
            yield pending
            pending, payload = None, []
        m = HEADER.match(raw)
        if not m:
            if raw.strip() and log is not None:
                log.skipped_lines += 1
            continue
        fast = KIND.search(raw, m.start("json") - 2)
        if fast and fast.group(1) in KNOWN_KINDS and fast.group(1) not in USED_KINDS:
            pending, want_payload = Record(fast.group(1), {}, {}, read=False), False
            if log is not None:
                log.not_analysed[fast.group(1)] += 1
            continue
        try:
            obj = json.loads(m.group("json"))
        except ValueError:
            if log is not None:
                log.skipped_lines += 1
            continue
        if not isinstance(obj, dict):
            continue
        kind = next((k for k in obj if k not in ENVELOPE), None)
        if kind is None:
            continue
        meta = obj[kind]
        envelope = {k: v for k, v in obj.items() if k in ENVELOPE}
        pending = Record(kind, meta if isinstance(meta, dict) else {"value": meta}, envelope)
        want_payload = (
            kind in PAYLOAD_KINDS
            or (kind == "artifact" and pending.meta.get("name") in PAYLOAD_ARTIFACTS)
            or (kind == "graph_dump" and bool(AOT_CODE_DUMP.match(str(pending.meta.get("name")))))
        )
    if pending is not None:
        pending.payload = "".join(payload)
        yield pending


def payload_intact(rec: Record) -> bool:
    """Torch states the md5 of every payload in the envelope (`has_payload`); the lines
    carry it with a tab in front and a newline after."""
    stated = rec.envelope.get("has_payload")
    if not isinstance(stated, str) or len(stated) != 32:
        return True
    text = rec.payload[:-1] if rec.payload.endswith("\n") else rec.payload
    return hashlib.md5(text.encode("utf-8", "replace")).hexdigest() == stated


def parse_lines(
    lines: Iterable[str], path: str = "", strict: bool = False, rank: int | None = None
) -> TraceLog:
    """`rank`: the rank the file name gives, which wins over the envelope's."""
    log = TraceLog(path=path, rank=rank, rank_from="file name" if rank is not None else "")
    strings: dict[int, str] = {}
    for rec in iter_records(lines, log):
        log.records += 1
        if not rec.read:
            continue
        if log.rank is None and isinstance(rec.envelope.get("rank"), int):
            log.rank, log.rank_from = rec.envelope["rank"], "envelope"
        if rec.kind == "str":
            value = rec.meta.get("value")
            if isinstance(value, list) and len(value) == 2:
                strings[int(value[1])] = str(value[0])
                log.exported = log.exported or bool(EXPORT_PATH.search(str(value[0])))
            continue
        if rec.kind not in KNOWN_KINDS:
            if strict:
                raise TraceError(f"unknown record {rec.kind!r} in {path or 'trace'}")
            log.unknown[rec.kind] += 1
            continue
        if rec.payload and not payload_intact(rec):
            log.damaged_payloads += 1
            continue
        cid = CompileId.from_envelope(rec.envelope, log.rank)
        if rec.kind == "graph_dump":
            name = str(rec.meta.get("name", ""))
            if AOT_CODE_DUMP.match(name):
                log.aot_code.append((str(cid.compile) if cid else "", name, rec.payload))
            else:
                log.not_analysed[f"graph_dump {name}"] += 1
            continue
        if cid is None or _read_outside(rec):
            if not _apply_outside(log.outside, rec, strings):
                log.not_analysed[_what(rec) + " (outside any compile)"] += 1
            continue
        if rec.kind == "artifact" and rec.meta.get("name") not in PAYLOAD_ARTIFACTS:
            log.not_analysed[_what(rec)] += 1
            continue
        _apply(log.compile_for(cid, rec.kind), cid, rec, strings)
    if strict and log.skipped_lines:
        raise TraceError(f"{log.skipped_lines} unreadable lines in {path or 'trace'}")
    return log


def _read_outside(rec: Record) -> bool:
    """Records read as outside any compile whatever id they carry: torch.export's (what it
    made, the partial graph of a failed export; from 2.15 they carry the id of export's own
    trace) and the run-time-only values that explain a failed export."""
    return rec.kind in ("exported_program", "create_unbacked_symbol") or (
        rec.kind == "artifact" and rec.meta.get("name") == EXPORT_FAILED_PARTIAL
    )


def _what(rec: Record) -> str:
    return f"artifact {rec.meta.get('name')}" if rec.kind == "artifact" else rec.kind


def _apply(c: Compile, cid: CompileId, rec: Record, strings: dict[int, str]) -> None:
    if rec.kind == "dynamo_start":
        c.stack = [_frame(f, strings) for f in rec.meta.get("stack", [])]
    elif rec.kind == "compilation_metrics":
        c.metrics = CompilationMetrics.parse(rec.meta)
        c.has_metrics = True
    elif rec.kind == "bwd_compilation_metrics":
        c.bwd_metrics = CompilationMetrics.parse(rec.meta)
    elif rec.kind == "dynamo_output_graph":
        c.output_graph = rec.payload
    elif rec.kind == "inductor_output_code":
        c.output_code.append(rec.payload)
    elif rec.kind in ("aot_inference_graph", "aot_forward_graph"):
        c.aot_graph += rec.payload
    elif rec.kind == "dynamo_cpp_guards_str":
        c.guards = rec.payload
    elif rec.kind == "artifact":
        name = rec.meta.get("name", "")
        if name == "dynamo_graph_break_reason":
            c.graph_breaks.append(LoggedBreak(rec.payload, cid.attempt))
        elif name == "recompile_reasons":
            c.recompile_reasons.extend(split_recompile_reasons(rec.payload))
        elif name in PAYLOAD_ARTIFACTS:
            c.artifacts.setdefault(name, []).append(rec.payload)


def _apply_outside(out: Outside, rec: Record, strings: dict[int, str]) -> bool:
    """Read a record outside any compile; False where it isn't one we analyse."""
    if rec.kind == "compilation_metrics":
        out.metrics.append(CompilationMetrics.parse(rec.meta))
    elif rec.kind == "create_unbacked_symbol":
        stack = rec.meta.get("user_stack") or rec.meta.get("stack") or []
        out.unbacked.append(
            Unbacked(str(rec.meta.get("symbol", "")), [_frame(f, strings) for f in stack])
        )
    elif rec.kind == "exported_program":
        out.exported_programs += 1
    elif rec.kind == "artifact" and rec.meta.get("name") == EXPORT_FAILED_PARTIAL:
        out.export_failures.append(rec.payload)
    elif rec.kind == "artifact" and rec.meta.get("name") == "graph_execution":
        out.graph_execution.append(rec.payload)
    elif rec.kind == "artifact" and rec.meta.get("name") == "torch_version":
        try:
            out.torch_version = str(json.loads(rec.payload).get("pytorch_version", ""))
        except (ValueError, AttributeError):
            return False
    else:
        return False
    return True


def _frame(f: dict[str, Any], strings: dict[int, str]) -> Frame:
    fname = f.get("filename")
    if isinstance(fname, int):
        fname = strings.get(fname, f"<unknown file {fname}>")
    return Frame(str(fname), int(f.get("line") or 0), f.get("name", ""), f.get("loc") or "")


RANK_IN_NAME = re.compile(r"rank_(\d+)")


def trace_files(path: str | Path) -> list[Path]:
    """The trace files of a folder (every rank), or the single file given."""
    p = Path(path)
    if p.is_file():
        return [p]
    return sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))


def parse_path(
    path: str | Path, strict: bool = False, on_bytes: Callable[[int], None] | None = None
) -> list[TraceLog]:
    """Parse every trace file under `path`; `on_bytes` hears how much has been read."""
    logs = []
    for f in trace_files(path):
        named = RANK_IN_NAME.search(f.name)
        with open(f, encoding="utf-8", errors="replace") as fh:
            lines: Iterable[str] = fh if on_bytes is None else _counting(fh, on_bytes)
            log = parse_lines(
                lines, path=str(f), strict=strict, rank=int(named.group(1)) if named else None
            )
        logs.append(log)
    return logs


def _counting(lines: Iterable[str], on_bytes: Callable[[int], None]) -> Iterator[str]:
    seen = 0
    for i, line in enumerate(lines):
        seen += len(line)
        if i % 20000 == 0:
            on_bytes(seen)
            seen = 0
        yield line
    on_bytes(seen)
