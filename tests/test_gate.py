"""The CI gate: budgets, baseline comparison, JUnit, GitHub annotations, config, CSV,
and the pytest helper."""

from __future__ import annotations

import copy
import csv
import io
import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from compilediag.analysis.build import build_report
from compilediag.gate import Budgets, evaluate
from compilediag.harness.worker_types import WorkerResult
from compilediag.render import render
from compilediag.report.model import GraphBreak, Report, Stat, TargetInfo, Timings
from compilediag.report.words import seconds
from compilediag.trace.parse import parse_path
from tests.conftest import SAMPLES, fixture_trace, run_cli


def breaks_report():
    return build_report(
        parse_path(fixture_trace("graph_breaks.eager")),
        WorkerResult(),
        TargetInfo(path="sample_models/graph_breaks.py"),
    )


def test_budget_rules_pass_and_fail_exactly_at_their_limits() -> None:
    r = breaks_report()  # 3 break sites, 0 recompiles
    assert evaluate(r, Budgets(max_graph_breaks=3)).passed
    assert not evaluate(r, Budgets(max_graph_breaks=2)).passed
    assert not evaluate(r, Budgets(fullgraph=True)).passed
    assert evaluate(r, Budgets(max_recompiles=0)).passed
    (rule,) = evaluate(r, Budgets(max_graph_breaks=2)).rules
    assert (rule.name, rule.limit, rule.value, rule.passed) == ("max-graph-breaks", 2, 3, False)


def test_speedup_and_output_rules() -> None:
    r = breaks_report()
    r.timings = Timings(
        eager_ms=Stat(2.0, 0.1),
        compiled_ms=Stat(1.0, 0.1),
        speedup=2.0,
        outputs_match=True,
        max_abs_err=0.0,
    )
    r.summary.speedup = 2.0
    assert evaluate(r, Budgets(min_speedup=2.0, fail_on_mismatch=True)).passed
    assert not evaluate(r, Budgets(min_speedup=2.01)).passed
    r.timings.outputs_match = False
    assert not evaluate(r, Budgets(fail_on_mismatch=True)).passed


@pytest.mark.parametrize(
    ("verdict", "passed"),
    [("match", True), ("compiled_closer", True), ("random_only", True), ("differ", False)],
)
def test_a_mismatch_that_is_random_numbers_or_eagers_rounding_passes(
    verdict: str, passed: bool
) -> None:
    """The gate reads the numerics' verdict where there is one (the dtype table's outputs_match
    says DIFFER for each of these but the first)."""
    from compilediag.report.numerics import Numerics, OutputCloseness

    r = breaks_report()
    r.timings = Timings(outputs_match=verdict == "match", max_abs_err=0.5)
    r.numerics = Numerics(verdict, outputs=[OutputCloseness("out[0]", "float32", [2], 0.5)])
    v = evaluate(r, Budgets(fail_on_mismatch=True))
    assert v.passed is passed
    (rule,) = [x for x in v.rules if x.name == "fail-on-mismatch"]
    assert rule.value == 0.5


def test_baseline_line_shift_passes_new_break_fails_removed_break_improves() -> None:
    base = breaks_report()
    shifted = copy.deepcopy(base)
    for b in shifted.graph_breaks:
        b.line += 3  # an edit above the model moved every line
    v = evaluate(shifted, Budgets(baseline=base))
    assert v.passed and not v.regressions
    worse = copy.deepcopy(base)
    worse.graph_breaks.append(
        GraphBreak(
            file="/x/graph_breaks.py",
            line=40,
            code='print("new")',
            reason="Failed to trace builtin operator",
        )
    )
    worse.summary.unique_graph_breaks += 1
    v = evaluate(worse, Budgets(baseline=base))
    assert not v.passed
    assert any("new graph break at /x/graph_breaks.py:40" in x for x in v.regressions)
    sites = (base.summary.unique_graph_breaks, len({(b.file, b.line) for b in worse.graph_breaks}))
    assert f"graph-break sites went up: {sites[0]} → {sites[1]}" in v.regressions, v.regressions
    # JUnit fails that site's case alone, read from the verdict's sites (not its words)
    worse.verdict = v
    cases = ET.fromstring(render(worse, "junit")).iter("testcase")
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    sites = [f for f in failed if not f.startswith("baseline:")]  # the rules failed too
    assert sites == ["/x/graph_breaks.py:40"], failed
    better = copy.deepcopy(base)
    better.graph_breaks.pop()
    better.summary.unique_graph_breaks -= 1
    v = evaluate(better, Budgets(baseline=base))
    assert v.passed and any("graph break gone" in x for x in v.improvements)


def test_baseline_speedup_tolerance() -> None:
    base = breaks_report()
    base.summary.speedup = 2.0
    now = copy.deepcopy(base)
    now.summary.speedup = 1.85  # -7.5%: inside the default 10%
    assert evaluate(now, Budgets(baseline=base)).passed
    now.summary.speedup = 1.7
    v = evaluate(now, Budgets(baseline=base))
    assert not v.passed and any("speed-up fell" in x for x in v.regressions)


def test_junit_is_well_formed_and_names_the_lines() -> None:
    r = breaks_report()
    r.verdict = evaluate(r, Budgets(fullgraph=True))
    root = ET.fromstring(render(r, "junit"))
    assert root.tag == "testsuites"
    (suite,) = root
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == 1 + 3
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("failures")) == len(failed) == 4
    for c in cases:
        assert c.get("name") and c.get("classname")
    lines = {c.get("line") for c in cases if c.get("classname") == "compilediag.graph_breaks"}
    assert lines == {"22", "24", "26"}
    # without a rule forbidding breaks, the sites are reported but pass
    r.verdict = evaluate(r, Budgets(max_graph_breaks=5))
    suite = ET.fromstring(render(r, "junit"))[0]
    assert suite.get("failures") == "0"


def test_csv_has_a_row_per_finding() -> None:
    r = breaks_report()
    rows = list(csv.DictReader(io.StringIO(render(r, "csv"))))
    assert [row["kind"] for row in rows] == ["graph_break"] * 3
    assert sorted(int(row["line"]) for row in rows) == [22, 24, 26]


def write_model(path: Path, extra_top: str = "", extra_forward: str = "") -> None:
    body = f"""\
{extra_top}import torch


class M(torch.nn.Module):
    def forward(self, x):
        y = x.sin()
        print("one")
        {extra_forward}
        return y.cos()


def get_inputs():
    return (torch.randn(3),)
"""
    path.write_text(body)


def test_baseline_end_to_end(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    write_model(model)
    base = run_cli("explain", str(model), "--backend", "eager", "--no-timings", "--format", "json")
    (tmp_path / "baseline.json").write_text(base.stdout)
    write_model(model, extra_top="# a comment\n# another\n\n")  # lines shift by 3

    def against_baseline():
        return run_cli(
            "explain", str(model), "--backend", "eager", "--no-timings",
            "--baseline", str(tmp_path / "baseline.json"),
        )  # fmt: skip

    same = against_baseline()
    assert same.returncode == 0, same.stdout + same.stderr
    write_model(model, extra_forward='print("two")')
    worse = against_baseline()
    assert worse.returncode == 1
    assert "regression: new graph break at" in worse.stdout


def test_github_annotations_on_a_breaking_sample() -> None:
    env_run = run_cli(
        "explain", "sample_models/graph_breaks.py", "--backend", "eager", "--no-timings", "--fullgraph",
        "--format", "json", env={"GITHUB_ACTIONS": "true"},
    )  # fmt: skip
    assert env_run.returncode == 1
    json.loads(env_run.stdout)  # stdout stays the report alone
    notes = [line for line in env_run.stderr.splitlines() if line.startswith("::")]
    for line in (22, 24, 26):
        assert any(
            n.startswith(
                f"::error file=sample_models/graph_breaks.py,line={line},title=graph break::"
            )
            for n in notes
        )
    assert notes[-1].startswith(
        "::error title=compilediag gate::fullgraph 3 graph-break sites (at most 0)"
    )


def test_junit_file_and_config_in_pyproject(tmp_path: Path) -> None:
    write_model(tmp_path / "model.py")
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [tool.compilediag]
        model = "model.py"
        backend = "eager"
        fullgraph = true
        """)
    )
    proc = run_cli("explain", "--no-timings", "--junit", str(tmp_path / "out.xml"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "model.py:7" in proc.stdout and "eager/default" in proc.stdout  # the file's backend
    suite = ET.parse(tmp_path / "out.xml").getroot()[0]
    assert suite.get("failures") == "2"  # the fullgraph rule and the one site
    mine = run_cli(
        "explain", "--no-timings", "--backend", "aot_eager", "--format", "json", cwd=tmp_path
    )
    assert json.loads(mine.stdout)["environment"]["backend"] == "aot_eager", "the option wins"
    (tmp_path / "pyproject.toml").write_text("[tool.compilediag]\nmodle = 'x.py'\n")
    bad = run_cli("explain", cwd=tmp_path)
    assert bad.returncode == 2 and "unknown keys: modle" in bad.stderr


def test_assert_compiles_helper() -> None:
    import importlib.util

    import torch

    from compilediag.testing import assert_compiles

    def load(name):
        spec = importlib.util.spec_from_file_location(f"h_{name}", SAMPLES / f"{name}.py")
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        return m

    clean = load("clean_mlp")
    report = assert_compiles(clean.get_model(), clean.get_inputs())
    assert report.summary.graphs == 1
    breaking = load("graph_breaks")
    with pytest.raises(AssertionError) as info:
        assert_compiles(breaking.get_model(), breaking.get_inputs())
    message = str(info.value)
    assert "graph_breaks.py:22" in message and "graph_breaks.py:24" in message
    assert "max-graph-breaks: 3 graph-break sites (at most 0)" in message
    assert torch._dynamo.utils.counters is not None


def _recompiling() -> Report:
    """A report of a recorded trace whose frame recompiles (a batch sweep)."""
    return build_report(
        parse_path(fixture_trace("batch_sweep.eager")),
        WorkerResult(),
        TargetInfo(path="sample_models/changing_batch.py"),
    )


def test_a_baseline_survives_reworded_advice() -> None:
    """The same findings with compilediag's words for them changed (the failed guard in
    words, the fixes) are no regression; a recompile the baseline lacked still is."""
    base, now = _recompiling(), _recompiling()
    assert now.recompiles, "the fixture recompiles"
    for r in base.recompiles:
        r.failed_guard = "reworded: " + r.failed_guard.upper()
        r.failed_guards = [r.failed_guard]
        r.suggestion = "other advice"
    for b in base.graph_breaks:
        b.suggestion = "other advice"
    v = evaluate(now, Budgets(baseline=base))
    assert v.passed and v.regressions == [], v.regressions
    fewer = _recompiling()
    fewer.recompiles = fewer.recompiles[:-1]
    v = evaluate(now, Budgets(baseline=fewer))
    assert any(x.startswith("new recompile reason") for x in v.regressions)


def test_a_renamed_file_is_matched_by_code_and_said(tmp_path: Path) -> None:
    """Look 26: a fixed copy of main.py, renamed, read its recompile as both a new reason
    (a regression, exit 1) and one gone. The same break site and recompile reason in a file
    of another name are one, said once, and pass."""
    model = tmp_path / "model.py"
    write_model(model)
    base = run_cli("explain", str(model), "--backend", "eager", "--no-timings", "--format", "json")
    (tmp_path / "baseline.json").write_text(base.stdout)
    renamed = tmp_path / "model_fixed.py"
    write_model(renamed, extra_top="# fixed\n")
    proc = run_cli(
        "explain", str(renamed), "--backend", "eager", "--no-timings",
        "--baseline", str(tmp_path / "baseline.json"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "regression:" not in proc.stdout and "improved:" not in proc.stdout, proc.stdout
    assert (
        "note: the baseline's model.py is model_fixed.py here: 1 break site matched there by "
        "code and reason, not by the file's name"
    ) in " ".join(proc.stdout.split()), proc.stdout
    # a recompile reason alike, from a recorded trace
    base_r, now = _recompiling(), _recompiling()
    assert now.recompiles and not now.graph_breaks
    for r in base_r.recompiles:  # a forward of the user's (torch before 2.12 names it)
        r.file = "/x/main.py"
    for r in now.recompiles:
        r.file = "/x/main_fixed.py"
    v = evaluate(now, Budgets(baseline=base_r))
    assert v.passed and v.regressions == [] and v.improvements == [], v
    n = len({(r.frame, r.failed_guard) for r in now.recompiles})
    assert v.notes == [
        f"the baseline's main.py is main_fixed.py here: {n} recompile reason"
        f"{'s' * (n != 1)} matched there by code and reason, not by the file's name"
    ], v.notes


def test_a_schema_1_report_renders_with_its_gpu_time() -> None:
    """Schema 1 called the GPU time `timings.device`; such a saved report still loads."""
    from compilediag.render import render
    from compilediag.report.model import DeviceTime, Report

    r = breaks_report()
    r.timings = Timings(
        eager_ms=Stat(2.0, 0.1), compiled_ms=Stat(1.0, 0.1), speedup=2.0, bound="GPU-bound",
        device_ms=DeviceTime(eager_ms=1.5, compiled_ms=0.5, method="cuda graph replay"),
    )  # fmt: skip
    old = r.to_dict()
    old["schema_version"] = 1
    old["timings"]["device"] = old["timings"].pop("device_ms")
    loaded = Report.from_dict(json.loads(json.dumps(old)))
    assert loaded.timings is not None and loaded.timings.device_ms is not None
    assert loaded.timings.device_ms.compiled_ms == 0.5
    assert "GPU time" in render(loaded, "table", width=100)


def test_the_compile_time_budget_judges_torchs_compile_time(tmp_path: Path) -> None:
    """A gate rule declared once (gate.GATE_RULES) is an option, a config key and a JUnit
    case: the budget judges the compile time torch's metrics sum to, at its limit."""
    trace = str(fixture_trace("graph_breaks.eager"))
    report = json.loads(run_cli("report", trace, "--format", "json").stdout)
    spent = report["summary"]["compile_time_s"]
    assert spent > 0
    under = run_cli("report", trace, "--max-compile-time", str(spent), "--format", "json")
    assert under.returncode == 0, under.stderr
    (rule,) = json.loads(under.stdout)["verdict"]["rules"]
    assert (rule["name"], rule["limit"], rule["value"]) == ("max-compile-time", spent, spent)
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.compilediag]\nmax_compile_time = {spent / 2}\n"
    )
    junit = tmp_path / "out.xml"
    over = run_cli("report", trace, "--junit", str(junit), cwd=tmp_path)
    assert over.returncode == 1, over.stderr
    cases = [c.get("name", "") for c in ET.parse(junit).getroot().iter("testcase")]
    assert any("max-compile-time" in c for c in cases), cases


def test_the_mark_dynamic_remedy_reads_the_guard_as_data_not_its_words() -> None:
    """--try-fixes' mark_dynamic comes from each size guard's `change` (source, dim, old,
    new: torch's guard, parsed once), so rewording the failed guard changes nothing; the
    change is torch's sizes (2 -> 4 on the recorded batch sweep)."""
    from compilediag.fixes.remedies import remedies_for
    from compilediag.harness.worker_types import ModelInfo

    # the worker's account of the model: forward's parameter names (torch says `args[0]`)
    model = ModelInfo(name="Sequential.forward", params=["input"])
    report = build_report(
        parse_path(fixture_trace("batch_sweep.eager")),
        WorkerResult(model=model),
        TargetInfo(path="sample_models/changing_batch.py"),
    )
    assert report.target.params == ["input"]
    (r,) = [r for r in report.recompiles if r.cause == "shape"]
    assert r.change is not None and (r.change.dim, r.change.old, r.change.new) == (0, 2, 4)
    assert f"dim 0 changed {r.change.old} → {r.change.new}" in r.failed_guard  # the words agree
    for x in report.recompiles:
        x.failed_guard = "reworded: " + x.failed_guard.upper()
    (mark,) = [m for m in remedies_for(report) if m.name == "mark_dynamic"]
    assert mark.mark_dynamic == [(0, 0)] and "mark_dynamic(input, 0)" in mark.code


def test_a_gate_that_fails_says_why_on_the_terminal_whatever_the_outputs(tmp_path: Path) -> None:
    """#68: with the report sent to a file (`-o`), or JSON on stdout, a failing gate printed
    only "wrote ..." and exited 1; its values had no unit ("1.23737 (at most 0.5)"). The
    rule, the value in its unit and the bound now go to stderr, and the value is torch's
    compile time as the report holds it."""
    trace = str(fixture_trace("graph_breaks.eager"))
    spent = json.loads(run_cli("report", trace, "--format", "json").stdout)["summary"][
        "compile_time_s"
    ]
    limit = spent / 2
    out = tmp_path / "report.md"
    for args in (["-o", str(out), "--format", "markdown"], ["--format", "json"]):
        failed = run_cli("report", trace, "--max-compile-time", str(limit), "--fullgraph", *args)
        assert failed.returncode == 1, failed.stderr
        lines = failed.stderr.splitlines()
        assert "verdict: FAIL" in lines, failed.stderr
        # the time in 3 digits, as the headline's (a look read "9.7498 s" beside "9.75 s")
        bound = f"{limit:g} s" if limit >= 1 else seconds(limit)  # (ms under a second, as it)
        assert f"  FAIL max-compile-time: {seconds(spent)} (at most {bound})" in lines, lines
        breaks = json.loads(run_cli("report", trace, "--format", "json").stdout)["summary"][
            "graph_breaks"
        ]
        assert f"  FAIL fullgraph: {breaks} graph-break sites (at most 0)" in lines, lines
    assert out.is_file() and "FAIL" in out.read_text()
    passed = run_cli("report", trace, "--max-compile-time", str(spent * 2), "-o", str(out))
    assert passed.returncode == 0 and "verdict: PASS" in passed.stderr, passed.stderr
