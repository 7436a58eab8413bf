"""Tensor.tolist() on an integer tensor: each element is a data-dependent scalar
(aten._local_scalar_dense).

After PyTorch's test_graph_break_messages.py::test_data_dependent_operator2.
Breaks at line 13 (GB0033).
"""

import torch


def forward(x):
    h = x * 2
    counts = (h > 0).int().tolist()  # <- graph break
    return h + sum(counts)


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
