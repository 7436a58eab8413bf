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


ONE_LINE = HEAD + (
    "def forward(h):\n    n = h.nonzero().shape[0]\n    h = h / (n + 1)\n    return h * 2\n"
)


def test_rows_counted_on_the_line_itself_are_counted_with_count_nonzero() -> None:
    """`n = h.nonzero().shape[0]` (a look found `fix --help` naming it, and the line
    refused "does not assign a nonzero() result"): the count on the line is rewritten;
    torch breaks the graph at the original and not at the patched, whose outputs are the
    original's."""
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    p = propose(ONE_LINE, 5, "dynamic_output_shape")
    assert isinstance(p, Patch), p
    assert p.text == ONE_LINE.replace("h.nonzero().shape[0]", "torch.count_nonzero(h)")
    x = torch.relu(torch.randn(7, 20, generator=torch.Generator().manual_seed(0)))
    breaks = []
    for text in (ONE_LINE, p.text):
        scope: dict = {}
        exec(compile(text, "<patched>", "exec"), scope)
        torch._dynamo.reset()
        counters.clear()
        out = torch.compile(scope["forward"], backend="eager")(x)
        torch.testing.assert_close(out, scope["forward"](x))
        breaks.append(sum(counters["graph_break"].values()))
    assert breaks[0] == 1 and breaks[1] == 0, breaks  # torch's own count: the break, then none
    # the count used as a size is refused on the line too
    sized = ONE_LINE.replace("h = h / (n + 1)", "h = h[:n]")
    refused = propose(sized, 5, "dynamic_output_shape")
    assert isinstance(refused, NoPatch), refused
