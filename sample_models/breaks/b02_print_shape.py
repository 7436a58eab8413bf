"""A print of `h.shape`: torch.Size is not an argument Dynamo can defer, so adding print to
reorderable_logging_functions does not help.

After PyTorch's test_error_messages.py::test_unsupported_builtin.
Breaks at line 13 (GB0059).
"""

import torch


def forward(x):
    h = x * 2
    print("hidden", h.shape)  # <- graph break
    return h + 1


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4, 4),)
