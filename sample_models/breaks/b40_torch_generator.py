"""A torch.Generator created inside forward (using it breaks again, at the next line).

Torch pins this break in its graph-break registry (GB0363).
Breaks at line 12 (GB0363).
"""

import torch


def forward(x):
    h = x * 2
    gen = torch.Generator()  # <- graph break
    noise = torch.rand(4, generator=gen)
    return h + noise


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
