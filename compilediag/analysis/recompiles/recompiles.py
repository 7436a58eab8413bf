"""Recompilations: which frame compiled again, the failed guard in words, and the fix
(torch's reasons read in `guards`, put in words in `guard_words`, advised in
`recompile_advice`); the cache-limit post-mortem."""

from __future__ import annotations

import re
from collections.abc import Iterable

from compilediag.analysis.history import Entry, History
from compilediag.analysis.recompiles.advice import Case, advise
from compilediag.analysis.recompiles.guard_words import (
    NEW_VALUES,
    Guard,
    guard_head,
    name_stack_values,
)
from compilediag.analysis.recompiles.guards import (
    became_dynamic,
    deciding_guard,
    is_mode_switch,
    parse_guard,
    reasons_of,
    shape_dims,
    size_change,
    specialised,
)
from compilediag.analysis.recompiles.nearest import case_reasons, other_module
from compilediag.analysis.recompiles.state_advice import also_changed
from compilediag.analysis.source import code_at
from compilediag.report.model import LimitHit, Recompile
from compilediag.report.vocabulary import Finding, FindingKind, RecompileCause, Severity
from compilediag.report.words import ALSO_CHANGED
from compilediag.trace.compiles import Specialized, id_of
from compilediag.trace.formats import (
    FAKE_TENSOR_ERROR,
    FAKE_TENSOR_RECOMPILE,
    GUARD_CONSTANT,
    RECOMPILE_LIMIT,
    RECOMPILE_LIMIT_VALUE,
    dynamic_dims,
    float_specialised,
    frame_name,
    guard_pattern,
    guard_text,
    guard_values,
    is_resume_frame,
    source_name,
)


def collect_recompiles(h: History) -> list[Recompile]:
    out = []
    dims_of: dict[object, list[tuple[str, str]]] = {}
    for e in h:
        reasons = reasons_of(e)  # (torch's, in its order, in the report)
        if not reasons:
            continue
        key = e.id.frame_key
        if key not in dims_of:
            dims_of[key] = frame_dims(h, e)
        case = case_of(h, e, case_reasons(h, e), dims_of[key])
        # (a graph of another mode is no cached graph this call could have used)
        # (nor is another module's: its parameters differ, said in its advice)
        other = is_mode_switch(case.guards) or other_module(h, e)
        also = [] if other else also_changed(h, e, case.guard)
        said = advise(case) + also_said(also)
        if FAKE_TENSOR_ERROR.search(e.metrics.fail_reason):  # its compile failed on the op
            said, also = FAKE_TENSOR_RECOMPILE.format(cid=e.compile_id), []
        out.append(recompile(case, reasons, said, also))
    return values_count(out)


ITEMS = re.compile(r"(?:\[\d+\])+$")  # a list's item (`lengths`[5]): the list's value


def values_count(found: list[Recompile]) -> list[Recompile]:
    """What new values of a Python number did in this run, in each advice that speaks of
    them (guard_words.NEW_VALUES): its recompiles of the frame, counted, said as this run
    showed them (one, then none; or one a value), never as a prediction."""

    def key(r: Recompile) -> tuple[object, str]:  # the frame (by torch's id) and the value
        # (a list's items are one value: `lengths`[0] and [5] of one `.tolist()`)
        cid = id_of(r.compile_id)
        value = ITEMS.sub("", r.failed_guard.split(" changed", 1)[0])
        return (cid.frame if cid else r.frame, value)

    count: dict[tuple[object, str], int] = {}
    for r in found:
        count[key(r)] = count.get(key(r), 0) + 1
    for r in found:
        if NEW_VALUES not in r.suggestion:
            continue
        n = count[key(r)]
        said = (
            ": in this run, one recompile of this frame for a new value, then none"
            if n == 1
            else f": in this run, {n} recompiles of this frame for its new values, one each "
            "(up to the recompile limit)"
        )
        r.suggestion = r.suggestion.replace(NEW_VALUES, said)
    return found


def frame_dims(h: History, e: Entry) -> list[tuple[str, str]]:
    """Every size guard that failed in the frame, over all its recompiles, and every dim of
    an input its later graphs made dynamic that its first kept static (torch names one
    failed guard a call; marking that one alone, where the code ties its size to another
    input's, raises ConstraintViolationError): the advice covers every dim at once."""
    frame = h.frame_of(e)
    # (another module's graph of the same code, its parameters of other sizes: its input's
    # dims are tied to those static parameters, not the user's to mark: look 29's
    # forward-forward, "mark_dynamic(x, 1)" beside its second layer's weight)
    own = [k for k in frame if not other_module(h, k)]
    failed = shape_dims([parse_guard(r) for k in own for r in reasons_of(k)])
    others = set(shape_dims([parse_guard(r) for k in frame if k not in own for r in reasons_of(k)]))
    first = guard_values(frame[0].compile.guards) if frame[0].compile.guards else {}
    made = [
        (source_name(src), str(i))
        for k in frame[1:] if k.compile.guards
        for src, leaves in guard_values(k.compile.guards).items() if src.startswith("L[")
        for i in dynamic_dims(leaves) if i not in dynamic_dims(first.get(src, frozenset()))
    ]  # fmt: skip
    return [d for d in dict.fromkeys(failed + made) if d not in others or d in failed]


def case_of(h: History, e: Entry, reasons: list[str], dims: list[tuple[str, str]]) -> Case:
    """The recompile as the advisors read it: its guards, the one that says why, and what
    torch made of the value (dynamic, or a float baked in after all)."""
    guards = [name_stack_values(parse_guard(r), e.code.name, e.code.file) for r in reasons]
    g = deciding_guard(guards, e.code.file)
    # torch's own records: this compile of the frame, or one before it, restarted to bake a
    # float in (torch then keeps it static in the frame's later compiles); a restart after
    # it is no evidence for this one
    baked_in = g.cause == RecompileCause.FLOAT and any(
        float_specialised(k.metrics.restart_reasons)
        for k in h.frame_of(e)
        if k.id.frame_compile <= e.id.frame_compile
    )
    pinned = pinned_by_backend(e, g)
    needs = number_taken_by(e, g)
    dynamic = (
        became_dynamic(e, g) and not specialised(guards) and not baked_in and not pinned
        and not needs
    )  # fmt: skip
    return Case(h, e, g, guards, dims, baked_in, dynamic, pinned, needs)


def number_taken_by(e: Entry, g: Guard) -> str:
    """The function of torch's Python API that took the changed float or int as a number
    (`max_pool1d`, `cross_entropy`), by torch's record of the value made a constant in the
    new graph; '' where there is none."""
    m = GUARD_CONSTANT.match(g.guard)
    if g.cause not in (RecompileCause.FLOAT, RecompileCause.INT) or m is None:
        return ""
    source = source_name(m["src"].strip())
    return next(
        (s.needs for s in e.compile.specialized
         if s.needs and any(source_name(x) == source for x in s.sources)),
        "",
    )  # fmt: skip


def pinned_by_backend(e: Entry, g: Guard) -> list[Specialized]:
    """The backend's specialisations of the changed input's sizes in the new graph (the
    input the failed size guard names), where the backend made one of its changed dim."""
    change = size_change(g.guard)
    if change is None:
        return []
    mine = [
        s
        for s in e.compile.specialized
        if s.by and any(source_name(x.split(".size()", 1)[0]) == change.source for x in s.sources)
    ]
    dim = f".size()[{change.dim}]"
    return mine if any(x.endswith(dim) for s in mine for x in s.sources) else []


def also_said(also: list[str]) -> str:
    if not also:
        return ""
    return ALSO_CHANGED + "; ".join(also) + ". A fix has to cover each of them."


def recompile(case: Case, reasons: list[str], suggestion: str, also: list[str]) -> Recompile:
    e, g = case.entry, case.guard
    file, line = e.place
    return Recompile(
        hit_limit=bool(RECOMPILE_LIMIT.search(e.metrics.fail_reason)),
        frame=e.code.shown,
        file=file,
        line=line,
        compile_id=e.compile_id,
        reasons=[guard_text(r) for r in reasons],
        failed_guard=g.words,
        failed_guards=[x.words for x in case.guards],
        cause=g.cause,
        guard_file=g.file,
        guard_line=g.line,
        guard_code=code_at(g.file, g.line),
        automatic_dynamic=case.dynamic,
        suggestion=suggestion,
        change=size_change(g.guard),
        also_changed=also,
        dims=[f"{n}:{d}" for n, d in case.dims]
        if g.cause == RecompileCause.SHAPE and not is_resume_frame(e.code.name)
        else [],
    )


def collect_limit_hits(h: History, recompiles: list[Recompile]) -> list[LimitHit]:
    hits = []
    for e in h:
        reason = e.metrics.fail_reason
        if not RECOMPILE_LIMIT.search(reason):
            continue
        limit = RECOMPILE_LIMIT_VALUE.search(reason)
        frame = {k.compile_id for k in h.frame_of(e)}
        same = [r for r in recompiles if r.compile_id in frame]
        hits.append(
            LimitHit(
                frame=frame_name(e.code.name),
                file=e.code.file,
                line=e.code.line,
                limit=int(limit.group(1)) if limit else 0,
                compiles=len([r for r in same if r.compile_id != e.compile_id]) + 1,
                distinct_reasons=_distinct(r.failed_guard for r in same),
                compile_id=e.compile_id,
                static_shapes=any(k.metrics.static_shapes for k in h.frame_of(e)),
            )
        )
    return hits


CLOSE = 0.5  # a frame with this share of torch's recompile limit, or more, is close to it


def close_to_limit(h: History, recompiles: list[Recompile]) -> list[Finding]:
    """Frames that compiled half of torch's recompile limit or more (the trace's own
    dynamo_config) and did not reach it: how many, and what filled them (their recompiles'
    failed guards, each kind once). Said once where several ranks say the same."""
    out: dict[str, Finding] = {}
    for frame in {e.id.frame_key: h.frame_of(e) for e in h}.values():
        if any(RECOMPILE_LIMIT.search(k.metrics.fail_reason) for k in frame):
            continue  # the limit hit: its own finding
        limit = max((k.metrics.recompile_limit for k in frame), default=0)
        if not limit or len(frame) < 2 or len(frame) < limit * CLOSE:
            continue
        ids = {k.compile_id for k in frame}
        mine = [r for r in recompiles if r.compile_id in ids]
        if not mine:
            continue
        r = mine[0]
        filled = _sizes(mine) or _distinct(x.failed_guard for x in mine)
        text = (
            f"{r.frame} at {r.file}:{r.line} has used {len(frame)} of torch's recompile "
            f"limit of {limit} graphs "
            "(torch._dynamo.config.recompile_limit); past it, a call that needs a new graph "
            "runs in eager mode. What filled it: " + "; ".join(filled or ["its recompiles"])
            + " (the advice for each is under Recompiles)."
        )  # fmt: skip
        out.setdefault(text, Finding(FindingKind.CLOSE_TO_LIMIT, text, Severity.WARNING,
                                     r.file, r.line))  # fmt: skip
    return list(out.values())


def _sizes(recompiles: list[Recompile]) -> list[str]:
    """`input dim 0: 2 → 3 → 4 → 5 → 6`: each size that changed, the values it took in turn;
    [] where a recompile was for something else."""
    runs: dict[tuple[str, int], list[int]] = {}
    for r in recompiles:
        c = r.change
        if c is None:
            return []
        seen = runs.setdefault((c.source, c.dim), [c.old])
        seen.extend([c.new] if seen[-1] == c.old else [c.old, c.new])
    return [f"{src} dim {dim}: {' → '.join(map(str, v))}" for (src, dim), v in runs.items()]


WAS = re.compile(r"\(was ([^)]*)\)")  # a value's words: `self.mode changed (was 'a')`


def _distinct(reasons: Iterable[str]) -> list[str]:
    """One line per kind of reason: `x == 0`, `x == 1`, ... are one reason seen N times;
    `self.mode changed (was 'a')`, `(was 'b')` one, with its values in turn."""
    groups: dict[str, list[str]] = {}
    for r in reasons:
        groups.setdefault(guard_pattern(WAS.sub("(was #)", r)), []).append(r)
    out = []
    for g in groups.values():
        was = [m[1] for r in g if (m := WAS.search(r))]
        if len(g) == 1:
            out.append(g[0])
        elif len(was) == len(g) and len(set(was)) > 1:
            values = (
                ", then ".join(was) if len(was) <= 4
                else f"{was[0]}, then {was[1]}, … then {was[-1]}: {len(was)} values"
            )  # fmt: skip
            m = WAS.search(g[0])
            assert m is not None
            out.append(f"{g[0][: m.start()]}(was {values}){g[0][m.end() :]}")
        else:
            out.append(f"{g[0]} (and {len(g) - 1} more like it)")
    return out


def changed_subjects(r: Recompile) -> list[str]:
    """What the recompiling call changed, without values: the failed guard's subject and
    each of `also_changed`'s."""
    also = [m[1] for a in r.also_changed if (m := re.match(r"`([^`]+)`", a))]
    return [guard_head(r.failed_guard), *also]
