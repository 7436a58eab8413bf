"""The terminal view (rich). Colour only when asked; width pinned by the caller."""

from __future__ import annotations

import io
import itertools

from rich.console import Console, Group
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from compilediag.ranksets import rank_set
from compilediag.render import (
    cache_text,
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
from compilediag.report import CompileTime, GraphBreak, Recompile, Report
from compilediag.torch_formats import guard_pattern

Row = tuple[str, Text | Syntax]  # a label and its value, in a details block


def render_table(report: Report, width: int | None = None, color: bool = False) -> str:
    return _print(blocks(report, color, width), width, color)


def render_kernels(report: Report, width: int | None = None, color: bool = False) -> str:
    return _print([*_headline(report, width), *kernel_blocks(report, limit=None)], width, color)


def _print(items: list, width: int | None, color: bool) -> str:
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width or 100,
        force_terminal=color,
        no_color=not color,
        color_system="auto" if color else None,
        highlight=False,
        soft_wrap=False,
    )
    for block in items:
        # rich fits every table and paragraph to the width; crop=False only lets a line
        # that must stay whole (a URL) run past it, as a terminal then wraps it unbroken
        console.print(block, crop=False)
    text = buf.getvalue()
    if not color:  # rich pads cells to the width; trailing blanks only hurt diffs and pipes
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text


def blocks(report: Report, color: bool, width: int | None = None) -> list:
    out: list = []
    title = Text(f"compilediag · {short_path(report.target.path)}", style="bold")
    if report.target.inputs:
        title.append(f"  inputs: {' | '.join(report.target.inputs)}", style="dim")
    out += [title, *_headline(report, width)]

    if report.divergence:  # what matters most in a distributed job, first
        out.append(Text(f"! {diverging_ranks(report)}", style="bold red"))
    for err in report.errors:
        out.append(Text(f"! {err}", style="yellow"))
    for note in report.notes:  # headlines: a job that compiled nothing, an export trace, ...
        out.append(Text(f"! {note}", style="yellow"))
    out += failure_blocks(report)

    if report.graph_breaks:
        # a site is a line of the user's; a library line under it is a finding of its own
        sites = len({(b.file, b.line) for b in report.graph_breaks})
        findings = len(report.graph_breaks)
        counted = plural(sites, "site")
        if findings != sites:
            counted = f"{findings} findings at {counted}"
        out.append(Text(f"\nGraph breaks ({counted}, most costly first)", style="bold"))
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

    out += recompile_blocks(report)

    if report.graphs:
        t = _table()
        t.add_column("graph", no_wrap=True)
        t.add_column("frame")
        t.add_column("where", no_wrap=True)
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
            t.add_column("a call", justify="right", no_wrap=True)
        for g in report.graphs:
            cells = [shown_id(report, g.compile_id), g.frame, where(g.file, g.line), str(g.ops),
                     seconds(g.compile_time_s)]  # fmt: skip
            if multi:
                cells.append(ranks_of(report, g.ranks))
            if with_calls:
                cells.append(str(g.calls) if g.calls is not None else "-")
            if timed:
                cells.append(ms(g.time_ms) if g.time_ms is not None else "-")
            t.add_row(*cells)
        out += [Text("\nGraphs", style="bold"), Padding(t, (0, 0, 0, 2))]

    out += kernel_blocks(report, limit=8)

    if report.cross_check:
        out += _cross_check_lines(report)

    out += rank_blocks(report)
    out += fix_blocks(report)

    timing = _timing_lines(report)
    if timing:
        out += [Text("\nJob" if report.runtime else "\nTimings", style="bold"), *timing]

    for line in verdict_lines(report):
        style = "bold green" if report.verdict.passed else "bold red"
        out.append(Text(("\n" if line.startswith("verdict") else "") + line, style=style))
    return out


def diverging_ranks(report: Report) -> str:
    """The ranks that compiled unlike the rest, in a line for the top of the report."""
    odd = [i for g in report.rank_groups[1:] for i in g.ranks]
    if not odd:
        return f"ranks diverge: {report.divergence[0]}"
    others = len(report.ranks) - len(odd)
    return (
        f"ranks diverge: {rank_set(report.ranks, odd)} compiled unlike the other "
        f"{plural(others, 'rank')}; what differs is under Ranks diverge"
    )


def _headline(report: Report, width: int | None) -> list[Text]:
    env, counts = headline(report).split("\n")
    lines = [env, *wrap_items(counts.split(" · "), width or 100)]
    return [Text(line) for line in lines]


def _table() -> Table:
    """A borderless table with bold headers: the one table style of this view."""
    return Table(box=None, pad_edge=False, show_edge=False, header_style="bold")


def _details(rows: list[Row]) -> Padding:
    """Labelled lines with a hanging indent, so wrapped text stays in its column."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True, justify="right")
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(label, value)
    return Padding(grid, (0, 0, 0, 4))


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
        share = f" ({gb.time_lost_share:.0%} of {whole})" if gb.time_lost_share else ""
        rows.append(("costs", Text(f"{ms(gb.time_lost_ms)} {per} in eager Python{share}")))
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
    out: list[Text | Padding] = [head, _details(rows)]
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
        out.append(_details(rows))
    return out


def fix_blocks(report: Report) -> list:
    """--try-fixes: each remedy, measured in a run of its own."""
    if not report.verified_fixes:
        return []
    t = _table()
    for col in ("remedy", "verdict", "graphs", "break sites", "recompiles", "speedup", "outputs"):
        t.add_column(col, justify="left" if col in ("remedy", "verdict") else "right")

    def change(a: float | None, b: float | None, fmt: str = "{:g}") -> str:
        if a is None or b is None:
            return "-"
        return fmt.format(a) if a == b else f"{fmt.format(a)} → {fmt.format(b)}"

    for fx in report.verified_fixes:
        b, a = fx.before, fx.after
        style = {"removes it": "green", "partly": "yellow"}.get(fx.verdict, "red")
        if a is None:
            t.add_row(fx.remedy, Text(fx.verdict, style=style), "-", "-", "-", "-", "-")
            continue
        match = "-" if fx.outputs_match is None else ("match" if fx.outputs_match else "DIFFER")
        t.add_row(
            fx.remedy,
            Text(fx.verdict, style=style),
            change(b.graphs, a.graphs),
            change(b.graph_breaks, a.graph_breaks),
            change(b.recompiles, a.recompiles),
            change(b.speedup, a.speedup, "{:.2f}x"),
            match,
        )
    out: list = [Text("\nVerified fixes (each measured in a run of its own)", style="bold")]
    out.append(Padding(t, (0, 0, 0, 2)))
    for fx in report.verified_fixes:
        if fx.verdict in ("removes it", "partly"):
            out.append(Text(f"  {fx.remedy}:", style="bold"))
            out.append(Padding(Text(fx.code, style="green"), (0, 0, 0, 4)))
        elif fx.error:
            out.append(Text(f"  {fx.remedy}: {fx.error}", style="red"))
    return out


def rank_blocks(report: Report) -> list:
    """One row for each group of ranks that compiled alike, not one for each rank."""
    if not report.ranks:
        return []
    t = _table()
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
            grid.add_row(Text("!", style="red"), Text(d, style="red"))
        out.append(Padding(grid, (0, 0, 0, 2)))
    else:
        out.append(Text("  All ranks compiled alike.", style="green"))
    return out


def recompile_blocks(report: Report) -> list:
    out: list = []
    if report.recompiles:
        out.append(Text(f"\nRecompiles ({len(report.recompiles)})", style="bold"))
    advised: dict[str, str] = {}  # a fix already shown -> the recompile it was shown for
    for group in group_recompiles(report.recompiles):
        r = group[0]
        first, last = shown_id(report, r.compile_id), shown_id(report, group[-1].compile_id)
        ids = first if len(group) == 1 else f"{first} … {last} ({len(group)}×)"
        line = Text(f"  {ids}  {r.frame} at {where(r.file, r.line)}", style="bold")
        if ranks := ranks_of(report, r.ranks):
            line.append(f"  {ranks}", style="dim")
        out.append(line)
        rows: list[Row] = [("failed", Text(r.failed_guard, style="yellow"))]
        if len(group) > 1:
            rows.append(
                (
                    "then",
                    Text(
                        "; ".join(g.failed_guard.split(": ")[0] for g in group[1:]),
                        style="yellow",
                    ),
                )
            )
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
        if r.suggestion in advised:  # the same fix for each resume frame: said once
            rows.append(("fix", Text(f"as for {advised[r.suggestion]} above", style="green")))
        elif r.suggestion:
            rows.append(("fix", Text(r.suggestion, style="green")))
            advised[r.suggestion] = r.compile_id
        out.append(_details(rows))
    for hit in report.recompile_limit_hits:
        out.append(
            Text(
                f"\nRecompile limit hit: {hit.frame} at {where(hit.file, hit.line)} compiled "
                f"{hit.compiles} times (limit {hit.limit}); later calls of it run in eager mode, "
                "unoptimised.",
                style="bold red",
            )
        )
        rows = [("reason", Text(reason)) for reason in hit.distinct_reasons]
        rows.append(
            (
                "fix",
                Text(
                    "Remove the cause above; raising torch._dynamo.config.recompile_limit only hides it.",
                    style="green",
                ),
            )
        )
        out.append(_details(rows))
    return out


def group_recompiles(recompiles: list) -> list[list]:
    """Consecutive recompiles of one frame for the same kind of guard are one finding."""

    def key(r: Recompile) -> tuple[str, str, str, str]:
        return (r.frame, r.file, r.cause, guard_pattern(r.failed_guard))

    return [list(g) for _, g in itertools.groupby(recompiles, key=key)]


def timeline_block(report: Report) -> list:
    if not report.calls:
        return []
    t = _table()
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


def render_recompiles(report: Report, width: int | None = None, color: bool = False) -> str:
    items: list = [
        Text(f"compilediag recompiles · {short_path(report.target.path)}", style="bold"),
        *_headline(report, width),
    ]
    items += timeline_block(report)
    items += recompile_blocks(report) or [Text("\nNo recompiles.", style="green")]
    for note in report.notes:
        items.append(Text(f"! {note}", style="yellow"))
    items += fix_blocks(report)
    for line in verdict_lines(report):
        items.append(Text(("\n" if line.startswith("verdict") else "") + line, style="bold"))
    return _print(items, width, color)


KIND_LABELS = {
    "persistent_reduction": "persistent",
    "extern": "library",
    "copy": "copy (moves data, computes nothing)",
}


def kernel_blocks(report: Report, limit: int | None) -> list:
    gen = [k for k in report.kernels if k.kind != "extern"]
    ext = [k for k in report.kernels if k.kind == "extern"]
    if not report.kernels:
        return []
    title = (
        f"\nKernels ({plural(len(gen), 'generated kernel')}, {plural(len(ext), 'library call')})"
    )
    several = len({k.compile_id for k in report.kernels}) > 1
    shown = report.kernels if limit is None else (gen[:limit] + ext[: max(0, limit - len(gen))])
    target = report.target.path
    # One kernel a line, not a table: a kernel name cut or folded can't be looked up, and
    # at 80 columns a table has no room for the name beside the rest. Wrapping only
    # happens at spaces, after the name.
    rows: list[Text] = []
    for k in shown:
        line = Text(k.name.removeprefix("torch.ops.").removesuffix(".default"), style="bold")
        facts = [KIND_LABELS.get(k.kind, k.kind)]
        if several:
            facts.insert(0, f"graph {k.compile_id}")
        if k.source_lines:
            facts.append("from " + compact_lines(k.source_lines, target))
        if k.modules:
            facts.append("in " + ", ".join(k.modules))
        line.append("  " + " · ".join(facts))
        if k.ops:
            ops = ", ".join(o.removeprefix("aten.") for o in k.ops)
            line.append(
                "\n    " + (f"lays out data for {ops}" if k.kind == "copy" else ops), style="dim"
            )
        rows.append(line)
    # what the count counts against torch's generated_kernel_count is the HTML report's
    # and docs/usage.md's to say: a paragraph on every run is noise here
    out: list = [Text(title, style="bold")]
    out += [Padding(r, (0, 0, 0, 2)) for r in rows]
    if len(shown) < len(report.kernels):
        more = len(report.kernels) - len(shown)
        where = (
            "`--format json` or `--html FILE` lists all"  # a trace has no model to dump
            if report.environment.source == "trace"
            else "`compilediag dump-kernels` lists all"
        )
        out.append(Text(f"  ... {more} more: {where}", style="dim"))
    return out


def compact_lines(places: list[str], target: str = "") -> str:
    """[`/a/model.py:28`, `/a/model.py:24`] -> `L24,28` for the model file itself, else
    `other.py:24,28` (the table has no room for folders)."""
    by_file: dict[str, list[int]] = {}
    for place in places:
        path, _, line = place.rpartition(":")
        key = "L" if path == target else path.rsplit("/", 1)[-1] + ":"
        by_file.setdefault(key, []).append(int(line) if line.isdigit() else 0)
    return " ".join(f"{f}{','.join(map(str, sorted(set(ls))))}" for f, ls in by_file.items())


def _cross_check_lines(report: Report) -> list:
    cc = report.cross_check
    assert cc is not None
    if cc.error:
        return [Text(f"\nCross-check: torch._dynamo.explain failed: {cc.error}", style="yellow")]
    if cc.agree:
        return [
            Text(
                f"\nCross-check: torch._dynamo.explain agrees "
                f"({plural(cc.explain_graph_breaks, 'break')}, same sites).",
                style="green",
            )
        ]
    lines: list = [
        Text(
            f"\nCross-check: torch._dynamo.explain differs ({len(cc.disagreements)})",
            style="bold yellow",
        )
    ]
    for d in cc.disagreements:
        who = "only in the trace" if d.seen_by == "trace" else "only in explain"
        lines.append(Text(f"  {where(d.file or '?', d.line or 0)} {who}: {d.reason}"))
        lines.append(_details([("", Text(d.believe, style="dim"))]))
    return lines


def _runtime_lines(report: Report) -> list:
    """`compilediag run`: how the job ended, its steps, and where a step's time went."""
    r = report.runtime
    assert r is not None
    ended = "was interrupted" if r.interrupted else (
        f"was ended by {r.signal}" if r.signal else f"exited with status {r.exit_code}"
    )  # fmt: skip
    rows: list[Row] = [
        ("job", Text(f"{' '.join(r.command)}: {ended} after {seconds(r.wall_s)}" if r.command
                     else f"the capture() block ran for {seconds(r.wall_s)}",
                     style="" if r.exit_code == 0 else "yellow")),
    ]  # fmt: skip
    if r.step_frame:
        rows.append(
            (
                "steps",
                Text(f"{r.steps} calls of {r.step_frame} ({where(r.step_file, r.step_line)})"),
            )
        )
    b = report.timings.breakdown if report.timings else None
    if b is not None:
        a, z = r.window
        rows.append(
            (
                "a step",
                Text(
                    f"{ms(b.call_ms)}: in graphs {ms(b.in_graphs_ms)} · Python between them "
                    f"{ms(b.between_graphs_ms)} · the rest {ms(b.outside_ms)} (backward, "
                    f"optimizer, data; steps {a}-{z}, {b.calls} measured"
                    + (f", rank {r.window_rank}" if r.window_rank is not None else "")
                    + ")"
                ),
            )
        )
    elif r.window:
        a, z = r.window
        rows.append(("a step", Text(f"not measured: the job made fewer than {z + 1} steps "
                                    f"(--profile-steps {a}-{z})", style="dim")))  # fmt: skip
    elif not r.processes:
        rows.append(("calls", Text(
            "not counted: no process of the job loaded compilediag's bootstrap (a Python "
            "started with -S or -I does not)", style="dim",
        )))  # fmt: skip
    else:
        rows.append(("a step", Text("not timed: pass --profile-steps A-B", style="dim")))
    if r.cudagraph_skips or r.cudagraph_skip_reasons or r.cudagraph_rerecords:
        said = f"{plural(r.cudagraph_skips, 'graph')} ran without a CUDA graph" + (
            f"; {plural(r.cudagraph_rerecords, 'CUDA graph')} recorded again"
            if r.cudagraph_rerecords else ""
        )  # fmt: skip
        rows.append(("cudagraphs", Text(said, style="yellow")))
        for why in r.cudagraph_skip_reasons:
            rows.append(("", Text(f"skipped: {why}", style="yellow")))
    ct = report.compile_time
    if ct and ct.total_s:
        rows.append(("compile", Text(f"{seconds(ct.total_s)} = {compile_phases(ct)}")))
        if ct.caches:
            rows.append(("caches", Text(cache_text(ct.caches, report.environment.cold))))
    return [_details(rows)]


def compile_phases(ct: CompileTime) -> str:
    phases = f"dynamo {seconds(ct.dynamo_s)} · aot {seconds(ct.aot_s)} · inductor {seconds(ct.inductor_s)} · codegen {seconds(ct.codegen_s)}"
    if ct.backward_s:
        phases += f" · backward {seconds(ct.backward_s)}"
    if ct.kernel_compile_s:
        phases += f" (of which compiling kernels {seconds(ct.kernel_compile_s)})"
    return phases


def _timing_lines(report: Report) -> list:
    t = report.timings
    if report.runtime is not None:
        return _runtime_lines(report)
    if t is None:
        return (
            [
                Text(
                    "  not measured: a trace has none (`compilediag run --profile-steps A-B -- COMMAND` "
                    "times steps)",
                    style="dim",
                )
            ]
            if report.environment.source == "trace"
            else []
        )
    rows: list[Row] = [("first call", Text(f"{seconds(t.first_call_s)} (compile + run)"))]
    if t.eager_ms and t.compiled_ms:
        e, c = t.eager_ms, t.compiled_ms
        for label, s in (("eager", e), ("compiled", c)):
            fastest = f", min {s.min:.3f}" if s.min is not None else ""
            rows.append((label, Text(f"{s.median:.3f} ms a call (IQR {s.iqr:.3f}{fastest})")))
        rows.append(("speedup", Text(f"{t.speedup:.2f}x", style="bold")))
        if t.device_ms:
            d = t.device_ms
            rows.append(
                (
                    "GPU time",
                    Text(
                        f"eager {d.eager_ms:.3f} ms · compiled {d.compiled_ms:.3f} ms a call "
                        f"({d.eager_ms / d.compiled_ms:.2f}x); compiled is {t.bound}"
                    ),
                )
            )
        if t.breakdown:
            b = t.breakdown
            rows.append(
                (
                    "where",
                    Text(
                        f"a compiled call, {ms(b.call_ms)}: graphs "
                        f"{ms(b.in_graphs_ms)} · Python between them {ms(b.between_graphs_ms)}"
                        f" · outside compiled code {ms(b.outside_ms)} (torch.profiler's shares "
                        f"of {b.calls} calls)"
                    ),
                )
            )
        method = (
            f"median of {t.repeat} interleaved blocks of {t.calls_per_block} calls, "
            f"after {t.warmup} warm-up calls; {t.method}"
        )
        rows.append(("method", Text(method, style="dim")))
    ct = report.compile_time
    if ct and ct.total_s:
        rows.insert(1, ("compile", Text(f"{seconds(ct.total_s)} = {compile_phases(ct)}")))
        if ct.caches:
            rows.insert(2, ("caches", Text(cache_text(ct.caches, report.environment.cold))))
    if t.mutated_inputs:
        rows.append(
            (
                "inputs",
                Text(
                    f"the model changes {', '.join(t.mutated_inputs)} in place: eager and "
                    "compiled each ran on a fresh copy of the inputs"
                ),
            )
        )
    for skip in t.cudagraph_skips:
        rows.append(("cudagraphs", Text(f"skipped: {skip}", style="yellow")))
    for i, note in enumerate(t.notes):  # one label for all the reasons
        rows.append(("why slow?" if i == 0 else "", Text(note, style="yellow")))
    if t.outputs_match is not None:
        verdict = "match eager" if t.outputs_match else "DIFFER from eager"
        style = "green" if t.outputs_match else "bold red"
        rows.append(("outputs", Text(f"{verdict} (max abs err {t.max_abs_err:.2e})", style=style)))
    return [_details(rows)]
