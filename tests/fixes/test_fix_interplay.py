"""Two fixes of one frame against torch, applied together: the `.item()` read's fix
(capture_scalar_outputs) and the print's after it (reorderable_logging_functions). Each
removes its break alone; where the print is given the value the read returned, the two
together leave the print broken (torch defers only tensors, constants and string formatters,
and the captured value is a symbol), and the report says so at the print. Where the print is
given another value, they hold together and the report says nothing more."""

from __future__ import annotations

from typing import Any

import pytest

from compilediag.report.vocabulary import BreakCause

torch = pytest.importorskip("torch")
nn = torch.nn


class ScaledPrint(nn.Module):
    def forward(self, x):
        h = torch.relu(x)
        s = h.std().item()  # a read into Python
        print("scale", s)  # given the value read
        return h / s


class GuardedPrint(nn.Module):
    def forward(self, x):
        h = torch.relu(x)
        s = h.std().item()  # a read into Python
        if not torch.compiler.is_compiling():
            print("scale", s)
        return h / s


class OtherPrint(nn.Module):
    def forward(self, x):
        h = torch.relu(x)
        s = h.std().item()  # a read into Python
        n = 3
        print("blocks", n)  # given another value
        return h / s


class FormattedPrint(nn.Module):
    def forward(self, x):
        h = torch.relu(x)
        n = int((h > 0).sum())  # a read into Python
        print(f"positive {n}")  # the value read, in an f-string
        return h * 2


class CountedPrint(nn.Module):
    def forward(self, x):
        h = torch.relu(x)
        counts = (h > 0).sum(dim=1).tolist()  # a read into Python numbers
        print("rows", len(counts))  # given the list's length only
        return h * 2


class FirstElement(nn.Module):
    def forward(self, x):
        h = torch.relu(x)
        counts = (h > 0).sum(dim=1).tolist()  # a read into Python numbers
        first = counts[0]  # one element, at a constant index
        return h * (first / 8)


CAPTURE: dict[str, Any] = {"capture_scalar_outputs": True}
BOTH: dict[str, Any] = {**CAPTURE, "reorderable_logging_functions": {print}}


def torch_breaks(model: nn.Module, config: dict[str, Any], **inputs: Any) -> list[str]:
    """torch's own record of the graph breaks (its counters: each break's gb_type), with
    `config` applied, the model called on `inputs` (else a 4x8 tensor)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    try:
        with torch._dynamo.config.patch(**config):
            compiled = torch.compile(model, backend="eager")
            compiled(**inputs) if inputs else compiled(torch.randn(4, 8))
        return sorted(
            k.splitlines()[0] for k, n in counters["graph_break"].items() for _ in range(n)
        )
    finally:
        torch._dynamo.reset()


def advice(model: nn.Module) -> dict[BreakCause, str]:
    from compilediag.testing import compile_report

    report = compile_report(model, (torch.randn(4, 8),))
    return {b.cause: b.suggestion for b in report.graph_breaks}


def test_the_print_given_the_read_value_says_the_two_fixes_do_not_hold_together() -> None:
    said = advice(ScaledPrint())
    assert set(said) == {BreakCause.ITEM, BreakCause.PRINT}, said
    assert "capture_scalar_outputs = True" in said[BreakCause.ITEM]
    line = ScaledPrint.forward.__code__.co_firstlineno + 2  # s = h.std().item()
    assert f"`s` (line {line}) is a Python number" in said[BreakCause.PRINT], said
    assert "with both fixes guard the call instead" in said[BreakCause.PRINT]
    # torch: each fix alone removes its break; together the print still breaks; the read's
    # fix with the guard the advice names removes both
    printed, item = torch_breaks(ScaledPrint(), {})  # sorted by gb_type
    assert "item()" in item and "builtin operator" in printed, (item, printed)
    assert torch_breaks(ScaledPrint(), CAPTURE) == [printed]
    assert torch_breaks(ScaledPrint(), {"reorderable_logging_functions": {print}}) == [item]
    (left,) = torch_breaks(ScaledPrint(), BOTH)  # the print's: a symbol can't be deferred
    assert left != item and "reorder" in left, left
    assert torch_breaks(GuardedPrint(), CAPTURE) == []


def test_a_print_given_another_value_keeps_its_advice_and_both_fixes_hold() -> None:
    said = advice(OtherPrint())
    assert "reorderable_logging_functions.add(print)" in said[BreakCause.PRINT]
    assert "Python number" not in said[BreakCause.PRINT], said
    assert len(torch_breaks(OtherPrint(), {})) == 2
    assert torch_breaks(OtherPrint(), BOTH) == []


def test_a_remedy_after_which_the_graphs_grow_is_not_said_to_have_no_effect() -> None:
    """--try-fixes' verdict from the targeted counts and the graphs: a break that moved (its
    sites the same count) with one graph more is worse, not "no effect" (a look's BERT:
    capture_scalar_outputs "no effect" beside "graphs 2 → 3", the break moved into its
    attention); more sites are worse; the same counts and graphs, no effect."""
    from compilediag.fixes.remedies import verdict
    from compilediag.report.vocabulary import FixOutcome

    assert verdict(1, 1, True, (2, 3)) == FixOutcome.WORSE
    assert verdict(4, 5, True, (5, 4)) == FixOutcome.WORSE
    assert verdict(1, 1, True, (2, 2)) == FixOutcome.NO_EFFECT
    assert verdict(2, 1, True, (3, 4)) == FixOutcome.PARTLY
    assert verdict(1, 1, False, (2, 3)) == FixOutcome.BREAKS_OUTPUTS


def test_a_print_of_a_lists_length_keeps_both_fixes() -> None:
    """A sixteenth look: `counts = ....tolist()`, then `print("batch", len(counts))`: the
    read's fix was said to "only move the break there" and the print's to fail beside it.
    A list's length is the tensor's, no symbol: torch removes both breaks, each fix alone
    its own, and the report advises each as it would alone."""
    said = advice(CountedPrint())
    assert "capture_scalar_outputs = True" in said[BreakCause.ITEM], said
    assert "only moves the break" not in said[BreakCause.ITEM]
    assert "Python number" not in said[BreakCause.PRINT], said
    item, printed = torch_breaks(CountedPrint(), {})  # sorted by gb_type
    assert "Data dependent" in item and "builtin operator" in printed, (item, printed)
    assert torch_breaks(CountedPrint(), CAPTURE) == [printed]
    assert torch_breaks(CountedPrint(), BOTH) == []


def test_a_lists_element_at_a_constant_index_keeps_the_capture_advice() -> None:
    """An eighteenth look: `first = lengths[0]` after `.tolist()`, used in arithmetic: the
    advice read "capture_scalar_outputs only moves the break there"; torch keeps no break
    there with it (the element is a symbol like the others)."""
    said = advice(FirstElement())
    assert "capture_scalar_outputs = True" in said[BreakCause.ITEM], said
    assert "only moves the break" not in said[BreakCause.ITEM], said
    assert len(torch_breaks(FirstElement(), {})) == 1
    assert torch_breaks(FirstElement(), CAPTURE) == []


def test_a_print_of_the_read_value_in_an_f_string_keeps_both_fixes() -> None:
    """A twenty-second look: `n = int(...)` then `print(f"positive {n}")` was said to break
    again with both fixes; torch defers an f-string whatever its fields hold (a string
    formatter): both breaks go, the print's words its own."""
    said = advice(FormattedPrint())
    assert "capture_scalar_outputs = True" in said[BreakCause.ITEM], said
    assert "reorderable_logging_functions.add(print)" in said[BreakCause.PRINT]
    assert "Python number" not in said[BreakCause.PRINT], said
    assert len(torch_breaks(FormattedPrint(), {})) == 2
    assert torch_breaks(FormattedPrint(), BOTH) == []
