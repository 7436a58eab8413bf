"""torch.autograd.grad inside the compiled function.

Torch pins this break in its graph-break registry (GB9186).
Breaks at line 19 (GB9186).
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
            (g,) = torch.autograd.grad(loss, self.w)  # <- graph break
        return x + g


def get_model():
    return Model()


def get_inputs():
    return (torch.randn(4),)
