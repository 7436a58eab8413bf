"""Rendering: a Report as a table (in parts: facts, recompiles, views shared with the
other formats), JSON, Markdown, CSV, JUnit, HTML, and GitHub annotations, each format a
module registered here; `dump` writes the generated kernels and their index. None of
them imports torch, and none computes a finding: they show the Report as it is.

May import: errors, paths, fsutil, report, trace (torch's formats), analysis (the
kernels' index for `dump`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from compilediag.paths import short_path, where
from compilediag.report.compile import LimitHit
from compilediag.report.model import Environment, RankSpread, Report, Rule, Summary
from compilediag.report.ranksets import rank_set
from compilediag.report.vocabulary import Source
from compilediag.report.words import cache_text as cache_text  # the renderers' import
from compilediag.report.words import ms as ms
from compilediag.report.words import plural as plural
from compilediag.report.words import seconds as seconds

__all__ = ["FORMATS", "render", "short_path", "where", "headline", "verdict_lines"]


@dataclass(frozen=True)
class Renderer:
    """One output format: the function that renders a Report into it, imported when first
    used (`--help` and `render` stay fast); a terminal view also takes width and colour."""

    module: str
    function: str
    terminal: bool = False


RENDERERS = {
    "table": Renderer("compilediag.render.table", "render_table", terminal=True),
    "json": Renderer("compilediag.render.json", "render_json"),
    "markdown": Renderer("compilediag.render.markdown", "render_markdown"),
    "csv": Renderer("compilediag.render.csv", "render_csv"),
    "junit": Renderer("compilediag.render.junit", "render_junit"),
    "html": Renderer("compilediag.render.html", "render_html"),
}
FORMATS = tuple(RENDERERS)


def render(report: Report, fmt: str, width: int | None = None, color: bool = False) -> str:
    r = RENDERERS.get(fmt, RENDERERS["table"])
    fn = getattr(importlib.import_module(r.module), r.function)
    if not r.terminal:
        return fn(report)
    # (rich, in a Jupyter kernel, sends what a Console prints to the notebook as HTML of its
    # own: `print(run)` showed 42 fragments. The text views' Consoles say force_jupyter=False.)
    return fn(report, width=width, color=color)


def headline(report: Report) -> str:
    e = report.environment
    parts = [f"torch {e.torch}"]
    if e.files:
        parts.append(f"from {plural(e.files, 'trace file')}")
    if e.device_name or e.device:
        parts.append(e.device_name or e.device)
    if e.backend:
        parts.append(compiled_as(e))
    multi = len(report.ranks) > 1
    counts = _rank_counts(report.summary, len(report.ranks)) if multi else _counts(report.summary)
    if report.numerics is not None and report.numerics.verdict == "differ":
        counts.append("outputs DIFFER from eager")
    return " · ".join(parts) + "\n" + " · ".join(counts)


def compiled_as(e: Environment) -> str:
    """The backend, its mode, and what a model file's calls ran under: `aot_eager/default
    no_grad`, `inductor/default +train dynamic` (torch traces a different graph in each)."""
    return (
        e.backend
        + (f"/{e.mode}" if e.mode else "")
        + (" +train" if e.train else " no_grad" if e.source == Source.RUN else "")
        + (" dynamic" if e.dynamic else "")
    )


def _rank_counts(s: Summary, ranks: int) -> list[str]:
    """What one rank compiled, not the sum over ranks that compiled side by side:
    `each of 64 ranks: 4 graphs · ... · compile 7.90 s a rank (max 8.10 s, rank 17) ·
    505.60 s of compile work over 64 ranks, side by side`, with ranges where ranks differ (the summary's
    spreads over the ranks)."""

    def spread(name: str) -> RankSpread:
        value = getattr(s, name)
        return s.per_rank.get(name) or RankSpread(value, value, value)

    def span(name: str, word: str) -> str:
        lo, hi = int(spread(name).min), int(spread(name).max)
        return plural(lo, word) if lo == hi else f"{lo}-{hi} {word}s"

    fields = [("graphs", "graph"), ("graph_breaks", "graph break"), ("recompiles", "recompile")]
    if s.kernels:
        fields.append(("kernels", "kernel"))
    same = all(spread(name).min == spread(name).max for name, _ in fields)
    counts = [span(name, word) for name, word in fields]
    counts[0] = f"{'each of ' if same else ''}{ranks} ranks: {counts[0]}"
    time = spread("compile_time_s")
    counts.append(
        f"compile {seconds(time.median)} a rank "
        f"(max {seconds(time.max)}, {time.max_rank or 'rank ?'})"
    )
    if s.total_compile_time_s is not None:
        # side by side: what holds the job is the slowest rank (said above), not the sum
        counts.append(
            f"{seconds(s.total_compile_time_s)} of compile work over {ranks} ranks, side by side"
        )
    return counts


def wrap_items(items: list[str], width: int, sep: str = " · ") -> list[str]:
    """Join items into lines of at most `width`, breaking only between items, so a count
    is never split from its word ("3 graph" / "breaks")."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(sep) + len(item) <= width:
            lines[-1] += sep + item
        else:
            lines.append(item)
    return lines


def _counts(s: Summary) -> list[str]:
    counts = [
        plural(s.graphs, "graph"),
        plural(s.graph_breaks, "graph break")
        + (f" at {plural(s.unique_graph_breaks, 'site')}" if s.graph_breaks else ""),
        plural(s.recompiles, "recompile"),
        f"compile {seconds(s.compile_time_s)}",
    ]
    if s.kernels:
        counts.insert(3, plural(s.kernels, "kernel"))
    if s.speedup:
        counts.append(f"speedup {s.speedup:.2f}x" + (" (unreliable)" if s.speedup_noisy else ""))
    return counts


def kernel_count_note(s: Summary) -> str:
    """What the kernel count counts, set beside torch's own counter where the run had one."""
    n = s.torch_kernel_count
    if n is None or n == s.kernels or not s.kernels:
        return ""
    if n == 0:
        return "Counted in the generated code; torch generated none this run (FX-graph cache)."
    return (
        f"Distinct kernels in the generated code. torch's generated_kernel_count, {n}, counts "
        "every kernel object Inductor built on the way (on CPU a loop's scalar and vector "
        "versions; fusions it tried and dropped)."
    )


def rule_text(r: Rule) -> str:
    """A rule's value against its limit, in the units the report shows them in."""
    if r.name == "fail-on-mismatch":
        said = {"random_only": "outputs differ by random numbers only",
                "compiled_closer": "compiled is the nearer to float64"}.get(r.message)  # fmt: skip
        if r.passed:
            return said or "outputs match eager"
        return "outputs differ from eager" + (
            f" (max abs err {r.value:.2e})" if r.value == r.value else ""  # NaN: not compared
        )
    if "speedup" in r.name:
        return f"{r.value:.2f}x (at least {r.limit:.2f}x)"
    value, limit = RULE_UNITS.get(r.name, lambda v: f"{v:g}"), f"{r.limit:g}"
    if r.name == "max-compile-time":  # (the measured time in 3 digits, the limit as typed;
        # under a second in ms, as the time is: a look read "997 ms (at most 0.5 s)")
        limit = f"{r.limit:g} s" if r.limit >= 1 else seconds(r.limit)
    elif r.name == "max-wait-share":
        limit = value(r.limit)  # a figure with its unit (a count's limit reads bare)
    if r.message:  # a multi-rank report's worst rank, by name
        return f"{r.message} (at most {limit})"
    return f"{value(r.value)} (at most {limit})"


def _count(word: str) -> Callable[[float], str]:
    return lambda v: f"{v:g} {word}{'s' * (v != 1)}"


# a gate rule's figure in its unit (rule_text)
RULE_UNITS: dict[str, Callable[[float], str]] = {
    "fullgraph": _count("graph-break site"),
    "max-graph-breaks": _count("graph-break site"),
    "max-recompiles": _count("recompile"),
    "max-compile-time": seconds,
    "max-wait-share": lambda v: f"{v:.0%} of its step",
    "divergence": _count("divergence finding"),
}


def verdict_lines(report: Report) -> list[str]:
    v = report.verdict
    if not v.rules:
        return []
    lines = [f"verdict: {'PASS' if v.passed else 'FAIL'}"]
    for r in v.rules:
        mark = "ok  " if r.passed else "FAIL"
        lines.append(f"  {mark} {r.name}: {rule_text(r)}")
    lines += [f"  regression: {x}" for x in v.regressions]
    lines += [f"  improved:   {x}" for x in v.improvements]
    lines += [f"  note:       {x}" for x in v.notes]
    return lines


def ranks_of(report: Report, positions: list[int]) -> str:
    """The ranks a finding of a multi-rank report was seen on (`all 64 ranks`), else ""."""
    return rank_set(report.ranks, positions) if len(report.ranks) > 1 and positions else ""


GRAPHLESS_NAMED = 3  # compiles with no graph named with their frames; more, by their ids


def graphless_words(report: Report) -> str:
    """The compiles that made no graph, in a line under the graphs' table (their ids have no
    row): '' where every compile made one."""
    if not report.graphless:
        return ""
    n = len(report.graphless)
    if n <= GRAPHLESS_NAMED:
        shown = ", ".join(
            f"{shown_id(report, g.compile_id)} {g.frame} ({where(g.file, g.line)})"
            for g in report.graphless
        )
    else:  # (a detection model's 14 made 8 lines of frames and places)
        ids = ", ".join(shown_id(report, g.compile_id) for g in report.graphless)
        shown = f"{n} compiles ({ids}; the JSON report's graphless[] names their frames)"
    one = n == 1
    it, its, runs = ("it", "its frame", "it runs") if one else ("them", "their frames", "they run")
    return (
        f"no graph from {shown}: torch traced no tensor op in {it} before {its} broke or "
        f"returned; {runs} as Python"
    )


def shown_id(report: Report, cid: str) -> str:
    """A compile id as shown: without its rank where the ranks are named beside it."""
    return re.sub(r"^r\d+:", "", cid) if len(report.ranks) > 1 else cid


SHAPES_SHOWN = 4  # a limit hit's shapes named, the first ones
# what automatic dynamic shapes do once on again (the limit's fix)
DYNAMIC_AGAIN = (
    "torch then makes a size that changes dynamic at its first change (one recompile); or "
    "mark the dimension dynamic before the call."
)


def limit_words(hit: LimitHit) -> tuple[str, list[tuple[str, str]]]:
    """A recompile-limit hit, from its fields: its headline, and its rows (label, text)."""
    at = f" at step {hit.step}" if hit.step is not None else ""
    head = (
        f"Recompile limit hit{at}: {hit.frame} at {where(hit.file, hit.line)} compiled "
        f"{plural(hit.compiles, 'graph')} (limit {hit.limit}); "
    )
    rows: list[tuple[str, str]] = []
    if hit.step is None:
        head += (
            "from then on a call that fits one of them runs it, and a call that needs a new "
            "graph runs in eager mode, unoptimised."
        )
    else:
        head += (
            f"of its {hit.cached_calls + hit.eager_calls} calls from then on, "
            f"{hit.cached_calls} ran a graph it had and {hit.eager_calls} ran in eager mode, "
            "unoptimised."
        )
        rows += [("eager", _shapes(hit.eager_shapes)), ("graphs", _shapes(hit.cached_shapes))]
        eager, cached = hit.eager_ms_per_k, hit.cached_ms_per_k
        if eager and cached:
            rows.append((
                "cost", f"a call took {ms(eager)} in eager mode and {ms(cached)} with its "
                f"graph, per 1,000 elements of its first input ({eager / cached:.2g}x; the "
                "calls' median, by the host's clock)",
            ))  # fmt: skip
    rows += [("reason", reason) for reason in hit.distinct_reasons]
    call = f" at {where(hit.compile_file, hit.compile_line)}" if hit.compile_file else ""
    if hit.static_shapes and "dynamic=False" in hit.compile_code:
        rows.append((
            "cause", f"dynamic=False{call} (`{hit.compile_code}`) turns torch's automatic "
            "dynamic shapes off: each new size is a graph of its own",
        ))  # fmt: skip
        fix = f"Drop dynamic=False{call}: {DYNAMIC_AGAIN}"
    elif hit.static_shapes:
        rows.append((
            "cause", "torch's automatic dynamic shapes were off for its compiles "
            "(torch.compile(..., dynamic=False), or torch._dynamo.config."
            "automatic_dynamic_shapes = False): each new size is a graph of its own",
        ))  # fmt: skip
        fix = (
            "Compile without dynamic=False (or set automatic_dynamic_shapes back to True): "
            + DYNAMIC_AGAIN
        )
    else:
        fix = "Remove the cause above; raising torch._dynamo.config.recompile_limit only hides it."
    rows.append(("fix", fix))
    rows.append((
        "or fail", "to stop rather than run in eager mode: "
        'torch.compiler.set_stance("fail_on_recompile") once warmed up, or '
        "torch._dynamo.config.fail_on_recompile_limit_hit = True",
    ))  # fmt: skip
    return head, rows


def _shapes(shapes: list[str]) -> str:
    """`(8x48, 8), (8x52, 8), ... (9 shapes)`: the shapes of a call's tensors, each once."""
    shown = ", ".join(f"({x})" if "," in x else x for x in shapes[:SHAPES_SHOWN])
    more = f", ... ({len(shapes)} shapes)" if len(shapes) > SHAPES_SHOWN else ""
    return (shown + more) if shapes else "none"
