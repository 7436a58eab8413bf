"""`keep_tensor` (fixes/patches/keep_tensor.py): `.item()`, `float(t)` and `.tolist()`
whose value only meets tensors kept a tensor; refused where the number is used as one."""

from __future__ import annotations

from compilediag.fixes.patches import NoPatch, Patch, propose

HEAD = "import torch\n\n\n"


def test_item_kept_a_0d_tensor() -> None:
    before = HEAD + "def forward(x, w):\n    scale = x.abs().max().item()\n    return w * scale\n"
    p = propose(before, 5, "item")
    assert isinstance(p, Patch)
    assert p.text == HEAD + "def forward(x, w):\n    scale = x.abs().max()\n    return w * scale\n"
    assert p.what == "`x.abs().max().item()` kept a 0-d tensor (no .item())"


def test_float_of_a_tensor_kept_a_tensor() -> None:
    p = propose(HEAD + "def forward(x, w):\n    return w * float(x.mean()) + x\n", 5, "item")
    assert isinstance(p, Patch)
    assert p.text == HEAD + "def forward(x, w):\n    return w * x.mean() + x\n"
    assert p.what == "`float(x.mean())` kept as the 0-d tensor `x.mean()` (no float())"


def test_float_of_a_numpy_value_is_refused() -> None:
    """#76 (5): dropping float() around a NumPy value keeps NumPy's scalar (numpy.float32 in
    eager), no tensor: refused, and said why."""
    for inner in ("x.mean().numpy()", "x.detach().cpu().numpy()[0]", "np.linalg.norm(a)"):
        source = (
            "import numpy as np\n"
            + HEAD
            + f"def forward(x, a, w):\n    return w * float({inner})\n"
        )
        p = propose(source, 6, "item")
        assert isinstance(p, NoPatch), inner
        assert p.why == f"`{inner}` is a NumPy value, not a tensor: no tensor to keep"


def test_tolist_read_element_by_element_and_summed_stays_the_tensor() -> None:
    before = HEAD + "def forward(x, w):\n    v = x.tolist()\n    return w * v[0] + w * sum(v)\n"
    p = propose(before, 5, "tolist")
    assert isinstance(p, Patch)
    assert p.text == HEAD + "def forward(x, w):\n    v = x\n    return w * v[0] + w * v.sum()\n"
    assert p.what == "`v` kept a tensor (no .tolist()); its elements are 0-d tensors"


def test_a_number_used_as_a_count_is_refused() -> None:
    before = HEAD + (
        "def forward(x):\n    n = x.sum().int().item()\n    for _ in range(n):\n"
        "        x = x + 1\n    return x\n"
    )
    p = propose(before, 5, "item")
    assert isinstance(p, NoPatch)
    assert p.why == (
        "line 6: `n` is given to range(), which takes a Python number; as a tensor it would change "
        "what that line does"
    )


def test_a_list_used_whole_is_refused() -> None:
    """The use is shown with its call (an eleventh look read "`counts` is used as a list
    (`counts`)", for `len(counts)`)."""
    before = HEAD + "def forward(x, w):\n    v = x.tolist()\n    return w * max(v)\n"
    p = propose(before, 5, "tolist")
    assert isinstance(p, NoPatch)
    assert p.why == "line 6: `v` is used as a list (`max(v)`), not element by element"


def test_a_lists_length_is_the_tensors() -> None:
    """A sixteenth look: `counts = t.tolist()` read by `len(counts)` was refused; the
    tensor's len() is the list's (torch: the same number, for 1-d and 2-d alike)."""
    import torch

    before = HEAD + "def forward(x, w):\n    v = x.tolist()\n    return w * len(v)\n"
    p = propose(before, 5, "tolist")
    assert isinstance(p, Patch), p
    assert p.text == HEAD + "def forward(x, w):\n    v = x\n    return w * len(v)\n"
    for t in (torch.arange(5), torch.ones(3, 4)):
        assert len(t) == len(t.tolist())


def test_int_of_a_tensor_is_refused_with_what_it_does() -> None:
    """A tenth look: `int(h.sum())` is the break, and the refusal read "no .item(), float()
    or .tolist() on the line". int() truncates a fraction, a tensor kept in its place would
    not (torch agrees: int(t) of 2.7 is 2, t stays 2.7)."""
    import torch

    p = propose(HEAD + "def forward(x, h):\n    return x * int(h.sum())\n", 5, "item")
    assert isinstance(p, NoPatch)
    assert p.why == (
        "`int(h.sum())`: int() makes a Python int; where it is read as one (a size, a range, "
        "an index) a tensor in its place is read there too, and of a float it truncates the "
        "fraction (no patch for int())"
    )
    t = torch.tensor(2.7)
    assert int(t) != t.item()


def test_a_list_read_at_a_variable_index_is_refused_in_words() -> None:
    """A twentieth look read "`counts[i]` is not one element": the refusal names what the
    patch needs (a number written as the index, or sum())."""
    before = (
        HEAD + "def forward(x, w):\n    counts = x.tolist()\n    out = w\n"
        "    for i in range(2):\n        out = out * counts[i]\n    return out\n"
    )
    p = propose(before, 5, "tolist")
    assert isinstance(p, NoPatch)
    assert p.why.startswith("line 8: `counts[i]` reads the list at an index that is not a number")
