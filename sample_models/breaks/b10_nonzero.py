"""torch.nonzero: output size depends on the data.

After PyTorch's test_graph_break_messages.py::test_dynamic_shape_operator.
Breaks at line 12 (GB0036).
"""

import torch


def forward(x):
    h = x * 2
    idx = torch.nonzero(h > 0)  # <- graph break
    return h.sum() + idx.shape[0]


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4, 4),)
