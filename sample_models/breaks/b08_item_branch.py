""".item() used in Python control flow: capture_scalar_outputs alone would move the break
to the `if`.

After PyTorch's test_error_messages.py::test_data_dependent_branching_fullgraph.
Breaks at line 13 (GB0124).
"""

import torch


def forward(x):
    h = x * 2
    if h.sum().item() > 0:  # <- graph break
        return h + 1
    return h - 1


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4, 4),)
