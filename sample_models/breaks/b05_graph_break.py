"""An explicit torch._dynamo.graph_break().

After PyTorch's test_error_messages.py::test_dynamo_graph_break_fn.
Breaks at line 12 (GB0025).
"""

import torch


def forward(x):
    h = x.sin()
    torch._dynamo.graph_break()  # <- graph break
    return h.cos()


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
