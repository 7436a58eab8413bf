"""A closure that reads a variable before it is assigned (the NameError is caught).

Torch pins this break in its graph-break registry (GB0091).
Breaks at line 17 (GB0091).
"""

import torch


def forward(x):
    h = x * 2

    def scale():
        return factor

    try:
        h = h * scale()  # <- graph break
    except NameError:
        pass
    factor = 2
    return h + factor


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
