"""copy.deepcopy of a tensor.

Torch pins this break in its graph-break registry (GB4198).
Breaks at line 14 (GB4198).
"""

import copy

import torch


def forward(x):
    h = x * 2
    saved = copy.deepcopy(h)  # <- graph break
    return h + saved


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
