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

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    "dynamo_graph_break_reason", "recompile_reasons", "triton_kernel_info",
    "fx_graph_cache_hit", "fx_graph_cache_miss", "fx_graph_cache_bypass",
    "aotautograd_cache_hit", "aotautograd_cache_miss", "aotautograd_cache_bypass",
    "cudagraph_skip_reason", "inductor_provenance_tracking_kernel_stack_traces",
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
    "inductor_post_to_pre_grad_nodes", "exported_program",
}  # fmt: skip


# Records the analysis reads; every other known kind is counted without parsing its JSON
# (most of a trace is chromium_event and describe_* records: skipping them keeps a 50 MB
# trace fast).
USED_KINDS = PAYLOAD_KINDS | {"str", "dynamo_start", "compilation_metrics", "artifact"}
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

    @property
    def compile_id(self) -> str | None:
        """`frame/compile` (with `!ca/` for compiled autograd); attempts are merged."""
        e = self.envelope
        if "frame_id" not in e:
            return None
        cid = f"{e['frame_id']}/{e.get('frame_compile_id', 0)}"
        if e.get("compiled_autograd_id") is not None:
            cid = f"!{e['compiled_autograd_id']}/{cid}"
        return cid


@dataclass
class Compile:
    """Everything the trace says about one compile id (one frame, one compilation)."""

    compile_id: str
    stack: list[Frame] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    graph_breaks: list[str] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    output_graph: str = ""
    output_code: list[str] = field(default_factory=list)
    aot_graph: str = ""
    guards: str = ""
    artifacts: dict[str, list[str]] = field(default_factory=dict)
    order: int = 0  # position of its first record in the trace


@dataclass
class TraceLog:
    path: str = ""
    compiles: dict[str, Compile] = field(default_factory=dict)
    records: int = 0
    unknown: Counter = field(default_factory=Counter)
    skipped_lines: int = 0
    rank: int | None = None

    def compile(self, cid: str) -> Compile:
        if cid not in self.compiles:
            self.compiles[cid] = Compile(cid, order=len(self.compiles))
        return self.compiles[cid]

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
            pending, want_payload = Record(fast.group(1), {}, {}), False
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
        want_payload = kind in PAYLOAD_KINDS or (
            kind == "artifact" and pending.meta.get("name") in PAYLOAD_ARTIFACTS
        )
    if pending is not None:
        pending.payload = "".join(payload)
        yield pending


def parse_lines(lines: Iterable[str], path: str = "", strict: bool = False) -> TraceLog:
    log = TraceLog(path=path)
    strings: dict[int, str] = {}
    for rec in iter_records(lines, log):
        log.records += 1
        if "rank" in rec.envelope and log.rank is None:
            log.rank = rec.envelope["rank"]
        if rec.kind == "str":
            value = rec.meta.get("value")
            if isinstance(value, list) and len(value) == 2:
                strings[int(value[1])] = str(value[0])
            continue
        if rec.kind not in KNOWN_KINDS:
            if strict:
                raise TraceError(f"unknown record {rec.kind!r} in {path or 'trace'}")
            log.unknown[rec.kind] += 1
            continue
        cid = rec.compile_id
        if cid is None:
            continue
        _apply(log.compile(cid), rec, strings)
    if strict and log.skipped_lines:
        raise TraceError(f"{log.skipped_lines} unreadable lines in {path or 'trace'}")
    return log


def _apply(c: Compile, rec: Record, strings: dict[int, str]) -> None:
    if rec.kind == "dynamo_start":
        c.stack = [_frame(f, strings) for f in rec.meta.get("stack", [])]
    elif rec.kind == "compilation_metrics":
        c.metrics = rec.meta
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
            c.graph_breaks.append(rec.payload)
        elif name == "recompile_reasons":
            c.recompile_reasons.extend(_recompile_reasons(rec.payload))
        elif name in PAYLOAD_ARTIFACTS:
            c.artifacts.setdefault(name, []).append(rec.payload)


def _frame(f: dict, strings: dict[int, str]) -> Frame:
    fname = f.get("filename")
    if isinstance(fname, int):
        fname = strings.get(fname, f"<unknown file {fname}>")
    return Frame(str(fname), int(f.get("line") or 0), f.get("name", ""), f.get("loc") or "")


def _recompile_reasons(payload: str) -> list[str]:
    # Encoded "json" but written as plain text in 2.11/2.13; a JSON list in some releases.
    text = payload.strip()
    try:
        value = json.loads(text)
        if isinstance(value, list):
            return [str(v) for v in value]
        if isinstance(value, str):
            text = value
    except ValueError:
        pass
    # one reason per cached graph, each starting with its compile id; a reason may span lines
    parts = re.split(r"\n(?=(?:!\d+/)?\d+/\d+: )", text)
    return [p.strip() for p in parts if p.strip()]


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
        with open(f, encoding="utf-8", errors="replace") as fh:
            lines: Iterable[str] = fh if on_bytes is None else _counting(fh, on_bytes)
            log = parse_lines(lines, path=str(f), strict=strict)
        if log.rank is None and (m := RANK_IN_NAME.search(f.name)):
            log.rank = int(m.group(1))
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
