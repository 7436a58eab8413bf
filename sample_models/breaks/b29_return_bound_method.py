"""Returning a bound method of an object made inside the compiled function.

After PyTorch's test_error_messages.py::test_reconstruction_failure.
Breaks at line 17 (GB0092).
"""

import torch


class Scaler:
    def apply(self, t):
        return t * 2


def forward(x):
    h = x * 2
    return h, Scaler().apply  # <- graph break


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
