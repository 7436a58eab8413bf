"""`numpy_twin` (fixes/patches/numpy_twin.py): NumPy on a tensor's copy becomes the torch
function with the same result; only exact twins and arguments."""

from __future__ import annotations

from compilediag.fixes.patches import NoPatch, Patch, propose

HEAD = "import numpy as np\nimport torch\n\n\n"


def test_mean_with_axis_and_keepdims_and_the_conversion_back() -> None:
    before = HEAD + (
        "def forward(x):\n    m = np.mean(x.numpy(), axis=0, keepdims=True)\n"
        "    return x - torch.from_numpy(m)\n"
    )
    p = propose(before, 6, "numpy")
    assert isinstance(p, Patch)
    assert p.text == HEAD + (
        "def forward(x):\n    m = torch.mean(x, dim=0, keepdim=True)\n    return x - m\n"
    )
    assert p.what == "np.mean on the tensor's NumPy copy → torch.mean"


def test_lexsort_gets_its_helper_once() -> None:
    before = HEAD + "def forward(a):\n    order = np.lexsort([a.numpy()])\n    return a[order]\n"
    p = propose(before, 6, "numpy")
    assert isinstance(p, Patch)
    assert "    order = _compilediag_lexsort([a])\n" in p.text
    assert p.text.count("def _compilediag_lexsort(keys):") == 1
    assert p.text.endswith("    return order\n")


def test_the_length_of_a_tensors_bytes_is_its_size_in_bytes() -> None:
    before = HEAD + "def forward(x):\n    raw = x.numpy().tobytes()\n    return x * len(raw)\n"
    p = propose(before, 6, "numpy")
    assert isinstance(p, Patch)
    assert p.text == HEAD + (
        "def forward(x):\n    raw_nbytes = x.numel() * x.element_size()\n"
        "    return x * raw_nbytes\n"
    )


def test_functions_and_arguments_without_an_exact_twin_are_refused() -> None:
    p = propose(HEAD + "def forward(x):\n    return np.fft(x.numpy())\n", 6, "numpy")
    assert isinstance(p, NoPatch) and p.why == "np.fft has no torch twin compilediag knows"
    p = propose(HEAD + "def forward(x):\n    return np.sum(x.numpy(), dtype=float)\n", 6, "numpy")
    assert isinstance(p, NoPatch) and p.why == "np.sum is called with dtype"
