"""Graph-break analysis on recorded traces: user lines, reasons, ids, causes, de-duplication."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from compilediag.analysis.compile.breaks import classify, collect_breaks, user_site
from compilediag.analysis.history import build_history, history_of
from compilediag.report.model import Site
from compilediag.trace.compiles import CompileId, LoggedBreak
from compilediag.trace.formats import ParsedBreak, parse_break_text
from compilediag.trace.parse import parse_lines, parse_path
from tests.conftest import expected_breaks, fixture_trace, trace_sets


def breaks_of(path: Path):
    (log,) = parse_path(path)
    return collect_breaks(build_history([log]))


@pytest.mark.parametrize("folder", trace_sets("graph_breaks.eager"), ids=lambda p: p.name)
def test_graph_breaks_sample_lines_on_every_recorded_torch(folder: Path) -> None:
    sites, total = breaks_of(fixture_trace("graph_breaks.eager", folder))
    assert sorted(b.line for b in sites) == expected_breaks("graph_breaks.py")
    assert total == len(sites)
    assert all(Path(b.file).name == "graph_breaks.py" for b in sites)
    causes = {b.line: b.cause for b in sites}
    assert causes == {22: "print", 24: "data_dependent_branch", 26: "item"}
    # never a resume function or a torch frame as the site
    assert not any("torch_dynamo_resume" in b.code or "/torch/" in b.file for b in sites)


def test_break_fields_from_torch_2_13_text() -> None:
    (log,) = parse_path(fixture_trace("graph_breaks.eager"))
    text = log.ordered()[0].graph_breaks[0].text
    parsed = parse_break_text(text)
    assert parsed.reason == "Failed to trace builtin operator"
    assert parsed.gb_id == "GB0059"
    assert parsed.doc_url and parsed.doc_url.endswith("gb0059.html")
    assert "print" in parsed.explanation
    assert any("reorderable_logging_functions" in h for h in parsed.hints)
    inner = parsed.frames[-1]
    assert (Path(inner.file).name, inner.line, inner.code) == (
        "graph_breaks.py",
        22,
        'print("debug: forward reached")',
    )


def test_sites_are_deduplicated_and_counted_across_recompiles() -> None:
    # the same print site hit by compile 0/0 and by its recompile 0/1 on torch 2.11
    (log,) = parse_path(fixture_trace("graph_breaks.eager"))
    first = log.ordered()[0]
    recompile = replace(first, id=CompileId(0, 1), graph_breaks=list(first.graph_breaks))
    sites, total = collect_breaks(
        history_of([*log.ordered(), recompile])
    )  # 0/1 logs the break again
    assert total == 4 and len(sites) == 3
    top = sites[0]
    assert (top.line, top.count) == (22, 2), "the site that fired most comes first"
    assert top.compile_ids == ["0/0", "0/1"]


def test_a_break_logged_again_on_a_restart_of_one_compile_counts_once() -> None:
    (log,) = parse_path(fixture_trace("graph_breaks.eager"))
    first = log.ordered()[0]
    again = LoggedBreak(first.graph_breaks[0].text, attempt=1)  # the restart re-logs it
    first.graph_breaks.append(again)
    sites, total = collect_breaks(build_history([log]))
    assert total == 3 and len(sites) == 3
    assert all(s.count == 1 for s in sites)


def test_user_site_prefers_the_users_line_over_a_library_frame() -> None:

    parsed = ParsedBreak(
        reason="r",
        frames=[
            Site("/proj/train.py", 10, "model(x)", "<module>"),
            Site(
                "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py",
                1778,
                "",
                "_call_impl",
            ),
            Site("/proj/model.py", 33, "y = helper(x)", "forward"),
            Site("/venv/lib/python3.11/site-packages/fancylib/ops.py", 7, 'print("hi")', "helper"),
        ],
    )
    site, lib = user_site(parsed)
    assert (site.file, site.line) == ("/proj/model.py", 33)
    assert lib is not None and lib.file.endswith("fancylib/ops.py")


@pytest.mark.parametrize(
    ("reason", "explanation", "code", "cause"),
    [
        ("Failed to trace builtin operator", "builtin operator `print`", "", "print"),
        (
            "logging.Logger method not supported for non-export cases",
            "",
            "log.warning('x')",
            "logging",
        ),
        ("Data-dependent branching", "", "if y.mean() > 0:", "data_dependent_branch"),
        ("generic_jump TensorVariable()", "", "", "data_dependent_branch"),
        ("Unsupported Tensor.item() call with capture_scalar_outputs=False", "", "", "item"),
        (
            "Dynamic shape operator",
            "Operator `aten.nonzero.default`'s output shape depends",
            "",
            "dynamic_output_shape",
        ),
        ("attempted to trace numpy function unsupported by PyTorch", "", "", "numpy"),
        ("Something new in torch 3", "", "", "other"),
    ],
)
def test_classify(reason: str, explanation: str, code: str, cause: str) -> None:
    got, suggestion = classify(reason, explanation, code)
    assert got == cause
    assert suggestion


def test_breaks_recorded_only_as_restarts_are_breaks() -> None:
    """Older layouts log a break only as `restart_reasons` of the compile, and the resume
    frame that follows names the line. On torch 2.6's recording of graph_breaks.py, with its
    break artifacts taken out, the same three user lines come back."""
    from tests.conftest import TRACES, expected_breaks

    lines = fixture_trace("plain_graph_breaks", TRACES / "torch-2.6.0-cpu").read_text()
    kept, skip = [], False
    for line in lines.splitlines(keepends=True):
        if not line.startswith("\t"):
            skip = '"dynamo_graph_break_reason"' in line
        if not skip:
            kept.append(line)
    log = parse_lines(kept)
    assert not any(c.graph_breaks for c in log.ordered())
    sites, total = collect_breaks(build_history([log]))
    assert sorted(s.line for s in sites) == expected_breaks("graph_breaks.py")
    assert total == 3


def test_a_break_belongs_to_the_framework_it_is_in() -> None:
    """The library frames of real breaks, outermost first (paths from a run of
    transformers' generate() under torch.compile, torch 2.13, and of a DDP job)."""
    from compilediag.analysis.compile.frameworks import DDP, framework_of

    site = ".venv/lib/python3.11/site-packages/"
    generate = [
        site + "torch/nn/modules/module.py",
        site + "torch/utils/_contextlib.py",  # generate() is decorated with torch.no_grad
        site + "transformers/generation/utils.py",
    ]
    assert framework_of(*generate)[0] == "transformers"
    assert framework_of(site + "torch/utils/_contextlib.py")[0] == "torch"
    ddp = [site + "torch/nn/parallel/distributed.py", "/usr/lib/python3.11/contextlib.py"]
    assert framework_of(*ddp)[0] == DDP  # DDP's wrapper decides wherever it stands
    assert framework_of("/usr/lib/python3.11/logging/__init__.py")[0] == "logging"
    assert framework_of("/home/me/model.py") is None


def _reporting_branch(x):
    y = x * 2
    if y.sum().item() > 1e9:
        print("overflow")
    return y


def _reporting_branch_guarded(x):
    y = x * 2
    if not torch.compiler.is_compiling():
        if y.sum().item() > 1e9:
            print("overflow")
    return y


def _picking_branch(x):
    y = x * 2
    if y.sum().item() > 1e9:
        y = y * 0.5
    return y


def test_a_branch_that_only_reports_is_advised_out_of_the_graph_not_to_torch_where() -> None:
    """`if y.sum().item() > 1e9: print("overflow")`: torch.where can pick between values,
    not hold a print (a look read "pick with torch.where" and "removes the break" beside it).
    Its advice is to take the check out of the compiled code or guard it; applied as said,
    torch's explain counts no break. A branch that picks a value keeps torch.where."""
    from compilediag.testing import compile_report

    x = torch.randn(4, 8)
    (reporting,) = compile_report(_reporting_branch, (x,)).graph_breaks
    (picking,) = compile_report(_picking_branch, (x,)).graph_breaks
    assert "pick with torch.where" not in reporting.suggestion, reporting.suggestion
    assert reporting.suggestion.startswith("The branch only reports"), reporting.suggestion
    assert "if not torch.compiler.is_compiling():" in reporting.suggestion
    assert "pick with torch.where" in picking.suggestion, picking.suggestion
    for fn, breaks in ((_reporting_branch, 1), (_reporting_branch_guarded, 0)):
        torch._dynamo.reset()
        assert len(torch._dynamo.explain(fn)(x).break_reasons) == breaks, fn


def _confidence_gate(x):
    probs = (x * 2).softmax(-1)
    conf = probs.max().item()
    if conf < 0.01:
        return probs * 0
    return probs


def _confidence_gate_where(x):
    probs = (x * 2).softmax(-1)
    conf = probs.max()
    return torch.where(conf < 0.01, probs * 0, probs)


def test_an_item_value_branched_on_a_line_later_is_advised_as_the_branch() -> None:
    """`conf = probs.max().item()` then `if conf < 0.01:` (a twelfth look, a Llama model):
    the advice read "capture_scalar_outputs ... the break is gone", where torch's explain
    with that setting still finds the break, moved to the `if`. It is advised as a branch on
    the value (torch.where, or torch.cond), which applied leaves no break."""
    from compilediag.report.vocabulary import BreakCause
    from compilediag.testing import compile_report

    x = torch.randn(4, 8)
    (brk,) = compile_report(_confidence_gate, (x,)).graph_breaks
    assert brk.cause == BreakCause.ITEM_BRANCH, (brk.cause, brk.suggestion)
    assert "torch.where" in brk.suggestion and "the break is gone" not in brk.suggestion
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        assert len(torch._dynamo.explain(_confidence_gate)(x).break_reasons) == 1
    torch._dynamo.reset()
    assert len(torch._dynamo.explain(_confidence_gate_where)(x).break_reasons) == 0


def _active_rows(h):
    keep = h.mean(-1) > 0.0
    rows = keep.nonzero().flatten().tolist()
    return h[rows] * 2


def _active_rows_tensor(h):
    keep = h.mean(-1) > 0.0
    rows = keep.nonzero().flatten()
    return h[rows] * 2


def _trimmed(x, mask):
    longest = int(mask.sum(-1).max())
    return x[:, :longest].softmax(-1)


def _scaled(x):
    top = x.abs().max().item()
    return x / top


def _break_lines(fn, *args, **config) -> list[int]:
    """torch's explain: the line of each break's innermost frame, with `config` set."""
    torch._dynamo.reset()
    with torch._dynamo.config.patch(**config):
        found = torch._dynamo.explain(fn)(*args)
    torch._dynamo.reset()
    return [r.user_stack[-1].lineno for r in found.break_reasons]


def test_nonzero_made_python_numbers_is_advised_kept_a_tensor() -> None:
    """`rows = keep.nonzero().flatten().tolist()` then `h[rows]` (a thirteenth look): the
    advice read capture_dynamic_output_shape_ops "the break is gone", where torch then fails
    to compile (it can't guard on the size .tolist() reads), and capture_scalar_outputs "the
    break is gone" for the .tolist(), where torch's break moves to `h[rows]`. Now: keep the
    indices a tensor, with the setting: torch's explain finds no break."""
    from compilediag.report.vocabulary import BreakCause
    from compilediag.testing import compile_report

    h = torch.randn(16, 8)
    found = {b.cause: b for b in compile_report(_active_rows, (h,)).graph_breaks}
    shape, scalar = found[BreakCause.DYNAMIC_OUTPUT_SHAPE], found[BreakCause.ITEM]
    assert "torch fails here instead" in shape.suggestion and "drop .tolist()" in shape.suggestion
    line = scalar.line + 1
    assert f"is used at line {line} (`return h[rows] * 2`)" in scalar.suggestion
    assert "the break is gone" not in scalar.suggestion
    torch._dynamo.reset()
    with (
        torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True),
        pytest.raises(Exception, match="data-dependent"),
    ):
        torch.compile(_active_rows, backend="eager", fullgraph=False)(h)
    assert line in _break_lines(_active_rows, h, capture_scalar_outputs=True)
    assert _break_lines(_active_rows_tensor, h, capture_dynamic_output_shape_ops=True) == []


def test_an_item_value_read_later_is_said_to_move_the_break_where_it_is_needed() -> None:
    """`longest = int(mask.sum(-1).max())` then `x[:, :longest]`: capture_scalar_outputs
    removes this line's break, and the words say where the value is read next, where torch
    may need it (a look's BERT: the break moved into its attention, 2 graphs to 3)."""
    from compilediag.testing import compile_report

    x, mask = torch.randn(2, 8), torch.ones(2, 8)
    (brk,) = compile_report(_trimmed, (x, mask)).graph_breaks
    assert f"`longest` is used at line {brk.line + 1} (`return x[:, :longest]" in brk.suggestion
    assert brk.line not in _break_lines(_trimmed, x, mask, capture_scalar_outputs=True)
    # read only in arithmetic (`x / top`): the value traces as a symbol, no break anywhere
    (brk,) = compile_report(_scaled, (x,)).graph_breaks
    assert "the break is gone" in brk.suggestion and "is used at" not in brk.suggestion
    assert _break_lines(_scaled, x, capture_scalar_outputs=True) == []


def test_a_break_torch_cannot_resume_after_says_the_rest_runs_eagerly_until_it_is_gone() -> None:
    """A timer's `time.perf_counter` inside a `with` block (#76, the thirteenth look's U6):
    torch compiles up to the `with` and runs the rest of forward in eager mode, its random
    draw further in unseen; "the break is gone" read as fewer graphs where there were more.
    The finding says the rest ran eagerly and that a break further in shows once the break
    is gone; torch's explain agrees: one graph and that break alone before, and after the
    fix two graphs and a break at the draw."""
    import importlib.util

    from compilediag.testing import compile_report
    from tests.conftest import ROOT

    def loaded(path: Path):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    timed = ROOT / "tests" / "fixtures" / "timed_block.py"
    module = loaded(timed)
    (found,) = compile_report(module.get_model(), module.get_inputs()).graph_breaks
    assert found.skipped_rest == "forward", found
    assert "the rest of forward runs in eager mode" in found.suggestion, found.suggestion
    assert "a break further in it shows then" in found.suggestion

    def explained(m) -> tuple[int, list[int]]:
        torch._dynamo.reset()
        out = torch._dynamo.explain(m.get_model())(*m.get_inputs())
        torch._dynamo.reset()
        lines = [b.user_stack[-1].lineno for b in out.break_reasons if b.user_stack]
        return out.graph_count, lines

    graphs, _ = explained(module)
    assert graphs == 1
    fixed = Path(__file__).parent / "_timed_fixed.py"
    fixed.write_text(timed.read_text().replace(
        "    t0 = time.perf_counter()\n",
        "    t0 = time.perf_counter() if not torch.compiler.is_compiling() else 0.0\n",
    ).replace(
        "    SPENT[name] = time.perf_counter() - t0\n",
        "    if not torch.compiler.is_compiling():\n        SPENT[name] = time.perf_counter() - t0\n",
    ))  # fmt: skip
    draw = fixed.read_text().splitlines().index("        noise = random.gauss(0.0, 0.01)") + 1
    try:
        graphs, lines = explained(loaded(fixed))
    finally:
        fixed.unlink()
    assert graphs == 2 and lines == [draw], (graphs, lines)
    # a break torch resumed after says nothing of the kind
    resumed = compile_report(_active_rows, (torch.randn(16, 8),)).graph_breaks
    assert resumed and all(not b.skipped_rest for b in resumed)


class _Snapshot(torch.nn.Module):
    """copy.deepcopy of an activation in a module's forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import copy

        h = x * 2
        saved = copy.deepcopy(h)
        return h + saved


class _Cloned(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * 2
        saved = h.detach().clone()
        return h + saved


def test_a_deepcopy_under_a_modules_call_is_fixed_at_the_users_line_not_said_torchs() -> None:
    """A nineteenth look: `copy.deepcopy(h)` in a module's forward read "The break is inside
    torch itself, under your call" (torch's Module.__call__ wraps the call; the break is in
    Python's copy.py); the fix the clone gives removes the break (torch's count)."""
    from torch._dynamo.testing import CompileCounter

    from compilediag.testing import compile_report

    report = compile_report(_Snapshot(), (torch.randn(4),))
    (b,) = report.graph_breaks
    assert b.library_frame is not None and b.library_frame.file.endswith("copy.py"), b
    assert "inside torch itself" not in b.suggestion and ".clone()" in b.suggestion, b
    assert not b.framework
    for model, breaks in ((_Snapshot(), 1), (_Cloned(), 0)):
        torch._dynamo.reset()
        counter = CompileCounter()
        torch.compile(model, backend=counter)(torch.randn(4))
        assert counter.frame_count == breaks + 1, (model, counter.frame_count)


def _shape_print(x: torch.Tensor) -> torch.Tensor:
    h = x * 2
    print("h", h.shape)
    return h + 1


def _tensor_print(x: torch.Tensor) -> torch.Tensor:
    h = x * 2
    print("h", h)
    return h + 1


@pytest.mark.parametrize("fn", [_shape_print, _tensor_print], ids=["size", "tensor"])
def test_the_reorder_setting_is_tried_where_it_alone_removes_the_break(fn) -> None:
    """A twentieth look: `--try-fixes` tried reorderable_logging_functions for a print of a
    shape, where the advice says the setting alone does not remove it (Dynamo cannot defer
    a torch.Size): "no effect". It is tried where torch's own count says it removes it."""
    import contextlib
    import io

    from torch._dynamo.testing import CompileCounter

    from compilediag.analysis.compile.breaks import drops_reordered
    from compilediag.fixes.remedies import remedies_for
    from compilediag.testing import compile_report

    with contextlib.redirect_stdout(io.StringIO()):
        report = compile_report(fn, (torch.randn(4),))
        torch._dynamo.reset()
        counter = CompileCounter()
        with torch._dynamo.config.patch(reorderable_logging_functions={print}):
            torch.compile(fn, backend=counter)(torch.randn(4))
        torch._dynamo.reset()
    tried = [r.name for r in remedies_for(report, drops_reordered=drops_reordered)]
    assert ("reorderable print" in tried) == (counter.frame_count == 1), (tried, counter)


class _Loud(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def, override]
        print("scaling")
        return x * 2

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def, override]
        return g * 2


def _loud(x: torch.Tensor) -> torch.Tensor:
    return _Loud.apply(x) + 1


def test_a_print_in_an_autograd_function_is_not_advised_reordered() -> None:
    """A nineteenth look: a print in an autograd.Function's forward was advised
    reorderable_logging_functions, "the print runs after the graph"; torch drops it there
    (the break goes, nothing is printed). The guard is advised, and torch's count holds."""
    import contextlib
    import io

    from torch._dynamo.testing import CompileCounter

    from compilediag.analysis.compile.breaks import drops_reordered
    from compilediag.fixes.remedies import remedies_for
    from compilediag.testing import compile_report

    with contextlib.redirect_stdout(io.StringIO()):
        report = compile_report(_loud, (torch.randn(4),))
    (b,) = report.graph_breaks
    assert b.suggestion.startswith("Guard it with `if not torch.compiler.is_compiling():`")
    assert "inside a torch.autograd.Function, torch drops a print" in b.suggestion, b
    # (--try-fixes tried it: the break went, the print too)
    assert remedies_for(report, drops_reordered=drops_reordered) == []
    torch._dynamo.reset()
    printed = io.StringIO()
    counter = CompileCounter()
    with torch._dynamo.config.patch(reorderable_logging_functions={print}):
        with contextlib.redirect_stdout(printed):
            torch.compile(_loud, backend=counter)(torch.randn(4))
    assert counter.frame_count == 1 and "scaling" not in printed.getvalue()
    torch._dynamo.reset()
