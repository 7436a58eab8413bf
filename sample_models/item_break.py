"""`.item()` turns a tensor into a Python number. Expected: 1 graph break at line 15,
cause `item`."""

import torch
from torch import nn


class Normalize(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        y = self.proj(x)
        scale = y.abs().max().item()  # a Python float: the graph must end to produce it
        return y / (scale + 1e-6)


def get_model():
    return Normalize()


def get_inputs():
    return (torch.randn(4, 16),)
