"""`compilediag fix`'s result: each kept patch as a unified diff with its evidence, then
each break without a safe patch, with why and today's advice; or the same as JSON."""

from __future__ import annotations

import dataclasses
import json
import os
import textwrap

from compilediag.fixes.patches import BreakFix, FixResult, RecompileFix
from compilediag.report.words import plural

WIDTH = 100  # a terminal's columns, the README's too


def render_fix(result: FixResult, fmt: str = "table") -> str:
    if fmt == "json":
        return render_fix_json(result)
    return render_fix_table(result)


def render_fix_json(result: FixResult) -> str:
    data = dataclasses.asdict(result)
    del data["text"]
    for item, brk in zip(data["breaks"], result.breaks, strict=True):
        item["evidence_text"] = brk.evidence.text() if brk.evidence else ""
    code = [b for b in result.breaks if b.patched]
    data["patched"] = len(code)
    return json.dumps(data, indent=2) + "\n"


def render_fix_table(result: FixResult) -> str:
    kept = [b for b in result.breaks if b.patched]
    left = [b for b in result.breaks if not b.patched]
    n = len(result.breaks)
    # sites, as explain's "4 graph breaks at 3 sites" counts them: two breaks on a line (a
    # bincount and its .tolist()) are two findings at one site (a look read 4 sites and 3)
    sites = len({(b.file, b.line) for b in result.breaks})
    counted = f"{plural(sites, 'graph-break site')}" + (f" ({n} findings)" if n != sites else "")
    out = [
        f"compilediag fix · {result.file}",
        f"torch {result.torch} · {result.setup}",
        f"{counted}: {len(kept)} with a verified patch, {len(left)} without",
        "",
    ]
    for b in kept:
        out += textwrap.wrap(f"line {b.line} · {b.cause} · {b.what}", WIDTH, subsequent_indent="  ")
        assert b.evidence is not None
        out += textwrap.wrap(
            b.evidence.text(), WIDTH, initial_indent="  evidence: ", subsequent_indent=" " * 12,
            break_on_hyphens=False, break_long_words=False,  # (1e-05, a path: whole)
        )  # fmt: skip
        out.append(b.diff.rstrip("\n"))
        out.append("")
    if left:
        out.append("No safe patch")
        for b in left:
            out.extend(_left(b, result.file))
        out.append("")
    if result.recompiles:
        n = sum(r.count for r in result.recompiles)
        out.append(f"Recompiles ({n}): no patch")
        for r in result.recompiles:
            out.extend(_recompile(r))
        out.append("")
    if result.applied:
        out.append(f"applied: the original is kept as {result.applied}")
    elif kept:
        out.append(f"apply it: compilediag fix {result.file} --apply (the original is kept)")
    return "\n".join(out).rstrip("\n") + "\n"


def _place(b: BreakFix, target: str) -> str:
    """`line 7`, in the target file; else the file too, from the target's folder where it is
    under it (`vendorlib/stats.py:7`: a look read "line 7" as the model's)."""
    if not b.file or os.path.realpath(b.file) == os.path.realpath(target):
        return f"line {b.line}"
    folder = os.path.dirname(os.path.realpath(target))
    where = os.path.relpath(os.path.realpath(b.file), folder)
    return f"{b.file if where.startswith('..') else where}:{b.line}"


def _left(b: BreakFix, target: str) -> list[str]:
    lines = textwrap.wrap(
        f"{_place(b, target)} · {b.cause or 'other'} · {b.gb_id or b.reason}", WIDTH,
        initial_indent="  ", subsequent_indent="    ", break_long_words=False,
    )  # fmt: skip
    lines.append(f"    {b.code.strip()}")
    lines += textwrap.wrap(b.why, 96, initial_indent="    why  ", subsequent_indent="         ")
    if b.advice:
        lines += textwrap.wrap(
            b.advice, 96, initial_indent="    fix  ", subsequent_indent="         "
        )
    return lines


def _recompile(r: RecompileFix) -> list[str]:
    where = f"{r.file.rsplit('/', 1)[-1]}:{r.line}" if r.file else "?"
    lines = textwrap.wrap(
        f"{where} · {r.cause} · {r.guard}" + (f" ({r.count}×)" if r.count > 1 else ""), WIDTH,
        initial_indent="  ", subsequent_indent="    ", break_long_words=False,
    )  # fmt: skip
    if r.code:
        lines.append(f"    {r.code}")
    lines += textwrap.wrap(r.why, 96, initial_indent="    why  ", subsequent_indent="         ")
    if r.advice:
        lines += textwrap.wrap(
            r.advice, 96, initial_indent="    fix  ", subsequent_indent="         "
        )
    return lines
