"""`hoist_class` (fixes/patches/hoist_class.py): a class statement in forward is defined
once at module level; refused where it reads forward's locals."""

from __future__ import annotations

from compilediag.fixes.patches import NoPatch, Patch, propose

BEFORE = """\
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        class Scale:
            factor = 2.0

        return x * Scale.factor
"""
AFTER = """\
import torch
from torch import nn


class Scale:
    factor = 2.0


class Model(nn.Module):
    def forward(self, x):

        return x * Scale.factor
"""


def test_the_class_moves_above_its_function() -> None:
    p = propose(BEFORE, 7, "class_definition")
    assert isinstance(p, Patch) and p.text == AFTER
    assert p.what == "class Scale defined once at module level, not on every call"


def test_a_class_that_reads_forwards_locals_is_refused() -> None:
    source = BEFORE.replace("        class Scale:", "        k = 2\n        class Scale:")
    source = source.replace("factor = 2.0", "factor = k")
    p = propose(source, 8, "class_definition")
    assert isinstance(p, NoPatch) and p.why == "the class uses forward's locals (k)"
