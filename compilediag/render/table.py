"""The terminal view (rich). Colour only when asked; width pinned by the caller."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from compilediag.render import headline, plural, seconds, short_path, verdict_lines, where
from compilediag.report import Report


def render_table(report: Report, width: int | None = None, color: bool = False) -> str:
    return _print(blocks(report, color), width, color)


def render_kernels(report: Report, width: int | None = None, color: bool = False) -> str:
    return _print([Text(headline(report)), *kernel_blocks(report, limit=None)], width, color)


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
        console.print(block)
    text = buf.getvalue()
    if not color:  # rich pads cells to the width; trailing blanks only hurt diffs and pipes
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text


def blocks(report: Report, color: bool) -> list:
    out: list = []
    title = Text(f"compilediag · {short_path(report.target.get('path', ''))}", style="bold")
    if report.target.get("inputs"):
        title.append(f"  inputs: {' | '.join(report.target['inputs'])}", style="dim")
    out += [title, Text(headline(report))]

    for err in report.errors:
        out.append(Text(f"! {err}", style="yellow"))

    if report.graph_breaks:
        out.append(Text(f"\nGraph breaks ({plural(len(report.graph_breaks), 'site')}, most costly first)", style="bold"))
        for i, gb in enumerate(report.graph_breaks, 1):
            out.append(_break_block(i, gb, color))
    elif report.graphs:
        out.append(Text("\nNo graph breaks.", style="green"))

    if report.recompiles:
        out.append(Text(f"\nRecompiles ({len(report.recompiles)})", style="bold"))
        for r in report.recompiles:
            line = Text(f"  {r.compile_id}  {r.frame} at {where(r.file, r.line)}: ")
            line.append(r.failed_guard, style="yellow")
            out.append(line)
            if r.suggestion:
                out.append(_details([("fix", Text(r.suggestion, style="green"))]))

    if report.graphs:
        t = Table(title=None, box=None, pad_edge=False, show_edge=False, header_style="bold")
        t.add_column("graph", no_wrap=True)
        t.add_column("frame")
        t.add_column("where", no_wrap=True)
        t.add_column("ops", justify="right")
        t.add_column("compile", justify="right", no_wrap=True)
        for g in report.graphs:
            t.add_row(g.compile_id, g.frame, where(g.file, g.line), str(g.ops), seconds(g.compile_time_s))
        out += [Text("\nGraphs", style="bold"), Padding(t, (0, 0, 0, 2))]

    out += kernel_blocks(report, limit=8)

    if report.cross_check:
        out += _cross_check_lines(report)

    timing = _timing_lines(report)
    if timing:
        out += [Text("\nTimings", style="bold"), *timing]

    for line in verdict_lines(report):
        style = "bold green" if report.verdict.passed else "bold red"
        out.append(Text(("\n" if line.startswith("verdict") else "") + line, style=style))
    return out


def _details(rows: list[tuple[str, object]]) -> Padding:
    """Labelled lines with a hanging indent, so wrapped text stays in its column."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True, justify="right")
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(label, value)
    return Padding(grid, (0, 0, 0, 4))


def _break_block(i: int, gb, color: bool) -> Group:
    head = Text(f"{i:>2}. ", style="bold")
    head.append(where(gb.file, gb.line), style="bold cyan")
    head.append(f"  {gb.reason}")
    if gb.count > 1:
        head.append(f"  ×{gb.count}", style="bold")
    rows: list[tuple[str, object]] = []
    if gb.code:
        code = Syntax(gb.code, "python", theme="ansi_dark", background_color="default") if color else Text(gb.code)
        rows.append(("", code))
    if gb.library_frame:
        lf = gb.library_frame
        rows.append(("inside", Text(f"{where(lf.file, lf.line)}: {lf.code}")))
    if gb.explanation:
        rows.append(("why", Text(gb.explanation)))
    if gb.suggestion:
        rows.append(("fix", Text(gb.suggestion, style="green")))
    if gb.gb_id:
        rows.append(("docs", Text(f"{gb.gb_id} {gb.doc_url}", style="dim")))
    return Group(head, _details(rows))


def kernel_blocks(report: Report, limit: int | None) -> list:
    gen = [k for k in report.kernels if k.kind != "extern"]
    ext = [k for k in report.kernels if k.kind == "extern"]
    if not report.kernels:
        return []
    title = f"\nKernels ({plural(len(gen), 'generated kernel')}, {plural(len(ext), 'library call')})"
    several = len({k.compile_id for k in report.kernels}) > 1
    t = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    t.add_column("kernel", no_wrap=True, overflow="ellipsis", max_width=40)
    if several:
        t.add_column("graph", no_wrap=True)
    t.add_column("kind", no_wrap=True)
    t.add_column("fused ATen ops", min_width=16)
    t.add_column("from", no_wrap=True)
    shown = report.kernels if limit is None else (gen[:limit] + ext[: max(0, limit - len(gen))])
    target = report.target.get("path", "")
    for k in shown:
        name = k.name.removeprefix("torch.ops.").removesuffix(".default")
        ops = ", ".join(o.removeprefix("aten.") for o in k.ops)
        row = [name, *([k.compile_id] if several else []), k.kind, ops, compact_lines(k.source_lines, target)]
        t.add_row(*row)
    out: list = [Text(title, style="bold"), Padding(t, (0, 0, 0, 2))]
    if len(shown) < len(report.kernels):
        more = len(report.kernels) - len(shown)
        out.append(Text(f"  ... {more} more: `compilediag dump-kernels` lists all", style="dim"))
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
        Text(f"\nCross-check: torch._dynamo.explain differs ({len(cc.disagreements)})", style="bold yellow")
    ]
    for d in cc.disagreements:
        who = "only in the trace" if d.seen_by == "trace" else "only in explain"
        lines.append(Text(f"  {where(d.file or '?', d.line or 0)} {who}: {d.reason}"))
        lines.append(_details([("", Text(d.believe, style="dim"))]))
    return lines


def _timing_lines(report: Report) -> list:
    t = report.timings
    if t is None:
        return []
    rows: list[tuple[str, object]] = [("first call", Text(f"{seconds(t.first_call_s)} (compile + run)"))]
    if t.eager_ms and t.compiled_ms:
        rows.append(("eager", Text(f"{t.eager_ms.median:.3f} ms (IQR {t.eager_ms.iqr:.3f}, n={t.eager_ms.n})")))
        rows.append(
            ("compiled", Text(f"{t.compiled_ms.median:.3f} ms (IQR {t.compiled_ms.iqr:.3f}, n={t.compiled_ms.n})"))
        )
        rows.append(("speedup", Text(f"{t.speedup:.2f}x  (medians; calls interleaved, {t.method})", style="bold")))
    if t.outputs_match is not None:
        verdict = "match eager" if t.outputs_match else "DIFFER from eager"
        style = "green" if t.outputs_match else "bold red"
        rows.append(("outputs", Text(f"{verdict} (max abs err {t.max_abs_err:.2e})", style=style)))
    return [_details(rows)]
