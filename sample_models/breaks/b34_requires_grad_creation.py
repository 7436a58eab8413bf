"""A tensor created with requires_grad=True inside forward.

Torch pins this break in its graph-break registry (GB0225).
Breaks at line 12 (GB0225).
"""

import torch


def forward(x):
    h = x * 2
    w = torch.ones(4, requires_grad=True)  # <- graph break
    return h * w


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
