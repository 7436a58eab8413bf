"""str() of a tensor.

After PyTorch's test_error_messages.py::test_unsupported_builtin.
Breaks at line 12 (GB0059; 2.14: GB0569).
"""

import torch


def forward(x):
    h = x * 2
    text = str(h)  # <- graph break
    return h + len(text)


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
