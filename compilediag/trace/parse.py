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

import gzip
import hashlib
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from compilediag.trace.compiles import (
    CompilationMetrics,
    Compile,
    CompileId,
    Frame,
    LoggedBreak,
    Outside,
    Specialized,
    TraceLog,
    Unbacked,
)
from compilediag.trace.formats import (
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
    "graph_dump", "create_unbacked_symbol", "exported_program", "symbolic_shape_specialization",
}  # fmt: skip
KIND = re.compile(r'\] \{"(\w+)"')


class TraceError(Exception):
    """Raised only in strict mode, or when nothing readable was found."""


@dataclass
class Record:
    kind: str
    meta: dict[str, Any]  # the JSON value under `kind`
    envelope: dict[str, Any]
    payload: str = ""
    read: bool = True  # False: a kind the analysis skips, counted without parsing its JSON


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
        if c.graph_attempts and cid.attempt not in c.graph_attempts:
            c.aot_graph, c.output_code = "", []  # an earlier attempt's, discarded
        c.output_graph = rec.payload
        c.graph_attempts.append(cid.attempt)
    elif rec.kind == "inductor_output_code":
        c.output_code.append(rec.payload)
    elif rec.kind in ("aot_inference_graph", "aot_forward_graph"):
        c.aot_graph += rec.payload
    elif rec.kind == "dynamo_cpp_guards_str":
        c.guards = rec.payload
    elif rec.kind == "symbolic_shape_specialization":
        stack = [_frame(f, strings) for f in rec.meta.get("stack") or []]
        c.specialized.append(Specialized.of(rec.meta, stack))
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
    from compilediag.errors import UsageError

    logs = []
    for f in trace_files(path):
        named = RANK_IN_NAME.search(f.name)
        try:
            with open_trace(f) as fh:
                lines: Iterable[str] = fh if on_bytes is None else _counting(fh, on_bytes)
                log = parse_lines(
                    lines, path=str(f), strict=strict, rank=int(named[1]) if named else None
                )
        except (OSError, EOFError, zlib.error) as e:  # unreadable, or a gzip cut short
            raise UsageError(
                f"{f} could not be read: {e}.",
                hint="Unpack a gzipped trace (gunzip) to see how far it is whole, or point "
                "at the folder TORCH_TRACE wrote.",
            ) from None
        logs.append(log)
    return logs


def open_trace(f: Path) -> IO[str]:
    """A trace file as text: as torch wrote it, or gzipped as jobs keep big ones (read by
    its first bytes, whatever its name)."""
    with open(f, "rb") as head:
        zipped = head.read(2) == b"\x1f\x8b"
    if zipped:
        return gzip.open(f, "rt", encoding="utf-8", errors="replace")
    return open(f, encoding="utf-8", errors="replace")  # noqa: SIM115 - the caller closes it


def _counting(lines: Iterable[str], on_bytes: Callable[[int], None]) -> Iterator[str]:
    seen = 0
    for i, line in enumerate(lines):
        seen += len(line)
        if i % 20000 == 0:
            on_bytes(seen)
            seen = 0
        yield line
    on_bytes(seen)
