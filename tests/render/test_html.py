"""The HTML report (`compilediag.render.html`).

Reports are real ones, made by the CLI in-process and read back from their JSON (the
contract a saved report is rendered from). Escaping, self-containment and independence
from torch always run; the browser tests open the file in Debian's chromium through
Playwright, and skip when either is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from compilediag.cli.app import app
from compilediag.render.html import render_html
from compilediag.report.model import Report
from tests.conftest import ROOT, SAMPLES, fixture_trace, run_json

PLANTED = "<script>window.__pwned=1</script>"
PLANTED_MODEL = f'''\
import torch
from torch import nn


class Planted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        print("{PLANTED}")  # a graph break: this line is reported as its site
        return h * 2


def get_model():
    return Planted()


def get_inputs():
    return (torch.randn(2, 8),)
'''
PLANTED_LINE = 12
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def cli_report(*args: str) -> Report:
    result = CliRunner().invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return Report.from_dict(json.loads(result.stdout))


# --- reports (module-scoped: an explain or recompiles run starts torch in a worker) -------


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Report:
    model = tmp_path_factory.mktemp("planted") / "planted.py"
    model.write_text(PLANTED_MODEL)
    return cli_report("explain", str(model), "--backend", "eager", "--no-timings")


@pytest.fixture(scope="module")
def traced() -> Report:
    return cli_report("report", str(fixture_trace("graph_breaks.eager")))


@pytest.fixture(scope="module")
def kernels() -> Report:
    return cli_report("report", str(fixture_trace("transformer_block.inductor")))


@pytest.fixture(scope="module")
def limit() -> Report:
    """A sweep of 3 calls; 8 recompiles of one frame, then its recompile limit."""
    return cli_report(
        "recompiles", str(SAMPLES / "recompile_limit.py"), "--backend", "eager",
        "--shapes", "4x16,8x16,16x16",
    )  # fmt: skip


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """Two ranks that compiled different models: they diverge."""
    folder = tmp_path_factory.mktemp("ranks")
    shutil.copy(fixture_trace("graph_breaks.eager"), folder / "trace_rank_0_a.log")
    shutil.copy(fixture_trace("batch_sweep.eager"), folder / "trace_rank_1_b.log")
    return cli_report("report", str(folder))


REPORTS = ["planted", "traced", "kernels", "limit", "ranks"]


@pytest.fixture(params=REPORTS)
def any_report(request: pytest.FixtureRequest) -> Report:
    return request.getfixturevalue(request.param)


# --- without a browser --------------------------------------------------------------------


class Links(HTMLParser):
    """Every tag and every URL-bearing attribute of a document."""

    URL_ATTRS = {"href", "src", "srcset", "action", "formaction", "poster", "data", "background"}

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.urls: list[tuple[str, str, str]] = []  # tag, attribute, value
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"
        for name, value in attrs:
            if name in self.URL_ATTRS:
                self.urls.append((tag, name, value or ""))
            if name == "style":
                self.styles.append(value or "")

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def parse(html: str) -> Links:
    p = Links()
    p.feed(html)
    return p


def test_planted_script_is_text(planted: Report) -> None:
    (gb,) = planted.graph_breaks
    assert (Path(gb.file).name, gb.line) == ("planted.py", PLANTED_LINE)
    assert PLANTED in gb.code
    html = render_html(planted)
    assert PLANTED not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html  # shown, as text
    assert [t for t, _ in parse(html).tags].count("script") == 1  # ours, and only ours


def test_hostile_report_fields_are_text(traced: Report) -> None:
    """Everything in a report is data: a JSON report from anywhere renders no markup."""
    evil = '<img src=x onerror="window.__x=1">'
    data = traced.to_dict()
    finding = {"kind": evil, "message": evil, "severity": evil, "file": evil, "fix": evil}
    data["errors"] = [finding]
    data["notes"] = [finding]
    data["target"]["path"] = f"/m/{evil}.py"
    data["divergence"] = [finding]
    gb = data["graph_breaks"][0]
    for key in ("file", "code", "reason", "explanation", "suggestion", "gb_id", "cause"):
        gb[key] = f"{evil} `{evil}`"
    gb["hints"] = [evil]
    gb["context"] = [{"line": gb["line"], "code": evil}]
    gb["doc_url"] = "javascript:alert(1)"
    data["graph_breaks"][1]["doc_url"] = 'https://example.org/" onclick="alert(1)'
    html = render_html(Report.from_dict(data))
    assert "<img" not in html and "onerror=" not in html.replace("onerror=&#34;", "")
    assert "&lt;img src=x onerror=" in html
    hrefs = [v for _, name, v in parse(html).urls if name == "href"]
    assert not any(h.startswith("javascript:") or "onclick" in h for h in hrefs), hrefs


def test_self_contained(any_report: Report) -> None:
    """No request leaves the file: no src, no stylesheet link, no CSS url(); the only
    links out are torch's graph-break docs."""
    html = render_html(any_report)
    doc = parse(html)
    docs = {gb.doc_url for gb in any_report.graph_breaks if gb.doc_url}
    for tag, name, value in doc.urls:
        if name == "href" and tag == "a":
            assert value.startswith("#") or value in docs, value
        else:
            assert value.startswith("data:"), (tag, name, value)
    assert not [t for t, a in doc.tags if t in ("link", "iframe", "object", "embed", "base")]
    css = "\n".join(doc.styles)
    assert "@import" not in css and not re.search(r"url\(\s*['\"]?(https?:)?//", css)
    assert not [a for t, a in doc.tags if t == "script" and a.get("src")]
    csp = [
        a for t, a in doc.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp and "default-src 'none'" in (csp[0]["content"] or "")
    if docs:
        assert any(value in docs for _, _, value in doc.urls)


def test_sections_in_order(limit: Report, ranks: Report) -> None:
    html = render_html(limit)
    # the summary, then the timings (a run's job: its verdict and step), then the gate (#58)
    order = ["summary", "timings", "verdict", "notes", "graph-breaks", "recompiles",
             "limit-hits", "calls", "graphs", "compile-time"]  # fmt: skip
    at = [html.index(f'id="{s}"') for s in order]
    assert at == sorted(at)
    html = render_html(ranks)
    at = [
        html.index(f'id="{s}"')
        for s in ("summary", "verdict", "graph-breaks", "recompiles", "ranks")
    ]
    assert at == sorted(at)
    assert 'id="kernels"' not in html and 'id="verified-fixes"' not in html


def test_the_gate_follows_the_summary(traced: Report) -> None:
    """The page opens with the summary (and a run's job); the gate, so named, after them
    (#58: before, a box titled "Verdict" that held the gate's "NO GATE" came first). The
    badge in the header still says PASS or FAIL."""
    data = traced.to_dict()
    data["verdict"] = {
        "passed": False,
        "rules": [{"name": "max_graph_breaks", "limit": 0, "value": 3, "passed": False}],
        "regressions": ["new break site graph_breaks.py:22"],
        "improvements": ["recompiles 2 -> 0"],
    }
    html = render_html(Report.from_dict(data))
    first = html.index('id="verdict"')
    assert html.index('id="summary"') < first and "<h2>Gate" in html and "<h2>Verdict" not in html
    assert html.index("verdict-badge fail") < html.index('id="summary"')
    for text in (
        "FAIL",
        "max_graph_breaks",
        "new break site graph_breaks.py:22",
        "recompiles 2 -&gt; 0",
    ):
        assert first <= html.index(text, first), text


def test_fields_that_may_be_absent(kernels: Report, traced: Report) -> None:
    """Verified fixes render when the report has them, and are left out when it has not."""
    html = render_html(kernels)
    assert "Verified fixes" not in html
    kernels = Report.from_dict(kernels.to_dict())  # a copy: the fixture is shared
    kernels.verified_fixes = [  # type: ignore[attr-defined]
        {"site": "graph_breaks.py:22", "fix": "guard the `print`", "graph_breaks": [3, 2]},
        "a plain <b>line</b>",
    ]
    html = render_html(kernels)
    assert 'id="verified-fixes"' in html and "<code>print</code>" in html
    assert "a plain &lt;b&gt;line&lt;/b&gt;" in html
    # the lines around a break site, with the site itself marked
    gb = traced.graph_breaks[0]
    html = render_html(traced)
    if gb.context:
        assert html.count('class="line mark"') == len(traced.graph_breaks)


def test_renders_without_torch_anywhere(tmp_path: Path, limit: Report) -> None:
    """A saved JSON report renders the same in another folder, with torch unimportable."""
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(limit.to_dict()))
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import json\n"
        "from compilediag.report.model import Report\n"
        "from compilediag.render.html import render_html\n"
        "r = Report.from_dict(json.load(open(sys.argv[1])))\n"
        "sys.stdout.write(render_html(r))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(saved)], capture_output=True, text=True, cwd=tmp_path,
        env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == render_html(Report.from_dict(json.loads(saved.read_text())))


def test_timings_and_compile_phases_as_charts(traced: Report) -> None:
    data = traced.to_dict()
    data["timings"] = {
        "eager_ms": {"median": 0.04, "iqr": 0.01, "n": 100},
        "compiled_ms": {"median": 0.08, "iqr": 0.02, "n": 100},
        "first_call_s": 0.7, "speedup": 0.5, "outputs_match": False, "max_abs_err": 0.25,
        "repeat": 100, "calls_per_block": 6, "warmup": 20, "method": "perf_counter",
        "notes": ["3 graph breaks split the model into 4 graphs"],
    }  # fmt: skip
    html = render_html(Report.from_dict(data))
    doc = parse(html)
    assert [t for t, _ in doc.tags].count("rect") == 2  # eager and compiled
    assert "0.040 ms (IQR 0.010)" in html and "0.080 ms (IQR 0.020)" in html
    assert "0.50×" in html and "DIFFER from eager" in html
    assert "3 graph breaks split the model into 4 graphs" in html
    ct = traced.compile_time
    assert ct is not None and ct.total_s > 0
    assert 'class="stack"' in html and 'class="seg p-dynamo"' in html


# --- in a browser -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Opened:
    def __init__(self, browser, report: Report, folder: Path) -> None:
        self.file = folder / "report.html"
        self.file.write_text(render_html(report), encoding="utf-8")
        self.url = self.file.as_uri()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.context = browser.new_context(viewport={"width": 1280, "height": 800})
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(self.url)
        self.page.wait_for_load_state("load")


@pytest.fixture
def opened(browser, tmp_path: Path):
    pages: list[Opened] = []

    def open_(report: Report) -> Opened:
        pages.append(Opened(browser, report, tmp_path))
        return pages[-1]

    yield open_
    for o in pages:
        o.context.close()


def test_browser_planted_script_does_not_run(opened, planted: Report) -> None:
    o = opened(planted)
    page = o.page
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("script").count() == 1
    site = page.locator("details.break pre.code .line.mark")
    assert site.count() == 1 and site.is_visible()
    assert PLANTED in site.inner_text()
    assert page.get_by_text(PLANTED, exact=False).first.is_visible()
    assert o.errors == []


def test_browser_every_finding_is_there(opened, any_report: Report) -> None:
    o = opened(any_report)
    page = o.page
    assert o.errors == [], o.errors
    assert o.requests == [o.url], o.requests  # nothing but the file itself
    for gb in any_report.graph_breaks:
        el = page.locator(f'details.break[data-site="{gb.file}:{gb.line}"]')
        assert el.count() == 1, (gb.file, gb.line)
        summary = el.locator("> summary")
        assert summary.is_visible() and f"{Path(gb.file).name}:{gb.line}" in summary.inner_text()
    for r in any_report.recompiles:
        el = page.locator(f'li.recompile[data-compile-id="{r.compile_id}"]')
        assert el.count() == 1 and el.is_visible(), r.compile_id
        assert r.failed_guard in el.inner_text()
    assert page.locator(".finding.limit").count() == len(any_report.recompile_limit_hits)
    assert page.locator("tr.call").count() == len(any_report.calls)
    assert page.locator("tbody.kernel").count() == len(any_report.kernels)
    assert page.locator("tr.rank").count() == len(any_report.rank_groups)
    assert page.locator("li.divergence").count() == len(any_report.divergence)
    if any_report.ranks:
        assert page.locator("td.diff").count() > 0


def test_browser_sections_collapse_and_open(opened, traced: Report) -> None:
    page = opened(traced).page
    graphs = page.locator("details#graphs")
    table = graphs.locator("table")
    assert graphs.get_attribute("open") is None and not table.is_visible()
    graphs.locator("> summary").click()
    assert table.is_visible()
    hints = page.locator("details.hints").first
    assert not hints.locator("li").first.is_visible()
    hints.locator("summary").click()
    assert hints.locator("li").first.is_visible()
    page.locator("details#graph-breaks > summary").click()  # a whole section closes too
    assert not page.locator("details.break").first.is_visible()


def test_browser_search_filters(opened, traced: Report) -> None:
    page = opened(traced).page
    breaks = page.locator("details.break")
    assert breaks.count() == 3
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "search"
    page.keyboard.type("data-dependent")
    visible = [b.get_attribute("data-site") for b in breaks.all() if b.is_visible()]
    assert [s.rsplit(":", 1)[1] for s in visible] == ["24"]
    assert not page.locator("details#recompiles").is_visible()  # nothing there matches
    assert page.locator("#search-count").inner_text().startswith("1 of ")
    # a match inside a collapsed section opens it
    page.fill("#search", "3/0")
    assert page.locator("details#graphs tr.graph", has_text="3/0").is_visible()
    page.fill("#search", "no such text anywhere")
    assert page.locator("#no-match").is_visible()
    page.fill("#search", "")
    assert all(b.is_visible() for b in breaks.all())
    assert page.locator("details#graphs").get_attribute("open") is None  # restored


def test_browser_print_expands_everything(opened, limit: Report) -> None:
    page = opened(limit).page
    collapsed = page.locator("details:not([open])")
    assert collapsed.count() > 0
    page.emulate_media(media="print")
    for d in collapsed.all():
        assert d.locator("> :not(summary)").first.is_visible()
    assert not page.locator("#search").is_visible()


# --- the "no gate" hint: the options of the command that made the report (#53) -------------

GATE_JOB = """\
import torch
from torch import nn

model = torch.compile(nn.Linear(8, 4), backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
"""


def _hint(html: str) -> str:
    (hint,) = re.findall(r"NO GATE</span>(.*?)</p>", html, re.S)
    return " ".join(re.sub(r"<[^>]+>", "", hint).split())


@pytest.mark.parametrize(
    ("command", "shown", "not_shown"),
    [
        (["report", str(fixture_trace("graph_breaks.eager"))],
         ["--fullgraph", "--max-graph-breaks N", "--max-compile-time X", "--baseline report.json"],
         ["--min-speedup", "--fail-on-mismatch", "--fail-on-divergence"]),
        (["run", "--", sys.executable, "job.py"],
         ["--fullgraph", "--max-recompiles N", "--baseline report.json"],
         ["--min-speedup", "--fail-on-mismatch"]),
        (["explain", str(SAMPLES / "clean_mlp.py"), "--backend", "eager", "--repeat", "2"],
         ["--fullgraph", "--min-speedup X", "--fail-on-mismatch", "--baseline report.json"],
         ["--fail-on-divergence"]),
        (["recompiles", str(SAMPLES / "clean_mlp.py"), "--shapes", "2x32,4x32"],
         ["--max-recompiles N", "--max-compile-time X"],
         ["--fullgraph", "--min-speedup", "--baseline"]),
    ],
)  # fmt: skip
def test_the_no_gate_hint_offers_only_options_its_command_takes(
    tmp_path: Path, command: list[str], shown: list[str], not_shown: list[str]
) -> None:
    """Before: every report offered --min-speedup, which `run` and `report` reject. Each
    option offered is in that command's --help."""
    from tests.conftest import run_cli

    (tmp_path / "job.py").write_text(GATE_JOB)
    page = tmp_path / "report.html"
    proc = run_cli(command[0], "--html", str(page), *command[1:], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    hint = _hint(page.read_text())
    assert hint.startswith("No budget was set, so nothing can fail. For CI, add "), hint
    for option in shown:
        assert option in hint, (option, hint)
    for option in not_shown:
        assert option not in hint, (option, hint)
    accepted = run_cli(command[0], "--help", env={"COLUMNS": "200"}).stdout
    for option in re.findall(r"--[a-z-]+", hint):
        assert re.search(rf"{option}\b", accepted), (command[0], option)


def test_a_report_made_in_process_points_to_the_test_helper(tmp_path: Path) -> None:
    data = cli_report("report", str(fixture_trace("graph_breaks.eager"))).to_dict()
    data["environment"]["source"] = "in-process"
    hint = _hint(render_html(Report.from_dict(data)))
    assert "--" not in hint and "compilediag.testing.assert_compiles(" in hint, hint


def test_the_step_picture_is_drawn_at_the_steps_scale_and_a_one_off_is_cut() -> None:
    """#68: a one-off 4.37 s evaluation set the picture's scale, and every step bar was a
    sliver. The steps set it now: the longest step spans the whole width, and the evaluation
    is drawn cut at that width with its time written beside it."""
    import re

    from compilediag.render.step_picture import WIDTH, step_picture
    from compilediag.report.model import (
        Breakdown,
        Environment,
        Report,
        Runtime,
        StepWork,
        TargetInfo,
        Timings,
    )

    report = Report(tool={}, environment=Environment(), target=TargetInfo())
    step = Breakdown(call_ms=2.0, in_graphs_ms=0.5, between_graphs_ms=0.0, outside_ms=0.2,
                     calls=5, backward_ms=0.8, optimizer_ms=0.5)  # fmt: skip
    report.timings = Timings(breakdown=step)
    report.runtime = Runtime(command=["python", "train.py"], window=[3, 7])
    report.runtime.other_work = [StepWork("evaluation", "evaluate", "train.py", 40, ms=4370.0)]
    svg = str(step_picture(report))
    assert float(re.search(r'data-scale-ms="([^"]+)"', svg)[1]) == 2.0
    widths: dict[str, float] = {}
    for row, width in re.findall(r'data-row="([^"]+)"[^>]*width="([^"]+)"', svg):
        widths[row] = widths.get(row, 0.0) + float(width)
    assert widths["a step"] == pytest.approx(WIDTH, abs=0.01)
    assert widths["evaluation"] == pytest.approx(WIDTH, abs=0.01)
    assert "4.37 s ⫽ cut: not to scale" in svg


def test_one_cause_is_one_block_with_its_fix_once(tmp_path: Path) -> None:
    """#76 (6): the masked decoder compiled with dynamic=False over 12 requests recompiles
    its frame 7 times for one cause (the sizes of input_ids), each with its own words of
    what else changed (attention_mask's sizes): the page folds them into one block, as the
    table does: each recompile listed, the fix said once (before: 7 times)."""
    import html as html_lib

    from compilediag.render.views import recompile_causes
    from compilediag.report.model import Report

    serving = ROOT / "tests" / "fixtures" / "serving"
    stream = tmp_path / "twelve.jsonl"
    stream.write_text("".join((serving / "decoder_stream.jsonl").read_text().splitlines(True)[:12]))
    data, proc = run_json(
        "recompiles", str(serving / "decoder.py"), "--requests", str(stream), "--no-dynamic",
        "--backend", "eager", "--no-numerics", "--no-cold-start",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = Report.from_dict(data)
    (cause,) = recompile_causes(report)
    assert len(cause.items) == len(data["recompiles"]) > 1
    assert len({r["suggestion"] for r in data["recompiles"]}) > 1  # each its own words
    page = html_lib.unescape(render_html(report))
    section = page.split('id="recompiles"', 1)[1].split('<details class="section', 1)[0]
    assert section.count('class="finding recompile') == len(cause.items)
    assert section.count('<span class="label">fix') == 1 + len(cause.more)
    assert section.count("A fix has to cover each of them") == 1


def test_what_explains_own_run_took_is_in_the_html_as_in_the_table(planted: Report) -> None:
    """explain's `took` row (its own run, by phase: #74) was the table's alone."""
    from markupsafe import escape

    from compilediag.render.window_words import took_words

    assert planted.took_s, "explain records what its run took"
    said = took_words(planted.took_s)
    assert f'<dd class="muted took">{escape(said)}</dd>' in render_html(planted)
