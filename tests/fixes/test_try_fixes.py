"""--try-fixes: each remedy measured in a run of its own; the after-counts are checked
against torch itself with that remedy applied (torch._dynamo.explain for breaks, per-frame
graph counts under CompileCounter for recompiles)."""

from __future__ import annotations

import pytest

from tests.conftest import (
    TRY_FIXES_SAMPLES,
    load_sample,
    recompiles_run,
    run_json,
    shared_json,
    torch_recompiles,
)

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full


def _patch(torch, config: dict):
    values = {
        k: ({print} | set(getattr(torch._dynamo.config, k)) if v == "fn:builtins.print" else v)
        for k, v in config.items()
    }
    return torch._dynamo.config.patch(**values)


def torch_breaks(sample: str, config: dict) -> tuple[int, int]:
    """(graphs, graph breaks) torch._dynamo.explain finds with the remedy's config."""
    import torch

    model, sets = load_sample(sample)
    torch._dynamo.reset()
    with _patch(torch, config), torch.no_grad():
        out = torch._dynamo.explain(model)(*sets[0])
    torch._dynamo.reset()
    return out.graph_count, out.graph_break_count


@pytest.mark.parametrize(
    ("sample", "remedy", "config"),
    [
        ("item_break.py", "capture_scalar_outputs", {"capture_scalar_outputs": True}),
        (
            "nonzero_break.py",
            "capture_dynamic_output_shape_ops",
            {"capture_dynamic_output_shape_ops": True},
        ),
    ],
)
def test_a_config_remedy_removes_the_break_as_torch_says(sample: str, remedy: str, config) -> None:
    report, proc = run_json(
        "explain", f"sample_models/{sample}", "--backend", "eager", "--no-timings",
        "--try-fixes", "--jobs", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fix = next(f for f in report["verified_fixes"] if f["remedy"] == remedy)
    assert fix["verdict"] == "removes it"
    assert fix["before"]["graph_breaks"] == 1 and fix["after"]["graph_breaks"] == 0
    graphs, breaks = torch_breaks(sample, config)
    assert (fix["after"]["graphs"], fix["after"]["graph_breaks"]) == (graphs, breaks) == (1, 0)
    assert fix["outputs_match"] is True
    assert fix["code"].startswith("torch._dynamo.config.")


def test_a_remedy_that_cannot_help_is_not_tried() -> None:
    """`print("hidden shape", h.shape)`: adding print to reorderable_logging_functions is the
    usual advice, but torch can't reorder a print of a torch.Size - the break stays, as
    the break's own advice says. It was tried anyway, a run for "no effect" (a twentieth
    look); now not: nothing to try, said in the report, and torch's count agrees."""
    report, proc = run_json(
        "explain", "sample_models/print_break.py", "--backend", "eager", "--no-timings",
        "--try-fixes", "--jobs", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert report["verified_fixes"] == []
    assert [n["kind"] for n in report["notes"]].count("nothing_to_try") == 1, report["notes"]
    (brk,) = report["graph_breaks"]
    assert "reorderable_logging_functions alone does not remove it" in brk["suggestion"]
    config = {"reorderable_logging_functions": "fn:builtins.print"}
    assert torch_breaks("print_break.py", config)[1] == 1  # the setting alone: still a break


# sample -> [(remedy, verdict or None for "fewer recompiles", config, compile kwargs)];
# config None: applied per input (mark_dynamic), so torch's count is the run's own
RECOMPILE_CASES = {
    "changing_float.py": [("dynamic=True", "removes it", {}, {"dynamic": True})],
    "changing_batch.py": [
        ("dynamic=True", "removes it", {}, {"dynamic": True}),
        ("mark_dynamic", "removes it", None, None),
    ],
    "per_layer_int.py": [
        ("dynamic=True", "no effect", {}, {"dynamic": True}),
        ("allow_unspec_int_on_nn_module", None, {"allow_unspec_int_on_nn_module": True}, {}),
    ],
}


@pytest.mark.parametrize("sample", sorted(RECOMPILE_CASES))
def test_recompile_remedies_measured_as_torch_counts(sample: str) -> None:
    assert sample in TRY_FIXES_SAMPLES
    report, proc = shared_json(*recompiles_run(sample))
    assert proc.returncode == 0, proc.stderr
    for remedy, verdict, config, kwargs in RECOMPILE_CASES[sample]:
        fix = next(f for f in report["verified_fixes"] if f["remedy"] == remedy)
        assert fix["before"]["recompiles"] == report["summary"]["recompiles"] > 0
        if verdict:
            assert fix["verdict"] == verdict, remedy
        else:
            assert fix["after"]["recompiles"] < fix["before"]["recompiles"], remedy
        if config is not None:
            assert fix["after"]["recompiles"] == torch_recompiles(sample, config, **kwargs), remedy
        assert fix["outputs_match"] is True


def test_reorderable_print_removes_a_print_of_a_string() -> None:
    """graph_breaks.py breaks three times; `print("debug: forward reached")` is one of them,
    and adding print to reorderable_logging_functions removes that one (torch agrees)."""
    report, proc = run_json(
        "explain", "sample_models/graph_breaks.py", "--backend", "eager", "--no-timings",
        "--try-fixes", "--jobs", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fix = next(f for f in report["verified_fixes"] if f["remedy"] == "reorderable print")
    assert fix["verdict"] == "partly"  # the print goes; the branch and the .item() stay
    assert (fix["before"]["graph_breaks"], fix["after"]["graph_breaks"]) == (3, 2)
    config = {"reorderable_logging_functions": "fn:builtins.print"}
    assert torch_breaks("graph_breaks.py", config)[1] == 2
    together = next(f for f in report["verified_fixes"] if f["remedy"] == "all of the above")
    assert together["after"]["graph_breaks"] < fix["after"]["graph_breaks"]


DTYPES = """\
import torch


def scaled(x):
    return torch.tanh(x) * 2


def get_model():
    return scaled


def get_inputs():
    return (torch.randn(2, 4),)


def get_input_sets():
    return [(torch.randn(2, 4),), (torch.randn(2, 4, dtype=torch.float64),)]
"""


def test_try_fixes_with_nothing_to_try_says_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A seventeenth look: `recompiles --try-fixes` printed no remedies and no line saying
    why. A recompile no setting removes (a dtype), and a model with no finding, each say
    there is nothing to try, and why."""
    from tests.conftest import run_cli

    model = tmp_path / "dtypes.py"
    model.write_text(DTYPES)
    proc = run_cli("recompiles", str(model), "--backend", "eager", "--try-fixes")
    assert "--try-fixes: nothing to try: no finding here has a remedy" in proc.stderr, proc.stderr
    clean = run_cli("explain", "sample_models/clean_mlp.py", "--backend", "eager",
                    "--no-timings", "--try-fixes")  # fmt: skip
    assert "nothing to try: no graph break and no recompile to remove" in clean.stderr
    assert "nothing to try: no graph break and no recompile to remove" in clean.stdout
