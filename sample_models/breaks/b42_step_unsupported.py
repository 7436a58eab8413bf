"""torch._dynamo.step_unsupported(): a debugging break that skips the rest of the function.

After PyTorch's test_error_messages.py::test_step_graph_break.
Breaks at line 13 (GB4636).
"""

import torch


def forward(x):
    h = x + 1
    h = h + 2
    torch._dynamo.step_unsupported()  # <- graph break
    return h + 4


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
