"""Bounds on a dynamic size that torch's own code installed (an op's implementation
choosing by the size): no line of the user's branches, and neither mark_dynamic nor
dynamic=True removes them; the advice for a recompile in a frame they bound."""

from __future__ import annotations

from compilediag.analysis.history import Entry, History
from compilediag.analysis.recompiles.guard_words import OR_DYNAMIC_TRUE, Guard
from compilediag.analysis.recompiles.guards import parse_guard, reasons_of, size_change
from compilediag.analysis.source import code_at
from compilediag.paths import torch_source
from compilediag.report.vocabulary import RecompileCause
from compilediag.trace.formats import size_guards, size_holds, splits_near


def bound_of_torch(g: Guard) -> list[tuple[str, int, str]]:
    """The sites of a bound on a dynamic size whose every named site is in torch's own code
    (shown name, line, the file), or none."""
    if g.cause != RecompileCause.BOUNDED:
        return []
    found = [(f, n, torch_source(f)) for f, n in g.named]
    return found if all(path for _, _, path in found) else []


def torch_bound(g: Guard) -> str:
    """A bound on a dynamic size that torch's own code installed, every site the guard names
    in torch (an op's implementation choosing by the size: a look's F.conv2d, `41 <= x dim 3
    <= 80`): no line of the user's branches, and neither mark_dynamic nor dynamic=True
    removes it (torch's count: as many graphs)."""
    sites = bound_of_torch(g)
    if not sites:
        return ""
    shown, line, path = sites[0]
    code = code_at(path, line).strip()
    return (
        f"torch's own code installed this bound, not a line of yours: torch/{shown}:{line}"
        + (f" (`{code}`)" if code else "") + ", whose implementation depends on the size. "
        "A size past it compiles another graph, up to the recompile limit, and neither "
        "mark_dynamic nor dynamic=True removes that: pass few sizes (resize or pad the "
        "inputs to a few), and call the model once with each before the work you time or "
        "serve."
    )  # fmt: skip


def frame_bounded(g: Guard, history: History, e: Entry) -> str:
    """A size recompile of a frame whose dynamic graphs torch's own code bounds (a later
    recompile of it is such a bound: torch_bound): marking the dims ahead, or dynamic=True,
    gives the first graph those bounds, and each size past one compiles again (a look's
    timm resnet: 4 graphs for 4 image sizes, marked or not)."""
    if g.cause != RecompileCause.SHAPE:
        return ""
    for k in history.frame_of(e):
        for reason in reasons_of(k):
            if bound_of_torch(parse_guard(reason)):
                return (
                    "Marking the dims dynamic before the first call, or dynamic=True, would "
                    f"not skip it: torch's own code bounds this frame's dynamic sizes ({k.compile_id} "
                    "and on: see them), so sizes past each bound compile again whatever is "
                    f"marked. {FEW_SIZES}"
                )
    return own_bound_excludes(g, e)


FEW_SIZES = "Pass few sizes (resize or pad the inputs to a few)."


def own_bound(g: Guard, e: Entry) -> tuple[list[tuple[str, int, str]], bool | None]:
    """A bound torch's own code keeps on the size that changed, in the graph torch made
    dynamic for it (beyond the lower bound each dynamic size has): its sites, and whether
    the size before lies within it (None where no such bound reads as arithmetic)."""
    change = size_change(g.guard)
    if change is None:
        return [], None
    near = max(change.old, change.new)
    for text in size_guards(e.compile.guards):
        sites = bound_of_torch(parse_guard(text))
        holds = size_holds(text, change.source, change.dim, change.old)
        if sites and holds is not None and splits_near(text, change.source, change.dim, near):
            return sites, holds
    return [], None


def torch_sites(sites: list[tuple[str, int, str]]) -> str:
    return " and ".join(f"torch/{shown}:{line}" for shown, line, _ in sites)


def own_bound_excludes(g: Guard, e: Entry) -> str:
    """The graph torch made dynamic holds a bound its own code installed that the size
    before lies outside (a look's conv under Inductor: `3 <= x dim 0 <= 15` for a batch of
    4, the batch before 2): a graph made dynamic at the earlier size is bounded on the other
    side, so marking ahead, or dynamic=True, compiles the later size again (torch's count;
    mark_dynamic raises where the bound leaves one size)."""
    change = size_change(g.guard)
    sites, holds = own_bound(g, e)
    if change is None or holds is not False:
        return ""
    return (
        "Marking it dynamic before the first call, or dynamic=True, would not skip it: "
        f"torch's own code keeps this graph's {change.source} dim {change.dim} within a "
        f"bound ({torch_sites(sites)}) that the size {change.old} before lies outside, so a "
        f"graph made dynamic at {change.old} holds sizes on the other side and {change.new} "
        f"compiles again whatever is marked. {FEW_SIZES}"
    )


def or_dynamic_true(g: Guard, e: Entry) -> str:
    """The advice's last resort, dynamic=True, where this run can tell it: a graph whose
    changed size torch's own code bounds (a look's conv and group norm under Inductor: the
    dim marked, 1 graph; dynamic=True, 2) is no sure case, every dim made dynamic."""
    sites, holds = own_bound(g, e)
    if not sites or holds is False:
        return OR_DYNAMIC_TRUE
    return (
        ". dynamic=True is untried here: it makes every dim dynamic, where the bound torch's "
        f"own code keeps on this graph's sizes ({torch_sites(sites)}) can shut out sizes this "
        "one holds."
    )
