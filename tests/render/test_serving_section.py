"""The serving section in each format, from a report `compilediag recompiles
sample_models/padded_classifier.py --no-dynamic --max-recompiles-after-warmup 0 --format
json` wrote (tests/fixtures/reports/serving_classifier_torch2.13.json, torch 2.13 on this
machine's CPU): every figure as the report's fields hold it, in the table, the markdown
and the HTML alike."""

from __future__ import annotations

import json

from compilediag.render.html import render_html
from compilediag.render.markdown import render_markdown
from compilediag.render.table.report import render_recompiles
from compilediag.render.table.serving import COMPILES_SHOWN
from compilediag.report.model import Report
from compilediag.report.words import ms, seconds
from tests.conftest import ROOT

SAVED = ROOT / "tests" / "fixtures" / "reports" / "serving_classifier_torch2.13.json"


def _figures(data: dict) -> list[str]:
    s = data["serving"]
    hit = s["limit_hits"][0]
    out = [
        f"{s['requests']} requests, {s['distinct_shapes']} distinct shapes",
        f"hit the recompile limit ({hit['limit']}) at request {hit['request']}",
        ", ".join(map(str, hit["eager_requests"])),
        f"{seconds(s['cold_start_s'])} empty caches",
        f"{seconds(s['artifacts_s'])} cache artifacts",
        "load_cache_artifacts",
    ]
    for p in s["plans"]:
        out.append(ms(p["latency"]["median_ms"]))
    # the stream is named by its counts (#75): its first compiles one by one, then the rest
    for c in s["compiles"][:COMPILES_SHOWN]:
        out.append(f"request {c['request']} compiled {c['compile_id']}")
    rest = s["compiles"][COMPILES_SHOWN:]
    assert rest  # the saved stream compiled more than are named
    out.append(f"{len(rest)} more requests compiled, requests {rest[0]['request']} to")
    return out


def test_each_format_says_the_reports_figures() -> None:
    data = json.loads(SAVED.read_text())
    report = Report.from_dict(data)
    table = render_recompiles(report, width=200)
    markdown = render_markdown(report)
    html = render_html(report).replace("&#39;", "'").replace("&quot;", '"')
    for name, text in (("table", table), ("markdown", markdown), ("html", html)):
        for figure in _figures(data):
            assert figure in text, (name, figure)
        assert "maybe_mark_dynamic" in text, name  # the plan's code
    assert "the most in any of 3 fresh processes" in table


def test_the_plan_comes_before_the_calls_and_the_stream_is_counted() -> None:
    """#75 (7): in the terminal the serving section (its plan, its code) comes before the
    table of calls; no compile past the first few is named one by one."""
    data = json.loads(SAVED.read_text())
    table = render_recompiles(Report.from_dict(data), width=200)
    assert table.index("Serving") < table.index("the plan as code") < table.index("Calls")
    last = data["serving"]["compiles"][-1]
    assert f"request {last['request']} compiled {last['compile_id']}" not in table
