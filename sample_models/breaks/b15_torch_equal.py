"""torch.equal returns a Python bool computed from tensor data.

After PyTorch's test_error_messages.py::test_data_dependent_operator2.
Breaks at line 12 (GB0033).
"""

import torch


def forward(x, y):
    h = x * 2
    if torch.equal(h, y):  # <- graph break
        return h
    return h + y


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4), torch.randn(4))
