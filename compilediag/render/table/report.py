"""The terminal view (rich). Colour only when asked; width pinned by the caller."""

from __future__ import annotations

from rich.console import Group
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from compilediag.render import (
    graphless_words,
    headline,
    ms,
    plural,
    ranks_of,
    seconds,
    short_path,
    shown_id,
    verdict_lines,
    where,
    wrap_items,
)
from compilediag.render.glance import rank_glance
from compilediag.render.table.facts import (
    NamedLine,
    cross_check_lines,
    kernel_blocks,
    kernel_time_blocks,
    timing_lines,
)
from compilediag.render.table.parts import Row, details, new_table, print_items
from compilediag.render.table.recompiles import recompile_blocks, timeline_block
from compilediag.render.table.serving import inputs_words, serving_blocks
from compilediag.render.tried import cold_warm_words
from compilediag.render.window_words import pace_line
from compilediag.report.model import GraphBreak, Report
from compilediag.report.ranksets import rank_set
from compilediag.report.vocabulary import FindingKind, FixOutcome
from compilediag.report.words import BREAK_SAVES, percent


def render_table(report: Report, width: int | None = None, color: bool = False) -> str:
    if report.serving is not None:  # a request stream's report reads as `recompiles` wrote it
        return render_recompiles(report, width, color)
    return print_items(blocks(report, color, width), width, color)


def render_kernels(report: Report, width: int | None = None, color: bool = False) -> str:
    """dump-kernels' view: the headline, the kernels, and where their lines are a guess (a
    look read the guessed lines there with no word of it)."""
    guessed = [
        Text(f"! {n.text}", style="yellow")
        for n in report.notes if n.kind == FindingKind.NO_PROVENANCE
    ]  # fmt: skip
    return print_items(
        [*_headline(report, width), *guessed, *kernel_blocks(report, limit=None)], width, color
    )


def blocks(report: Report, color: bool, width: int | None = None) -> list:
    out = _title_blocks(report, width)
    out += failure_blocks(report)
    out += _graph_break_blocks(report, color)
    out += recompile_blocks(report)
    out += _graph_blocks(report)
    out += kernel_blocks(report, limit=8)
    out += kernel_time_blocks(report, limit=8)
    if report.cross_check:
        out += cross_check_lines(report)
    out += rank_blocks(report)
    out += serving_blocks(report.serving)
    out += fix_blocks(report)
    timing = timing_lines(report)
    if timing:
        out += [Text("\nJob" if report.runtime else "\nTimings", style="bold"), *timing]
    for line in verdict_lines(report):
        style = "bold green" if report.verdict.passed else "bold red"
        out.append(Text(("\n" if line.startswith("verdict") else "") + line, style=style))
    return out


def _glance_row(line: str) -> Padding:
    """`  rank 0: a step of ...`, its words wrapped under their own start (look 28: a long
    one-off line wrapped to the margin read as words lost)."""
    label, _, rest = line.strip().partition(": ")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(f"{label}:", rest)
    return Padding(grid, (0, 0, 0, 2))


def _title_blocks(report: Report, width: int | None) -> list:
    """The target and its headline, then what matters first: ranks that diverge, errors,
    notes."""
    out: list = []
    title = Text(f"compilediag · {short_path(report.target.path)}", style="bold")
    if report.target.inputs:
        title.append(f"  inputs: {inputs_words(report.target.inputs, report.serving)}", style="dim")
    out += [title, *_headline(report, width)]
    pace = pace_line(report.runtime)
    if pace:
        out.append(Text(pace))
    glance = rank_glance(report)
    out += [Text(line, style="bold") for line in glance[:1]] + [_glance_row(x) for x in glance[1:]]

    if report.divergence:  # what matters most in a distributed job, first
        out.append(Text(f"! {diverging_ranks(report)}", style="bold red"))
    for err in report.errors:
        out.append(Text(f"! {err.text}", style="yellow"))
    for note in report.notes:  # headlines: a job that compiled nothing, an export trace, ...
        out.append(Text(f"! {note.text}", style="yellow"))
    return out


def _graph_break_blocks(report: Report, color: bool) -> list:
    out: list = []
    if report.graph_breaks:
        # a site is a line of the user's; a library line under it is a finding of its own
        sites = len({(b.file, b.line) for b in report.graph_breaks})
        findings = len(report.graph_breaks)
        counted = plural(sites, "site")
        inside = {(b.library_frame.file, b.library_frame.line) for b in report.graph_breaks
                  if b.library_frame is not None}  # fmt: skip
        libraries = sorted({b.library for b in report.graph_breaks if b.library})
        every = all(b.library_frame is not None for b in report.graph_breaks)
        if every and libraries:  # (a look: "8 findings at 1 site", each in torchvision)
            counted = (
                f"{plural(len(inside), 'line')} inside {', '.join(libraries)}, reached from "
                f"{plural(sites, 'line')} of yours"
            )
        elif findings != sites:
            counted = f"{findings} findings at {counted}"
        timed = any(b.time_lost_ms is not None for b in report.graph_breaks)
        # their order: their cost where timed, else how often, then the source's order
        counts = {b.count for b in report.graph_breaks}
        order = (
            ", most costly first" if timed else ", most frequent first" if len(counts) > 1 else ""
        )
        out.append(Text(f"\nGraph breaks ({counted}{order})", style="bold"))
        first: dict[tuple[str, str], int] = {}  # a cause explained once, then referred to
        for i, gb in enumerate(report.graph_breaks, 1):
            seen = first.setdefault((gb.reason, gb.suggestion), i)
            out.append(
                _break_block(
                    i,
                    gb,
                    color,
                    same_as=seen if seen != i else None,
                    step=bool(report.runtime),
                    ranks=ranks_of(report, gb.ranks),
                )
            )
    elif report.graphs:
        out.append(Text("\nNo graph breaks.", style="green"))
    return out


def _graph_blocks(report: Report) -> list:
    """The graphs' table: each graph's frame, place, ops and compile time, and where known
    its ranks, calls and time."""
    if not report.graphs:
        return []
    t = new_table()
    t.add_column("graph", no_wrap=True)
    # a long path folds rather than squeeze the frame's words one to a line
    t.add_column("frame", min_width=12)
    t.add_column("where", overflow="fold")
    t.add_column("ops", justify="right")
    t.add_column("compile", justify="right", no_wrap=True)
    multi = len(report.ranks) > 1
    if multi:
        t.add_column("ranks")
    with_calls = any(g.calls is not None for g in report.graphs)
    if with_calls:
        t.add_column("calls", justify="right", no_wrap=True)
    timed = any(g.time_ms is not None for g in report.graphs)
    if timed:
        t.add_column("a step" if report.runtime else "a call", justify="right", no_wrap=True)
    backward = any(g.backward_ms is not None for g in report.graphs)
    if backward:
        t.add_column("backward", justify="right", no_wrap=True)
    for g in report.graphs:
        cells = [shown_id(report, g.compile_id), g.frame, where(g.file, g.line), str(g.ops),
                 seconds(g.compile_time_s)]  # fmt: skip
        if multi:
            cells.append(ranks_of(report, g.ranks) + (", evaluation" if g.evaluation else ""))
        if with_calls:
            cells.append(str(g.calls) if g.calls is not None else "-")
        if timed:
            cells.append(ms(g.time_ms) if g.time_ms is not None else "-")
        if backward:
            cells.append(ms(g.backward_ms) if g.backward_ms is not None else "-")
        t.add_row(*cells)
    out = [Text("\nGraphs", style="bold"), Padding(t, (0, 0, 0, 2))]
    if words := graphless_words(report):
        out.append(Padding(Text(words, style="dim"), (0, 0, 0, 2)))
    return out


def diverging_ranks(report: Report) -> str:
    """The ranks that compiled unlike the rest, in a line for the top of the report."""
    odd = [i for g in report.rank_groups[1:] for i in g.ranks]
    if not odd:
        return f"ranks diverge: {report.divergence[0].text}"
    others = len(report.ranks) - len(odd)
    return (
        f"ranks diverge: {rank_set(report.ranks, odd)} compiled unlike the other "
        f"{plural(others, 'rank')}; what differs is under Ranks diverge"
    )


def _headline(report: Report, width: int | None) -> list[Text]:
    env, counts = headline(report).split("\n")
    lines = [env, *wrap_items(counts.split(" · "), width or 100)]
    return [Text(line) for line in lines]


def _break_block(
    i: int, gb: GraphBreak, color: bool, same_as: int | None = None, step: bool = False,
    ranks: str = "",
) -> Group:  # fmt: skip
    """`step`: costs are per step of a `compilediag run` job, not per call of the model;
    `ranks`: the ranks that have it, in a multi-rank report."""
    head = Text(f"{i:>2}. ", style="bold")
    head.append(where(gb.file, gb.line), style="bold cyan")
    if gb.count > 1:
        head.append(f"  ×{gb.count}", style="bold")
    if gb.library and not gb.library_frame:
        head.append(f"  in {gb.library}", style="dim")
    if ranks:
        head.append(f"  {ranks}", style="dim")
    rows: list[Row] = []
    if gb.code:
        code = (
            Syntax(gb.code, "python", theme="ansi_dark", background_color="default")
            if color
            else Text(gb.code)
        )
        rows.append(("", code))
    rows.append(("reason", Text(gb.reason, style="bold")))
    if gb.time_lost_ms is not None:
        per, whole = ("a step", "the step") if step else ("a call", "the compiled call")
        share = f" ({percent(gb.time_lost_share)} of {whole})" if gb.time_lost_share else ""
        backward = (
            f": {ms(gb.time_lost_ms - gb.backward_lost_ms)} forward, {ms(gb.backward_lost_ms)} "
            "its backward"
            if gb.backward_lost_ms is not None
            else ""
        )
        rows.append(
            (
                "eager",
                Text(f"{ms(gb.time_lost_ms)} {per}{share}{backward}; {BREAK_SAVES}"),
            )
        )
    if gb.library_frame:
        lf = gb.library_frame
        rows.append(("inside", Text(f"{where(lf.file, lf.line)}: {lf.code}")))
    if same_as is not None:
        rows.append(("fix", Text(f"as for {same_as} above", style="green")))
    else:
        if gb.explanation:
            rows.append(("why", Text(gb.explanation)))
        if gb.suggestion:
            rows.append(("fix", Text(gb.suggestion, style="green")))
        if gb.fix_source != "compilediag":  # torch's own hints, where the fix isn't ours
            for hint in gb.hints:
                if hint not in gb.suggestion:
                    rows.append(("hint", Text(hint, style="dim")))
        if gb.gb_id:
            rows.append(("docs", Text(gb.gb_id, style="dim")))
    out: list[Text | Padding] = [head, details(rows)]
    if gb.gb_id and gb.doc_url:
        # on a line of its own and never folded: a URL broken across lines can't be opened
        out.append(Text(" " * 11 + gb.doc_url, style="dim", no_wrap=True, overflow="ignore"))
    return Group(*out)


def failure_blocks(report: Report) -> list:
    if not report.compile_failures:
        return []
    what = " and ".join(dict.fromkeys(f.by for f in report.compile_failures))
    out: list = [Text(f"\n{what} failed ({len(report.compile_failures)})", style="bold red")]
    for f in report.compile_failures:
        out.append(Text(f"  {f.compile_id}  {f.frame} at {where(f.file, f.line)}", style="bold"))
        rows: list[Row] = []
        if f.code:
            rows.append(("", Text(f.code)))
        rows.append(("failed", Text(f"{f.fail_type}: {f.reason}", style="red")))
        if f.fix:
            rows.append(("fix", Text(f.fix, style="green")))
        out.append(details(rows))
    return out


def fix_blocks(report: Report) -> list:
    """--try-fixes: each remedy, measured in a run of its own: its name and its figures
    beside it, under it where they do not fit (a table of eight columns cut the remedy's
    name to `capture_sca…` at 100 columns, and every column at 80)."""
    if not report.verified_fixes:
        return []

    def change(a: float | None, b: float | None, fmt: str = "{:g}") -> str:
        return "-" if a is None or b is None else (
            fmt.format(a) if a == b else f"{fmt.format(a)} → {fmt.format(b)}"
        )  # fmt: skip

    rows: list = []
    for fx in report.verified_fixes:
        b, a = fx.before, fx.after
        style = {"removes it": "green", "cuts compile time": "green", "partly": "yellow"}.get(
            fx.verdict, "red"
        )
        facts: list[str] = []
        # (a run that failed compiled nothing: "graphs 3 → 0 · recompiles 2 → 0" read as a
        # gain; its error is under the table)
        if a is not None and fx.verdict != FixOutcome.FAILED:
            match = "" if fx.outputs_match is None else (
                "outputs match" if fx.outputs_match else "outputs DIFFER"
            )  # fmt: skip
            facts += [
                f"graphs {change(b.graphs, a.graphs)}",
                f"break sites {change(b.graph_breaks, a.graph_breaks)}",
                f"recompiles {change(b.recompiles, a.recompiles)}",
                # (a compile remedy's: with empty caches, as the line under it says)
                "compile " + change(
                    b.compile_s_cold or b.compile_s, a.compile_s_cold or a.compile_s, "{:.2f} s"
                ),
                f"speedup {change(b.speedup, a.speedup, '{:.2f}x')}",
                match,
            ]  # fmt: skip
        said = Text.assemble((fx.verdict, style), "".join(f" · {f}" for f in facts if f))
        rows.append(NamedLine(fx.remedy, said, ""))
    out: list = [Text("\nVerified fixes (each measured in a run of its own)", style="bold")]
    out += rows
    for fx in report.verified_fixes:
        if cold_warm := cold_warm_words(fx):
            out.append(Text(f"  {fx.remedy}: {cold_warm}"))
        if fx.verdict in ("removes it", "partly", "cuts compile time"):
            out.append(Text(f"  {fx.remedy}:", style="bold"))
            out.append(Padding(Text(fx.code, style="green"), (0, 0, 0, 4)))
        elif fx.error:
            out.append(Text(f"  {fx.remedy}: {fx.error}", style="red"))
    return out


def rank_blocks(report: Report) -> list:
    """One row for each group of ranks that compiled alike, not one for each rank."""
    if not report.ranks:
        return []
    t = new_table()
    for col in ("ranks", "graphs", "break sites", "recompiles", "compile", "slowest"):
        t.add_column(col, justify="left" if col in ("ranks", "slowest") else "right")
    for g in report.rank_groups:
        s = g.summary
        median = " (median)" if len(g.ranks) > 1 else ""
        slowest = f"{seconds(g.compile_max_s)}, {g.slowest}" if len(g.ranks) > 1 else ""
        t.add_row(
            rank_set(report.ranks, g.ranks),
            str(s.graphs),
            str(s.unique_graph_breaks),
            str(s.recompiles),
            seconds(s.compile_time_s) + median,
            slowest,
        )
    groups = len(report.rank_groups)
    title = f"\nRanks ({len(report.ranks)}" + (
        f", {plural(groups, 'group')} that compiled alike)" if groups < len(report.ranks) else ")"
    )
    out: list = [Text(title, style="bold"), Padding(t, (0, 0, 0, 2))]
    if report.divergence:
        out.append(Text(f"\nRanks diverge ({len(report.divergence)})", style="bold red"))
        # a grid, so a long divergence wraps under its own text, not under the "!"
        grid = Table.grid(padding=(0, 1))
        for d in report.divergence:
            grid.add_row(Text("!", style="red"), Text(d.text, style="red"))
        out.append(Padding(grid, (0, 0, 0, 2)))
    else:
        out.append(Text("  All ranks compiled alike.", style="green"))
    stragglers = report.runtime.stragglers if report.runtime is not None else []
    if stragglers:  # a performance finding, not divergence: the ranks compiled alike
        out.append(Text(f"\nRanks wait ({len(stragglers)})", style="bold yellow"))
        grid = Table.grid(padding=(0, 1))
        for d in stragglers:
            grid.add_row(Text("!", style="yellow"), Text(d.text, style="yellow"))
        out.append(Padding(grid, (0, 0, 0, 2)))
    return out


def render_recompiles(report: Report, width: int | None = None, color: bool = False) -> str:
    items: list = [
        Text(f"compilediag recompiles · {short_path(report.target.path)}", style="bold"),
        *_headline(report, width),
    ]
    items += serving_blocks(report.serving)  # a stream's plan first; its calls under it
    items += timeline_block(report)
    items += recompile_blocks(report) or [Text("\nNo recompiles.", style="green")]
    for note in report.notes:
        if note.kind != FindingKind.NO_PROVENANCE:  # (the kernels' lines: not in this view)
            items.append(Text(f"! {note.text}", style="yellow"))
    if not report.graphs:  # nothing compiled: the breaks are the whole story (the note says so)
        items += _graph_break_blocks(report, color)
    items += fix_blocks(report)
    for line in verdict_lines(report):
        items.append(Text(("\n" if line.startswith("verdict") else "") + line, style="bold"))
    return print_items(items, width, color)
