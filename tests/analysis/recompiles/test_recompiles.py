"""Recompilations: guard translation on recorded traces, and the real sweep checked
against torch's own record of guard failures (an independent run in this process)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from compilediag.analysis.history import build_history
from compilediag.analysis.recompiles.guard_words import translate
from compilediag.analysis.recompiles.recompiles import collect_recompiles
from compilediag.trace.parse import parse_path
from tests.conftest import (
    fixture_trace,
    recompiles_run,
    run_cli,
    run_json,
    shared_json,
    torch_recompiles,
    trace_sets,
)

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full


@pytest.mark.parametrize(
    ("guard", "words", "cause"),
    [
        (
            "tensor 'x' size mismatch at index 1. expected 512, actual 256",
            "x dim 1 changed 512 → 256",
            "shape",
        ),
        (
            "temperature == 0.7",
            "temperature changed (was 0.7): a Python float is baked into the graph",
            "float",
        ),
        (  # torch's full digits said in 6 significant figures (a sixth look read all 17)
            "L['scale'] == 2.4145517349243164",
            "scale changed (was 2.41455…): a Python float is baked into the graph",
            "float",
        ),
        (
            "L['self'].layer_id == 3",
            "self.layer_id changed (was 3): a Python int is baked into the graph",
            "int",
        ),
        (
            "tensor 'L['kwargs']['input_ids']' size mismatch at index 0. expected 2, actual 4",
            "input_ids dim 0 changed 2 → 4",
            "shape",
        ),
        (
            "L['activation'] == 'relu'",
            "activation changed (was 'relu'): a Python string is baked into the graph",
            "string",
        ),
        (
            "fn._modules['1'].training == True",
            "module attribute `fn[1].training` changed (was True)",
            "training",
        ),
        (
            "___check_obj_id(L['self'].attn.processor, 140234)",
            "a different object for `self.attn.processor`",
            "object",
        ),
        ("GLOBAL_STATE changed: grad_mode ", "global state changed: grad mode", "global"),
        ("2 <= L['x'].size()[0]", "x dim 0 fell below 2", "shape"),
        ("len(L['xs']) == 3", "length of `xs` changed (was 3)", "length"),
        # an empty list's guard (torch 2.13: a list forward appends to, compiled on its
        # first call)
        ("not L['self'].seen", "length of `self.seen` changed (was 0)", "length"),
    ],
)
def test_translate(guard: str, words: str, cause: str) -> None:
    got_words, got_cause, advice = translate(guard)
    assert (got_words, got_cause) == (words, cause)
    assert advice


def test_a_strings_advice_holds_for_any_string() -> None:
    """A twelfth look: `mode` ("greedy" or "sample") was advised `self.fn = getattr(torch,
    mode)`, and torch.greedy does not exist. The advice says what torch does with each
    value, true by torch's own count (a value seen before compiles nothing), and how to
    take the string out of the compiled code whatever it names."""
    import torch
    from torch._dynamo.testing import CompileCounter

    _, _, advice = translate("L['mode'] == 'sample'")
    assert "getattr(torch" not in advice and "a value seen before reuses its graph" in advice

    def pick(x: torch.Tensor, mode: str) -> torch.Tensor:
        return x.argmax(-1).float() if mode == "greedy" else x.softmax(-1).sum(-1)

    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(pick, backend=counter)
    for mode in ("greedy", "sample", "greedy", "sample", "greedy"):
        compiled(torch.randn(2, 8), mode)
    assert counter.frame_count == 2


def test_mark_dynamic_advice_names_the_input_and_dim() -> None:
    _, _, advice = translate("tensor 'x' size mismatch at index 1. expected 512, actual 256")
    assert "torch._dynamo.mark_dynamic(x, 1)" in advice
    _, _, advice = translate("tensor 'x' size mismatch at index 0. expected 1, actual 4")
    assert "Sizes 0 and 1 are always specialised" in advice
    # the dim it is about, not "batches" whatever the dim (a one-token prompt: dim 1)
    _, _, advice = translate("tensor 'idx' size mismatch at index 1. expected 1, actual 2")
    assert "keep idx dim 1 at 2 or more" in advice, advice


@pytest.mark.parametrize("folder", trace_sets("batch_sweep.eager"), ids=lambda p: p.name)
def test_batch_sweep_recording(folder: Path) -> None:
    (log,) = parse_path(fixture_trace("batch_sweep.eager", folder))
    (r,) = collect_recompiles(build_history([log]))
    assert r.cause == "shape" and "dim 0 changed 2 → 4" in r.failed_guard
    assert r.automatic_dynamic, "torch marks the dim dynamic on this recompile"


@pytest.mark.parametrize(
    ("sample", "cause"),
    [
        (sample, cause)
        for sample, cause in [
            ("changing_batch.py", "shape"),
            ("changing_float.py", "float"),
            ("train_eval_switch.py", "training"),
            ("per_layer_int.py", "int"),
            ("recompile_limit.py", "int"),
        ]
    ],
)
def test_recompile_count_matches_torch(sample: str, cause: str) -> None:
    report, proc = shared_json(*recompiles_run(sample))
    assert proc.returncode == 0, proc.stderr
    assert report["summary"]["recompiles"] == torch_recompiles(sample) > 0
    assert {r["cause"] for r in report["recompiles"]} == {cause}
    assert all(r["failed_guard"] and r["suggestion"] for r in report["recompiles"])


def test_timeline_and_automatic_dynamic() -> None:
    report, _ = shared_json(*recompiles_run("changing_batch.py"))
    assert [c["compiled"] for c in report["calls"]] == [True, True, False]
    (r,) = report["recompiles"]
    assert r["failed_guard"] == "input dim 0 changed 2 → 4"  # nn.Sequential.forward(input)
    assert r["automatic_dynamic"] is True


def test_dynamic_true_removes_shape_recompiles() -> None:
    report, proc = run_json(
        "recompiles", "sample_models/clean_mlp.py", "--shapes", "2x32,4x32,8x32", "--dynamic"
    )
    assert proc.returncode == 0
    assert report["summary"]["recompiles"] == 0
    assert [c["compiled"] for c in report["calls"]] == [True, False, False]
    static, _ = run_json("recompiles", "sample_models/clean_mlp.py", "--shapes", "2x32,4x32,8x32")
    assert static["summary"]["recompiles"] == 1


def test_recompile_limit_post_mortem(tmp_path: Path) -> None:
    report, _ = shared_json(*recompiles_run("recompile_limit.py"))
    (hit,) = report["recompile_limit_hits"]
    assert hit["limit"] == 8 and hit["compiles"] == 8
    assert Path(hit["file"]).name == "per_layer_int.py"
    (reason,) = hit["distinct_reasons"]  # the 8 graphs' values, in turn
    assert "self.layer_id changed (was 0, then 1, … then 7: 8 values)" in reason, reason
    saved = tmp_path / "report.json"  # the table view of the same run, from the saved report
    saved.write_text(json.dumps(report))
    proc = run_cli("render", str(saved))
    assert "Recompile limit hit" in proc.stdout and "run in eager mode" in proc.stdout


def test_a_frame_at_half_the_limit_is_said_close_to_it_with_the_sizes_that_filled_it() -> None:
    """dynamic=False and five batch sizes: five graphs of torch's limit of eight, by torch's
    own CompileCounter and config in this process; the note names the sizes in turn. The
    advice applied (dynamic) leaves no note; three sizes (under half the limit) none."""
    import torch
    from torch._dynamo.testing import CompileCounter

    from sample_models.changing_batch import get_model

    sizes = [2, 3, 4, 5, 6]
    counter = CompileCounter()
    torch._dynamo.reset()
    compiled = torch.compile(get_model(), backend=counter, dynamic=False)
    with torch.no_grad():
        for b in sizes:
            compiled(torch.randn(b, 16))
    torch._dynamo.reset()
    sweep = ",".join(f"{b}x16" for b in sizes)
    args = ("recompiles", "sample_models/changing_batch.py", "--shapes")

    def close(*more: str) -> list[str]:
        report, proc = run_json(*args, *more)
        assert proc.returncode == 0, proc.stderr
        return [n["message"] for n in report["notes"] if n["kind"] == "close_to_limit"]

    (said,) = close(sweep, "--no-dynamic")
    limit = torch._dynamo.config.recompile_limit
    assert f"has used {counter.frame_count} of torch's recompile limit of {limit} graphs " in (
        said
    ), (said, counter.frame_count)
    assert "input dim 0: 2 → 3 → 4 → 5 → 6" in said, said
    assert close(sweep, "--dynamic") == []
    assert close("2x16,3x16,4x16", "--no-dynamic") == []


class _Moded(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mode = "a"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.relu() if self.mode == "a" else x.sigmoid()


def test_a_flag_that_filled_half_the_limit_is_said_once_with_its_values_in_turn() -> None:
    """A look: the note listed `self.mode changed (was 'a')`, `(was 'b')`, `(was 'c')` as
    three reasons, each with its words. One now, its values in turn; the graphs are
    torch's CompileCounter's."""
    from torch._dynamo.testing import CompileCounter

    import compilediag

    def flips(model: _Moded, compiled: Callable[[torch.Tensor], torch.Tensor]) -> None:
        for mode in "abcd":
            model.mode = mode
            compiled(torch.randn(3))

    counter, model = CompileCounter(), _Moded()
    torch._dynamo.reset()
    flips(model, torch.compile(model, backend=counter))
    with compilediag.capture() as run:
        model = _Moded()
        flips(model, torch.compile(model, backend="eager"))
    (said,) = [n.message for n in run.report().notes if n.kind == "close_to_limit"]
    assert f"has used {counter.frame_count} of torch's recompile limit" in said, said
    assert "self.mode changed (was 'a', then 'b', then 'c'): a Python string" in said, said
    assert "more like it" not in said and said.count("self.mode") == 1, said


def test_an_int_that_sets_a_loops_count_is_advised_as_an_int() -> None:
    """`for _ in range(steps)`: before, "make `steps` a tensor or compile with dynamic=True";
    by torch's own CompileCounter dynamic=True makes as many graphs. Now: it stays an int,
    few values; steps rounded up to one bucket, one graph."""
    import torch
    from torch._dynamo.testing import CompileCounter

    from tests.fixtures.loop_count import get_input_sets, get_model

    def graphs(sets: list, **kwargs: object) -> int:
        torch._dynamo.reset()
        counter = CompileCounter()
        compiled = torch.compile(get_model(), backend=counter, **kwargs)
        for args in sets:
            compiled(*args)
        torch._dynamo.reset()
        return counter.frame_count

    sets = get_input_sets()
    report, proc = run_json("recompiles", "tests/fixtures/loop_count.py")
    assert proc.returncode == 0, proc.stderr
    assert len(report["recompiles"]) == graphs(sets) - 1 == 2
    said = " ".join(r["suggestion"] for r in report["recompiles"])
    assert "`steps` sets Python control flow at loop_count.py:" in said, said
    assert "a tensor or compile with dynamic=True" not in said
    assert graphs(sets, dynamic=True) == len(sets)  # what the old advice would have given
    assert graphs([(x, 4) for x, _ in sets]) == 1  # one bucket: one graph


def test_the_code_after_a_break_in_a_helper_is_named_as_the_helpers() -> None:
    """A break inside a helper that forward calls: the code after it, whose local changes
    size, is the helper's own (torch recompiles torch_dynamo_resume_in_pick_at_N), and the
    advice names the helper. Before: "a local of forward here" (a thirteenth look)."""
    import torch

    from tests.fixtures.helper_break import get_model

    report, proc = run_json(
        "recompiles", "tests/fixtures/helper_break.py", "--shapes", "2x16,4x16", "--backend",
        "eager",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (r,) = [r for r in report["recompiles"] if r["frame"].startswith("pick, after line")]
    assert "a local of pick here" in r["suggestion"] and "of forward" not in r["suggestion"]
    # torch's answer: the frame whose guard failed is the helper's resumed code
    torch._dynamo.reset()
    model = torch.compile(get_model(), backend="eager")
    for n in (2, 4):
        model(torch.randn(n, 16))
    names = {code.co_name for code in torch._dynamo.utils.guard_failures}
    assert any(x.startswith("torch_dynamo_resume_in_pick_at_") for x in names), names
    torch._dynamo.reset()


@pytest.mark.parametrize(
    ("fixture", "backend", "function", "as_tensor"),
    [
        ("pool_windows", "eager", "max_pool1d", lambda x, w: (x, [torch.tensor(w[0]), w[1]])),
        ("smoothing_eps", "aot_eager", "cross_entropy",
         lambda x, y, eps: (x, y, torch.tensor(eps))),
    ],
)  # fmt: skip
def test_a_number_torchs_function_takes_is_not_advised_as_a_tensor_or_dynamic(
    fixture: str, backend: str, function: str, as_tensor
) -> None:
    """A float or int a function of torch's API takes as a Python number (max_pool1d's
    kernel size, cross_entropy's label_smoothing; a thirteenth look's F7, F8): torch's record
    of it made a constant names the function, and the advice says neither a tensor nor
    dynamic=True keeps one graph. Before: "torch already made it dynamic ... later values
    reuse this graph" and "Pass `eps` as a tensor, or compile with dynamic=True"; by torch's
    own count dynamic=True compiles as many graphs, and a tensor compiles no fewer."""
    import importlib

    from torch._dynamo.testing import CompileCounterWithBackend

    report, proc = run_json("recompiles", f"tests/fixtures/{fixture}.py", "--backend", backend)
    assert proc.returncode == 0, proc.stderr
    assert report["recompiles"]
    for r in report["recompiles"]:
        said = r["suggestion"]
        assert f"torch's `{function}` takes" in said and "nor is dynamic=True" in said, said
        assert "reuse this graph" not in said and not r["automatic_dynamic"]
    module = importlib.import_module(f"tests.fixtures.{fixture}")

    def frames(sets: list, **kwargs: object) -> int:
        torch._dynamo.reset()
        counter = CompileCounterWithBackend(backend)
        model = torch.compile(module.get_model(), backend=counter, **kwargs)
        for args in sets:
            model(*args)
        torch._dynamo.reset()
        return counter.frame_count

    sets = module.get_input_sets()
    plain = frames(sets)  # (a backend call more where torch restarted to bake a float in)
    assert plain >= len(sets) == len(report["recompiles"]) + 1
    assert frames(sets, dynamic=True) >= len(sets)  # dynamic=True: a graph a value all the same
    # a tensor: a graph a value all the same, or a break where the function reads it
    tensors = [as_tensor(*a) for a in sets]
    torch._dynamo.reset()
    broken = len(torch._dynamo.explain(module.get_model())(*tensors[0]).break_reasons)
    assert frames(tensors) > 1 or broken >= 1, broken


def test_a_helpers_row_count_after_its_break_is_not_called_a_loaders_last_batch() -> None:
    """A helper's `nonzero` rows, 5 then 4, recompile the code after its break: a local of
    the helper, not a batch (the model's input is 8 rows each call) and no loader anywhere.
    Before: "A smaller batch (5 → 4) ... the loader's last, partial batch ... drop_last=True"
    (a re-check of a thirteenth look). torch names the frame the helper's resumed code."""
    from tests.fixtures.helper_rows import get_input_sets, get_model

    report, proc = run_json("recompiles", "tests/fixtures/helper_rows.py", "--backend", "eager")
    assert proc.returncode == 0, proc.stderr
    (r,) = [r for r in report["recompiles"] if r["frame"].startswith("pick, after line")]
    assert "drop_last" not in r["suggestion"] and "batch" not in r["suggestion"], r
    # the rows are what the breaking line's nonzero returned, made eagerly (no mark reaches)
    assert "what the call that broke the graph returned (line" in r["suggestion"], r
    assert "nonzero()" in r["suggestion"], r
    torch._dynamo.reset()
    model = torch.compile(get_model(), backend="eager")
    for (x,) in get_input_sets():
        assert x.shape[0] == 8
        model(x)
    names = {code.co_name for code in torch._dynamo.utils.guard_failures}
    assert any(x.startswith("torch_dynamo_resume_in_pick_at_") for x in names), names
    torch._dynamo.reset()


def test_max_recompiles_gate() -> None:
    over = run_cli("recompiles", "sample_models/changing_float.py", "--max-recompiles", "0")
    assert over.returncode == 1 and "FAIL max-recompiles" in over.stdout
    under = run_cli("recompiles", "sample_models/changing_float.py", "--max-recompiles", "1")
    assert under.returncode == 0


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ("2xx", "is not a shape"),
        ("", "--shapes is empty"),
        ("2x32x3", "has 3 dims"),
        ("2x31", "does not fit the model"),
        ("2x31", "Each --shapes entry is the first tensor input's shape"),
    ],
)
def test_bad_shapes_are_usage_errors(shapes: str, message: str) -> None:
    proc = run_cli("recompiles", "sample_models/clean_mlp.py", "--shapes", shapes)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def _frame_count(fn, first: tuple, calls: list[tuple], marks=(), **compile_kwargs) -> int:
    """torch's answer: CompileCounter's frames on the same calls."""
    import torch
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(fn, backend=counter, **compile_kwargs)
    for name_dim in marks:
        torch._dynamo.mark_dynamic(first[0], int(name_dim[1]))
    with torch.no_grad():
        for args in [first, *calls]:
            compiled(*args)
    torch._dynamo.reset()
    return counter.frame_count


def test_two_dims_get_one_advice_that_removes_every_recompile() -> None:
    """Batch, then sequence length: the advice marks both dims, and applied it leaves one
    compile (CompileCounter)."""
    import re

    torch = pytest.importorskip("torch")
    from compilediag.testing import compile_report

    def f(x):
        return (x * 2).sum(-1)

    first = (torch.randn(2, 8),)
    calls = [(torch.randn(4, 8),), (torch.randn(4, 16),)]
    report = compile_report(f, first, calls=calls)
    assert len(report.recompiles) == _frame_count(f, first, calls) - 1 == 2
    advice = report.recompiles[-1].suggestion
    marks = re.findall(r"mark_dynamic\((\w+), (\d+)\)", advice)
    assert sorted(marks) == [("x", "0"), ("x", "1")], advice
    assert _frame_count(f, (torch.randn(2, 8),), calls, marks=marks) == 1


def test_a_size_one_specialisation_is_not_called_automatic_dynamic() -> None:
    """dynamic=True, then a batch of 1: torch compiles a graph for size 1 (CompileCounter
    2 frames); that is no automatic dynamic, and the advice says why it recompiles."""
    torch = pytest.importorskip("torch")
    from compilediag.testing import compile_report

    def f(x):
        return (x * 2).relu()

    first, calls = (torch.randn(4, 8),), [(torch.randn(1, 8),)]
    report = compile_report(f, first, calls=calls, dynamic=True)
    assert len(report.recompiles) == _frame_count(f, first, calls, dynamic=True) - 1 == 1
    (r,) = report.recompiles
    assert not r.automatic_dynamic
    assert "already made it dynamic" not in r.suggestion
    assert "sizes 0 and 1 are always specialised" in r.suggestion.lower()


def test_a_dynamic_size_bounded_by_a_comparison_is_said_so_and_torch_where_removes_it() -> None:
    """A branch on a size that torch made dynamic bounds the dynamic graph (`2 <= x.size()[1]
    <= 9`); a size past it recompiles. Counted as CompileCounter counts; the advice (compute
    both sides as tensors) applied leaves only the automatic-dynamic recompile."""
    torch = pytest.importorskip("torch")
    from compilediag.testing import compile_report

    def branchy(x):
        if x.shape[1] < 10:
            return x * 2
        return x + 1

    def fixed(x):
        return torch.where(torch.tensor(x.shape[1] < 10), x * 2, x + 1)

    first = (torch.randn(2, 4),)
    calls = [(torch.randn(2, n),) for n in (5, 6, 12)]
    report = compile_report(branchy, first, calls=calls)
    assert len(report.recompiles) == _frame_count(branchy, first, calls) - 1 == 2
    bounded = report.recompiles[-1]
    assert bounded.cause == "bounded"
    assert bounded.failed_guard == "x dim 1 left 2..9, the sizes its dynamic graph covers"
    assert "torch.where" in bounded.suggestion and "mark_dynamic" not in bounded.suggestion
    assert _frame_count(fixed, first, calls) - 1 == 1  # only 4 -> 5 (automatic dynamic) is left


def test_a_condition_on_a_dynamic_size_is_put_in_words_and_moving_it_out_removes_it() -> None:
    """An eleventh look: `n = int(h.shape[0]); if n % 2 == 1:` after the batch turned dynamic
    recompiled at the odd size with `failed (x.size()[0] % 2) != 1` and no fix named. Now the
    condition is said on the dim, at its line, with the bounded advice; applied (the branch
    moved out of the compiled code) only the automatic-dynamic recompile is left, as
    CompileCounter counts."""
    torch = pytest.importorskip("torch")
    from compilediag.testing import compile_report

    def parity(x):
        n = int(x.shape[0])
        if n % 2 == 1:
            x = x + 1
        return x * 2

    def moved(x):
        return x * 2

    first = (torch.randn(32, 4),)
    calls = [(torch.randn(n, 4),) for n in (16, 8, 7)]
    report = compile_report(parity, first, calls=calls)
    assert len(report.recompiles) == _frame_count(parity, first, calls) - 1 == 2
    split = report.recompiles[-1]
    assert split.cause == "bounded", split
    assert split.failed_guard.startswith("x dim 0 no longer meets `(x dim 0 % 2)"), split
    here = Path(__file__).read_text().splitlines()
    assert split.guard_line == here.index("        if n % 2 == 1:") + 1, split
    assert "move the branch out of the compiled code" in split.suggestion, split.suggestion
    assert _frame_count(moved, first, calls) - 1 == 1  # only 32 -> 16 (automatic dynamic)


def test_what_else_a_call_changed_names_the_field_that_moved() -> None:
    """also_changed's words for two guard sets of one source (check_tensor and the other
    value guards, as torch 2.13-2.15 write them in `dynamo_cpp_guards_str`): a 0-d tensor
    is no `size `, a tensor whose size held says what moved, an identity guard is another
    object; never `X → X`."""
    from compilediag.trace.formats import guard_change

    def tensor(size: str, grad: str = "False") -> frozenset[str]:
        return frozenset({
            f"TENSOR_MATCH: check_tensor(L['value'], Tensor, DispatchKeySet(CPU), torch.float32, "
            f"device=None, requires_grad={grad}, size=[{size}], stride=[])"
        })  # fmt: skip

    assert guard_change(tensor("64, 10"), tensor("40, 10")) == "size 64x10 → size 40x10"
    assert guard_change(tensor(""), tensor("", "True")) == "requires_grad False → True"
    assert guard_change(tensor("", "True"), tensor("3")) == "a 0-d tensor → size 3"
    ids = [frozenset({f"ID_MATCH: ___check_obj_id(L['stage'], {n})"}) for n in (1, 2)]
    assert guard_change(*ids) == "another object"
    said = [guard_change(tensor(""), tensor("")), guard_change(*ids)]
    assert all(" → " not in s or s.split(" → ")[0] != s.split(" → ")[1] for s in said)


def test_what_else_a_call_changed_names_each_value_of_a_dict_it_was_passed() -> None:
    """A dict's keys and values have guard managers of their own (`KeyManager:`,
    `ValueManager: GuardManager: source=...`): each value's guards are its own, never the
    source listed before the dict's (Mask R-CNN's `features` were once told as
    `images.image_sizes[0]`). The call that recompiles on `x` also changed `feats['a']`,
    not `feats['b']`; torch's recompiles log agrees on the count."""
    import torch

    from compilediag.testing import compile_report

    def f(x, feats):
        return x * 2, [v.sum() for v in feats.values()]  # iterated: a DictGuardManager

    def call(n: int, m: int) -> tuple:
        return torch.randn(n, 4), {"a": torch.randn(m, 3), "b": torch.randn(5)}

    first, calls = call(2, 3), [call(3, 4)]
    report = compile_report(f, first, calls=calls)
    assert len(report.recompiles) == _frame_count(f, first, calls) - 1 == 1
    (r,) = report.recompiles
    assert r.failed_guard == "x dim 0 changed 2 → 3"
    assert r.also_changed == ["`feats['a']` (size 3x3 → size Nx3 with dim 0 dynamic)"], (
        r.also_changed
    )


def test_an_int_argument_made_dynamic_is_said_so_and_no_module_setting_is_advised() -> None:
    """A sampler's `k` (an argument of forward, not a module's attribute): a new value
    recompiles once and torch takes it as a symbol after (a further value compiles nothing,
    CompileCounter). The words say torch made it dynamic, as for a float, and advise no
    allow_unspec_int_on_nn_module (a look read it beside an argument, where it does
    nothing); compiled with dynamic=True, as advised, nothing recompiles."""
    torch = pytest.importorskip("torch")
    from compilediag.fixes.remedies import remedies_for
    from compilediag.testing import compile_report

    def sample(x, k):
        v, _ = torch.topk(x, k)
        return torch.softmax(v, dim=-1)

    x = torch.randn(4, 50)
    first, calls = (x, 5), [(x, 8)]
    report = compile_report(sample, first, calls=calls)
    assert len(report.recompiles) == _frame_count(sample, first, calls) - 1 == 1
    (r,) = report.recompiles
    assert r.cause == "int" and r.failed_guard.startswith("k changed (was 5)"), r.failed_guard
    assert _frame_count(sample, first, [*calls, (x, 10)]) == 2  # later values: no compile
    assert r.automatic_dynamic and "torch already made it dynamic" in r.suggestion, r.suggestion
    assert "allow_unspec_int_on_nn_module" not in r.suggestion
    assert "allow_unspec_int_on_nn_module" not in {m.name for m in remedies_for(report)}
    assert _frame_count(sample, first, [*calls, (x, 10)], dynamic=True) == 1


def test_a_bound_a_library_line_names_first_is_given_at_the_users_line() -> None:
    """A Linear, then `if x.shape[0] > 6:`: sizes 2, 4, 8. torch's guard for the third
    names two sites, the Linear's line in torch first (the 0/1 specialisation) and then
    the user's comparison; the guard's line is the user's (a look read none, while the
    README promises it), as torch's own recompile reason says it."""
    torch = pytest.importorskip("torch")
    from compilediag.testing import compile_report

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)

        def forward(self, x):
            h = self.lin(x)
            if x.shape[0] > 6:
                h = h * 0.5
            return h + x

    torch.manual_seed(0)
    model = Encoder()
    first, calls = (torch.randn(2, 16),), [(torch.randn(4, 16),), (torch.randn(8, 16),)]
    report = compile_report(model, first, calls=calls)
    assert len(report.recompiles) == _frame_count(model, first, calls) - 1 == 2
    bounded = report.recompiles[-1]
    here = Path(__file__).read_text().splitlines()
    line = here.index("            if x.shape[0] > 6:") + 1
    named = [r for r in bounded.reasons if f"{Path(__file__).name}:{line}" in r]
    assert named, bounded.reasons  # torch's own reason names the user's line
    assert (Path(bounded.guard_file).name, bounded.guard_line) == (Path(__file__).name, line)
    # 0/1 made the size dynamic: "later values reuse this graph" holds within its bound
    # alone, and 8 compiled again (a look read the sentence whole)
    dynamic = report.recompiles[0]
    assert dynamic.automatic_dynamic, dynamic
    assert f"reuse this graph where its guards hold ({bounded.compile_id} compiled again" in (
        dynamic.suggestion
    ), dynamic.suggestion


def test_a_lists_items_that_change_in_turn_are_two_recompiles_not_the_same_one() -> None:
    """An eleventh look: lengths = (x != 0).sum(1).tolist() after a break; item 0 changed
    first, then item 5 (which torch had left static at the first recompile). The report said
    "then the same, 1 more time" (the quoted line's ': ' cut both guards' words to the same
    text) and "one recompile of this frame for a new value, then none" for each item. Now
    the second is item 5, and the run's recompiles of the frame for the list are counted
    together, as torch's CompileCounter counts them."""
    torch = pytest.importorskip("torch")
    from compilediag.render.table.recompiles import failed_words
    from compilediag.render.views import recompile_causes
    from compilediag.testing import compile_report

    class Bag(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(20, 8)

        def forward(self, x):
            h = self.emb(x)
            lengths = (x != 0).sum(1).tolist()
            return torch.stack([h[i, :n].mean(0) for i, n in enumerate(lengths)])

    def batch(lengths: list[int]) -> tuple:
        x = torch.zeros(len(lengths), 8, dtype=torch.long)
        for i, n in enumerate(lengths):
            x[i, :n] = 1 + i
        return (x,)

    first = batch([8, 8, 8, 8, 8, 8])
    calls = [batch([5, 6, 7, 5, 6, 8]), batch([6, 5, 5, 7, 7, 4])]
    report = compile_report(Bag(), first, calls=calls)
    frames = _frame_count(Bag(), first, calls)
    items = [r for r in report.recompiles if "`lengths`" in r.failed_guard]
    assert len(items) == 2 and frames == 2 + 2, (frames, [r.failed_guard for r in items])
    assert "[0] changed" in items[0].failed_guard and "[5] changed" in items[1].failed_guard
    for r in items:
        assert "2 recompiles of this frame for its new values" in r.suggestion, r.suggestion
    (cause,) = [c for c in recompile_causes(report) if c.items[0] in items]
    rows = dict((k, str(v)) for k, v in failed_words(report, cause))
    assert "[5] changed" in rows["then"] and "the same" not in rows["then"], rows


def _timed(fn):
    """A timing decorator, as a user writes one (the clock read inside the compiled code)."""
    import functools
    import time

    @functools.wraps(fn)
    def wrapper(*args):
        t0 = time.perf_counter()
        out = fn(*args)
        wrapper.last = time.perf_counter() - t0
        return out

    return wrapper


def test_a_clock_reading_is_advised_out_of_the_compiled_code_not_into_a_tensor() -> None:
    """An eleventh look: `t0 = time.perf_counter()` in a timing decorator, its value passed
    on after the clock's break, recompiled the code after it; the advice was "Pass `t0` as a
    tensor (torch.tensor(14170.674946891))". Now it is named a clock's reading, with what
    this run showed of its new values, and the advice (time around the compiled call)
    applied leaves one graph, no break and no recompile (CompileCounter)."""
    torch = pytest.importorskip("torch")
    from compilediag.testing import compile_report

    @_timed
    def attend(x):
        return torch.softmax(x, -1)

    def model(x):
        return attend(x) * 2

    def timed_outside(x):
        return torch.softmax(x, -1) * 2

    x = torch.randn(4, 8)
    first, calls = (x,), [(x,), (x,), (x,)]
    report = compile_report(model, first, calls=calls)
    clock = [r for r in report.recompiles if "t0" in r.failed_guard]
    assert clock, [r.failed_guard for r in report.recompiles]
    for r in clock:
        assert "is a clock's reading (line" in r.suggestion and "t0 = time.perf_counter()" in (
            r.suggestion
        ), r.suggestion
        assert "torch.tensor(" not in r.suggestion and "in this run, " in r.suggestion
    assert _frame_count(timed_outside, first, calls) == 1


PAIRED = """\
import torch


class Pair(torch.nn.Module):
    def forward(self, ids, mask):
        return (ids * mask).sum(1)


def get_inputs():
    return (torch.ones(2, 16), torch.ones(2, 8))
{sets}"""
PAIRED_SETS = """
def get_input_sets():
    return [(torch.ones(b, 16), torch.ones(b, 16)) for b in (2, 4)]
"""


def test_a_shapes_entry_the_other_inputs_do_not_fit_names_get_input_sets(tmp_path: Path) -> None:
    """--shapes varies the first tensor (and those of its shape): a second tensor of another
    shape keeps get_inputs()' and the call fails (a look: a T5's encoder ids against its
    decoder ids). The message says how to vary both: get_input_sets(), which then runs."""
    model = tmp_path / "pair.py"
    model.write_text(PAIRED.format(sets=""))
    proc = run_cli("recompiles", str(model), "--shapes", "4x16", "--backend", "eager")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "(4x16:float32, 2x8:float32) does not fit" in said, said
    assert "the other tensors keep get_inputs()' shapes" in said and "get_input_sets()" in said
    model.write_text(PAIRED.format(sets=PAIRED_SETS))
    proc = run_cli("recompiles", str(model), "--backend", "eager")
    assert proc.returncode == 0, proc.stderr


SPLIT = """\
import torch


class Split(torch.nn.Module):
    def forward(self, x):
        x = x.relu()
        print("between")
        return (x * 2).sum(1)


def get_inputs():
    return (torch.randn(2, 16),)
"""


def _frames_torch_compiles(mark: bool) -> list[int]:
    """torch's answer: the frames' compiles (CompileCounter's graphs, the frame of each
    recorded by Dynamo's own frame counter) over the sweep, x marked dynamic or not."""
    import torch
    from torch._dynamo.testing import CompileCounter
    from torch._dynamo.utils import counters

    namespace: dict = {}
    exec(SPLIT, namespace)
    torch._dynamo.reset()
    counters.clear()
    counter = CompileCounter()
    compiled = torch.compile(namespace["Split"](), backend=counter)
    for n in (16, 32):
        x = torch.randn(2, n)
        if mark and n == 16:
            torch._dynamo.mark_dynamic(x, 1)
        compiled(x)
    return [counter.frame_count, sum(counters["recompiles"].values())]


def test_each_frame_of_a_cause_keeps_its_own_fix(tmp_path: Path) -> None:
    """A print splits forward; x's dim 1 changes: forward and the code after the print each
    recompile, one cause. The table gave the lead's fix alone (mark x dynamic), which torch
    shows does not reach the code after the break: its input is forward's local. Each
    frame's own fix is said with its id."""
    model = tmp_path / "split.py"
    model.write_text(SPLIT)
    proc = run_cli("recompiles", str(model), "--shapes", "2x16,2x32", "--backend", "eager")
    assert proc.returncode == 0, proc.stderr
    block = " ".join(proc.stdout.split("Recompiles (2)", 1)[1].split("Graphs", 1)[0].split())
    assert "fix 0/1" in block and "mark_dynamic(x, 1)" in block, block
    assert "fix 1/1" in block and "can't be marked" in block, block
    # torch: 4 graphs unmarked; marked, forward compiles once and the frame after still twice
    assert _frames_torch_compiles(mark=False)[0] == 4
    assert _frames_torch_compiles(mark=True)[0] == 3
