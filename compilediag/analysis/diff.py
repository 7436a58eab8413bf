"""Two runs side by side (`compilediag diff A B`): what each was, breaks, recompiles,
graphs, kernels, compile time, caches, timings; and for each FX-graph cache miss in B
whose graph A compiled too, the cache key's components that differ, in words.

A side is a trace (a folder or file, every rank's) or a saved report. The cache keys'
components are in the trace only (each `fx_graph_cache_hit`/`miss` record lists them, each
with its own hash); a saved report gives the rest."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compilediag.analysis.graphs import bypass_reason
from compilediag.harness.threads import SLACK
from compilediag.report.model import CacheKey, Graph, GraphBreak, Recompile, Report, Timings

if TYPE_CHECKING:
    from compilediag.analysis.history import History

CACHE_RECORDS = {
    "fx_graph_cache_hit": "hit",
    "fx_graph_cache_miss": "miss",
    "fx_graph_cache_bypass": "bypass",
}
VALUE_CHARS = 400  # a component's value kept (the graph's code: GRAPH_CHARS)
GRAPH_CHARS = 20_000
DIFF_KIND = "compilediag diff"
DIFF_VERSION = 1


def cache_keys(h: History) -> list[CacheKey]:
    """Each FX-graph cache lookup the trace records, with its key's components."""
    out = []
    for c in (e.compile for e in h):
        for record, status in CACHE_RECORDS.items():
            for data in c.json_artifacts(record):
                if not isinstance(data, dict):
                    continue
                k = CacheKey(c.compile_id, status, str(data.get("key") or ""))
                k.reason = bypass_reason(data) if status == "bypass" else ""
                for text in data.get("components") or []:
                    # "[hash] name: value"
                    digest, bracket, rest = str(text)[1:].partition("] ")
                    name, colon, value = rest.partition(": ")
                    if not (bracket and colon and text.startswith("[")):
                        continue
                    name = name.strip()
                    k.components[name] = digest
                    k.values[name] = value[: GRAPH_CHARS if name == "gm" else VALUE_CHARS]
                out.append(k)
    return out


# -- what differs ------------------------------------------------------------------------


@dataclass
class Side:
    """One run: its report, where it came from, and its cache lookups (a trace's only)."""

    label: str  # A or B
    path: str
    report: Report
    caches: list[CacheKey] | None = None  # None: a saved report (no cache records)


@dataclass
class RunInfo:
    path: str
    what: str  # the command or the model
    torch: str
    python: str
    device: str
    backend: str
    source: str  # trace or report
    ranks: int = 1


@dataclass
class Change:
    """One difference, in words; `kind` says which: new, gone, moved, changed, same."""

    kind: str
    text: str
    regression: bool = False
    file: str = ""  # B's site, where the change has one (a new break, a new recompile)
    line: int = 0


@dataclass
class CacheMiss:
    """A miss in B of a graph A looked up too: why, component by component."""

    graph: str  # B's compile id and place
    a_status: str
    causes: list[str] = field(default_factory=list)
    # which of the graph's compiles missed, where it has a backward: "forward" or "backward"
    # (both are looked up under the frame's one compile id); "" for a graph with no backward
    part: str = ""


@dataclass
class Diff:
    kind: str
    version: int
    a: RunInfo
    b: RunInfo
    breaks: list[Change] = field(default_factory=list)
    recompiles: list[Change] = field(default_factory=list)
    graphs: list[Change] = field(default_factory=list)
    compile_time: list[Change] = field(default_factory=list)
    caches: list[Change] = field(default_factory=list)
    misses: list[CacheMiss] = field(default_factory=list)
    timings: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tolerance: float = 0.2

    @property
    def regressions(self) -> list[Change]:
        return [c for part in self.parts() for c in part[1] if c.regression]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def parts(self) -> list[tuple[str, list[Change]]]:
        return [
            ("Graph breaks", self.breaks), ("Recompiles", self.recompiles),
            ("Graphs and kernels", self.graphs), ("Compile time", self.compile_time),
            ("Caches", self.caches), ("Timings", self.timings),
        ]  # fmt: skip


def run_info(side: Side) -> RunInfo:
    r, env = side.report, side.report.environment
    job = r.runtime
    what = " ".join(job.command) if job is not None and job.command else r.target.path
    return RunInfo(
        path=side.path, what=what, torch=env.torch, python=env.python,
        device=env.device_name or env.device, backend=env.backend,
        source="trace" if side.caches is not None else "saved report",
        ranks=max(1, len(r.ranks)),
    )  # fmt: skip


def diff(a: Side, b: Side, tolerance: float = 0.2) -> Diff:
    d = Diff(DIFF_KIND, DIFF_VERSION, run_info(a), run_info(b), tolerance=tolerance)
    if _program(a.report) != _program(b.report):
        d.notes.append(
            f"A and B ran different programs ({_program(a.report) or '?'} and "
            f"{_program(b.report) or '?'}): what matches is compared"
        )
    d.breaks = break_changes(a.report, b.report)
    d.recompiles = recompile_changes(a.report, b.report)
    d.graphs = graph_changes(a.report, b.report)
    d.compile_time = compile_time_changes(a.report, b.report, tolerance)
    d.caches, d.misses = cache_changes(a, b)
    d.timings = timing_changes(a.report, b.report, tolerance)
    return d


def _program(r: Report) -> str:
    job = r.runtime
    if job is not None and job.command:
        return os.path.basename(next((x for x in job.command if x.endswith(".py")), job.command[0]))
    files = {os.path.basename(g.file) for g in r.graphs if g.file}
    return ", ".join(sorted(files)) or os.path.basename(r.target.path)


# -- breaks and recompiles ---------------------------------------------------------------


def site_key(b: GraphBreak) -> tuple[str, str, str]:
    """A break site across runs: its file, its line's code and torch's reason (not the
    line number, which an edit above it moves)."""
    return os.path.basename(b.file), b.code.strip(), b.reason


def guard_key(r: Recompile) -> tuple[str, str, str, str]:
    """A recompile across runs: its frame, its file, and the guard torch stated (numbers
    blanked: x == 0.7 and x == 1.0 are one reason; the source comment torch appends, with
    the file's path, left out), never compilediag's words for it, so a baseline survives a
    rewording of the advice."""
    from compilediag.trace.formats import guard_pattern

    guard = r.reasons[0] if r.reasons else r.failed_guard
    return os.path.basename(r.file), r.frame, r.cause, guard_pattern(guard.split("  #")[0].strip())


def break_changes(a: Report, b: Report) -> list[Change]:
    old = {site_key(x): x for x in a.graph_breaks}
    now = {site_key(x): x for x in b.graph_breaks}
    out = []
    by_code_a = {(os.path.basename(x.file), x.code.strip()): x for x in a.graph_breaks}
    for key, x in now.items():
        where = f"{os.path.basename(x.file)}:{x.line}"
        if key in old:
            y = old[key]
            if y.line != x.line:
                out.append(Change("moved", f"moved: {x.code.strip()} ({x.reason}) from line "
                                  f"{y.line} to {x.line}"))  # fmt: skip
            if (y.gb_id or "") != (x.gb_id or ""):
                out.append(Change("changed", f"{where} {x.code.strip()}: torch's id for it "
                                  f"changed, {y.gb_id or 'none'} → {x.gb_id or 'none'}"
                                  + _release_words(y.gb_id, x.gb_id)))  # fmt: skip
            continue
        same_line = by_code_a.get(key[:2])
        if same_line is not None:  # the same line breaks for another reason now
            out.append(Change(
                "changed", f"{where} {x.code.strip()}: its reason changed, "
                f"{same_line.reason} ({same_line.gb_id or '-'}) → {x.reason} ({x.gb_id or '-'})"
                + _release_words(same_line.gb_id, x.gb_id),
            ))  # fmt: skip
            continue
        out.append(Change("new", f"new break at {where}: {x.code.strip()} ({x.reason}"
                          f"{', ' + x.gb_id if x.gb_id else ''})", regression=True,
                          file=x.file, line=x.line))  # fmt: skip
    by_code_b = {(os.path.basename(x.file), x.code.strip()) for x in b.graph_breaks}
    for key, y in old.items():
        if key not in now and key[:2] not in by_code_b:
            out.append(Change("gone", f"break gone: {os.path.basename(y.file)}:{y.line} "
                              f"{y.code.strip()} ({y.reason})"))  # fmt: skip
    return out


def _release_words(old: str | None, new: str | None) -> str:
    from compilediag.trace.releases import id_change

    said = id_change(old, new)
    return f" ({said})" if said else ""


def recompile_changes(a: Report, b: Report) -> list[Change]:
    old = {guard_key(r): r for r in a.recompiles}
    now = {guard_key(r): r for r in b.recompiles}
    out = [
        Change("new", f"new recompile of {r.frame}: {r.failed_guard}", regression=True,
               file=r.file, line=r.line)
        for k, r in now.items() if k not in old
    ]  # fmt: skip
    out += [
        Change("gone", f"recompile gone: {r.frame}: {r.failed_guard}")
        for k, r in old.items() if k not in now
    ]  # fmt: skip
    if len(a.recompiles) != len(b.recompiles) and not out:
        out.append(Change("changed", f"recompiles: {len(a.recompiles)} → {len(b.recompiles)}, "
                          "for the same guards"))  # fmt: skip
    fails_a = {(f.frame, f.fail_type) for f in a.compile_failures}
    for f in b.compile_failures:
        if (f.frame, f.fail_type) not in fails_a:
            out.append(Change("new", f"new compile failure in {f.frame}: {f.fail_type}: "
                              f"{f.reason}", regression=True))  # fmt: skip
    return out


# -- graphs, kernels, compile time --------------------------------------------------------


def graph_place(g: Graph) -> tuple[str, str, int, str]:
    """A graph across runs: its frame, file, line, and which compile of the frame it is."""
    cid = g.compile_id.split(":")[-1].split("#")[0]
    return g.frame, os.path.basename(g.file), g.line, cid.partition("/")[2]


def _first_rank(r: Report) -> list:
    """One rank's graphs (the first group's, as a folded report lists them)."""
    ranks = {g.compile_id.split(":")[0] for g in r.graphs if ":" in g.compile_id}
    if not ranks:
        return list(r.graphs)
    first = sorted(ranks)[0]
    return [g for g in r.graphs if g.compile_id.startswith(first + ":")]


def graph_changes(a: Report, b: Report) -> list[Change]:
    ga, gb = _first_rank(a), _first_rank(b)
    old = {graph_place(g): g for g in ga}
    now = {graph_place(g): g for g in gb}
    kernels_a = _kernels_by_graph(a)
    kernels_b = _kernels_by_graph(b)
    out = []
    for place, g in now.items():
        where = f"{g.frame} ({place[1]}:{g.line}), compile {place[3] or 0}"
        if place not in old:
            out.append(Change("new", f"new graph: {where}, {g.ops} ops"))
            continue
        h = old[place]
        if h.ops != g.ops:
            out.append(Change("changed", f"{where}: {h.ops} → {g.ops} ops"))
        ka, kb = kernels_a.get(graph_place(h), []), kernels_b.get(place, [])
        if len(ka) != len(kb):
            out.append(Change("changed", f"{where}: {len(ka)} → {len(kb)} kernels"))
        fallbacks = sorted(set(kb) - set(ka))
        if fallbacks and ka:
            out.append(Change("changed", f"{where}: new library calls {', '.join(fallbacks)}"))
    for place, h in old.items():
        if place not in now:
            out.append(Change("gone", f"graph gone: {h.frame} ({place[1]}:{h.line}), compile "
                              f"{place[3] or 0}"))  # fmt: skip
    if len(ga) != len(gb):
        out.insert(0, Change("changed", f"graphs: {len(ga)} → {len(gb)}"))
    return out


def _kernels_by_graph(r: Report) -> dict[tuple, list[str]]:
    """A graph's kernels: the generated ones by kind, library calls by name."""
    places = {g.compile_id: graph_place(g) for g in _first_rank(r)}
    out: dict[tuple, list[str]] = {}
    for k in r.kernels:
        place = places.get(k.compile_id)
        if place is not None:
            label = k.name if str(k.kind) in ("extern", "library") else str(k.kind)
            out.setdefault(place, []).append(label)
    return out


PHASES = (("dynamo_s", "dynamo"), ("aot_s", "aot"), ("inductor_s", "inductor"),
          ("codegen_s", "codegen"), ("backward_s", "backward"))  # fmt: skip


def compile_time_changes(a: Report, b: Report, tolerance: float) -> list[Change]:
    ca, cb = a.compile_time, b.compile_time
    if ca is None or cb is None or not ca.total_s or not cb.total_s:
        return []
    ratio = cb.total_s / ca.total_s
    phases = " · ".join(
        f"{name} {getattr(ca, attr):.2f} → {getattr(cb, attr):.2f} s"
        for attr, name in PHASES if getattr(ca, attr) or getattr(cb, attr)
    )  # fmt: skip
    worse = ratio > 1 + tolerance and cb.total_s - ca.total_s > 0.5
    kind = "same" if abs(ratio - 1) <= tolerance else "changed"
    return [Change(kind, f"{ca.total_s:.2f} → {cb.total_s:.2f} s ({ratio:.2f}×): {phases}",
                   regression=worse)]  # fmt: skip


# -- caches ---------------------------------------------------------------------------------


def cache_changes(a: Side, b: Side) -> tuple[list[Change], list[CacheMiss]]:
    from compilediag.report.words import cache_text

    out = []
    ca = a.report.compile_time.caches if a.report.compile_time else {}
    cb = b.report.compile_time.caches if b.report.compile_time else {}
    if ca or cb:
        out.append(Change("same" if ca == cb else "changed",
                          f"{cache_text(ca, False) or 'none'} → {cache_text(cb, False) or 'none'}"))  # fmt: skip
    if a.caches is None or b.caches is None:
        if b.caches is None or a.caches is None:
            out.append(Change("note", "the cache keys' components are in the traces: give "
                              "both trace folders to name why a graph missed"))  # fmt: skip
        return out, []
    places_a = {g.compile_id: graph_place(g) for g in a.report.graphs}
    places_b = {g.compile_id: graph_place(g) for g in b.report.graphs}
    one_a, one_b = _one_process(a.caches), _one_process(b.caches)
    # a graph's forward and backward are looked up under one compile id: each is matched
    # with A's of the same part (a torch that names neither: with A's first of the place)
    looked_up: dict[tuple, CacheKey] = {}
    for k in a.caches:
        place = _cache_place(k, places_a, one_a)
        looked_up.setdefault((*place, lookup_part(k)), k)
        looked_up.setdefault((*place, "any"), k)
    trained = {
        _cache_place(k, places_b, one_b) for k in b.caches if lookup_part(k) == "backward"
    }  # fmt: skip
    versions = (a.report.environment.torch, b.report.environment.torch)
    misses = []
    for k in b.caches:
        if k.status != "miss":
            continue
        place = _cache_place(k, places_b, one_b)
        part = lookup_part(k)
        before = looked_up.get((*place, part)) or looked_up.get((*place, "any"))
        if before is None:
            continue
        where = k.compile_id + (f" ({place[0]}, {place[1]}:{place[2]})" if place[1] else "")
        causes = key_differences(before, k, versions)
        misses.append(CacheMiss(where, before.status, causes, part if place in trained else ""))
    return out, misses


def lookup_part(k: CacheKey) -> str:
    """A lookup's part of its graph, by its key's `fx_kwargs[is_backward]`: "forward" or
    "backward"; "" where the key has no such component."""
    return {"True": "backward", "False": "forward"}.get(
        k.values.get("fx_kwargs[is_backward]", "").strip(), ""
    )


def _one_process(keys: list[CacheKey]) -> bool:
    """The lookups of one process (rank 0 of a job, or no rank): matched without a rank."""
    return len({k.compile_id.split(":")[0] for k in keys if ":" in k.compile_id}) <= 1


def _cache_place(k: CacheKey, places: dict[str, tuple], one: bool) -> tuple:
    """Where a lookup's graph is: its frame, file, line, which compile, and its rank."""
    rank = k.compile_id.split(":")[0] if ":" in k.compile_id and not one else ""
    place = places.get(k.compile_id)
    if place is not None:
        return (*place, rank)
    return ("", "", 0, k.compile_id.split(":")[-1], rank)


def key_differences(a: CacheKey, b: CacheKey, versions: tuple[str, str] | None = None) -> list[str]:
    """Why B's lookup missed where A's was made: each component of the key that differs,
    in words; the same key: A's entry was not in B's cache. A graph whose code differs is
    the cause: its first differing line, and no component after it (the graph's inputs and
    its settings change with it). Inputs that changed alike are one line; components in
    one key only, several, one line. `versions`: A's and B's torch, for the torch
    component (its value is a hash, not text)."""
    if a.key and a.key == b.key:
        return [
            "the same key as A's: A's entry was not in B's cache (another machine, a "
            "cleared cache, or another TORCHINDUCTOR_CACHE_DIR)"
        ]
    names = [
        n for n in dict.fromkeys([*a.components, *b.components])
        if a.components.get(n) != b.components.get(n)
    ]  # fmt: skip
    if not names:
        return ["the keys differ, but no component does (a key torch computes otherwise)"]
    out = []
    if "gm" in names and "gm" in a.components and "gm" in b.components:
        ga, gb = a.values.get("gm", ""), b.values.get("gm", "")
        if ga != gb or len(ga) >= GRAPH_CHARS:  # the code differs (or past what is kept)
            rest = len(names) - 1
            return [value_change("gm", ga, gb) + (
                f" ({rest} more component{'s' * (rest != 1)} of the key differ with it, not "
                "listed)" if rest else ""
            )]  # fmt: skip
        out.append("the graph's hash differs, its code reads the same (the hash covers the "
                   "graph's metadata too)")  # fmt: skip
        names.remove("gm")
    only_a = [n for n in names if n not in b.components]
    only_b = [n for n in names if n not in a.components]
    inputs = [n for n in names if INPUT.match(n) and n not in only_a + only_b]
    out += input_changes(a, b, inputs)
    for name in names:
        if name in inputs or name in only_a or name in only_b:
            continue
        if name == "torch_version" and versions:
            x, y = versions
            out.append(f"torch: {x} → {y}" if x != y else f"torch: another build of {x}")
            continue
        out.append(value_change(name, a.values.get(name, ""), b.values.get(name, "")))
    return out + one_key_only(a, b, only_a, only_b)


ONE_KEY_SHOWN = 3  # components in one key only, each on its line; more: one line for all
INPUT = re.compile(r"example_inputs\[(\d+)\]$")


def one_key_only(a: CacheKey, b: CacheKey, only_a: list[str], only_b: list[str]) -> list[str]:
    """Components only one of the keys has (a torch release adds and drops settings)."""
    if len(only_a) + len(only_b) <= ONE_KEY_SHOWN:
        return [f"{component_words(n)}: only in A's key ({_short(a.values.get(n, ''))})"
                for n in only_a] + [
                f"{component_words(n)}: only in B's key ({_short(b.values.get(n, ''))})"
                for n in only_b]  # fmt: skip

    def named(names: list[str]) -> str:
        short = [re.sub(r"^inductor_config\[(.+)\]$", r"\1", n) for n in names]
        return ", ".join(short[:4]) + (", …" if len(short) > 4 else "")

    said = [f"{len(ns)} only in {side}'s key ({named(ns)})"
            for side, ns in (("B", only_b), ("A", only_a)) if ns]  # fmt: skip
    return [f"components in one key only: {'; '.join(said)}"]


def input_changes(a: CacheKey, b: CacheKey, names: list[str]) -> list[str]:
    """The changed inputs, those that changed alike on one line: `inputs 0, 2: shape [8,
    16] → [16, 16]`."""
    alike: dict[str, list[str]] = {}
    for name in names:
        m = INPUT.match(name)
        said = tensor_change(a.values.get(name, ""), b.values.get(name, ""))
        alike.setdefault(said, []).append(m[1] if m else name)
    return [
        f"input {ids[0]}: {said}" if len(ids) == 1 else f"inputs {', '.join(ids)}: {said}"
        for said, ids in alike.items()
    ]


SHAPE = re.compile(r"shape=torch\.Size\((\[[^\]]*\])\)")
DTYPE = re.compile(r"dtype=torch\.(\w+)")


def tensor_change(a: str, b: str) -> str:
    """What differs between two inputs' metadata: `shape [8, 16] → [16, 16]`, `dtype
    float32 → float16`; else the fields that differ (`stride (16, 1) → (1, 8)`)."""
    said = []
    for pattern, what in ((SHAPE, "shape"), (DTYPE, "dtype")):
        x, y = pattern.search(a), pattern.search(b)
        if x and y and x[1] != y[1]:
            said.append(f"{what} {x[1]} → {y[1]}")
    if said:
        return ", ".join(said)
    fa, fb = metadata_fields(a), metadata_fields(b)
    if fa and fb:
        said = [f"{k} {fa[k]} → {fb[k]}" for k in fa if k in fb and fa[k] != fb[k]]
        if said:
            return ", ".join(said[:3]) + (", …" if len(said) > 3 else "")
    return f"{_short(a, 60)} → {_short(b, 60)}"


def metadata_fields(text: str) -> dict[str, str]:
    """`TensorMetadata(dtype=torch.float32, stride=(16, 1), ...)` -> {field: value} (a value
    cut short where the trace's text was); {} for anything else."""
    m = re.match(r"\s*\w+\((.*?)\)?\s*$", text, re.S)
    if not m:
        return {}
    fields, depth, start, body = {}, 0, 0, m[1] + ","
    for i, ch in enumerate(body):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            key, eq, value = body[start:i].strip().partition("=")
            if eq:
                fields[key] = value
            start = i + 1
    return fields


def component_words(name: str) -> str:
    m = re.match(r"inductor_config\[(.+)\]$", name)
    if m:
        return f"Inductor config `{m[1]}`"
    m = re.match(r"example_inputs\[(\d+)\]$", name)
    if m:
        return f"input {m[1]}"
    return {
        "gm": "the graph's code",
        "torch_version": "torch",
        "system_info": "the system (device, driver, compiler)",
        "deterministic_algorithms_settings": "deterministic algorithms",
        "cuda_matmul_settings": "CUDA matmul settings",
    }.get(name, name)


def value_change(name: str, a: str, b: str) -> str:
    words = component_words(name)
    if name == "gm":
        return f"{words} differs: {_first_difference(a, b)}"
    if INPUT.match(name):
        return f"{words}: {tensor_change(a, b)}"
    if name == "torch_version" or not (a + b).isprintable():
        return f"{words}: another build" if name == "torch_version" else f"{words} differs"
    folded = list_change(a, b)
    if folded:
        return f"{words}: {folded}"
    if HASH.fullmatch(a) and HASH.fullmatch(b):
        return f"{words}: {a[:12]}… → {b[:12]}…"
    return f"{words}: {_short(a, 60)} → {_short(b, 60)}"


HASH = re.compile(r"[0-9a-f]{32,}")


def _set_like(items: list) -> bool:
    return all(isinstance(x, int | str | float) for x in items)


def list_change(a: str, b: str) -> str:
    """Two lists (`[0, 1, 3]` → `[0, 1, 2, 3]`) as the items that changed: `2 added`;
    '' where they are not lists of plain values, or hold the same items."""
    import ast

    try:
        la, lb = ast.literal_eval(a), ast.literal_eval(b)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ""
    if not (isinstance(la, list) and isinstance(lb, list)) or not _set_like(la + lb):
        return ""  # a tuple is positional settings, not a set of items
    added = [x for x in lb if x not in la]
    gone = [x for x in la if x not in lb]
    said = [
        f"{', '.join(map(repr, xs))} {what}"
        for xs, what in ((added, "added"), (gone, "removed"))
        if xs
    ]
    return "; ".join(said)


def _first_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            return f"line {i + 1}: `{_short(x.strip(), 90)}` → `{_short(y.strip(), 90)}`"
    if len(la) != len(lb):
        return f"{len(la)} → {len(lb)} lines"
    return "beyond the part the trace keeps"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- timings -----------------------------------------------------------------------------------


def timing_changes(a: Report, b: Report, tolerance: float) -> list[Change]:
    """The compiled call (explain) and the job's step (run), where both have them: a change
    within the runs' own spread (their IQRs) or the tolerance is the same; so is a compiled
    call whose median moved while its fastest block did not (within the tolerance): every
    call runs the same code on the same inputs, so what moved the median was the machine's
    load (a run beside another job on two cores: 20% and more)."""
    out = []
    ta, tb = a.timings, b.timings
    if ta and tb and ta.compiled_ms and tb.compiled_ms:
        sa, sb = ta.compiled_ms, tb.compiled_ms
        fastest = (sa.min, sb.min) if sa.min and sb.min else None
        timed = _timed("compiled call", sa.median, sb.median, sa.iqr + sb.iqr, tolerance, fastest)
        if timed.kind == "changed":
            timed = _against_eager(timed, ta, tb, tolerance) or timed
            timed = _busy(timed, ta, tb) or timed
        out.append(timed)
    ba = ta.breakdown if ta else None
    bb = tb.breakdown if tb else None
    if ba is not None and bb is not None and a.runtime is not None and b.runtime is not None:
        out.append(_timed("a step", ba.call_ms, bb.call_ms, 0.0, tolerance))
        va, vb = a.runtime.bound, b.runtime.bound
        if va is not None and vb is not None and va.part != vb.part:
            out.append(Change("changed", f"bound by {va.part} ({va.share:.0%} of the step) → "
                              f"{vb.part} ({vb.share:.0%})"))  # fmt: skip
        pa, pb = dict(ba.parts()), dict(bb.parts())
        for name in dict.fromkeys([*pa, *pb]):
            x, y = pa.get(name, 0.0), pb.get(name, 0.0)
            if abs(y - x) > tolerance * max(ba.call_ms, 1e-9):
                out.append(Change("changed", f"{name}: {x:.3f} → {y:.3f} ms"))
    return out


def _against_eager(timed: Change, ta: Timings, tb: Timings, tolerance: float) -> Change | None:
    """A compiled call that moved as much as eager did in the same runs is the same: eager
    ran in each process beside it, on the same machine, so a shift both share is the
    machine's (its clock, its load, the process's layout), not the compiled code's."""
    ea, eb, ca, cb = ta.eager_ms, tb.eager_ms, ta.compiled_ms, tb.compiled_ms
    if not (ea and eb and ca and cb and ea.median > 0 and eb.median > 0 and ca.median > 0):
        return None
    ra, rb = ca.median / ea.median, cb.median / eb.median
    if abs(rb - ra) > tolerance * ra:
        return None
    return Change("same", f"{timed.text.split(' (')[0]}, the same against eager (eager "
                  f"{ea.median:.3f} → {eb.median:.3f} ms in the same runs; compiled/eager "
                  f"{ra:.2f} → {rb:.2f}, within {tolerance:.0%}: the machine moved both)")  # fmt: skip


def _busy(timed: Change, ta: Timings, tb: Timings) -> Change | None:
    """A change where either run was timed with its cores busy (torch's threads and the
    load beside the run more than the cores) is not compared: such figures can be many
    times the calls' cost, and not alike from run to run."""
    sides = [n for n, t in (("A", ta), ("B", tb)) if _oversubscribed(t)]
    if not sides:
        return None
    which = " and ".join(sides)
    return Change("note", f"{timed.text.split(' (')[0]}: not compared, {which} timed with "
                  "the cores busy (see its timing notes); time both on a quiet machine")  # fmt: skip


def _oversubscribed(t: Timings) -> bool:
    return bool(t.cores and t.load is not None and t.threads
                and t.threads + t.load > t.cores + SLACK)  # fmt: skip


def _timed(
    what: str, x: float, y: float, spread: float, tolerance: float,
    fastest: tuple[float, float] | None = None,
) -> Change:  # fmt: skip
    change = y - x
    if abs(change) <= max(spread, tolerance * x):
        why = "within the runs' own spread" if spread >= tolerance * x else (
            f"within {tolerance:.0%}"
        )  # fmt: skip
        return Change("same", f"{what}: {x:.3f} → {y:.3f} ms, the same ({why})")
    if fastest is not None and abs(fastest[1] - fastest[0]) <= tolerance * fastest[0]:
        fx, fy = fastest
        return Change("same", f"{what}: {x:.3f} → {y:.3f} ms, the same (the fastest blocks "
                      f"{fx:.3f} → {fy:.3f} ms, within {tolerance:.0%}: the medians moved "
                      "with the machine's load)")  # fmt: skip
    return Change("changed", f"{what}: {x:.3f} → {y:.3f} ms ({y / x:.2f}×)", regression=y > x)
