"""A Python `if` on a tensor value. Expected: 1 graph break at line 15, cause
`data_dependent_branch` (GB0170 on torch 2.13)."""

import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        y = self.proj(x)
        if y.mean() > 0:  # the branch depends on data: Dynamo must stop the graph here
            y = y * 2
        return y.tanh()


def get_model():
    return Gate()


def get_inputs():
    return (torch.randn(4, 16),)
