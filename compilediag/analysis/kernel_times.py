"""The kernel profile's kernels of a `compilediag run` step, set against the device's peak
(per dtype where known) and against the kernel profile's own steps; the kernel that loses
the most time, advised where the step waits on the device."""

from __future__ import annotations

from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.model import Breakdown, Kernel, KernelTiming, Report
from compilediag.report.vocabulary import KernelKind
from compilediag.report.words import ms

# (bytes/s, dense bf16 FLOP/s) by the device's name as torch.cuda gives it, from the vendor's
# data sheets: what a kernel's achieved bandwidth and FLOP/s are set against
PEAKS: dict[str, tuple[float, float]] = {
    "H100 80GB HBM3": (3.35e12, 989e12),  # H100 SXM
    "H100 PCIe": (2.0e12, 756e12),
    "H100 NVL": (3.9e12, 835e12),
    "H200": (4.8e12, 989e12),
    "A100-SXM4-80GB": (2.039e12, 312e12),
    "A100-SXM4-40GB": (1.555e12, 312e12),
    "A100 80GB PCIe": (1.935e12, 312e12),
    "A100-PCIE-40GB": (1.555e12, 312e12),
    "L40S": (0.864e12, 362e12),
    "L4": (0.3e12, 121e12),
}


def peak_of(device: str) -> tuple[str, tuple[float, float] | None]:
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
            if peak:
                k.peak_share = round(k.tflop_per_s * 1e12 / peak[1], 4)
        k.lost_ms = round(per_step * (1 - min(1.0, k.peak_share or 0.0)), 6)
        out.append(k)
    out.sort(key=lambda k: -k.lost_ms)
    report.timings.kernels = out
    report.timings.peak = (
        f"{name}: {peak[0] / 1e12:g} TB/s, {peak[1] / 1e12:g} dense bf16 TFLOP/s" if peak else ""
    )


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
        got = f"{k.tflop_per_s:.4g} TFLOP/s, {k.peak_share:.0%} of the device's dense bf16 peak"
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
