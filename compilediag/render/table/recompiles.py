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
from compilediag.render.views import GuardRun, recompiles_by_frame
from compilediag.report.model import Recompile, Report


def then_words(first: Recompile, rest: list[Recompile]) -> str:
    """The later recompiles of a run, each said once: `the same, 6 more times` where they
    failed on the very guard text of the first (`x (was 3); x (was 5)` stay each)."""
    said = [g.failed_guard.split(": ")[0] for g in rest]
    if all(x == first.failed_guard.split(": ")[0] for x in said):
        return f"the same, {plural(len(said), 'more time')}"
    return "; ".join(dict.fromkeys(said))


def distinct_fix_of(run: GuardRun) -> str:
    """` 0/2`: the recompile the run's first fix is for, where the run gives several."""
    if not run.more:
        return ""
    first = next((r.compile_id for r in run.items if r.suggestion == run.fix), "")
    return f" {first.split(':')[-1]}" if first else ""


def recompile_blocks(report: Report) -> list:
    out: list = []
    if report.recompiles:
        out.append(Text(f"\nRecompiles ({len(report.recompiles)})", style="bold"))
    runs: list[GuardRun] = [run for f in recompiles_by_frame(report) for run in f.runs]
    for run in runs:
        group = run.items
        r = group[0]
        first, last = shown_id(report, r.compile_id), shown_id(report, group[-1].compile_id)
        ids = first if len(group) == 1 else f"{first} … {last} ({len(group)}×)"
        line = Text(f"  {ids}  {r.frame} at {where(r.file, r.line)}", style="bold")
        if ranks := ranks_of(report, r.ranks):
            line.append(f"  {ranks}", style="dim")
        out.append(line)
        rows: list[Row] = [("failed", Text(r.failed_guard, style="yellow"))]
        if len(group) > 1:
            rows.append(("then", Text(then_words(r, group[1:]), style="yellow")))
        if len(r.failed_guards) > 1:
            rows.append(
                (
                    "",
                    Text(
                        f"({len(r.failed_guards)} cached graphs were checked; each failed a guard)",
                        style="dim",
                    ),
                )
            )
        if r.guard_file:
            code = r.guard_code
            rows.append(
                (
                    "guard",
                    Text(
                        f"installed at {where(r.guard_file, r.guard_line)}"
                        + (f": {code}" if code else "")
                    ),
                )
            )
        mine = distinct_fix_of(run)
        if run.as_for:
            rows.append(("fix", Text(f"as for {run.as_for} above", style="green")))
        elif run.fix:
            rows.append((f"fix{mine}", Text(run.fix, style="green")))
        for cid, fix in run.more:  # another cause in the same run: its own fix, never hidden
            rows.append((f"fix {shown_id(report, cid)}", Text(fix, style="green")))
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
    if any(c.state == "limit" for c in report.calls):
        out.append(
            Text(
                "  limit: the recompile limit was hit earlier; torch only reuses the graphs it "
                "has, and a call that needs a new one runs in eager mode",
                style="dim",
            )
        )
    return out
