""".item() whose value is used as a number (not in control flow).

After PyTorch's test_graph_break_messages.py::test_data_dependent_operator.
Breaks at line 12 (GB0124).
"""

import torch


def forward(x):
    h = x * 2
    scale = h.abs().max().item()  # <- graph break
    return h / scale


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4, 4),)
