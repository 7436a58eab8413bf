"""A self-contained HTML report: one file, styles and script inline, no network requests.

Rendered from the Report alone (no torch, no reading of the user's files, nothing that
depends on the current folder), so a saved JSON report renders the same anywhere. The
only links out are torch's graph-break docs (`doc_url`).

Autoescaping is on: a model's source line, a guard or a trace message is data, never
markup. Highlighted code comes from pygments, which escapes too. A Content-Security-Policy
allows only this file's own script (by its hash), so even a mistake in escaping would not
run a script planted in a report.

Fields are read tolerantly (a dict key or an attribute, absent = empty): the Report gains
fields over time (`gb.context`, `kernel.source`, `report.verified_fixes`) and
`environment`/`target` may be dicts or dataclasses.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import re
import textwrap
from collections.abc import Mapping
from typing import Any

import jinja2
from markupsafe import Markup, escape

from compilediag.paths import library_path, user_base
from compilediag.render import graphless_words, kernel_count_note, limit_words, ms, plural
from compilediag.render import seconds as render_seconds
from compilediag.render.glance import rank_glance
from compilediag.render.step_picture import step_picture
from compilediag.render.table.serving import inputs_words, serving_view
from compilediag.render.tried import tried_words, try_baseline_words
from compilediag.render.views import (
    bound_words,
    rank_step_rows,
    recompile_causes,
    step_text,
    step_words,
    unmeasured_words,
    window_notes,
)
from compilediag.render.window_words import kernel_achieved, pace_line, took_words
from compilediag.report.model import RankSummary, Summary
from compilediag.report.ranksets import rank_set

__all__ = ["render_html"]

TEMPLATE = "report.html.j2"
PHASES = (  # compile_time field, label, css class
    ("dynamo_s", "Dynamo (tracing)", "p-dynamo"),
    ("aot_s", "AOTAutograd", "p-aot"),
    ("inductor_s", "Inductor (lowering)", "p-inductor"),
    ("codegen_s", "code generation", "p-codegen"),
)


def render_html(report: Any) -> str:
    """The whole report as one HTML document (a str; write it with encoding="utf-8")."""
    env = _env()
    script = _asset("report.js")
    css = _asset("report.css") + "\n" + _pygments_css()
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )
    paths = _Paths(report)
    return (
        env.get_template(TEMPLATE)
        .render(
            report=report,
            css=Markup(css),
            script=Markup(script),
            csp=csp,
            short=paths.short,
            where=paths.where,
            cause_groups=recompile_causes(report),
            hit_frames=[(h.frame, h.file, h.line) for h in _list(report, "recompile_limit_hits")],
            job=_job_words(report),
            gate_options=gate_options(report),
            call_of=_call_of(report),
            phases=_phases(report),
            timing_chart=_timing_chart(report),
            graph_max=max(
                [_num(_get(g, "compile_time_s")) for g in _list(report, "graphs")] or [0]
            ),
            call_max=max([_num(_get(c, "wall_s")) for c in _list(report, "calls")] or [0]),
            rank_rows=_rank_rows(report),
            serving=serving_view(s) if (s := _serving_of(report)) else None,
            inputs_line=inputs_words(list(_get(_get(report, "target"), "inputs", None) or []), s),
            per_rank=_per_rank(report),
            took=took_words(report.took_s) if _get(report, "took_s") else "",
            ranks_of=_ranks_of(report),
            kernel_groups=_kernel_counts(report),
            graphless=graphless_words(report) if _get(report, "graphless") else "",
            kernel_note=kernel_count_note(
                Summary(
                    kernels=_get(_get(report, "summary"), "kernels", 0),
                    torch_kernel_count=_get(_get(report, "summary"), "torch_kernel_count"),
                )
            ),
        )
        .lstrip()
    )  # the template's leading macros leave blank lines before the doctype


def _serving_of(report: Any) -> Any:
    """The report's serving section as its type (a Report's, or read from its dict)."""
    from compilediag.report.serial import from_plain
    from compilediag.report.serving import Serving

    s = _get(report, "serving")
    return s if s is None or isinstance(s, Serving) else from_plain(Serving, s)


# --- environment ------------------------------------------------------------------------


def _achieved(k: Any, peak: Any) -> str:
    return kernel_achieved(k, peak or "")


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("compilediag.render", "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.ChainableUndefined,  # a missing field renders empty, never raises
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        seconds=seconds,
        ms=lambda v: "-" if v is None else ms(v),
        plural=plural,
        highlight=highlight,
        ticks=ticks,
        pct=pct,
        fields=fields,
        get=_get,
        code_block=code_block,
        breakable=breakable,
    )
    env.globals.update(plural=plural, achieved=_achieved, limit_words=limit_words)
    env.tests.update(doc_link=is_doc_link, mapping=lambda v: isinstance(v, Mapping))
    return env


@functools.cache
def _asset(name: str) -> str:
    env = _env()
    assert env.loader is not None
    source, _, _ = env.loader.get_source(env, name)
    return source.strip()


@functools.cache
def _pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".hl")


# --- filters ----------------------------------------------------------------------------


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """obj[name] for a mapping, obj.name otherwise; default when absent or None."""
    if obj is None:
        return default
    value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
    return default if value is None else value


def _list(obj: Any, name: str) -> list:
    return list(_get(obj, name, []) or [])


def _num(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def seconds(value: Any) -> str:
    """The report's seconds (`render.seconds`), from a template's value."""
    return "-" if value is None or value == "" else render_seconds(_num(value))


def pct(value: Any, total: Any) -> str:
    """A CSS width: value as a percentage of total (at least a sliver when non-zero)."""
    v, t = _num(value), _num(total)
    if t <= 0 or v <= 0:
        return "0%"
    return f"{max(0.5, min(100.0, 100.0 * v / t)):.1f}%"


def ticks(text: Any) -> Markup:
    """Escape, then show `backticked` spans as code."""
    escaped = str(escape("" if text is None else text))
    return Markup(re.sub(r"`([^`\n]+)`", r"<code>\1</code>", escaped))


def is_doc_link(url: Any) -> bool:
    """Only http(s) URLs become links (a report is data: no javascript: or file: links)."""
    return isinstance(url, str) and re.match(r"https?://[^\s\"'<>]+$", url) is not None


def highlight(code: Any, lang: str = "python") -> Markup:
    """Syntax-highlighted HTML spans for code (pygments escapes it)."""
    from pygments import highlight as _highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        lexer = get_lexer_by_name("text", stripnl=False, ensurenl=False)
    html = _highlight("" if code is None else str(code), lexer, HtmlFormatter(nowrap=True))
    return Markup(html.rstrip("\n"))


def code_block(lines: Any, mark: Any = None, lang: str = "python") -> Markup:
    """A <pre> of numbered, highlighted lines; `lines` is a whole text (numbered from 1), or
    a list of (number, text) or of items with .line and .code; the line numbered `mark` is
    highlighted. The numbers are CSS-generated, so copying the code copies only code."""
    if isinstance(lines, str):
        lines = list(enumerate(lines.rstrip("\n").split("\n"), 1))
    pairs: list[tuple[Any, str]] = []
    for item in lines or []:
        if isinstance(item, tuple) and len(item) == 2:
            pairs.append((item[0], "" if item[1] is None else str(item[1])))
        elif isinstance(item, str):  # a list of lines
            pairs.append((len(pairs) + 1, item))
        else:
            pairs.append((_get(item, "line", ""), str(_get(item, "code", ""))))
    if not pairs:
        return Markup("")
    texts = textwrap.dedent("\n".join(t.replace("\n", " ").expandtabs(4) for _, t in pairs))
    html = str(highlight(texts, lang)).split("\n")
    html += [""] * (len(pairs) - len(html))
    out = []
    for (number, _), code in zip(pairs, html, strict=False):
        marked = mark is not None and str(number) == str(mark)
        out.append(f'<span class="line{" mark" * marked}" data-ln="{escape(number)}">{code}</span>')
    return Markup('<pre class="code hl"><code>' + "\n".join(out) + "</code></pre>")


def fields(obj: Any) -> list[tuple[str, Any]]:
    """(name, value) pairs of a mapping or a dataclass, for items of unknown shape."""
    if isinstance(obj, Mapping):
        return list(obj.items())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    if hasattr(obj, "__dict__"):
        return list(vars(obj).items())
    return [("", obj)]


# --- paths ------------------------------------------------------------------------------


class _Paths:
    """Short display paths, the same on every machine: a library path from its package
    folder on, a user path relative to the folder that holds every user file of the
    report. The full path is kept for tooltips and the search."""

    def __init__(self, report: Any) -> None:
        files: list[str] = []
        for key in ("graph_breaks", "recompiles", "graphs", "recompile_limit_hits"):
            for item in _list(report, key):
                files += [str(_get(item, "file", "")), str(_get(item, "guard_file", ""))]
        for k in _list(report, "kernels"):
            files += [str(p).rpartition(":")[0] for p in _list(k, "source_lines")]
        self.root = user_base(files)

    def short(self, path: Any) -> str:
        path = "" if path is None else str(path)
        if not path or path.startswith("<"):
            return path
        lib = library_path(path)
        if lib is not None:
            return lib
        if self.root and path.startswith(self.root + "/"):
            return path[len(self.root) + 1 :]
        return path

    def where(self, file: Any, line: Any) -> str:
        return f"{self.short(file) or '?'}:{line if line is not None else '?'}"


# --- views computed from the report -----------------------------------------------------


def breakable(name: str) -> Markup:
    """A kernel's name that wraps only after an underscore or a dot, never inside a word
    (`cpp_fused_add_mul_0`)."""
    return Markup("<wbr>".join(escape(part) for part in re.split(r"(?<=[_.])", name)))


def _job_words(report: Any) -> dict[str, Any]:
    """A run's steps and window in the words the table uses."""
    r = getattr(report, "runtime", None)
    if r is None:
        return {}
    b = report.timings.breakdown if report.timings else None
    return {
        "steps": step_words(r),
        "bound": bound_words(r.bound) if r.bound is not None else "",
        "tried": ([(True, try_baseline_words(r.try_baseline))] if r.try_baseline else [])
        + [(x.kept, tried_words(x)) for x in r.tried],
        "step": step_text(r, b) if r.window and b is not None else "",
        "parts": b.parts() if b is not None else [],
        "unmeasured": unmeasured_words(r) if r.window and b is None else "",
        "notes": ([("pace", pace_line(r).removeprefix("pace: "))] if pace_line(r) else [])
        + (window_notes(r, report.timings) if r.window else []),
        "ranks": rank_step_rows(r),
        "picture": step_picture(report) if r.window and b is not None else "",
        "glance": [x.strip() for x in rank_glance(report)],
    }


def gate_options(report: Any) -> list[str]:
    """The gate options of the command that made the report, as its user writes them
    (`--max-recompiles N`), for the "no gate" hint; [] for one made in-process (capture(),
    compilediag.testing), which no option gates. A report names no command: where it came
    from and what it holds tell which, and the kinds of run each command declares its gate
    rules for (cli/app.py's `gate_rules`) give its options: `report` and `run` read a trace
    ("trace"), explain runs a model ("model", and "timings" when timed), recompiles a
    sweep ("sweep") and takes no --baseline. An untimed run of one call may be either of
    the last two: then only the options both take."""
    from compilediag.gate import rules_for

    source = str(_get(_get(report, "environment"), "source", "run"))
    if source == "in-process":
        return []
    if source == "trace":
        kinds, baseline = [{"trace"}], True
    elif len(_list(report, "calls")) > 1:
        kinds, baseline = [{"sweep"}], False
    elif _get(_get(report, "timings"), "compiled_ms") is not None:
        kinds, baseline = [{"model", "timings"}], True
    else:
        kinds, baseline = [{"model"}, {"sweep"}], False
    ranks = len(_list(report, "ranks"))
    said = []
    for rule in rules_for(kinds[0]):
        if not all(rule in rules_for(k) for k in kinds):
            continue
        if rule.key == "fail_on_divergence" and ranks < 2:
            continue  # one process has no ranks to diverge
        said.append(rule.option + {bool: "", int: " N"}.get(rule.kind, " X"))
    return said + (["--baseline report.json"] if baseline else [])


def _call_of(report: Any) -> dict[str, int]:
    """compile id -> the (1-based) call of the sweep that compiled it."""
    out: dict[str, int] = {}
    for c in _list(report, "calls"):
        for cid in _list(c, "compile_ids"):
            out.setdefault(str(cid), int(_num(_get(c, "index", 0))) + 1)
    return out


def _phases(report: Any) -> list[dict[str, Any]]:
    ct = _get(report, "compile_time")
    total = _num(_get(ct, "total_s"))
    if not ct or total <= 0:
        return []
    parts = [(label, css, _num(_get(ct, key))) for key, label, css in PHASES]
    whole = max(total, sum(v for _, _, v in parts))
    return [
        {"label": label, "css": css, "s": v, "width": pct(v, whole), "share": v / whole}
        for label, css, v in parts
    ]


def _timing_chart(report: Any) -> dict[str, Any] | None:
    """Geometry of the eager-vs-compiled bar chart (an inline SVG), or None."""
    t = _get(report, "timings")
    eager, compiled = _get(t, "eager_ms"), _get(t, "compiled_ms")
    if not eager or not compiled:
        return None
    rows = [("eager", eager, "bar-eager"), ("compiled", compiled, "bar-compiled")]
    top = max(_num(_get(s, "median")) + _num(_get(s, "iqr")) / 2 for _, s, _ in rows) or 1.0
    left, width, row_h = 80, 520, 30
    out = []
    for i, (label, s, css) in enumerate(rows):
        med, iqr = _num(_get(s, "median")), _num(_get(s, "iqr"))
        y = 8 + i * (row_h + 10)
        lo, hi = max(0.0, med - iqr / 2), med + iqr / 2
        out.append(
            {
                "label": label,
                "css": css,
                "y": y,
                "h": row_h,
                "w": round(width * med / top, 1),
                "lo": round(left + width * lo / top, 1),
                "hi": round(left + width * hi / top, 1),
                "mid": y + row_h / 2,
                "median": med,
                "iqr": iqr,
                "n": _get(s, "n", 0),
            }
        )
    return {"rows": out, "left": left, "width": width, "height": 8 + 2 * (row_h + 10)}


def _named_ranks(report: Any) -> list[RankSummary]:
    return [
        RankSummary(rank=_get(r, "rank"), file=str(_get(r, "file", "")), summary=Summary(),
                    label=str(_get(r, "label", "")))
        for r in _list(report, "ranks")
    ]  # fmt: skip


def _ranks_of(report: Any) -> Any:
    """The ranks a finding was seen on, in words ("" in a one-rank report)."""
    named = _named_ranks(report)

    def ranks_of(positions: Any) -> str:
        valid = [i for i in positions or [] if isinstance(i, int) and 0 <= i < len(named)]
        return rank_set(named, valid) if len(named) > 1 and valid else ""

    return ranks_of


def _per_rank(report: Any) -> dict[str, str] | None:
    """Several ranks: what one rank compiled (a range where ranks differ) and the median
    rank's compile time, for the summary cards: ranks compile side by side, so sums over
    them mislead."""
    summaries = [_get(r, "summary") for r in _list(report, "ranks")]
    if len(summaries) < 2:
        return None

    def span(col: str) -> str:
        values = [int(_get(x, col, 0) or 0) for x in summaries]
        return str(min(values)) if min(values) == max(values) else f"{min(values)}-{max(values)}"

    times = sorted(_num(_get(x, "compile_time_s")) for x in summaries)
    return {
        "graphs": span("graphs"),
        "graph_breaks": span("graph_breaks"),
        "unique_graph_breaks": span("unique_graph_breaks"),
        "recompiles": span("recompiles"),
        "kernels": span("kernels"),
        "compile": seconds(times[len(times) // 2]),
        "ranks": str(len(summaries)),
    }


RANK_COLUMNS = ("graphs", "graph_breaks", "unique_graph_breaks", "recompiles", "kernels")


def _rank_rows(report: Any) -> list[dict[str, Any]]:
    """A row for each group of ranks that compiled alike (the largest first), its columns
    that differ from the largest group's marked, and the first rank's findings."""
    ranks = _list(report, "ranks")
    named = _named_ranks(report)
    rows: list[dict[str, Any]] = []
    for g in _list(report, "rank_groups"):
        members = [i for i in _get(g, "ranks", []) if isinstance(i, int) and 0 <= i < len(ranks)]
        if not members:
            continue
        first = ranks[members[0]]
        rows.append(
            {
                "label": rank_set(named, members),
                "size": len(members),
                "summary": _get(g, "summary"),
                "compile_max_s": _get(g, "compile_max_s"),
                "slowest": _get(g, "slowest", ""),
                "break_sites": _get(first, "break_sites", []),
                "recompile_reasons": _get(first, "recompile_reasons", []),
            }
        )
    base = rows[0]["summary"] if rows else None
    for row in rows:
        row["diff"] = {c for c in RANK_COLUMNS if _get(row["summary"], c) != _get(base, c)}
    return rows


def _kernel_counts(report: Any) -> dict[str, int]:
    kernels = _list(report, "kernels")
    ext = sum(1 for k in kernels if _get(k, "kind") == "extern")
    return {"generated": len(kernels) - ext, "extern": ext}
