"""A bfloat16 chain of pointwise ops.

Eager rounds to bfloat16 after every op; Inductor computes the chain in float32 and rounds
once. Outputs differ from eager, and compiled is the closer to a float64 reference.
"""

import torch


def chain(x):
    y = x * 1.7 + 0.3
    y = torch.sin(y) * y
    y = y * y - x
    y = torch.exp(y * 0.1) + y
    return y / 3.1


def get_model():
    return chain


def get_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(64, 64, generator=g).to(torch.bfloat16),)
