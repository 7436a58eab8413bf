"""The views every renderer shares (render/views.py): recompiles by frame, runs of one kind
of guard, a fix said once; the table and the HTML show the same grouping."""

from __future__ import annotations

import re

from compilediag.analysis.build import build_report
from compilediag.render import render
from compilediag.render.views import recompile_causes, recompiles_by_frame
from compilediag.report.model import Environment, Recompile, Report, TargetInfo
from compilediag.trace.parse import parse_path
from tests.conftest import fixture_trace


def _r(cid: str, frame: str, guard: str, fix: str, cause: str = "shape") -> Recompile:
    return Recompile(
        frame=frame, file="m.py", line=1 if frame == "forward" else 9, compile_id=cid,
        failed_guard=guard, suggestion=fix, cause=cause,  # type: ignore[arg-type]
    )  # fmt: skip


def _report(*recompiles: Recompile) -> Report:
    return Report(
        tool={}, environment=Environment(), target=TargetInfo(), recompiles=list(recompiles)
    )


def test_one_cause_is_one_block_over_frames_and_its_fix_said_once() -> None:
    """#68: a cause (the same kind of guard on the same subject, whatever its values) is one
    block over the frames that hold it, its fix said once, never spliced ("as for 0/1 above;
    aCCELERATE…"); another subject is a cause of its own; the HTML keeps each frame's
    timeline, and the JSON every record."""
    fix = "Mark it dynamic."
    report = _report(
        _r("0/1", "forward", "`x` dim 0 changed 2 → 4", fix),
        _r("1/1", "helper", "`x` dim 0 changed 2 → 4", fix + " Or pad it."),
        _r("0/2", "forward", "`x` dim 0 changed 4 → 8", fix),
        _r("0/3", "forward", "self.flag changed (was True)", "Make it a tensor.", "int"),
    )
    forward, helper = recompiles_by_frame(report)
    assert [r.compile_id for r in forward.items] == ["0/1", "0/2", "0/3"]
    size, flag = recompile_causes(report)
    assert [r.compile_id for r in size.items] == ["0/1", "1/1", "0/2"]
    assert size.frames == [("forward", "m.py", 1), ("helper", "m.py", 9)]
    assert size.fix == fix and size.more == [] and [r.compile_id for r in flag.items] == ["0/3"]
    table = render(report, "table", width=120)
    assert (
        table.index("0/1, 1/1, 0/2 (3×)")
        < table.index("also in helper at m.py:9")
        < table.index("0/3")
    )
    assert table.count(fix) == 1 and "as for" not in table
    assert render(report, "json").count("Or pad it.") == 1
    # the code after a break has its own fix (its input is the function's local, which
    # can't be marked: a look read the lead's mark_dynamic as both frames' fix), said with
    # its id
    after = _r("2/1", "forward, after line 5", "`x` dim 0 changed 2 → 4", "Remove the break.")
    (size, _) = recompile_causes(_report(*report.recompiles[:1], after, *report.recompiles[3:]))
    assert size.more == [("2/1", "Remove the break.")], size.more


def test_what_else_changed_names_each_source_once_with_each_change() -> None:
    """A sixteenth look: three feats changed dtype, and the also line named `feats[2]` alone
    (feats[1] folded into it, their digits blanked); an attention mask changed twice was
    named twice in one sentence. Each source once, its changes joined."""
    dtype = "(dtype torch.float32 → torch.float64)"
    a = _r("0/1", "forward", "feats[0] dtype changed", "Cast it.", cause="dtype")
    a.also_changed = [f"`feats[1]` {dtype}", f"`feats[2]` {dtype}"]
    b = _r("0/2", "forward", "input_ids dim 0 changed 1 → 2", "Pad it.")
    b.also_changed = ["`attention_mask` (size 1x8 → size Nx8)"]
    c = _r("0/3", "forward", "input_ids dim 1 changed 8 → 24", "Pad it.")
    c.also_changed = ["`attention_mask` (size Nx8 → size NxM)"]
    report = _report(a, b, c)
    feats, sizes = recompile_causes(report)
    assert feats.also == [f"`feats[1]` {dtype}", f"`feats[2]` {dtype}"], feats.also
    assert sizes.also == ["`attention_mask` (size 1x8 → size Nx8; then size Nx8 → size NxM)"]


def test_the_table_and_the_html_group_a_real_trace_alike() -> None:
    report = build_report(
        parse_path(fixture_trace("recompile_limit.eager")), None, TargetInfo(path="m")
    )
    frames = recompiles_by_frame(report)
    assert frames and frames[0].limit_hit
    html = render(report, "html")
    headings = re.findall(r'<div class="frame">\s*<h3><code>([^<]+)</code>', html)
    assert headings == [f.frame for f in frames]
    assert f"{len(frames[0].items)} recompiles" in html


def test_a_kernels_rate_below_the_reports_precision_is_never_shown_as_0(tmp_path) -> None:
    """A kernel's TFLOP/s (and GB/s) is kept to 0.001 and set only where it did FLOPs (moved
    bytes): a 0 there is a positive rate below 0.001, shown `<0.001 TFLOP/s` (before: `0
    TFLOP/s`); a rate of 1000 GB/s and more in TB/s (before: `2.64e+03 GB/s`). Through the
    real `compilediag render`, table and HTML."""
    import json

    from compilediag.report.model import KernelTiming, Runtime, Timings
    from tests.conftest import run_cli

    def kernel(name: str, **rate: float) -> KernelTiming:
        return KernelTiming(name=name, kind="library", calls=1, ms=0.01, share=0.1, **rate)

    report = _report()
    report.runtime = Runtime(command=["python", "train.py"], exit_code=0, window=[3, 7])
    report.timings = Timings(
        kernels=[
            kernel("aten::mm", tflop_per_s=0.0),
            kernel("aten::addmm", tflop_per_s=0.003),
            kernel("cpp_fused_add_0", gb_per_s=0.0),
            kernel("triton_poi_fused_1", gb_per_s=2643.0),
        ]
    )
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report.to_dict()))
    table = run_cli("render", str(saved)).stdout
    rows = {line.split()[0]: line for line in table.splitlines() if " a step (" in line}
    assert rows["aten::mm"].endswith("· library call · <0.001 TFLOP/s"), table
    assert rows["aten::addmm"].endswith("· 0.003 TFLOP/s")
    assert rows["cpp_fused_add_0"].endswith("· <0.001 GB/s")
    assert rows["triton_poi_fused_1"].endswith("· 2.64 TB/s")
    assert not re.search(r"\b0 (TFLOP|GB)/s", table)
    html = run_cli("render", str(saved), "--format", "html").stdout
    assert "&lt;0.001 TFLOP/s" in html and "2.64 TB/s" in html
    assert not re.search(r"[>\s]0 (TFLOP|GB)/s", html)


def test_the_lines_row_shows_the_loops_costliest_lines_it_names() -> None:
    """The Job section's `lines` row said the loop's lines were timed and showed none of
    them (#76 U8): now the costliest, costliest first, each at its line with its text and
    its time a step as the report holds it (a gloo DDP job recorded with torch 2.13)."""
    import json

    from compilediag.report.words import ms
    from tests.conftest import ROOT

    saved = ROOT / "tests" / "fixtures" / "reports" / "schema6_gloo_straggler_torch2.13.json"
    report = Report.from_dict(json.loads(saved.read_text()))
    assert report.runtime is not None and len(report.runtime.loop) > 4
    table = " ".join(render(report, "table", width=200).split())  # its rows unwrapped
    top = sorted(report.runtime.loop, key=lambda x: -x.ms)
    row = table[table.index("lines a step's costliest") :]
    row = row[: row.index(f"` {ms(top[3].ms)}") + len(ms(top[3].ms)) + 2]
    shown = [f":{x.line} `{x.source[:20]}" for x in top[:4]]  # a long text is cut
    at = [row.find(s) for s in shown]
    assert all(i > 0 for i in at) and at == sorted(at), (row, shown)
    assert all(f"` {ms(x.ms)}" in row for x in top[:4]), row
    assert f"{top[0].file}:{top[0].line}" in row, row
    assert not table[table.index(row) + len(row) :].startswith(" ·"), table  # 4 lines, no more


def test_a_folded_cause_says_how_many_cached_graphs_each_call_checked() -> None:
    """An eleventh look: `0/2 … 0/3 (2×)` said "(2 cached graphs were checked ...)" where
    0/3 checked 3 (torch's recompiles log listed 0/2, 0/1 and 0/0). A group whose calls
    checked different numbers says the range."""
    fix = "Mark it dynamic."
    two = _r("0/2", "forward", "`x` dim 0 changed 4 → 8", fix)
    three = _r("0/3", "forward", "`x` dim 0 changed 8 → 16", fix)
    two.failed_guards, three.failed_guards = ["a", "b"], ["a", "b", "c"]
    table = render(_report(two, three), "table", width=120)
    assert (
        "(each call checked the 2 to 3 graphs cached before it; each failed a guard)"
        in " ".join(table.split())
    ), table
    three.failed_guards = ["a", "b"]
    table = render(_report(two, three), "table", width=120)
    assert "(2 cached graphs were checked; each failed a guard)" in table, table


SCALED = """\
import torch


def f(x, scale):
    return torch.sin(x) * scale


cf = torch.compile(f, backend="eager", dynamic=False)
for n, s in [(4, 1.0), (8, 1.0), (8, 2.0), (16, 3.0)]:
    cf(torch.randn(n), s)
"""


def test_what_else_changed_is_said_of_the_calls_that_changed_it(tmp_path) -> None:
    """A twenty-fourth look: the calls (4, 1.0), (8, 1.0), (8, 2.0), (16, 3.0) recompile on
    x's size at 0/1 and 0/3 (one block) and on `scale` at 0/2; the block said "these calls
    also changed `scale` (2.0 → 3.0)", though 0/1's call kept scale 1.0. Said now of 0/3's
    call alone, in the table and the HTML alike."""
    import subprocess
    import sys

    from tests.conftest import run_cli

    job, trace = tmp_path / "job.py", tmp_path / "trace"
    job.write_text(SCALED)
    subprocess.run(
        [sys.executable, str(job)], check=True, timeout=300,
        env={"TORCH_TRACE": str(trace), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    report = build_report(
        [log for f in sorted(trace.iterdir()) for log in parse_path(f)], None, TargetInfo("j")
    )
    size = next(c for c in recompile_causes(report) if len(c.items) == 2)
    assert [r.compile_id for r in size.items] == ["0/1", "0/3"] and size.also_by == ["0/3"]
    said = "the call of 0/3 also changed `scale` (2.0 → 3.0)"
    assert said in size.also_words()
    table = " ".join(run_cli("report", str(trace)).stdout.split())
    assert said in table and "these calls also changed" not in table
    html = run_cli("report", str(trace), "--format", "html").stdout
    assert "the call of 0/3 also changed <code>scale</code>" in html, html[:200]


def test_cross_check_says_what_explains_count_is_where_it_is_not_the_breaks() -> None:
    """Look 27 (word_language_model's LSTM, torch 2.14.1): "torch._dynamo.explain agrees (0
    breaks, same sites)" beside the report's 1 graph break: torch could not resume after the
    LSTM's break, so explain's graph_break_count (its graphs less one: one graph) read 0
    while its break_reasons held that site. (torch 2.13's explain compiles no graph of that
    frame at all, graph_break_count -1: a disagreement, said as such.) The line says the
    sites agree and what that count is."""
    from compilediag.render.table.facts import cross_check_lines
    from compilediag.report.model import CrossCheck, Environment, Report, Site, TargetInfo

    site = Site("/x/model.py", 50, "output, hidden = self.rnn(emb, hidden)")
    report = Report(tool={}, environment=Environment(), target=TargetInfo())
    report.cross_check = CrossCheck(explain_graph_breaks=0, explain_sites=[site])
    (line,) = cross_check_lines(report)
    assert line.plain == (
        "\nCross-check: torch._dynamo.explain agrees: the same break site (1); its "
        "graph_break_count, 0, is its graphs less one, not its breaks."
    ), line.plain
    report.cross_check = CrossCheck(explain_graph_breaks=2, explain_sites=[site, site])
    (line,) = cross_check_lines(report)
    assert line.plain == (
        "\nCross-check: torch._dynamo.explain agrees: the same break site (1); its "
        "graph_break_count, 2, is its graphs less one, not its breaks."
    )


def test_a_long_one_off_line_wraps_under_its_words_and_names_the_scripts_lines() -> None:
    """Look 28 (nanoGPT on 2 gloo ranks): the first screen's one-off line wrapped to the
    margin ("... after\\nsteps 20, 40 ...; checkpoint <module>\\n(train.py:288) ...") read as
    words lost, and `<module>` as markup eaten. Its words now wrap under their start, and a
    checkpoint saved from the script's own lines is said so."""
    import json

    from compilediag.report.step import StepWork
    from tests.conftest import ROOT

    saved = ROOT / "tests" / "fixtures" / "reports" / "schema6_gloo_straggler_torch2.13.json"
    report = Report.from_dict(json.loads(saved.read_text()))
    assert report.runtime is not None and len(report.runtime.rank_steps) == 2
    report.runtime.other_work = [
        StepWork("evaluation", "estimate_loss", "train.py", 217, [20, 40], [0], 32.3, 10),
        StepWork("checkpoint", "<module>", "train.py", 288, [20, 40], [0], 6.63, 1),
    ]
    lines = render(report, "table", width=100).splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("  one-off: "))
    rest = lines[start + 1 : next(i for i in range(start + 1, len(lines)) if lines[i][:3] != "   ")]
    assert rest and all(x.startswith(" " * 11) and x[11] != " " for x in rest), lines[start:]
    said = " ".join(" ".join(lines[start : start + 1 + len(rest)]).split())
    assert "checkpoint the script's top level (train.py:288)" in said, said
    assert "<module>" not in " ".join(lines), lines


def test_a_folded_causes_few_ids_are_each_named() -> None:
    """Look 28 (forward-forward): "0/1 … 0/4 (3×)" read as a range of four for 0/1, 0/3
    and 0/4; few ids are each named, many as the first two and the last."""
    fix = "Mark it dynamic."
    few = [_r(i, "forward", "`x` dim 0 changed 4 → 8", fix) for i in ("0/1", "0/3", "0/4")]
    assert "0/1, 0/3, 0/4 (3×)  forward" in render(_report(*few), "table", width=120)
    many = [_r(f"0/{i}", "forward", "`x` dim 0 changed 4 → 8", fix) for i in range(1, 6)]
    assert "0/1, 0/2 … 0/5 (5×)  forward" in render(_report(*many), "table", width=120)
