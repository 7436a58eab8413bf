"""The advice for a kernel far from its limit (#39), on the rule's own terms: the kernel
that loses most against the device's peak, where the step waits on the device, is named
at its line with what Inductor made there; a step that waits on the host, or a kernel that
reads at indices (its bytes a floor), gets none. One case is the report of a real run (an
H200, bench/results/gpu_step_h200/large.json); the others are that report's kernels with
one figure changed, each asking one question."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from compilediag.analysis.step.kernel_times import FAR, kernel_advice
from compilediag.report.model import Report
from compilediag.report.serial import from_json
from compilediag.report.vocabulary import KernelKind
from tests.conftest import ROOT

LARGE = ROOT / "bench" / "results" / "gpu_step_h200" / "large.json"


@pytest.fixture(scope="module")
def large() -> Report:
    return from_json(Report, Path(LARGE).read_text())


def test_the_real_gpu_bound_step_has_no_kernel_far_from_its_limit(large: Report) -> None:
    t = large.timings
    assert t is not None and t.breakdown is not None
    assert sum(k.ms for k in t.kernels) >= 0.5 * t.breakdown.call_ms  # waits on the GPU
    measured = [k for k in t.kernels if k.peak_share is not None]
    worst = max(measured, key=lambda k: k.lost_ms)
    assert worst.peak_share >= FAR  # the kernel losing most still reached 30% of peak
    assert kernel_advice(large) == []


def far_copy(report: Report) -> tuple[Report, str]:
    """The report with its costliest generated layout copy (of those with a line) made
    slow: a twentieth of the bandwidth it had, twenty times the time."""
    r = copy.deepcopy(report)
    t = r.timings
    copies = {k.name for k in r.kernels if k.kind == KernelKind.COPY}
    mine = [k for k in t.kernels if k.name in copies and k.gb_per_s and k.source_lines]
    k = max(mine, key=lambda k: k.ms)
    k.ms, k.gb_per_s, k.peak_share = k.ms * 20, k.gb_per_s / 20, k.peak_share / 20
    k.share = k.ms / t.breakdown.call_ms
    k.lost_ms = k.ms * (1 - k.peak_share)
    return r, k.name


def test_a_far_layout_copy_is_advised_at_its_line(large: Report) -> None:
    r, name = far_copy(large)
    (said,) = kernel_advice(r)
    k = next(k for k in r.timings.kernels if k.name == name)
    assert said.startswith(f"{name} at {k.source_lines[0]}")
    assert f"{k.peak_share:.0%} of the device's bandwidth" in said
    assert "it computes no value: it only lays out or casts data" in said


def test_no_kernel_is_advised_where_the_step_waits_on_the_host(large: Report) -> None:
    r, _ = far_copy(large)
    r.timings.breakdown.call_ms *= 4  # the same kernels in a step four times as long
    assert kernel_advice(r) == []


def test_a_kernel_that_reads_at_indices_is_never_called_far(large: Report) -> None:
    r, name = far_copy(large)
    known = next(k for k in r.kernels if k.name == name)
    known.ops = ["aten.embedding", *known.ops]
    assert all(name not in said for said in kernel_advice(r))


def test_a_library_kernel_is_one_line_and_its_call_the_next(large: Report) -> None:
    """The kernel table of that run at 100 columns: a library kernel's facts follow its
    name, and the aten call that launched it (op and input shapes, as torch.profiler
    recorded them) is a line of its own under it, indented, never the name's line."""
    from compilediag.render.table.facts import kernel_name
    from tests.conftest import run_cli

    proc = run_cli("render", str(LARGE), env={"COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    t = large.timings
    assert t is not None
    # every line fits, but a kernel's name longer than the width: whole on a line of its
    # own (the terminal wraps it unbroken, as a URL; a look read one folded mid-word)
    names = {f"  {kernel_name(k.name)}" for k in t.kernels}
    assert all(len(line) <= 100 or line in names for line in lines)
    calls = [k for k in t.kernels[:8] if k.op and k.shapes]
    assert calls, "the run's costliest kernels include library calls with their shapes"
    for k in calls:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"      {k.op} ["))
        assert "a step (" in " ".join(lines[at - 2 : at])  # the kernel's facts just above
        assert k.shapes.split("], ")[0] in lines[at]
        assert all(k.shapes.split("], ")[0] not in line for line in lines[at - 3 : at])


def test_a_float32_gemm_is_set_against_the_float32_peak_and_tf32_advised() -> None:
    """The recorded H200 report with its costliest GEMM made a float32 one on the FFMA units
    (as an H100's float32 MLP ran, "0% of H100's peak" against the bf16 tensor cores'): the
    TF32 setting is advised with its time; as recorded (bf16), nothing is."""
    from compilediag.analysis.step.kernel_times import tf32_advice, unit_of

    report = from_json(Report, LARGE.read_text())
    assert tf32_advice(report) == []
    gemms = [k for k in report.timings.kernels if k.op.startswith(("aten::mm", "aten::addmm"))]
    assert gemms
    gemms[0].peak_unit = "fp32"
    (said,) = tf32_advice(report)
    assert 'torch.set_float32_matmul_precision("high")' in said and gemms[0].op in said
    assert unit_of("float", "ampere_sgemm_128x64_nn") == "fp32"
    assert unit_of("float", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32") == "tf32"
    assert unit_of("c10::BFloat16", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") == "bf16"
    # torch 2.11 names no dtype: the names of an H100's float32 MLP, run without and with TF32
    assert unit_of("", "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_ffma") == "fp32"
    assert unit_of("", "void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>") == "fp32"
    assert unit_of("", "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn>") == "tf32"
    assert unit_of("", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") == ""


@pytest.mark.gpu
def test_float32_gemms_on_cuda_are_set_against_the_unit_they_ran_on(tmp_path: Path) -> None:
    """On CUDA, a float32 MLP (tests/fixtures/run_jobs/mlp_launch.py): its GEMMs run on the
    float32 units and are set against that peak; with torch.set_float32_matmul_precision(
    "high") they run as TF32 and are set against TF32's."""
    import json
    import sys

    import torch

    from tests.conftest import run_cli

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    job = ROOT / "tests" / "fixtures" / "run_jobs" / "mlp_launch.py"
    units = {}
    for tf32 in ("0", "1"):
        proc = run_cli(
            "run", "--format", "json", "--profile-steps", "10-14", "--", sys.executable,
            str(job), env={"JOB_TF32": tf32, "JOB_STEPS": "30"}, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        kernels = json.loads(proc.stdout)["timings"]["kernels"]
        gemms = [
            k
            for k in kernels
            if k["op"].startswith(("aten::mm", "aten::addmm")) and k["tflop_per_s"]
        ]
        assert gemms, [(k["name"], k["op"]) for k in kernels]
        units[tf32] = {k["peak_unit"] for k in gemms}
        print(tf32, [(k["name"][:90], k["peak_unit"], k["tflop_per_s"]) for k in gemms])
    assert units["0"] == {"fp32"}, units
    assert units["1"] == {"tf32"}, units
