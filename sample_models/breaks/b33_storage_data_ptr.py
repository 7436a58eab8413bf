"""A pointer read (untyped_storage().data_ptr()) in forward.

After PyTorch's test_error_messages.py::test_super_call_method (unsupported method call).
Breaks at line 12 (GB0156).
"""

import torch


def forward(x, y):
    h = x * 2
    shared = x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()  # <- graph break
    return h + shared


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4), torch.randn(4))
