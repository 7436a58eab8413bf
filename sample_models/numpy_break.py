"""A round trip through NumPy inside forward. Expected: 1 graph break at line 16,
cause `numpy`."""

import numpy as np
import torch
from torch import nn


class NumpyMix(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        y = self.proj(x)
        clipped = np.clip(y.detach().numpy(), -1.0, 1.0)  # tensor -> ndarray breaks the graph
        return torch.from_numpy(clipped) * 2


def get_model():
    return NumpyMix()


def get_inputs():
    return (torch.randn(4, 16),)
