"""Padding measured, not assumed: a bucket plan pads a request to its bucket, which keeps
what the model computes only where the model masks the padding. Each distinct request of
the fitted part runs eager as it is and padded as the plan pads it (zeros: token id 0,
mask 0); the padded outputs are cut back to the unpadded ones' sizes and compared within
torch's own tolerance for their dtype (`torch.testing.assert_close`'s defaults)."""

from __future__ import annotations

from typing import Any

from compilediag.harness.checks import tensors_of
from compilediag.harness.serving.calls import Call, build, planned
from compilediag.harness.serving.stream import Shapes, described, distinct
from compilediag.report.serving import PaddingCheck, Plan


def padding_check(
    torch: Any, eager: Any, first: Call, fitted: list[Shapes], plan: Plan
) -> PaddingCheck:
    """`eager`: the model called in the serving mode; `fitted`: the requests the plan was
    fitted to."""
    check = PaddingCheck()
    worst: tuple[float, str] = (-1.0, "")
    for i in distinct(fitted):
        call = build(torch, first, fitted[i])
        try:
            plain = tensors_of(torch, eager(*call[0], **call[1]))
            args, kwargs = planned(torch, call, plan)
            padded = tensors_of(torch, eager(*args, **kwargs))
        except Exception as e:  # the model refuses a padded size: no plan for it
            check.error = f"request {i + 1} padded: {type(e).__name__}: {str(e)[:200]}"
            return check
        check.requests += 1
        changes = [
            (diff, n) for n, (a, b) in enumerate(zip(plain, padded, strict=False))
            if (diff := _difference(torch, a, b)) is not None
        ]  # fmt: skip
        if len(plain) != len(padded):
            changes.append((float("inf"), 0))
        if not changes:
            continue
        check.changed += 1
        diff, n = max(changes)
        if diff > worst[0]:
            size = "its shape" if diff == float("inf") else f"by up to {diff:.3g}"
            worst = (
                diff,
                f"output {n} of request {i + 1} ({described(fitted[i])}) changed {size} once "
                "padded",
            )
    check.worst = worst[1]
    return check


def _difference(torch: Any, plain: Any, padded: Any) -> float | None:
    """None where the padded output, cut back to the plain one's sizes, is close to it;
    else the largest difference (inf: a shape that can't be cut back to it)."""
    if padded.dim() != plain.dim() or any(
        p < q for p, q in zip(padded.shape, plain.shape, strict=True)
    ):
        return float("inf")
    cut = padded[tuple(slice(0, n) for n in plain.shape)]
    try:
        torch.testing.assert_close(cut, plain, equal_nan=True)
        return None
    except AssertionError:
        gap = (cut.double() - plain.double()).abs().nan_to_num(nan=float("inf"))
        return float(gap.max().item())
