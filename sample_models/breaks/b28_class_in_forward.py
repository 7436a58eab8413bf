"""A class statement inside forward.

After PyTorch's test_error_messages.py::test_load_build_class.
Breaks at line 13 (GB8977).
"""

import torch


def forward(x):
    h = x * 2

    class Box:  # <- graph break
        value = 1

    return h + Box.value


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
