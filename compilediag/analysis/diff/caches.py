"""`compilediag diff`'s caches: the FX-graph cache lookups a trace records, each with its
key's components, and for each miss in B of a graph A looked up too, the components that
differ, in words."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from compilediag.analysis.compile.graphs import bypass_reason
from compilediag.analysis.diff.model import CacheMiss, Change, ChangeKind, Side, graph_place
from compilediag.report.model import CacheKey
from compilediag.trace.formats import (
    CACHE_CONFIG,
    CACHE_INPUT,
    CACHE_RECORDS,
    TENSOR_META_DTYPE,
    TENSOR_META_SHAPE,
)

if TYPE_CHECKING:
    from compilediag.analysis.history import History

VALUE_CHARS = 400  # a component's value kept (the graph's code: GRAPH_CHARS)
GRAPH_CHARS = 20_000


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


def cache_changes(a: Side, b: Side) -> tuple[list[Change], list[CacheMiss]]:
    from compilediag.report.words import cache_text

    out = []
    ca = a.report.compile_time.caches if a.report.compile_time else {}
    cb = b.report.compile_time.caches if b.report.compile_time else {}
    if ca or cb:
        out.append(Change(ChangeKind.SAME if ca == cb else ChangeKind.CHANGED,
                          f"{cache_text(ca, False) or 'none'} → {cache_text(cb, False) or 'none'}"))  # fmt: skip
    if a.caches is None or b.caches is None:
        if b.caches is None or a.caches is None:
            out.append(Change(ChangeKind.NOTE, "the cache keys' components are in the traces: give "
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
    trained = {_cache_place(k, places_b, one_b) for k in b.caches if lookup_part(k) == "backward"}
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
    inputs = [n for n in names if CACHE_INPUT.match(n) and n not in only_a + only_b]
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


def one_key_only(a: CacheKey, b: CacheKey, only_a: list[str], only_b: list[str]) -> list[str]:
    """Components only one of the keys has (a torch release adds and drops settings)."""
    if len(only_a) + len(only_b) <= ONE_KEY_SHOWN:
        return [f"{component_words(n)}: only in A's key ({_short(a.values.get(n, ''))})"
                for n in only_a] + [
                f"{component_words(n)}: only in B's key ({_short(b.values.get(n, ''))})"
                for n in only_b]  # fmt: skip

    def named(names: list[str]) -> str:
        short = [CACHE_CONFIG.sub(r"\1", n) for n in names]
        return ", ".join(short[:4]) + (", …" if len(short) > 4 else "")

    said = [f"{len(ns)} only in {side}'s key ({named(ns)})"
            for side, ns in (("B", only_b), ("A", only_a)) if ns]  # fmt: skip
    return [f"components in one key only: {'; '.join(said)}"]


def input_changes(a: CacheKey, b: CacheKey, names: list[str]) -> list[str]:
    """The changed inputs, those that changed alike on one line: `inputs 0, 2: shape [8,
    16] → [16, 16]`."""
    alike: dict[str, list[str]] = {}
    for name in names:
        m = CACHE_INPUT.match(name)
        said = tensor_change(a.values.get(name, ""), b.values.get(name, ""))
        alike.setdefault(said, []).append(m[1] if m else name)
    return [
        f"input {ids[0]}: {said}" if len(ids) == 1 else f"inputs {', '.join(ids)}: {said}"
        for said, ids in alike.items()
    ]


def tensor_change(a: str, b: str) -> str:
    """What differs between two inputs' metadata: `shape [8, 16] → [16, 16]`, `dtype
    float32 → float16`; else the fields that differ (`stride (16, 1) → (1, 8)`)."""
    said = []
    for pattern, what in ((TENSOR_META_SHAPE, "shape"), (TENSOR_META_DTYPE, "dtype")):
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
    m = CACHE_CONFIG.match(name)
    if m:
        return f"Inductor config `{m[1]}`"
    m = CACHE_INPUT.match(name)
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
    if CACHE_INPUT.match(name):
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
