"""A graph break inside a for loop: Dynamo skips the whole frame (GB7000 follows).

After PyTorch's test_error_messages.py::test_graph_break_in_loop.
Breaks at line 13 (GB0025).
"""

import torch


def forward(x):
    h = x * 2
    for _ in range(2):
        torch._dynamo.graph_break()  # <- graph break
        h = h + 1
    return h


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
