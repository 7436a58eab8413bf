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
    for c in s["compiles"]:
        out.append(f"request {c['request']} compiled {c['compile_id']}")
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
