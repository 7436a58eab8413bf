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


def test_every_comment_of_the_replaced_lines_is_kept() -> None:
    """The README says fix keeps your comments: a look saw `pooled = pooled * 1.0  # padded
    batch` become a torch.where line without it. A branch's one comment ends the new line
    where the header has none; with the header's there, the others go on lines above."""
    one = HEAD + (
        "def forward(mask, pooled):\n    if mask.sum() < mask.numel():\n"
        "        pooled = pooled * 1.0  # padded batch\n    return pooled\n"
    )
    p = propose(one, 5, "data_dependent_branch")
    assert isinstance(p, Patch)
    assert "mask.numel(), pooled * 1.0, pooled)  # padded batch\n" in p.text, p.text
    many = HEAD + (
        "def forward(x):\n    if x.sum() > 0:  # positive\n        # doubled\n"
        "        return x * 2\n    return x - 1  # otherwise\n"
    )
    p = propose(many, 5, "data_dependent_branch")
    assert isinstance(p, Patch)
    assert p.text == HEAD + (
        "def forward(x):\n    # doubled\n    # otherwise\n"
        "    return torch.where(x.sum() > 0, x * 2, x - 1)  # positive\n"
    ), p.text


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


def test_the_headers_comment_loses_its_alignment_and_a_long_one_goes_above() -> None:
    """A look's patched line ran 126 columns: the `if`'s comment kept its alignment spaces
    after the longer torch.where line."""
    aligned = HEAD + (
        "def forward(x):\n"
        "    if x.mean() > 0.3:                 # data-dependent branch: a doubled activation\n"
        "        x = x * 2.0 + x.abs().mean(dim=-1, keepdim=True)\n    return x\n"
    )
    p = propose(aligned, 5, "data_dependent_branch")
    assert isinstance(p, Patch)
    assert p.text == HEAD + (
        "def forward(x):\n    # data-dependent branch: a doubled activation\n"
        "    x = torch.where(x.mean() > 0.3, x * 2.0 + x.abs().mean(dim=-1, keepdim=True), x)\n"
        "    return x\n"
    ), p.text
    short = aligned.replace("# data-dependent branch: a doubled activation", "# gate").replace(
        " + x.abs().mean(dim=-1, keepdim=True)", ""
    )
    p = propose(short, 5, "data_dependent_branch")
    assert isinstance(p, Patch)
    assert "    x = torch.where(x.mean() > 0.3, x * 2.0, x)  # gate\n" in p.text, p.text
    assert all(len(line) <= 100 for line in p.text.splitlines())
