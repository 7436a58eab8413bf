"""warnings.warn in forward: a C builtin (`_warnings.warn`) Dynamo skips.

After PyTorch's test_error_messages.py::test_warnings.
Breaks at line 15 (GB0007).
"""

import warnings

import torch


def forward(x):
    h = x * 2
    if h.shape[0] > 2:
        warnings.warn("large batch", stacklevel=2)  # <- graph break
    return h + 1


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4, 4),)
