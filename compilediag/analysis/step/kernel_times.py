"""The kernel profile's kernels of a `compilediag run` step, set against the device's peak
(per dtype where known) and against the kernel profile's own steps; the kernel that loses
the most time, advised where the step waits on the device."""

from __future__ import annotations

from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.model import Breakdown, Kernel, KernelTiming, Report
from compilediag.report.vocabulary import KernelKind
from compilediag.report.words import ms

# (bytes/s, dense bf16/fp16 tensor-core FLOP/s, dense TF32 FLOP/s, float32 FFMA FLOP/s) by
# the device's name as torch.cuda gives it, from the vendor's data sheets: what a kernel's
# achieved bandwidth and FLOP/s are set against, the FLOP/s by the unit its dtype runs on
PEAKS: dict[str, tuple[float, float, float, float]] = {
    "H100 80GB HBM3": (3.35e12, 989e12, 494.7e12, 66.9e12),  # H100 SXM
    "H100 PCIe": (2.0e12, 756e12, 378e12, 51.2e12),
    "H100 NVL": (3.9e12, 835e12, 417.5e12, 60e12),
    "H200": (4.8e12, 989e12, 494.7e12, 66.9e12),
    "A100-SXM4-80GB": (2.039e12, 312e12, 156e12, 19.5e12),
    "A100-SXM4-40GB": (1.555e12, 312e12, 156e12, 19.5e12),
    "A100 80GB PCIe": (1.935e12, 312e12, 156e12, 19.5e12),
    "A100-PCIE-40GB": (1.555e12, 312e12, 156e12, 19.5e12),
    "L40S": (0.864e12, 362e12, 183e12, 91.6e12),
    "L4": (0.3e12, 121e12, 60e12, 30.3e12),
}
UNITS = ("bf16", "tf32", "fp32")  # PEAKS' FLOP/s, in its order after the bandwidth
UNIT_WORDS = {"bf16": "dense bf16", "tf32": "TF32", "fp32": "float32 (FFMA, no TF32)"}
# what cuBLAS's and CUTLASS's kernel names say of the unit: TF32 tensor-core GEMMs
# (sm80_xmma_gemm_f32f32_tf32f32_..., cutlass_80_tensorop_s1688gemm_...) and float32 ones on
# the FFMA units (sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_..., sgemm_largek_lds64, simt_sgemm)
TF32_KERNELS = ("tf32", "s1688gemm")
FP32_KERNELS = ("ffma", "sgemm", "gemm_f32f32_f32f32")
GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")


def unit_of(dtype: str, kernel: str) -> str:
    """The unit a library kernel's FLOPs run on: float32 on TF32 tensor cores where its name
    says so, else on the FFMA units; bf16 and fp16 on the dense tensor cores. Where the
    profiler names no dtype (torch before its input_dtypes), the kernel's name; '' where
    neither tells (set against the bf16 peak, as the highest)."""
    if any(t in kernel for t in TF32_KERNELS):
        return "tf32"
    if dtype == "float" or any(t in kernel for t in FP32_KERNELS):
        return "fp32"
    return "bf16" if dtype else ""


def peak_of(device: str) -> tuple[str, tuple[float, float, float, float] | None]:
    for key, peak in PEAKS.items():
        if key in device:
            return key, peak
    return "", None


def first_by_name(kernels: list[Kernel]) -> dict[str, Kernel]:
    """Each kernel name's first kernel (Inductor numbers kernels per graph: two graphs may
    hold one name)."""
    out: dict[str, Kernel] = {}
    for k in kernels:
        out.setdefault(k.name, k)
    return out


def kernel_timings(report: Report, p: ProcessRuntime, b: Breakdown) -> None:
    """The window's kernels, per step, with their lines (a generated kernel's, by name from
    the Report's kernels), against the device's peak where it is known; most time lost
    first. A name two graphs share (Inductor numbers kernels per graph) keeps the first
    graph's lines, and its time is both kernels'."""
    if not p.kernels or not p.kernel_steps or report.timings is None:
        return
    steps = p.kernel_steps
    step_ms = p.kernel_step_ms or b.call_ms  # the kernel profile's own steps: the same steps
    by_name = first_by_name(report.kernels)
    name, peak = peak_of(p.kernel_device)
    out = []
    for row in p.kernels:
        per_step = row.ms / steps
        k = KernelTiming(
            name=row.name, kind=row.kind, calls=round(row.calls / steps, 3),
            ms=round(per_step, 6), share=round(per_step / step_ms, 4) if step_ms else 0.0,
            shapes=row.shapes, op=row.op,
        )  # fmt: skip
        known = by_name.get(row.name)
        if known is not None:
            k.compile_id, k.modules = known.compile_id, list(known.modules)
            k.source_lines = list(known.source_lines)
        seconds = row.ms / 1e3
        if row.bytes and seconds:
            k.bytes = row.bytes
            k.gb_per_s = round(row.bytes * row.calls / seconds / 1e9, 3)
            if peak:
                k.peak_share = round(k.gb_per_s * 1e9 / peak[0], 4)
        if row.flops and seconds:
            k.tflop_per_s = round(row.flops / seconds / 1e12, 3)
            k.peak_unit = unit_of(row.dtype, row.name)
            if peak:
                flops = peak[1 + UNITS.index(k.peak_unit or "bf16")]
                k.peak_share = round(k.tflop_per_s * 1e12 / flops, 4)
        k.lost_ms = round(per_step * (1 - min(1.0, k.peak_share or 0.0)), 6)
        out.append(k)
    out.sort(key=lambda k: -k.lost_ms)
    report.timings.kernels = out
    report.timings.peak = (
        f"{name}: {peak[0] / 1e12:g} TB/s, {peak[1] / 1e12:g} dense bf16 TFLOP/s, "
        f"{peak[2] / 1e12:g} TF32, {peak[3] / 1e12:g} float32" if peak else ""
    )  # fmt: skip


TF32_SHARE = 0.03  # float32 GEMMs without TF32 this share of a step: advised


def tf32_advice(report: Report) -> list[str]:
    """Float32 matrix multiplies on the FFMA units where TF32 tensor cores could run them:
    the setting that lets them, with their time and what they reach of each peak."""
    t = report.timings
    if t is None or t.breakdown is None or not t.peak:
        return []
    slow = [k for k in t.kernels if k.peak_unit == "fp32" and k.op.startswith(GEMMS)]
    spent = sum(k.ms for k in slow)
    step = t.breakdown.call_ms
    if not slow or not step or spent / step < TF32_SHARE:
        return []
    reached = max((k.tflop_per_s or 0.0) for k in slow)
    return [
        f"{len(slow)} float32 matrix multipl{'ies run' if len(slow) > 1 else 'y runs'} "
        f"without TF32 ({', '.join(dict.fromkeys(k.op for k in slow))}: {ms(spent)} a step, "
        f"{spent / step:.0%}; at most {reached:.3g} TFLOP/s on the float32 units): "
        'torch.set_float32_matmul_precision("high") before the model runs lets them use the '
        "tensor cores' TF32 (float32's range, a 10-bit mantissa)"
    ]


FAR = 0.3  # a kernel below this share of the device's peak is far from its limit
FAR_LOST = 0.03  # ... and advised when the time it loses to it is this share of a step
SMALL_CALL = 1 << 20  # bytes a call: a kernel that moves less can't keep the device busy
DEVICE_BOUND = 0.5  # kernels this share of a step: the step waits on the device
# ops that read or write at indices: such a kernel may touch a row many times, so the bytes
# of the tensors it is given (its GB/s) are a floor, and no "far from its limit" is said
INDEXED = ("embedding", "gather", "index", "scatter", "take")


def _indexed(kernel: Kernel | None) -> bool:
    return kernel is not None and any(op.split(".")[-1].startswith(INDEXED) for op in kernel.ops)


def kernel_advice(report: Report, kernel_step_ms: float | None = None) -> list[str]:
    """The kernel that loses the most time against the device's peak, where that is a
    share of the step worth a change and the step waits on the device: its line, and what
    Inductor did there (a copy that only lays out data, a kernel too small to fill the
    device, a library call it did not generate). Not a kernel that reads at indices. The
    kernels are set against the kernel profile's own steps (`kernel_step_ms`) where known."""
    t = report.timings
    if t is None or t.breakdown is None or not t.peak:
        return []
    step = kernel_step_ms or t.breakdown.call_ms
    busy = sum(k.ms for k in t.kernels if k.kind != "communication")
    if not step or busy < DEVICE_BOUND * step:
        return []  # the step waits on the host: a faster kernel would not shorten it
    known_by = first_by_name(report.kernels)
    far = [k for k in t.kernels if k.peak_share is not None and k.peak_share < FAR]
    far = [k for k in far if k.lost_ms / step >= FAR_LOST and not _indexed(known_by.get(k.name))]
    if not far:
        return []
    k = max(far, key=lambda k: k.lost_ms)
    known = known_by.get(k.name)
    at = f" at {k.source_lines[0]}" if k.source_lines else ""
    if k.gb_per_s is not None:
        got = f"{k.gb_per_s:.4g} GB/s, {k.peak_share:.0%} of the device's bandwidth"
    else:
        unit = UNIT_WORDS.get(k.peak_unit or "bf16", "dense bf16")
        got = f"{k.tflop_per_s:.4g} TFLOP/s, {k.peak_share:.0%} of the device's {unit} peak"
    said = f"{k.name}{at} takes {ms(k.ms)} a step ({k.share:.0%}) at {got}"
    if k.kind == "library":
        call = f"{k.op or k.name}({k.shapes})" if k.shapes else (k.op or k.name)
        why = (
            f"it is a library call Inductor did not generate, {call}: shapes this small can't "
            'fill the device; a larger batch, or mode="max-autotune" to let Inductor try its '
            "own kernels for it"
        )
    elif known is not None and known.kind == KernelKind.COPY:
        why = (
            f"it computes no value: it only lays out or casts data ({', '.join(known.ops[:4])}); "
            "where the next op can read the tensor as it is (no .contiguous(), .transpose() or "
            "cast at that line), Inductor has no copy to make"
        )
    elif k.bytes is not None and k.bytes < SMALL_CALL:
        kind = known.kind.value.replace("_", " ") if known is not None else "kernel"
        why = (
            f"a {kind} that moves {k.bytes / 1024:.0f} KiB a call is too little work to keep the "
            "device busy: its time is launch and latency; CUDA graphs "
            '(mode="reduce-overhead") or larger batches'
        )
    else:
        kind = known.kind.value.replace("_", " ") if known is not None else "kernel"
        ops = ", ".join(known.ops[:4]) if known else "no ops known"
        why = f"a {kind} ({ops}) far from the bandwidth it could have"
    return [f"{said}: {why}."]
