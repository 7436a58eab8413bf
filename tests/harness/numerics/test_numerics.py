"""Compiled against eager and float64 (`numerics`), end to end on models written for each
cause: the verdict, the stage, the first op's line, the cause in words, checked against
torch's own answer on the same inputs, and the repro run in a clean process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import _SHARED, ROOT, SAMPLES, load_sample, shared_json

NUMERICS = SAMPLES / "numerics"


def explain(name: str) -> dict:
    """The report of `explain --fail-on-mismatch` on a sample (one run a session), its repro
    in a folder of its own; the gate passes a difference that is random numbers only or
    eager's rounding, and fails one that is neither (exit 1)."""
    path = NUMERICS / name if (NUMERICS / name).exists() else SAMPLES / name
    repro = _SHARED / "repro" / Path(name).stem
    report, proc = shared_json(
        "explain", str(path), "--no-timings", "--repro-dir", str(repro), "--fail-on-mismatch"
    )
    verdict = report["numerics"]["verdict"]
    if verdict == "not_compared":  # the compile failed (exit 4)
        assert proc.returncode == 4, proc.stderr
        return report
    passing = verdict != "differ"
    assert proc.returncode == (0 if passing else 1), proc.stderr
    (rule,) = [r for r in report["verdict"]["rules"] if r["name"] == "fail-on-mismatch"]
    assert rule["passed"] is passing
    return report


def line_of(name: str, text: str) -> int:
    lines = (NUMERICS / name).read_text().splitlines()
    return next(i for i, x in enumerate(lines, 1) if text in x)


def run_repro(path: str) -> subprocess.CompletedProcess:
    """The repro in a clean process, from a folder that is not ours."""
    return subprocess.run(
        [sys.executable, path], capture_output=True, text=True, timeout=600, cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )  # fmt: skip


def test_a_model_whose_outputs_truly_match_stays_quiet() -> None:
    report = explain("clean_mlp.py")
    n = report["numerics"]
    assert n["verdict"] == "match" and n["words"].startswith("outputs match eager")
    assert n["searched_s"] == 0 and not n["repro"] and not n["stage"] and not n["notes"]
    (out,) = n["outputs"]
    # the tolerance is float64's: three times eager's own distance from it, which is
    # float32's rounding (the weights are the run's own: torch's figure is not at hand)
    assert out["tolerance"] >= 3 * out["eager_vs_float64"] > 0
    assert out["eager_vs_float64"] < 1e-5 and out["compiled_vs_eager"] <= out["tolerance"]
    assert report["timings"]["outputs_match"] is True
    assert "float64" in n["tolerance_from"]


def test_low_precision_rounding_reads_as_compiled_being_closer() -> None:
    import torch

    report = explain("bf16_chain.py")
    n = report["numerics"]
    (out,) = n["outputs"]
    # the dtype table let this pass silently (bf16: atol 0.1) or failed it; float64 says why
    assert n["verdict"] == "compiled_closer", n["words"]
    assert out["compiled_vs_float64"] * 2 <= out["eager_vs_float64"]
    assert "closer to float64 than eager" in n["words"] and "emulate_precision_casts" in n["words"]
    assert n["searched_s"] == 0 and not n["repro"]
    # torch's answer on the same input: eager's distance from float64
    fn, [(x,)] = load_sample("numerics/bf16_chain.py")
    ref = fn(x.double())
    eager = fn(x)
    assert out["eager_vs_float64"] == pytest.approx(float((eager.double() - ref).abs().max()))
    # the setting the report names makes compiled round as eager does
    torch._dynamo.reset()
    plain = torch.compile(fn)(x)
    torch._dynamo.reset()
    with torch._inductor.config.patch(emulate_precision_casts=True):
        emulated = torch.compile(fn)(x)
    torch._dynamo.reset()
    assert (emulated.double() - eager.double()).abs().max() < (
        plain.double() - eager.double()
    ).abs().max()


def test_dropout_is_random_numbers_only() -> None:
    import torch

    report = explain("dropout.py")
    n = report["numerics"]
    assert n["verdict"] == "random_only", n["words"]
    assert n["random_rerun"] in ("match", "compiled_closer")
    (op,) = n["random_ops"]
    assert op["op"] == "aten.bernoulli_"
    # (the report's paths are from the folder the command ran in: the repository)
    assert (op["file"], op["line"]) == (
        str((NUMERICS / "dropout.py").relative_to(ROOT)),
        line_of("dropout.py", "self.drop("),
    )
    assert "fallback_random = True" in n["words"] and not n["repro"]
    assert report["timings"]["outputs_match"] is True  # a remedy tried does not change them
    # torch's answer: one seed and torch's own random numbers make them agree
    model, [(x,)] = load_sample("numerics/dropout.py")
    torch._dynamo.reset()
    with torch._inductor.config.patch(fallback_random=True), torch.no_grad():
        torch.manual_seed(0)
        eager = model(x)
        compiled = torch.compile(model)
        torch.manual_seed(0)
        assert torch.allclose(compiled(x), eager, atol=1e-6)
    torch._dynamo.reset()


def test_python_and_numpy_random_draws_are_the_same_in_both_runs() -> None:
    """The compiled call starts from the random state the eager call started from (Python's,
    NumPy's, torch's): a model that adds random.gauss() noise matches, as torch's own run
    from one seed does. Before, the two calls drew different values: "outputs DIFFER from
    eager" and --fail-on-mismatch failed (a look's tagger: random.gauss chose its rows)."""
    import random

    import numpy as np
    import torch

    path = NUMERICS / "python_random.py"
    report, proc = shared_json(
        "explain", str(path), "--backend", "eager", "--no-timings", "--fail-on-mismatch"
    )
    assert proc.returncode == 0, proc.stderr
    assert report["numerics"]["verdict"] == "match", report["numerics"]["words"]
    # the same draws in eager, compiled and the float64 reference (before: 0.493 apart,
    # within a tolerance of 0.898 that the float64 run's own draw made)
    (out,) = report["numerics"]["outputs"]
    assert out["compiled_vs_eager"] == 0 and out["tolerance"] < 1e-3, out
    # torch's answer: from one state the two agree, from two states they do not
    model, [(x,)] = load_sample("numerics/python_random.py")
    compiled = torch.compile(model, backend="eager")
    outs = []
    for fn, state in ((model, 1), (compiled, 1), (compiled, 2)):
        random.seed(state)
        np.random.seed(state)
        with torch.no_grad():
            outs.append(fn(x))
    assert torch.equal(outs[0], outs[1]) and not torch.allclose(outs[0], outs[2])
    torch._dynamo.reset()


def assert_repro_departs(n: dict) -> str:
    proc = run_repro(n["repro"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "DEPARTS" in proc.stdout and f"under {n['stage']}" in proc.stdout
    return proc.stdout


@pytest.mark.full
def test_an_undeclared_mutation_in_a_custom_op_is_named() -> None:
    import torch

    report = explain("undeclared_mutation.py")
    n = report["numerics"]
    assert n["verdict"] == "differ" and n["stage"] == "inductor", n
    # torch's own opcheck, on the op with an input like the run's (loading the model
    # registers it)
    model, [(x,)] = load_sample("numerics/undeclared_mutation.py")
    got = torch.library.opcheck(
        torch.ops.cdnum.scale_rows.default, (torch.randn(4, 8),), raise_exception=False
    )
    assert got["test_schema"] != "SUCCESS"
    (check,) = [c for c in n["opcheck"] if c["test"]]
    assert (check["op"], check["test"]) == ("cdnum.scale_rows", "test_schema")
    assert "does not declare" in check["cause"] and "cdnum.scale_rows" in n["words"]
    node = n["first_node"]
    assert node["line"] == line_of("undeclared_mutation.py", "return h * scale_rows(h)")
    assert node["file"] == str((NUMERICS / "undeclared_mutation.py").relative_to(ROOT))
    assert node["inputs_agree"]
    assert node["kernel"] in {k["name"] for k in report["kernels"]}
    # aot_eager runs the op as eager does: torch's answer for the stage before inductor
    torch._dynamo.reset()
    with torch.no_grad():
        eager = model(x.clone())
        assert torch.allclose(torch.compile(model, backend="aot_eager")(x.clone()), eager)
    torch._dynamo.reset()
    assert_repro_departs(n)


@pytest.mark.full
def test_a_wrong_fake_kernel_is_named() -> None:
    import torch

    # torch's answer: newer Inductor checks the op's output dtype and fails the compile
    # (2.15: "expected dtype torch.float32 but got torch.float64"); older reads the float64
    # buffer as float32 and departs silently
    model, [(x,)] = load_sample("numerics/wrong_fake.py")
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.compile(model)(x)
        failed = ""
    except Exception as e:
        failed = str(e)
    torch._dynamo.reset()
    report = explain("wrong_fake.py")
    n = report["numerics"]
    tests = {c["test"] for c in n["opcheck"]}
    assert "test_faketensor" in tests, n["opcheck"]
    assert "cdnum.np_tanh its fake kernel" in n["words"]
    if failed:  # the compile's own error, and the op it comes from
        assert n["verdict"] == "not_compared" and n["words"].startswith("outputs not compared")
        assert any("expected dtype" in e["message"] for e in report["errors"]), report["errors"]
        return
    assert n["verdict"] == "differ" and n["stage"] == "inductor", n
    assert n["first_node"]["line"] == line_of("wrong_fake.py", "return np_tanh(self.lin(x)) * 3")
    assert_repro_departs(n)


@pytest.mark.full
def test_a_nan_made_only_when_compiled_is_traced_to_its_op() -> None:
    import torch

    report = explain("lorentz_nan.py")
    n = report["numerics"]
    (out,) = n["outputs"]
    # torch's answer: compiled makes NaN where eager is finite, on the same inputs
    model, [args] = load_sample("numerics/lorentz_nan.py")
    torch._dynamo.reset()
    with torch.no_grad():
        eager, compiled = model(*args), torch.compile(model)(*args)
    torch._dynamo.reset()
    odd = int((eager.isfinite() & compiled.isnan()).sum())
    if not odd:  # a torch whose vectorized acosh does not overflow (2.15): the report is quiet
        assert n["verdict"] != "differ" and not n["repro"], n
        return
    assert out["nonfinite"] == f"compiled has {odd} NaN where eager is finite"
    assert n["verdict"] == "differ" and n["stage"] == "inductor"
    node = n["first_node"]
    assert (node["op"], node["makes"]) == ("torch.acosh", "inf")
    assert node["line"] == line_of("lorentz_nan.py", "torch.acosh(")
    assert "acosh" in node["kernel"]
    if hasattr(torch._inductor, "compiler_bisector"):  # torch's bisector names the lowering
        assert "lowerings" in n["bisector"] and "acosh" in n["bisector"]
    out = assert_repro_departs(n)
    assert "NaN/inf where eager is finite" in out


@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs a CUDA device"
)  # fmt: skip
def test_on_a_gpu_random_numbers_and_a_real_difference_are_told_apart(tmp_path: Path) -> None:
    from tests.conftest import run_json

    for name, verdict in (("dropout.py", "random_only"), ("undeclared_mutation.py", "differ")):
        report, proc = run_json(
            "explain", str(NUMERICS / name), "--device", "cuda", "--no-timings",
            "--repro-dir", str(tmp_path / name), timeout=900,
        )  # fmt: skip
        n = report["numerics"]
        assert n["verdict"] == verdict, n
        if verdict == "differ":
            assert n["stage"] == "inductor" and n["first_node"]["line"] == line_of(
                name, "return h * scale_rows(h)"
            )
            assert_repro_departs(n)


def test_a_backend_of_the_users_own_is_the_stage_and_its_repro_registers_it(
    tmp_path: Path,
) -> None:
    from tests.cli.test_faults import OUTPUTS_DIFFER as OFF_BY_ONE
    from tests.conftest import run_json

    model = tmp_path / "model.py"
    model.write_text(OFF_BY_ONE)
    report, proc = run_json(
        "explain", str(model), "--backend", "off_by_one", "--no-timings",
        "--repro-dir", str(tmp_path / "repro"), "--fail-on-mismatch",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    n = report["numerics"]
    # aot_eager agrees with eager; the backend adds one to every output
    assert (n["verdict"], n["stage"]) == ("differ", "off_by_one")
    assert (
        n["first_node"]["line"]
        == OFF_BY_ONE.splitlines().index("        return (x * 2).relu()") + 1
    )
    assert n["first_node"]["compiled_vs_eager"] == pytest.approx(1.0)
    assert not n["bisector"]  # torch's bisector is Inductor's
    assert_repro_departs(n)
