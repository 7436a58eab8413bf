"""`compilediag diff`'s views: a table for the terminal, markdown, JSON, one HTML page, and
GitHub annotations for its regressions."""

from __future__ import annotations

import io

from compilediag.analysis.diff.model import CacheMiss, Change, ChangeKind, Diff, RunInfo

MARK = {
    ChangeKind.NEW: "+",
    ChangeKind.GONE: "-",
    ChangeKind.MOVED: "~",
    ChangeKind.CHANGED: "~",
    ChangeKind.SAME: "=",
    ChangeKind.NOTE: "·",
}


def github_annotations(d: Diff) -> list[str]:
    """Each regression as a GitHub Actions error, on B's line where it has one."""
    import os

    from compilediag.render.annotations import _data, _prop

    out = []
    for c in d.regressions:
        where = ""
        if c.file:
            path = os.path.relpath(c.file) if os.path.isabs(c.file) else c.file
            where = f" file={_prop(path)},line={c.line},"
        out.append(f"::error{where or ' '}title=compilediag diff::{_data(c.text)}")
    return out


def render_diff(d: Diff, fmt: str, width: int = 100, color: bool = False) -> str:
    if fmt == "json":
        import json

        from compilediag.report.serial import to_plain

        plain = to_plain(d)
        plain["regressions"] = [c.text for c in d.regressions]
        plain["regressed"] = d.regressed
        return json.dumps(plain, indent=1) + "\n"
    if fmt == "markdown":
        return _markdown(d)
    if fmt == "html":
        return _html(d)
    return _table(d, width, color)


CAUSES_SHOWN = 8  # a miss's causes shown under it; the rest counted (the JSON has all)


def miss_lines(misses: list[CacheMiss]) -> list[tuple[str, list[str]]]:
    """Each miss's title (its graph, and which part of it where it has a backward) and the
    causes shown under it: a cause given for an earlier miss is not said again but pointed
    at (a torch upgrade misses every graph for the same reasons), at most CAUSES_SHOWN."""
    given: dict[str, str] = {}  # a cause -> the miss it was given for
    out = []
    for m in misses:
        of = f"the {m.part} of " if m.part else ""
        name = f"{of}graph {m.graph.split(' (')[0]}"
        title = f"why B missed the cache for {of}graph {m.graph} (in A: a {m.a_status}):"
        new = [c for c in m.causes if c not in given]
        lines = new[:CAUSES_SHOWN]
        if len(new) > CAUSES_SHOWN:
            lines.append(f"… {len(new) - CAUSES_SHOWN} more: `--format json` lists all")
        before = [given[c] for c in m.causes if c in given]
        if before:
            n = len(before)
            lines.append(f"{'and ' if new else ''}the {n} cause{'s' * (n != 1)} given for "
                         f"{' and '.join(dict.fromkeys(before))} above")  # fmt: skip
        for c in m.causes:
            given.setdefault(c, name)
        out.append((title, lines))
    return out


def verdict(d: Diff) -> str:
    if d.regressed:
        n = len(d.regressions)
        return f"B regressed: {n} regression{'s' * (n != 1)} (exit 1)"
    return "B did not regress (exit 0)"


def _run(label: str, r: RunInfo) -> str:
    """`A: python train.py · torch 2.13.0+cpu · cuda · 2 ranks · a trace (runs/a)`."""
    said = [r.what if r.what and r.what != r.path else ""]
    said += [f"torch {r.torch}", r.device, r.backend]
    said += [f"{r.ranks} ranks" if r.ranks > 1 else "", f"a {r.source} ({r.path})"]
    return f"{label}: " + " · ".join(x for x in said if x)


def _table(d: Diff, width: int, color: bool) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color, no_color=not color,
                      highlight=False, soft_wrap=False, force_jupyter=False)  # fmt: skip
    console.print(Text(_run("A", d.a)))
    console.print(Text(_run("B", d.b)))
    style = "bold red" if d.regressed else "bold green"
    console.print(Text(verdict(d), style=style))
    for note in d.notes:
        console.print(Text(f"! {note}", style="yellow"))
    for title, changes in d.parts():
        misses = d.misses if title == "Caches" else []
        if not changes and not misses:
            continue
        console.print(Text(f"\n{title}", style="bold"))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=3, justify="right")
        grid.add_column(overflow="fold")
        for c in changes:
            grid.add_row(MARK.get(c.kind, "·"), Text(c.text, style="red" if c.regression else ""))
        for title, causes in miss_lines(misses):
            grid.add_row("?", Text(title, style="yellow"))
            for cause in causes:
                grid.add_row("", Text(f"- {cause}"))
        console.print(grid)
    if not any(changes for _, changes in d.parts()) and not d.misses:
        console.print(Text("\nNo difference in breaks, recompiles, graphs, compile time, "
                           "caches or timings."))  # fmt: skip
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())


def _markdown(d: Diff) -> str:
    out = ["## compilediag diff", "", f"- {_run('A', d.a)}", f"- {_run('B', d.b)}", "",
           f"**{verdict(d)}**", ""]  # fmt: skip
    out += [f"> {n}" for n in d.notes]
    for title, changes in d.parts():
        misses = d.misses if title == "Caches" else []
        if not changes and not misses:
            continue
        out += [f"### {title}", ""]
        out += [f"- {'**' if c.regression else ''}{c.text}{'**' if c.regression else ''}"
                for c in changes]  # fmt: skip
        for title, causes in miss_lines(misses):
            out.append(f"- {title}")
            out += [f"  - {cause}" for cause in causes]
        out.append("")
    return "\n".join(out) + "\n"


def _html(d: Diff) -> str:
    """One self-contained page: the two runs, the verdict, each part's changes."""
    from html import escape

    def items(changes: list[Change], misses: list[CacheMiss]) -> str:
        rows = [f'<li class="{c.kind}{" bad" if c.regression else ""}">{escape(c.text)}</li>'
                for c in changes]  # fmt: skip
        for title, causes in miss_lines(misses):
            listed = "".join(f"<li>{escape(x)}</li>" for x in causes)
            rows.append(f'<li class="miss">{escape(title)}<ul>{listed}</ul></li>')
        return "<ul>" + "".join(rows) + "</ul>"

    body = [f"<h1>compilediag diff</h1><p>{escape(_run('A', d.a))}<br>{escape(_run('B', d.b))}</p>",
            f'<p class="verdict {"bad" if d.regressed else "good"}">{escape(verdict(d))}</p>']  # fmt: skip
    body += [f'<p class="note">{escape(n)}</p>' for n in d.notes]
    for title, changes in d.parts():
        misses = d.misses if title == "Caches" else []
        if changes or misses:
            body.append(f"<h2>{escape(title)}</h2>{items(changes, misses)}")
    style = ("body{font:14px system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
             ".bad{color:#b00}.good{color:#070}.verdict{font-weight:bold}.note{color:#850}"
             "li.gone{color:#555}li.miss{color:#850}")  # fmt: skip
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>compilediag diff</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")  # fmt: skip
