"""`nonzero` has an output size that depends on the data. Expected: 1 graph break at
line 15, cause `dynamic_output_shape`."""

import torch
from torch import nn


class Sparse(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        y = self.proj(x)
        idx = torch.nonzero(y > 0)  # data-dependent number of rows
        return y.sum() + idx.shape[0]


def get_model():
    return Sparse()


def get_inputs():
    return (torch.randn(4, 16),)
