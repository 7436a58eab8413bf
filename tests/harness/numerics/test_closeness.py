"""The closeness rule on its own: the tolerance from a float64 reference, NaN and inf, and
which of eager and compiled is the nearer."""

from __future__ import annotations

import pytest

from compilediag.harness.numerics.closeness import MARGIN, ROUNDINGS, judge


def test_the_tolerance_is_eagers_own_distance_from_float64_with_a_floor() -> None:
    import torch

    ref = torch.linspace(-2, 2, 64, dtype=torch.float64)
    eager = (ref + 1e-3).float()  # eager stands 1e-3 from float64
    within = (ref - MARGIN * 1e-3 * 0.9).float()
    beyond = (ref + MARGIN * 1e-3 * 1.5).float()
    ok, bad = judge(torch, "o", eager, within, ref), judge(torch, "o", eager, beyond, ref)
    assert ok.tolerance == pytest.approx(MARGIN * 1e-3, rel=1e-3) and ok.verdict == "match"
    assert bad.verdict == "differ"
    # eager exact: the floor is the dtype's rounding at the values' scale
    exact = judge(torch, "o", ref.float(), ref.float(), ref)
    assert exact.tolerance == pytest.approx(
        ROUNDINGS * torch.finfo(torch.float32).eps * 2, rel=0.05
    )


def test_compiled_nearer_to_float64_is_eagers_rounding_not_a_mismatch() -> None:
    import torch

    ref = torch.linspace(0.5, 3, 64, dtype=torch.float64)
    eager = (ref * (1 + 2**-4)).bfloat16()  # off by more than the floor (4 roundings)
    compiled = ref.bfloat16()
    got = judge(torch, "o", eager, compiled, ref)
    assert got.verdict == "compiled_closer" and got.compiled_vs_float64 < got.eager_vs_float64


def test_a_nan_only_compiled_makes_differs_and_one_only_eager_makes_does_not() -> None:
    import torch

    ref = torch.ones(8, dtype=torch.float64)
    odd = torch.ones(8)
    odd[3] = float("nan")
    got = judge(torch, "o", torch.ones(8), odd, ref)
    assert got.verdict == "differ" and got.nonfinite == "compiled has 1 NaN where eager is finite"
    back = judge(torch, "o", odd, torch.ones(8), ref)
    assert back.verdict == "compiled_closer" and back.nonfinite.startswith("eager has 1 NaN")
    # where float64 makes it too, compiled making it is no departure
    both = judge(torch, "o", torch.ones(8), odd, odd.double())
    assert both.verdict == "match"
