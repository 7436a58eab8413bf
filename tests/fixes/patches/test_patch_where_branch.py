"""`where_branch` (fixes/patches/where_branch.py): an `if` on a tensor whose branches are
tensors becomes one `torch.where`; refused where both sides could differ from one."""

from __future__ import annotations

from compilediag.fixes.patches import NoPatch, Patch, propose

HEAD = "import torch\n\n\n"
ASSIGN = (
    HEAD
    + """\
def forward(x):
    if x.sum() > 0:  # positive
        y = x * 2
    else:
        y = x - 1
    return y
"""
)


def test_two_assignments_become_one_where_with_the_header_comment() -> None:
    p = propose(ASSIGN, 5, "data_dependent_branch")
    assert isinstance(p, Patch)
    assert p.text == HEAD + (
        "def forward(x):\n    y = torch.where(x.sum() > 0, x * 2, x - 1)  # positive\n"
        "    return y\n"
    )
    assert p.what == "the branch is computed on both sides and picked with torch.where"


def test_a_return_and_the_return_after_the_if_become_one() -> None:
    before = HEAD + (
        "def forward(x):\n    if x.mean().item() > 0:\n        return x.abs()\n    return x + 1\n"
    )
    p = propose(before, 5, "item_branch")
    assert isinstance(p, Patch)
    assert (
        p.text == HEAD + "def forward(x):\n    return torch.where(x.mean() > 0, x.abs(), x + 1)\n"
    )


def test_conditions_without_an_exact_tensor_twin_are_refused() -> None:
    equal = HEAD + "def forward(x, y):\n    if torch.equal(x, y):\n        return x\n    return y\n"
    p = propose(equal, 5, "data_dependent_branch")
    assert isinstance(p, NoPatch)
    assert p.why == "torch.equal also compares shapes; no tensor twin is exact"
    both = HEAD + (
        "def forward(x):\n    if x.sum() > 0 and x.mean() > 1:\n        return x\n    return -x\n"
    )
    p = propose(both, 5, "data_dependent_branch")
    assert isinstance(p, NoPatch)
    assert p.why == "the condition uses and/or/not (Python truth of tensors)"
