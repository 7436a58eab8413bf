"""What a structured trace holds, typed: each compile (its id, metrics, breaks, guards,
stack, graph) and what was logged outside compiles, per file. `trace` reads them."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass
class Frame:
    file: str
    line: int
    name: str = ""
    code: str = ""


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

    @property
    def of_entry_frame(self) -> bool:
        """A compile of the first frame Dynamo saw in its process: the compiled function or
        module itself, not a frame it calls or resumes (those come later)."""
        return self.frame == 0 and self.compiled_autograd is None


_CID = re.compile(
    r"(?:r(?P<rank>\d+):)?(?:!(?P<ca>\d+)/)?(?P<frame>\d+)/(?P<compile>\d+)(?:_(?P<attempt>\d+))?(?:#\d+)?"
)
_RANK = re.compile(r"^r\d+:")


def id_of(text: str) -> CompileId | None:
    """A Report's compile id, typed; None for one that is not torch's (`export`, `aot`)."""
    try:
        return CompileId.parse(text)
    except ValueError:
        return None


def unranked(text: str) -> str:
    """A Report's compile id without its rank: `r3:0/1#2` -> `0/1#2`, the same compile as
    another rank's."""
    return _RANK.sub("", text)


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
    # Dynamo's config for this compile said automatic_dynamic_shapes=False
    # (torch.compile(dynamic=False) sets it): each new size a graph of its own
    static_shapes: bool = False
    recompile_limit: int = 0  # dynamo_config's (cache_size_limit before 2.6); 0: not logged

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
            static_shapes=_config(m.get("dynamo_config")).get("automatic_dynamic_shapes") is False,
            recompile_limit=_recompile_limit(_config(m.get("dynamo_config"))),
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
    # the attempts that handed a graph to the backend: all but the last were discarded
    # (torch restarted the compile after its backend saw the graph)
    graph_attempts: list[int] = field(default_factory=list)
    # sizes made constants after Dynamo made them dynamic (`symbolic_shape_specialization`)
    specialized: list[Specialized] = field(default_factory=list)
    order: int = 0  # position of its first record in the trace

    @property
    def compile_id(self) -> str:
        """The id as shown to the user: `0/1`, `r1:0/1`, and `0/1#2` for a repeated id."""
        return str(self.id) + (f"#{self.seq + 1}" if self.seq else "")

    def json_artifacts(self, name: str) -> list[Any]:
        """The payloads of the compile's `name` artifacts, parsed (unreadable ones left
        out)."""
        out = []
        for payload in self.artifacts.get(name, []):
            try:
                out.append(json.loads(payload))
            except ValueError:
                continue
        return out

    @property
    def discarded_graphs(self) -> int:
        """Graphs the backend was handed and torch then threw away by restarting the
        compile (torch's CompileCounter counts each): every graph of an attempt before the
        last one (all of them where the last attempt made none)."""
        last = max(self.attempts, default=0)
        return sum(a != last for a in self.graph_attempts)


@dataclass
class Specialized:
    """A `symbolic_shape_specialization` record: a dynamic size made a constant. `by`: who
    needed it as a number, "Inductor" or "AOTAutograd" (the backend, after Dynamo traced the
    graph: the frame's guards then hold the constant), or "" (Dynamo itself); `op`: the
    Inductor lowering or decomposition that did ('' where the stack names none, as on a
    cache hit, whose cached guards specialise it)."""

    sources: list[str]  # torch's sources, `L['x'].size()[1]`
    value: str
    by: str = ""
    op: str = ""
    # the function of torch's Python API that took it as a number (`max_pool1d`'s kernel
    # size, `cross_entropy`'s label_smoothing), by its frame in the record's stack
    needs: str = ""

    @staticmethod
    def of(meta: dict[str, Any], stack: list[Frame]) -> Specialized:
        backend = any(f.name in ("call_user_compiler", "_call_user_compiler") for f in stack)
        inductor = any("/_inductor/" in f.file for f in stack)
        by = ("Inductor" if inductor else "AOTAutograd") if backend else ""
        ops = [
            f.name
            for f in stack
            if re.search(r"/_inductor/(lowering|decomposition)", f.file)
            and f.name not in ("wrapped", "inner")
        ]
        op = ops[-1].strip("_") if ops else ""
        sources = [str(x) for x in meta.get("sources") or []]
        api = [f.name for f in stack if TORCH_API.search(f.file) and not f.name.startswith("<")]
        needs = api[-1].strip("_") if api else ""
        return Specialized(sources, str(meta.get("value", "")), by, op, needs)


# torch's Python functions a user calls (torch.nn.functional's, torch.functional's)
TORCH_API = re.compile(r"torch/(nn/)?functional\.py$")


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


def _config(config: Any) -> dict[str, Any]:
    """The compile's dynamo_config (a JSON string, 2.5+); {} where none was logged."""
    if not isinstance(config, str):
        return {}
    try:
        value = json.loads(config)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _recompile_limit(config: dict[str, Any]) -> int:
    value = config.get("recompile_limit", config.get("cache_size_limit"))
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
