"""torch's recompile reasons read: each failed guard with the line that installed it and
torch's hint (its words from `guard_words`), and what a compile's failed guards say as
data: the size that changed, every dim that did, whether the new graph is a size-0/1
specialisation or torch's automatic dynamic, which attribute chain a guard reads."""

from __future__ import annotations

import re

from compilediag.analysis.history import Entry
from compilediag.analysis.recompiles.guard_words import Guard, mode_switch, translate
from compilediag.paths import is_library_file
from compilediag.report.model import GuardChange
from compilediag.report.vocabulary import RecompileCause
from compilediag.trace.formats import (
    GUARD_ATTRIBUTE_CHAIN,
    GUARD_CID_PREFIX,
    GUARD_CONSTANT,
    GUARD_DICT_CONTAINS,
    GUARD_HINT,
    GUARD_LOWER_BOUND,
    GUARD_SITE,
    GUARD_SIZE,
    GUARD_USER_STACK,
    STACK_FILE_LINE,
    source_name,
)


def reasons_of(e: Entry) -> list[str]:
    """torch's reasons for compiling again: the compile's own list (one failed guard per
    cached graph), else the one reason its metrics hold."""
    if e.compile.recompile_reasons:
        return list(e.compile.recompile_reasons)
    return [e.metrics.recompile_reason] if e.metrics.recompile_reason else []


def parse_guard(reason: str) -> Guard:
    text = GUARD_CID_PREFIX.sub("", reason.strip())
    head, _, stack = text.partition(GUARD_USER_STACK)
    first = head.splitlines()[0] if head else ""
    guard = first.split("  #", 1)[0].strip()
    hint_m = GUARD_HINT.search(head)
    named = list(dict.fromkeys((m["file"], int(m["line"])) for m in GUARD_SITE.finditer(first)))
    sites = [(f, n) for f, n in named if not is_library_file(f)]
    file, line = "", 0
    frames = [f for f in STACK_FILE_LINE.finditer(stack) if not is_library_file(f["file"])]
    if frames:
        file, line = frames[-1]["file"], int(frames[-1]["line"])
    words, cause, suggestion = translate(guard)
    if hint_m and cause == RecompileCause.INT:
        suggestion = hint_m["hint"].strip()
    g = Guard(guard, words, cause, suggestion, file, line, hint_m["hint"].strip() if hint_m else "")
    innermost = list(STACK_FILE_LINE.finditer(stack))[-1:]
    g.at = (innermost[0]["file"], int(innermost[0]["line"])) if innermost else (file, line)
    g.sites, g.named = sites, named
    if not g.file and sites:
        # torch shortens this path ("main/models/net.py"); the caller resolves it
        g.file, g.line = sites[0]
    return g


def deciding_guard(guards: list[Guard], co_file: str) -> Guard:
    """The failed guard that says why the call compiled again: one fails per cached graph,
    and where some graphs are of another mode, the one a graph of the same mode failed.
    Its file is the compiled frame's where torch shortened the path to a tail of it."""
    g = next((x for x in guards if not mode_switch(x.guard)), guards[0])
    if g.file and not g.file.startswith(("/", "<")):
        # the first site in the frame's file (a bound's first site may be a library's line)
        site = next(((f, n) for f, n in g.sites if co_file.endswith(f)), None)
        g.file, g.line = (co_file, site[1]) if site else ("", 0)
    return g


def is_mode_switch(guards: list[Guard]) -> bool:
    """Every cached graph of the frame failed on a mode: the call is in a mode no graph has."""
    return bool(guards) and all(mode_switch(g.guard) for g in guards)


def size_change(guard: str) -> GuardChange | None:
    """A failed size guard as data (what `translate` puts in words)."""
    m = GUARD_SIZE.match(guard)
    if not m:
        return None
    return GuardChange(source_name(m["n"]), int(m["i"]), int(m["a"]), int(m["b"]))


def shape_dims(guards: list[Guard]) -> list[tuple[str, str]]:
    """(input, dim) of every size guard that failed, in order, once each."""
    dims = []
    for g in guards:
        m = GUARD_SIZE.match(g.guard) or GUARD_LOWER_BOUND.match(g.guard)
        if m:
            dims.append((source_name(m["n"] if "n" in m.groupdict() else m["src"]), m["i"]))
    return list(dict.fromkeys(dims))


def specialised(guards: list[Guard]) -> bool:
    """The new graph is a size-0/1 specialisation (a dynamic dim got 0 or 1, or a static one
    changed to 0 or 1), not torch's automatic dynamic."""
    for g in guards:
        if GUARD_LOWER_BOUND.match(g.guard):
            return True
        m = GUARD_SIZE.match(g.guard)
        if m and int(m["b"]) in (0, 1):
            return True
    return False


def became_dynamic(e: Entry, g: Guard | None = None) -> bool:
    """The recompiled graph has symbolic sizes: torch's automatic dynamic kicked in. For a
    baked-in int (`g`), that int itself: the graph takes it as a symbol (its placeholder,
    `L['top_k']` as `L_top_k_`, a Sym), not only another input made dynamic before."""
    if g is not None and g.cause == RecompileCause.INT:
        m = GUARD_CONSTANT.match(g.guard)  # (`top_k == 5`, `L['top_k'] == 5`)
        name = re.sub(r"[^0-9A-Za-z_]+", "_", m["src"].strip()).strip("_") if m else ""
        placeholder = re.compile(rf"\b(?:[LG]_)?{re.escape(name)}_?: \"Sym\(")
        return bool(name) and placeholder.search(e.compile.output_graph) is not None
    return "Sym(" in e.compile.output_graph or e.metrics.shape_env_guard_count > 0


def guarded_chain(guard: str) -> str:
    """The attribute chain a guard reads, as the user writes it (`self.config.problem_type`);
    '' where it reads no attribute of an object."""
    m = GUARD_ATTRIBUTE_CHAIN.match(guard)
    d = GUARD_DICT_CONTAINS.search(guard)
    if d:  # the attribute was the class's, and now the instance has its own
        chain = f"{source_name(d['src'])}.{d['attr']}"
    elif m:
        chain = source_name(m["src"])
    else:
        return ""
    return chain if "." in chain else ""
