"""sorted() over a list of tensors (tensor keys).

After PyTorch's test_error_messages.py::test_sort_with_nonconstant_keys.
Breaks at line 12 (GB0207).
"""

import torch


def forward(x):
    h = x * 2
    parts = sorted([h[0], h[1], h[2]])  # <- graph break
    return parts[0] + h


def get_model():
    return forward


def get_inputs():
    return (torch.randn(3),)
