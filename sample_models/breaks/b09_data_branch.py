"""An `if` on a tensor value.

After PyTorch's test_error_messages.py::test_data_dependent_branching_gb.
Breaks at line 12 (GB0170).
"""

import torch


def forward(x):
    h = x * 2
    if h.mean() > 0:  # <- graph break
        h = h - 1
    return h.relu()


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4, 4),)
