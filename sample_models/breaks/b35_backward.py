"""Tensor.backward() inside the compiled function.

Torch pins this break in its graph-break registry (GB0123).
Breaks at line 19 (GB0123).
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        with torch.enable_grad():
            loss = (self.w * x).sum()
            loss.backward()  # <- graph break
        return x + 1


def get_model():
    return Model()


def get_inputs():
    return (torch.randn(4),)
