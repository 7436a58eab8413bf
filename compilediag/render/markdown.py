"""Markdown, for a pull-request comment or a CI summary."""

from __future__ import annotations

from compilediag.render import (
    headline,
    ranks_of,
    seconds,
    short_path,
    shown_id,
    verdict_lines,
    where,
)
from compilediag.render.views import (
    bound_words,
    rank_step_rows,
    step_text,
    tracing_words,
    tried_words,
)
from compilediag.report.model import Report


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    out = [f"## compilediag: `{short_path(report.target.path)}`", ""]
    out += [line + "  " for line in headline(report).splitlines()] + [""]
    for err in report.errors:
        out.append(f"> **error:** {_cell(err.text)}")
    for note in report.notes:
        out.append(f"> **note:** {_cell(note.text)}")
    if report.errors or report.notes:
        out.append("")
    if report.compile_failures:
        out += ["### Compile failures", "", "| what | where | failed | fix |", "|---|---|---|---|"]
        for f in report.compile_failures:
            code = f"<br>`{_cell(f.code)}`" if f.code else ""
            out.append(
                f"| {f.by} ({f.compile_id}) | `{where(f.file, f.line)}` {f.frame}{code} "
                f"| {f.fail_type}: {_cell(f.reason)} | {_cell(f.fix)} |"
            )
        out.append("")
    if report.recompile_limit_hits:
        out += ["### Recompile limit hit", ""]
        for hit in report.recompile_limit_hits:
            out.append(
                f"- `{hit.frame}` at `{where(hit.file, hit.line)}` compiled {hit.compiles} times "
                f"(limit {hit.limit}): later calls run in eager mode."
            )
        out.append("")
    if report.graph_breaks:
        out += [
            "### Graph breaks",
            "",
            "| # | where | reason | count | fix |",
            "|---|---|---|---|---|",
        ]
        for i, gb in enumerate(report.graph_breaks, 1):
            reason = _cell(gb.reason) + (f" ([{gb.gb_id}]({gb.doc_url}))" if gb.gb_id else "")
            if gb.time_lost_ms is not None:
                per = "a step" if report.runtime else "a call"
                reason += f"<br>costs {gb.time_lost_ms:.3f} ms {per}"
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
        out.append("")
    if report.recompiles:
        out += ["### Recompiles", "", "| compile | frame | failed guard |", "|---|---|---|"]
        for r in report.recompiles:
            ranks = ranks_of(report, r.ranks)
            out.append(
                f"| {shown_id(report, r.compile_id)} | `{where(r.file, r.line)}` {r.frame}"
                + (f" ({ranks})" if ranks else "")
                + f" | {_cell(r.failed_guard)} |"
            )
        out.append("")
    if report.graphs:
        calls = report.runtime is not None  # `run`: how often the job ran each graph
        out += [
            "### Graphs",
            "",
            "| graph | frame | where | ops | compile |" + (" calls |" if calls else ""),
            "|---|---|---|---:|---:|" + ("---:|" if calls else ""),
        ]
        for g in report.graphs:
            out.append(
                f"| {g.compile_id} | {g.frame} | `{where(g.file, g.line)}` | {g.ops} | {seconds(g.compile_time_s)} |"
                + (f" {g.calls if g.calls is not None else '-'} |" if calls else "")
            )
        out.append("")
    if report.verified_fixes:
        out += [
            "### Verified fixes",
            "",
            "| remedy | verdict | break sites | recompiles | compile | outputs | code |",
            "|---|---|---|---|---|---|---|",
        ]
        for fx in report.verified_fixes:
            a = fx.after
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
        out.append("")
    job, t = report.runtime, report.timings
    if job is not None:
        ended = f"ended by {job.signal}" if job.signal else f"exit status {job.exit_code}"
        out += [
            "### Job",
            "",
            f"`{' '.join(job.command) or 'this process'}`: {ended} after {seconds(job.wall_s)}",
        ]
        b = t.breakdown if t else None
        if job.bound is not None:
            out.append(f"<br>**bound by** {bound_words(job.bound)}")
        out += [f"<br>**tried** {tried_words(x)}" for x in job.tried]
        if b is not None:
            out.append(f"<br>a step: {step_text(job, b)}")
        out += [f"<br>{label or '…'}: {text}" for label, text in rank_step_rows(job)]
        out.append("")
    if t and t.eager_ms and t.compiled_ms:
        out += [
            "### Timings",
            "",
            f"eager {t.eager_ms.median:.3f} ms · compiled {t.compiled_ms.median:.3f} ms · "
            f"speedup {t.speedup:.2f}x"
            + (f" (not reliable: {t.noise})" if t.noise else "")
            + f" · first call {seconds(t.first_call_s)}",
            "",
        ]
    ct = report.compile_time
    if ct is not None and ct.tracing is not None and ct.tracing.total_s:
        out += [f"**Dynamo's tracing** {tracing_words(ct.tracing)}", ""]
    lines = verdict_lines(report)
    if lines:
        out += [f"**{lines[0]}**", ""] + [f"- {ln.strip()}" for ln in lines[1:]] + [""]
    return "\n".join(out).rstrip() + "\n"
