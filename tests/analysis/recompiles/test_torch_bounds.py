"""A bound on a dynamic image width that torch's own F.conv2d installs (#76, the fourteenth
look's timm model): the advice read "a comparison of x dim 3 in the code ... torch.where",
with no line of the user's to change, and neither mark_dynamic nor dynamic=True removes it.
Checked by torch's own count of the same calls."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch._dynamo.testing import CompileCounter

WIDTHS = (64, 80, 96, 112)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(64, 192, 3, stride=2, padding=1), nn.AdaptiveAvgPool2d(1),
    ).eval()  # fmt: skip


def _frames(model: nn.Module, mark: bool = False, dynamic: bool | None = None) -> int:
    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(model, backend=counter, dynamic=dynamic)
    with torch.no_grad():
        for i, w in enumerate(WIDTHS):
            x = torch.randn(1, 3, 64, w)
            if mark and i == 0:
                torch._dynamo.mark_dynamic(x, 3)
            compiled(x)
    torch._dynamo.reset()
    return counter.frame_count


def test_a_bound_torchs_conv_installs_is_said_as_torchs_with_advice_that_holds() -> None:
    from compilediag.testing import compile_report

    model = _model()
    calls = [(torch.randn(1, 3, 64, w),) for w in WIDTHS]
    with torch.no_grad():
        report = compile_report(model, calls[0], calls=calls[1:])
    bounded = [r for r in report.recompiles if r.cause == "bounded"]
    assert bounded, [r.failed_guard for r in report.recompiles]
    for r in bounded:
        assert "torch's own code installed this bound" in r.suggestion, r.suggestion
        assert "nn/modules/conv.py:" in r.suggestion and "F.conv2d" in r.suggestion
        assert "torch.where" not in r.suggestion and "in the code" not in r.suggestion
    # torch's count: one graph a width without a mark; with the dim marked, or dynamic=True,
    # the bounds still compile more than one (the advice says neither removes them)
    assert _frames(model) == len(WIDTHS)
    assert _frames(model, mark=True) > 1
    assert _frames(model, dynamic=True) > 1
    # the first recompile (a width, before torch made it dynamic) is not advised marks "to
    # skip it too" (a seventeenth look's timm resnet: 4 graphs for 4 sizes, marked or not)
    (first,) = [r for r in report.recompiles if r.cause == "shape"]
    assert "To skip this recompile too" not in first.suggestion, first.suggestion
    assert "would not skip it: torch's own code bounds this frame's dynamic sizes" in (
        first.suggestion
    ), first.suggestion


@pytest.mark.full
def test_an_images_width_is_advised_resized_or_padded_not_a_tokenizers_padding() -> None:
    """A library's image model (a look's timm model): its width's advice read "the
    tokenizer's or the collator's pad_to_multiple_of=8"."""
    from tests.conftest import ROOT, run_json

    report, proc = run_json(
        "recompiles", str(ROOT / "tests" / "fixtures" / "image_widths.py"), "--backend", "eager"
    )
    assert proc.returncode == 0, proc.stderr
    (r,) = report["recompiles"]
    assert r["failed_guard"] == "x dim 3 changed 16 → 24", r
    assert "resize or pad it to a few sizes" in r["suggestion"], r["suggestion"]
    assert "tokenizer" not in r["suggestion"] and "pad_to_multiple_of" not in r["suggestion"]
    # who made the input: the file's input sets, or --shapes from its get_inputs() (a
    # re-check read the first alone where --shapes had made it)
    assert "get_input_sets() makes it, or --shapes sizes it" in r["suggestion"], r["suggestion"]


def test_a_bound_over_two_dims_names_both_in_words() -> None:
    """A seventeenth look read `x dim 3` beside `x.size()[2]` in one bound: each dim of the
    tensor the guard names is said in words (the condition is torch's, F.conv2d's)."""
    from compilediag.analysis.recompiles.guards import parse_guard

    g = parse_guard(
        "0/1: 128 + 128*(((-1) + L['x'].size()[3]) // 8) + 128*(((-1) + L['x'].size()[2]) "
        "// 8) <= 20480  # return F.conv2d(  # nn/modules/conv.py:560 in _conv_forward"
    )
    assert g.words == (
        "x dim 3 no longer meets `128 + 128*(((-1) + x dim 3) // 8) + 128*(((-1) + x dim 2) "
        "// 8) <= 20480`, a condition its dynamic graph holds"
    ), g.words


class _NormBlock(nn.Module):
    """A conv, a group norm and a pooled head, as the eighteenth look's job had them
    (`check`: a branch on an activation's mean, a graph break): torch's own code bounds the
    batch dim of the graph made dynamic for it."""

    def __init__(self, check: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.head = nn.Linear(8, 4)
        self.check = check

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.gelu(self.norm(self.conv(x)))
        h = h * torch.sigmoid(h)
        if self.check and h.mean().item() > 10:
            h = h / 10
        return self.head(h.mean(dim=(2, 3)))


def _inductor_frames(
    model: nn.Module, batches: tuple[int, ...], mark: bool = False, dynamic: bool | None = None
) -> int | str:
    """torch's count of frames compiled for these batch sizes under Inductor, with the
    batch dim marked on the first call (`mark`) or dynamic=True; the error's name where
    torch refuses."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(model, backend=counter, dynamic=dynamic)
    try:
        with torch.no_grad():
            for i, b in enumerate(batches):
                x = torch.randn(b, 3, 16, 16)
                if mark and i == 0:
                    torch._dynamo.mark_dynamic(x, 0)
                compiled(x)
    except Exception as e:  # torch refusing the mark is its answer too
        return type(e).__name__
    finally:
        torch._dynamo.reset()
    return counter.frame_count


def _batch_recompile(model: nn.Module, batches: tuple[int, ...]) -> str:
    from compilediag.testing import compile_report

    calls = [(torch.randn(b, 3, 16, 16),) for b in batches]
    report = compile_report(model, calls[0], calls=calls[1:], backend="inductor")
    (r,) = [r for r in report.recompiles if r.failed_guard == "x dim 0 changed 2 → 4"]
    return r.suggestion


@pytest.mark.full
def test_a_bound_torch_keeps_outside_the_first_size_is_no_mark_advice() -> None:
    """The eighteenth look's F3: the batch 2 → 4 recompile read "to skip this recompile too:
    mark it dynamic before the first call ... or compile with dynamic=True"; torch's own
    code bounds the graph made dynamic at 4 to sizes 2 lies outside, so torch raises on the
    mark and dynamic=True compiles 4 again."""
    model = _NormBlock(check=True).eval()
    said = _batch_recompile(model, (2, 2, 4))
    assert "would not skip it: torch's own code keeps this graph's x dim 0" in said, said
    assert "the size 2 before lies outside" in said and "torch/nn/modules/conv.py:" in said
    assert "To skip this recompile too" not in said and "mark_dynamic(x" not in said, said
    assert "where its guards hold (`3 <= x dim 0" in said, said
    # torch's count: neither compiles fewer frames than the calls as they are (a cold
    # Inductor cache: 5 as-is, 6 with dynamic=True)
    plain = _inductor_frames(model, (2, 2, 4))
    marked = _inductor_frames(model, (2, 2, 4), mark=True)
    assert marked == "ConstraintViolationError" or int(marked) >= int(plain), (marked, plain)
    assert int(_inductor_frames(model, (2, 2, 4), dynamic=True)) >= int(plain)


@pytest.mark.full
def test_a_bound_torch_keeps_around_the_first_size_leaves_the_mark_not_dynamic_true() -> None:
    """Without the break the bound holds the first size: marking the dim skips the
    recompile (torch: 1 graph), dynamic=True does not (torch: 2) and is not advised."""
    model = _NormBlock().eval()
    said = _batch_recompile(model, (2, 2, 4))
    assert "To skip this recompile too: mark it dynamic before the first call" in said, said
    assert "torch._dynamo.mark_dynamic(x, 0)" in said, said
    assert "or compile with dynamic=True" not in said, said
    assert "dynamic=True is untried here" in said and "torch/nn/modules/conv.py:" in said
    assert "`x` is `model`" not in said  # compilediag.testing's call is not the user's
    assert _inductor_frames(model, (2, 2, 4)) == 2
    assert _inductor_frames(model, (2, 2, 4), mark=True) == 1
    assert _inductor_frames(model, (2, 2, 4), dynamic=True) == 2
