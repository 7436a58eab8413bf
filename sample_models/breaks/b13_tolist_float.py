"""Tensor.tolist() on a float tensor.

Torch pins this break in its graph-break registry (GB0109).
Breaks at line 12 (GB0109).
"""

import torch


def forward(x):
    h = x * 2
    values = h.tolist()  # <- graph break
    return h + values[0]


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
