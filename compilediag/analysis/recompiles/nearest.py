"""The cached graphs a recompiling call was checked against, compared by their guard trees:
the one it came nearest to using, and whether its train()/eval() mode is one no cached
graph has; torch's failed guards put in that light (one per cached graph, the newest's
first)."""

from __future__ import annotations

from compilediag.analysis.history import Entry, History
from compilediag.analysis.recompiles.guard_words import mode_switch
from compilediag.analysis.recompiles.guards import parse_guard, reasons_of
from compilediag.trace.formats import (
    MODULE_WRAPPER,
    guard_change,
    guard_values,
    source_name,
    values_apart,
)


def case_reasons(h: History, e: Entry) -> list[str]:
    """torch's reasons for the compile, in the order the advice reads them."""
    return nearest_first(h, e, reasons_of(e))


def nearest_first(h: History, e: Entry, reasons: list[str]) -> list[str]:
    """torch's failed guards, the one of the cached graph the call came nearest to using
    first (torch names the newest graph's first: a look's float change read as the list
    length, which the graph before had, and the nearest, failed on the float); a call in a
    train()/eval() mode no cached graph has is that switch alone (the other graphs' failed
    guards are of graphs of the other mode: a look's `.eval()` read as a float change)."""
    modes = [r for r in reasons if mode_switch(parse_guard(r).guard) == "train()/eval()"]
    if modes and len(modes) < len(reasons) and new_mode(h, e):
        return modes
    found = nearest_cached(h, e)
    if found is None or not found[1]:
        return reasons
    tag = f"{found[0].compile_id}: "
    return sorted(reasons, key=lambda r: not r.startswith(tag))


def new_mode(h: History, e: Entry) -> bool:
    """The new graph's modules' train()/eval() flags are those of no cached graph of its
    frame (by their guard trees; False where a tree is not in the trace)."""
    frame = h.frame_of(e)
    before = [k for k in frame[: frame.index(e)]]
    if not before or not e.compile.guards or not all(k.compile.guards for k in before):
        return False

    def flags(k: Entry) -> dict[str, frozenset[str]]:
        values = guard_values(k.compile.guards)
        return {s: v for s, v in values.items() if s.endswith(".training")}

    new = flags(e)
    return bool(new) and all(flags(k) != new for k in before)


def nearest_cached(h: History, e: Entry) -> tuple[Entry, bool] | None:
    """The cached graph a recompiling call came nearest to using: the one whose guarded
    values differ from the new graph's in fewest (the newest of those that tie), and
    whether it is the only one that near; None where the trees are not in the trace."""
    frame = h.frame_of(e)
    before = [k for k in frame[: frame.index(e)] if k.compile.guards]
    if not before or not e.compile.guards:
        return None
    new = guard_values(e.compile.guards)

    def apart(k: Entry) -> int:
        changed = changed_values(guard_values(k.compile.guards), new)
        return sum(values_apart(old, new[src]) for src, old in changed.items())

    counted = [(apart(k), k) for k in before]
    fewest = min(n for n, _ in counted)
    near = [k for n, k in counted if n == fewest]
    return near[-1], len(near) == 1


def changed_values(old: dict[str, frozenset[str]], new: dict[str, frozenset[str]]) -> dict:
    """The sources whose value guards differ between a cached graph and the new one (their
    old guards), leaving out a value the new graph made dynamic."""
    return {
        src: leaves
        for src, leaves in old.items()
        if src in new and leaves != new[src] and src.startswith(("L[", "G["))
        and not _made_dynamic(new[src])
    }  # fmt: skip


def made_dynamic(old: dict[str, frozenset[str]], new: dict[str, frozenset[str]]) -> dict:
    """The sources a cached graph pinned to a value and the new graph made dynamic (their
    old guards): torch's automatic dynamic makes dynamic only a value the call changed (a
    float beside an unchanged one keeps its EQUALS_MATCH), so the call changed each; the
    advice for the guard torch named has to cover them too (a look: `scale` passed as a
    tensor, and the frame compiled again for the value `.item()` made before it)."""
    return {
        src: leaves
        for src, leaves in old.items()
        if src in new and src.startswith(("L[", "G[")) and _made_dynamic(new[src])
        and not _made_dynamic(leaves) and any(x.startswith("EQUALS_MATCH:") for x in leaves)
    }  # fmt: skip


def _made_dynamic(leaves: frozenset[str]) -> bool:
    """The new graph guards only the value's type (a float torch's automatic dynamic made a
    symbol): any later value reuses it, so no fix has to cover it."""
    return bool(leaves) and all(leaf.startswith("TYPE_MATCH:") for leaf in leaves)


def other_module(h: History, e: Entry) -> str:
    """Another module's first call of code the graphs are cached on: torch.compile's
    wrapper (the one function every compiled module's call goes through, since torch 2.12)
    holds every module's graphs in one cache, and a module's own compiled method holds those
    of every module of its class. The nearest cached graph's module has parameters of other
    sizes (a GAN's generator after its discriminator read as `noise`'s dim 1 changed, with
    mark_dynamic(noise, 1) for a fix; look 29, forward-forward's two layers: "mark x dim 1
    dynamic, or dynamic=True", which torch then recompiled all the same). The words, with
    the parameter that differs; '' where it is not that."""
    wrapper = (e.code.name, e.code.file.endswith(MODULE_WRAPPER[1])) == (MODULE_WRAPPER[0], True)
    found = nearest_cached(h, e)
    if found is None:
        return ""
    new = guard_values(e.compile.guards)
    changed = changed_values(guard_values(found[0].compile.guards), new)
    sized = [
        (source_name(src), guard_change(old, new[src]))
        for src, old in changed.items()
        if "size" in guard_change(old, new[src])
        and (source_name(src).startswith(("fn.", "fn[")) if wrapper else "._parameters[" in src)
    ]
    if not sized:
        return ""
    name, change = sized[0]
    if not wrapper:
        return (
            f"Another module that runs this code: its parameters differ from the cached "
            f"graph's (`{name}` {change}). torch keeps a parameter's shape static (marks and "
            "dynamic=True do not reach it), so each module of another shape gets a graph of "
            "its own: expected, nothing to mark dynamic. They share the frame's recompile "
            "limit (torch._dynamo.config.recompile_limit): with more shapes than that, raise it."
        )
    return (
        f"Another compiled module: its parameters differ from the cached graph's (`{name}` "
        f"{change}). torch.compile's wrapper, which every compiled module's call goes "
        "through, caches all their graphs together: this is that module's own graph, not a "
        "change in its inputs; nothing to mark dynamic. The modules share one recompile "
        "limit (torch._dynamo.config.recompile_limit): with more modules, or variants of "
        "each, than that, raise it."
    )
