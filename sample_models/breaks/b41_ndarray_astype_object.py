"""ndarray.astype(object): no torch dtype for Python objects.

Torch pins this break in its graph-break registry (GB0250).
Breaks at line 12 (GB0250).
"""

import torch


def forward(x):
    h = x * 2
    boxed = h.numpy().astype(object)  # <- graph break
    return h + 1, boxed


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
