"""`sort_stacked` (fixes/patches/sort_stacked.py): sorted() of 0-d tensors written out
becomes a stable torch.sort of them stacked."""

from __future__ import annotations

from compilediag.fixes.patches import NoPatch, Patch, propose

HEAD = "import torch\n\n\n"


def test_sorted_of_tensors_becomes_a_stable_sort() -> None:
    before = (
        HEAD + "def forward(x, y):\n    lo, hi = sorted([x.sum(), y.sum()])\n    return hi - lo\n"
    )
    p = propose(before, 5, "sort_tensors")
    assert isinstance(p, Patch)
    assert p.text == HEAD + (
        "def forward(x, y):\n"
        "    lo, hi = list(torch.sort(torch.stack([x.sum(), y.sum()]), stable=True).values)\n"
        "    return hi - lo\n"
    )


def test_a_key_is_refused() -> None:
    p = propose(
        HEAD + "def forward(x, y):\n    return sorted([x, y], key=len)\n", 5, "sort_tensors"
    )
    assert isinstance(p, NoPatch)
    assert p.why == "no sorted(LIST) without key or reverse on the line"
