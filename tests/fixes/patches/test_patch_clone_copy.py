"""`clone_copy` (fixes/patches/clone_copy.py): copy.deepcopy of a tensor becomes
`.detach().clone()`."""

from __future__ import annotations

from compilediag.fixes.patches import NoPatch, Patch, propose

HEAD = "import copy\n\nimport torch\n\n\n"


def test_deepcopy_of_a_tensor_becomes_a_clone() -> None:
    before = HEAD + "def forward(x):\n    saved = copy.deepcopy(x)\n    return x + saved\n"
    p = propose(before, 7, "copy_tensor")
    assert isinstance(p, Patch)
    assert (
        p.text == HEAD + "def forward(x):\n    saved = x.detach().clone()\n    return x + saved\n"
    )


def test_a_deepcopy_with_a_memo_is_refused() -> None:
    p = propose(
        HEAD + "def forward(x, memo):\n    return copy.deepcopy(x, memo)\n", 7, "copy_tensor"
    )
    assert isinstance(p, NoPatch) and p.why == "no copy.deepcopy(tensor) on the line"
