"""The terminal view of recompiles: grouped by failed guard, the fix given once, the
sweep's timeline; and the `recompiles` command's whole view."""

from __future__ import annotations

from rich.padding import Padding
from rich.text import Text

from compilediag.render import (
    limit_words,
    plural,
    ranks_of,
    seconds,
    shown_id,
    where,
)
from compilediag.render.table.parts import Row, details, new_table
from compilediag.render.views import Cause, recompile_causes
from compilediag.report.model import Report
from compilediag.report.ranksets import rank_set
from compilediag.report.words import what_changed


def failed_words(report: Report, cause: Cause) -> list[Row]:
    """The failed guard, and its later values, each once: on one rank `the same, 6 more
    times` where they failed on the very guard text of the first; over ranks, each rank's
    values (`input_ids dim 1 changed 38 → 39 on rank 1`)."""
    first, rest = cause.items[0], cause.items[1:]
    if len({i for r in cause.items for i in r.ranks}) <= 1:  # (the header names the rank)
        # (a value another frame of the group failed on says which: a look read roi_align's
        # "then boxes dim 0 changed 450 → 600", which was remove_small_boxes' and nms')
        frames: dict[str, list[str]] = {}
        for g in rest:
            frames.setdefault(what_changed(g.failed_guard), [])
            if g.frame != first.frame and g.frame not in frames[what_changed(g.failed_guard)]:
                frames[what_changed(g.failed_guard)].append(g.frame)
        said = [
            what_changed(g.failed_guard)
            + (f" (in {', '.join(f)})" if (f := frames[what_changed(g.failed_guard)]) else "")
            for g in rest
        ]
        rows: list[Row] = [("failed", Text(first.failed_guard, style="yellow"))]
        if said and set(said) == {what_changed(first.failed_guard)}:
            rows.append(
                ("then", Text(f"the same, {plural(len(said), 'more time')}", style="yellow"))
            )
        elif said:
            rows.append(("then", Text("; ".join(dict.fromkeys(said)), style="yellow")))
        return rows
    by_text: dict[str, list[int]] = {}
    for r in cause.items:
        by_text.setdefault(what_changed(r.failed_guard), []).extend(r.ranks)
    if len(by_text) == 1:  # the same on every rank (the header names them)
        return [("failed", Text(first.failed_guard, style="yellow"))]
    said = [f"{text} on {rank_set(report.ranks, ranks)}" for text, ranks in by_text.items()]
    subject = first.failed_guard.split(" changed ", 1)[0] + " changed "
    said[1:] = [x.removeprefix(subject) for x in said[1:]]  # the values, the subject said once
    shown = said[1 : 1 + RANK_VALUES]
    more = len(said) - 1 - len(shown)
    rows = [("failed", Text(said[0], style="yellow"))]
    if shown:
        rows.append(("then", Text(
            "; ".join(shown) + (f"; and {more} more (--format json lists each)" if more else ""),
            style="yellow",
        )))  # fmt: skip
    return rows


RANK_VALUES = 6  # other values over ranks shown in a cause's block; JSON keeps every one


def recompile_blocks(report: Report) -> list:
    out: list = []
    if report.recompiles:
        out.append(Text(f"\nRecompiles ({len(report.recompiles)})", style="bold"))
    for cause in recompile_causes(report):
        group = cause.items
        r = group[0]
        shown = list(dict.fromkeys(shown_id(report, x.compile_id) for x in group))
        # (the same id on several ranks is one: the header names the ranks)
        # (each id where they are few: look 28 read "0/1 … 0/4 (3×)" as a range of four)
        listed = ", ".join(shown) if len(shown) <= 3 else f"{shown[0]}, {shown[1]} … {shown[-1]}"
        ids = shown[0] if len(shown) == 1 else f"{listed} ({len(group)}×)"
        line = Text(f"{ids}  {r.frame} at {where(r.file, r.line)}", style="bold")
        if ranks := ranks_of(report, sorted({i for x in group for i in x.ranks})):
            line.append(f"  {ranks}", style="dim")
        out.append(Padding(line, (0, 0, 0, 2)))  # (a long one wraps under itself)
        rows = failed_words(report, cause)
        for frame, file, at in cause.frames[1:]:
            rows.append(("also in", Text(f"{frame} at {where(file, at)}")))
        checked = sorted({len(x.failed_guards) for x in group})
        if checked[-1] > 1:  # (each recompile of the group checked the graphs before it)
            seen = (  # ("1 to 2 cached graphs were checked, by call" read as hard to parse)
                f"({checked[0]} cached graphs were checked; each failed a guard)"
                if len(checked) == 1
                else f"(each call checked the {checked[0]} to {checked[-1]} graphs cached before "
                "it; each failed a guard)"
            )
            rows.append(("", Text(seen, style="dim")))
        if r.guard_file:
            code = r.guard_code
            rows.append(("guard", Text(
                f"installed at {where(r.guard_file, r.guard_line)}" + (f": {code}" if code else "")
            )))  # fmt: skip
        if cause.fix:
            head = f"fix {shown_id(report, r.compile_id)}" if cause.more else "fix"
            rows.append((head, Text(cause.fix, style="green")))
        for cid, fix in cause.more:  # another fix in the same frame: its own, never hidden
            rows.append((f"fix {shown_id(report, cid)}", Text(fix, style="green")))
        if cause.also:
            rows.append(("also", Text(cause.also_words(), style="green")))
        out.append(details(rows))
    for hit in report.recompile_limit_hits:
        head, said = limit_words(hit)
        out.append(Text("\n" + head, style="bold red"))
        styled = {"fix": "green", "or fail": "green"}
        out.append(details([(k, Text(v, style=styled.get(k, ""))) for k, v in said]))
    return out


def timeline_block(report: Report) -> list:
    if not report.calls:
        return []
    t = new_table()
    t.add_column("call", justify="right")
    t.add_column("inputs")
    t.add_column("graph cache", no_wrap=True)
    t.add_column("compiles", overflow="fold")
    t.add_column("compile", justify="right", no_wrap=True)
    for c in report.calls:
        t.add_row(
            str(c.index + 1), c.inputs, c.state or ("compiled" if c.compiled else "hit"),
            " ".join(c.compile_ids), seconds(c.compile_time_s) if c.compiled else "-",
        )  # fmt: skip
    out: list = [Text("\nCalls", style="bold"), Padding(t, (0, 0, 0, 2))]
    # a call that compiled with the inputs of the call before changed something else (a
    # look's rows 3-5 alike: model.eval(), a flag set on the model)
    same = [
        c for b, c in zip(report.calls, report.calls[1:], strict=False)
        if c.compiled and c.compile_ids and c.inputs == b.inputs
    ]  # fmt: skip
    if same:
        calls = ", ".join(str(c.index + 1) for c in same)
        ids = ", ".join(i for c in same for i in c.compile_ids)
        said = (
            f"call{'s' * (len(same) > 1)} {calls} compiled with inputs shown as the call "
            "before's: what changed is not in this column (the model's mode, an attribute, a "
            f"global, a layout): {'their recompiles say' if len(same) > 1 else 'its recompile says'} "
            f"({ids})"
        )
        out.append(Padding(Text(said, style="dim"), (0, 0, 0, 2)))
    if any(c.state == "limit" for c in report.calls):
        out.append(
            Text(
                "  limit: the recompile limit was hit earlier; torch only reuses the graphs it "
                "has, and a call that needs a new one runs in eager mode",
                style="dim",
            )
        )
    return out
