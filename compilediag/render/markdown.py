"""Markdown, for a pull-request comment or a CI summary."""

from __future__ import annotations

from collections.abc import Callable

from compilediag.render import (
    graphless_words,
    headline,
    limit_words,
    ms,
    ranks_of,
    seconds,
    short_path,
    shown_id,
    verdict_lines,
    where,
)
from compilediag.render.glance import rank_glance
from compilediag.render.tried import cold_warm_words, tried_words, try_baseline_words
from compilediag.render.views import (
    bound_words,
    rank_step_rows,
    step_text,
    tracing_words,
)
from compilediag.render.window_words import pace_line, took_words
from compilediag.report.model import Report
from compilediag.report.words import BREAK_SAVES


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    out = [f"## compilediag: `{short_path(report.target.path)}`", ""]
    out += [line + "  " for line in headline(report).splitlines()] + [""]
    if pace_line(report.runtime):
        out += [pace_line(report.runtime), ""]
    glance = rank_glance(report)
    if glance:  # a multi-rank run's first screen
        out += [f"**{glance[0]}**", "", *(f"- {x.strip()}" for x in glance[1:]), ""]
    for section in SECTIONS:
        out += section(report)
    return "\n".join(out).rstrip() + "\n"


def _messages(report: Report) -> list[str]:
    out = []
    for err in report.errors:
        out.append(f"> **error:** {_cell(err.text)}")
    for note in report.notes:
        out.append(f"> **note:** {_cell(note.text)}")
    if report.errors or report.notes:
        out.append("")
    return out


def _compile_failures(report: Report) -> list[str]:
    if not report.compile_failures:
        return []
    out = ["### Compile failures", "", "| what | where | failed | fix |", "|---|---|---|---|"]
    for f in report.compile_failures:
        code = f"<br>`{_cell(f.code)}`" if f.code else ""
        out.append(
            f"| {f.by} ({f.compile_id}) | `{where(f.file, f.line)}` {f.frame}{code} "
            f"| {f.fail_type}: {_cell(f.reason)} | {_cell(f.fix)} |"
        )
    return out + [""]


def _limit_hits(report: Report) -> list[str]:
    if not report.recompile_limit_hits:
        return []
    out = ["### Recompile limit hit", ""]
    for hit in report.recompile_limit_hits:
        head, rows = limit_words(hit)
        out.append(f"- {_cell(head)}")
        out += [f"  - {label}: {_cell(text)}" for label, text in rows]
    return out + [""]


def _graph_breaks(report: Report) -> list[str]:
    if not report.graph_breaks:
        return []
    out = [
        "### Graph breaks",
        "",
        "| # | where | reason | count | fix |",
        "|---|---|---|---|---|",
    ]
    for i, gb in enumerate(report.graph_breaks, 1):
        reason = _cell(gb.reason) + (f" ([{gb.gb_id}]({gb.doc_url}))" if gb.gb_id else "")
        if gb.time_lost_ms is not None:
            per = "a step" if report.runtime else "a call"
            reason += f"<br>eager code {ms(gb.time_lost_ms)} {per}; {BREAK_SAVES}"
        code = f"<br>`{_cell(gb.code)}`" if gb.code else ""
        if gb.library and not gb.library_frame:
            code += f"<br>in {gb.library}"
        fix = gb.suggestion
        if gb.fix_source != "compilediag":  # torch's hints, where the fix isn't ours
            fix = " ".join([fix, *(h for h in gb.hints if h not in fix)])
        if ranks := ranks_of(report, gb.ranks):
            reason += f"<br>{ranks}"
        out.append(
            f"| {i} | `{where(gb.file, gb.line)}`{code} | {reason} | {gb.count} | {_cell(fix)} |"
        )
    return out + [""]


def _recompiles(report: Report) -> list[str]:
    if not report.recompiles:
        return []
    out = ["### Recompiles", "", "| compile | frame | failed guard |", "|---|---|---|"]
    for r in report.recompiles:
        ranks = ranks_of(report, r.ranks)
        out.append(
            f"| {shown_id(report, r.compile_id)} | `{where(r.file, r.line)}` {r.frame}"
            + (f" ({ranks})" if ranks else "")
            + f" | {_cell(r.failed_guard)} |"
        )
    return out + [""]


def _graphs(report: Report) -> list[str]:
    if not report.graphs:
        return []
    calls = report.runtime is not None  # `run`: how often the job ran each graph
    out = [
        "### Graphs",
        "",
        "| graph | frame | where | ops | compile |" + (" calls |" if calls else ""),
        "|---|---|---|---:|---:|" + ("---:|" if calls else ""),
    ]
    for g in report.graphs:
        out.append(
            f"| {g.compile_id} | {g.frame}{' (evaluation)' if g.evaluation else ''} | `{where(g.file, g.line)}` | {g.ops} | {seconds(g.compile_time_s)} |"
            + (f" {g.calls if g.calls is not None else '-'} |" if calls else "")
        )
    words = graphless_words(report)
    return out + ([""] + [words[0].upper() + words[1:] + "."] if words else []) + [""]


def _verified_fixes(report: Report) -> list[str]:
    if not report.verified_fixes:
        return []
    out = [
        "### Verified fixes",
        "",
        "| remedy | verdict | break sites | recompiles | compile | outputs | code |",
        "|---|---|---|---|---|---|---|",
    ]
    for fx in report.verified_fixes:
        a = None if fx.verdict == "failed" else fx.after  # (a failed run compiled nothing)
        sites = f"{fx.before.graph_breaks} → {a.graph_breaks}" if a else "-"
        recs = f"{fx.before.recompiles} → {a.recompiles}" if a else "-"
        took = (
            f"{fx.before.compile_s:.2f} → {a.compile_s:.2f} s"
            if a and fx.before.compile_s is not None and a.compile_s is not None else "-"
        )  # fmt: skip
        match = {True: "match", False: "differ", None: "-"}[fx.outputs_match]
        out.append(
            f"| {_cell(fx.remedy)} | {fx.verdict} | {sites} | {recs} | {took} | {match} | "
            f"`{_cell(fx.code)}` |"
        )
    out += [f"\n{fx.remedy}: {w}" for fx in report.verified_fixes if (w := cold_warm_words(fx))]
    return out + [""]


def _job(report: Report) -> list[str]:
    job, t = report.runtime, report.timings
    if job is None:
        return []
    ended = f"ended by {job.signal}" if job.signal else f"exit status {job.exit_code}"
    out = [
        "### Job",
        "",
        f"`{' '.join(job.command) or 'this process'}`: {ended} after {seconds(job.wall_s)}",
    ]
    b = t.breakdown if t else None
    if job.bound is not None:
        out.append(f"<br>**bound by** {bound_words(job.bound)}")
    if job.try_baseline is not None:
        out.append(f"<br>**tried** {try_baseline_words(job.try_baseline)}")
    out += [f"<br>**tried** {tried_words(x)}" for x in job.tried]
    if job.numerics is not None:
        out.append(f"<br>**losses** {_cell(job.numerics.words)}")
    if b is not None:
        out.append(f"<br>a step: {step_text(job, b)}")
    out += [f"<br>{label or '…'}: {text}" for label, text in rank_step_rows(job)]
    return out + [""]


def _timings(report: Report) -> list[str]:
    t = report.timings
    if not (t and t.eager_ms and t.compiled_ms):
        return []
    return [
        "### Timings",
        "",
        f"eager {ms(t.eager_ms.median)} · compiled {ms(t.compiled_ms.median)} · "
        f"speedup {t.speedup:.2f}x"
        + (f" (not reliable: {t.noise})" if t.noise else "")
        + f" · first call {seconds(t.first_call_s)}",
        *(["", took_words(report.took_s)] if report.took_s else []),
        "",
    ]


def _numerics(report: Report) -> list[str]:
    n = report.numerics
    if n is None:
        return []
    out = ["### Outputs", "", _cell(n.words)]
    if n.repro:
        out += ["", f"repro (runs alone): `python {short_path(n.repro)}`"]
    out += [f"> {_cell(note)}" for note in n.notes]
    return [*out, ""]


def _serving(report: Report) -> list[str]:
    from compilediag.render.table.serving import (
        bucket_lines,
        chosen_lines,
        plan_columns,
        plan_rows,
        stream_lines,
    )

    s = report.serving
    if s is None:
        return []
    out = ["### Serving", "", *(f"- {_cell(x.strip())}" for x in stream_lines(s)), ""]
    if s.plans:
        columns = plan_columns(s)
        out += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in plan_rows(s)] + [""]
    out += [f"- {_cell(x)}" for x in bucket_lines(s) + chosen_lines(s)]
    if s.plan is not None and s.plan.code:
        out += ["", "```python", s.plan.code.rstrip(), "```"]
    return [*out, ""]


def _tracing(report: Report) -> list[str]:
    ct = report.compile_time
    if ct is not None and ct.tracing is not None and ct.tracing.total_s:
        return [f"**Dynamo's tracing** {tracing_words(ct.tracing)}", ""]
    return []


def _verdict(report: Report) -> list[str]:
    lines = verdict_lines(report)
    if lines:
        return [f"**{lines[0]}**", ""] + [f"- {ln.strip()}" for ln in lines[1:]] + [""]
    return []


# the report's sections, in order: each gives its lines (and a blank after), or none
SECTIONS: tuple[Callable[[Report], list[str]], ...] = (
    _messages, _serving, _compile_failures, _limit_hits, _graph_breaks, _recompiles, _graphs,
    _verified_fixes, _job, _timings, _numerics, _tracing, _verdict,
)  # fmt: skip
