"""Recompiles of state the model changes itself: an attribute forward sets on its first
call (the line that sets it, and the statement that sets it before the first call), a
container it grows each call, a value that crosses a graph break as a new object; and
what else the recompiling call changed beyond the guard torch names."""

from __future__ import annotations

import os
import re

from compilediag.analysis.history import Entry, FrameCode, History
from compilediag.analysis.recompiles.guard_words import (
    STACK_VALUE,
    UNNAMED,
    Guard,
    float_said,
    stack_value,
    unnamed_stack,
)
from compilediag.analysis.recompiles.guards import guarded_chain
from compilediag.analysis.recompiles.nearest import changed_values, made_dynamic, nearest_cached
from compilediag.analysis.source import assignments_in_function, code_at
from compilediag.paths import is_library_file, resolve_file
from compilediag.report.vocabulary import RecompileCause
from compilediag.trace.formats import (
    GUARD_LOCATION,
    GUARDS_EQUALS_MATCH,
    guard_change,
    guard_value,
    guard_values,
    is_resume_frame,
    source_name,
)


def set_by_model(chain: str, places: list[tuple[str, int]], guards: str) -> tuple[str, str]:
    """Where the model assigns `chain` (searched in the functions holding `places`, in
    order): the line, in words, and the statement that sets it before the first call, to
    the value the recompiled graph found (`guards`: that graph's tree, where it states the
    value); ('', '') where no such line is found."""
    found = next(
        ((f, hits) for f, n in places if f and (hits := assignments_in_function(f, n, chain))),
        None,
    )
    if found is None:
        return "", ""
    file, hits = found
    now = next(
        (m["v"] for m in GUARDS_EQUALS_MATCH.finditer(guards) if source_name(m["src"]) == chain), ""
    )
    line, value = next(((n, v) for n, v in hits if v == now), hits[0])
    root, _, rest = chain.partition(".")
    owner = "model" if root == "self" else root
    return (
        f"{os.path.basename(file)}:{line}: `{code_at(file, line)}`",
        f"{owner}.{rest} = {now or value}",
    )


def mutation_advice(g: Guard, code: FrameCode, guards: str = "") -> str:
    """A guard on an attribute that the model assigns (forward setting
    `self.config.problem_type` on its first call: searched in the function that installed
    the guard, then in the compiled frame's): the line that sets it, and the fix that
    removes the recompile - set it before the first call. '' for anything else."""
    chain = guarded_chain(g.guard)
    where, fix = set_by_model(chain, [g.at, (code.file, code.line)], guards) if chain else ("", "")
    if not where:
        return ""
    return (
        f"The model sets `{chain}` itself ({where}), so the next call finds a value the "
        f"graph was not compiled for and compiles again. Set it before the first call "
        f"(`{fix}`) and this recompile is gone."
    )


VALUE_CAUSES = (RecompileCause.SHAPE, RecompileCause.BOUNDED, RecompileCause.FLOAT,
                RecompileCause.INT)  # fmt: skip


def also_changed(h: History, e: Entry, g: Guard) -> list[str]:
    """What else the call that recompiled changed, beyond the first failed guard torch
    names: the sources whose value guards differ between the nearest cached graph's guard
    tree (the one that differs in fewest values: the graph the call would have used, where
    torch checks graphs newest first and names one failed guard each) and the new graph's
    (each in words, with the fix where the model sets it itself)."""
    found = nearest_cached(h, e)
    if found is None:
        return []
    new, old = guard_values(e.compile.guards), guard_values(found[0].compile.guards)
    changed = changed_values(old, new)
    # a value the new graph made dynamic changed too: said where the advice is how to skip
    # this recompile (a value of its own torch made dynamic), not beside one that has to
    # be (a graph per requires_grad of blocks compiled in place: nothing to change)
    dynamic = made_dynamic(old, new) if g.cause in VALUE_CAUSES else {}
    changed.update(dynamic)
    first = f"{g.guard} {g.words}"
    out = []
    for src in changed:
        if any(src != o and src.startswith(o) for o in changed):
            continue  # inside a changed object: said by its owner
        name = source_name(src)
        if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", first):
            continue  # the guard torch named
        if STACK_VALUE.fullmatch(name):  # the value a breaking line made: the user's words
            named = stack_value(e.code.name, e.code.file)
            shown = named[0] if named else UNNAMED
        elif STACK_VALUE.match(name):  # an item of it
            shown = unnamed_stack(f"`{name}`")
        else:
            shown = f"`{name}`"
        if src in dynamic:  # (its new value is a symbol of the new graph: no value said)
            text = f"{shown} (was {float_said(guard_value(dynamic[src]))}; now dynamic)"
        else:
            text = f"{shown} ({guard_change(changed[src], new[src])})"
        chain = name if "." in name else ""
        # where torch's guards say the value was read: as shown (cut from the left), and found
        shown_at = [
            (m["file"], int(m["line"]))
            for leaf in e.compile.guards.splitlines()
            if src in leaf and (m := GUARD_LOCATION.search(leaf))
        ]
        places = [(e.code.file, e.code.line)] + [
            (resolve_file(f, e.code.file), n) for f, n in shown_at
        ]  # fmt: skip
        where, fix = set_by_model(chain, places[1:] + places[:1], e.compile.guards)
        read_at = [found or f for (f, _), (found, _) in zip(shown_at, places[1:], strict=True)]
        if not where and framework_internal(name, read_at):
            continue  # a library's own private state, read in its code: not the user's to fix
        if where:
            text += f": the model sets it itself ({where}); set it before the first call (`{fix}`)"
        out.append(text)
    return out


# a line that grows a container: `self.stats.append(x)`, `.extend(`, `.insert(`, `+= [`
GROWS = re.compile(r"\.(?:append|extend|insert)\(|\+=\s*\[")


def state_advice(g: Guard, co_name: str, code: str) -> str:
    """Forward changing Python state on every call: a container it grows (the length
    guard fails each call, until the recompile limit), or, after a graph break, the value
    that crosses the break as a new Python object each call. '' for anything else."""
    if g.cause == RecompileCause.LENGTH and code and GROWS.search(code):
        where = f"line {g.line}: `{code}`"
        return (
            f"forward changes Python state on every call ({where}): the container grows, "
            "so each call fails the length guard and compiles again, until the recompile "
            "limit. Keep per-step statistics outside forward (return the value and collect it "
            "in the training loop), or keep them in a tensor buffer updated in place "
            "(`self.register_buffer(...)`, then `.copy_()` or `+=`); the recompile is then gone."
        )
    if g.cause == RecompileCause.OBJECT and is_resume_frame(co_name) and "was freed" in g.words:
        return (
            f"After the graph break at line {g.line}, the value that line computes crosses "
            "into this frame as a new Python object on every call, so this frame's graph is "
            "dropped and compiled again each call. Remove the break (keep the value a "
            "tensor) and this frame, with its recompiles, goes away."
        )
    return ""


def framework_internal(name: str, read_at: list[str]) -> bool:
    """A private attribute (`trainer._logger_connector._current_fx`) that only a library's
    code reads (torch's guards place each read): the framework's state, which no fix of the
    user's covers."""
    private = any(p.startswith("_") and not p.startswith("__") for p in name.split(".")[1:])
    return private and bool(read_at) and all(is_library_file(f) for f in read_at)
