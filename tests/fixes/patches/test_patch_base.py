"""The patch families' shared base (fixes/patches/base.py): names read as written, calls
found outermost first, and the registry that sends each cause to its family."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import get_full_name_for_node

from compilediag.fixes.patches import CONSTRUCTS, NoPatch, propose
from compilediag.fixes.patches.base import calls, dotted


def test_dotted_reads_names_and_attributes_only() -> None:
    for text, name in [
        ("torch.nonzero", "torch.nonzero"),
        ("print", "print"),
        ("make().info", ""),
        ("(a + b).sum", ""),
        ("x[0].mean", ""),
    ]:
        assert dotted(cst.parse_expression(text)) == name, text
    # libcst's helper reads through the call and the subscript: why the families keep theirs
    assert get_full_name_for_node(cst.parse_expression("make().info")) == "make.info"
    assert get_full_name_for_node(cst.parse_expression("(a + b).sum")) == "None.sum"


def test_calls_are_found_outermost_first() -> None:
    found = calls(cst.parse_expression("f(g(x), h(y).k(z))"))
    assert [cst.Module([]).code_for_node(c.func) for c in found] == ["f", "g", "h(y).k", "h"]


def test_each_family_is_a_module_of_its_own_and_other_causes_get_why_not() -> None:
    modules = {cause: construct.__module__ for cause, construct in CONSTRUCTS.items()}
    for cause, module in modules.items():
        assert module == f"compilediag.fixes.patches.{CONSTRUCTS[cause].__name__}", cause
    p = propose("import torch\n\n\ndef f(x):\n    return x\n", 5, "generator_rng")
    assert isinstance(p, NoPatch)
    assert p.why == "no code rewrite is known for this cause (generator_rng)"
