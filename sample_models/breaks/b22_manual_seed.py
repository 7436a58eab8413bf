"""torch.manual_seed in forward: a torch function Dynamo does not trace.

After PyTorch's test_error_messages.py::test_skipfile_dynamo_call.
Breaks at line 12 (GB0007).
"""

import torch


def forward(x):
    h = x * 2
    torch.manual_seed(0)  # <- graph break
    return h + torch.rand(4)


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
