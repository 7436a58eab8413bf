"""exec() of a code string.

After PyTorch's test_error_messages.py::test_unsupported_builtin.
Breaks at line 13 (GB0059).
"""

import torch


def forward(x):
    h = x * 2
    scope = {}
    exec("k = 3", scope)  # <- graph break
    return h + scope["k"]


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
