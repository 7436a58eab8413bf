"""Renderers on a fixed Report (from a recorded trace), at a pinned width, exact lines."""

from __future__ import annotations

from compilediag.analysis.build import build_report
from compilediag.harness.worker_types import Measured, OutputCheck, WorkerResult
from compilediag.render import render, seconds
from compilediag.report.model import Environment, Report, Stat, TargetInfo
from compilediag.report.words import BREAK_SAVES
from compilediag.trace.parse import parse_path
from tests.conftest import ROOT, TRACES, fixture_trace

WORKER = WorkerResult(
    environment=Environment(
        torch="2.13.0+cpu", python="3.11.7", device="cpu", backend="eager", mode="default"
    ),
    inputs=[["8x32:float32"]],
    first_call_s=0.25,
    output_check=OutputCheck(compared=1, max_abs_err=0.0, max_rel_err=0.0, mismatch=False),
    timings=Measured(
        eager_ms=Stat(median=0.040, iqr=0.002, n=50),
        compiled_ms=Stat(median=0.020, iqr=0.001, n=50),
        speedup=2.0,
        repeat=50,
        calls_per_block=1,
        warmup=0,
        method="perf_counter",
    ),
)


def fixed_report() -> Report:
    report = build_report(
        parse_path(fixture_trace("graph_breaks.eager")),
        WORKER,
        TargetInfo(path=str(ROOT / "sample_models/graph_breaks.py")),
    )
    for g in report.graphs:  # compile times vary run to run; pin them for exact lines
        g.compile_time_s = 0.05
    report.summary.compile_time_s = 0.2
    # the recording's absolute paths point into the checkout it was made in
    for b in report.graph_breaks:
        b.file = str(ROOT / "sample_models" / "graph_breaks.py")
    for g in report.graphs:
        g.file = str(ROOT / "sample_models" / "graph_breaks.py")
    return report


def test_table_exact_lines(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    lines = render(fixed_report(), "table", width=100).splitlines()
    assert lines[0] == "compilediag · sample_models/graph_breaks.py  inputs: 8x32:float32"
    assert lines[1] == "torch 2.13.0+cpu · cpu · eager/default no_grad"  # the calls' grad mode
    assert (
        lines[2]
        == "4 graphs · 3 graph breaks at 3 sites · 0 recompiles · compile 200 ms · speedup 2.00x"
    )
    at = lines.index(" 1. sample_models/graph_breaks.py:22")
    assert lines[at + 1 : at + 3] == [
        '           print("debug: forward reached")',
        "    reason Failed to trace builtin operator",
    ]
    assert (
        "  1/0    forward, after line 22  sample_models/graph_breaks.py:22    3    50 ms" in lines
    )
    assert "         eager 0.040 ms a call (IQR 0.002 ms)" in lines
    assert "       speedup 2.00x" in lines
    assert all(line == line.rstrip() for line in lines)
    narrow = render(fixed_report(), "table", width=60).splitlines()
    # a URL stays whole on a line of its own (the terminal wraps it, unbroken); all else fits
    assert all(len(line) <= 60 for line in narrow if not line.strip().startswith("https://"))


def test_80_columns_keep_urls_numbers_and_kernel_names_whole() -> None:
    from compilediag.analysis.build import build_report as build

    report = fixed_report()
    lines = render(report, "table", width=80).splitlines()
    for gb in report.graph_breaks:
        assert gb.doc_url and any(line.strip() == gb.doc_url for line in lines), gb.doc_url
    # the summary wraps between items only: every count keeps its number and its word
    summary = [ln for ln in lines[2:5] if "graph" in ln or "speedup" in ln or "compile" in ln]
    joined = " · ".join(summary)
    for item in ("4 graphs", "3 graph breaks at 3 sites", "0 recompiles", "speedup 2.00x"):
        assert any(item in line for line in summary), (item, summary)
    assert joined.count(" · ") >= 4
    kernels = build(
        parse_path(fixture_trace("transformer_block.inductor", TRACES / "torch-2.11.0-cuda")),
        WorkerResult(),
        TargetInfo(path="x.py"),
    )
    text = render(kernels, "table", width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    for k in kernels.kernels[:8]:
        assert k.name.removeprefix("torch.ops.").removesuffix(".default") in text, k.name


def test_table_colour_only_when_asked() -> None:
    assert "\x1b[" not in render(fixed_report(), "table", width=80, color=False)
    assert "\x1b[" in render(fixed_report(), "table", width=80, color=True)


def test_markdown_exact_rows(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    md = render(fixed_report(), "markdown").splitlines()
    assert md[0] == "## compilediag: `sample_models/graph_breaks.py`"
    assert "| graph | frame | where | ops | compile |" in md
    row = next(line for line in md if line.startswith("| 2 |"))
    assert row.startswith(
        "| 2 | `sample_models/graph_breaks.py:24`<br>`if h.mean() > 0.5:` | Data-dependent branching ([GB0170]("
    )
    assert "| 2 |" in row and "torch.where" in row


def test_report_dict_round_trip() -> None:
    report = fixed_report()
    again = Report.from_dict(report.to_dict())
    assert again == report


def test_kernels_show_their_modules_and_what_the_count_counts() -> None:
    """A report of the recorded CUDA block, with what the worker adds: the model's classes
    (ModelInfo.modules) and torch's generated_kernel_count."""
    from compilediag.harness.worker_types import ModelInfo

    worker = WorkerResult(
        model=ModelInfo(name="Block.forward", modules={"qkv": "Linear", "ln1": "LayerNorm"}),
        torch_kernel_count=41,
    )
    report = build_report(
        parse_path(fixture_trace("transformer_block.inductor", TRACES / "torch-2.11.0-cuda")),
        worker,
        TargetInfo(path="x.py"),
    )
    text = render(report, "table", width=100)
    assert "generated_kernel_count" not in text  # the HTML report says it; the table is short
    first = next(k for k in report.kernels if k.kind != "extern")
    assert first.modules == ["ln1 (LayerNorm)"]
    wide = render(report, "table", width=200)
    assert f"{first.name}  persistent · from transformer_block.py:24 · in ln1 (LayerNorm)" in wide
    # the same report from a trace alone: paths, no classes, no torch count
    alone = build_report(
        parse_path(fixture_trace("transformer_block.inductor", TRACES / "torch-2.11.0-cuda")),
        WorkerResult(),
        TargetInfo(path="x.py"),
    )
    assert next(k for k in alone.kernels if k.kind != "extern").modules == ["ln1"]
    assert "generated_kernel_count" not in render(alone, "table", width=100)
    html = render(report, "html")
    assert "ln1 (LayerNorm)" in html and "generated_kernel_count, 41" in html


def test_a_fix_shared_by_recompiles_is_said_once() -> None:
    """Each resume frame after a break recompiles for the same reason: one block, the fix
    printed once, the other frames named in it."""
    from compilediag.report.model import Recompile

    fix = "Removing the graph break above removes this frame."
    report = Report(
        tool={"name": "compilediag"},
        target=TargetInfo(path="m.py"),
        environment=Environment(source="trace"),
        recompiles=[
            Recompile("forward, after line 22", "m.py", 22, "1/1", failed_guard="h dim 0 changed 2 → 4", suggestion=fix, cause="shape"),
            Recompile("forward, after line 24", "m.py", 24, "2/1", failed_guard="h dim 0 changed 2 → 4", suggestion=fix, cause="shape"),
        ],
    )  # fmt: skip
    text = render(report, "table", width=100)
    assert text.count(fix) == 1 and "also in forward, after line 24 at m.py:24" in text


def test_a_multi_rank_headline_gives_what_a_rank_compiled_not_sums() -> None:
    """Ranks compile side by side: the headline gives one rank's counts (a range where
    ranks differ) and the median rank's compile time with the slowest rank, each checked
    against the report of that rank's file alone."""
    import re
    import statistics

    from compilediag.analysis.ranks.fold import report_from_traces

    for name in ("collectives_extra", "graph_order_diverge"):
        folder = TRACES / "torch-2.13.0-cpu" / name
        logs = parse_path(folder)
        report = report_from_traces(logs, TargetInfo(path=str(folder)))
        alone = [report_from_traces([log], TargetInfo(path=log.path)).summary for log in logs]
        counts = render(report, "table", width=200).splitlines()[2]
        graphs = sorted({s.graphs for s in alone})
        shown = f"{graphs[0]}" if len(graphs) == 1 else f"{graphs[0]}-{graphs[-1]}"
        assert re.search(rf"\b{len(logs)} ranks: {shown} graphs?\b", counts), counts
        assert (
            len(set((s.graphs, s.graph_breaks, s.recompiles, s.kernels) for s in alone)) == 1
        ) == ("each of" in counts)
        times = [s.compile_time_s for s in alone]
        slowest = max(report.ranks, key=lambda r: r.summary.compile_time_s)
        assert f"(max {seconds(max(times))}, {slowest.label})" in counts
        assert f"compile {seconds(sorted(times)[len(times) // 2])} a rank" in counts
        assert statistics.median(times) <= max(times) < sum(times)  # not the sum


def test_breaks_are_said_to_be_ranked_by_cost_only_where_they_were_timed() -> None:
    """#68: "Graph breaks (... most costly first)" was printed where nothing was timed (a
    trace read alone: the breaks in the trace's order)."""
    untimed = build_report(parse_path(fixture_trace("graph_breaks.eager")), None, TargetInfo())
    assert all(b.time_lost_ms is None for b in untimed.graph_breaks)
    text = render(untimed, "table", width=100)
    assert "Graph breaks (3 sites)" in text and "most costly" not in text
    timed = fixed_report()
    for i, b in enumerate(timed.graph_breaks):
        b.time_lost_ms = 1.0 / (i + 1)
    said = render(timed, "table", width=300)
    assert "Graph breaks (3 sites, most costly first)" in said
    # the eager time is not what the fix saves (look 27: a Transformer's break "costs 11.4 ms
    # a step", the fix applied and the step no faster): said as eager time, and what it saves
    assert " costs " not in said and said.count(f"; {BREAK_SAVES}") == 3, said
    assert f"<br>eager code 1 ms a call; {BREAK_SAVES}" in render(timed, "markdown")
    page = render(untimed, "html")
    assert "Most costly first" not in page and "Each site is where Dynamo stopped" in page
    assert "Most costly first" in render(timed, "html")


def test_a_warm_caches_inductor_phase_says_its_graphs_came_from_the_cache() -> None:
    """An eleventh look read "inductor 0 ms · codegen 0 ms" on a run whose FX graph cache hit
    as Inductor not run: its graphs were loaded, inside AOTAutograd's phase. A backend that
    is not Inductor (no record of Inductor's) has no Inductor phase."""
    from compilediag.render.table.facts import compile_phases
    from compilediag.report.compile import CompileTime

    warm = CompileTime(total_s=2.0, dynamo_s=0.3, aot_s=1.7, caches={"fx_graph_cache_hit": 2})
    assert "inductor: its graphs loaded from its cache, within aot" in compile_phases(warm)
    eager = CompileTime(total_s=2.0, dynamo_s=0.3, aot_s=1.7)
    # no record of Inductor's (no FX graph cache lookup): no Inductor phase to give
    assert compile_phases(eager) == "dynamo 300 ms · aot 1.70 s", compile_phases(eager)
    looked = CompileTime(total_s=2.0, dynamo_s=0.3, aot_s=1.7, caches={"fx_graph_cache_miss": 1})
    assert "inductor 0 ms · codegen 0 ms" in compile_phases(looked), compile_phases(looked)
    # the eager backend runs no AOTAutograd (a sixteenth look read "aot 2 ms" there)
    said = compile_phases(eager, "eager")
    assert said == "dynamo 300 ms · the eager backend 1.70 s", said
    # nor Inductor under aot_eager (a seventeenth look read its zeros there)
    assert compile_phases(eager, "aot_eager") == "dynamo 300 ms · aot 1.70 s"


def test_untimed_breaks_are_in_a_said_order_the_most_frequent_then_the_sources() -> None:
    """An eleventh look: explain's breaks came in neither the source's order nor a said one
    (24, 26, 22). Untimed (a trace), they are the most frequent first, then in the source's
    order, and the header says so where their counts differ."""
    report = build_report(parse_path(fixture_trace("graph_breaks.eager")), None, TargetInfo())
    breaks = report.graph_breaks
    keys = [(-b.count, b.file, b.line) for b in breaks]
    assert len(breaks) >= 2 and keys == sorted(keys), keys
    header = next(x for x in render(report, "table").splitlines() if x.startswith("Graph breaks"))
    assert ("most frequent first" in header) == (len({b.count for b in breaks}) > 1), header


def test_fixs_break_in_another_file_is_named_with_its_file(tmp_path, monkeypatch) -> None:
    """A twelfth look: `fix model.py` listed "line 7 · item" for a break in the model's own
    vendorlib/stats.py, read as the model's line 7. A break in another file is given with
    that file (from the model's folder); one in the model file, by its line."""
    from compilediag.fixes.patches import BreakFix, FixResult
    from compilediag.render.patch import render_fix_table

    (tmp_path / "vendorlib").mkdir()
    for name in ("model.py", "vendorlib/stats.py"):
        (tmp_path / name).write_text("\n" * 30)
    monkeypatch.chdir(tmp_path)
    helper = BreakFix("vendorlib/stats.py", 7, "q = t.max().item()", "item", "GB0124", "")
    own = BreakFix("model.py", 18, "print(x)", "print", "GB0059", "")
    text = render_fix_table(FixResult("model.py", "", [helper, own]))
    assert "  vendorlib/stats.py:7 · item · GB0124" in text.splitlines(), text
    assert "  line 18 · print · GB0059" in text.splitlines(), text

    # two breaks on one line (a bincount and its .tolist()) are two findings at one site, as
    # explain counts them (a twentieth look: "4 graph-break sites" where explain said 3)
    twice = [BreakFix("model.py", 23, "c = t.bincount().tolist()", k, g, "")
             for k, g in (("dynamic_output_shape", "GB0036"), ("item", "GB0033"))]  # fmt: skip
    text = render_fix_table(FixResult("model.py", "", [own, *twice]))
    assert "2 graph-break sites (3 findings): 0 with a verified patch, 3 without" in text, text

    # a recompile's head line past the width wraps under itself (a look read 107 columns)
    from compilediag.fixes.patches.results import RecompileFix

    guard = "length of `rows` (the list the nonzero's indices were made into) changed (was 5)"
    long = RecompileFix("feats.py", 9, "return h[rows]", "length", guard, 5, "why", "fix")
    lines = render_fix_table(FixResult("model.py", "", [], recompiles=[long])).splitlines()
    head = lines.index(next(x for x in lines if x.startswith("  feats.py:9 · length · ")))
    assert all(len(x) <= 100 for x in lines), lines
    assert lines[head + 1].startswith("    ") and lines[head + 1].endswith("(was 5) (5×)"), lines


def test_a_long_kernel_names_facts_and_ops_wrap_under_their_own_start() -> None:
    """A fused kernel's name can fill the width: its facts folded under it at column 2
    read as part of the name (#76, the thirteenth look: `  view_0  reduction · from
    L14,20`). At 80 columns each kernel's name starts at column 2, whole (one longer than
    the width too: the terminal wraps it, a search finds it), nothing else does, and every
    other line fits; a short name keeps its facts beside it."""
    from compilediag.report.model import Kernel

    report = fixed_report()
    long = "cpp_fused_avg_pool2d_clamp_min_div_expand_linalg_vector_norm_mean_mul_squeeze_0"
    ops = [f"aten.op_number_{i}" for i in range(12)]
    report.kernels = [
        Kernel(name=long, kind="reduction", compile_id="0/0", ops=ops,
               source_lines=["sample_models/graph_breaks.py:14"]),
        Kernel(name="cpp_fused_relu_1", kind="pointwise", compile_id="0/0", ops=["aten.relu"]),
    ]  # fmt: skip
    lines = render(report, "table", width=80).splitlines()
    start = lines.index(next(x for x in lines if x.startswith("Kernels (")))
    block = lines[start + 1 : start + 1 + next(
        i for i, x in enumerate(lines[start + 1 :]) if not x.strip()
    )]  # fmt: skip
    named = [x for x in block if x.startswith("  ") and not x.startswith("   ")]
    assert all(len(x) <= 80 for x in block if x not in named), block
    assert named == [f"  {long}", "  cpp_fused_relu_1  pointwise"], block
    assert "      reduction · from L14" in block, block
    assert all(x.startswith("      ") for x in block if x not in named), block


def test_a_window_kernels_long_name_stays_whole_with_its_figures_under_it() -> None:
    """A look read `…scalar_te` / `nsor_view_0` folded in "Kernels in the window" (#76)."""
    from compilediag.render.table.facts import kernel_time_blocks
    from compilediag.render.table.parts import print_items
    from compilediag.report.model import KernelTiming, Timings

    report = fixed_report()
    long = "triton_poi_fused__to_copy_add_mul_native_layer_norm_scalar_tensor_view_0"
    report.timings = Timings(kernels=[KernelTiming(long, "generated", 2, 1.5, 0.2)])
    lines = print_items(kernel_time_blocks(report, None), 60, False).splitlines()
    assert f"  {long}" in lines, lines
    figures = lines[lines.index(f"  {long}") + 1]
    assert figures.startswith("      1.5 ms a step"), lines


def test_a_verified_fixs_remedy_name_is_never_cut() -> None:
    """A look read `capture_sca…` in the Verified fixes table at 100 columns (#76)."""
    from compilediag.report.model import Counts, VerifiedFix
    from compilediag.report.vocabulary import FixOutcome

    report = fixed_report()
    before = Counts(graphs=2, graph_breaks=1, recompiles=0, speedup=1.13, compile_s=1.98)
    after = Counts(graphs=1, graph_breaks=0, recompiles=0, speedup=1.14, compile_s=1.35)
    report.verified_fixes = [VerifiedFix(
        "capture_scalar_outputs", "torch._dynamo.config.capture_scalar_outputs = True",
        ["model.py:15"], before, after, True, FixOutcome.REMOVES,
    )]  # fmt: skip
    text = render(report, "table", width=100)
    table = text.split("Verified fixes", 1)[1].split("\nTimings", 1)[0]
    assert "\n  capture_scalar_outputs" in table and "removes it · graphs 2 → 1" in table, table
    assert "outputs match" in " ".join(table.split()), table
    assert "…" not in table
    assert all(len(line) <= 100 for line in table.splitlines()), table


def test_a_remedy_whose_run_failed_shows_no_counts_of_it() -> None:
    """A sixteenth look: "mark_dynamic failed · graphs 3 → 0 · break sites 0 · recompiles 2 →
    0" read as a gain where the run compiled nothing; a failed run's counts are not shown,
    its error is."""
    from compilediag.report.model import Counts, VerifiedFix
    from compilediag.report.vocabulary import FixOutcome

    report = fixed_report()
    before = Counts(graphs=3, graph_breaks=0, recompiles=2, speedup=1.0, compile_s=1.0)
    report.verified_fixes = [VerifiedFix(
        "mark_dynamic", "torch._dynamo.mark_dynamic(input_ids, 0)", ["input_ids dim 0"],
        before, Counts(), None, FixOutcome.FAILED,
        error="torch.compile failed: ConstraintViolationError: Constraints violated",
    )]  # fmt: skip
    for fmt in ("table", "markdown"):
        text = render(report, fmt, width=100)
        table = text.split("erified fixes", 1)[1]
        assert "3 → 0" not in table and "2 → 0" not in table, table
        assert "ConstraintViolationError" in table or fmt == "markdown", table
