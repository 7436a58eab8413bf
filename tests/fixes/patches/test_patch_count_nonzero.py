"""`count_nonzero` (fixes/patches/count_nonzero.py): nonzero() used only for its number
of rows becomes `torch.count_nonzero`; refused where the indices themselves are used."""

from __future__ import annotations

from compilediag.fixes.patches import NoPatch, Patch, propose

HEAD = "import torch\n\n\n"


def test_the_rows_are_counted() -> None:
    before = HEAD + (
        "def forward(x, mask):\n    idx = torch.nonzero(mask)\n    n = idx.shape[0]\n"
        "    return x * n\n"
    )
    p = propose(before, 5, "dynamic_output_shape")
    assert isinstance(p, Patch)
    assert p.text == HEAD + (
        "def forward(x, mask):\n    idx_count = torch.count_nonzero(mask)\n    n = idx_count\n"
        "    return x * n\n"
    )
    assert p.what == "the rows of nonzero() counted with torch.count_nonzero (a 0-d tensor)"


def test_indices_used_as_indices_are_refused() -> None:
    before = HEAD + "def forward(x, mask):\n    idx = mask.nonzero()\n    return x[idx[:, 0]]\n"
    p = propose(before, 5, "dynamic_output_shape")
    assert isinstance(p, NoPatch)
    assert p.why == "line 6: the indices themselves are used, not only their count"
