"""How close two runs' tensors stand, held to a tolerance that comes from a float64
reference where there is one (three times eager's own distance from it, never under the
dtype's rounding at the values' scale) and from the dtype's table where there is none."""

from __future__ import annotations

from typing import Any

from compilediag.report.numerics import COMPILED_CLOSER, DIFFER, MATCH, OutputCloseness

MARGIN = 3.0  # compiled may stand this many times eager's own distance from float64
ROUNDINGS = 4.0  # and never less than this many of the dtype's roundings at the values' scale


def table_tolerance(dtype: str) -> tuple[float, float]:
    """(atol, rtol) by dtype, where no float64 reference can be had."""
    if "bfloat16" in dtype:
        return 1e-1, 5e-2
    if "float16" in dtype:
        return 1e-2, 1e-2
    if "float64" in dtype:
        return 1e-7, 1e-7
    return 1e-4, 1e-4


def strided(torch: Any, t: Any) -> Any:
    """A sparse (or other non-strided) tensor as a dense one, to compare: torch.equal and
    elementwise masks take strided tensors only (a look's GCN: its sparse adjacency)."""
    return t if t.layout == torch.strided else t.to_dense()


def _max_abs(torch: Any, a: Any, b: Any, where: Any) -> float | None:
    if not bool(where.any()):
        return None
    return float((a[where] - b[where]).abs().max())


def _nonfinite(torch: Any, x: Any, y: Any, who: str, other: str) -> str:
    """`who` has N NaN (or inf) where `other` is finite."""
    fx, fy = x.isfinite(), y.isfinite()
    odd = fx & ~fy
    if not bool(odd.any()):
        return ""
    nan = int((odd & y.isnan()).sum())
    inf = int(odd.sum()) - nan
    kinds = [f"{n} {k}" for n, k in ((nan, "NaN"), (inf, "inf")) if n]
    return f"{who} has {' and '.join(kinds)} where {other} is finite"


def judge(torch: Any, name: str, eager: Any, compiled: Any, ref: Any | None) -> OutputCloseness:
    """One tensor of eager's, compiled's and (None: none) float64's, judged."""
    out = OutputCloseness(name, str(eager.dtype).replace("torch.", ""), list(eager.shape))
    eager, compiled = strided(torch, eager), strided(torch, compiled)
    ref = None if ref is None else strided(torch, ref)
    if eager.shape != compiled.shape:
        out.nonfinite, out.verdict = "shapes differ", DIFFER
        return out
    if not eager.is_floating_point() and not eager.is_complex():
        out.verdict = MATCH if bool(torch.equal(eager, compiled.to(eager.dtype))) else DIFFER
        return out
    x, y = eager.detach().double(), compiled.detach().double()
    fx, fy = x.isfinite(), y.isfinite()
    out.compiled_vs_eager = _max_abs(torch, x, y, fx & fy)
    compiled_odd = _nonfinite(torch, x, y, "compiled", "eager")
    eager_odd = _nonfinite(torch, y, x, "eager", "compiled")
    out.nonfinite = compiled_odd or eager_odd
    if ref is None or ref.shape != eager.shape:
        atol, rtol = table_tolerance(out.dtype)
        same = bool(torch.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True))
        out.tolerance = atol
        out.verdict = MATCH if same and not out.nonfinite else DIFFER
        return out
    r = ref.detach().double()
    fr = r.isfinite()
    out.eager_vs_float64 = _max_abs(torch, x, r, fx & fr)
    out.compiled_vs_float64 = _max_abs(torch, y, r, fy & fr)
    scale = float(r[fr].abs().max()) if bool(fr.any()) else 1.0
    floor = ROUNDINGS * torch.finfo(eager.dtype).eps * max(scale, 1e-30)
    out.tolerance = max(MARGIN * (out.eager_vs_float64 or 0.0), floor)
    if compiled_odd and bool((fx & ~fy & fr).any()):
        out.verdict = DIFFER  # a NaN or inf where eager and float64 are finite
        return out
    if eager_odd and not compiled_odd and bool((fy & ~fx & fr).any()):
        out.verdict = COMPILED_CLOSER  # eager made a NaN or inf float64 does not
        return out
    far = (out.compiled_vs_float64 or 0.0) > out.tolerance
    if far:
        out.verdict = DIFFER
    elif (out.compiled_vs_eager or 0.0) > floor and (out.compiled_vs_float64 or 0.0) * 2 <= (
        out.eager_vs_float64 or 0.0
    ):
        out.verdict = COMPILED_CLOSER
    else:
        out.verdict = MATCH
    return out


def judge_all(
    torch: Any, tensors: Any, eager: Any, compiled: Any, ref: Any | None
) -> list[OutputCloseness]:
    """Each output tensor of a call, in order (`tensors`: checks.tensors_of)."""
    a, b = tensors(torch, eager), tensors(torch, compiled)
    r = tensors(torch, ref) if ref is not None else []
    if len(a) != len(b):
        return [
            OutputCloseness(
                "outputs", "", [], nonfinite=f"{len(a)} vs {len(b)} output tensors", verdict=DIFFER
            )
        ]
    return [
        judge(torch, f"out[{i}]", x, y, r[i] if len(r) == len(a) else None)
        for i, (x, y) in enumerate(zip(a, b, strict=True))
    ]
